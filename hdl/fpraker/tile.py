"""FPRaker tile (spec ``docs/specs/fpraker.md`` §4, §5; golden model :mod:`golden.fpraker.tile`).

``rows`` x ``cols`` PEs in the group exponent mode (the paper's Block 1 once per group), with

* one term encoder of ``lanes`` lanes per column (``col<c>.encoder``), shared by the column's
  PEs under one of two protocols (``sync``, §5.3):

  - ``"lockstep"`` (:class:`hdl.fpraker.encoder.TermEncoder`): every PE sees each lane's
    current term; a lane pops its term when every PE has taken it or is done with the lane,
    and drops the rest when every PE is done (the OB signals AND-ed down the column); the
    encoder also tells when a term is a lane's last, which ends the group;
  - ``"independent"`` (:class:`TermMasks`): the encoder holds the group's A mantissas and
    broadcasts every lane's whole term mask (the recoder's digits and signs); each PE picks
    its own terms with a :class:`TermSelector` (``pe<r>_<c>.selector``: per lane a 4-bit
    cursor, the position below the last term the PE took, and the encoder's leading-one "next
    term" logic over the mask bits at or below it), so every PE runs the standalone PE's
    schedule.  A PE raises ``fin`` with the cycle that leaves its lanes exhausted or done and
    then waits; the column's group ends when every PE has ``fin`` (and, with ``share_exp``,
    not before its second cycle);
* one exponent block per two PEs of a column (``xb<c>_<j>``, ``share_exp``), serving row ``2j``
  in the group's first cycle and row ``2j + 1`` in the second: ``E_g`` over the lanes' first
  terms and the PE's accumulator, the narrow per-lane offsets ``delta = E_g - ABe`` (clamped at
  ``kmax + 2``: always out of bounds) and the accumulator aligned to the group grid;
* with ``pipeline = 1``, a register stage after each exponent block (its outputs
  ``xb<c>_<j>.eg``, ``.ag``, ``.delta*`` become registers): the block serves its rows in the same cycles, and each PE
  loads the registered outputs one cycle later (rows start in cycles 2 and 3; the column's
  group lasts until every row has started), which cuts the path from the B buffers through the
  exponent block into the PEs' step; the results are unchanged and every group takes one more
  cycle (:mod:`golden.fpraker.tile`);
* per-row B buffers (``bbuf<r>``) of ``b_buffers + 1`` entries, so that a column may run up to
  ``b_buffers`` groups ahead of the slowest one (§5.2); each PE reads its row's entry of its
  column's current group;
* PEs (``pe<r>_<c>``) without operand latches: registers for the group's ``E_g``, deltas,
  fixed-point sum ``X``, done/taken flags and the ``1.P`` accumulator.  Per cycle
  ``k = delta + t`` (narrow), OB-a, the base min tree and window, the shift-and-reduce block
  (``lanes``, shared with the standalone PE) and ``X += jam(T)``; at the group's end the
  accumulator block (``accumulator``) normalizes ``X`` with the shared rounding block.

Timing equals :func:`golden.fpraker.tile.tile_run` cycle for cycle when every stream is always
valid: a column begins a group at a clock edge (loading its A values into its encoder and
registers) and works on it from the next cycle; it may begin the next group in the last cycle
of the current one.  B group ``s`` enters row ``r``'s buffer at the latest in the edge at which
the first column may begin group ``s``.  ``busy`` is high while some column works, so the count
of busy cycles is the golden ``cycles``.

The ``trace`` port shows, per PE, the lanes processed this cycle (``proc``), the lanes stalled
by the shift window (``shift``), whether the PE has started the group (``started``), under
``sync = "independent"`` whether it finished the group and waits (``waiting``), and per column
whether it works on a group (``working``), for the testbench's stall-count check.

The lock-step tile's Verilog does not depend on the independent protocol's blocks: they are
built only when ``sync = "independent"``.

Interleaved GEMMs (``contexts = C > 1``): the C-slow tile
----------------------------------------------------------
The tile described above, transformed by :func:`hdl.common.cslow.c_slow`: every register is a
chain of ``C`` registers, and the tile holds ``C`` independent GEMMs.  Cycle ``t`` after reset
serves GEMM ``t mod C`` (the output ``slot``), which sees the one-context tile's cycle
``t // C``: that cycle's streams, ``out``, ``busy``, ``trace`` and ``error`` are its own, in the
same cycle.  Every GEMM takes the one-context tile's cycles, ``C`` times apart, so the tile does
the same work per cycle as the one-context tile.  A reset must last at least ``C`` cycles (it
enters each register chain at its first register).  The gain is in the clock: a retiming synthesis
(``trainfab area`` retimes every configuration with ``contexts > 1``) moves the chains'
registers into the tile's loops (the term control, the B-buffer pointer, the group boundary's
``EACC_LAG`` loop), each of which then holds ``C`` registers.  ``error`` is one flag per GEMM
(a register like the others): it rises in the cycles of the GEMM that saw the bad input.

The per-PE blocks (:class:`~hdl.fpraker.tile_pe.ExponentBlock`, the PE and its accumulator and
term selector) are in :mod:`hdl.fpraker.tile_pe`.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for

from golden.common import BF16
from golden.fpraker import EncoderConfig
from golden.fpraker.tile import TileConfig

from ..common.arith import tree_reduce
from ..common.signatures import TileSignature
from ..common.cslow import c_slow
from .encoder import DIGITS, TermEncoder, recode_digits
from .tile_pe import BF, ExponentBlock, TilePE


class TermMasks(wiring.Component):
    """A column's term encoder under ``sync = "independent"`` (spec §5.3 [C']): it broadcasts
    every lane's whole term mask to the column's PEs, whose :class:`~hdl.fpraker.tile_pe.TermSelector` s pick their
    own terms.  It holds the group's A mantissas (7 bits per lane, loaded with the group) and
    recodes them combinationally (:func:`hdl.fpraker.encoder.recode_digits`); the masks stay
    constant while the column works on the group.

    Ports
    -----
    load : In(1)
        Register ``man`` at this edge (the column begins a group).
    man : In(7) array of ``lanes``
    zero : In(lanes)
        The lanes whose registered A is zero or denormal (no terms).
    digits, negs : Out(9) array
        Per lane the term mask (bit ``j`` = the term at ``tp = 8 - j``) and its signs.
    valid, lead : Out(lanes)
        Per lane: the mask has a term; its first term is ``2**+1`` (``tp = 0``, the exponent
        block's CSD carry).
    """

    def __init__(self, lanes: int, encoding: str):
        self.lanes, self.encoding = lanes, encoding
        super().__init__({
            "load": In(1), "man": In(7).array(lanes), "zero": In(lanes),
            "digits": Out(DIGITS).array(lanes), "negs": Out(DIGITS).array(lanes),
            "valid": Out(lanes), "lead": Out(lanes),
        })

    def elaborate(self, platform):
        m = Module()
        for i in range(self.lanes):
            man = Signal(7, name=f"man{i}")
            with m.If(self.load):
                m.d.sync += man.eq(self.man[i])
            digits, negs = recode_digits(m, Cat(man, 1), self.encoding, name=f"lane{i}_")
            m.d.comb += [self.digits[i].eq(Mux(self.zero[i], 0, digits)),
                         self.negs[i].eq(negs), self.valid[i].eq(self.digits[i].any()),
                         self.lead[i].eq(self.digits[i][DIGITS - 1])]
        return m


class TileColumn(wiring.Component):
    """A column's A side: the stream's group registers (exponents, signs, clear), the shared
    term encoder and the group control (first/second/last cycle, group counters).

    Ports
    -----
    a : In(tile_a_stream) payload/valid (``ready`` is driven by the tile as ``begin``)
    begin : In(1)
        The column begins its next group at this edge (the tile's synchronization decision).
    taken_all, done_all : In(lanes)
        ``sync = "lockstep"``: per lane, every PE of the column has taken it or is done / is
        done (after this cycle).
    fin_all : In(1)
        ``sync = "independent"``: every PE of the column has finished the group.
    busy, first, second, last, clear : Out(1)
        ``first``/``second``: the group's first/second cycle.
    third : Out(1)
        Only with ``pipeline`` and ``share_exp``: the group's third cycle (the odd rows start).
    a_exp : Out(8) array; a_sign : Out(lanes)
    valid, tp, neg, advance
        ``sync = "lockstep"``: the encoder's current terms (``neg``: the term's sign times
        A's sign) and pops.
    valid, lead : Out(lanes); digits, negs : Out(9) array
        ``sync = "independent"``: the :class:`TermMasks` broadcast (lanes with terms, lanes
        whose first term is ``2**+1``, the term masks and their signs times A's sign).
    free : Out(1)
        The column may begin a group at this edge as far as it is concerned (idle or last).
    error : Out(1)
        Sticky: the encoder saw a significand without its hidden bit (never here; constant 0
        under ``sync = "independent"``, whose encoder inserts the hidden bit itself).
    """

    def __init__(self, cfg: TileConfig):
        self.cfg = cfg
        L = cfg.lanes
        from ..common.signatures import tile_a_stream
        if cfg.sync == "independent":
            sync = {"fin_all": In(1)}
            terms = {"valid": Out(L), "lead": Out(L), "digits": Out(DIGITS).array(L),
                     "negs": Out(DIGITS).array(L)}
        else:
            sync = {"taken_all": In(L), "done_all": In(L)}
            terms = {"valid": Out(L), "tp": Out(4).array(L), "neg": Out(L), "advance": Out(L)}
        third = {"third": Out(1)} if cfg.pipeline and cfg.share_exp else {}
        super().__init__({
            "a": In(tile_a_stream(BF16, L)), "begin": In(1), **sync,
            "busy": Out(1), "first": Out(1), "second": Out(1), **third, "last": Out(1),
            "clear": Out(1), "a_exp": Out(8).array(L), "a_sign": Out(L), **terms,
            "free": Out(1), "error": Out(1),
        })

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        L = cfg.lanes
        pay = self.a.payload
        # a group lasts until every row has started it (min_cycles)
        if not cfg.pipeline:
            min_ok = ~self.first if cfg.share_exp else Const(1)
        else:
            min_ok = ~(self.first | self.second) if cfg.share_exp else ~self.first
        if cfg.sync == "independent":
            enc = m.submodules.encoder = TermMasks(L, cfg.encoding)
            m.d.comb += [enc.load.eq(self.begin),
                         enc.zero.eq(Cat(*(self.a_exp[i] == 0 for i in range(L))))]
            m.d.comb += [enc.man[i].eq(pay.a[i].man) for i in range(L)]
            m.d.comb += [self.valid.eq(enc.valid), self.lead.eq(enc.lead), self.error.eq(0)]
            m.d.comb += [self.digits[i].eq(enc.digits[i]) for i in range(L)]
            m.d.comb += [self.negs[i].eq(enc.negs[i] ^ self.a_sign[i].replicate(DIGITS))
                         for i in range(L)]
            # the group ends when every PE of the column has finished it
            m.d.comb += [self.last.eq(self.busy & self.fin_all & min_ok),
                         self.free.eq(~self.busy | self.last)]
            self._group_registers(m)
            return m
        enc = m.submodules.encoder = TermEncoder(EncoderConfig(L, cfg.encoding))
        t = enc.terms
        m.d.comb += [self.valid.eq(t.valid), self.neg.eq(t.neg ^ self.a_sign),
                     self.error.eq(enc.error)]
        m.d.comb += [self.tp[i].eq(t.tp[i]) for i in range(L)]
        for i in range(L):
            m.d.comb += [enc.load[i].eq(self.begin), enc.sig[i].eq(Cat(pay.a[i].man, 1)),
                         enc.zero[i].eq(pay.a[i].exp == 0)]
        drop = Signal(L)
        m.d.comb += [
            drop.eq(Mux(self.busy, self.done_all, 0)),
            self.advance.eq(Mux(self.busy, t.valid & self.taken_all, 0)),
            t.advance.eq(self.advance), t.drop.eq(drop),
        ]
        empty_next = Signal()
        m.d.comb += empty_next.eq((~t.valid | drop | (self.advance & t.last)).all())
        m.d.comb += [self.last.eq(self.busy & empty_next & min_ok),
                     self.free.eq(~self.busy | self.last)]
        self._group_registers(m)
        return m

    def _group_registers(self, m):
        """The group's A exponents, signs and ``clear``, and the first/second/busy flags."""
        L = self.cfg.lanes
        pay = self.a.payload
        with m.If(self.begin):
            m.d.sync += [self.busy.eq(1), self.first.eq(1), self.second.eq(0),
                         self.clear.eq(pay.clear)]
            if hasattr(self, "third"):
                m.d.sync += self.third.eq(0)
            m.d.sync += [self.a_exp[i].eq(pay.a[i].exp) for i in range(L)]
            m.d.sync += [self.a_sign[i].eq(pay.a[i].sign) for i in range(L)]
        with m.Else():
            m.d.sync += [self.first.eq(0), self.second.eq(self.first)]
            if hasattr(self, "third"):
                m.d.sync += self.third.eq(self.second)
            with m.If(self.last):
                m.d.sync += self.busy.eq(0)


class BBuffer(wiring.Component):
    """A row's B buffer: ``b_buffers + 1`` entries of one group, written from the row's stream,
    read by every column at the entry of its current group.

    Ports
    -----
    b : In(tile_b_stream) (``ready`` = ``allow``)
    allow : In(1)
        The entry of the stream's next group is free at this edge.
    wptr : Out(range(entries))
    rptr : In(range(entries)) array of ``cols``
    rd : Out(bf16 array of lanes) array of ``cols``
    """

    def __init__(self, cfg: TileConfig):
        self.cfg = cfg
        self.entries = cfg.b_buffers + 1
        L = cfg.lanes
        from ..common.signatures import tile_b_stream
        group = data.ArrayLayout(BF, L)
        super().__init__({
            "b": In(tile_b_stream(BF16, L)), "allow": In(1),
            "rptr": In(range(self.entries)).array(cfg.cols),
            "rd": Out(group).array(cfg.cols),
        })

    def elaborate(self, platform):
        m = Module()
        n = self.entries
        group = data.ArrayLayout(BF, self.cfg.lanes)
        ent = [Signal(group, name=f"entry{e}") for e in range(n)]
        wptr = Signal(range(n))
        m.d.comb += self.b.ready.eq(self.allow)
        with m.If(self.b.valid & self.allow):
            for e in range(n):
                with m.If(wptr == e):
                    m.d.sync += ent[e].eq(self.b.payload.b)
            m.d.sync += wptr.eq(Mux(wptr == n - 1, 0, wptr + 1))
        for c in range(self.cfg.cols):
            if n == 1:
                m.d.comb += self.rd[c].eq(ent[0])
            else:
                sel = ent[0]
                for e in range(1, n):
                    sel = Mux(self.rptr[c] == e, ent[e], sel)
                m.d.comb += self.rd[c].eq(sel)
        return m


class TileTraceSignature(wiring.Signature):
    """Per-cycle activity of the tile for testbenches: ``proc``/``shift`` (lanes) and
    ``started`` per PE (index ``r * cols + c``), ``working`` per column; with ``sync =
    "independent"`` also ``waiting`` per PE (it finished the group before this cycle and waits
    for its column's other PEs)."""

    def __init__(self, cfg: TileConfig):
        n = cfg.rows * cfg.cols
        wait = {"waiting": Out(n)} if cfg.sync == "independent" else {}
        super().__init__({"proc": Out(cfg.lanes).array(n), "shift": Out(cfg.lanes).array(n),
                          "started": Out(n), **wait, "working": Out(cfg.cols)})


class Tile(wiring.Component):
    """The FPRaker tile (registry ``fpraker.tile``); see the module docstring.

    Parameters
    ----------
    cfg : golden.fpraker.tile.TileConfig
        ``exp_mode`` must be ``"group"`` (the paper's Block 1; the RTL has no step mode tile).
        ``sync`` picks the column protocol (module docstring); both match the golden model
        cycle for cycle.

    Ports
    -----
    a, b, out, busy, error : :class:`hdl.common.signatures.TileSignature`
    trace : Out(TileTraceSignature)
    """

    def __init__(self, cfg: TileConfig = TileConfig()):
        if cfg.exp_mode != "group":
            raise ValueError(f"fpraker.tile: exp_mode={cfg.exp_mode!r}: the tile RTL implements "
                             "the group exponent mode (the paper's); the golden model has both")
        self.cfg = cfg
        sig = TileSignature(cfg.rows, cfg.cols, cfg.lanes)
        slot = {"slot": Out(range(cfg.contexts))} if cfg.contexts > 1 else {}
        super().__init__({**sig.members, "trace": Out(TileTraceSignature(cfg)), **slot})

    def elaborate(self, platform):
        if self.cfg.contexts == 1:
            return self._tile()
        # the C-slow tile; its context counter is outside the transformation
        C = self.cfg.contexts
        fragment = c_slow(self._tile(), C, platform)
        fragment.add_statements("sync", self.slot.eq(Mux(self.slot == C - 1, 0, self.slot + 1)))
        return fragment

    def _tile(self):
        """The one-context tile (module docstring)."""
        cfg = self.cfg
        m = Module()
        R, C, L, N = cfg.rows, cfg.cols, cfg.lanes, cfg.b_buffers
        indep = cfg.sync == "independent"
        W = bits_for(2 * (N + 2)) + 1             # group counters, compared modulo 2**W

        cols = [TileColumn(cfg) for _ in range(C)]
        for c, col in enumerate(cols):
            m.submodules[f"col{c}"] = col
        bufs = [BBuffer(cfg) for _ in range(R)]
        for r, buf in enumerate(bufs):
            m.submodules[f"bbuf{r}"] = buf
        pes = [[TilePE(cfg) for _ in range(C)] for _ in range(R)]
        for r in range(R):
            for c in range(C):
                m.submodules[f"pe{r}_{c}"] = pes[r][c]

        # ---- group counters: begun (g) and finished (f) per column, written (wr) per row
        g = [Signal(W, name=f"g{c}") for c in range(C)]
        f = [Signal(W, name=f"f{c}") for c in range(C)]
        wr = [Signal(W, name=f"wr{r}") for r in range(R)]
        nptr = [Signal(range(N + 1), name=f"nptr{c}") for c in range(C)]
        ptr = [Signal(range(N + 1), name=f"ptr{c}") for c in range(C)]

        def diff(a, b, name):
            d = Signal(signed(W), name=name)
            m.d.comb += d.eq((a - b)[:W])
            return d

        f_next = []
        for c, col in enumerate(cols):
            fn = Signal(W, name=f"f_next{c}")
            m.d.comb += fn.eq(f[c] + col.last)
            f_next.append(fn)
        # B entry of row r's next group is free once every column is done with the group that
        # held it (N + 1 groups earlier)
        writing = []
        for r, buf in enumerate(bufs):
            allow = Signal(name=f"allow{r}")
            m.d.comb += allow.eq(Cat(*(diff(wr[r], f_next[c], f"wf{r}_{c}") <= N
                                       for c in range(C))).all())
            m.d.comb += [buf.b.payload.eq(self.b[r].payload), buf.b.valid.eq(self.b[r].valid),
                         buf.allow.eq(allow), self.b[r].ready.eq(buf.b.ready)]
            wv = Signal(name=f"writing{r}")
            m.d.comb += wv.eq(self.b[r].valid & allow)
            writing.append(wv)
            with m.If(wv):
                m.d.sync += wr[r].eq(wr[r] + 1)
        # a column may begin when it is free, its A group is valid and every row holds (or
        # writes now) the B group
        pre = []
        for c, col in enumerate(cols):
            avail = []
            for r in range(R):
                dwg = diff(wr[r], g[c], f"wg{r}_{c}")
                avail.append((dwg >= 1) | ((dwg == 0) & writing[r]))
            p = Signal(name=f"pre{c}")
            m.d.comb += p.eq(col.free & self.a[c].valid & Cat(*avail).all())
            pre.append(p)
        begin = []
        for c, col in enumerate(cols):
            b = Signal(name=f"begin{c}")
            if N == 0:
                m.d.comb += b.eq(Cat(*pre).all())
            else:
                ahead = [diff(g[c], g[o], f"ahead{c}_{o}") for o in range(C)]
                lead = Signal(signed(W), name=f"lead{c}")
                lv, lx = tree_reduce(m, [(Const(1), a) for a in ahead], lambda a, b: a >= b,
                                     signed(W), f"leadmax{c}")
                m.d.comb += lead.eq(lx)
                at_min_ready = Cat(*(~(ahead[o] == N) | pre[o] for o in range(C))).all()
                m.d.comb += b.eq(pre[c] & ((lead < N) | ((lead == N) & at_min_ready)))
            begin.append(b)
            m.d.comb += [col.begin.eq(b), col.a.valid.eq(self.a[c].valid),
                         col.a.payload.eq(self.a[c].payload), self.a[c].ready.eq(b)]
            with m.If(b):
                m.d.sync += [g[c].eq(g[c] + 1), ptr[c].eq(nptr[c]),
                             nptr[c].eq(Mux(nptr[c] == N, 0, nptr[c] + 1))]
            with m.If(col.last):
                m.d.sync += f[c].eq(f[c] + 1)
            for r in range(R):
                m.d.comb += bufs[r].rptr[c].eq(ptr[c])

        # ---- exponent blocks and PEs
        for c, col in enumerate(cols):
            served = list(range(R))
            groups = [served[i:i + 2] for i in range(0, R, 2)] if cfg.share_exp else \
                [[r] for r in served]
            for j, rows in enumerate(groups):
                xb = m.submodules[f"xb{c}_{j}"] = ExponentBlock(cfg)
                second = col.second if len(rows) == 2 else Const(0)
                m.d.comb += [xb.a_exp[i].eq(col.a_exp[i]) for i in range(L)]
                if indep:
                    # each served PE starts from its lanes' first terms
                    m.d.comb += xb.lead.eq(col.lead)
                else:
                    m.d.comb += xb.lead.eq(Cat(*(col.tp[i] == 0 for i in range(L))))
                # with the stage after the exponent block (its registered outputs), a PE loads
                # what the block computed in the cycle before: one cycle after its serve cycle,
                # the pair's skew kept
                serves = ((col.second, col.third if len(rows) == 2 else Const(0))
                          if cfg.pipeline else (col.first, col.second))
                sel = {}
                for n_, r in enumerate(rows):
                    pe = pes[r][c]
                    m.d.comb += [pe.serve.eq(col.busy & serves[n_]), pe.eg_in.eq(xb.eg),
                                 pe.ag_in.eq(xb.ag)]
                    m.d.comb += [pe.delta_in[i].eq(xb.delta[i]) for i in range(L)]
                    sel[n_] = (r, pe)
                (r0, p0) = sel[0]
                (r1, p1) = sel.get(1, sel[0])
                rd0, rd1 = bufs[r0].rd[c], bufs[r1].rd[c]
                pick = second
                m.d.comb += [
                    xb.has.eq(col.valid & ~Mux(pick, Cat(*(rd1[i].exp == 0 for i in range(L))),
                                               Cat(*(rd0[i].exp == 0 for i in range(L))))),
                    xb.acc_zero.eq(Mux(pick, p1.zero_in, p0.zero_in)),
                    xb.acc_sign.eq(Mux(pick, p1.acc.sign, p0.acc.sign)),
                    xb.acc_exp.eq(Mux(pick, p1.acc.exp, p0.acc.exp)),
                    xb.acc_sig.eq(Mux(pick, p1.acc.sig, p0.acc.sig)),
                ]
                m.d.comb += [xb.b_exp[i].eq(Mux(pick, rd1[i].exp, rd0[i].exp))
                             for i in range(L)]
            if indep:
                m.d.comb += col.fin_all.eq(Cat(*(pes[r][c].fin for r in range(R))).all())
            else:
                taken_all = Cat(*(Cat(*(pes[r][c].taken_out[i] | pes[r][c].done_out[i]
                                        for r in range(R))).all() for i in range(L)))
                done_all = Cat(*(Cat(*(pes[r][c].done_out[i] for r in range(R))).all()
                                 for i in range(L)))
                m.d.comb += [col.taken_all.eq(taken_all), col.done_all.eq(done_all)]
            for r in range(R):
                pe = pes[r][c]
                if indep:
                    m.d.comb += [pe.busy.eq(col.busy), pe.first.eq(col.first),
                                 pe.last.eq(col.last), pe.clear.eq(col.clear),
                                 self.trace.waiting[r * C + c].eq(pe.waiting)]
                    m.d.comb += [pe.digits[i].eq(col.digits[i]) for i in range(L)]
                    m.d.comb += [pe.negs[i].eq(col.negs[i]) for i in range(L)]
                else:
                    m.d.comb += [pe.busy.eq(col.busy), pe.first.eq(col.first),
                                 pe.last.eq(col.last), pe.clear.eq(col.clear),
                                 pe.valid.eq(col.valid), pe.neg.eq(col.neg),
                                 pe.advance.eq(col.advance)]
                    m.d.comb += [pe.tp[i].eq(col.tp[i]) for i in range(L)]
                m.d.comb += [pe.b[i].eq(bufs[r].rd[c][i]) for i in range(L)]
                m.d.comb += [self.out[r][c].eq(pe.acc.out),
                             self.trace.proc[r * C + c].eq(pe.proc),
                             self.trace.shift[r * C + c].eq(pe.shift),
                             self.trace.started[r * C + c].eq(pe.started)]
            m.d.comb += self.trace.working[c].eq(col.busy)

        m.d.comb += self.busy.eq(Cat(*(col.busy for col in cols)).any())
        # sticky error: an accepted operand with the all-ones exponent (Inf/NaN)
        bad = []
        for c in range(C):
            bad.append(self.a[c].valid & self.a[c].ready
                       & Cat(*(self.a[c].payload.a[i].exp == 0xFF for i in range(L))).any())
            bad.append(cols[c].error)
        for r in range(R):
            bad.append(self.b[r].valid & self.b[r].ready
                       & Cat(*(self.b[r].payload.b[i].exp == 0xFF for i in range(L))).any())
        with m.If(Cat(*bad).any()):
            m.d.sync += self.error.eq(1)
        return m


__all__ = ["TermMasks", "TileColumn", "BBuffer", "TileTraceSignature", "Tile"]

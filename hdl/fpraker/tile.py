"""FPRaker tile (spec ``docs/specs/fpraker.md`` §4, §5; golden model :mod:`golden.fpraker.tile`).

``rows`` x ``cols`` PEs in the group exponent mode (the paper's Block 1 once per group), with

* one term encoder of ``lanes`` lanes per column (``col<c>.encoder``), shared by the column's
  PEs in lock-step: a lane pops its term when every PE has taken it or is done with the lane,
  and drops the rest when every PE is done (the OB signals AND-ed down the column, §5.3); the
  encoder also tells when a term is a lane's last, which ends the group;
* one exponent block per two PEs of a column (``xb<c>_<j>``, ``share_exp``), serving row ``2j``
  in the group's first cycle and row ``2j + 1`` in the second: ``E_g`` over the lanes' first
  terms and the PE's accumulator, the narrow per-lane offsets ``delta = E_g - ABe`` (clamped at
  ``kmax + 2``: always out of bounds) and the accumulator aligned to the group grid;
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
by the shift window (``shift``), whether the PE has started the group (``started``), and per
column whether it works on a group (``working``), for the testbench's stall-count check.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for

from golden.common import BF16
from golden.common.accumulator import norm_config, read_out_config
from golden.fpraker import EncoderConfig
from golden.fpraker.tile import TileConfig

from ..common.arith import jam_right, tree_reduce
from ..common.formats import layout
from ..common.rounding import Round
from ..common.signatures import AccumulatorSignature, TileSignature
from .encoder import TermEncoder
from .pe import ShiftReduce

BF = layout(BF16)
#: width of a PE's group exponent register: E_g = max(ABe + 1, eacc) fits 10 signed bits
EG_W = 10


def _delta_width(cfg: TileConfig) -> int:
    return bits_for(cfg.kmax + 2)


def _k_width(cfg: TileConfig) -> int:
    return bits_for(cfg.kmax + 1)


def _x_width(cfg: TileConfig) -> int:
    return cfg.frac_bits + cfg.int_bits + 1


class ExponentBlock(wiring.Component):
    """Block 1 once per group for one PE (combinational; a shared block muxes its inputs).

    Ports
    -----
    a_exp : In(8) array; lead : In(lanes); has : In(lanes)
        The column's A exponent fields, lanes whose first term is ``2**+1`` (``tp = 0``), lanes
        presenting a term that the PE is not done with.
    b_exp : In(8) array
        The served PE's B exponent fields.
    acc_zero, acc_sign : In(1); acc_exp : In(signed(10)); acc_sig : In(keep_bits + 1)
        The served PE's accumulator (``acc_zero`` includes a group ``clear``).
    eg : Out(signed(10)); delta : Out(delta width) array; ag : Out(signed(F + int_bits + 1))
    """

    def __init__(self, cfg: TileConfig):
        self.cfg = cfg
        L = cfg.lanes
        super().__init__({
            "a_exp": In(8).array(L), "lead": In(L), "has": In(L), "b_exp": In(8).array(L),
            "acc_zero": In(1), "acc_sign": In(1), "acc_exp": In(signed(10)),
            "acc_sig": In(cfg.keep_bits + 1),
            "eg": Out(signed(EG_W)), "delta": Out(_delta_width(cfg)).array(L),
            "ag": Out(signed(_x_width(cfg))),
        })

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        L, F, P = cfg.lanes, cfg.frac_bits, cfg.keep_bits
        # widths: ABe = Ae + Be - 254 in -252..254 and E_g in -512..511 fit 10 signed bits,
        # E_g - ABe and E_g - eacc 11
        abe = []
        w = []
        for i in range(L):
            a = Signal(signed(EG_W), name=f"abe{i}")
            x = Signal(signed(EG_W), name=f"w{i}")
            m.d.comb += [a.eq(self.a_exp[i] + self.b_exp[i] - 254), x.eq(a + self.lead[i])]
            abe.append(a)
            w.append(x)
        ev, emax = tree_reduce(m, [(self.has[i], w[i]) for i in range(L)]
                               + [(~self.acc_zero, self.acc_exp.as_signed())],
                               lambda a, b: a >= b, signed(EG_W), "emax")
        m.d.comb += self.eg.eq(Mux(ev, emax, 0))
        cap = cfg.kmax + 2
        for i in range(L):
            d = Signal(signed(EG_W + 1), name=f"d{i}")
            m.d.comb += [d.eq(self.eg - abe[i]),
                         self.delta[i].eq(Mux(d > cap, cap, d[:_delta_width(cfg)]))]
        # the acc shift, once per group: E_g >= eacc for a non-zero accumulator
        diff = Signal(signed(EG_W + 1))
        m.d.comb += diff.eq(self.eg - self.acc_exp)
        padded = Signal(_x_width(cfg) - 1)
        m.d.comb += padded.eq(self.acc_sig << (F - P))
        mag = jam_right(m, padded, diff.as_unsigned(), name="acc_jam")
        m.d.comb += self.ag.eq(Mux(self.acc_zero, 0, Mux(self.acc_sign, -mag, mag)))
        return m


class GroupAccumulator(wiring.Component):
    """Block 3: the PE's sum register and accumulator, one register pair for both.

    During a group ``x`` holds the fixed-point sum on the ``2**(E_g - F)`` grid and ``eg`` the
    group exponent; in the group's last cycle ``NORM_RNE(x_in, eg_in)`` (the shared rounding
    block) is written into the same registers, packed as ``{zero, sign, sig}`` in ``x`` and the
    exponent in ``eg``, where it stays until the PE's next group starts: the accumulator and the
    group sum are never alive at once, so they share flip-flops.  ``acc`` unpacks the registers
    (meaningful between groups) and reads them out to bfloat16.

    Ports
    -----
    en : In(1)
        Register ``x_in``/``eg_in`` (or, with ``last``, their normalization).
    last : In(1)
    x_in : In(signed(F + int_bits + 1)); eg_in : In(signed(10))
    x : Out(signed(F + int_bits + 1)); eg : Out(signed(10))
        The registers.
    acc : Out(AccumulatorSignature(keep_bits))
    """

    def __init__(self, cfg: TileConfig):
        self.cfg = cfg
        self.pe = cfg.pe
        XS = _x_width(cfg)
        if XS < cfg.keep_bits + 3:
            raise ValueError(f"fpraker.tile: frac_bits + int_bits + 1 = {XS} cannot hold the "
                             f"packed accumulator ({cfg.keep_bits + 3} bits)")
        super().__init__({"en": In(1), "last": In(1), "x_in": In(signed(XS)),
                          "eg_in": In(signed(EG_W)),
                          "x": Out(signed(XS), init=1 << (cfg.keep_bits + 2)),
                          "eg": Out(signed(EG_W)),
                          "acc": Out(AccumulatorSignature(cfg.keep_bits))})

    def elaborate(self, platform):
        m = Module()
        P = self.cfg.keep_bits
        acc = self.acc
        norm = m.submodules.norm = Round(norm_config(self.pe))
        m.d.comb += [norm.i.sig.eq(self.x_in), norm.i.exp.eq(self.eg_in)]
        with m.If(self.en):
            with m.If(self.last):
                m.d.sync += [self.x.eq(Cat(norm.o.sig, norm.o.sign, norm.o.zero)),
                             self.eg.eq(norm.o.exp)]
            with m.Else():
                m.d.sync += [self.x.eq(self.x_in), self.eg.eq(self.eg_in)]
        m.d.comb += [acc.sig.eq(self.x[:P + 1]), acc.sign.eq(self.x[P + 1]),
                     acc.zero.eq(self.x[P + 2]), acc.exp.eq(self.eg)]
        readout = m.submodules.readout = Round(read_out_config(self.pe))
        m.d.comb += [readout.i.sig.eq(acc.sig), readout.i.exp.eq(acc.exp),
                     readout.i.sign.eq(acc.sign), acc.out.eq(readout.o.bits)]
        return m


class TilePE(wiring.Component):
    """One PE of the tile (group exponent mode; see the module docstring).

    Ports
    -----
    busy, first, last, clear : In(1)
        Column state: working on a group, its first cycle, its last cycle, the group starts a
        new reduction.
    serve : In(1)
        The PE's exponent block serves it this cycle (its first cycle of the group).
    eg_in : In(signed(10)); delta_in : In array; ag_in : In(signed)
        The exponent block's outputs (used when ``serve``).
    valid, tp, neg : the column encoder's terms; a_sign : In(lanes)
    b : In(bf16) array
        The PE's B values of the current group (its row's buffer entry).
    advance : In(lanes)
        The column's encoder pops these lanes at this edge.
    done_out, taken_out : Out(lanes)
        Lanes this PE is done with / has taken, after this cycle.
    zero_in : Out(1)
        The accumulator as the exponent block must see it (zero, or the group clears it).
    proc, shift : Out(lanes); started : Out(1)
    acc : Out(AccumulatorSignature)
    """

    def __init__(self, cfg: TileConfig):
        self.cfg = cfg
        L = cfg.lanes
        super().__init__({
            "busy": In(1), "first": In(1), "last": In(1), "clear": In(1), "serve": In(1),
            "eg_in": In(signed(EG_W)), "delta_in": In(_delta_width(cfg)).array(L),
            "ag_in": In(signed(_x_width(cfg))),
            "valid": In(L), "tp": In(4).array(L), "neg": In(L), "a_sign": In(L),
            "b": In(BF).array(L), "advance": In(L),
            "done_out": Out(L), "taken_out": Out(L), "zero_in": Out(1),
            "proc": Out(L), "shift": Out(L), "started": Out(1),
            "acc": Out(AccumulatorSignature(cfg.keep_bits)),
        })

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        L, KMAX, DMAX = cfg.lanes, cfg.kmax, cfg.dmax
        KW, DW = _k_width(cfg), _delta_width(cfg)

        started = Signal()
        delta = [Signal(DW, name=f"delta{i}") for i in range(L)]
        done = Signal(L)
        taken = Signal(L)

        accu = m.submodules.accumulator = GroupAccumulator(cfg)
        wiring.connect(m, accu.acc, wiring.flipped(self.acc))
        x, eg = accu.x, accu.eg
        m.d.comb += self.zero_in.eq(self.acc.zero | self.clear)

        bzero = Cat(*(self.b[i].exp == 0 for i in range(L)))
        st = Signal()
        done_c = Signal(L)
        taken_c = Signal(L)
        eg_c = Signal(signed(EG_W))
        x_c = Signal(signed(_x_width(cfg)))
        m.d.comb += [
            st.eq(self.busy & (started | self.serve)),
            done_c.eq(Mux(self.first, bzero, done)),
            taken_c.eq(Mux(self.first, 0, taken)),
            eg_c.eq(Mux(self.serve, self.eg_in, eg)),
            x_c.eq(Mux(self.serve, self.ag_in, x)),
            self.started.eq(st),
        ]
        # ---- control: k = delta + t, OB-a, base, window
        elig = Signal(L)
        m.d.comb += elig.eq(Mux(st, self.valid & ~done_c & ~taken_c, 0))
        oob = Signal(L)
        ks = []
        for i in range(L):
            d = Signal(DW, name=f"delta_c{i}")
            kk = Signal(DW + 1, name=f"kk{i}")        # k + 1 = delta + tp
            k = Signal(KW, name=f"k{i}")
            m.d.comb += [d.eq(Mux(self.serve, self.delta_in[i], delta[i])),
                         kk.eq(d + self.tp[i]), oob[i].eq(kk > KMAX + 1), k.eq(kk - 1)]
            ks.append((d, k))
        run = Signal(L)
        m.d.comb += run.eq(elig & ~oob)
        b_valid, b_min = tree_reduce(m, [(run[i], ks[i][1]) for i in range(L)],
                                     lambda a, b: a <= b, unsigned(KW), "kmin")
        base = Signal(KW)
        m.d.comb += base.eq(Mux(b_valid, b_min, 0))
        proc = self.proc
        win = []
        for i in range(L):
            w = Signal(KW, name=f"win{i}")
            m.d.comb += [w.eq(ks[i][1] - base), proc[i].eq(run[i] & (w <= DMAX))]
            win.append(w)
        m.d.comb += self.shift.eq(run & ~proc)

        # ---- Block 2: shift and reduce (the standalone PE's block)
        sr = m.submodules.lanes = ShiftReduce(cfg.pe)
        m.d.comb += [sr.proc.eq(proc), sr.base.eq(base),
                     sr.neg.eq(self.a_sign ^ Cat(*(self.b[i].sign for i in range(L))) ^ self.neg)]
        m.d.comb += [sr.sigb[i].eq(Cat(self.b[i].man, 1)) for i in range(L)]
        m.d.comb += [sr.delta[i].eq(win[i]) for i in range(L)]

        # ---- Block 3: fixed-point sum on the group grid, normalized at the group's end
        x_next = Signal(signed(_x_width(cfg)))
        m.d.comb += [x_next.eq(x_c + sr.sum), accu.x_in.eq(x_next), accu.eg_in.eq(eg_c),
                     accu.en.eq(self.busy & st), accu.last.eq(self.last)]

        # ---- OB-b, done/taken for the column's AND trees
        obb = Signal(L)
        for i in range(L):
            m.d.comb += obb[i].eq(proc[i] & (ks[i][1] >= KMAX))
        m.d.comb += [self.done_out.eq(done_c | (elig & oob) | obb),
                     self.taken_out.eq(taken_c | proc)]
        with m.If(self.busy):
            m.d.sync += [started.eq(st & ~self.last),
                         done.eq(self.done_out), taken.eq(self.taken_out & ~self.advance)]
            m.d.sync += [delta[i].eq(ks[i][0]) for i in range(L)]
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
        Per lane: every PE of the column has taken it or is done / is done (after this cycle).
    busy, first, second, last, clear : Out(1)
    a_exp : Out(8) array; a_sign : Out(lanes)
    terms : Out(valid, tp, neg) of the encoder; advance : Out(lanes)
    free : Out(1)
        The column may begin a group at this edge as far as it is concerned (idle or last).
    error : Out(1)
        Sticky: the encoder saw a significand without its hidden bit (never here).
    """

    def __init__(self, cfg: TileConfig):
        self.cfg = cfg
        L = cfg.lanes
        from ..common.signatures import tile_a_stream
        super().__init__({
            "a": In(tile_a_stream(BF16, L)), "begin": In(1),
            "taken_all": In(L), "done_all": In(L),
            "busy": Out(1), "first": Out(1), "second": Out(1), "last": Out(1),
            "clear": Out(1), "a_exp": Out(8).array(L), "a_sign": Out(L),
            "valid": Out(L), "tp": Out(4).array(L), "neg": Out(L), "advance": Out(L),
            "free": Out(1), "error": Out(1),
        })

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        L = cfg.lanes
        enc = m.submodules.encoder = TermEncoder(EncoderConfig(L, cfg.encoding))
        t = enc.terms
        pay = self.a.payload
        m.d.comb += [self.valid.eq(t.valid), self.neg.eq(t.neg), self.error.eq(enc.error)]
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
        min_ok = ~self.first if cfg.share_exp else Const(1)
        m.d.comb += [self.last.eq(self.busy & empty_next & min_ok),
                     self.free.eq(~self.busy | self.last)]
        with m.If(self.begin):
            m.d.sync += [self.busy.eq(1), self.first.eq(1), self.second.eq(0),
                         self.clear.eq(pay.clear)]
            m.d.sync += [self.a_exp[i].eq(pay.a[i].exp) for i in range(L)]
            m.d.sync += [self.a_sign[i].eq(pay.a[i].sign) for i in range(L)]
        with m.Else():
            m.d.sync += [self.first.eq(0), self.second.eq(self.first)]
            with m.If(self.last):
                m.d.sync += self.busy.eq(0)
        return m


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
    ``started`` per PE (index ``r * cols + c``), ``working`` per column."""

    def __init__(self, cfg: TileConfig):
        n = cfg.rows * cfg.cols
        super().__init__({"proc": Out(cfg.lanes).array(n), "shift": Out(cfg.lanes).array(n),
                          "started": Out(n), "working": Out(cfg.cols)})


class Tile(wiring.Component):
    """The FPRaker tile (registry ``fpraker.tile``); see the module docstring.

    Parameters
    ----------
    cfg : golden.fpraker.tile.TileConfig
        ``exp_mode`` must be ``"group"`` (the paper's Block 1; the RTL has no step mode tile).

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
        super().__init__({**sig.members, "trace": Out(TileTraceSignature(cfg))})

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        R, C, L, N = cfg.rows, cfg.cols, cfg.lanes, cfg.b_buffers
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
                m.d.comb += xb.lead.eq(Cat(*(col.tp[i] == 0 for i in range(L))))
                sel = {}
                for n_, r in enumerate(rows):
                    pe = pes[r][c]
                    serve = col.first if n_ == 0 else col.second
                    m.d.comb += [pe.serve.eq(col.busy & serve), pe.eg_in.eq(xb.eg),
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
            taken_all = Cat(*(Cat(*(pes[r][c].taken_out[i] | pes[r][c].done_out[i]
                                    for r in range(R))).all() for i in range(L)))
            done_all = Cat(*(Cat(*(pes[r][c].done_out[i] for r in range(R))).all()
                             for i in range(L)))
            m.d.comb += [col.taken_all.eq(taken_all), col.done_all.eq(done_all)]
            for r in range(R):
                pe = pes[r][c]
                m.d.comb += [pe.busy.eq(col.busy), pe.first.eq(col.first), pe.last.eq(col.last),
                             pe.clear.eq(col.clear), pe.valid.eq(col.valid), pe.neg.eq(col.neg),
                             pe.a_sign.eq(col.a_sign), pe.advance.eq(col.advance)]
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


__all__ = ["ExponentBlock", "GroupAccumulator", "TilePE", "TileColumn", "BBuffer",
           "TileTraceSignature", "Tile"]

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
from ..common import leading_one
from ..common.cslow import c_slow
from .encoder import DIGITS, TermEncoder, recode_digits
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
    """Block 1 once per group for one PE (combinational; a shared block muxes its inputs; with
    the tile's ``pipeline = 1`` its outputs are registers: each holds the cycle before's value).

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
        # Exponents are compared in the biased domain, where ABe + 254 = Ae + Be needs no
        # constant per lane: s = Ae + Be (9 bits) and w + 254 = s + lead.  The lane max tree
        # orders the 10-bit keys 2 s + lead, whose order is that of s + lead wherever those
        # differ, so the lanes' maximum is s* + lead* of the winning key (one incrementer, not
        # one per lane).  M = E_g + 254 (11 bits signed: eacc + 254 may be negative); the
        # deltas are M - s, and E_g = M - 254.
        s = [Signal(9, name=f"s{i}") for i in range(L)]
        m.d.comb += [s[i].eq(self.a_exp[i] + self.b_exp[i]) for i in range(L)]
        lv, lkey = tree_reduce(m, [(self.has[i], Cat(self.lead[i], s[i])) for i in range(L)],
                               lambda a, b: a >= b, unsigned(10), "emax")
        lanes_max = Signal(10)
        acc_b = Signal(signed(EG_W + 1))
        big = Signal(signed(EG_W + 1))
        m.d.comb += [lanes_max.eq(lkey[1:] + lkey[0]), acc_b.eq(self.acc_exp + 254)]
        acc_v = ~self.acc_zero
        m.d.comb += big.eq(Mux(lv & (~acc_v | (lanes_max >= acc_b)), lanes_max,
                               Mux(acc_v, acc_b, 254)))
        # the outputs as computed: the ports themselves, or the pipeline stage's inputs
        if cfg.pipeline:
            eg = Signal.like(self.eg, name="eg_c")
            delta = [Signal.like(self.delta[i], name=f"delta_c{i}") for i in range(L)]
            ag = Signal.like(self.ag, name="ag_c")
            m.d.sync += [self.eg.eq(eg), self.ag.eq(ag)]
            m.d.sync += [self.delta[i].eq(delta[i]) for i in range(L)]
        else:
            eg, delta, ag = self.eg, self.delta, self.ag
        m.d.comb += eg.eq(big - 254)
        cap = cfg.kmax + 2
        for i in range(L):
            d = Signal(signed(EG_W + 2), name=f"d{i}")
            m.d.comb += [d.eq(big - s[i]),
                         delta[i].eq(Mux(d > cap, cap, d[:_delta_width(cfg)]))]
        # the acc shift, once per group: E_g >= eacc for a non-zero accumulator
        diff = Signal(signed(EG_W + 1))
        m.d.comb += diff.eq(eg - self.acc_exp)
        padded = Signal(_x_width(cfg) - 1)
        m.d.comb += padded.eq(self.acc_sig << (F - P))
        mag = jam_right(m, padded, diff.as_unsigned(), name="acc_jam")
        m.d.comb += ag.eq(Mux(self.acc_zero, 0, Mux(self.acc_sign, -mag, mag)))
        return m


class GroupAccumulator(wiring.Component):
    """Block 3: the PE's sum register and accumulator, one register pair for both.

    During a group ``x`` holds the fixed-point sum on the ``2**(E_g - F)`` grid and ``eg`` the
    group exponent.  Each cycle the block adds the shift-and-reduce block's sum ``t`` to the
    group sum — to the accumulator aligned onto the group grid, ``ag``, with the exponent
    block's ``E_g`` (``eg_new``), in the PE's first cycle of a group (``serve``), else to ``x``
    with ``eg``: ``x_in = (serve ? ag : x) + t``, ``eg_in = serve ? eg_new : eg``.  In the
    group's last cycle ``NORM_RNE(x_in, eg_in)`` (the shared rounding block) is written into
    the same registers, packed as ``{zero, sign, sig}`` in ``x`` and the
    exponent in ``eg``, where it stays until the PE's next group starts: the accumulator and the
    group sum are never alive at once, so they share flip-flops.  ``acc`` unpacks the registers
    (meaningful between groups) and reads them out to bfloat16.

    Ports
    -----
    en : In(1)
        Register ``x_in``/``eg_in`` (or, with ``last``, their normalization).
    last : In(1)
    serve : In(1); ag : In(signed(F + int_bits + 1)); eg_new : In(signed(10))
        The exponent block's outputs and the cycle they are for.
    t : In(signed(F + int_bits + 1))
        This cycle's sum of the processed lanes on the group grid.
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
        super().__init__({"en": In(1), "last": In(1), "serve": In(1), "ag": In(signed(XS)),
                          "eg_new": In(signed(EG_W)), "t": In(signed(XS)),
                          "x": Out(signed(XS), init=1 << (cfg.keep_bits + 2)),
                          "eg": Out(signed(EG_W)),
                          "acc": Out(AccumulatorSignature(cfg.keep_bits))})

    def elaborate(self, platform):
        m = Module()
        P = self.cfg.keep_bits
        acc = self.acc
        x_in = Signal(signed(_x_width(self.cfg)))
        eg_in = Signal(signed(EG_W))
        m.d.comb += [x_in.eq(Mux(self.serve, self.ag, self.x) + self.t),
                     eg_in.eq(Mux(self.serve, self.eg_new, self.eg))]
        norm = m.submodules.norm = Round(norm_config(self.pe))
        m.d.comb += [norm.i.sig.eq(x_in), norm.i.exp.eq(eg_in)]
        with m.If(self.en):
            with m.If(self.last):
                m.d.sync += [self.x.eq(Cat(norm.o.sig, norm.o.sign, norm.o.zero)),
                             self.eg.eq(norm.o.exp)]
            with m.Else():
                m.d.sync += [self.x.eq(x_in), self.eg.eq(eg_in)]
        m.d.comb += [acc.sig.eq(self.x[:P + 1]), acc.sign.eq(self.x[P + 1]),
                     acc.zero.eq(self.x[P + 2]), acc.exp.eq(self.eg)]
        readout = m.submodules.readout = Round(read_out_config(self.pe))
        m.d.comb += [readout.i.sig.eq(acc.sig), readout.i.exp.eq(acc.exp),
                     readout.i.sign.eq(acc.sign), acc.out.eq(readout.o.bits)]
        return m


class TermSelector(wiring.Component):
    """A PE's own term selector over its column's broadcast term masks (``sync =
    "independent"``, spec §5.3 [C']): per lane a 4-bit cursor, the ``tp`` of the highest term
    position the PE may still take (0 at a group's start, ``tp + 1`` once the PE took the term
    at ``tp``), and the encoder's "next term" logic (leading one, position, sign) over the
    lane's term mask with the positions above the cursor masked off.  Terms are taken most
    significant first, so the cursor is all the per-lane state a PE needs: 4 flip-flops per
    lane instead of a 9-bit copy of the mask.

    Latency: the selection is combinational; ``pop`` moves the cursor at the clock edge.  The
    cursors need no enable: outside a group ``pop`` and ``first`` are low and they hold, and
    the group's first cycle reads them as 0 whatever they hold.

    Ports
    -----
    digits, negs : In(9) array of ``lanes``
        The column's term masks of the group (bit ``j`` = the term at ``tp = 8 - j``) and their
        signs; constant while the column works on the group.
    first : In(1)
        The column's first cycle of a group: every cursor reads as 0.
    pop : In(lanes)
        The PE takes the lanes' presented terms this cycle.
    valid, neg, last : Out(lanes); tp : Out(4) array
        Per lane: a term is presented, its sign, it is the lane's last, its ``tp = t + 1``.
    """

    def __init__(self, lanes: int):
        self.lanes = lanes
        super().__init__({
            "digits": In(DIGITS).array(lanes), "negs": In(DIGITS).array(lanes),
            "first": In(1), "pop": In(lanes),
            "valid": Out(lanes), "tp": Out(4).array(lanes), "neg": Out(lanes),
            "last": Out(lanes),
        })

    def elaborate(self, platform):
        m = Module()

        def encode(lead, value):
            # the 4-bit value(j) of a one-hot lead, as an OR per bit (no adder)
            return Cat(*(Cat(*(lead[j] for j in range(DIGITS) if value(j) >> b & 1)).any()
                         for b in range(4)))

        for i in range(self.lanes):
            cur = Signal(range(DIGITS + 1), name=f"cursor{i}")
            cur_c = Signal(range(DIGITS + 1), name=f"cursor_c{i}")
            avail = Signal(DIGITS, name=f"avail{i}")
            m.d.comb += [cur_c.eq(Mux(self.first, 0, cur)),
                         avail.eq(self.digits[i] & Cat(*(cur_c <= DIGITS - 1 - j
                                                         for j in range(DIGITS))))]
            lead, rest = leading_one(m, avail, name=f"term{i}")
            m.d.comb += [
                self.valid[i].eq(avail.any()),
                self.tp[i].eq(encode(lead, lambda j: 8 - j)),
                self.neg[i].eq((self.negs[i] & lead).any()),
                self.last[i].eq(avail.any() & ~rest.any()),
            ]
            m.d.sync += cur.eq(Mux(self.pop[i], encode(lead, lambda j: 9 - j), cur_c))
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
    valid, tp, neg : the column encoder's terms (``sync = "lockstep"``); ``neg`` is the sign
        of the term times A's sign (the column folds A's signs in once for all its PEs)
    digits, negs : In(9) array
        ``sync = "independent"``: the column's broadcast term masks, which the PE's own
        :class:`TermSelector` (``selector``) turns into its terms; ``negs`` carry A's sign
        folded in, as ``neg`` does.
    b : In(bf16) array
        The PE's B values of the current group (its row's buffer entry).
    advance : In(lanes)
        ``sync = "lockstep"``: the column's encoder pops these lanes at this edge.
    done_out, taken_out : Out(lanes)
        ``sync = "lockstep"``: lanes this PE is done with / has taken, after this cycle.
    fin : Out(1)
        ``sync = "independent"``: the PE has finished the group with this cycle or before
        (every lane exhausted or done, the standalone PE's rule); it then takes no term and
        waits for the column's last cycle.
    zero_in : Out(1)
        The accumulator as the exponent block must see it (zero, or the group clears it).
    proc, shift : Out(lanes); started : Out(1)
    waiting : Out(1)
        ``sync = "independent"``: started and finished before this cycle (trace).
    acc : Out(AccumulatorSignature)
    """

    def __init__(self, cfg: TileConfig):
        self.cfg = cfg
        L = cfg.lanes
        if cfg.sync == "independent":
            terms = {"digits": In(DIGITS).array(L), "negs": In(DIGITS).array(L),
                     "b": In(BF).array(L),
                     "fin": Out(1), "zero_in": Out(1), "proc": Out(L), "shift": Out(L),
                     "started": Out(1), "waiting": Out(1)}
        else:
            terms = {"valid": In(L), "tp": In(4).array(L), "neg": In(L),
                     "b": In(BF).array(L), "advance": In(L),
                     "done_out": Out(L), "taken_out": Out(L), "zero_in": Out(1),
                     "proc": Out(L), "shift": Out(L), "started": Out(1)}
        super().__init__({
            "busy": In(1), "first": In(1), "last": In(1), "clear": In(1), "serve": In(1),
            "eg_in": In(signed(EG_W)), "delta_in": In(_delta_width(cfg)).array(L),
            "ag_in": In(signed(_x_width(cfg))),
            **terms,
            "acc": Out(AccumulatorSignature(cfg.keep_bits)),
        })

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        L, KMAX, DMAX = cfg.lanes, cfg.kmax, cfg.dmax
        KW, DW = _k_width(cfg), _delta_width(cfg)

        indep = cfg.sync == "independent"
        started = Signal()
        delta = [Signal(DW, name=f"delta{i}") for i in range(L)]
        done = Signal(L)
        if indep:
            # the PE's own term selector over the broadcast masks, and its "finished the
            # group" flag (it waits for the column's slowest PE)
            sel = m.submodules.selector = TermSelector(L)
            m.d.comb += [sel.digits[i].eq(self.digits[i]) for i in range(L)]
            m.d.comb += [sel.negs[i].eq(self.negs[i]) for i in range(L)]
            m.d.comb += sel.first.eq(self.first)
            valid, tp, neg = sel.valid, sel.tp, sel.neg
            finished = Signal()
        else:
            taken = Signal(L)
            valid, tp, neg = self.valid, self.tp, self.neg

        accu = m.submodules.accumulator = GroupAccumulator(cfg)
        wiring.connect(m, accu.acc, wiring.flipped(self.acc))
        m.d.comb += self.zero_in.eq(self.acc.zero | self.clear)

        bzero = Cat(*(self.b[i].exp == 0 for i in range(L)))
        st = Signal()
        done_c = Signal(L)
        if not indep:
            taken_c = Signal(L)
        m.d.comb += [
            st.eq(self.busy & (started | self.serve)),
            done_c.eq(Mux(self.first, bzero, done)),
            *([] if indep else [taken_c.eq(Mux(self.first, 0, taken))]),
            self.started.eq(st),
        ]
        # ---- control: k = delta + t, OB-a, base, window
        elig = Signal(L)
        if indep:
            # a PE that finished the group takes no term until the column's next group
            m.d.comb += elig.eq(Mux(st & ~finished, valid & ~done_c, 0))
        else:
            m.d.comb += elig.eq(Mux(st, valid & ~done_c & ~taken_c, 0))
        # k + 1 = delta + tp, used as it is: the min tree, the window and OB-b compare k + 1
        # (no decrementer per lane), and the window test k - base <= dmax is the comparison
        # k + 1 <= (base + 1) + dmax against one shared sum; only the shift amount is a
        # difference, narrowed to the window's bits
        oob = Signal(L)
        ds, kks = [], []
        for i in range(L):
            d = Signal(DW, name=f"delta_c{i}")
            kk = Signal(DW + 1, name=f"kk{i}")        # k + 1 = delta + tp
            m.d.comb += [d.eq(Mux(self.serve, self.delta_in[i], delta[i])),
                         kk.eq(d + tp[i]), oob[i].eq(kk > KMAX + 1)]
            ds.append(d)
            kks.append(kk)
        # the deltas load in the PE's served cycle and hold otherwise (d is delta then)
        m.d.sync += [delta[i].eq(ds[i]) for i in range(L)]
        run = Signal(L)
        m.d.comb += run.eq(elig & ~oob)
        # a running lane has 1 <= k + 1 <= kmax + 1, which fits KW bits
        b_valid, b_min = tree_reduce(m, [(run[i], kks[i][:KW]) for i in range(L)],
                                     lambda a, b: a <= b, unsigned(KW), "kmin")
        # with no running lane the base is never used: every lane enters the tree as 0
        base1 = Signal(KW + 1)                         # base + 1
        reach = Signal(KW + 2)                         # base + 1 + dmax
        base = Signal(KW)
        m.d.comb += [base1.eq(b_min), reach.eq(b_min + DMAX),
                     base.eq(b_min - 1)]
        proc = self.proc
        WW = max(DMAX.bit_length(), 1)
        win = []
        for i in range(L):
            w = Signal(WW, name=f"win{i}")
            m.d.comb += [w.eq(kks[i] - base1), proc[i].eq(run[i] & (kks[i] <= reach))]
            win.append(w)
        m.d.comb += self.shift.eq(run & ~proc)

        # ---- Block 2: shift and reduce (the standalone PE's block)
        sr = m.submodules.lanes = ShiftReduce(cfg.pe)
        m.d.comb += [sr.proc.eq(proc), sr.base.eq(base),
                     sr.neg.eq(Cat(*(self.b[i].sign for i in range(L))) ^ neg)]
        m.d.comb += [sr.sigb[i].eq(Cat(self.b[i].man, 1)) for i in range(L)]
        m.d.comb += [sr.delta[i].eq(win[i]) for i in range(L)]

        # ---- Block 3: fixed-point sum on the group grid, normalized at the group's end
        m.d.comb += [accu.serve.eq(self.serve), accu.ag.eq(self.ag_in),
                     accu.eg_new.eq(self.eg_in), accu.t.eq(sr.sum),
                     accu.en.eq(self.busy & st), accu.last.eq(self.last)]

        # ---- OB-b, done/taken for the column's AND trees
        obb = Signal(L)
        for i in range(L):
            m.d.comb += obb[i].eq(proc[i] & (kks[i] >= KMAX + 1))
        if indep:
            # the PE's group ends with this cycle when every lane is exhausted or done (the
            # standalone PE's rule); the column ends when every PE has ended
            done_out = Signal(L)
            lane_fin = Signal(L)
            fin_now = Signal()
            m.d.comb += [
                done_out.eq(done_c | (elig & oob) | obb),
                sel.pop.eq(proc),
                lane_fin.eq(~valid | done_out | (proc & sel.last)),
                fin_now.eq(st & ~finished & lane_fin.all()),
                self.fin.eq(finished | fin_now),
                self.waiting.eq(st & finished),
            ]
            with m.If(self.busy):
                m.d.sync += [started.eq(st & ~self.last), done.eq(done_out),
                             finished.eq(self.fin & ~self.last)]
            return m
        m.d.comb += [self.done_out.eq(done_c | (elig & oob) | obb),
                     self.taken_out.eq(taken_c | proc)]
        with m.If(self.busy):
            m.d.sync += [started.eq(st & ~self.last),
                         done.eq(self.done_out), taken.eq(self.taken_out & ~self.advance)]
        return m


class TermMasks(wiring.Component):
    """A column's term encoder under ``sync = "independent"`` (spec §5.3 [C']): it broadcasts
    every lane's whole term mask to the column's PEs, whose :class:`TermSelector` s pick their
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


__all__ = ["ExponentBlock", "GroupAccumulator", "TermSelector", "TilePE", "TermMasks",
           "TileColumn", "BBuffer", "TileTraceSignature", "Tile"]

"""The FPRaker tile's per-PE blocks (spec ``docs/specs/fpraker.md`` §4, §5; the tile that
wires them is :mod:`hdl.fpraker.tile`, whose docstring describes their protocol).

* :class:`ExponentBlock` — one per two PEs of a column: ``E_g`` over the lanes' first terms and
  the accumulator, the narrow per-lane offsets and the accumulator aligned to the group grid;
* :class:`GroupAccumulator` — a PE's fixed-point group sum ``X`` and its ``1.P`` accumulator,
  normalized at the group's end, and the bfloat16 read-out;
* :class:`TermSelector` — under ``sync = "independent"``, a PE's per-lane cursors over the
  broadcast term masks;
* :class:`TilePE` — a PE without operand latches: per cycle the bounds, the window and the
  shift-and-reduce block, ``X += jam(T)``.
"""

from amaranth.hdl import Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for

from golden.common import BF16
from golden.common.accumulator import norm_config, read_out_config
from golden.fpraker.tile import TileConfig

from ..common.arith import jam_right, tree_reduce
from ..common.formats import layout
from ..common.rounding import Round
from ..common.signatures import AccumulatorSignature
from ..common import leading_one
from .encoder import DIGITS
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


__all__ = ["BF", "EG_W", "ExponentBlock", "GroupAccumulator", "TermSelector", "TilePE"]

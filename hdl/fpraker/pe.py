"""FPRaker processing element (spec ``docs/specs/fpraker.md`` §1.2, §1.3, §3.1-§3.4, §11).

:class:`PECore` is the PE datapath and control of Fig. 4, built from the paper's blocks as
sub-components (each a separate module in the Verilog and a separate block in
``trainfab area --breakdown``):

* ``operands`` (:class:`OperandRegisters`): the group's latched operands — per-lane product
  exponents ``ABe`` (the exponent adders), B significands, product signs, A significands;
* ``exponent`` (:class:`ExponentPath`, Block 1): per-lane term weights, the step-E max tree over
  them and the accumulator exponent, per-lane ``k`` subtractors and out-of-bounds comparators;
* the control unit (in the core): base min tree, window comparators, OB-a/OB-b, done flags,
  term pops, group completion;
* ``lanes`` (:class:`ShiftReduce`, Block 2): per-lane 0..dmax shifters and negators, the adder
  tree and the shared base shifter onto the accumulator grid;
* ``accumulator`` (:class:`hdl.common.accumulator.Accumulator`, Block 3): accumulator aligner,
  main adder, normalizer and RNE rounder (the shared rounding block), the register and its
  bfloat16 read-out.

One accumulation step per cycle; every step is exactly one cycle of
:func:`golden.fpraker.pe.pe_group` (spec §3.3).

:class:`PE` is the standalone unit (registry ``fpraker.pe``): the core plus one term-encoder lane
per PE lane (:class:`hdl.fpraker.encoder.TermEncoder`), taking bfloat16 operand groups.

Interfaces
----------
``grp``: a valid/ready stream of operand groups (:func:`hdl.common.signatures.operand_group`:
``a`` and ``b``, ``lanes`` bfloat16 values each, and ``clear``); ``acc``: the accumulator
(:class:`hdl.common.signatures.AccumulatorSignature`); ``trace``: what the PE did this cycle
(:class:`PETraceSignature`, named like :class:`golden.fpraker.CycleTrace`'s fields);
``terms``: the term streams between the encoder and the core.

Group timing
------------
A group is accepted on a cycle with ``grp.valid & grp.ready``; its operands are latched and the
encoder lanes loaded at that edge.  Every following cycle is one step of the group
(``trace.busy``), the first one always, until the step that leaves every lane exhausted or
done, flagged by ``trace.last``.  ``grp.ready = ~busy | last``, so the next group is accepted
in the last step of the previous one and groups follow each other with no idle cycle: a group
costs exactly the golden model's cycle count.  ``last`` needs to know that a consumed term is
its lane's final one; the core derives it from the latched A significand: the recoded digits
below position ``j`` are all zero exactly when the significand has ``j`` trailing zero bits
(true for plain binary and for the NAF, whose lowest non-zero digit sits at the significand's
lowest set bit), so the encoder needs no look-ahead port.

``clear`` makes the group start from a zero accumulator (a new dot product) while the register
still holds the previous result during the new group's first step.

The step is one combinational cycle (spec §12 A8, ``EACC_LAG = 1``): the next step's E needs
this step's normalized exponent, so the accumulation loop (term → E → k → base → shifters →
tree → base shifter → adder → LZD → normalizer → RNE → accumulator) is the critical path.
A register inside it would make the next step see a stale exponent (the paper's Fig. 5 lag),
whose numerics nothing defines.

Interleaved dot products (``cfg.pipeline = p``, 1..8; :class:`PE` only)
-----------------------------------------------------------------------
The step gets ``p`` register cuts (:data:`golden.fpraker.pe.STEP_CUTS`) and the PE holds
``C = p + 1`` dot products (C-slow retiming): every state register (busy, fresh, done flags,
operands, each lane's presented term and the digits after it) is a ring of ``C`` contexts and
the accumulator loop holds ``C`` accumulators, so each context takes one step every ``C``
cycles, exactly the one-context step, and the PE one step per cycle.  The cuts, in loop order:

- ``exponent``: after the step-E max tree (every depth; the state read in stage 0 travels
  beside it);
- ``offsets``: after the lanes' ``k``, OB-a and the base min tree;
- ``control``: after the window, the lanes' shifters and sign flips (the state is written back
  in the stage before it: term pops, done flags, a new group's operands and first terms);
- ``reduce``: after the adder tree; ``align``: after the base shifter;
- ``add``, ``normalize``, ``increment``: the accumulator's own (:class:`Accumulator`).

Each lane's ring holds its presented term (valid, sign, weight ``w = ABe - t``) beside
the digits after it, and the write-back finds the next term in parallel for a pop and a
load, so stage 0 starts at the max tree.  A new group is taken in the stage where the step's
control completes (``grp.ready`` is that context's, named by ``slot``), which keeps every
context's cycle count the one-context PE's.  The timing contract is
:class:`golden.fpraker.pe.PESlots`: ``eligible`` is read ``control_lag(cfg)`` cycles before
the step's ``slot`` cycle and ``acc`` shows context ``acc_slot``.

Widths (spec §3.4, derived from the configuration)
-------------------------------------------------
exponents 12-bit signed internally, accumulator exponent 10-bit signed; k clamped to
``kmax + 1``; lane values ``8 + dmax`` bits; adder tree ``9 + dmax + log2(lanes)`` signed; step
adder ``frac_bits + int_bits + 1`` signed; the accumulator significand ``keep_bits + 1``.
"""

from amaranth.hdl import Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for, ceil_log2

from golden.common import BF16
from golden.common.accumulator import EXP_W, XW
from golden.fpraker import EncoderConfig, PEConfig
from golden.fpraker.pe import STEP_CUTS, control_lag

from ..common.accumulator import LOOP_CUTS, Accumulator, step_exponent
from ..common.arith import adder_tree, jam_right, tree_reduce
from ..common.formats import layout
from ..common.pipeline import ring, slot_ports, slots, stage
from ..common.signatures import AccumulatorSignature, TermStreamSignature, operand_group
from .encoder import TermEncoder, present_term, recode_digits


def _k_width(cfg: PEConfig) -> int:
    return bits_for(cfg.kmax + 1)


class PETraceSignature(wiring.Signature):
    """What the PE does in a cycle; members are named after :class:`golden.fpraker.CycleTrace`
    fields where they mean the same thing.

    Members
    -------
    busy : Out(1)
        This cycle is a step of a group.
    last : Out(1)
        The group completes with this step.
    E : Out(signed(12))
        The step exponent.
    base : Out(bits_for(kmax + 1))
        The base shift (min k over the lanes that run).
    processed : Out(lanes)
        Lanes whose term is added (and popped) this cycle.
    done : Out(lanes)
        Registered per-lane done flags (out of bounds or B zero).
    """

    def __init__(self, cfg: PEConfig):
        super().__init__({
            "busy": Out(1), "last": Out(1), "E": Out(signed(XW)), "base": Out(_k_width(cfg)),
            "processed": Out(cfg.lanes), "done": Out(cfg.lanes),
        })


class OperandRegisters(wiring.Component):
    """The group's operands, latched when the group is accepted (``load``).

    Ports
    -----
    load : In(1)
    a, b : In(bf16) array of ``lanes``
    abe : Out(signed(10)) array
        Unbiased product exponents ``Ae + Be - 254`` (-252..254; the paper's exponent adders).
    siga, sigb : Out(8) array
        Significands with the hidden bit.
    psgn : Out(lanes)
        Product signs.
    """

    def __init__(self, lanes: int):
        self.lanes = lanes
        bf16 = layout(BF16)
        super().__init__({
            "load": In(1), "a": In(bf16).array(lanes), "b": In(bf16).array(lanes),
            "abe": Out(signed(EXP_W)).array(lanes), "siga": Out(8).array(lanes),
            "sigb": Out(8).array(lanes), "psgn": Out(lanes),
        })

    def elaborate(self, platform):
        m = Module()
        # significands are stored without the hidden bit, which is constant 1 (a zero or
        # denormal operand is handled by the done flags and the encoder's zero load)
        for i in range(self.lanes):
            mana, manb = Signal(7, name=f"mana{i}"), Signal(7, name=f"manb{i}")
            a, b = self.a[i], self.b[i]
            with m.If(self.load):
                m.d.sync += [self.abe[i].eq(a.exp + b.exp - 254), mana.eq(a.man),
                             manb.eq(b.man), self.psgn[i].eq(a.sign ^ b.sign)]
            m.d.comb += [self.siga[i].eq(Cat(mana, 1)), self.sigb[i].eq(Cat(manb, 1))]
        return m


class ExponentPath(wiring.Component):
    """Block 1 per step (spec §3.3): term weights ``w = ABe - t``, the step exponent
    ``E = max(w over eligible lanes, eacc)`` and per-lane ``k = E - w`` with the out-of-bounds
    comparator ``k > kmax`` (``k`` is clamped to ``kmax + 1``).  Combinational.

    Ports
    -----
    abe : In(signed(10)) array; tp : In(4) array; elig : In(lanes)
    acc_exp : In(signed(10)); zero_in : In(1)
    E : Out(signed(12)); k : Out(bits_for(kmax + 1)) array; oob : Out(lanes)
    """

    def __init__(self, cfg: PEConfig):
        self.cfg = cfg
        L = cfg.lanes
        super().__init__({
            "abe": In(signed(EXP_W)).array(L), "tp": In(4).array(L), "elig": In(L),
            "acc_exp": In(signed(EXP_W)), "zero_in": In(1),
            "E": Out(signed(XW)), "k": Out(_k_width(cfg)).array(L), "oob": Out(L),
        })

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        L = cfg.lanes
        w = [Signal(signed(XW), name=f"w{i}") for i in range(L)]
        m.d.comb += [w[i].eq(self.abe[i] - self.tp[i] + 1) for i in range(L)]
        m.d.comb += self.E.eq(step_exponent(m, self.elig, w, self.zero_in, self.acc_exp))
        _offsets(m, cfg, self.E, w, self.k, self.oob)
        return m


def _offsets(m, cfg: PEConfig, E, w, k, oob) -> None:
    """Each lane's ``k = E - w`` clamped to ``kmax + 1`` into ``k``, and the out-of-bounds
    comparators ``k > kmax`` into ``oob``."""
    KMAX, KW = cfg.kmax, _k_width(cfg)
    for i in range(cfg.lanes):
        kfull = Signal(signed(XW + 1), name=f"kfull{i}")
        m.d.comb += [
            kfull.eq(E - w[i]),
            oob[i].eq(kfull > KMAX),
            k[i].eq(Mux(kfull > KMAX, KMAX + 1, kfull[:KW])),
        ]


class ShiftReduce(wiring.Component):
    """Block 2 per step (spec §3.3): each processed lane's B significand shifted left by
    ``dmax - delta`` and negated by its sign, the adder tree ``T``, and the shared base shifter
    putting ``T`` onto the accumulator's ``2**(E - F)`` grid (round to odd below it).
    Combinational.  The interleaved PE's cuts add register stages, each delaying ``sum`` by a
    cycle: ``cut_lanes`` (its ``control`` cut) holds the shifted, sign-flipped lane values, the
    count of negative lanes and ``base`` before the adder tree; ``cut_tree`` (its ``reduce``
    cut) holds the tree's sum and ``base`` before the base shifter.

    Ports
    -----
    sigb : In(8) array; neg : In(lanes); proc : In(lanes)
    delta : In(bits_for(kmax + 1)) array; base : In(bits_for(kmax + 1))
    sum : Out(signed(frac_bits + int_bits + 1))
    """

    def __init__(self, cfg: PEConfig, cut_lanes: bool = False, cut_tree: bool = False):
        self.cfg = cfg
        self.cut_lanes = cut_lanes
        self.cut_tree = cut_tree
        L, KW = cfg.lanes, _k_width(cfg)
        super().__init__({
            "sigb": In(8).array(L), "neg": In(L), "proc": In(L),
            "delta": In(KW).array(L), "base": In(KW),
            "sum": Out(signed(cfg.frac_bits + cfg.int_bits + 1)),
        })

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        L, F, DMAX = cfg.lanes, cfg.frac_bits, cfg.dmax
        lane_vals = []
        for i in range(L):
            shifted = Signal(8 + DMAX, name=f"lane_shift{i}")
            if DMAX:
                sh = Signal(range(DMAX + 1), name=f"lane_sh{i}")
                m.d.comb += [sh.eq(DMAX - self.delta[i]), shifted.eq(self.sigb[i] << sh)]
            else:  # dmax = 0: no shifter (a zero-width amount would be a [-1:0] wire)
                m.d.comb += shifted.eq(self.sigb[i])
            # a negative lane enters the tree as its one's complement (-v - 1); the missing +1s
            # come in as one extra tree input, the count of negative lanes (no negators)
            val = Signal(signed(9 + DMAX), name=f"lane_val{i}")
            ext = Signal(signed(9 + DMAX), name=f"lane_ext{i}")
            flip = Signal(signed(9 + DMAX), name=f"lane_flip{i}")
            m.d.comb += [ext.eq(shifted), flip.eq(Mux(self.neg[i], -1, 0)),
                         val.eq(Mux(self.proc[i], ext ^ flip, 0))]
            lane_vals.append(val)
        negs = Signal(range(L + 1), name="neg_count")
        m.d.comb += negs.eq(sum((self.proc[i] & self.neg[i]) for i in range(L)))
        base = self.base
        if self.cut_lanes:
            *lane_vals, negs, base = stage(m, [*lane_vals, negs, base], name="control")
        tw = 9 + DMAX + ceil_log2(L)
        tree = adder_tree(m, lane_vals + [negs], tw, "tree")
        if self.cut_tree:
            tree, base = stage(m, [tree, base], name="reduce")
        # base shifter: the tree (grid 2**(E-F+sh)) onto the 2**(E-F) grid, sh = c0 - base
        c0 = F - 7 - DMAX
        if c0 > 0:
            lsh = Signal(range(c0 + 1))
            left = Signal(signed(tw + c0))
            m.d.comb += [lsh.eq(c0 - base), left.eq(tree << lsh)]
            right = jam_right(m, tree, (base - c0).as_unsigned(), "tree_jam")
            m.d.comb += self.sum.eq(Mux(base <= c0, left, right))
        else:
            m.d.comb += self.sum.eq(jam_right(m, tree, base + (-c0), "tree_jam"))
        return m


def _base(m, cfg: PEConfig, elig, k, oob, base_out=None):
    """The step's OB-a (eligible lanes out of bounds) and base (min ``k`` over the lanes that
    run, driven into ``base_out`` too when given).  Returns ``(ob_a, run, base)``."""
    L, KW = cfg.lanes, _k_width(cfg)
    ob_a = Signal(L)
    run = Signal(L)
    m.d.comb += [ob_a.eq(elig & oob), run.eq(elig & ~ob_a)]
    b_valid, b_min = tree_reduce(m, [(run[i], k[i]) for i in range(L)],
                                 lambda a, b: a <= b, unsigned(KW), "kmin")
    base = Signal(KW)
    m.d.comb += [base.eq(Mux(b_valid, b_min, 0)),
                 *([] if base_out is None else [base_out.eq(base)])]
    return ob_a, run, base


def _window(m, cfg: PEConfig, k, base, run, proc):
    """Each lane's ``delta = k - base``; drives ``proc``, the running lanes within ``dmax`` of
    the base (spec §3.3).  Returns the deltas."""
    KW = _k_width(cfg)
    deltas = []
    for i in range(cfg.lanes):
        d = Signal(KW, name=f"delta{i}")
        m.d.comb += [d.eq(k[i] - base), proc[i].eq(run[i] & (d <= cfg.dmax))]
        deltas.append(d)
    return deltas


def _finish(m, cfg: PEConfig, last_term, valid, k, done, ob_a, proc):
    """OB-b (processed lanes at ``k >= kmax``) and each lane's completion after the step: done,
    dropped, exhausted, or its last term (``last_term``) consumed.  Returns ``(ob_b, fin)``."""
    L = cfg.lanes
    ob_b = Signal(L)
    fin = Signal(L)
    for i in range(L):
        m.d.comb += [
            ob_b[i].eq(proc[i] & (k[i] >= cfg.kmax)),
            fin[i].eq(done[i] | ob_a[i] | ob_b[i] | ~valid[i] | (proc[i] & last_term[i])),
        ]
    return ob_b, fin


def _check_step_mode(cfg: PEConfig) -> None:
    if cfg.exp_mode != "step":
        raise ValueError(f"fpraker.pe: exp_mode={cfg.exp_mode!r}: the standalone PE's RTL "
                         "implements the step exponent mode; the group mode is the tile's "
                         "(fpraker.tile, and its golden model at rows=1)")


def _pe_ports(cfg: PEConfig) -> dict:
    """The interfaces the PE and its core share (the PE adds its encoders' error flag, the core
    the term streams and the encoder load strobe)."""
    return {
        "grp": In(operand_group(BF16, cfg.lanes)),
        "eligible": In(cfg.lanes),
        "trace": Out(PETraceSignature(cfg)),
        "acc": Out(AccumulatorSignature(cfg.keep_bits)),
    }


class PECore(wiring.Component):
    """FPRaker PE datapath and control (spec §3.1-§3.4); term inputs come from encoder lanes.

    Latency/throughput: one accumulation step per cycle; a group of ``lanes`` pairs takes
    exactly the cycles of :func:`golden.fpraker.pe.pe_group` (at least one) and the next group
    is accepted in its last step (no gap).

    Parameters
    ----------
    cfg : golden.fpraker.PEConfig
        ``lanes``, ``frac_bits`` (F), ``keep_bits`` (P), ``kmax``, ``dmax``, ``int_bits`` and
        ``out_round`` set the widths and constants; ``encoding`` is the encoder's business.
        Implements the spec §3.3 [C] choices: step E, OB-a/OB-b, RTO then per-step RNE,
        5 integer bits, B-zero lanes done at the start.

    Ports
    -----
    grp : In(operand_group(bf16, lanes))
        Groups ``{a, b, clear}``; ``ready = ~busy | last``.
    eligible : In(lanes)
        Lanes allowed to take their presented term this cycle (neighbour stalls in a tile).
    terms : In(TermStreamSignature(lanes))
        The encoder lanes' current terms; the core drives ``advance`` (= ``trace.processed``)
        and ``drop`` (out of bounds).
    load : Out(1)
        The group is accepted at this edge (loads the encoder lanes).
    trace : Out(PETraceSignature(cfg))
    acc : Out(AccumulatorSignature(keep_bits))
    """

    def __init__(self, cfg: PEConfig = PEConfig()):
        _check_step_mode(cfg)
        self.cfg = cfg
        super().__init__({**_pe_ports(cfg), "terms": In(TermStreamSignature(cfg.lanes)),
                          "load": Out(1)})

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        L = cfg.lanes
        trace, terms, grp = self.trace, self.terms, self.grp
        busy, last, done = trace.busy, trace.last, trace.done
        fresh = Signal()        # the current group starts from a zero accumulator

        ops = m.submodules.operands = OperandRegisters(L)
        m.d.comb += [
            grp.ready.eq(~busy | last),
            self.load.eq(grp.valid & grp.ready),
            ops.load.eq(self.load),
        ]
        m.d.comb += [ops.a[i].eq(grp.payload.a[i]) for i in range(L)]
        m.d.comb += [ops.b[i].eq(grp.payload.b[i]) for i in range(L)]
        with m.If(self.load):
            # a lane whose B is zero or denormal is done from the start (spec §1.3); a zero A
            # simply has no terms (the encoder lane is loaded empty)
            m.d.sync += [busy.eq(1), fresh.eq(grp.payload.clear),
                         *(done[i].eq(grp.payload.b[i].exp == 0) for i in range(L))]
        with m.Elif(last):
            m.d.sync += busy.eq(0)

        accu = m.submodules.accumulator = Accumulator(cfg)
        wiring.connect(m, accu.acc, wiring.flipped(self.acc))

        # ---- Block 1: step E, k and the out-of-bounds comparators
        elig = Signal(L)
        m.d.comb += elig.eq(Mux(busy, terms.valid & ~done & self.eligible, 0))
        xp = m.submodules.exponent = ExponentPath(cfg)
        m.d.comb += [xp.elig.eq(elig), xp.acc_exp.eq(self.acc.exp), xp.zero_in.eq(accu.zero_in),
                     trace.E.eq(xp.E)]
        m.d.comb += [xp.abe[i].eq(ops.abe[i]) for i in range(L)]
        m.d.comb += [xp.tp[i].eq(terms.tp[i]) for i in range(L)]

        # ---- control: OB-a, base, window
        proc = trace.processed
        ob_a, run, base = _base(m, cfg, elig, xp.k, xp.oob, trace.base)
        deltas = _window(m, cfg, xp.k, base, run, proc)

        # ---- Block 2: shift and reduce
        sr = m.submodules.lanes = ShiftReduce(cfg)
        m.d.comb += [sr.neg.eq(ops.psgn ^ terms.neg), sr.proc.eq(proc), sr.base.eq(base)]
        m.d.comb += [sr.sigb[i].eq(ops.sigb[i]) for i in range(L)]
        m.d.comb += [sr.delta[i].eq(deltas[i]) for i in range(L)]

        # ---- Block 3: accumulate
        m.d.comb += [accu.en.eq(busy), accu.clear.eq(fresh), accu.E.eq(xp.E),
                     accu.addend.eq(sr.sum)]

        # ---- OB-b, term pops, completion
        # the consumed term is the lane's last when the significand has j = 8 - tp trailing
        # zeros (no recoded digit below the current one)
        last_term = [((ops.siga[i] << terms.tp[i])[:8] == 0) for i in range(L)]
        ob_b, fin = _finish(m, cfg, last_term, terms.valid, xp.k, done, ob_a, proc)
        m.d.comb += [
            terms.advance.eq(proc),
            terms.drop.eq(ob_a | ob_b),
            last.eq(busy & fin.all()),
        ]
        with m.If(busy):
            m.d.sync += fresh.eq(0)
            with m.If(~self.load):
                m.d.sync += done.eq(done | ob_a | ob_b)
            with m.If(self.load):
                m.d.sync += fresh.eq(grp.payload.clear)
        return m


class PE(wiring.Component):
    """Standalone FPRaker PE (registry ``fpraker.pe``): :class:`PECore` plus one term-encoder
    lane per PE lane, taking bfloat16 operand groups.

    Latency/throughput as :class:`PECore`: a group offered on ``grp`` is accepted when
    ``grp.ready``; it then takes the golden model's cycle count, and the next group is accepted
    in its last step.  ``acc`` holds the result from the cycle after that last step.

    With ``cfg.pipeline = p >= 1`` the step is cut into ``C = p + 1`` stages and the PE
    interleaves ``C`` dot products (module docstring, "Interleaved dot products"); the timing
    contract is then :class:`golden.fpraker.pe.PESlots`.

    Parameters
    ----------
    cfg : golden.fpraker.PEConfig

    Ports
    -----
    grp, eligible, trace, acc
        As :class:`PECore`.  With ``pipeline >= 1``: ``grp.ready`` and ``trace`` are the
        context ``slot``'s, ``trace.done`` holds the flags its step read, ``eligible`` is read
        ``control_lag(cfg)`` cycles (1 or 2) before the step it masks, and ``acc`` shows
        context ``acc_slot``.
    error : Out(1)
        An encoder lane was loaded with a significand whose hidden bit is clear (never, since
        the hidden bit is inserted here; kept for parity with the encoder).
    slot, acc_slot : Out(range(pipeline + 1)), only with ``pipeline >= 1``
        The context whose step's control completes in the cycle (a group offered joins it),
        and the one ``acc`` shows, ``(slot + control_lag(cfg)) mod (pipeline + 1)``.
    """

    def __init__(self, cfg: PEConfig = PEConfig()):
        _check_step_mode(cfg)
        self.cfg = cfg
        super().__init__({**_pe_ports(cfg), "error": Out(1),
                          **slot_ports(cfg.pipeline + 1)})

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        if cfg.pipeline:
            self._interleaved(m)
            return m
        core = m.submodules.core = PECore(cfg)
        enc = m.submodules.encoder = TermEncoder(EncoderConfig(cfg.lanes, cfg.encoding))
        wiring.connect(m, wiring.flipped(self.grp), core.grp)
        wiring.connect(m, enc.terms, core.terms)
        wiring.connect(m, core.trace, wiring.flipped(self.trace))
        wiring.connect(m, core.acc, wiring.flipped(self.acc))
        m.d.comb += [core.eligible.eq(self.eligible), self.error.eq(enc.error)]
        for i in range(cfg.lanes):
            a, b = self.grp.payload.a[i], self.grp.payload.b[i]
            # a lane with either operand zero (or denormal) gets no terms
            m.d.comb += [
                enc.load[i].eq(core.load),
                enc.sig[i].eq(Cat(a.man, 1)),
                enc.zero[i].eq((a.exp == 0) | (b.exp == 0)),
            ]
        return m

    def _interleaved(self, m):
        """The C-slow PE (module docstring): every state register a ring of ``C`` contexts, the
        step cut at :data:`golden.fpraker.pe.STEP_CUTS`; the state is read in stage 0 and
        written back from the stage where the step's control completes."""
        cfg = self.cfg
        L, C = cfg.lanes, cfg.pipeline + 1
        cuts = STEP_CUTS[cfg.pipeline]
        grp, trace = self.grp, self.trace

        # ---- stage 0: the heads of the state rings (the context this step serves).  Each
        # lane holds its presented term (valid, sign and weight w = ABe - t) beside the digits
        # after it, so the step starts at the max tree
        state = {"busy": Signal(name="busy"), "fresh": Signal(name="fresh"),
                 "done": Signal(L, name="done"), "psgn": Signal(L, name="psgn"),
                 "tvalid": Signal(L, name="tvalid"), "tneg": Signal(L, name="tneg")}
        for i in range(L):
            state.update({f"abe{i}": Signal(signed(EXP_W), name=f"abe{i}"),
                          f"manb{i}": Signal(7, name=f"manb{i}"),
                          # ABe - t in -259..255: ten bits (the max tree's compares)
                          f"w{i}": Signal(signed(EXP_W), name=f"w{i}"),
                          f"rest{i}": Signal(9, name=f"rest{i}"),
                          f"negm{i}": Signal(9, name=f"negm{i}")})
        elig = Signal(L, name="elig")
        m.d.comb += elig.eq(Mux(state["busy"], state["tvalid"] & ~state["done"] & self.eligible,
                                0))
        accu = m.submodules.accumulator = Accumulator(
            cfg, [c for c in cuts if c in LOOP_CUTS],
            wait=sum(c in cuts for c in ("offsets", "control", "reduce")))
        wiring.connect(m, accu.acc, wiring.flipped(self.acc))
        E = step_exponent(m, elig, [state[f"w{i}"] for i in range(L)], accu.zero_in,
                          self.acc.exp)
        m.d.comb += [accu.en.eq(state["busy"]), accu.clear.eq(state["fresh"]), accu.E.eq(E)]
        x = stage(m, {"E": E, "elig": elig, **state}, "exponent" in cuts, name="exponent")

        # ---- the lanes' offsets k, OB-a and the base
        k = [Signal(_k_width(cfg), name=f"k{i}") for i in range(L)]
        oob = Signal(L, name="oob")
        _offsets(m, cfg, x["E"], [x[f"w{i}"] for i in range(L)], k, oob)
        ob_a, run, base = _base(m, cfg, x["elig"], k, oob)
        x = stage(m, {**x, "ob_a": ob_a, "run": run, "base": base,
                      **{f"k{i}": k[i] for i in range(L)}}, "offsets" in cuts, name="offsets")

        # ---- the window, OB-b, completion; the state is written back from here
        k = [x[f"k{i}"] for i in range(L)]
        busy, done = x["busy"], x["done"]
        proc = Signal(L, name="proc")
        deltas = _window(m, cfg, k, x["base"], x["run"], proc)
        last_term = [~x[f"rest{i}"].any() for i in range(L)]
        ob_b, fin = _finish(m, cfg, last_term, x["tvalid"], k, done, x["ob_a"], proc)
        last = Signal(name="last")
        load = Signal(name="load")
        m.d.comb += [last.eq(busy & fin.all()), grp.ready.eq(~busy | last),
                     load.eq(grp.valid & grp.ready),
                     trace.busy.eq(busy), trace.last.eq(last), trace.E.eq(x["E"]),
                     trace.base.eq(x["base"]), trace.processed.eq(proc),
                     trace.done.eq(done)]
        self._write_back(m, x, state, load, last, proc, x["ob_a"] | ob_b, C - control_lag(cfg))
        slots(m, self.slot, self.acc_slot, C, C - control_lag(cfg))

        # ---- Block 2: shift and reduce (the control cut is after the lanes' shifters)
        sr = m.submodules.lanes = ShiftReduce(cfg, cut_lanes="control" in cuts,
                                              cut_tree="reduce" in cuts)
        m.d.comb += [sr.neg.eq(x["psgn"] ^ x["tneg"]), sr.proc.eq(proc), sr.base.eq(x["base"])]
        m.d.comb += [sr.sigb[i].eq(Cat(x[f"manb{i}"], 1)) for i in range(L)]
        m.d.comb += [sr.delta[i].eq(deltas[i]) for i in range(L)]
        addend = stage(m, [sr.sum], "align" in cuts, name="step_align")[0]
        m.d.comb += [accu.addend.eq(addend), self.error.eq(0)]

    def _write_back(self, m, x, state, load, last, proc, drop, length):
        """Each state register's next value, from the step's (``x``) or a new group's, into its
        ring of ``length`` registers (the stages left after the step's control).  A lane's next
        term is found in parallel for each case (popped, loaded) and selected late."""
        cfg, grp = self.cfg, self.grp
        L = cfg.lanes
        busy = x["busy"]
        nxt = {
            "busy": load | (busy & ~last),
            "fresh": Mux(load, grp.payload.clear, Mux(busy, 0, x["fresh"])),
            # a lane whose B is zero or denormal is done from the start (spec §1.3)
            "done": Mux(load, Cat(*(grp.payload.b[i].exp == 0 for i in range(L))),
                        Mux(busy, x["done"] | drop, x["done"])),
            "psgn": Mux(load, Cat(*(grp.payload.a[i].sign ^ grp.payload.b[i].sign
                                    for i in range(L))), x["psgn"]),
        }
        tvalid, tneg = [], []
        for i in range(L):
            a, b = grp.payload.a[i], grp.payload.b[i]
            abe = Signal(signed(EXP_W), name=f"load_abe{i}")
            m.d.comb += abe.eq(a.exp + b.exp - 254)
            digits, negs = recode_digits(m, Cat(a.man, 1), cfg.encoding, name=f"load{i}_")
            # a lane with either operand zero (or denormal) gets no terms
            loaded = Signal(9, name=f"load{i}_digits")
            m.d.comb += loaded.eq(Mux((a.exp == 0) | (b.exp == 0), 0, digits))
            new = present_term(m, loaded, negs, name=f"load{i}_term")
            pop = present_term(m, x[f"rest{i}"], x[f"negm{i}"], name=f"pop{i}_term")
            # dropped: no term; popped: the next digit; otherwise the term stays presented
            keep = ~drop[i] & ~proc[i]
            tvalid.append(Mux(load, new["valid"], Mux(drop[i], 0,
                                                      Mux(proc[i], pop["valid"],
                                                          x["tvalid"][i]))))
            tneg.append(Mux(load, new["neg"], Mux(keep, x["tneg"][i], pop["neg"])))
            nxt.update({
                f"abe{i}": Mux(load, abe, x[f"abe{i}"]),
                f"manb{i}": Mux(load, b.man, x[f"manb{i}"]),
                f"w{i}": Mux(load, abe - new["tp"] + 1,
                             Mux(keep, x[f"w{i}"], x[f"abe{i}"] - pop["tp"] + 1)),
                f"rest{i}": Mux(load, new["rest"], Mux(drop[i], 0,
                                                      Mux(proc[i], pop["rest"],
                                                          x[f"rest{i}"]))),
                f"negm{i}": Mux(load, negs, x[f"negm{i}"]),
            })
        nxt.update({"tvalid": Cat(*tvalid), "tneg": Cat(*tneg)})
        for name, cur in state.items():
            ring(m, cur, nxt[name], length, name=name)


__all__ = ["PETraceSignature", "OperandRegisters", "ExponentPath", "ShiftReduce", "PECore", "PE"]


def breakdown_blocks(cfg) -> tuple[str, ...]:
    """The PE's blocks for ``trainfab area --breakdown``: the encoder and the core's operand
    registers, exponent path, lanes and accumulator; the interleaved PE (``pipeline > 0``)
    holds its encoder lanes and control in rings at its top, beside the lanes and the
    accumulator."""
    if cfg.pipeline:
        return ("lanes", "accumulator")
    return ("encoder", "core.operands", "core.exponent", "core.lanes", "core.accumulator")

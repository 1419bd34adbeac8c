"""FPRaker processing element (spec ``seed-fpraker.md`` §1.2, §1.3, §3.1-§3.4, §11).

:class:`PECore` is the PE datapath and control of Fig. 4: per-lane exponent adders, the step-E
max tree, per-lane k subtractors with out-of-bounds comparators, the base min tree and window
comparators, per-lane 0..dmax shifters, negators and an adder tree, the shared base shifter, the
accumulator aligner, the main adder, the leading-one detector, the normalizer and the RNE
rounder.  One accumulation step per cycle; every step is exactly one cycle of
:func:`golden.fpraker.pe.pe_group` (spec §3.3).

:class:`PE` is the standalone unit (registry ``fpraker.pe``): the core plus one term-encoder lane
per PE lane (:class:`hdl.fpraker.encoder.TermEncoder`), taking plain bfloat16 operand groups.

Group timing
------------
A group is accepted on a cycle with ``start & ready``; its operands are latched and the encoder
lanes loaded at that edge.  Every following cycle is one step of the group (``busy``), the first
one always, until the step that leaves every lane exhausted or done, flagged by ``last``.
``ready = ~busy | last``, so the next group is accepted in the last step of the previous one and
groups follow each other with no idle cycle: a group costs exactly the golden model's cycle
count.  ``last`` needs to know that a consumed term is its lane's final one; the core derives it
from the latched A significand: the recoded digits below position ``j`` are all zero exactly when
the significand has ``j`` trailing zero bits (true for plain binary and for the NAF, whose lowest
non-zero digit sits at the significand's lowest set bit), so the encoder needs no look-ahead port.

``clear`` with ``start`` makes the group start from a zero accumulator (a new dot product) while
the register still holds the previous result during the new group's first step.

The step is one combinational cycle (spec §12 A8, ``EACC_LAG = 1``): the next step's E needs
this step's normalized exponent, so the accumulation loop (term → E → k → base → shifters →
tree → base shifter → adder → LZD → normalizer → RNE → accumulator) is the critical path.
Pipelining it would change the numerics (the paper's Fig. 5 lag) and is not done here.

Widths (spec §3.4, derived from the configuration)
-------------------------------------------------
exponents 12-bit signed internally, accumulator exponent 10-bit signed; k clamped to
``kmax + 1``; lane values ``8 + dmax`` bits; adder tree ``9 + dmax + log2(lanes)`` signed; step
adder ``frac_bits + int_bits + 1`` signed; the accumulator significand ``keep_bits + 1``.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for, ceil_log2

from golden.fpraker import EncoderConfig, PEConfig

from ..common.accumulator import EXP_W, XW, Accumulator, accumulator_ports, bf16_read_out
from ..common.arith import adder_tree, jam_right, tree_reduce
from .encoder import TermEncoder

def _operand(bits):
    """bf16 bits → (sign, raw 8-bit biased exponent field, 7-bit mantissa field)."""
    return bits[15], bits[7:15], bits[:7]


# ----------------------------------------------------------------------------------------------

def _k_width(cfg: PEConfig) -> int:
    return bits_for(cfg.kmax + 1)


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
    start, clear : In(1)
        Offer a group (accepted when ``ready``); ``clear`` starts it from a zero accumulator.
    a, b : In(16) array
        The group's bfloat16 operands, sampled when the group is accepted.
    eligible : In(lanes)
        Lanes allowed to take their presented term this cycle (neighbour stalls in a tile).
    term_valid, term_neg : In(lanes); term_tp : In(4) array
        The encoder lanes' current term: present, negative, position ``t + 1``.
    load : Out(1)
        The group is accepted at this edge (loads the encoder lanes).
    ready, busy, last : Out(1)
        ``ready = ~busy | last``; ``busy``: this cycle is a step; ``last``: the group completes
        with this step.
    consume, drop : Out(lanes)
        Pop the lane's term (encoder ``advance``); discard the lane's remaining terms (OB).
    done : Out(lanes)
        Registered per-lane done flags (out of bounds or B zero).
    exp_e : Out(signed 12); base : Out
        Step exponent E and base shift of this cycle (for verification).
    acc_zero, acc_sign, acc_exp, acc_sig
        The accumulator register (``sig`` with ``keep_bits`` fraction bits, ``exp`` unbiased).
    out : Out(16)
        The accumulator read out to bfloat16 (``out_round``).
    """

    def __init__(self, cfg: PEConfig = PEConfig()):
        self.cfg = cfg
        lanes = cfg.lanes
        super().__init__({
            "start": In(1), "clear": In(1),
            "a": In(16).array(lanes), "b": In(16).array(lanes),
            "eligible": In(lanes),
            "term_valid": In(lanes), "term_tp": In(4).array(lanes), "term_neg": In(lanes),
            "load": Out(1), "ready": Out(1), "busy": Out(1), "last": Out(1),
            "consume": Out(lanes), "drop": Out(lanes), "done": Out(lanes),
            "exp_e": Out(signed(XW)), "base": Out(_k_width(cfg)),
            **accumulator_ports(cfg.keep_bits),
        })

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        L, F, P, DMAX, KMAX = cfg.lanes, cfg.frac_bits, cfg.keep_bits, cfg.dmax, cfg.kmax
        KW = _k_width(cfg)
        acc = Accumulator(F, P, cfg.int_bits)

        # ---- group registers (Block 1 inputs, latched once per group)
        # product exponents -252..254 fit 10 bits; significands are stored without the hidden bit
        abe = [Signal(signed(EXP_W), name=f"abe{i}") for i in range(L)]
        manb = [Signal(7, name=f"manb{i}") for i in range(L)]
        psgn = [Signal(name=f"ps{i}") for i in range(L)]
        mana = [Signal(7, name=f"mana{i}") for i in range(L)]
        sigb = [Cat(manb[i], Const(1, 1)) for i in range(L)]
        siga = [Cat(mana[i], Const(1, 1)) for i in range(L)]
        fresh = Signal()        # the current group starts from a zero accumulator

        m.d.comb += [
            self.ready.eq(~self.busy | self.last),
            self.load.eq(self.start & self.ready),
        ]
        with m.If(self.load):
            m.d.sync += [self.busy.eq(1), fresh.eq(self.clear)]
            for i in range(L):
                (sa, ea, ma), (sb, eb, mb) = _operand(self.a[i]), _operand(self.b[i])
                # a lane whose B is zero or denormal is done from the start (spec §1.3); a zero
                # A simply has no terms (the encoder lane is loaded empty)
                m.d.sync += [
                    abe[i].eq(ea + eb - 254), manb[i].eq(mb), psgn[i].eq(sa ^ sb),
                    mana[i].eq(ma), self.done[i].eq(eb == 0),
                ]
        with m.Elif(self.last):
            m.d.sync += self.busy.eq(0)

        # ---- accumulator as seen by this step
        zero_in = Signal()
        m.d.comb += zero_in.eq(self.acc_zero | fresh)

        # ---- Block 1 / step E: E = max(term weights of eligible lanes, eacc)
        elig = Signal(L)
        w = [Signal(signed(XW), name=f"w{i}") for i in range(L)]
        for i in range(L):
            m.d.comb += [
                elig[i].eq(self.busy & self.term_valid[i] & ~self.done[i] & self.eligible[i]),
                w[i].eq(abe[i] - self.term_tp[i] + 1),
            ]
        e_valid, e_max = tree_reduce(
            m, [(elig[i], w[i]) for i in range(L)] + [(~zero_in, self.acc_exp.as_signed())],
            lambda a, b: a >= b, signed(XW), "emax")
        E = Signal(signed(XW))
        m.d.comb += [E.eq(Mux(e_valid, e_max, 0)), self.exp_e.eq(E)]

        # ---- control: k, OB-a, base, window
        kfull = [Signal(signed(XW + 1), name=f"kfull{i}") for i in range(L)]
        k = [Signal(KW, name=f"k{i}") for i in range(L)]
        ob_a = Signal(L)
        run = Signal(L)
        for i in range(L):
            m.d.comb += [
                kfull[i].eq(E - w[i]),
                ob_a[i].eq(elig[i] & (kfull[i] > KMAX)),
                run[i].eq(elig[i] & ~ob_a[i]),
                k[i].eq(Mux(kfull[i] > KMAX, KMAX + 1, kfull[i][:KW])),
            ]
        b_valid, b_min = tree_reduce(m, [(run[i], k[i]) for i in range(L)],
                                     lambda a, b: a <= b, unsigned(KW), "kmin")
        base = Signal(KW)
        m.d.comb += [base.eq(Mux(b_valid, b_min, 0)), self.base.eq(base)]

        proc = Signal(L)
        lane_vals = []
        for i in range(L):
            d = Signal(KW, name=f"delta{i}")
            m.d.comb += [d.eq(k[i] - base), proc[i].eq(run[i] & (d <= DMAX))]
            # Block 2: shift within the window, complement by the product and term signs
            sh = Signal(range(DMAX + 1), name=f"lane_sh{i}")
            shifted = Signal(8 + DMAX, name=f"lane_shift{i}")
            m.d.comb += [sh.eq(DMAX - d), shifted.eq(sigb[i] << sh)]
            val = Signal(signed(9 + DMAX), name=f"lane_val{i}")
            m.d.comb += val.eq(Mux(proc[i], Mux(psgn[i] ^ self.term_neg[i], -shifted, shifted),
                                   0))
            lane_vals.append(val)
        tw = 9 + DMAX + ceil_log2(L)
        tree = adder_tree(m, lane_vals, tw, "tree")

        # ---- base shifter: tree (grid 2**(E-F+sh)) onto the 2**(E-F) grid
        c0 = F - 7 - DMAX               # sh = c0 - base
        tg = Signal(signed(acc.XWIDTH))
        if c0 > 0:
            lsh = Signal(range(c0 + 1))
            left = Signal(signed(tw + c0))
            m.d.comb += [lsh.eq(c0 - base), left.eq(tree << lsh)]
            right = jam_right(m, tree, (base - c0).as_unsigned(), "tree_jam")
            m.d.comb += tg.eq(Mux(base <= c0, left, right))
        else:
            m.d.comb += tg.eq(jam_right(m, tree, base + (-c0), "tree_jam"))

        # ---- Block 3: align the accumulator, add, normalize, round
        ag = acc.align(m, zero_in, self.acc_sign, self.acc_exp, self.acc_sig, E)
        x = Signal(signed(acc.XWIDTH))
        m.d.comb += x.eq(ag + tg)
        nzero, nsign, nexp, nsig = acc.normalize(m, x, E)

        # ---- OB-b, term pops, completion
        ob_b = Signal(L)
        fin = Signal(L)
        for i in range(L):
            # the consumed term is the lane's last when the significand has j = 8 - tp
            # trailing zeros (no recoded digit below the current one)
            last_term = ((siga[i] << self.term_tp[i])[:8] == 0)
            m.d.comb += [
                ob_b[i].eq(proc[i] & (k[i] >= KMAX)),
                fin[i].eq(self.done[i] | ob_a[i] | ob_b[i] | ~self.term_valid[i]
                          | (proc[i] & last_term)),
            ]
        m.d.comb += [
            self.consume.eq(proc),
            self.drop.eq(ob_a | ob_b),
            self.last.eq(self.busy & fin.all()),
        ]
        with m.If(self.busy):
            m.d.sync += [
                self.acc_zero.eq(nzero), self.acc_sign.eq(nsign & ~nzero),
                self.acc_exp.eq(nexp), self.acc_sig.eq(nsig), fresh.eq(0),
            ]
            with m.If(~self.load):
                m.d.sync += self.done.eq(self.done | ob_a | ob_b)
            with m.If(self.load):
                m.d.sync += fresh.eq(self.clear)

        m.d.comb += self.out.eq(bf16_read_out(m, self.acc_zero, self.acc_sign, self.acc_exp,
                                              self.acc_sig, P, cfg.out_round))
        return m


class PE(wiring.Component):
    """Standalone FPRaker PE (registry ``fpraker.pe``): :class:`PECore` plus one term-encoder
    lane per PE lane, taking plain bfloat16 operand groups.

    Latency/throughput as :class:`PECore`: a group offered with ``start`` is accepted when
    ``ready``; it then takes the golden model's cycle count, and the next group is accepted in
    its last step.  ``out``/``acc_*`` hold the result from the cycle after that last step.

    Parameters
    ----------
    cfg : golden.fpraker.PEConfig

    Ports
    -----
    start, clear, a, b, eligible, ready, busy, last, consume, done, exp_e, base, acc_zero,
    acc_sign, acc_exp, acc_sig, out
        As :class:`PECore`.
    error : Out(1)
        An encoder lane was loaded with a significand whose hidden bit is clear (never, since
        the hidden bit is inserted here; kept for parity with the encoder).
    """

    def __init__(self, cfg: PEConfig = PEConfig()):
        self.cfg = cfg
        lanes = cfg.lanes
        super().__init__({
            "start": In(1), "clear": In(1),
            "a": In(16).array(lanes), "b": In(16).array(lanes),
            "eligible": In(lanes),
            "ready": Out(1), "busy": Out(1), "last": Out(1),
            "consume": Out(lanes), "done": Out(lanes),
            "exp_e": Out(signed(XW)), "base": Out(_k_width(cfg)),
            **accumulator_ports(cfg.keep_bits), "error": Out(1),
        })

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        core = m.submodules.core = PECore(cfg)
        enc = m.submodules.encoder = TermEncoder(EncoderConfig(cfg.lanes, cfg.encoding))
        m.d.comb += [
            core.start.eq(self.start), core.clear.eq(self.clear),
            core.eligible.eq(self.eligible),
            core.term_valid.eq(enc.valid), core.term_neg.eq(enc.neg),
            enc.advance.eq(core.consume), enc.drop.eq(core.drop),
            self.ready.eq(core.ready), self.busy.eq(core.busy), self.last.eq(core.last),
            self.consume.eq(core.consume), self.done.eq(core.done),
            self.exp_e.eq(core.exp_e), self.base.eq(core.base),
            self.acc_zero.eq(core.acc_zero), self.acc_sign.eq(core.acc_sign),
            self.acc_exp.eq(core.acc_exp), self.acc_sig.eq(core.acc_sig),
            self.out.eq(core.out), self.error.eq(enc.error),
        ]
        for i in range(cfg.lanes):
            a, b = self.a[i], self.b[i]
            m.d.comb += [
                core.a[i].eq(a), core.b[i].eq(b), core.term_tp[i].eq(enc.tp[i]),
                enc.load[i].eq(core.load),
                enc.sig[i].eq(Cat(a[:7], Const(1, 1))),
                # a lane with either operand zero gets no terms
                enc.zero[i].eq((a[7:15] == 0) | (b[7:15] == 0)),
            ]
        return m


__all__ = ["PECore", "PE"]

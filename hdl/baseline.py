"""Bit-parallel bfloat16 baseline PE (spec ``seed-fpraker.md`` §11.6, §14).

The FPRaker paper's comparison point: ``lanes`` bit-parallel 8x8 significand multipliers with
exponent adders, a max tree, per-lane alignment shifters (round to odd onto the accumulator
grid), an adder tree and the same 1.P accumulator, normalizer, RNE rounder and read-out as the
FPRaker PE (:class:`hdl.common.accumulator.Accumulator`).  Bit-exact with
:func:`golden.baseline.baseline_group`.
"""

from amaranth.hdl import Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from golden.baseline import BaselineConfig

from .common.accumulator import XW, Accumulator, accumulator_ports, bf16_read_out
from .common.arith import adder_tree, jam_right, tree_reduce


class BF16PE(wiring.Component):
    """Bit-parallel bfloat16 dot-product PE: one group of ``lanes`` pairs per cycle.

    Latency/throughput: the group presented with ``start`` is accumulated at that clock edge;
    ``acc_*``/``out`` show the result from the next cycle.  One group per cycle.

    Parameters
    ----------
    cfg : golden.baseline.BaselineConfig
        ``lanes``, ``frac_bits`` (alignment grid), ``keep_bits``, ``int_bits``, ``out_round``.

    Ports
    -----
    start : In(1)
        Accumulate the group on ``a``/``b`` at this edge.
    clear : In(1)
        With ``start``: the group starts from a zero accumulator (a new dot product).
    a, b : In(16) array
        bfloat16 operands; exponent field 0 is zero (flush), 255 is outside the contract.
    exp_e : Out(signed 12)
        This cycle's alignment exponent E (for verification).
    acc_zero, acc_sign, acc_exp, acc_sig : Out
        The accumulator register (``sig`` has ``keep_bits`` fraction bits).
    out : Out(16)
        The accumulator read out to bfloat16.
    """

    def __init__(self, cfg: BaselineConfig = BaselineConfig()):
        self.cfg = cfg
        lanes = cfg.lanes
        super().__init__({
            "start": In(1), "clear": In(1),
            "a": In(16).array(lanes), "b": In(16).array(lanes),
            "exp_e": Out(signed(XW)),
            **accumulator_ports(cfg.keep_bits),
        })

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        L, F = cfg.lanes, cfg.frac_bits
        acc = Accumulator(F, cfg.keep_bits, cfg.int_bits)
        zero_in = Signal()
        m.d.comb += zero_in.eq(self.acc_zero | self.clear)

        act = Signal(L)
        abe = [Signal(signed(XW), name=f"abe{i}") for i in range(L)]
        prod = [Signal(16, name=f"prod{i}") for i in range(L)]
        pexp = [Signal(signed(XW), name=f"pexp{i}") for i in range(L)]
        neg = Signal(L)
        for i in range(L):
            a, b = self.a[i], self.b[i]
            m.d.comb += [
                act[i].eq((a[7:15] != 0) & (b[7:15] != 0)),
                abe[i].eq(a[7:15] + b[7:15] - 254),
                prod[i].eq((a[:7] | 0x80) * (b[:7] | 0x80)),
                pexp[i].eq(abe[i] + prod[i][15]),
                neg[i].eq(a[15] ^ b[15]),
            ]
        e_valid, e_max = tree_reduce(
            m, [(act[i], pexp[i]) for i in range(L)] + [(~zero_in, self.acc_exp.as_signed())],
            lambda x, y: x >= y, signed(XW), "emax")
        E = Signal(signed(XW))
        m.d.comb += [E.eq(Mux(e_valid, e_max, 0)), self.exp_e.eq(E)]

        # align each exact product (value prod * 2**(abe - 14)) to the 2**(E - F) grid
        pad = max(0, F - 14)
        terms = []
        for i in range(L):
            diff = Signal(signed(XW + 1), name=f"pdiff{i}")
            wide = Signal(16 + pad, name=f"pwide{i}")
            m.d.comb += [diff.eq(E - abe[i] + max(0, 14 - F)), wide.eq(prod[i] << pad)]
            mag = jam_right(m, wide, diff.as_unsigned(), name=f"pjam{i}")
            t = Signal(signed(acc.XWIDTH), name=f"pterm{i}")
            m.d.comb += t.eq(Mux(act[i], Mux(neg[i], -mag, mag), 0))
            terms.append(t)
        tree = adder_tree(m, terms, acc.XWIDTH + ceil_log2(L), "ptree")

        ag = acc.align(m, zero_in, self.acc_sign, self.acc_exp, self.acc_sig, E)
        x = Signal(signed(acc.XWIDTH))
        m.d.comb += x.eq(ag + tree)
        nzero, nsign, nexp, nsig = acc.normalize(m, x, E)
        with m.If(self.start):
            m.d.sync += [
                self.acc_zero.eq(nzero), self.acc_sign.eq(nsign & ~nzero),
                self.acc_exp.eq(nexp), self.acc_sig.eq(nsig),
            ]
        m.d.comb += self.out.eq(bf16_read_out(m, self.acc_zero, self.acc_sign, self.acc_exp,
                                              self.acc_sig, cfg.keep_bits, cfg.out_round))
        return m


__all__ = ["BF16PE"]

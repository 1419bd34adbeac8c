"""Floating-point adder (registry unit ``common.fp_add``): RNE, DAZ/FTZ, bit-exact with
:func:`golden.common.fp_add.fp_add_bits`.

The FP32 accumulators of FAST's fMAC and of the FP MAC baselines instantiate it.  Structure
(combinational): DAZ decode of both operands → magnitude compare and swap → exponent difference
→ alignment shifter with sticky (three extra bits: guard, round, sticky) → add/subtract → the
shared rounding block (normalize, RNE, ±Inf, FTZ) → special-operand selection (NaN, ±Inf).
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from golden.common.fp_add import EXTRA, FPAddConfig, add_round_config, qnan

from .arith import jam_right
from .formats import decode, layout
from .rounding import Round


class FPAdder(wiring.Component):
    """``sum = a + b`` in one floating-point format, round to nearest even, DAZ/FTZ.

    Latency: combinational.  Throughput: one addition per cycle.

    Parameters
    ----------
    cfg : golden.common.fp_add.FPAddConfig
        ``fmt``: the operands' and the result's format (FP32 by default).

    Ports
    -----
    a, b : In(layout of fmt)
    sum : Out(layout of fmt)
        The correctly rounded sum; ``x + (-x) = +0``; a subnormal result flushes to a signed
        zero; NaN operands and ``Inf - Inf`` give the quiet NaN.
    """

    def __init__(self, cfg: FPAddConfig = FPAddConfig()):
        self.cfg = cfg
        lay = layout(cfg.format)
        super().__init__({"a": In(lay), "b": In(lay), "sum": Out(lay)})

    def elaborate(self, platform):
        fmt = self.cfg.format
        m = Module()
        P = fmt.man_bits
        a, b = self.a, self.b
        _, sa, ea, ma = decode(m, a, fmt, name="a")
        _, sb, eb, mb = decode(m, b, fmt, name="b")

        # the larger magnitude first
        swap = Signal()
        m.d.comb += swap.eq((eb > ea) | ((eb == ea) & (mb > ma)))
        sx, ex, mx = Mux(swap, sb, sa), Mux(swap, eb, ea), Mux(swap, mb, ma)
        sy, ey, my = Mux(swap, sa, sb), Mux(swap, ea, eb), Mux(swap, ma, mb)
        d = Signal(fmt.exp_bits)
        m.d.comb += d.eq(ex - ey)
        wide_y = Signal(P + 1 + EXTRA)
        m.d.comb += wide_y.eq(my << EXTRA)
        shifted = jam_right(m, wide_y, d, name="align")

        total = Signal(P + 2 + EXTRA)
        m.d.comb += total.eq(Mux(sx == sy, (mx << EXTRA) + shifted, (mx << EXTRA) - shifted))
        rnd = m.submodules.round = Round(add_round_config(fmt))
        m.d.comb += [
            rnd.i.sig.eq(total), rnd.i.exp.eq(ex - fmt.bias),
            # exact cancellation is +0; two zeros of the same sign keep it
            rnd.i.sign.eq(Mux(total == 0, sx & sy, sx)),
        ]

        inf_a = Signal()
        inf_b = Signal()
        nan = Signal()
        all_ones_a, all_ones_b = a.exp == fmt.exp_max, b.exp == fmt.exp_max
        m.d.comb += [
            inf_a.eq(all_ones_a & (a.man == 0)),
            inf_b.eq(all_ones_b & (b.man == 0)),
            nan.eq((all_ones_a & ~inf_a) | (all_ones_b & ~inf_b) | (inf_a & inf_b & (sa != sb))),
        ]
        with m.If(nan):
            m.d.comb += self.sum.eq(qnan(fmt))
        with m.Elif(inf_a):
            m.d.comb += self.sum.eq(a)
        with m.Elif(inf_b):
            m.d.comb += self.sum.eq(b)
        with m.Else():
            m.d.comb += self.sum.eq(rnd.o.bits)
        return m


__all__ = ["FPAdder"]

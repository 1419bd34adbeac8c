"""Floating-point adder (registry unit ``common.fp_add``): RNE, DAZ/FTZ, bit-exact with
:func:`golden.common.fp_add.fp_add_bits`.

The FP32 accumulators of FAST's fMAC and of the FP MAC baselines instantiate it.  Structure:
DAZ decode of both operands → magnitude compare and swap → exponent difference → alignment
shifter with sticky (three extra bits: guard, round, sticky) → add/subtract → the shared
rounding block (normalize, RNE, ±Inf, FTZ) → special-operand selection (NaN, ±Inf).

Pipeline stages (``cfg.pipeline``, 0..5)
----------------------------------------
``pipeline = 0`` is combinational (the accumulators' adder).  Otherwise registers cut the
structure at named points, as FloPoCo places its stages, and the sum appears exactly
``pipeline`` cycles after its operands (new operands every cycle; no enable):

- ``swap``: after the decode, the magnitude compare and swap and the exponent difference;
- ``align``: after the alignment shifter;
- ``add``: after the add/subtract (the rounding block's input);
- ``normalize`` and ``increment``: the rounding block's own stages
  (:mod:`hdl.common.rounding`: after its leading-one detector and shift, after its increment).

:data:`CUTS` lists the cuts of each depth, chosen to split the path into similar parts: 1 cuts
after the add (about half-way); 2 after the alignment and the normalize (thirds); 3 after the
alignment, the add and the normalize; 4 adds the swap; 5 adds the increment.  The special-case
result (NaN, ±Inf operands) is decided from the operands and delayed beside the datapath.

:func:`interleaved_sum` puts the stages of a depth inside an FP32 accumulation loop: the loop
then holds as many independent sums as it has registers (C-slow), the way the MAC baseline's
and the fMAC's ``contexts`` reach a short clock without changing how each sum is rounded.
"""

import dataclasses

from amaranth.hdl import Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from golden.common.fp_add import EXTRA, FPAddConfig, add_round_config, qnan

from .arith import jam_right
from .formats import decode, layout
from .pipeline import delay, stage
from .rounding import Round

#: cut points of each pipeline depth (see the module docstring); the rounding block's own cuts
#: ("normalize", "increment") are its pipeline depths 1 and 2
CUTS = {0: (), 1: ("add",), 2: ("align", "normalize"), 3: ("align", "add", "normalize"),
        4: ("swap", "align", "add", "normalize"),
        5: ("swap", "align", "add", "normalize", "increment")}


class FPAdder(wiring.Component):
    """``sum = a + b`` in one floating-point format, round to nearest even, DAZ/FTZ.

    Latency: ``cfg.pipeline`` cycles (0: combinational; stages in the module docstring).
    Throughput: one addition per cycle.

    Parameters
    ----------
    cfg : golden.common.fp_add.FPAddConfig
        ``fmt``: the operands' and the result's format (FP32 by default); ``pipeline``: register
        stages.

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
        cuts = CUTS[self.cfg.pipeline]
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
        r = stage(m, {"sx": sx, "ex": ex, "mx": mx, "sy": sy, "my": my, "d": d},
                  "swap" in cuts, name="swap")
        sx, ex, mx, sy, my, d = r["sx"], r["ex"], r["mx"], r["sy"], r["my"], r["d"]
        wide_y = Signal(P + 1 + EXTRA)
        m.d.comb += wide_y.eq(my << EXTRA)
        shifted = jam_right(m, wide_y, d, name="align")
        r = stage(m, {"sx": sx, "ex": ex, "mx": mx, "sy": sy, "shifted": shifted},
                  "align" in cuts, name="align")
        sx, ex, mx, sy, shifted = r["sx"], r["ex"], r["mx"], r["sy"], r["shifted"]

        total = Signal(P + 2 + EXTRA)
        m.d.comb += total.eq(Mux(sx == sy, (mx << EXTRA) + shifted, (mx << EXTRA) - shifted))
        r = stage(m, {"total": total, "ex": ex, "sx": sx, "sy": sy}, "add" in cuts, name="add")
        total, ex, sx, sy = r["total"], r["ex"], r["sx"], r["sy"]
        round_depth = sum(c in cuts for c in ("normalize", "increment"))
        rnd = m.submodules.round = Round(dataclasses.replace(add_round_config(fmt),
                                                             pipeline=round_depth))
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
        if not cuts:
            with m.If(nan):
                m.d.comb += self.sum.eq(qnan(fmt))
            with m.Elif(inf_a):
                m.d.comb += self.sum.eq(a)
            with m.Elif(inf_b):
                m.d.comb += self.sum.eq(b)
            with m.Else():
                m.d.comb += self.sum.eq(rnd.o.bits)
            return m
        # the special-case result, decided from the operands, travels beside the datapath
        special = Signal(fmt.width, name="special")
        m.d.comb += special.eq(Mux(nan, qnan(fmt), Mux(inf_a, a.as_value(), b.as_value())))
        depth = self.cfg.pipeline
        is_special = delay(m, nan | inf_a | inf_b, depth, name="is_special")
        special = delay(m, special, depth, name="special")
        m.d.comb += self.sum.eq(Mux(is_special, special, rnd.o.bits))
        return m


def interleaved_loop(m, acc, a, addend, contexts: int, *, name: str = "add"):
    """The accumulation loop ``acc <= a + addend``, ``a`` formed from ``acc`` by the caller (a
    restart from +0, or another loop's value), with ``contexts - 1`` register stages of the
    adder inside it (``contexts >= 2``): the loop holds ``contexts`` sums, one per cycle of a
    rotation, each passing the adder once every ``contexts`` cycles.

    An idle cycle must offer ``addend = -0`` (``x + (-0) = x`` for every value the loop can
    hold: ±0, normals, ±Inf and the canonical NaN), so no hold multiplexer enters the loop.
    The adder's stage registers hold no sum after reset, so ``acc`` (FP32 bits) loads +0
    until ``contexts - 1`` cycles have passed.  Returns the value ``acc`` loads at the edge
    (an expression)."""
    add = m.submodules[name] = FPAdder(FPAddConfig("fp32", pipeline=contexts - 1))
    m.d.comb += [add.a.eq(a), add.b.eq(addend)]
    live = delay(m, Const(1), contexts - 1, name=f"{name}_live")
    nxt = Mux(live, add.sum, 0)
    m.d.sync += acc.eq(nxt)
    return nxt


def interleaved_sum(m, acc, addend, restart, contexts: int, *, name: str = "add") -> FPAdder:
    """:func:`interleaved_loop` for ``acc <= (restart ? +0 : acc) + addend``.  Returns the
    adder (submodule ``name``)."""
    interleaved_loop(m, acc, Mux(restart, 0, acc), addend, contexts, name=name)
    return m.submodules[name]


__all__ = ["FPAdder", "interleaved_loop", "interleaved_sum"]

"""Bit-parallel bfloat16 baseline PE (spec ``docs/specs/fpraker.md`` §11.6, §14).

The FPRaker paper's comparison point: ``lanes`` bit-parallel 8x8 significand multipliers with
exponent adders, a max tree, per-lane alignment shifters (round to odd onto the accumulator
grid), an adder tree and the same 1.P accumulator, normalizer, RNE rounder and read-out as the
FPRaker PE (:class:`hdl.common.accumulator.Accumulator`).  Bit-exact with
:func:`golden.baseline.baseline_group`.

Sub-components (separate blocks in ``trainfab area --breakdown``): ``products``
(:class:`Products`: multipliers and exponent adders), ``exponent`` (the max tree),
``lanes`` (:class:`AlignReduce`: alignment shifters, negators, adder tree — the baseline's
shift-and-reduce) and ``accumulator``.

:class:`Bf16Tile` (unit ``baseline.bf16_tile``) is the paper's baseline tile: ``rows`` x ``cols``
of these PEs (instances ``pe<r>_<c>``, each with the blocks above) taking one group per cycle in
lock-step, with the FPRaker tile's ports (:class:`hdl.common.signatures.TileSignature`).
"""

from amaranth.hdl import Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from golden.baseline import BaselineConfig
from golden.common import BF16
from golden.common.accumulator import EXP_W, XW

from ..common.accumulator import Accumulator, step_exponent
from ..common.arith import adder_tree, jam_right
from ..common.formats import layout
from ..common.signatures import AccumulatorSignature, operand_group


class Products(wiring.Component):
    """Per lane: the exact 16-bit significand product ``P = SigA * SigB`` (value
    ``P * 2**(ABe - 14)``), the unbiased exponent sum ``ABe``, the product's own exponent
    ``ABe + [P >= 2**15]``, the product sign and whether both operands are non-zero.
    Combinational.

    Ports
    -----
    a, b : In(bf16) array of ``lanes``
    prod : Out(16) array; abe, pexp : Out(signed(12)) array; neg, act : Out(lanes)
    """

    def __init__(self, lanes: int):
        self.lanes = lanes
        bf16 = layout(BF16)
        super().__init__({
            "a": In(bf16).array(lanes), "b": In(bf16).array(lanes),
            "prod": Out(16).array(lanes), "abe": Out(signed(XW)).array(lanes),
            "pexp": Out(signed(XW)).array(lanes), "neg": Out(lanes), "act": Out(lanes),
        })

    def elaborate(self, platform):
        m = Module()
        for i in range(self.lanes):
            a, b = self.a[i], self.b[i]
            m.d.comb += [
                self.act[i].eq((a.exp != 0) & (b.exp != 0)),
                self.abe[i].eq(a.exp + b.exp - 254),
                self.prod[i].eq((a.man | 0x80) * (b.man | 0x80)),
                self.pexp[i].eq(self.abe[i] + self.prod[i][15]),
                self.neg[i].eq(a.sign ^ b.sign),
            ]
        return m


class AlignReduce(wiring.Component):
    """Each active product aligned to the ``2**(E - F)`` grid (round to odd below it), negated
    by its sign, and the adder tree over the lanes.  Combinational.

    Ports
    -----
    prod : In(16) array; abe : In(signed(12)) array; neg, act : In(lanes); E : In(signed(12))
    sum : Out(signed(frac_bits + int_bits + 1 + ceil_log2(lanes)))
    """

    def __init__(self, cfg: BaselineConfig):
        self.cfg = cfg
        L = cfg.lanes
        self.width = cfg.frac_bits + cfg.int_bits + 1
        super().__init__({
            "prod": In(16).array(L), "abe": In(signed(XW)).array(L), "neg": In(L),
            "act": In(L), "E": In(signed(XW)),
            "sum": Out(signed(self.width + ceil_log2(L))),
        })

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        F = cfg.frac_bits
        pad = max(0, F - 14)
        terms = []
        for i in range(cfg.lanes):
            diff = Signal(signed(XW + 1), name=f"pdiff{i}")
            wide = Signal(16 + pad, name=f"pwide{i}")
            m.d.comb += [diff.eq(self.E - self.abe[i] + max(0, 14 - F)),
                         wide.eq(self.prod[i] << pad)]
            mag = jam_right(m, wide, diff.as_unsigned(), name=f"pjam{i}")
            t = Signal(signed(self.width), name=f"pterm{i}")
            m.d.comb += t.eq(Mux(self.act[i], Mux(self.neg[i], -mag, mag), 0))
            terms.append(t)
        m.d.comb += self.sum.eq(adder_tree(m, terms, len(self.sum), "ptree"))
        return m


class BF16PE(wiring.Component):
    """Bit-parallel bfloat16 dot-product PE: one group of ``lanes`` pairs per cycle.

    Latency/throughput: the group accepted on ``grp`` is accumulated at that clock edge; ``acc``
    shows the result from the next cycle.  One group per cycle (``grp.ready`` is always 1).

    Parameters
    ----------
    cfg : golden.baseline.BaselineConfig
        ``lanes``, ``frac_bits`` (alignment grid), ``keep_bits``, ``int_bits``, ``out_round``.

    Ports
    -----
    grp : In(operand_group(bf16, lanes))
        Groups ``{a, b, clear}`` (``clear``: start from a zero accumulator, a new dot
        product); exponent field 0 is zero (flush), 255 is outside the contract.
    acc : Out(AccumulatorSignature(keep_bits))
        The accumulator register and its bfloat16 read-out.
    """

    def __init__(self, cfg: BaselineConfig = BaselineConfig()):
        self.cfg = cfg
        super().__init__({
            "grp": In(operand_group(BF16, cfg.lanes)),
            "acc": Out(AccumulatorSignature(cfg.keep_bits)),
        })

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        L = cfg.lanes
        grp = self.grp
        m.d.comb += grp.ready.eq(1)

        prods = m.submodules.products = Products(L)
        m.d.comb += [prods.a[i].eq(grp.payload.a[i]) for i in range(L)]
        m.d.comb += [prods.b[i].eq(grp.payload.b[i]) for i in range(L)]

        accu = m.submodules.accumulator = Accumulator(cfg)
        wiring.connect(m, accu.acc, wiring.flipped(self.acc))
        m.d.comb += [accu.en.eq(grp.valid), accu.clear.eq(grp.payload.clear)]

        xp = m.submodules.exponent = _MaxExponent(L)
        m.d.comb += [xp.valid.eq(prods.act), xp.zero_in.eq(accu.zero_in),
                     xp.acc_exp.eq(self.acc.exp)]
        m.d.comb += [xp.w[i].eq(prods.pexp[i]) for i in range(L)]

        al = m.submodules.lanes = AlignReduce(cfg)
        m.d.comb += [al.neg.eq(prods.neg), al.act.eq(prods.act), al.E.eq(xp.E)]
        m.d.comb += [al.prod[i].eq(prods.prod[i]) for i in range(L)]
        m.d.comb += [al.abe[i].eq(prods.abe[i]) for i in range(L)]

        # the adder tree carries log2(lanes) growth bits; int_bits is validated to hold the
        # whole step (golden.baseline.required_int_bits), so dropping them here loses nothing
        m.d.comb += [accu.E.eq(xp.E), accu.addend.eq(al.sum)]
        return m


class _MaxExponent(wiring.Component):
    """The step exponent ``E = max(w over valid lanes, eacc)`` as a block of its own."""

    def __init__(self, lanes: int):
        self.lanes = lanes
        super().__init__({
            "valid": In(lanes), "w": In(signed(XW)).array(lanes), "zero_in": In(1),
            "acc_exp": In(signed(EXP_W)), "E": Out(signed(XW)),
        })

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.E.eq(step_exponent(m, self.valid, list(self.w), self.zero_in,
                                            self.acc_exp))
        return m


__all__ = ["Products", "AlignReduce", "BF16PE"]

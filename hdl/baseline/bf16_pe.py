"""Bit-parallel bfloat16 baseline PE (spec ``docs/specs/fpraker.md`` §11.6, §14).

The FPRaker paper's comparison point: ``lanes`` bit-parallel 8x8 significand multipliers with
exponent adders, a max tree, per-lane alignment shifters (round to odd onto the accumulator
grid), an adder tree and the same 1.P accumulator, normalizer, RNE rounder and read-out as the
FPRaker PE (:class:`hdl.common.accumulator.Accumulator`).  Bit-exact with
:func:`golden.baseline.baseline_group`.

Sub-components (separate blocks in ``trainfab area --breakdown``): ``products``
(:class:`Products`: multipliers and exponent adders), ``exponent`` (the max tree),
``lanes`` (:class:`AlignReduce`: alignment shifters, negators, adder tree — the baseline's
shift-and-reduce) and ``accumulator``.  With register stages ``exponent`` is the max tree over
the products alone and ``lanes`` a :class:`StagedAlignReduce` (below); the step exponent's last
comparison, with the accumulator's exponent, is the PE's own logic.

:class:`Bf16Tile` (unit ``baseline.bf16_tile``) is the paper's baseline tile: ``rows`` x ``cols``
of these PEs (instances ``pe<r>_<c>``, each with the blocks above) taking one group per cycle in
lock-step, with the FPRaker tile's ports (:class:`hdl.common.signatures.TileSignature`).

Pipeline stages (``cfg.pipeline``, 0..3)
----------------------------------------
``pipeline = 0`` is the paper's single-cycle PE.  Stages go on the product side only, before
the accumulation step; the step itself stays one cycle (the loop from the accumulator's
exponent through the step exponent ``E``, the alignment of the products onto the
``2**(E - F)`` grid, the adder tree, the accumulator's add, the normalizer/RNE and back into
the register), so every result is bit-exact with the single-cycle PE and only arrives later.

Since ``E = max(Ep, eacc)`` depends on the accumulator, a pipelined PE splits the alignment in
two (:class:`StagedAlignReduce`): before the stages each active product is aligned onto the grid
``2**(Ep - F)`` of the products' own largest exponent ``Ep`` (round to odd) and negated; in the
step every term is shifted right by the same ``E - Ep`` (round to odd again) before the adder
tree.  Round to odd composes (``jam(jam(x, s), t) = jam(x, s + t)``) and commutes with
negation (two's complement floor with the sticky OR-ed in), so the sum is unchanged.  The cut
points, each registering the group's ``valid`` and ``clear`` beside the datapath:

- ``align`` (depths 1, 2, 3): the aligned, signed terms (``F + 2`` bits per lane), ``Ep`` and
  whether any lane is active — the last register before the accumulation step;
- ``exponent`` (depths 2, 3): after the max tree over the products' exponents (``Ep``), with
  the products, the exponent sums ``ABe``, the signs and the lane activity;
- ``product`` (depth 3): after the multipliers and exponent adders: the products, ``ABe``, the
  products' own exponents, signs and lane activity.

A group accepted at edge ``t`` is accumulated at edge ``t + pipeline``
(:func:`golden.baseline.bf16_pe_cycles`).  The accumulation step bounds the clock at every
depth >= 1.

Interleaved dot products (``cfg.contexts``, 1..6; ``pipeline >= 1``)
-------------------------------------------------------------------
Stages before the step cannot shorten it.  With ``C = contexts > 1`` the step's loop gets
``C - 1`` register cuts (:data:`INTERLEAVED_CUTS`): ``add`` (the normalizer's input),
``normalize`` and ``increment`` (the normalizer's own stages), ``align`` (the terms after
their shift by ``E - Ep``, before the adder tree, beside the accumulator after its own
shift) and ``exponent`` (the step exponent ``E`` and the shifts' amounts, before the
shifts).  The loop then holds ``C`` accumulators (C-slow): a free-running counter ``slot``
names the one a group offered in the cycle joins, ``acc`` shows them in rotation and
``acc_slot`` names the one shown.  A group joins its accumulator ``C - 1 + pipeline`` edges
after the edge that takes it.  A cycle without a group writes the accumulator back as it read
it (:class:`hdl.common.accumulator.Accumulator` with cuts), and each dot product is
accumulated exactly as with one context.
"""

from amaranth.hdl import Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from golden.baseline import BaselineConfig
from golden.common import BF16
from golden.common.accumulator import EXP_W, XW

from ..common.accumulator import Accumulator, step_exponent
from ..common.arith import adder_tree, jam_right, tree_reduce
from ..common.formats import layout
from ..common.pipeline import slot_ports, slots, stage
from ..common.signatures import AccumulatorSignature, operand_group

#: cut points of each pipeline depth (see the module docstring)
CUTS = {0: (), 1: ("align",), 2: ("exponent", "align"), 3: ("product", "exponent", "align")}
#: the accumulation loop's cuts for each number of interleaved dot products (module docstring;
#: :data:`hdl.common.accumulator.LOOP_CUTS`)
INTERLEAVED_CUTS = {1: (), 2: ("add",), 3: ("add", "normalize"),
                    4: ("align", "add", "normalize"), 5: ("align", "add", "normalize", "increment"),
                    6: ("exponent", "align", "add", "normalize", "increment")}


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


def _align_members(cfg: BaselineConfig, width: int, exponent: dict) -> dict:
    """The ports of both alignment blocks: the lanes' products, then ``exponent`` (the ports
    that set the alignment), then the sum of the adder tree."""
    L = cfg.lanes
    return {"prod": In(16).array(L), "abe": In(signed(XW)).array(L), "neg": In(L),
            "act": In(L), **exponent, "sum": Out(signed(width + ceil_log2(L)))}


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
        self.width = cfg.frac_bits + cfg.int_bits + 1
        super().__init__(_align_members(cfg, self.width, {"E": In(signed(XW))}))

    def elaborate(self, platform):
        m = Module()
        terms = aligned_terms(m, self.cfg, self, self.E, self.width)
        m.d.comb += self.sum.eq(adder_tree(m, terms, len(self.sum), "ptree"))
        return m


def aligned_terms(m, cfg: BaselineConfig, lanes, E, width: int) -> list:
    """Each active product of ``lanes`` (its ``prod``, ``abe``, ``neg`` and ``act`` ports)
    aligned onto the ``2**(E - F)`` grid (round to odd below it) and negated by its sign: one
    signed ``width``-bit term per lane, 0 for an inactive lane."""
    F = cfg.frac_bits
    pad = max(0, F - 14)
    terms = []
    for i in range(cfg.lanes):
        diff = Signal(signed(XW + 1), name=f"pdiff{i}")
        wide = Signal(16 + pad, name=f"pwide{i}")
        m.d.comb += [diff.eq(E - lanes.abe[i] + max(0, 14 - F)),
                     wide.eq(lanes.prod[i] << pad)]
        mag = jam_right(m, wide, diff.as_unsigned(), name=f"pjam{i}")
        t = Signal(signed(width), name=f"pterm{i}")
        m.d.comb += t.eq(Mux(lanes.act[i], Mux(lanes.neg[i], -mag, mag), 0))
        terms.append(t)
    return terms


class StagedAlignReduce(wiring.Component):
    """:class:`AlignReduce` split across the ``align`` cut of a pipelined PE (module docstring).

    Before the cut each active product is aligned onto the ``2**(Ep - F)`` grid of ``Ep``, the
    largest exponent of the group's products (round to odd below it), and negated by its sign:
    a signed term of ``F + 2`` bits (an aligned product is below ``2**(F + 1)``).  The cut
    registers the terms.  After it, in the accumulation step, every term is shifted right by
    the same ``shift = E - Ep`` (round to odd, two's complement) and the adder tree sums them:
    the sum equals :class:`AlignReduce`'s with the step exponent ``E``.

    Ports
    -----
    prod : In(16) array; abe : In(signed(12)) array; neg, act : In(lanes); Ep : In(signed(12))
        The group's products and their largest exponent, before the cut.
    shift : In(unsigned(13))
        ``E - Ep`` in the accumulation step (after the cut); any value when no lane is active.
    sum : Out(signed(frac_bits + int_bits + 1 + ceil_log2(lanes)))
        With ``cut_exponent`` the terms and ``shift`` are registered before the shifts, with
        ``cut_shift`` the shifted terms before the adder tree (the interleaved PE's
        ``exponent`` and ``align`` cuts inside the loop): ``sum`` comes a cycle later for each.
    """

    def __init__(self, cfg: BaselineConfig, cut_exponent: bool = False,
                 cut_shift: bool = False):
        self.cfg = cfg
        self.cut_exponent = cut_exponent
        self.cut_shift = cut_shift
        self.width = cfg.frac_bits + cfg.int_bits + 1
        super().__init__(_align_members(cfg, self.width,
                                        {"Ep": In(signed(XW)), "shift": In(XW + 1)}))

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        terms = aligned_terms(m, cfg, self, self.Ep, cfg.frac_bits + 2)
        terms = stage(m, {f"term{i}": t for i, t in enumerate(terms)}, name="align")
        terms = stage(m, {**terms, "shift": self.shift}, self.cut_exponent, name="exponent")
        shifted = [jam_right(m, terms[f"term{i}"], terms["shift"], name=f"sjam{i}")
                   for i in range(cfg.lanes)]
        shifted = stage(m, shifted, self.cut_shift, name="shift")
        m.d.comb += self.sum.eq(adder_tree(m, list(shifted), len(self.sum), "ptree"))
        return m


class BF16PE(wiring.Component):
    """Bit-parallel bfloat16 dot-product PE: one group of ``lanes`` pairs per cycle.

    Latency/throughput: the group accepted on ``grp`` at edge ``t`` is accumulated at edge
    ``t + cfg.pipeline`` (0: at that edge); ``acc`` shows the result from the cycle after
    (:func:`golden.baseline.bf16_pe_cycles`; stages in the module docstring).  One group per
    cycle (``grp.ready`` is always 1).

    Parameters
    ----------
    cfg : golden.baseline.BaselineConfig
        ``lanes``, ``frac_bits`` (alignment grid), ``keep_bits``, ``int_bits``, ``out_round``,
        ``pipeline`` (register stages).

    Ports
    -----
    grp : In(operand_group(bf16, lanes))
        Groups ``{a, b, clear}`` (``clear``: start from a zero accumulator, a new dot
        product); exponent field 0 is zero (flush), 255 is outside the contract.
    acc : Out(AccumulatorSignature(keep_bits))
        The accumulator register and its bfloat16 read-out.
    slot, acc_slot : Out(range(contexts)), only with ``cfg.contexts > 1``
        The dot product a group offered in this cycle joins (a free-running counter, 0 after
        reset) and the one ``acc`` shows, ``(slot - pipeline) mod contexts``
        (:func:`golden.baseline.bf16_pe_acc_slot`).
    """

    def __init__(self, cfg: BaselineConfig = BaselineConfig()):
        self.cfg = cfg
        super().__init__({
            "grp": In(operand_group(BF16, cfg.lanes)),
            "acc": Out(AccumulatorSignature(cfg.keep_bits)),
            **slot_ports(cfg.contexts),
        })

    def elaborate(self, platform):
        if self.cfg.pipeline:
            return self._staged()
        cfg = self.cfg
        m = Module()
        L = cfg.lanes
        grp = self.grp
        prods = self._products(m)

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

    def _products(self, m) -> Products:
        """The ``products`` block on the offered group's operands (``grp`` is always ready)."""
        L = self.cfg.lanes
        grp = self.grp
        m.d.comb += grp.ready.eq(1)
        prods = m.submodules.products = Products(L)
        m.d.comb += [prods.a[i].eq(grp.payload.a[i]) for i in range(L)]
        m.d.comb += [prods.b[i].eq(grp.payload.b[i]) for i in range(L)]
        return prods

    def _staged(self):
        """The PE with register stages at the cut points of ``CUTS[cfg.pipeline]``."""
        cfg = self.cfg
        cuts = CUTS[cfg.pipeline]
        m = Module()
        L = cfg.lanes
        grp = self.grp
        prods = self._products(m)
        lanes = {**{f"prod{i}": prods.prod[i] for i in range(L)},
                 **{f"abe{i}": prods.abe[i] for i in range(L)},
                 "neg": prods.neg, "act": prods.act,
                 "valid": grp.valid, "clear": grp.payload.clear}
        p = stage(m, {**lanes, **{f"pexp{i}": prods.pexp[i] for i in range(L)}},
                  "product" in cuts, name="product")

        xp = m.submodules.exponent = _ProductExponent(L)
        m.d.comb += xp.valid.eq(p["act"])
        m.d.comb += [xp.w[i].eq(p[f"pexp{i}"]) for i in range(L)]
        x = stage(m, {**{k: p[k] for k in lanes}, "Ep": xp.Ep, "any": xp.any},
                  "exponent" in cuts, name="exponent")

        C = cfg.contexts
        loop_cuts = INTERLEAVED_CUTS[C]
        al = m.submodules.lanes = StagedAlignReduce(cfg, cut_exponent="exponent" in loop_cuts,
                                                    cut_shift="align" in loop_cuts)
        m.d.comb += [al.neg.eq(x["neg"]), al.act.eq(x["act"]), al.Ep.eq(x["Ep"])]
        m.d.comb += [al.prod[i].eq(x[f"prod{i}"]) for i in range(L)]
        m.d.comb += [al.abe[i].eq(x[f"abe{i}"]) for i in range(L)]
        s = stage(m, {k: x[k] for k in ("Ep", "any", "valid", "clear")}, name="align")

        accu = m.submodules.accumulator = Accumulator(cfg, loop_cuts)
        wiring.connect(m, accu.acc, wiring.flipped(self.acc))
        m.d.comb += [accu.en.eq(s["valid"]), accu.clear.eq(s["clear"])]
        if C > 1:
            slots(m, self.slot, self.acc_slot, C, cfg.pipeline)

        # the step exponent E = max(Ep, eacc) and the terms' shift E - Ep, from one
        # subtraction: the accumulator's exponent wins when it is larger than Ep
        d = Signal(signed(XW + 1), name="eacc_over_ep")
        m.d.comb += d.eq(self.acc.exp - s["Ep"])
        take_acc = Signal(name="take_acc")
        m.d.comb += take_acc.eq(~accu.zero_in & (~s["any"] | (d > 0)))
        E = Signal(signed(XW), name="E")
        m.d.comb += [E.eq(Mux(take_acc, self.acc.exp, Mux(s["any"], s["Ep"], 0))),
                     al.shift.eq(Mux(take_acc & s["any"], d, 0))]
        m.d.comb += [accu.E.eq(E), accu.addend.eq(al.sum)]
        return m


class _ProductExponent(wiring.Component):
    """The largest exponent of a group's products, ``Ep = max(w over valid lanes)`` (0 when no
    lane is valid; ``any``: some lane is), as a block of its own."""

    def __init__(self, lanes: int):
        self.lanes = lanes
        super().__init__({"valid": In(lanes), "w": In(signed(XW)).array(lanes),
                          "any": Out(1), "Ep": Out(signed(XW))})

    def elaborate(self, platform):
        m = Module()
        any_valid, e_max = tree_reduce(m, [(self.valid[i], w) for i, w in enumerate(self.w)],
                                       lambda a, b: a >= b, signed(XW), "pmax")
        m.d.comb += [self.any.eq(any_valid), self.Ep.eq(Mux(any_valid, e_max, 0))]
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


__all__ = ["Products", "AlignReduce", "StagedAlignReduce", "BF16PE"]

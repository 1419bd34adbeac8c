"""Bit-parallel bfloat16 baseline PE (spec ``seed-fpraker.md`` §11.6, §14).

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

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from golden.baseline import BaselineConfig, BaselineTileConfig, MAC16Config, product_config
from golden.common import BF16
from golden.common.fp32 import QNAN, FPAddConfig
from golden.common.accumulator import EXP_W, XW

from .common.accumulator import Accumulator, step_exponent
from .common.arith import adder_tree, jam_right
from .common.formats import decode, layout
from .common.fpadd import FPAdder
from .common.rounding import Round
from .common.signatures import AccumulatorSignature, TileSignature, operand_group


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




# ----------------------------------------------------------------------------------------------
# The baseline tile (spec seed-fpraker.md §5.1, §14)

class Bf16Tile(wiring.Component):
    """The FPRaker paper's bit-parallel bfloat16 baseline tile: ``rows`` x ``cols``
    :class:`BF16PE` (spec ``seed-fpraker.md`` §5.1 "the baseline tile has the same 8×8×8
    shape", §14).  PE ``(r, c)`` computes ``sum_s A[c][s] . B[r][s]``; column ``c``'s A stream
    is broadcast down the column, row ``r``'s B stream along the row.  Bit-exact with
    :func:`golden.baseline.bf16_tile_run`.

    Sub-components: ``pe<r>_<c>`` (:class:`BF16PE`, with its ``products``, ``exponent``,
    ``lanes`` and ``accumulator`` blocks); the join and the error flag are the top's own cells.

    Latency/throughput: the streams are joined — every PE takes one group in a cycle in which
    every ``a[c]`` and every ``b[r]`` stream is valid, and then every stream's ``ready`` is
    asserted together (``ready`` depends on the ``valid`` of all streams, which the stream rules
    allow; no ``valid`` depends on a ``ready``).  The group is accumulated at that clock edge and
    ``out`` shows the result from the next cycle, so a reduction of ``G`` groups streamed
    without bubbles takes ``G`` cycles (:attr:`TileResult.cycles`).

    Parameters
    ----------
    cfg : golden.baseline.BaselineTileConfig
        ``rows``, ``cols`` and the PE fields (:attr:`~golden.baseline.BaselineTileConfig.pe`).

    Ports
    -----
    (:class:`hdl.common.signatures.TileSignature`)
    a : In(stream {a: lanes bf16, clear}) array of ``cols``
        ``clear`` on a group: every PE of column ``c`` starts it from a zero accumulator.
    b : In(stream {b: lanes bf16}) array of ``rows``
    out : Out(bf16) array of ``rows`` x ``cols``
        PE ``(r, c)``'s accumulator read out (``out_round``).
    busy : Out(1)
        A group is being accumulated this cycle (the join fires): a reduction of ``G`` groups
        has exactly ``G`` busy cycles, whatever the bubbles in the streams.
    error : Out(1)
        Sticky (reset clears it): an accepted group held an operand with exponent field 255
        (outside the PEs' contract, spec §1.3); the results of the PEs it reached are undefined.
    """

    def __init__(self, cfg: BaselineTileConfig = BaselineTileConfig()):
        self.cfg = cfg
        super().__init__(TileSignature(cfg.rows, cfg.cols, cfg.lanes))

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        streams = list(self.a) + list(self.b)
        fire = Signal()
        m.d.comb += fire.eq(Cat(*(s.valid for s in streams)).all())
        m.d.comb += [s.ready.eq(fire) for s in streams]
        m.d.comb += self.busy.eq(fire)

        # PE (r, c): column c's A and clear, row r's B; every PE accumulates when the join fires
        for r in range(cfg.rows):
            for c in range(cfg.cols):
                pe = m.submodules[f"pe{r}_{c}"] = BF16PE(cfg.pe)
                a, b = self.a[c].payload, self.b[r].payload
                m.d.comb += [
                    pe.grp.valid.eq(fire),
                    pe.grp.payload.a.eq(a.a),
                    pe.grp.payload.clear.eq(a.clear),
                    pe.grp.payload.b.eq(b.b),
                    self.out[r][c].eq(pe.acc.out),
                ]

        operands = [x for s in self.a for x in s.payload.a] + \
                   [x for s in self.b for x in s.payload.b]
        special = Cat(*(x.exp == 0xFF for x in operands)).any()
        with m.If(fire & special):
            m.d.sync += self.error.eq(1)
        return m


# ----------------------------------------------------------------------------------------------
# FAST's Table IV baselines

class FPMacLane(wiring.Component):
    """One floating-point MAC lane: an exact product into FP32 (the rounding block places it and
    handles FP32's range), NaN/Inf selection, the FP32 adder and the accumulator register.

    Ports
    -----
    a, b : In(fmt); en, clear : In(1); acc : Out(32)
    """

    def __init__(self, cfg: MAC16Config):
        self.cfg = cfg
        lay = layout(cfg.format)
        super().__init__({"a": In(lay), "b": In(lay), "en": In(1), "clear": In(1),
                          "acc": Out(32)})

    def elaborate(self, platform):
        fmt = self.cfg.format
        m = Module()
        a, b = self.a, self.b
        za, sa, ea, ma = decode(m, a, fmt, name="a")
        zb, sb, eb, mb = decode(m, b, fmt, name="b")
        prod = m.submodules.product = Round(product_config(fmt))
        m.d.comb += [prod.i.sig.eq(ma * mb), prod.i.exp.eq(ea + eb - 2 * fmt.bias),
                     prod.i.sign.eq(sa ^ sb)]
        top = fmt.exp_max
        inf_a, inf_b = (a.exp == top) & (a.man == 0), (b.exp == top) & (b.man == 0)
        nan = (((a.exp == top) & (a.man != 0)) | ((b.exp == top) & (b.man != 0))
               | (inf_a & zb) | (inf_b & za))
        p = Signal(32)
        with m.If(nan):
            m.d.comb += p.eq(QNAN)
        with m.Elif(inf_a | inf_b):
            m.d.comb += p.eq(Cat(Const(0x7F800000, 31), sa ^ sb))
        with m.Else():
            m.d.comb += p.eq(prod.o.bits)
        add = m.submodules.add = FPAdder(FPAddConfig("fp32"))
        m.d.comb += [add.a.eq(Mux(self.clear, 0, self.acc)), add.b.eq(p)]
        with m.If(self.en):
            m.d.sync += self.acc.eq(add.sum)
        return m


class MAC16(wiring.Component):
    """FAST's Table IV baseline: ``lanes`` independent MACs, one operand pair per lane per cycle.

    Integer formats: an exact signed product and an ``acc_bits`` two's complement accumulator
    per lane.  Float formats: :class:`FPMacLane` per lane (exact product into FP32, the shared
    FP32 adder).  Bit-exact with :func:`golden.baseline.mac16_run`.

    Latency/throughput: the group accepted on ``grp`` (always ready) is accumulated at that
    edge; ``acc`` shows it from the next cycle.

    Parameters
    ----------
    cfg : golden.baseline.MAC16Config

    Ports
    -----
    grp : In(operand_group(fmt, lanes))
        ``a``, ``b`` (``lanes`` operands each) and ``clear`` (restart from 0).
    acc : Out(32) array of ``lanes``
        The accumulators (FP32 bits, or ``acc_bits``-bit two's complement).
    """

    def __init__(self, cfg: MAC16Config = MAC16Config()):
        self.cfg = cfg
        super().__init__({
            "grp": In(operand_group(cfg.fmt, cfg.lanes)),
            "acc": Out(32 if cfg.is_float else cfg.acc_bits).array(cfg.lanes),
        })

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        grp = self.grp
        m.d.comb += grp.ready.eq(1)
        for i in range(cfg.lanes):
            a, b = grp.payload.a[i], grp.payload.b[i]
            if cfg.is_float:
                lane = m.submodules[f"lane{i}"] = FPMacLane(cfg)
                m.d.comb += [lane.a.eq(a), lane.b.eq(b), lane.en.eq(grp.valid),
                             lane.clear.eq(grp.payload.clear), self.acc[i].eq(lane.acc)]
            else:
                acc = self.acc[i]
                with m.If(grp.valid):
                    m.d.sync += acc.eq(Mux(grp.payload.clear, 0, acc) + a * b)
        return m


__all__ = ["Products", "AlignReduce", "BF16PE", "Bf16Tile", "FPMacLane", "MAC16"]

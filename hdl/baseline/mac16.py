"""FAST's Table IV baselines (unit ``baseline.mac16``): 16 integer or floating-point MAC lanes.

Pipeline stages (``cfg.pipeline``, 0..2)
----------------------------------------
``pipeline = 0`` is the paper's single-cycle MAC.  Stages go on the product side only, before
the accumulator; the accumulation (the FP32 adder or the integer adder, and the accumulator
register) stays one cycle, so every result is bit-exact with the unpipelined MAC and only
arrives later:

- ``product`` (depths 1 and 2): the finished product — FP32 bits after the product's placement
  by the rounding block and the NaN/Inf selection, or the exact integer product — registered
  with the group's ``valid`` and ``clear``;
- ``multiply`` (depth 2): floats: the significand product, the exponent sum, the product's
  sign and its NaN/Inf flags, before the rounding block; integers: the operands, before the
  multiplier.

A group accepted at edge ``t`` enters the accumulators at edge ``t + pipeline``
(:func:`golden.baseline.mac16_cycles`).  The FP32 accumulation loop (adder and register) bounds
the clock of the float formats at every depth.

Interleaved sums (``cfg.contexts``, 1..6; float formats)
-------------------------------------------------------
Stages in front of the loop cannot shorten it.  With ``C = contexts > 1`` the FP32 adder takes
``C - 1`` of its own register stages (:data:`hdl.common.fp_add.CUTS`), so the loop — the
``clear`` gate, the adder and the accumulator register — is ``C`` registers long and holds
``C`` independent sums, one per slot, each passing the adder once every ``C`` cycles (C-slow
retiming).  A free-running counter names the slot of each cycle (``slot``); the group offered
in a cycle joins that slot's sum.  An idle cycle adds ``-0`` (``x + (-0) = x`` for every value
the accumulator can hold: ±0, normals, ±Inf and the canonical NaN), so no hold multiplexer
enters the loop; the addend (the product or ``-0``) and the restart (``valid & clear``) are
formed before the ``product`` register.  The adder's stage registers hold no sum after reset,
so the accumulator loads +0 until ``contexts - 1`` cycles have passed (a gate at the end of the
loop; :func:`hdl.common.fp_add.interleaved_sum`).  Each sum is rounded exactly as the
one-context MAC rounds it.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from golden.baseline import MAC16Config, product_config
from golden.common.fp_add import QNAN, FPAddConfig

from ..common.formats import decode, layout
from ..common.fp_add import FPAdder, interleaved_sum
from ..common.pipeline import slot_ports, slots, stage
from ..common.rounding import Round
from ..common.signatures import operand_group

#: cut points of each pipeline depth (see the module docstring)
CUTS = {0: (), 1: ("product",), 2: ("multiply", "product")}


class FPMacLane(wiring.Component):
    """One floating-point MAC lane: an exact product into FP32 (the rounding block places it and
    handles FP32's range), NaN/Inf selection, the FP32 adder and the accumulator register.

    Latency: ``en``/``clear`` and the operands of a cycle reach the accumulator
    ``cfg.pipeline`` edges later (stages in the module docstring); ``acc`` shows the sum from
    the cycle after.

    With ``cfg.contexts = C > 1`` the adder has ``C - 1`` stages inside the loop (module
    docstring): a cycle's operands join the sum that leaves the adder in that cycle, ``acc``
    shows the sums in rotation, and an idle cycle adds ``-0``.

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
        cuts = CUTS[self.cfg.pipeline]
        m = Module()
        a, b = self.a, self.b
        za, sa, ea, ma = decode(m, a, fmt, name="a")
        zb, sb, eb, mb = decode(m, b, fmt, name="b")
        top = fmt.exp_max
        inf_a, inf_b = (a.exp == top) & (a.man == 0), (b.exp == top) & (b.man == 0)
        nan = (((a.exp == top) & (a.man != 0)) | ((b.exp == top) & (b.man != 0))
               | (inf_a & zb) | (inf_b & za))
        mul = stage(m, {"sig": ma * mb, "exp": ea + eb - 2 * fmt.bias, "sign": sa ^ sb,
                        "inf": inf_a | inf_b, "en": self.en, "clear": self.clear},
                    "multiply" in cuts, name="multiply")
        sig, exp, sign, inf, en, clear = (mul["sig"], mul["exp"], mul["sign"], mul["inf"],
                                          mul["en"], mul["clear"])
        if "multiply" in cuts:
            nan = stage(m, {"nan": nan}, True, name="multiply")["nan"]
        prod = m.submodules.product = Round(product_config(fmt))
        m.d.comb += [prod.i.sig.eq(sig), prod.i.exp.eq(exp),
                     prod.i.sign.eq(sign)]
        p = Signal(32)
        with m.If(nan):
            m.d.comb += p.eq(QNAN)
        with m.Elif(inf):
            m.d.comb += p.eq(Cat(Const(0x7F800000, 31), sign))
        with m.Else():
            m.d.comb += p.eq(prod.o.bits)
        C = self.cfg.contexts
        if C == 1:
            add = m.submodules.add = FPAdder(FPAddConfig("fp32"))
            prd = stage(m, {"p": p, "en": en, "clear": clear}, "product" in cuts,
                        name="product")
            p, en, clear = prd["p"], prd["en"], prd["clear"]
            m.d.comb += [add.a.eq(Mux(clear, 0, self.acc)), add.b.eq(p)]
            with m.If(en):
                m.d.sync += self.acc.eq(add.sum)
            return m
        # C-slow loop: every cycle passes one sum through the adder; an idle cycle adds -0.
        # The addend and the restart are decided before the product register, so that only
        # the restart's gate lies between a register and the adder
        prd = stage(m, {"b": Mux(en, p, 0x80000000), "restart": en & clear}, "product" in cuts,
                    name="product")
        interleaved_sum(m, self.acc, prd["b"], prd["restart"], C)
        return m


class MAC16(wiring.Component):
    """FAST's Table IV baseline: ``lanes`` independent MACs, one operand pair per lane per cycle.

    Integer formats: an exact signed product and an ``acc_bits`` two's complement accumulator
    per lane.  Float formats: :class:`FPMacLane` per lane (exact product into FP32, the shared
    FP32 adder).  Bit-exact with :func:`golden.baseline.mac16_run`.

    Latency/throughput: one group per cycle (``grp`` is always ready).  The group accepted at
    edge ``t`` is accumulated at edge ``t + cfg.pipeline`` (0: at that edge); ``acc`` shows it
    from the cycle after (:func:`golden.baseline.mac16_cycles`; stages in the module
    docstring).

    Parameters
    ----------
    cfg : golden.baseline.MAC16Config

    Ports
    -----
    grp : In(operand_group(fmt, lanes))
        ``a``, ``b`` (``lanes`` operands each) and ``clear`` (restart from 0).
    acc : Out(32) array of ``lanes``
        The accumulators (FP32 bits, or ``acc_bits``-bit two's complement).
    slot, acc_slot : Out(range(contexts)), only with ``cfg.contexts > 1``
        The sum a group offered in this cycle joins (a free-running counter, 0 after reset),
        and the sum ``acc`` shows in this cycle, ``(slot - pipeline) mod contexts``
        (:func:`golden.baseline.mac16_acc_slot`).  A group joins its slot's sum
        ``contexts - 1 + pipeline`` edges after the edge that takes it.
    """

    def __init__(self, cfg: MAC16Config = MAC16Config()):
        self.cfg = cfg
        super().__init__({
            "grp": In(operand_group(cfg.fmt, cfg.lanes)),
            "acc": Out(32 if cfg.is_float else cfg.acc_bits).array(cfg.lanes),
            **slot_ports(cfg.contexts),
        })

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        grp = self.grp
        m.d.comb += grp.ready.eq(1)
        if cfg.contexts > 1:
            slots(m, self.slot, self.acc_slot, cfg.contexts, cfg.pipeline)
        for i in range(cfg.lanes):
            a, b = grp.payload.a[i], grp.payload.b[i]
            if cfg.is_float:
                lane = m.submodules[f"lane{i}"] = FPMacLane(cfg)
                m.d.comb += [lane.a.eq(a), lane.b.eq(b), lane.en.eq(grp.valid),
                             lane.clear.eq(grp.payload.clear), self.acc[i].eq(lane.acc)]
            else:
                acc = self.acc[i]
                cuts = CUTS[cfg.pipeline]
                ops = stage(m, {"a": a, "b": b, "valid": grp.valid,
                                "clear": grp.payload.clear},
                            "multiply" in cuts, name=f"operands{i}")
                a, b, valid, clear = ops["a"], ops["b"], ops["valid"], ops["clear"]
                prd = stage(m, {"p": a * b, "valid": valid, "clear": clear}, "product" in cuts,
                            name=f"product{i}")
                prod, valid, clear = prd["p"], prd["valid"], prd["clear"]
                with m.If(valid):
                    m.d.sync += acc.eq(Mux(clear, 0, acc) + prod)
        return m


__all__ = ["FPMacLane", "MAC16"]

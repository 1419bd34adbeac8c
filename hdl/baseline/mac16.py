"""FAST's Table IV baselines (unit ``baseline.mac16``): 16 integer or floating-point MAC lanes."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from golden.baseline import MAC16Config, product_config
from golden.common.fp_add import QNAN, FPAddConfig

from ..common.formats import decode, layout
from ..common.fp_add import FPAdder
from ..common.rounding import Round
from ..common.signatures import operand_group




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


__all__ = ["FPMacLane", "MAC16"]

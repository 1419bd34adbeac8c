"""Equinox's BFP quantizer (registry unit ``equinox.quantizer``; spec ``seed-equinox.md`` §1.4,
§1.5, §1.9).

Bit-exact with :func:`golden.equinox.quantize_stream` (and so :func:`golden.equinox.hbfp.bfp_quantize`).
Two pipeline stages behind a valid/ready input, one block per cycle:

1. decode with DAZ (subnormals read as zero), the compare-and-forward tree of the lanes'
   exponent fields to the shared exponent (the block's largest, A3), the noise per lane for
   stochastic rounding — the injected bits or the next draw of the lane's LFSR (stepped
   ``rbits`` times, unrolled; it advances only for blocks that use it) — and the sticky error
   for Inf/NaN inputs;
2. per lane the exponent difference and the shared rounding block
   (:class:`hdl.common.rounding.Round`, configured by :func:`golden.equinox.hbfp.quant_config`: a
   clamped shifter with the rounding increment and saturation to ``m`` bits).  Stochastic
   rounding keeps ``rbits`` more bits (floor), adds the noise, shifts it out and saturates:
   ``M = floor(s + R / 2**rbits)`` (§1.5).

The output register holds the hbfp block (``exp``, ``man[w]``, the layout of
:attr:`golden.equinox.QuantizerConfig.out_format`).
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from golden.common.lfsr import lane_seeds
from golden.equinox.quantizer import QuantizerConfig
from golden.equinox.hbfp import quant_config

from ..common.arith import tree_reduce
from ..common.formats import decode, layout
from ..common.lfsr import lfsr_steps
from ..common.rounding import Round


def input_layout(cfg: QuantizerConfig) -> data.StructLayout:
    """One block to quantize: ``w`` values of the input format; for stochastic rounding also
    ``rand_en`` with ``rand`` (injected noise, ``rbits`` bits per lane)."""
    fields = {"x": data.ArrayLayout(layout(cfg.in_format), cfg.w)}
    if cfg.rounding == "stoch":
        fields.update({"rand_en": 1, "rand": data.ArrayLayout(cfg.rbits, cfg.w)})
    return data.StructLayout(fields)


def output_layout(cfg: QuantizerConfig) -> data.StructLayout:
    """One hbfp block: the shared exponent and ``w`` two's complement mantissas."""
    return layout(cfg.out_format)


class Quantizer(wiring.Component):
    """FP32/bf16 → hbfp block quantizer: one block of ``w`` values per cycle.

    Latency: an accepted block appears on ``o`` two cycles later.  Throughput: one block per
    cycle while ``o`` is ready; back-pressure stalls the pipeline
    (``i.ready = ~o.valid | o.ready``).

    Parameters
    ----------
    cfg : golden.equinox.QuantizerConfig
        ``w`` (lanes), ``m`` (mantissa bits), ``in_fmt``, ``rounding``, ``rbits``.

    Ports
    -----
    i : In(stream of :func:`input_layout`)
    o : Out(stream of :func:`output_layout`)
    error : Out(1)
        Sticky: a block with an Inf or NaN value was accepted (its output is unspecified).
    """

    def __init__(self, cfg: QuantizerConfig = QuantizerConfig()):
        self.cfg = cfg
        super().__init__({
            "i": In(stream.Signature(input_layout(cfg))),
            "o": Out(stream.Signature(output_layout(cfg))),
            "error": Out(1),
        })

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        w, fmt = cfg.w, cfg.in_format
        stoch = cfg.rounding == "stoch"
        rbits = cfg.rbits if stoch else 0
        p = self.i.payload
        en = Signal()           # the pipeline advances
        m.d.comb += [en.eq(~self.o.valid | self.o.ready), self.i.ready.eq(en)]
        take = self.i.valid & en

        # ---- stage 1: decode, exponent tree, noise, LFSRs, error
        v1 = Signal()
        r1_emax = Signal(8)
        r1_e = [Signal(8, name=f"r1_e{j}") for j in range(w)]
        r1_sig = [Signal(fmt.man_bits + 1, name=f"r1_sig{j}") for j in range(w)]
        r1_s = Signal(w)
        r1_r = [Signal(rbits, name=f"r1_r{j}") for j in range(w)] if stoch else []
        lanes = [decode(m, p.x[j], fmt, name=f"x{j}") for j in range(w)]
        one = Const(1, 1)
        _, emax = tree_reduce(m, [(one, e) for _, _, e, _ in lanes], lambda a, b: a >= b, 8,
                              "cf")
        for j, (_, sign, e, sig) in enumerate(lanes):
            with m.If(en):
                m.d.sync += [r1_e[j].eq(e), r1_sig[j].eq(sig), r1_s[j].eq(sign)]
            if stoch:
                lfsr = Signal(16, name=f"lfsr{j}", init=lane_seeds(w)[j])
                nxt = lfsr_steps(m, lfsr, rbits, f"lfsr{j}")
                with m.If(take & ~p.rand_en):
                    m.d.sync += lfsr.eq(nxt)
                with m.If(en):
                    m.d.sync += r1_r[j].eq(Mux(p.rand_en, p.rand[j], nxt[16 - rbits:]))
        with m.If(en):
            m.d.sync += [v1.eq(self.i.valid), r1_emax.eq(emax)]
        with m.If(take & Cat(*(p.x[j].exp == fmt.exp_max for j in range(w))).any()):
            m.d.sync += self.error.eq(1)

        # ---- stage 2: exponent difference, the rounding block per lane, output register
        qcfg = quant_config(cfg.m, cfg.rounding, rbits)
        o = self.o.payload
        hi = (1 << (cfg.m - 1)) - 1
        for j in range(w):
            rnd = m.submodules[f"round{j}"] = Round(qcfg)
            sig = Signal(signed(25), name=f"sig{j}")
            exp = Signal(signed(qcfg.exp_width), name=f"qexp{j}")
            # the 24-bit significand of FP32 (bf16's 8 bits sit at its top): value / LSB =
            # sig * 2**(e - emax - (25 - m)) (golden.equinox.hbfp.quant_config)
            mag = r1_sig[j] << (24 - len(r1_sig[j]))
            m.d.comb += [sig.eq(Mux(r1_s[j], -mag, mag)),
                         exp.eq(r1_e[j] - r1_emax), rnd.i.sig.eq(sig), rnd.i.exp.eq(exp)]
            word = rnd.o.bits.as_signed()
            if stoch:
                total = Signal(signed(cfg.m + rbits + 1), name=f"sr{j}")
                shifted = Signal(signed(cfg.m + 1), name=f"srq{j}")
                m.d.comb += [total.eq(word + r1_r[j]), shifted.eq(total >> rbits)]
                result = Mux(shifted > hi, hi, shifted)
            else:
                result = word
            with m.If(en):
                m.d.sync += o.man[j].eq(result)
        with m.If(en):
            m.d.sync += [self.o.valid.eq(v1), o.exp.eq(r1_emax)]
        return m


__all__ = ["Quantizer", "input_layout", "output_layout"]

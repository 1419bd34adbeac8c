"""FAST's FP32 → BFP converter (registry unit ``fast.converter``; spec ``seed-fast.md`` §3).

Bit-exact with :func:`golden.fast.numerics.convert_groups` (groups) and :class:`golden.fast.numerics.LaneRNG`
(its LFSR bank).  Three pipeline stages behind a valid/ready input, one group per cycle:

1. decode with DAZ, the compare-and-forward tree of the lanes' exponents (and ``exp_floor``) to
   the shared exponent, the noise per lane — the injected bytes, the next draw of the lane's
   LFSR (stepped eight times, unrolled; it advances only for gradient groups without injected
   noise) or 0 for truncation — and the sticky error for Inf/NaN inputs;
2. per lane a subtractor ``d = Es - E`` and the shared rounding block
   (:class:`hdl.common.rounding.Round`, the golden quantizer's own configuration): a clamped
   barrel shifter keeping ``m + 8`` bits, the SR adder, saturation at ``2**m - 1``;
3. chunk exponents ``Es - 2c`` and the improvement partial sums (adder trees).

Truncation is stochastic rounding with zero noise, so one datapath serves both (§3: "summed
with the mantissas").
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for

from golden.common import FP32
from golden.fast.numerics import SR_BITS, ConverterConfig, _quant_config, lane_seeds

from ..common.arith import adder_tree, tree_reduce
from ..common.formats import decode, layout
from ..common.lfsr import lfsr_steps
from ..common.rounding import Round

#: width of the chunk exponents (``Es - 2c`` may go below 0, spec §4.3)
CHUNK_EXP_BITS = 10


def input_layout(cfg: ConverterConfig) -> data.StructLayout:
    """One group to convert: the values, whether it is a gradient (SR), noise injection, the
    exponent floor."""
    return data.StructLayout({
        "x": data.ArrayLayout(layout(FP32), cfg.group),
        "is_grad": 1,
        "rand_en": 1,
        "rand": data.ArrayLayout(SR_BITS, cfg.group),
        "exp_floor": 8,
    })


def output_layout(cfg: ConverterConfig) -> data.StructLayout:
    """One converted group (§3's output ports)."""
    g = cfg.group
    return data.StructLayout({
        "es": 8,
        "sign": g,
        "q": data.ArrayLayout(cfg.m, g),
        "chunk_exp": data.ArrayLayout(signed(CHUNK_EXP_BITS), cfg.chunks),
        "num": bits_for(3 * g),
        "den": bits_for(((1 << (cfg.m - 2)) - 1) * g),
    })


class Converter(wiring.Component):
    """FP32 → BFP converter: one group of ``group`` FP32 values per cycle (spec §3).

    Latency: an accepted group appears on ``o`` three cycles later (the output register is the
    last stage).  Throughput: one group per cycle while ``o`` is ready; back-pressure stalls the
    whole pipeline (``i.ready = ~o.valid | o.ready``).

    Parameters
    ----------
    cfg : golden.fast.numerics.ConverterConfig
        ``group`` (lanes, 16) and ``m`` (output bits, 4).

    Ports
    -----
    i : In(stream of :func:`input_layout`)
        ``x`` (FP32 values), ``is_grad`` (stochastic rounding; else truncation), ``rand_en``
        with ``rand`` (inject the noise bytes instead of drawing from the LFSRs), ``exp_floor``.
    o : Out(stream of :func:`output_layout`)
        ``es``, ``sign``, ``q``, ``chunk_exp`` (``es - 2c``), ``num`` = sum of ``q & 3``,
        ``den`` = sum of ``q >> 2``.
    error : Out(1)
        Sticky: a group with an Inf or NaN value was accepted (its output is unspecified).
    """

    def __init__(self, cfg: ConverterConfig = ConverterConfig()):
        self.cfg = cfg
        super().__init__({
            "i": In(stream.Signature(input_layout(cfg))),
            "o": Out(stream.Signature(output_layout(cfg))),
            "error": Out(1),
        })

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        g = cfg.group
        p = self.i.payload
        en = Signal()           # the pipeline advances
        m.d.comb += [en.eq(~self.o.valid | self.o.ready), self.i.ready.eq(en)]
        take = self.i.valid & en

        # ---- stage 1: decode, exponent tree, noise, LFSRs, error
        v1 = Signal()
        r1_es = Signal(8)
        r1_e = [Signal(8, name=f"r1_e{j}") for j in range(g)]
        r1_sig = [Signal(24, name=f"r1_sig{j}") for j in range(g)]
        r1_s = Signal(g)
        r1_r = [Signal(SR_BITS, name=f"r1_r{j}") for j in range(g)]
        lanes = [decode(m, p.x[j], FP32, name=f"x{j}") for j in range(g)]
        # the compare-and-forward tree (every input valid: zeros carry exponent 0)
        one = Const(1, 1)
        _, es_max = tree_reduce(m, [(one, e) for _, _, e, _ in lanes] + [(one, p.exp_floor)],
                                lambda a, b: a >= b, 8, "cf")
        step = p.is_grad & ~p.rand_en
        for j, (_, sign, e, sig) in enumerate(lanes):
            lfsr = Signal(16, name=f"lfsr{j}", init=lane_seeds(g)[j])
            nxt = lfsr_steps(m, lfsr, SR_BITS, f"lfsr{j}")
            with m.If(take & step):
                m.d.sync += lfsr.eq(nxt)
            noise = Mux(p.is_grad, Mux(p.rand_en, p.rand[j], nxt[16 - SR_BITS:]), 0)
            with m.If(en):
                m.d.sync += [r1_e[j].eq(e), r1_sig[j].eq(sig), r1_s[j].eq(sign),
                             r1_r[j].eq(noise)]
        with m.If(en):
            m.d.sync += [v1.eq(self.i.valid), r1_es.eq(es_max)]
        with m.If(take & Cat(*(p.x[j].exp == 0xFF for j in range(g))).any()):
            m.d.sync += self.error.eq(1)

        # ---- stage 2: d = Es - E, shift, SR add, saturate (the rounding block per lane)
        v2 = Signal()
        r2_es = Signal(8)
        r2_s = Signal(g)
        r2_q = [Signal(cfg.m, name=f"r2_q{j}") for j in range(g)]
        qcfg = _quant_config(cfg.m, "sr")
        for j in range(g):
            rnd = m.submodules[f"quant{j}"] = Round(qcfg)
            d = Signal(9, name=f"d{j}")             # Es >= E: the subtractor cannot go negative
            exp = Signal(signed(qcfg.exp_width), name=f"qexp{j}")
            # value / LSB = sig * 2**(m - 1 - d - 23)
            m.d.comb += [d.eq(r1_es - r1_e[j]), exp.eq(cfg.m - 1 - d.as_signed()),
                         rnd.i.sig.eq(r1_sig[j]), rnd.i.sign.eq(r1_s[j]), rnd.i.exp.eq(exp),
                         rnd.i.rand.eq(r1_r[j])]
            with m.If(en):
                m.d.sync += r2_q[j].eq(rnd.o.sig)
        with m.If(en):
            m.d.sync += [v2.eq(v1), r2_es.eq(r1_es), r2_s.eq(r1_s)]

        # ---- stage 3: chunk exponents, improvement partial sums, output register
        o = self.o.payload
        num = adder_tree(m, [r2_q[j][:2] for j in range(g)], unsigned(len(o.num)), "num")
        den = adder_tree(m, [r2_q[j][2:] for j in range(g)], unsigned(len(o.den)), "den")
        with m.If(en):
            m.d.sync += [self.o.valid.eq(v2), o.es.eq(r2_es), o.sign.eq(r2_s), o.num.eq(num),
                         o.den.eq(den)]
            m.d.sync += [o.q[j].eq(r2_q[j]) for j in range(g)]
            m.d.sync += [o.chunk_exp[c].eq(r2_es - 2 * c) for c in range(cfg.chunks)]
        return m


__all__ = ["Converter", "input_layout", "output_layout", "CHUNK_EXP_BITS"]

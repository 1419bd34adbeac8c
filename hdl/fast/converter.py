"""FAST's FP32 → BFP converter (registry unit ``fast.converter``; spec ``docs/specs/fast.md`` §3).

Bit-exact with :func:`golden.fast.converter.convert_groups` (groups) and :class:`golden.fast.numerics.LaneRNG`
(its LFSR bank).  Three pipeline stages behind a valid/ready input, one group per cycle; the
first two are the shared FP → BFP pipeline (:class:`hdl.common.bfp.BFPPipeline`):

1. decode with DAZ, the compare-and-forward tree of the lanes' exponents (and ``exp_floor``) to
   the shared exponent, the noise per lane — the injected bytes, the next draw of the lane's
   LFSR (stepped eight times, unrolled; it advances only for gradient groups without injected
   noise) or 0 for truncation — and the sticky error for Inf/NaN inputs;
2. per lane the exponent difference ``E - Es`` and the shared rounding block
   (:class:`hdl.common.rounding.Round`, the golden quantizer's own configuration): a clamped
   barrel shifter keeping ``m + 8`` bits, the SR adder, saturation at ``2**m - 1``;
3. chunk exponents ``Es - 2c`` and the improvement partial sums (adder trees).

Truncation is stochastic rounding with zero noise, so one datapath serves both (§3: "summed
with the mantissas").

Pipeline stages (``cfg.pipeline``, 0..4; :data:`CUTS`)
------------------------------------------------------
``pipeline = 0`` is the paper's three-stage converter.  Extra stages are cut points of the
shared pipeline (:data:`hdl.common.bfp.CUT_POINTS`), taken in the order that shortens this
unit's longest stage first; every stage advances with the rest of the pipeline, so
back-pressure still stalls it as a whole and it still takes one group per cycle:

- ``difference`` (depths 1..4): after the exponent differences and the rounding block's input
  magnitudes, before the rounding block (stage 2 was the longest: difference, shifter and SR
  adder);
- ``tree`` (depths 2..4): half-way up the exponent tree of stage 1 (the lanes' exponents and
  ``exp_floor``);
- ``normalize`` (depths 3, 4): inside the rounding block, after its shifter and sticky;
- ``increment`` (depth 4): inside the rounding block, after the SR increment, before the
  saturation.

An accepted group appears on ``o`` ``3 + pipeline`` cycles later, and a group with an Inf or
NaN sets ``error`` ``pipeline`` advances after the cycle after it is taken
(:class:`golden.fast.converter.ConverterSim`, the cycle model).
"""

from amaranth.hdl import Signal, signed, unsigned
from amaranth.lib import data
from amaranth.utils import bits_for

from golden.common import FP32
from golden.fast.numerics import SR_BITS, _quant_config, lane_seeds
from golden.fast.converter import ConverterConfig

from ..common.arith import adder_tree
from ..common.bfp import BFPPipeline, BlockConverter
from ..common.formats import layout

#: width of the chunk exponents (``Es - 2c`` may go below 0, spec §4.3)
CHUNK_EXP_BITS = 10

#: cut points of each pipeline depth (see the module docstring)
CUTS = {0: (), 1: ("difference",), 2: ("difference", "tree"),
        3: ("difference", "tree", "normalize"),
        4: ("difference", "tree", "normalize", "increment")}


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


class Converter(BlockConverter):
    """FP32 → BFP converter: one group of ``group`` FP32 values per cycle (spec §3).

    Latency: an accepted group appears on ``o`` ``3 + cfg.pipeline`` cycles later (the output
    register is the last stage; stages in the module docstring).  Throughput: one group per
    cycle while ``o`` is ready; back-pressure stalls the whole pipeline
    (``i.ready = ~o.valid | o.ready``).

    Parameters
    ----------
    cfg : golden.fast.converter.ConverterConfig
        ``group`` (lanes, 16), ``m`` (output bits, 4) and ``pipeline`` (extra stages, 0).

    Ports
    -----
    i : In(stream of :func:`input_layout`)
        ``x`` (FP32 values), ``is_grad`` (stochastic rounding; else truncation), ``rand_en``
        with ``rand`` (inject the noise bytes instead of drawing from the LFSRs), ``exp_floor``.
    o : Out(stream of :func:`output_layout`)
        ``es``, ``sign``, ``q``, ``chunk_exp`` (``es - 2c``), ``num`` = sum of ``q & 3``,
        ``den`` = sum of ``q >> 2``.
    error : Out(1)
        As :class:`hdl.common.bfp.BlockConverter` (a group is a block).
    """

    def __init__(self, cfg: ConverterConfig = ConverterConfig()):
        super().__init__(cfg, input_layout, output_layout)

    def pipeline(self):
        """Stage 1: decode, exponent tree with the floor, noise for gradient groups, error (with
        the tree cut: two stages); stage 2: Es - E, shift, SR add, saturate (the rounding block
        per lane; the difference, normalize and increment cuts add stages)."""
        cfg = self.cfg
        p = self.i.payload
        # value / LSB = sig * 2**(m - 1 - (Es - E) - 23): the golden quantizer's rounding block
        bfp = BFPPipeline(cfg.group, FP32, _quant_config(cfg.m, "sr"), exp_offset=cfg.m - 1,
                          noise_bits=SR_BITS, seeds=lane_seeds(cfg.group),
                          cuts=CUTS[cfg.pipeline])
        return bfp, {"floor": p.exp_floor, "noise_en": p.is_grad, "inject": p.rand_en,
                     "rand": p.rand}

    def output(self, m, s2, en):
        """Stage 2's registers, then stage 3: chunk exponents, improvement partial sums, output
        register."""
        cfg = self.cfg
        g = cfg.group
        # ---- stage 2's registers
        v2 = Signal()
        r2_es = Signal(8)
        r2_s = Signal(g)
        r2_q = [Signal(cfg.m, name=f"r2_q{j}") for j in range(g)]
        with m.If(en):
            m.d.sync += [v2.eq(s2.valid), r2_es.eq(s2.es), r2_s.eq(s2.sign)]
            m.d.sync += [r2_q[j].eq(s2.man[j]) for j in range(g)]

        # ---- stage 3: chunk exponents, improvement partial sums, output register
        o = self.o.payload
        num = adder_tree(m, [r2_q[j][:2] for j in range(g)], unsigned(len(o.num)), "num")
        den = adder_tree(m, [r2_q[j][2:] for j in range(g)], unsigned(len(o.den)), "den")
        with m.If(en):
            m.d.sync += [self.o.valid.eq(v2), o.es.eq(r2_es), o.sign.eq(r2_s), o.num.eq(num),
                         o.den.eq(den)]
            m.d.sync += [o.q[j].eq(r2_q[j]) for j in range(g)]
            m.d.sync += [o.chunk_exp[c].eq(r2_es - 2 * c) for c in range(cfg.chunks)]


__all__ = ["Converter", "input_layout", "output_layout", "CHUNK_EXP_BITS"]

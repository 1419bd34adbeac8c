"""Equinox's BFP quantizer (registry unit ``equinox.quantizer``; spec ``docs/specs/equinox.md`` §1.4,
§1.5, §1.9).

Bit-exact with :func:`golden.equinox.quantize_stream` (and so :func:`golden.equinox.hbfp.bfp_quantize`).
Two pipeline stages behind a valid/ready input, one block per cycle, both the shared FP → BFP
pipeline (:class:`hdl.common.bfp.BFPPipeline`):

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

Pipeline stages (``cfg.pipeline``, 0..4; :data:`CUTS`)
------------------------------------------------------
``pipeline = 0`` is the two-stage quantizer.  Extra stages are cut points of the shared
pipeline (:data:`hdl.common.bfp.CUT_POINTS`), taken in the order that shortens this unit's
longest stage first; every stage advances with the rest of the pipeline, so back-pressure still
stalls it as a whole and it still takes one block per cycle:

- ``difference`` (depths 1..4): after the exponent differences and the two's complement
  significands, before the rounding block (stage 2 is the longest: difference, shifter,
  increment, saturation and, for stochastic rounding, the noise adder);
- ``normalize`` (depths 2..4): inside the rounding block, after its shifter and sticky;
- ``increment`` (depths 3, 4): inside the rounding block, after the rounding increment, before
  the saturation (and the noise adder);
- ``tree`` (depth 4): half-way up the exponent tree of stage 1 (for wide blocks).

An accepted block appears on ``o`` ``2 + pipeline`` cycles later, and a block with an Inf or
NaN sets ``error`` ``pipeline`` advances after the cycle after it is taken
(:class:`golden.equinox.QuantizerSim`, the cycle model).
"""

from amaranth.lib import data

from golden.common.lfsr import lane_seeds
from golden.equinox.quantizer import QuantizerConfig
from golden.equinox.hbfp import quant_config

from ..common.bfp import BFPPipeline, BlockConverter
from ..common.formats import layout

#: cut points of each pipeline depth (see the module docstring)
CUTS = {0: (), 1: ("difference",), 2: ("difference", "normalize"),
        3: ("difference", "normalize", "increment"),
        4: ("difference", "normalize", "increment", "tree")}


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


class Quantizer(BlockConverter):
    """FP32/bf16 → hbfp block quantizer: one block of ``w`` values per cycle.

    Latency: an accepted block appears on ``o`` ``2 + cfg.pipeline`` cycles later (stages in
    the module docstring).  Throughput: one block per cycle while ``o`` is ready;
    back-pressure stalls the pipeline (``i.ready = ~o.valid | o.ready``).

    Parameters
    ----------
    cfg : golden.equinox.QuantizerConfig
        ``w`` (lanes), ``m`` (mantissa bits), ``in_fmt``, ``rounding``, ``rbits``,
        ``pipeline`` (extra stages).

    Ports
    -----
    i, o, error
        As :class:`hdl.common.bfp.BlockConverter`: streams of :func:`input_layout` and
        :func:`output_layout`, the sticky Inf/NaN flag.
    """

    def __init__(self, cfg: QuantizerConfig = QuantizerConfig()):
        super().__init__(cfg, input_layout, output_layout)

    def pipeline(self):
        """Stage 1: decode, exponent tree, noise (injected with ``rand_en``), LFSRs, error (with
        the tree cut: two stages); stage 2: exponent difference, the rounding block per lane
        (the difference, normalize and increment cuts add stages)."""
        cfg = self.cfg
        stoch = cfg.rounding == "stoch"
        rbits = cfg.rbits if stoch else 0
        p = self.i.payload
        # the 24-bit significand of FP32 (bf16's 8 bits sit at its top): value / LSB =
        # sig * 2**(E - Es - (25 - m)) (golden.equinox.hbfp.quant_config)
        bfp = BFPPipeline(cfg.w, cfg.in_format, quant_config(cfg.m, cfg.rounding, rbits),
                          noise_bits=rbits, seeds=lane_seeds(cfg.w) if stoch else (),
                          cuts=CUTS[cfg.pipeline])
        return bfp, ({"inject": p.rand_en, "rand": p.rand} if stoch else {})

    def output(self, m, s2, en):
        """Stage 2's output register: the shared exponent and the mantissas."""
        o = self.o.payload
        with m.If(en):
            m.d.sync += [self.o.valid.eq(s2.valid), o.exp.eq(s2.es)]
            m.d.sync += [o.man[j].eq(s2.man[j]) for j in range(self.cfg.w)]


__all__ = ["Quantizer", "input_layout", "output_layout"]

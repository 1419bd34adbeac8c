"""The BFP quantizer as a unit (registry unit ``equinox.quantizer``; spec ``docs/specs/equinox.md``
§1.4, §1.5, §1.9): blocks of ``w`` FP32 or bf16 values in, one hbfp block (shared 8-bit
exponent, ``w`` two's complement ``m``-bit mantissas) out, one block per cycle.

It sits where SIMD results are written back to the activation buffer and where the optimizer's
weights are converted (§1.9).  The arithmetic is :func:`golden.equinox.hbfp.bfp_quantize`.  For
stochastic rounding each lane owns a 16-bit LFSR (:class:`golden.common.lfsr.LaneRNG`, ``rbits``
fresh bits per draw, lane ``i`` seeded ``0xACE1 ^ 0x1F35 * i``), stepped only for blocks that
take their noise from it; a block may instead carry injected random bits (``rand_en``), which
leave the LFSRs alone.

A block holding Inf or NaN is illegal (A7): the hardware raises a sticky ``error`` and its
output block is unspecified; :func:`quantize_stream` reports it as ``None``.

Timing: :class:`QuantizerSim` is the cycle model of the valid/ready streams — a pipeline of
``2 + pipeline`` registers that advance together, stalled as a whole by back-pressure.
"""

from dataclasses import dataclass

import numpy as np

from .. import check_choice, check_int
from ..common.formats import BFPFormat, format_named
from ..common.lfsr import MAX_LANES, LaneRNG
from ..common.stream import StallingPipeline
from .hbfp import M_RANGE, ROUNDINGS, bfp_quantize

#: input formats of the quantizer
IN_FORMATS = ("fp32", "bf16")
#: register stages at ``pipeline = 0``: stage 1 (the shared exponent) and the output register
QUANTIZER_STAGES = 2
#: most extra register stages (:attr:`QuantizerConfig.pipeline`; ``hdl.equinox.quantizer.CUTS``)
QUANTIZER_MAX_PIPELINE = 4


@dataclass(frozen=True)
class QuantizerConfig:
    """Configuration of the BFP quantizer (registry unit ``equinox.quantizer``)."""

    #: values per block (one lane each, 1..64; the array's T = n * w for activation rows)
    w: int = 8
    #: mantissa width X, two's complement (hbfp8: 8; 2..16)
    m: int = 8
    #: input format: "fp32" or "bf16"
    in_fmt: str = "fp32"
    #: rounding: "floor" (the default, §1.5), "rne", "rtz" or "stoch"
    rounding: str = "floor"
    #: random bits per element for "stoch" (1..16: the LFSR's 16-bit state bounds a draw)
    rbits: int = 16
    #: extra register stages, 0..4 (0: the two-stage quantizer): 1 after the exponent
    #: differences, 2 also inside the rounding block after its shift, 3 also after the
    #: rounding increment, 4 also half-way up the exponent tree.  Results are unchanged; every
    #: block leaves ``pipeline`` cycles later (:class:`QuantizerSim`)
    pipeline: int = 0

    def __post_init__(self):
        check_int(self, "w", 1, MAX_LANES)
        check_int(self, "m", *M_RANGE)
        check_choice(self, "in_fmt", IN_FORMATS)
        check_choice(self, "rounding", ROUNDINGS)
        check_int(self, "rbits", 1, 16)
        check_int(self, "pipeline", 0, QUANTIZER_MAX_PIPELINE)

    @property
    def latency(self) -> int:
        """Cycles from a block's acceptance to its output when nothing stalls."""
        return QUANTIZER_STAGES + self.pipeline

    @property
    def in_format(self):
        return format_named(self.in_fmt)

    @property
    def out_format(self) -> BFPFormat:
        """The hbfp block: 8-bit shared exponent, ``w`` two's complement ``m``-bit mantissas."""
        return BFPFormat(f"hbfp{self.m}x{self.w}", 8, self.m, self.w)


def to_fp32(cfg: QuantizerConfig, bits) -> np.ndarray:
    """Input bit patterns (``uint16`` bf16 or ``uint32`` FP32) as FP32 values (exact)."""
    b = np.asarray(bits, dtype=np.uint64).astype(np.uint32)
    if cfg.in_fmt == "bf16":
        b = (b & 0xFFFF) << 16
    return b.view(np.float32)


def nonfinite(cfg: QuantizerConfig, bits) -> np.ndarray:
    """Per block (rows of ``bits``): does it hold an Inf or NaN?"""
    f = cfg.in_format
    b = np.asarray(bits, dtype=np.int64)
    return (((b >> f.man_bits) & f.exp_max) == f.exp_max).any(axis=-1)


def quantize_stream(cfg: QuantizerConfig, bits, rand=None, rng: LaneRNG | None = None) -> list:
    """The quantizer's outputs for a sequence of blocks, in order.

    Parameters
    ----------
    bits : array_like, shape (n, w)
        Input bit patterns per block.
    rand : sequence, optional
        Per block, ``None`` (stochastic rounding draws from the LFSRs) or ``w`` injected
        ``rbits``-bit values.  Ignored unless ``cfg.rounding == "stoch"``.
    rng : LaneRNG, optional
        The LFSR bank, continued across calls (default: a fresh bank at the reset seeds).

    Returns
    -------
    list of ``(e, M)`` (``M`` a tuple of ints) or ``None`` for a block with Inf/NaN.
    """
    bits = np.asarray(bits).reshape(-1, cfg.w)
    rng = rng or LaneRNG(lanes=cfg.w, bits=cfg.rbits)
    bad = nonfinite(cfg, bits)
    out = []
    for t in range(bits.shape[0]):
        R = None
        if cfg.rounding == "stoch":
            inj = None if rand is None else rand[t]
            R = rng.draw() if inj is None else np.asarray(inj, dtype=np.int64)
        if bad[t]:
            out.append(None)
            continue
        e, M = bfp_quantize(to_fp32(cfg, bits[t]), cfg.m, cfg.rounding, R, cfg.rbits)
        out.append((int(e), tuple(int(v) for v in M)))
    return out


class QuantizerSim(StallingPipeline):
    """Cycle model of the quantizer's streams (the timing contract of
    :class:`hdl.equinox.Quantizer`): :class:`golden.common.stream.StallingPipeline` with
    ``cfg.latency`` registers; a block with an Inf or NaN (:func:`nonfinite`) sets ``error`` at
    the edge it enters register ``pipeline + 1`` (at depth 0 the first, the one before the
    output register).  :meth:`step` takes a block's ``w`` input bit patterns (``None``:
    ``valid`` low) and the consumer's ``ready``.

    ``error``: the flag before the first cycle, with no block in flight (default: after
    reset).
    """

    def __init__(self, cfg: QuantizerConfig, error: bool = False):
        self.cfg = cfg
        super().__init__(cfg.latency, cfg.pipeline,
                         lambda block: bool(nonfinite(cfg, [block])[0]), error)


def quantize_cycles(cfg: QuantizerConfig, cycles, error: bool = False) -> list:
    """:class:`QuantizerSim` over ``cycles`` (per cycle ``(block, ready)``, as
    :meth:`QuantizerSim.step` takes them): the unit's outputs in every cycle."""
    return QuantizerSim(cfg, error).run(cycles)


__all__ = ["IN_FORMATS", "QUANTIZER_STAGES", "QUANTIZER_MAX_PIPELINE", "QuantizerConfig",
           "to_fp32", "nonfinite", "quantize_stream", "QuantizerSim",
           "quantize_cycles"]

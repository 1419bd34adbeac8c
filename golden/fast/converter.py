"""FAST's FP32 → BFP converter as a unit (registry unit ``fast.converter``, spec §3): its
configuration, the groups it converts (:func:`convert_groups`, the numerics of
:func:`golden.fast.numerics.bfp_quantize_groups` with the converter's LFSR bank) and its cycle
model (:class:`ConverterSim`, :func:`convert_cycles`)."""

from dataclasses import dataclass

import numpy as np

from .. import ConfigError, check_int
from ..common.stream import StallingPipeline
from .numerics import LaneRNG, bfp_quantize_groups


#: register stages of the converter at ``pipeline = 0`` (§3's three)
CONVERTER_STAGES = 3
#: most extra register stages (:attr:`ConverterConfig.pipeline`; ``hdl.fast.converter.CUTS``)
CONVERTER_MAX_PIPELINE = 4


@dataclass(frozen=True)
class ConverterConfig:
    """Configuration of the FP32 → BFP converter (registry unit ``fast.converter``, spec §3)."""

    #: values per group = converter lanes, each with its own LFSR (paper: 16)
    group: int = 16
    #: output magnitude bits, even (stored as 2-bit chunks; the paper's converter makes 4)
    m: int = 4
    #: extra register stages, 0..4 (0: the paper's three stages): 1 after the exponent
    #: differences, 2 also half-way up the exponent tree, 3 also inside the rounding block
    #: after its shift, 4 also after the rounding increment.  Results are unchanged; every
    #: group leaves ``pipeline`` cycles later (:class:`ConverterSim`)
    pipeline: int = 0

    def __post_init__(self):
        check_int(self, "group", 1, 64)
        check_int(self, "m", 2, 8)
        if self.m % 2:
            raise ConfigError(type(self).__name__, "m", self.m, "an even width (2-bit chunks)")
        check_int(self, "pipeline", 0, CONVERTER_MAX_PIPELINE)

    @property
    def chunks(self) -> int:
        return self.m // 2

    @property
    def latency(self) -> int:
        """Cycles from a group's acceptance to its output when nothing stalls."""
        return CONVERTER_STAGES + self.pipeline


@dataclass(frozen=True)
class Converted:
    """One converted group as the converter emits it (§3 ports)."""

    Es: int
    signs: tuple
    q: tuple
    #: chunk exponents ``Es - 2c``, most significant chunk first
    chunk_exp: tuple
    #: improvement partial sums (§6.2): sum of the low chunks, sum of the rest (``q >> 2``)
    num: int
    den: int


def convert_groups(cfg: ConverterConfig, x, is_grad, rand=None, exp_floor=0,
                   rng: LaneRNG | None = None) -> list:
    """The converter's outputs for a sequence of groups (rows of ``x``, ``(n, group)``).

    Per group: truncation when ``is_grad[t]`` is 0, else stochastic rounding with the random
    bytes ``rand[t]`` when given (the injection port; ``rand`` may hold None rows), otherwise
    with the next :meth:`LaneRNG.draw` of ``rng`` (the built-in LFSR bank, which advances only
    on those groups).  ``exp_floor``: scalar or per group.
    """
    x = np.asarray(x, dtype=np.float32).reshape(-1, cfg.group)
    n = x.shape[0]
    grad = np.broadcast_to(np.asarray(is_grad, dtype=bool), (n,))
    rng = rng or LaneRNG(lanes=cfg.group)
    R = np.zeros((n, cfg.group), dtype=np.int64)
    for t in range(n):
        if grad[t]:
            inj = None if rand is None else rand[t]
            R[t] = rng.draw() if inj is None else np.asarray(inj)
    # trunc == SR with zero noise: the hardware adds 0 for weights and activations
    Es, s, q = bfp_quantize_groups(x, cfg.m, "sr", R,
                                   np.broadcast_to(np.asarray(exp_floor), (n,)))
    return [Converted(int(Es[t]), tuple(int(v) for v in s[t]), tuple(int(v) for v in q[t]),
                      tuple(int(Es[t]) - 2 * c for c in range(cfg.chunks)),
                      int((q[t] & 3).sum()), int((q[t] >> 2).sum()))
            for t in range(n)]


class ConverterSim(StallingPipeline):
    """Cycle model of the converter's streams (the timing contract of
    :class:`hdl.fast.Converter`): :class:`golden.common.stream.StallingPipeline` with
    ``cfg.latency`` registers; a group with an Inf or NaN sets ``error`` at the edge it enters
    register ``pipeline + 1`` (at depth 0 the first, two before the output register).
    :meth:`step` takes a group's FP32 bit patterns (``None``: ``valid`` low) and the
    consumer's ``ready``.

    ``error``: the flag before the first cycle, with no group in flight (default: after reset).
    """

    def __init__(self, cfg: ConverterConfig, error: bool = False):
        self.cfg = cfg
        super().__init__(cfg.latency, cfg.pipeline, _nonfinite_group, error)


def _nonfinite_group(group) -> bool:
    return bool(((np.asarray(group, dtype=np.int64) >> 23) & 0xFF == 0xFF).any())


def convert_cycles(cfg: ConverterConfig, cycles, error: bool = False) -> list:
    """:class:`ConverterSim` over ``cycles`` (per cycle ``(group, ready)``, as
    :meth:`ConverterSim.step` takes them): the unit's outputs in every cycle."""
    return ConverterSim(cfg, error).run(cycles)


__all__ = ["CONVERTER_STAGES", "CONVERTER_MAX_PIPELINE", "ConverterConfig", "Converted", "convert_groups", "ConverterSim", "convert_cycles"]

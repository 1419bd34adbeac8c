"""Baseline golden models: the bit-parallel bf16 PE and tile FPRaker compares against
(:mod:`golden.baseline.bf16_pe`, :mod:`golden.baseline.bf16_tile`) and FAST's Table IV 16-MAC
designs (:mod:`golden.baseline.mac16`) and the training GEMMs on their lanes
(:mod:`golden.baseline.gemm`)."""

from .bf16_pe import *  # noqa: F403
from .bf16_tile import *  # noqa: F403
from .mac16 import *  # noqa: F403
from .gemm import *  # noqa: F403
from . import bf16_pe as _pe, bf16_tile as _tile, gemm as _gemm, mac16 as _mac16

__all__ = [*_pe.__all__, *_tile.__all__, *_mac16.__all__, *_gemm.__all__]

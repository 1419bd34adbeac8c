"""FAST golden models: the BFP numerics with LFSR stochastic rounding, the variable-precision
fMAC and the precision schedule (:mod:`golden.fast.numerics`), and the cycle model of the fMAC
systolic array (:mod:`golden.fast.array`)."""

from .array import *  # noqa: F403
from .numerics import *  # noqa: F403
from . import array as _array, numerics as _numerics

__all__ = [*_numerics.__all__, *_array.__all__]

"""FAST golden models: the BFP numerics with LFSR stochastic rounding, the fMAC arithmetic, the
GEMM and the precision schedule (:mod:`golden.fast.numerics`), the converter and the fMAC as
units with their cycle models (:mod:`golden.fast.converter`, :mod:`golden.fast.fmac`), and the
cycle model of the fMAC systolic array (:mod:`golden.fast.array`)."""

from .array import *  # noqa: F403
from .converter import *  # noqa: F403
from .fmac import *  # noqa: F403
from .numerics import *  # noqa: F403
from . import array as _array, converter as _converter, fmac as _fmac, numerics as _numerics

__all__ = [*_numerics.__all__, *_converter.__all__, *_fmac.__all__, *_array.__all__]

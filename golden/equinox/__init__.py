"""Equinox (spec ``docs/specs/equinox.md``): the weight-stationary BFP systolic array (§2), the BFP
quantizer feeding it, and the request and instruction dispatchers that give inference priority
over training (§3).  The HBFP numerics they share are in :mod:`golden.equinox.hbfp`."""

from .array import *  # noqa: F403
from .dispatcher import *  # noqa: F403
from .quantizer import *  # noqa: F403
from . import array as _array, dispatcher as _dispatch, quantizer as _quantizer

__all__ = [*_array.__all__, *_dispatch.__all__, *_quantizer.__all__]

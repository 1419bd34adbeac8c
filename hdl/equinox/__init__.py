"""Equinox components (spec ``docs/specs/equinox.md``): the weight-stationary BFP systolic array, the
BFP quantizer and the request/instruction dispatcher."""

from .array import *  # noqa: F403
from .dispatcher import *  # noqa: F403
from .quantizer import *  # noqa: F403
from . import array as _array, dispatcher as _dispatcher, quantizer as _quantizer

__all__ = [*_array.__all__, *_dispatcher.__all__, *_quantizer.__all__]

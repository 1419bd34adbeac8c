"""Schrödinger's FP golden models: the Gecko lossless exponent codec (:mod:`golden.gecko.codec`)
and the Quantum Mantissa, Quantum Exponent and BitWave containers
(:mod:`golden.gecko.schrodinger`)."""

from .codec import *  # noqa: F403
from .schrodinger import *  # noqa: F403
from . import codec as _codec, schrodinger as _schrodinger

__all__ = [*_codec.__all__, *_schrodinger.__all__]

"""FPRaker components (spec ``docs/specs/fpraker.md``)."""

from .bdc import BDCDecoder, BDCEncoder, BDCLoopback
from .encoder import TermEncoder, TermEncoderLane
from .pe import PE, PECore
from .tile import Tile

__all__ = ["TermEncoder", "TermEncoderLane", "PE", "PECore", "BDCEncoder", "BDCDecoder",
           "BDCLoopback", "Tile"]

"""FPRaker components (spec ``docs/specs/fpraker.md``)."""

from .encoder import TermEncoder, TermEncoderLane
from .pe import PE, PECore

__all__ = ["TermEncoder", "TermEncoderLane", "PE", "PECore"]

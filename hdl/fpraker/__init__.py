"""FPRaker components (spec ``seed-fpraker.md``)."""

from .encoder import TermEncoder, TermEncoderLane

__all__ = ["TermEncoder", "TermEncoderLane"]

"""FPRaker golden models (spec ``seed-fpraker.md``): term encoding, PE, tile, compression."""

from .encoder import ENCODINGS, EncoderConfig, encode_terms, recode, term_counts

__all__ = ["ENCODINGS", "EncoderConfig", "encode_terms", "recode", "term_counts"]

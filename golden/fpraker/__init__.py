"""FPRaker golden models (spec ``docs/specs/fpraker.md``): term encoding, PE, tile, compression."""

from .bdc import BDCConfig, BDCFootprint, BDCStream
from .encoder import ENCODINGS, EncoderConfig, encode_terms, recode, term_counts
from .pe import (ACC_ZERO, Acc, CycleTrace, PEConfig, PESlot, PESlots, pe_dot, pe_dot_batch,
                 pe_dot_batch_acc, pe_group, read_out)
from .tile import SYNCS, TileConfig, tile_run

__all__ = ["ENCODINGS", "EncoderConfig", "encode_terms", "recode", "term_counts",
           "ACC_ZERO", "Acc", "CycleTrace", "PEConfig", "PESlot", "PESlots", "pe_dot",
           "pe_dot_batch", "pe_dot_batch_acc", "pe_group", "read_out", "BDCConfig", "BDCFootprint",
           "BDCStream", "SYNCS", "TileConfig", "tile_run"]

"""FAST components (spec ``docs/specs/fast.md``): the FP32 → BFP converter, the fMAC and the fMAC
systolic array."""

from .array import ArrayCell, FMACArray
from .converter import CHUNK_EXP_BITS, Converter, input_layout, output_layout
from .fmac import FMAC, operand_layout, pair_layout

__all__ = ["Converter", "input_layout", "output_layout", "CHUNK_EXP_BITS", "FMAC",
           "operand_layout", "pair_layout", "FMACArray", "ArrayCell"]

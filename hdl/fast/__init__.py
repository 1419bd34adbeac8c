"""FAST components (spec ``seed-fast.md``): the FP32 → BFP converter."""

from .converter import CHUNK_EXP_BITS, Converter, input_layout, output_layout

__all__ = ["Converter", "input_layout", "output_layout", "CHUNK_EXP_BITS"]

"""Gecko exponent compressor/decompressor (spec ``docs/specs/gecko.md`` §4, §5).

:mod:`.blocks` holds the reusable pieces (exponent coder, width detector, field builder/parser,
per-lane packer/unpacker, metadata packer/unpacker); :mod:`.units` the streaming units.
"""

from .blocks import (
    ExpCoder, ExpDecoder, FieldBuilder, FieldParser, MetaPacker, MetaUnpacker, Packer, Unpacker,
    WidthDetector,
)
from .units import (
    CMD_LAYOUT, META_LAYOUT, GeckoCompressor, GeckoDecompressor, GeckoLoopback, row_layout,
)

__all__ = [
    "ExpCoder", "ExpDecoder", "WidthDetector", "FieldBuilder", "FieldParser", "Packer",
    "Unpacker", "MetaPacker", "MetaUnpacker", "GeckoCompressor", "GeckoDecompressor",
    "GeckoLoopback", "row_layout", "META_LAYOUT", "CMD_LAYOUT",
]

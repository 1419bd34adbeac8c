"""Gecko exponent compressor/decompressor (spec ``docs/specs/gecko.md`` §4, §5).

:mod:`.blocks` holds the reusable pieces (exponent coder, width detector, field builder/parser,
per-lane packer/unpacker, metadata packer/unpacker); :mod:`.streams` the stream payloads the
units share; :mod:`.compressor`, :mod:`.decompressor` and :mod:`.loopback` the units.
"""

from .blocks import (
    ExpCoder, ExpDecoder, FieldBuilder, FieldParser, MetaPacker, MetaUnpacker, Packer, Unpacker,
    WidthDetector,
)
from .compressor import GeckoCompressor
from .decompressor import GeckoDecompressor
from .loopback import GeckoLoopback
from .streams import CMD_LAYOUT, META_LAYOUT, row_layout

__all__ = [
    "ExpCoder", "ExpDecoder", "WidthDetector", "FieldBuilder", "FieldParser", "Packer",
    "Unpacker", "MetaPacker", "MetaUnpacker", "GeckoCompressor", "GeckoDecompressor",
    "GeckoLoopback", "row_layout", "META_LAYOUT", "CMD_LAYOUT",
]

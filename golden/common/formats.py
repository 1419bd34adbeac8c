"""Number formats: the bit layouts every unit reads and writes, described once.

A format object says how a word is split into fields; :mod:`hdl.common.formats` turns the same
object into an :mod:`amaranth.lib.data` layout (so RTL reads ``a.exp``, not ``a[7:15]``) and the
testbenches pack and unpack words through that layout.

* :class:`FloatFormat` — IEEE-754-style ``sign | exponent | mantissa``: ``fp32``, ``bf16``,
  ``fp16``, ``hfp8`` (FAST's e4m2 HFP8 MAC), ``e4m3``, ``e5m2`` and any ``e<E>m<M>``.
  The all-ones exponent field is Inf/NaN, field 0 is zero/subnormal.
* :class:`IntFormat` — a fixed-point integer: two's complement (``int8``, ``int12``, ``int<N>``)
  or an unsigned magnitude (``uint<N>``, the magnitude half of a sign-magnitude element).
* :class:`BFPFormat` — a block floating-point block: one shared exponent field and ``block``
  mantissas, each either two's complement (HBFP/Equinox) or sign + magnitude (FAST).

Field order inside a word is LSB first: mantissa, exponent, sign (floats); exponent, then
element 0, 1, ... (BFP blocks).  :func:`format_named` resolves a name to a format object.
"""

import functools
import re
from dataclasses import dataclass

import numpy as np


def _dtype(width: int):
    """The narrowest unsigned NumPy dtype holding ``width``-bit patterns."""
    for bits, dtype in ((8, np.uint8), (16, np.uint16), (32, np.uint32), (64, np.uint64)):
        if width <= bits:
            return dtype
    return object


@dataclass(frozen=True)
class FloatFormat:
    """A binary floating-point storage format (IEEE-754 layout, hidden bit not stored).

    ``bias`` defaults to the IEEE bias ``2**(exp_bits - 1) - 1``.
    """

    name: str
    #: exponent field width in bits
    exp_bits: int
    #: stored mantissa (fraction) width in bits, hidden bit excluded
    man_bits: int
    #: exponent bias; None = the IEEE bias
    exp_bias: int | None = None

    def __post_init__(self):
        if not (1 <= self.exp_bits <= 16 and 0 <= self.man_bits <= 52):
            raise ValueError(f"float format {self.name!r}: exp_bits {self.exp_bits} (1..16) or "
                             f"man_bits {self.man_bits} (0..52) out of range")

    kind = "float"

    @property
    def width(self) -> int:
        return 1 + self.exp_bits + self.man_bits

    @property
    def bias(self) -> int:
        return (1 << (self.exp_bits - 1)) - 1 if self.exp_bias is None else self.exp_bias

    @property
    def exp_max(self) -> int:
        """The all-ones exponent field (Inf/NaN)."""
        return (1 << self.exp_bits) - 1

    @property
    def emin(self) -> int:
        """Unbiased exponent of the smallest normal number."""
        return 1 - self.bias

    @property
    def emax(self) -> int:
        """Unbiased exponent of the largest finite number."""
        return self.exp_max - 1 - self.bias

    @property
    def max_finite(self) -> int:
        """Bit pattern of the largest finite positive number."""
        return ((self.exp_max - 1) << self.man_bits) | ((1 << self.man_bits) - 1)

    @property
    def inf(self) -> int:
        """Bit pattern of +Inf."""
        return self.exp_max << self.man_bits

    @property
    def dtype(self):
        return _dtype(self.width)

    @property
    def fields(self) -> dict:
        """Field name → width, LSB first (the data layout's field order)."""
        return {"man": self.man_bits, "exp": self.exp_bits, "sign": 1}


@dataclass(frozen=True)
class IntFormat:
    """A fixed-point integer: ``bits`` wide, two's complement when ``signed``, else unsigned."""

    name: str
    bits: int
    signed: bool = True

    def __post_init__(self):
        if not 1 <= self.bits <= 62:
            raise ValueError(f"integer format {self.name!r}: bits {self.bits} outside 1..62")

    kind = "int"

    @property
    def width(self) -> int:
        return self.bits

    @property
    def min(self) -> int:
        return -(1 << (self.bits - 1)) if self.signed else 0

    @property
    def max(self) -> int:
        return (1 << (self.bits - 1)) - 1 if self.signed else (1 << self.bits) - 1

    @property
    def dtype(self):
        return _dtype(self.width)


@dataclass(frozen=True)
class BFPFormat:
    """A block floating-point block: one shared exponent and ``block`` mantissas.

    Element ``i`` has the value ``M_i * 2**(exp - bias - (scale))``, the scale being the unit's
    convention (FAST and HBFP place the binary point differently; their golden models say which).
    """

    name: str
    #: shared exponent field width
    exp_bits: int
    #: mantissa bits per element: magnitude bits when ``sign_magnitude``, else the two's
    #: complement width
    man_bits: int
    #: elements per block
    block: int
    #: elements are a sign bit plus an unsigned magnitude (FAST), not two's complement (HBFP)
    sign_magnitude: bool = False

    def __post_init__(self):
        if not (1 <= self.exp_bits <= 16 and 1 <= self.man_bits <= 32 and 1 <= self.block <= 256):
            raise ValueError(f"BFP format {self.name!r}: exp_bits {self.exp_bits} (1..16), "
                             f"man_bits {self.man_bits} (1..32) or block {self.block} (1..256) "
                             "out of range")

    kind = "bfp"

    @property
    def element(self) -> IntFormat:
        """The mantissa of one element (its magnitude, for sign-magnitude blocks)."""
        return IntFormat(f"{self.name}.man", self.man_bits, signed=not self.sign_magnitude)

    @property
    def element_width(self) -> int:
        return self.man_bits + int(self.sign_magnitude)

    @property
    def width(self) -> int:
        return self.exp_bits + self.block * self.element_width


BF16 = FloatFormat("bf16", 8, 7)
FP32 = FloatFormat("fp32", 8, 23)
FP16 = FloatFormat("fp16", 5, 10)
#: FAST Table IV's HFP8 MAC operand: "e4m2, strictly less than either HFP8 format"
HFP8 = FloatFormat("hfp8", 4, 2)
E4M3 = FloatFormat("e4m3", 4, 3)
E5M2 = FloatFormat("e5m2", 5, 2)
INT8 = IntFormat("int8", 8)
INT12 = IntFormat("int12", 12)

#: named formats (``e<E>m<M>``, ``int<N>`` and ``uint<N>`` are accepted by :func:`format_named`)
FORMATS = {f.name: f for f in (FP32, BF16, FP16, HFP8, E4M3, E5M2, INT8, INT12)}

_GENERIC = re.compile(r"^(?:e(\d+)m(\d+)|(u?)int(\d+))$")


@functools.lru_cache(maxsize=256)
def _named(name: str):
    if name in FORMATS:
        return FORMATS[name]
    match = _GENERIC.match(name)
    if match is None:
        raise ValueError(f"unknown number format {name!r}: expected one of "
                         f"{', '.join(FORMATS)}, e<E>m<M>, int<N> or uint<N>")
    e, m, unsigned, n = match.groups()
    if e is not None:
        return FloatFormat(name, int(e), int(m))
    return IntFormat(name, int(n), signed=not unsigned)


def format_named(name: str):
    """The format called ``name``: a :data:`FORMATS` entry, ``e<E>m<M>`` (IEEE-style float
    with ``E`` exponent and ``M`` mantissa bits), ``int<N>`` or ``uint<N>``.

    Raises
    ------
    ValueError
        An unknown name or out-of-range widths.
    """
    if isinstance(name, (FloatFormat, IntFormat, BFPFormat)):
        return name
    if not isinstance(name, str):
        raise ValueError(f"unknown number format {name!r}: expected a format name")
    return _named(name)


__all__ = ["FloatFormat", "IntFormat", "BFPFormat", "BF16", "FP32", "FP16", "HFP8", "E4M3",
           "E5M2", "INT8", "INT12", "FORMATS", "format_named"]

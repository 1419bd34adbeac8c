"""Bit-level helpers shared by every family: bfloat16 and FP32 fields, conversions, bit tricks.

All functions accept Python ints or NumPy integer arrays of bit patterns and work on the
integers; NumPy floating point appears only where a bit pattern is *reinterpreted* as a value
(``*_to_float``/``float_to_*``), never to compute the arithmetic being specified.

Formats
-------
bfloat16: ``s[15] | e[14:7] (bias 127) | m[6:0]``
FP32:     ``s[31] | e[30:23] (bias 127) | m[22:0]``
"""

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class FloatFormat:
    """A binary floating-point storage format (IEEE-754 style layout)."""

    name: str
    #: exponent field width in bits
    exp_bits: int
    #: stored mantissa (fraction) width in bits, hidden bit excluded
    man_bits: int

    @property
    def width(self) -> int:
        return 1 + self.exp_bits + self.man_bits

    @property
    def bias(self) -> int:
        return (1 << (self.exp_bits - 1)) - 1

    @property
    def exp_max(self) -> int:
        """The all-ones exponent field (Inf/NaN)."""
        return (1 << self.exp_bits) - 1

    @property
    def dtype(self):
        return np.uint16 if self.width <= 16 else np.uint32


BF16 = FloatFormat("bf16", 8, 7)
FP32 = FloatFormat("fp32", 8, 23)
FORMATS = {"bf16": BF16, "fp32": FP32}


def fields(bits, fmt: FloatFormat = BF16):
    """Split bit patterns into ``(sign, exponent field, mantissa field)``."""
    sign = (bits >> (fmt.width - 1)) & 1
    exp = (bits >> fmt.man_bits) & fmt.exp_max
    man = bits & ((1 << fmt.man_bits) - 1)
    return sign, exp, man


def pack(sign, exp, man, fmt: FloatFormat = BF16):
    """Assemble bit patterns from ``(sign, exponent field, mantissa field)``."""
    return (sign << (fmt.width - 1)) | (exp << fmt.man_bits) | man


def bf16_to_float(bits):
    """bfloat16 bit patterns → NumPy float32 values (exact: bf16 is the top half of FP32)."""
    return (np.asarray(bits, dtype=np.uint32) << 16).view(np.float32)


def fp32_to_float(bits):
    """FP32 bit patterns → NumPy float32 values."""
    return np.asarray(bits, dtype=np.uint32).view(np.float32)


def float_to_fp32(values):
    """NumPy float32 values → FP32 bit patterns (uint32)."""
    return np.asarray(values, dtype=np.float32).view(np.uint32)


def fp32_to_bf16_rne(bits):
    """FP32 bit patterns → bfloat16 bit patterns, round to nearest, ties to even.

    Integer-only: adds ``0x7FFF + lsb`` and drops the low 16 bits.  NaN inputs stay NaN (quiet bit
    forced), Inf stays Inf, values that round past the largest finite bf16 become Inf, and FP32
    subnormals round within the bf16 subnormal range exactly as IEEE RNE does.
    """
    b = np.asarray(bits, dtype=np.uint32).astype(np.uint64)
    nan = ((b >> 23) & 0xFF == 0xFF) & ((b & 0x7FFFFF) != 0)
    lsb = (b >> 16) & 1
    rounded = ((b + 0x7FFF + lsb) >> 16) & 0xFFFF
    out = np.where(nan, ((b >> 16) | 0x40) & 0xFFFF, rounded).astype(np.uint16)
    return out if out.ndim else out[()]


def float_to_bf16(values):
    """NumPy float values → bfloat16 bit patterns via FP32 and RNE."""
    return fp32_to_bf16_rne(float_to_fp32(values))


def msb_index(x: int) -> int:
    """Index of the most significant set bit of a positive int (the leading-one detector)."""
    if x <= 0:
        raise ValueError(f"msb_index needs a positive integer, got {x}")
    return x.bit_length() - 1


__all__ = [
    "FloatFormat", "BF16", "FP32", "FORMATS", "fields", "pack", "bf16_to_float",
    "fp32_to_float", "float_to_fp32", "fp32_to_bf16_rne", "float_to_bf16", "msb_index",
]

"""Bit-level helpers shared by every family: bfloat16 and FP32 fields, conversions, bit tricks.

All functions accept Python ints or NumPy integer arrays of bit patterns and work on the
integers; NumPy floating point appears only where a bit pattern is *reinterpreted* as a value
(``*_to_float``/``float_to_*``), never to compute the arithmetic being specified.

Formats are described in :mod:`.formats` (re-exported here); the rounding block every
normalize/round/convert step instantiates is :mod:`.rounding`.
"""

import numpy as np

from .formats import (BF16, E4M3, E5M2, FORMATS, FP16, FP32, HFP8, INT8, INT12, BFPFormat,
                      FloatFormat, IntFormat, format_named)


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


def int_matmul_t(a, b):
    """``a @ b.T`` of small integer matrices, through float64 BLAS.  The callers' operands keep
    every partial sum an integer below ``2**53``, so the result is exact (and ``int64``)."""
    return np.rint(np.asarray(a, dtype=np.float64) @ np.asarray(b, dtype=np.float64).T
                   ).astype(np.int64)


def wrap(v, bits: int) -> np.ndarray:
    """Integers ``v`` as a ``bits``-bit two's complement register holds them (signed int64):
    the accumulators wrap, they do not saturate."""
    half = np.int64(1) << (bits - 1)
    return ((np.asarray(v, dtype=np.int64) + half) & ((half << 1) - 1)) - half


def check_patterns(values, dtype, name: str, what: str) -> np.ndarray:
    """``values`` itself when it is a 1-D NumPy array of ``dtype`` (bit patterns); otherwise a
    one-line ``ValueError`` naming the argument ``name`` and what it should hold (``what``)."""
    if not isinstance(values, np.ndarray):
        raise ValueError(f"{name} must be a NumPy array of {what}, got {type(values).__name__}")
    if values.dtype != dtype:
        raise ValueError(f"{name} have dtype {values.dtype}; expected {what}")
    if values.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {values.shape}")
    return values


def fields_equal(a, b) -> bool:
    """Whether the dataclass instances ``a`` and ``b`` hold equal values in every field of
    ``a``'s class, NumPy arrays compared element by element (:func:`numpy.array_equal`)."""
    return all(np.array_equal(getattr(a, k), getattr(b, k)) for k in a.__dataclass_fields__)


def msb_index(x: int) -> int:
    """Index of the most significant set bit of a positive int (the leading-one detector)."""
    if x <= 0:
        raise ValueError(f"msb_index needs a positive integer, got {x}")
    return x.bit_length() - 1


__all__ = [
    "FloatFormat", "IntFormat", "BFPFormat", "BF16", "FP32", "FP16", "HFP8", "E4M3", "E5M2",
    "INT8", "INT12", "FORMATS", "format_named", "fields", "pack", "bf16_to_float",
    "fp32_to_float", "float_to_fp32", "fp32_to_bf16_rne", "float_to_bf16", "int_matmul_t",
    "wrap", "msb_index", "check_patterns", "fields_equal",
]

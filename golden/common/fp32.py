"""FP32 addition with round-to-nearest-even, DAZ on inputs and FTZ on outputs.

The accumulators of FAST's fMAC (spec ``seed-fast.md`` §4.3, A10), of the FP MAC baselines and
of Equinox's SIMD share this adder.  It works on FP32 bit patterns, vectorized over NumPy
arrays, and is an instance of the rounding block (:mod:`.rounding`):

1. decode both operands; exponent field 0 (zero or subnormal) reads as a signed zero (DAZ);
2. order them by magnitude; shift the smaller significand right by the exponent difference onto
   a grid with three extra bits below the larger one's LSB (guard, round, sticky: the shifted-out
   bits are OR-ed into the last one), add or subtract;
3. round the exact-enough sum with :func:`~.rounding.round_raw` into ``fp32`` (RNE, ±Inf on
   overflow, FTZ to a signed zero below 2**-126).

Zero results: ``x + (-x)`` is ``+0``; ``(-0) + (-0)`` is ``-0`` (IEEE RNE).  Specials: a NaN
operand or ``Inf + (-Inf)`` gives the quiet NaN ``0x7FC00000``; an infinite operand otherwise
wins.  The three extra bits make the result the correctly rounded sum: with a shift of two or
more the sum loses at most one leading bit, so the sticky bit still lies below the rounding
position; with a shift of at most one nothing is shifted out.
"""

import functools

import numpy as np

from .rounding import RoundConfig, round_checked

#: quiet NaN produced by invalid operations
QNAN = 0x7FC00000
#: extra bits below the larger operand's LSB (guard, round, sticky)
EXTRA = 3


@functools.cache
def add_round_config() -> RoundConfig:
    """The rounding step of the adder: a 28-bit magnitude (24-bit significand, 3 extra bits,
    one carry bit) with the larger operand's unbiased exponent, to fp32 with RNE and FTZ."""
    return RoundConfig(fmt="fp32", in_width=24 + EXTRA + 1, frac=23 + EXTRA, exp_width=10,
                       mode="rne", overflow="inf")


def _decode(bits):
    s = (bits >> 31) & 1
    e = (bits >> 23) & 0xFF
    m = np.where(e == 0, 0, (bits & 0x7FFFFF) | 0x800000)    # DAZ
    return s, e, m


def fp32_add_bits(a, b) -> np.ndarray:
    """Sum of FP32 bit patterns ``a + b`` (uint32 arrays or ints), correctly rounded (RNE),
    DAZ/FTZ; returns uint32 bit patterns (see the module docstring)."""
    a = np.asarray(a, dtype=np.uint32).astype(np.int64)
    b = np.asarray(b, dtype=np.uint32).astype(np.int64)
    a, b = np.broadcast_arrays(a, b)
    sa, ea, ma = _decode(a)
    sb, eb, mb = _decode(b)
    # the larger magnitude first (ties: either; the difference is then exact)
    swap = (eb > ea) | ((eb == ea) & (mb > ma))
    sx, ex, mx = np.where(swap, sb, sa), np.where(swap, eb, ea), np.where(swap, mb, ma)
    sy, ey, my = np.where(swap, sa, sb), np.where(swap, ea, eb), np.where(swap, ma, mb)
    d = np.clip(ex - ey, 0, 31)
    wide_y = my << EXTRA
    shifted = wide_y >> d
    shifted |= (wide_y & ((np.int64(1) << d) - 1)) != 0               # sticky
    total = np.where(sx == sy, (mx << EXTRA) + shifted, (mx << EXTRA) - shifted)
    # exact cancellation is +0; two zeros of the same sign keep it
    sign = np.where(total == 0, sx & sy, sx)
    r = round_checked(add_round_config(), total, ex - 127, sign, np.zeros_like(total))
    out = r.bits
    # specials (exponent field 255): NaN, Inf - Inf, Inf
    inf_a = (ea == 255) & ((a & 0x7FFFFF) == 0)
    inf_b = (eb == 255) & ((b & 0x7FFFFF) == 0)
    nan = ((ea == 255) & ~inf_a) | ((eb == 255) & ~inf_b) | (inf_a & inf_b & (sa != sb))
    out = np.where(inf_a, a, np.where(inf_b, b, out))
    out = np.where(nan, QNAN, out)
    return out.astype(np.uint32)


def fp32_add(a, b):
    """``a + b`` of FP32 values (NumPy float32 scalars or arrays), RNE with DAZ/FTZ; returns
    ``np.float32`` (an array for array inputs)."""
    out = fp32_add_bits(np.asarray(a, dtype=np.float32).view(np.uint32),
                        np.asarray(b, dtype=np.float32).view(np.uint32)).view(np.float32)
    return out if out.ndim else out[()]


__all__ = ["QNAN", "EXTRA", "add_round_config", "fp32_add_bits", "fp32_add"]

"""Floating-point addition with round-to-nearest-even, DAZ on inputs and FTZ on outputs.

The accumulators of FAST's fMAC (spec ``docs/specs/fast.md`` §4.3, A10), of the FP MAC baselines and
of Equinox's SIMD share this adder (FP32; :class:`FPAddConfig` takes any IEEE-style format, the
RTL twin is :class:`hdl.common.fp_add.FPAdder`, registry unit ``common.fp_add``).  It works on bit
patterns, vectorized over NumPy arrays, and is an instance of the rounding block
(:mod:`.rounding`):

1. decode both operands; exponent field 0 (zero or subnormal) reads as a signed zero (DAZ);
2. order them by magnitude; shift the smaller significand right by the exponent difference onto
   a grid with three extra bits below the larger one's LSB (guard, round, sticky: the shifted-out
   bits are OR-ed into the last one), add or subtract;
3. round the exact-enough sum with the rounding block into the format (RNE, ±Inf on overflow,
   FTZ to a signed zero below the smallest normal, 2**-126 for FP32).

Zero results: ``x + (-x)`` is ``+0``; ``(-0) + (-0)`` is ``-0`` (IEEE RNE).  Specials: a NaN
operand or ``Inf + (-Inf)`` gives the quiet NaN (``0x7FC00000`` for FP32: exponent all ones,
mantissa MSB set); an infinite operand otherwise wins.  The three extra bits make the result the correctly rounded sum: with a shift of two or
more the sum loses at most one leading bit, so the sticky bit still lies below the rounding
position; with a shift of at most one nothing is shifted out.
"""

import functools
from dataclasses import dataclass

import numpy as np

from .. import ConfigError, check_int
from .formats import FP32, FloatFormat, format_named
from .rounding import RoundConfig, round_checked

#: extra bits below the larger operand's LSB (guard, round, sticky)
EXTRA = 3
#: most register stages of the adder (:class:`hdl.common.fp_add.FPAdder`)
MAX_PIPELINE = 5


@dataclass(frozen=True)
class FPAddConfig:
    """Configuration of the floating-point adder (registry unit ``common.fp_add``)."""

    #: the operands' and result's format: fp32 (the accumulators'), bf16, fp16, e<E>m<M>
    fmt: str = "fp32"
    #: register stages, 0..5: the sum appears this many cycles after its operands (0: the
    #: combinational adder the accumulators instantiate).  Cuts (``hdl.common.fp_add.CUTS``):
    #: 1 after the add; 2 after the alignment and the rounding's normalize; 3 also after the
    #: add; 4 also after the swap; 5 also after the rounding increment.  Numerics are unchanged
    pipeline: int = 0

    def __post_init__(self):
        try:
            fmt = format_named(self.fmt) if isinstance(self.fmt, str) else None
        except ValueError:
            fmt = None
        if not isinstance(fmt, FloatFormat) or fmt.exp_bits < 2 or fmt.man_bits + 5 > 56:
            raise ConfigError(type(self).__name__, "fmt", self.fmt,
                              "a float format name (fp32, bf16, fp16, e<E>m<M> with E >= 2 and "
                              "M <= 51)")
        check_int(self, "pipeline", 0, MAX_PIPELINE)

    @property
    def format(self) -> FloatFormat:
        return format_named(self.fmt)


def qnan(fmt: FloatFormat) -> int:
    """The quiet NaN invalid operations produce: exponent all ones, mantissa MSB set."""
    return (fmt.exp_max << fmt.man_bits) | (1 << max(fmt.man_bits - 1, 0))


#: quiet NaN of FP32
QNAN = qnan(FP32)


@functools.cache
def add_round_config(fmt: FloatFormat = FP32) -> RoundConfig:
    """The rounding step of the adder: the significand sum with ``EXTRA`` bits and a carry bit
    (28 bits for FP32) at the larger operand's unbiased exponent, to ``fmt`` with RNE and FTZ."""
    P = fmt.man_bits
    return RoundConfig(fmt=fmt.name, in_width=P + 1 + EXTRA + 1, frac=P + EXTRA,
                       exp_width=fmt.exp_bits + 2, mode="rne", overflow="inf")


def fp_add_bits(a, b, fmt: FloatFormat = FP32) -> np.ndarray:
    """Sum of bit patterns ``a + b`` in ``fmt``, correctly rounded (RNE), DAZ/FTZ; returns bit
    patterns of ``fmt``'s dtype (see the module docstring)."""
    P, emax = fmt.man_bits, fmt.exp_max
    a = np.asarray(a).astype(np.int64)
    b = np.asarray(b).astype(np.int64)
    a, b = np.broadcast_arrays(a, b)
    man_mask = (1 << P) - 1

    def decode(x):
        e = (x >> P) & emax
        return (x >> (fmt.width - 1)) & 1, e, np.where(e == 0, 0, (x & man_mask) | (1 << P))

    sa, ea, ma = decode(a)
    sb, eb, mb = decode(b)
    # the larger magnitude first (ties: either; the difference is then exact)
    swap = (eb > ea) | ((eb == ea) & (mb > ma))
    sx, ex, mx = np.where(swap, sb, sa), np.where(swap, eb, ea), np.where(swap, mb, ma)
    sy, ey, my = np.where(swap, sa, sb), np.where(swap, ea, eb), np.where(swap, ma, mb)
    d = np.minimum(ex - ey, P + EXTRA + 2)
    wide_y = my << EXTRA
    shifted = (wide_y >> d) | ((wide_y & ((np.int64(1) << d) - 1)) != 0)   # sticky
    total = np.where(sx == sy, (mx << EXTRA) + shifted, (mx << EXTRA) - shifted)
    # exact cancellation is +0; two zeros of the same sign keep it
    sign = np.where(total == 0, sx & sy, sx)
    out = round_checked(add_round_config(fmt), total, ex - fmt.bias, sign,
                        np.zeros_like(total)).bits
    # specials (exponent field all ones): NaN, Inf - Inf, Inf
    inf_a = (ea == emax) & ((a & man_mask) == 0)
    inf_b = (eb == emax) & ((b & man_mask) == 0)
    nan = ((ea == emax) & ~inf_a) | ((eb == emax) & ~inf_b) | (inf_a & inf_b & (sa != sb))
    out = np.where(inf_a, a, np.where(inf_b, b, out))
    return np.where(nan, qnan(fmt), out).astype(fmt.dtype)


def fp32_add_bits(a, b) -> np.ndarray:
    """:func:`fp_add_bits` of FP32 bit patterns (uint32 arrays or ints)."""
    return fp_add_bits(np.asarray(a, dtype=np.uint32), np.asarray(b, dtype=np.uint32), FP32)


def fp32_add(a, b):
    """``a + b`` of FP32 values (NumPy float32 scalars or arrays), RNE with DAZ/FTZ; returns
    ``np.float32`` (an array for array inputs)."""
    out = fp32_add_bits(np.asarray(a, dtype=np.float32).view(np.uint32),
                        np.asarray(b, dtype=np.float32).view(np.uint32)).view(np.float32)
    return out if out.ndim else out[()]


__all__ = ["EXTRA", "MAX_PIPELINE", "FPAddConfig", "QNAN", "qnan", "add_round_config", "fp_add_bits",
           "fp32_add_bits", "fp32_add"]

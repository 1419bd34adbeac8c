"""Training GEMMs on FAST's Table IV MAC lanes (:mod:`golden.baseline.mac16`): each output element
is one lane's accumulation along the reduction ``K``, in ``K`` order from zero.

* **Integer formats** (``int8``, ``int12``): exact products of two's complement operands, added
  into an ``acc_bits``-bit two's complement accumulator that wraps (A19: 32 bits).
* **Float formats**: each product exact in FP32 (:func:`~golden.baseline.mac16.float_products`),
  added into an FP32 accumulator from +0 by the FP32 adder
  (:func:`~golden.common.fp_add.fp32_add_bits`: RNE, DAZ/FTZ), one rounding per MAC.  The two
  operands may have different formats (HFP8 multiplies e4m3 weights by e5m2 gradients).

The reference (:func:`int_gemm_reference`, :func:`float_gemm_reference`) applies the lane's
arithmetic along ``K``, vectorized over the outputs.  :func:`int_gemm` and :func:`float_gemm` give
the same bits at training speed:

* integer: one float64 BLAS product.  Every partial sum is an integer of magnitude at most
  ``K * max|x| * max|y|``; below ``2**53`` it is exact whatever order BLAS adds in, and a
  wrapping sum depends only on the exact total (modular arithmetic).  Past ``2**53`` the
  reference runs.
* float: a numba loop over ``k`` per output row, each MAC one float32 multiplication and one
  float32 addition (IEEE round to nearest even).  It runs when the two formats make both of the
  following true, and the reference runs otherwise:

  - every product is exact in FP32 (significands of at most 24 bits together) and a multiple of
    ``g = 2**(emin_x - P_x + emin_y - P_y) >= 2**-126``.  Then every partial sum is a multiple of
    ``g`` too (rounding to 24 bits keeps it one), so a non-zero sum is at least ``g``: no sum
    is subnormal, and the adder's FTZ never acts;
  - ``K`` times the largest product stays below ``2**127``: no sum overflows.

  The float32 multiplication is then exact and the addition is the adder's; IEEE zero signs
  are the adder's (an exact cancellation is +0, two zeros of one sign keep it).  Operands with
  an all-ones exponent field (Inf, NaN) go to the reference; subnormal operands read as zero
  (DAZ) on both paths.

``tests/test_golden_baseline_gemm.py`` checks both paths against each other bit for bit.
Without numba the reference runs.

The quantizers that make the operands of a training GEMM (:func:`int_quantize`,
:func:`float_quantize`) scale whole tensors; their choices are in their docstrings.
"""

import functools

import numpy as np

from ..common import wrap
from ..common.formats import FloatFormat, IntFormat, format_named
from ..common.fp32_kernel import settle
from ..common.fp_add import fp32_add_bits
from ..common.jit import jit, numba
from ..common.rounding import convert_float
from .mac16 import MAC16Config, float_products, mac16_products, signed_int

#: accumulator width of the integer lanes (A19)
ACC_BITS = 32


class GemmInputError(ValueError):
    """Operands the baseline GEMMs cannot take; the message is one line."""


def _int_format(fmt) -> IntFormat:
    f = format_named(fmt) if isinstance(fmt, str) else fmt
    if not isinstance(f, IntFormat) or not f.signed:
        raise GemmInputError(f"baseline GEMM: {fmt} is not a signed integer format")
    return f


def _float_format(fmt) -> FloatFormat:
    f = format_named(fmt) if isinstance(fmt, str) else fmt
    if not isinstance(f, FloatFormat):
        raise GemmInputError(f"baseline GEMM: {fmt} is not a float format")
    return f


def _check_shapes(x, y):
    if x.ndim != 2 or y.ndim != 2 or x.shape[1] != y.shape[0]:
        raise GemmInputError(f"baseline GEMM: operands of shapes {x.shape} and {y.shape}; "
                             "expected (M, K) and (K, N)")


# ----------------------------------------------------------------------------------------------
# integer lanes

def int_gemm_reference(xbits, ybits, fmt="int8", acc_bits: int = ACC_BITS) -> np.ndarray:
    """``X @ Y`` of two's complement bit patterns of ``fmt`` (``(M, K)`` and ``(K, N)``) on the
    lanes: :func:`~golden.baseline.mac16.mac16_products` added along ``K`` into wrapping
    ``acc_bits``-bit accumulators.  Returns the accumulators as signed int64, ``(M, N)``."""
    f = _int_format(fmt)
    if f.name not in ("int8", "int12"):
        raise GemmInputError(f"baseline GEMM: the lanes take int8 or int12, not {f.name}")
    cfg = MAC16Config(fmt=f.name, acc_bits=acc_bits)
    x, y = np.asarray(xbits, dtype=np.int64), np.asarray(ybits, dtype=np.int64)
    _check_shapes(x, y)
    mask = (1 << acc_bits) - 1
    acc = np.zeros((x.shape[0], y.shape[1]), dtype=np.int64)
    for k in range(x.shape[1]):
        acc = (acc + mac16_products(cfg, x[:, k, None], y[None, k, :])) & mask
    return wrap(acc, acc_bits)


def int_gemm(xbits, ybits, fmt="int8", acc_bits: int = ACC_BITS) -> tuple[np.ndarray, int]:
    """:func:`int_gemm_reference`'s result at BLAS speed (module docstring), and the number of
    outputs whose exact sum lies outside the accumulator's range (those that wrapped)."""
    f = _int_format(fmt)
    x, y = np.asarray(xbits, dtype=np.int64), np.asarray(ybits, dtype=np.int64)
    _check_shapes(x, y)
    for v in (x, y):
        if v.size and (v.min() < 0 or v.max() >> f.bits):
            raise GemmInputError(f"baseline GEMM: bit patterns outside 0..{(1 << f.bits) - 1} "
                                 f"({f.name})")
    xs, ys = signed_int(x, f), signed_int(y, f)
    bound = x.shape[1] * (1 << (2 * (f.bits - 1)))
    if bound >= 1 << 53:
        exact = xs @ ys
    else:
        exact = np.rint(xs.astype(np.float64) @ ys.astype(np.float64)).astype(np.int64)
    half = 1 << (acc_bits - 1)
    wrapped = int(((exact < -half) | (exact >= half)).sum())
    return wrap(exact, acc_bits), wrapped


def int_quantize(x, fmt="int8") -> tuple[np.ndarray, float]:
    """A tensor as ``fmt`` bit patterns with one scale for the whole tensor (symmetric, max
    scaling): ``s = max|x| / (2**(bits - 1) - 1)`` and ``q = RNE(x * (2**(bits - 1) - 1) /
    max|x|)``, computed in float64 (``x * top`` is exact; the quotient is rounded once, then to
    an integer, ties to even), so that ``x ≈ q * s`` and the largest magnitude becomes
    ``±(2**(bits - 1) - 1)``; an all-zero tensor is all zeros with ``s = 1``.

    Choice (the FAST paper names its INT8/INT12 formats, not their scaling): one scale per
    tensor, the usual INT8-training granularity, with round to nearest for every tensor.

    Returns the bit patterns (int64, ``x``'s shape) and ``s``.  Non-finite values are refused.
    """
    f = _int_format(fmt)
    v = np.asarray(x, dtype=np.float32).astype(np.float64)
    if not np.isfinite(v).all():
        raise GemmInputError(f"int_quantize: non-finite values cannot be {f.name}")
    top = (1 << (f.bits - 1)) - 1
    big = float(np.abs(v).max()) if v.size else 0.0
    if big == 0.0:
        return np.zeros(v.shape, dtype=np.int64), 1.0
    q = np.rint(v * top / big).astype(np.int64)
    return q & ((1 << f.bits) - 1), big / top


# ----------------------------------------------------------------------------------------------
# float lanes

def float_gemm_reference(xbits, fx, ybits, fy) -> np.ndarray:
    """``X @ Y`` of ``fx`` bit patterns ``(M, K)`` and ``fy`` bit patterns ``(K, N)`` on the
    lanes: :func:`~golden.baseline.mac16.float_products` added along ``K`` from +0 by
    :func:`~golden.common.fp_add.fp32_add_bits`.  Returns FP32 bit patterns (uint32, (M, N))."""
    fx, fy = _float_format(fx), _float_format(fy)
    x, y = np.asarray(xbits, dtype=np.int64), np.asarray(ybits, dtype=np.int64)
    _check_shapes(x, y)
    acc = np.zeros((x.shape[0], y.shape[1]), dtype=np.uint32)
    for k in range(x.shape[1]):
        acc = fp32_add_bits(acc, float_products(x[:, k, None], fx, y[None, k, :], fy)
                            .astype(np.uint32))
    return acc


def _largest(f: FloatFormat) -> float:
    return (2.0 - 2.0 ** -f.man_bits) * 2.0 ** (f.exp_max - 1 - f.bias)


def fast_path(fx, fy, K: int) -> bool:
    """Whether :func:`float_gemm` runs the compiled loop for formats ``fx``, ``fy`` and reduction
    ``K`` (the two conditions of the module docstring; numba must be installed)."""
    fx, fy = _float_format(fx), _float_format(fy)
    if numba is None or fx.man_bits + fy.man_bits + 2 > 24:
        return False
    grain = (1 - fx.bias - fx.man_bits) + (1 - fy.bias - fy.man_bits)
    return grain >= -126 and K * _largest(fx) * _largest(fy) < 2.0 ** 127


@functools.cache
def _values(f: FloatFormat) -> np.ndarray:
    """Every bit pattern of ``f`` (at most 16 bits) as float32: DAZ, and NaN for the all-ones
    exponent field (those operands go to the reference)."""
    b = np.arange(1 << f.width, dtype=np.int64)
    e = (b >> f.man_bits) & f.exp_max
    man = b & ((1 << f.man_bits) - 1)
    mag = np.ldexp(((1 << f.man_bits) | man).astype(np.float64), e - f.bias - f.man_bits)
    v = np.where(e == 0, 0.0, np.where(b >> (f.width - 1) == 1, -mag, mag))
    v = np.where(e == f.exp_max, np.nan, v)
    # DAZ keeps the sign of a zero
    v = np.where((e == 0) & (b >> (f.width - 1) == 1), -0.0, v)
    return v.astype(np.float32)


@jit
def _sequential(X, Y, out):
    M, K = X.shape
    N = Y.shape[1]
    for m in range(M):
        row = out[m]
        for k in range(K):
            a = X[m, k]
            yk = Y[k]
            for n in range(N):
                row[n] = row[n] + a * yk[n]


@jit
def _settle_all(bits):
    flat = bits.reshape(-1)
    for i in range(flat.size):
        flat[i] = settle(flat[i])


def float_gemm(xbits, fx, ybits, fy) -> np.ndarray:
    """:func:`float_gemm_reference`'s bits, compiled when :func:`fast_path` allows (module
    docstring)."""
    fx, fy = _float_format(fx), _float_format(fy)
    x, y = np.asarray(xbits, dtype=np.int64), np.asarray(ybits, dtype=np.int64)
    _check_shapes(x, y)
    for v, f in ((x, fx), (y, fy)):
        if v.size and (v.min() < 0 or v.max() >> f.width):
            raise GemmInputError(f"baseline GEMM: bit patterns outside 0..{(1 << f.width) - 1} "
                                 f"({f.name})")
    if not fast_path(fx, fy, x.shape[1]) or fx.width > 16 or fy.width > 16:
        return float_gemm_reference(x, fx, y, fy)
    X, Y = _values(fx)[x], _values(fy)[y]
    if np.isnan(X).any() or np.isnan(Y).any():
        return float_gemm_reference(x, fx, y, fy)
    out = np.zeros((x.shape[0], y.shape[1]), dtype=np.float32)
    _sequential(np.ascontiguousarray(X), np.ascontiguousarray(Y), out)
    bits = out.view(np.uint32)
    _settle_all(bits)
    return bits


def float_quantize(x, fmt) -> tuple[np.ndarray, int]:
    """A tensor as ``fmt`` bit patterns after one power-of-two scale for the whole tensor:
    ``x * 2**shift`` rounded to ``fmt`` (RNE, past the largest finite value saturating to it,
    below the smallest normal flushed to a signed zero; :func:`~golden.common.rounding.
    convert_float`), with ``shift`` chosen so that the largest magnitude lands in ``fmt``'s top
    binade ``[2**emax, 2**(emax + 1))``; an all-zero tensor has ``shift = 0``.  Undo it by
    multiplying by ``2**-shift``, which is exact.

    Choice (the papers leave the scaling of FP8/FP16 training open): a per-tensor power-of-two
    scale, as FP8 training recipes scale each tensor and as loss scaling does for FP16
    gradients; it is applied to every operand, so no tensor overflows or is wasted on an unused
    exponent range.

    Returns the bit patterns (int64, ``x``'s shape) and ``shift``.  Non-finite values are
    refused.
    """
    f = _float_format(fmt)
    v = np.asarray(x, dtype=np.float32)
    if not np.isfinite(v).all():
        raise GemmInputError(f"float_quantize: non-finite values cannot be {f.name}")
    big = float(np.abs(v).max()) if v.size else 0.0
    shift = 0
    if big != 0.0:
        top = f.exp_max - 1 - f.bias                 # the largest normal's exponent
        shift = top - (int(np.frexp(big)[1]) - 1)
    scaled = (v.astype(np.float64) * 2.0 ** shift).astype(np.float32)
    if numba is None or f.exp_bits > 8 or f.man_bits > 22:
        bits = scaled.view(np.uint32).astype(np.int64)
        return convert_float(bits, "fp32", f, overflow="saturate"), shift
    out = np.empty(scaled.shape, dtype=np.int64)
    _narrow(np.ascontiguousarray(scaled).reshape(-1).view(np.uint32), out.reshape(-1),
            f.exp_bits, f.man_bits)
    return out, shift


@jit
def _narrow(bits, out, E, P):
    """FP32 bit patterns (finite) into the float format (``E``, ``P``): :func:`~golden.common.
    rounding.convert_float` with ``overflow="saturate"``, the same bits (tested): DAZ, round
    to nearest even at ``P`` mantissa bits, a result past the top binade saturated to the
    largest finite value, one below the smallest normal flushed to a zero of its sign."""
    bias = (1 << (E - 1)) - 1
    emax = (1 << E) - 1
    sh = 23 - P
    for i in range(bits.size):
        b = np.int64(bits[i])
        sign = (b >> 31) << (E + P)
        if (b >> 23) & 0xFF == 0:
            out[i] = sign
            continue
        mag = b & 0x7FFFFFFF
        r = (mag + ((np.int64(1) << (sh - 1)) - 1) + ((mag >> sh) & 1)) >> sh
        e = (r >> P) - 127 + bias
        if e >= emax:
            out[i] = sign | ((emax - 1) << P) | ((1 << P) - 1)
        elif e <= 0:
            out[i] = sign
        else:
            out[i] = sign | (e << P) | (r & ((1 << P) - 1))


__all__ = ["ACC_BITS", "GemmInputError", "int_gemm_reference", "int_gemm",
           "int_quantize", "float_gemm_reference", "float_gemm", "fast_path", "float_quantize"]

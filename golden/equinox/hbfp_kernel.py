"""The HBFP GEMM at training speed: the same bits as :func:`golden.equinox.hbfp.hbfp_matmul`.

:func:`hbfp_matmul_fast` computes what the reference computes, in three steps built for speed:

1. :func:`bfp_quantize_fast`: the reference's block quantizer (:func:`~golden.equinox.hbfp.
   bfp_quantize`) for the deterministic roundings.  A normal FP32 element is
   ``±sig * 2**(ef - 150)`` with a 24-bit ``sig``; its mantissa before rounding is
   ``±sig * 2**(ef - e + m - 25)`` for the block's largest exponent field ``e``, exact in
   float64, so ``floor`` (the arithmetic shift), ``rne`` (``numpy.rint``, ties to even) and
   ``rtz`` (``numpy.trunc``) of it are the rounding block's results; a maximum that rounds up
   to ``2**(m - 1)`` saturates (A6).  Subnormal elements are zeros (A3).
2. Each K-tile's integer dot products through BLAS, one batched product over all K-tiles:
   in float32 while no partial sum can pass ``2**24`` (``T * 2**(2m - 2) <= 2**24``: hbfp8
   with ``T = 16``), else in float64 (below ``2**53``, checked), so exact either way; then
   wrapped to ``A`` bits as the accumulator wraps (only where it can).
3. One numba loop per output row: the normalizer reads the float bit pattern of the exact
   accumulator and rounds it to 8 significant bits, ties to even (integer arithmetic on the
   pattern), adds the K-tile's exponent ``esum - exp_offset(m)`` to the exponent field, flushes
   a rounded magnitude below ``2**-126`` to a zero of its sign (tininess after rounding, as the
   rounding block decides) and saturates to ``±0x7F7F``.  The partials are summed in ascending
   K order as float32 — a float32 sum of two bfloat16 values rounded to bfloat16 is their exact
   sum rounded to bfloat16 (float32 rounds only when their exponents differ by more than 16,
   and then the smaller cannot move the bfloat16 rounding: the argument of
   :func:`~golden.equinox.hbfp.bf16_add`) — and rounded the same way.  An exact cancellation is
   +0, as IEEE 754 round to nearest gives.

The property tests (``tests/test_golden_hbfp_kernel.py``) check every output bit against the
reference on random shapes, K not a multiple of ``T``, zeros, subnormals, tiny and huge
exponents, the largest mantissas, every deterministic rounding and both HBFP widths.  Without
numba the reference runs instead (:func:`available`).
"""

import numpy as np

from ..common.jit import jit, numba
from .hbfp import (A_RANGE, M_RANGE, HBFPInputError, _check_int, _check_rounding, _check_T,
                   _fp32_bits, activation_blocks, check_gemm_shapes, exp_offset, hbfp_matmul,
                   weight_tiles, weight_untile, wrap)

#: float64's exponent bias minus bfloat16's, in the field
_BIAS_GAP = 1023 - 127


def available() -> bool:
    """Whether the compiled kernel runs (numba is installed)."""
    return numba is not None


def bfp_quantize_fast(x, m: int = 8, rounding: str = "floor"):
    """:func:`golden.equinox.hbfp.bfp_quantize` for ``floor``, ``rne`` and ``rtz``, the same
    ``(e, M)`` (module docstring, step 1); blocks along the last axis of ``x``."""
    e, M = _quantize(x, m, rounding)
    return e, M.astype(np.int64)


def _quantize(x, m: int, rounding: str, dtype=np.float64):
    """:func:`bfp_quantize_fast` with the mantissas as floats of ``dtype`` (exact integers)."""
    m = _check_int("m", m, *M_RANGE)
    _check_rounding(rounding)
    if rounding == "stoch":
        raise HBFPInputError("bfp_quantize_fast: rounding 'stoch' takes the reference "
                             "bfp_quantize with its random bits")
    x = np.asarray(x, dtype=np.float32)
    if x.ndim == 0 or x.shape[-1] == 0:
        raise HBFPInputError("bfp_quantize_fast takes blocks along the last axis, not a scalar "
                             "or an empty block")
    ef = (x.view(np.uint32) >> 23) & 0xFF
    if (ef == 0xFF).any():
        _fp32_bits(x)                                    # the reference's error
    e = ef.max(axis=-1, initial=0).astype(np.int64)
    # x * 2**(m - 2 - (e - 127)) = ±sig * 2**(ef - e + m - 25), exact in float64
    v = np.where(ef == 0, 0.0, x.astype(np.float64))
    v *= np.ldexp(1.0, m - 2 - (e - 127))[..., None]
    _ROUND[rounding](v, out=v)
    np.minimum(v, (1 << (m - 1)) - 1, out=v)
    return e, v.astype(dtype)


#: the deterministic roundings of a float64 mantissa, exact
_ROUND = {"floor": np.floor, "rne": np.rint, "rtz": np.trunc}


@jit
def _round_bf16(bits, shift, width):
    """bfloat16 bits of ``y * 2**shift`` for the float ``y`` of bit pattern ``bits``, normal or
    zero, a float32 (``width = 32``) or a float64 (``width = 64``).  Rounds to 8 significant
    bits, ties to even; a rounded magnitude below ``2**-126`` becomes a zero of its sign, one
    above the largest finite value ``±0x7F7F`` (module docstring, step 3)."""
    drop = 16 if width == 32 else 45                 # fraction bits below bfloat16's seven
    gap = 0 if width == 32 else _BIAS_GAP            # exponent bias over bfloat16's
    sign = (bits >> (width - 16)) & 0x8000
    mag = bits & ((np.int64(1) << (width - 1)) - 1)
    if mag == 0:
        return sign
    r = (mag + ((np.int64(1) << (drop - 1)) - 1) + ((mag >> drop) & 1)) >> drop
    field = (r >> 7) - gap + shift
    if field <= 0:
        return sign
    if field >= 255:
        return sign | 0x7F7F
    return sign | (field << 7) | (r & 0x7F)


@jit
def _normalize_and_sum(acc_bits, ex, ew, T, offset, width, out):
    """``out[b, n]``: the bf16 sum over K-tiles ``k`` of the normalized accumulators, given as
    the bit patterns ``acc_bits[k, b, n]`` of their exact float32 or float64 values
    (``width`` 32 or 64).  The running sums and the partials are kept
    as float32 (bfloat16 values widened); a float32 sum of two of them rounded to bfloat16 is
    their exact sum rounded to bfloat16 (the reference's :func:`~golden.equinox.hbfp.bf16_add`;
    module docstring)."""
    kt, B, n_pad = acc_bits.shape
    total = np.zeros(n_pad, dtype=np.float32)
    total_bits = total.view(np.uint32)
    part = np.zeros(n_pad, dtype=np.float32)
    part_bits = part.view(np.uint32)
    for b in range(B):
        for k in range(kt):
            for j in range(n_pad // T):
                shift = ex[k, b] + ew[k, j] - offset
                for n in range(j * T, (j + 1) * T):
                    part_bits[n] = _round_bf16(np.int64(acc_bits[k, b, n]), shift,
                                               width) << 16
            if k == 0:
                total[:] = part
            else:
                for n in range(n_pad):
                    total[n] += part[n]
                for n in range(n_pad):
                    total_bits[n] = _round_bf16(np.int64(total_bits[n]), 0, 32) << 16
        for n in range(n_pad):
            out[b, n] = total_bits[n] >> 16


def hbfp_matmul_fast(X, Wt, T: int, m: int = 8, A: int = 24, rounding: str = "floor"):
    """:func:`golden.equinox.hbfp.hbfp_matmul`, the same bits (module docstring): ``X @ Wt``
    as bf16 bits of shape ``(B, N)``.  Same parameters and errors."""
    if not available() or rounding == "stoch":
        return hbfp_matmul(X, Wt, T, m, A, rounding)   # stoch: the reference's error
    T = _check_T(T)
    m = _check_int("m", m, *M_RANGE)
    A = _check_int("A", A, *A_RANGE)
    if T * (1 << (2 * m - 2)) >= 1 << 53:
        raise HBFPInputError(f"T = {T} with m = {m}: the dot products exceed the exact range")
    check_gemm_shapes(X, Wt)
    # float32 dot products are exact while no partial sum passes 2**24
    dtype = np.float32 if T << (2 * m - 2) <= 1 << 24 else np.float64
    blocks = np.ascontiguousarray(activation_blocks(X, T).transpose(1, 0, 2))
    ex, Mx = _quantize(blocks, m, rounding, dtype)                  # (kt, B), (kt, B, T)
    ew, Mw = _quantize(weight_tiles(Wt, T), m, rounding, dtype)
    kt, B, _ = Mx.shape
    Mw = weight_untile(Mw, T)
    n_pad = Mw.shape[1]
    acc = np.matmul(Mx, Mw.reshape(kt, T, n_pad))                  # every K-tile's dot products
    if T << (2 * m - 2) >= 1 << (A - 1):                            # the accumulator can wrap
        acc = wrap(acc.astype(np.int64), A).astype(dtype)
    out = np.zeros((B, n_pad), dtype=np.uint16)
    width = 32 if dtype == np.float32 else 64
    _normalize_and_sum(acc.view(np.uint32 if width == 32 else np.int64), ex, ew, T,
                       exp_offset(m), width, out)
    return out[:, :np.shape(Wt)[1]]


__all__ = ["available", "bfp_quantize_fast", "hbfp_matmul_fast"]

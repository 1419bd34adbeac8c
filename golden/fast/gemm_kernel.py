"""FAST's BFP GEMM at training speed: the same bits as
:func:`golden.fast.numerics.gemm_quantized`.

The reference takes every round (one chunk of each operand in one group pair) as whole-array
NumPy steps: an integer matrix product of the chunk matrices, :func:`~golden.fast.numerics.
fp_gen_bits` and :func:`~golden.common.fp_add.fp32_add_bits` bit by bit.
:func:`gemm_quantized_fast` computes the same:

1. every round's ``P`` (in paper mode a sum of 16 signed 2-bit x 2-bit products, ``|P| <=
   144``; in exact mode a group's whole signed dot product, ``|P| <= 16 * 255**2 < 2**24``)
   through float32 BLAS, batched over the groups: each partial sum is an integer below
   ``2**24``, so exact;
2. in one numba loop per output row, ``fp_gen``: the float32 bit pattern of ``P`` with the
   round's exponent ``(Ex - 128) + (Ey - 128)`` added to its exponent field (``P`` is exact,
   so no rounding), +0 for ``P = 0``, a zero of ``P``'s sign when the field falls to 0 or
   below (FTZ), ``±Inf`` when it reaches 255;
3. the FP32 accumulator's additions as float32 additions (round to nearest even): DAZ cannot
   act (every operand is normal, zero or infinite: the accumulator and ``fp_gen`` flush), a sum
   below ``2**-126`` is exact and flushed to a zero of its sign (FTZ), and a NaN (``Inf - Inf``)
   becomes the adder's quiet NaN ``0x7FC00000``; IEEE 754's zero signs are the adder's (an
   exact cancellation is +0, two zeros of one sign keep it).  The K-tiles' partial sums start
   from +0 and are added to the output in tile order, as in the reference.

Groups are taken in blocks, so that the round products of a block stay within
:data:`BLOCK_BYTES`.  The property tests (``tests/test_golden_fast_kernel.py``) check every
output bit against the reference.  Without numba the reference runs instead
(:func:`available`).
"""

import numpy as np

from ..common.fp32_kernel import settle as _settle
from ..common.jit import jit, numba
from .numerics import (DEFAULT_ROUNDING, FMAC_MODES, G, ROUNDINGS, FastInputError, LaneRNG,
                       Quantized, _check_fmac_width, _check_m, _fp32_bits, _tile_groups,
                       _check_exact_range, row_groups, rows_quantized,
                       bfp_quantize_groups, gemm_quantized, quantize_operands, quantize_rows)

#: the most memory the round products of one block of groups take
BLOCK_BYTES = 64 << 20


def available() -> bool:
    """Whether the compiled kernel runs (numba is installed)."""
    return numba is not None


@jit
def _fp_gen(p_bits, shift):
    """FP32 bits of ``P * 2**shift`` from the float32 bits of the integer ``P`` (step 2)."""
    mag = p_bits & np.uint32(0x7FFFFFFF)
    sign = p_bits & np.uint32(0x80000000)
    field = np.int32(mag >> np.uint32(23)) + shift
    normal = sign | (np.uint32(field & 0xFF) << np.uint32(23)) | (mag & np.uint32(0x7FFFFF))
    out = normal if field > 0 else sign
    out = out if field < 255 else sign | np.uint32(0x7F800000)
    return out if mag != 0 else np.uint32(0)


@jit
def _accumulate(P, ex, ey_t, k_x, k_y, off_x, off_y, g0, tile, n_groups, acc, out):
    """Add a block of groups (``P[b, cx * M + m, cy * N + n]``: the rounds of group ``g0 + b``)
    to the K-tile sums ``acc`` and, at each tile's end, ``acc`` to ``out`` (float32, updated in
    place).  Chunk ``c`` of an operand has the exponent ``E - 2 c - off``; ``ey_t`` is Y's
    exponents as (groups, N)."""
    nb = P.shape[0]
    M, N = acc.shape
    P_bits = P.view(np.uint32)
    acc_bits = acc.view(np.uint32)
    out_bits = out.view(np.uint32)
    v = np.zeros(N, dtype=np.float32)
    v_bits = v.view(np.uint32)
    for m in range(M):
        for b in range(nb):
            g = g0 + b
            if g % tile == 0:
                acc[m, :] = 0
            for cx in range(k_x):
                sx = np.int32(ex[m, g] - 2 * cx - off_x - 256)
                for cy in range(k_y):
                    s = sx - np.int32(2 * cy + off_y)
                    row, col = cx * M + m, cy * N
                    for n in range(N):
                        v_bits[n] = _fp_gen(P_bits[b, row, col + n], s + ey_t[g, n])
                    for n in range(N):
                        acc[m, n] += v[n]
                    for n in range(N):
                        acc_bits[m, n] = _settle(acc_bits[m, n])
            if (g + 1) % tile == 0 or g + 1 == n_groups:
                for n in range(N):
                    out[m, n] += acc[m, n]
                for n in range(N):
                    out_bits[m, n] = _settle(out_bits[m, n])


def _magnitudes_fit(q: Quantized) -> bool:
    """Whether every magnitude of ``q`` is an ``m``-bit unsigned integer and its signs 0/1."""
    return (q.q.size == 0 or (q.q.dtype.kind in "iu" and q.q.min() >= 0 and q.q.max() < 1 << q.m
                              and q.signs.min() >= 0 and q.signs.max() <= 1))


def _chunks(q: Quantized, k: int, exact: bool, transpose: bool) -> np.ndarray:
    """The signed chunk matrices of ``q`` as float32: chunk ``c`` (most significant first) of
    every row, or the whole signed magnitudes in exact mode; ``(groups, k * rows, g)``, or
    ``(groups, g, k * rows)`` with ``transpose`` (``g``: the group size, 16 in hardware)."""
    q_, s = q.q.astype(np.int32), np.where(q.signs == 1, -1, 1).astype(np.int32)
    parts = (s * q_)[None] if exact else np.stack(
        [s * ((q_ >> (2 * (k - 1 - c))) & 3) for c in range(k)])
    # (k, rows, groups, g) -> (groups, k * rows, g) or (groups, g, k * rows)
    order = (2, 3, 0, 1) if transpose else (2, 0, 1, 3)
    out = np.ascontiguousarray(parts.transpose(order), dtype=np.float32)
    n_groups, g = q.q.shape[1], q.q.shape[2]
    return out.reshape((n_groups, g, -1) if transpose else (n_groups, -1, g))


def quantize_groups_fast(bits: np.ndarray, m: int, rounding: str, rand=None):
    """:func:`golden.fast.numerics.bfp_quantize_groups` of finite FP32 bit patterns (uint32,
    ``(n, g)``) without an exponent floor: the same ``(Es, signs, q)``.

    The 24-bit significand ``M`` (0 for a subnormal, DAZ) of an element ``d`` exponents below
    the group's largest is worth ``M * 2**(m - 24 - d)`` output LSBs, so truncation is
    ``M >> (24 - m + d)``; stochastic rounding truncates to ``m + 8`` bits, adds the 8-bit
    random value and truncates the rest, ``(M >> (16 - m + d) + R) >> 8``; round to nearest even
    rounds the shifted-out bits.  Results that reach ``2**m`` saturate to ``2**m - 1``.
    """
    m = _check_m(m)
    if rounding not in ROUNDINGS:
        raise FastInputError("rounding", rounding, "one of " + ", ".join(ROUNDINGS))
    bits = np.asarray(bits)
    if not _plain_groups(bits, rand if rounding == "sr" else np.zeros(1, np.int64)):
        return bfp_quantize_groups(bits.view(np.float32), m, rounding, rand)  # its error
    b = bits.astype(np.int64)
    s, e = (b >> 31) & 1, (b >> 23) & 0xFF
    M = np.where(e == 0, 0, (b & 0x7FFFFF) | (1 << 23))
    Es = e.max(axis=1)
    d = Es[:, None] - e
    if rounding == "trunc":
        q = M >> np.minimum(24 - m + d, 63)
    elif rounding == "sr":
        sh = 16 - m + d
        t = np.where(sh >= 0, M >> np.clip(sh, 0, 63), M << np.clip(-sh, 0, 63))
        q = (t + np.asarray(rand, dtype=np.int64)) >> 8
    else:
        sh = np.minimum(24 - m + d, 62)
        q = M >> sh
        rest = M - (q << sh)
        half = np.int64(1) << (sh - 1)
        q = q + ((rest > half) | ((rest == half) & (q & 1 == 1)))
    return Es, s, np.minimum(q, (1 << m) - 1)


def _plain_groups(bits, rand) -> bool:
    """Whether :func:`quantize_groups_fast` may take these inputs: 2-D uint32 finite patterns
    and ``rand`` integers 0..255 of their shape (for ``sr``; a stand-in otherwise).  Anything
    else goes to the reference, which names the problem."""
    if bits.dtype != np.uint32 or bits.ndim != 2 or ((bits & 0x7F800000) == 0x7F800000).any():
        return False
    if rand is None:
        return False
    rand = np.asarray(rand)
    if rand.dtype.kind not in "iu" or (rand.size > 1 and rand.shape != bits.shape):
        return False
    return not rand.size or (rand.min() >= 0 and rand.max() <= 255)


def quantize_rows_fast(X, m: int = 4, rounding: str = "trunc", rng: LaneRNG | None = None,
                       group: int = G):
    """:func:`golden.fast.numerics.quantize_rows` (without an exponent floor), the same
    :class:`~golden.fast.numerics.Quantized` groups and the same draws from ``rng``."""
    bits = _fp32_bits(X)
    if bits.ndim == 2 and ((bits & 0x7F800000) == 0x7F800000).any():
        return quantize_rows(X, m, rounding, rng, group=group)       # its error
    groups, rand, shape = row_groups(X, rounding, rng, group)
    Es, s, q = quantize_groups_fast(groups, 4 if m == 2 else m, rounding, rand)
    return rows_quantized(Es, s, q, shape, m)


def quantize_operands_fast(X, Y, mx: int, my: int, dataflow: str = "fwd", rng=None):
    """:func:`golden.fast.numerics.quantize_operands` with the default roundings and no
    exponent floors: the same ``(xq, yq)`` and the same draws from ``rng``."""
    X, Y = _fp32_bits(X), _fp32_bits(Y)
    if (X.ndim != 2 or Y.ndim != 2 or X.shape[1] != Y.shape[0]
            or ((X & 0x7F800000) == 0x7F800000).any() or ((Y & 0x7F800000) == 0x7F800000).any()):
        return quantize_operands(X.view(np.float32), Y.view(np.float32), mx, my, dataflow,
                                 rng=rng)                            # its errors
    _check_fmac_width("mx", mx), _check_fmac_width("my", my)
    _tile_groups(dataflow, None)
    x_rounding, y_rounding = DEFAULT_ROUNDING[dataflow]
    if "sr" in (x_rounding, y_rounding):
        rng = rng or LaneRNG()
    xq = quantize_rows_fast(X.view(np.float32), mx, x_rounding, rng)
    yq = quantize_rows_fast(np.ascontiguousarray(Y.T).view(np.float32), my, y_rounding, rng)
    return xq, yq


def gemm_quantized_fast(xq: Quantized, yq: Quantized, dataflow: str = "fwd",
                        mode: str = "paper", array=None) -> np.ndarray:
    """:func:`golden.fast.numerics.gemm_quantized`, the same bits (module docstring): FP32 bits
    (uint32, shape (rows of X, columns of Y)).  Same parameters and errors."""
    if not available():
        return gemm_quantized(xq, yq, dataflow, mode, array)
    if mode not in FMAC_MODES:
        raise FastInputError("mode", mode, "one of " + ", ".join(FMAC_MODES))
    mx, my = _check_fmac_width("mx", xq.m), _check_fmac_width("my", yq.m)
    if xq.q.shape[1] != yq.q.shape[1]:
        raise FastInputError("K groups", (xq.q.shape[1], yq.q.shape[1]), "equal on both sides")
    n_groups = xq.q.shape[1]
    tile = _tile_groups(dataflow, array) or n_groups
    _check_exact_range(xq, yq, mode)
    if n_groups == 0 or not _magnitudes_fit(xq) or not _magnitudes_fit(yq):
        return gemm_quantized(xq, yq, dataflow, mode, array)   # its result or its error
    exact = mode == "exact"
    k_x, k_y = (1, 1) if exact else (mx // 2, my // 2)
    off_x, off_y = (mx - 2, my - 2) if exact else (0, 0)
    X, Y = _chunks(xq, k_x, exact, False), _chunks(yq, k_y, exact, True)
    M, N = xq.q.shape[0], yq.q.shape[0]
    acc = np.zeros((M, N), dtype=np.float32)
    out = np.zeros((M, N), dtype=np.float32)
    ex, ey_t = np.ascontiguousarray(xq.Es, np.int32), np.ascontiguousarray(yq.Es.T, np.int32)
    per_group = max(1, k_x * M * k_y * N * 4)
    block = max(1, BLOCK_BYTES // per_group)
    for g0 in range(0, n_groups, block):
        P = np.matmul(X[g0:g0 + block], Y[g0:g0 + block])
        _accumulate(P, ex, ey_t, k_x, k_y, off_x, off_y, g0, tile, n_groups, acc, out)
    return out.view(np.uint32)


__all__ = ["BLOCK_BYTES", "available", "gemm_quantized_fast"]

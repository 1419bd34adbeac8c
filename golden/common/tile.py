"""What every PE-tile model shares: operand-array checks and the result record.

A tile of ``rows`` x ``cols`` PEs (spec ``docs/specs/fpraker.md`` §5, §6) computes, for every PE
``(r, c)``, the dot product ``sum_s sum_i A[c, s, i] * B[r, s, i]``: ``A`` holds the operand
streamed down each column (the serial, term-encoded one in FPRaker), shape ``(cols, groups,
lanes)``; ``B`` the operand shared along each row, shape ``(rows, groups, lanes)``.  Both are
bfloat16 bit patterns.
"""

from typing import NamedTuple

import numpy as np


class TileResult(NamedTuple):
    """Result of a tile run.

    ``stalls`` maps a stall cause to a count of *lane-cycles* (one PE lane idle for one cycle,
    see the tile model's docstring for the causes); ``useful`` counts the lane-cycles that
    processed something and ``lane_cycles`` is ``cycles * rows * cols * lanes``, so ``useful``
    plus every stall count equals ``lane_cycles``.
    """

    #: bf16 read-out of every PE, shape (rows, cols), uint16
    out: np.ndarray
    #: tile cycles from the first group's start to the last group's finish
    cycles: int
    #: stall cause -> lane-cycles
    stalls: dict
    #: cycles of every (column, group), shape (cols, groups), int64
    group_cycles: np.ndarray
    #: lane-cycles that processed a term (FPRaker) or a product (bit-parallel)
    useful: int
    #: cycles * rows * cols * lanes
    lane_cycles: int


def check_tile_operands(A, B, rows: int, cols: int, lanes: int):
    """``A`` (cols, groups, lanes) and ``B`` (rows, groups, lanes) as int64 arrays of bf16 bits.

    Raises
    ------
    ValueError
        A non-integer dtype, a wrong number of dimensions, a shape that does not match the tile
        (``cols``/``rows``/``lanes``) or the other operand's group count, no group at all, or
        values outside 0..0xFFFF.
    """
    arrays = []
    for name, x, lead, what in (("A", A, cols, "cols"), ("B", B, rows, "rows")):
        x = np.asarray(x)
        if x.dtype.kind not in "iu":
            raise ValueError(f"{name} must hold integer bf16 bit patterns, got dtype {x.dtype}")
        if x.ndim != 3 or x.shape[0] != lead or x.shape[2] != lanes:
            raise ValueError(f"{name} must have shape ({what}={lead}, groups, lanes={lanes}), "
                             f"got {x.shape}")
        if x.size and (x.min() < 0 or x.max() > 0xFFFF):
            raise ValueError(f"{name} holds values outside the 16-bit range 0..0xFFFF")
        arrays.append(x.astype(np.int64))
    A, B = arrays
    if A.shape[1] != B.shape[1]:
        raise ValueError(f"A has {A.shape[1]} groups and B {B.shape[1]}: every column and row "
                         "stream needs the same number of groups")
    if A.shape[1] == 0:
        raise ValueError("A and B hold no group: a tile run needs at least one")
    return A, B


def gemm_groups(S, P, lanes: int):
    """Serial rows ``S`` (M, K) and parallel rows ``P`` (N, K) as int64 arrays zero-padded to
    whole groups: ``(S (M, G, lanes), P (N, G, lanes))``.

    Raises
    ------
    ValueError
        Non-integer dtypes, arrays that are not 2-D, or reduction lengths that differ (the two
        operands cannot be multiplied).
    """
    S, P = np.asarray(S), np.asarray(P)
    for name, x in (("serial", S), ("parallel", P)):
        if x.dtype.kind not in "iu":
            raise ValueError(f"{name} operand must hold integer bf16 bit patterns, got dtype "
                             f"{x.dtype}")
        if x.ndim != 2:
            raise ValueError(f"{name} operand must be 2-D (rows, K), got shape {x.shape}")
    if S.shape[1] != P.shape[1]:
        raise ValueError(f"cannot multiply: serial operand {S.shape} and parallel operand "
                         f"{P.shape} have different reduction lengths ({S.shape[1]} vs "
                         f"{P.shape[1]})")
    K = S.shape[1]
    G = max(1, -(-K // lanes))
    pad = G * lanes - K
    S = np.pad(S.astype(np.int64), ((0, 0), (0, pad))).reshape(S.shape[0], G, lanes)
    P = np.pad(P.astype(np.int64), ((0, 0), (0, pad))).reshape(P.shape[0], G, lanes)
    return S, P


__all__ = ["TileResult", "check_tile_operands", "gemm_groups"]

"""The bit-parallel bfloat16 baseline tile: ``rows`` x ``cols`` :mod:`golden.baseline.bf16_pe`
PEs in lock-step, one group per cycle, with the FPRaker tile's operand arrays and result record
(:mod:`golden.common.tile`)."""

from dataclasses import dataclass

import numpy as np

from .. import check_int
from ..common.tile import TileResult, check_tile_operands
from ..fpraker.tile import pe_tile_base
from .bf16_pe import BaselineConfig, baseline_dot_batch


@dataclass(frozen=True)
class BaselineTileConfig(pe_tile_base(BaselineConfig, ("rows", int, 8), ("cols", int, 8))):
    """Configuration of the bit-parallel bfloat16 baseline tile (registry unit
    ``baseline.bf16_tile``): ``rows`` x ``cols`` :class:`BaselineConfig` PEs, the FPRaker
    paper's comparison tile (spec ``docs/specs/fpraker.md`` §5.1: "The baseline tile has the same
    8×8×8 shape"; Table III).

    ``rows``: PE rows, row ``r``'s B stream is shared along the row (paper: 8).  ``cols``: PE
    columns, column ``c``'s A stream is shared down the column (paper: 8).  The other fields
    are :class:`BaselineConfig`'s, with its defaults and validation; :attr:`pe` is that PE
    configuration.
    """

    def __post_init__(self):
        check_int(self, "rows", 1, 64)
        check_int(self, "cols", 1, 64)
        super().__post_init__()


def bf16_tile_run(A, B, cfg: BaselineTileConfig = BaselineTileConfig()) -> TileResult:
    """The baseline tile's reduction: every PE ``(r, c)`` accumulates
    ``sum_s A[c, s] . B[r, s]`` from a zero accumulator, one group per cycle.

    A bit-parallel PE takes every group in one cycle whatever its values, so all PEs advance in
    lock-step and the tile has no stalls: ``cycles`` is the number of groups, every
    ``group_cycles`` entry is 1 and every lane-cycle counts as useful (a zero operand's lane
    still spends its multiplier's cycle).  The arithmetic is :func:`baseline_dot_batch`'s.

    Parameters
    ----------
    A : array (cols, groups, lanes) of bf16 bit patterns
        Column ``c``'s operand stream (the one FPRaker processes term-serially).
    B : array (rows, groups, lanes) of bf16 bit patterns
        Row ``r``'s operand stream.
    cfg : BaselineTileConfig

    Returns
    -------
    TileResult
        ``out[r, c]`` the bf16 read-out of PE ``(r, c)`` (uint16, shape (rows, cols)).

    Raises
    ------
    ValueError
        Shapes that do not match the tile or each other, no group, non-integer arrays, values
        outside 0..0xFFFF or an exponent field of 255 (spec §1.3).
    """
    A, B = check_tile_operands(A, B, cfg.rows, cfg.cols, cfg.lanes)
    G = A.shape[1]
    K = G * cfg.lanes
    # one dot product per PE, in row-major (r, c) order
    rows = np.broadcast_to(B.reshape(cfg.rows, 1, K), (cfg.rows, cfg.cols, K)).reshape(-1, K)
    cols = np.broadcast_to(A.reshape(1, cfg.cols, K), (cfg.rows, cfg.cols, K)).reshape(-1, K)
    out, _ = baseline_dot_batch(cols, rows, cfg.pe)
    lane_cycles = G * cfg.rows * cfg.cols * cfg.lanes
    return TileResult(out=out.reshape(cfg.rows, cfg.cols).astype(np.uint16), cycles=G, stalls={},
                      group_cycles=np.ones((cfg.cols, G), dtype=np.int64), useful=lane_cycles,
                      lane_cycles=lane_cycles)


__all__ = ["BaselineTileConfig", "bf16_tile_run"]

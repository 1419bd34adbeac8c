"""The bit-parallel bfloat16 baseline tile: ``rows`` x ``cols`` :mod:`golden.baseline.bf16_pe`
PEs in lock-step, one group per cycle, with the FPRaker tile's operand arrays and result record
(:mod:`golden.common.tile`).  Register stages (``pipeline``) delay every group's accumulation by
the same number of cycles: :func:`bf16_tile_cycles` is the cycle model.  With the PEs'
``contexts`` the tile computes ``contexts`` output tiles interleaved, the group of each cycle
joining the output tile of that cycle's slot."""

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .. import check_int
from ..common.accumulator import read_out_bits
from ..common.stream import delayed_steps, interleaved_steps
from ..common.tile import TileResult, check_tile_operands, pe_tile_base
from .bf16_pe import BaselineConfig, group_step, baseline_dot_batch


@dataclass(frozen=True)
class BaselineTileConfig(pe_tile_base(
        BaselineConfig,
        ("rows", int, 8, "PE rows: row r's B stream is shared along the row (paper: 8), 1..64"),
        ("cols", int, 8, "PE columns: column c's A stream is shared down the column "
                         "(paper: 8), 1..64"))):
    """Configuration of the bit-parallel bfloat16 baseline tile (registry unit
    ``baseline.bf16_tile``): ``rows`` x ``cols`` :class:`BaselineConfig` PEs, the FPRaker
    paper's comparison tile (spec ``docs/specs/fpraker.md`` §5.1: "The baseline tile has the same
    8×8×8 shape"; Table III).

    ``rows``: PE rows, row ``r``'s B stream is shared along the row (paper: 8).  ``cols``: PE
    columns, column ``c``'s A stream is shared down the column (paper: 8).  The other fields
    are :class:`BaselineConfig`'s, with its defaults and validation; :attr:`pe` is that PE
    configuration (``pipeline``: every PE's register stages, 0..3; ``contexts``: every PE's
    interleaved dot products, so that the tile computes ``contexts`` output tiles interleaved,
    :func:`bf16_tile_cycles`).
    """

    def __post_init__(self):
        check_int(self, "rows", 1, 64)
        check_int(self, "cols", 1, 64)
        super().__post_init__()


def bf16_tile_run(A, B, cfg: BaselineTileConfig = BaselineTileConfig()) -> TileResult:
    """The baseline tile's reduction: every PE ``(r, c)`` accumulates
    ``sum_s A[c, s] . B[r, s]`` from a zero accumulator, one group per cycle.

    A bit-parallel PE takes every group in one cycle whatever its values, so all PEs advance in
    lock-step and the tile has no stalls: ``cycles`` is the number of groups plus the
    ``pipeline`` cycles in which the last group passes the PEs' register stages, every
    ``group_cycles`` entry is 1 and every lane-cycle of a group counts as useful (a zero
    operand's lane still spends its multiplier's cycle); the lane-cycles of those last
    ``pipeline`` cycles are the stall cause ``pipeline`` (absent at ``pipeline = 0``).  The
    arithmetic is :func:`baseline_dot_batch`'s.

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
    if cfg.contexts != 1:
        raise ValueError(f"bf16_tile_run: one reduction runs in one of the {cfg.contexts} "
                         f"interleaved output tiles; bf16_tile_cycles models them, and the "
                         f"reduction itself is that of contexts = 1")
    A, B = check_tile_operands(A, B, cfg.rows, cfg.cols, cfg.lanes)
    G = A.shape[1]
    K = G * cfg.lanes
    # one dot product per PE, in row-major (r, c) order
    rows = np.broadcast_to(B.reshape(cfg.rows, 1, K), (cfg.rows, cfg.cols, K)).reshape(-1, K)
    cols = np.broadcast_to(A.reshape(1, cfg.cols, K), (cfg.rows, cfg.cols, K)).reshape(-1, K)
    out, _ = baseline_dot_batch(cols, rows, cfg.pe)
    per_cycle = cfg.rows * cfg.cols * cfg.lanes
    stalls = {"pipeline": cfg.pipeline * per_cycle} if cfg.pipeline else {}
    return TileResult(out=out.reshape(cfg.rows, cfg.cols).astype(np.uint16),
                      cycles=G + cfg.pipeline, stalls=stalls,
                      group_cycles=np.ones((cfg.cols, G), dtype=np.int64), useful=G * per_cycle,
                      lane_cycles=(G + cfg.pipeline) * per_cycle)


def bf16_tile_busy(cfg: BaselineTileConfig, taken, cycles: int) -> list:
    """The tile's ``busy`` output in cycles ``0 .. cycles - 1`` when its join fired (a group was
    taken) in the cycles ``taken``: high in a cycle in which a group is taken, or in which a
    group taken in one of the ``cfg.pipeline + cfg.contexts - 1`` cycles before is still in the
    PEs' stages (the accumulation loop's ``contexts - 1`` included)."""
    taken = set(int(t) for t in taken)
    lag = cfg.pipeline + cfg.contexts - 1
    return [any(t - k in taken for k in range(lag + 1)) for t in range(cycles)]


class TileCycle(NamedTuple):
    """One cycle of :func:`bf16_tile_cycles`."""

    #: the ``busy`` output in the cycle (before its clock edge)
    busy: bool
    #: the PEs' read-outs after the cycle's clock edge, uint16 (rows, cols)
    out: np.ndarray


def bf16_tile_cycles(cfg: BaselineTileConfig, cycles, slot: int = 0) -> list:
    """Cycle model of the tile from reset (the timing contract of :class:`hdl.baseline.Bf16Tile`):
    ``cycles`` holds, per clock cycle, ``None`` (the join does not fire) or the group taken in
    it, ``(a, b, clear)``: ``a`` (cols, lanes) and ``b`` (rows, lanes) bf16 bit patterns,
    ``clear`` (cols,) booleans (column ``c``'s PEs start the group from zero).  Returns a
    :class:`TileCycle` per cycle.

    The group taken at edge ``t`` is accumulated in every PE at edge ``t + cfg.pipeline``, so
    ``out`` shows it from the cycle after that edge; groups are accumulated exactly once, in
    order, with :func:`baseline_dot_batch`'s arithmetic, and cycles without a group leave the
    accumulators as they are.  ``busy`` is :func:`bf16_tile_busy`'s.

    With ``cfg.contexts = C > 1`` (:func:`golden.common.stream.interleaved_steps`, as
    :func:`golden.baseline.bf16_pe_cycles`): the group taken in cycle ``t`` joins output tile
    ``(slot + t) mod C`` (``slot``: the tile's ``slot`` output in the first cycle, 0 after
    reset), ``C - 1 + pipeline`` edges after the edge that takes it; cycle ``t`` shows output
    tile ``(slot + t - pipeline) mod C`` (the ``acc_slot`` output).  Every output tile starts
    from zero accumulators.

    Raises
    ------
    ValueError
        A group whose arrays do not fit the tile, or an operand that is not a bf16 bit pattern
        the PEs accept (exponent field 255).
    """
    R, C, L = cfg.rows, cfg.cols, cfg.lanes
    pe = cfg.pe
    n = R * C
    acc = (np.ones(n, dtype=bool), np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64),
           np.zeros(n, dtype=np.int64))
    cycles = list(cycles)
    busy = bf16_tile_busy(cfg, [t for t, g in enumerate(cycles) if g is not None], len(cycles))

    def step(acc, entering):
        a, b, clear = entering
        A, B = check_tile_operands(np.asarray(a).reshape(C, 1, L),
                                   np.asarray(b).reshape(R, 1, L), R, C, L)
        clear = np.broadcast_to(np.asarray(clear, dtype=bool), (C,))
        # PE (r, c) in row-major order: column c's A and clear, row r's B
        rows = np.repeat(B[:, 0], C, axis=0)
        cols = np.tile(A[:, 0], (R, 1))
        fresh = np.tile(clear, R)
        zero, sign, exp, sig = acc
        return group_step(cols, rows, (zero | fresh, np.where(fresh, 0, sign),
                                       np.where(fresh, 0, exp), np.where(fresh, 0, sig)), pe)

    def read(acc):
        return read_out_bits(*acc, pe).reshape(R, C)

    if cfg.contexts == 1:
        outs = delayed_steps(cycles, cfg.pipeline, acc, step, read)
    else:
        outs = interleaved_steps(cycles, cfg.pipeline, cfg.contexts, [acc] * cfg.contexts,
                                 step, slot, read)
    return [TileCycle(busy[t], o) for t, o in enumerate(outs)]


__all__ = ["BaselineTileConfig", "bf16_tile_run", "bf16_tile_busy", "TileCycle",
           "bf16_tile_cycles"]

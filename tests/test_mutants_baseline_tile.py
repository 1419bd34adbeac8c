"""The baseline tile's testbench (tb.baseline.bf16_tile) catches deliberately broken tiles.

Each case builds ``baseline.bf16_tile`` with its ports or one block rewired — a column that
ignores ``clear``, row 1's PEs fed row 0's B, a PE fed its neighbour column's A, a stream whose
``ready`` is not joined with the others, ``busy`` one cycle late, an error flag that is not
sticky, ignores the B operands or is set by operands that were never accepted — and runs the
testbench (quick effort, a 2 x 2 tile; 2 x 3 where a case needs a third column): the named cocotb
tests must fail.  (The pattern of tests/test_mutants.py.)
"""

import pytest
from amaranth.hdl import Cat, Mux, Signal
from mutantutil import Patched, run_failed

from golden.baseline import BaselineTileConfig
from hdl.baseline import Bf16Tile

CFG = BaselineTileConfig(rows=2, cols=2)


def _run(factory, tb_options, cfg=CFG):
    return run_failed("baseline.bf16_tile", cfg, factory, tb_options)


class RewiredTile(Patched):
    """The real tile with every port passed through (:class:`mutantutil.Patched`), then
    ``patch(m, inner)`` statements that override some of the pass-through assignments."""

    real = Bf16Tile

    def __init__(self, cfg):
        self.cfg = cfg
        super().__init__(cfg)


class ClearIgnoredOnColumn1(RewiredTile):
    def patch(self, m, inner):
        return [inner.a[1].payload.clear.eq(0)]


class Row1TakesRow0sB(RewiredTile):
    def patch(self, m, inner):
        return [inner.b[1].payload.eq(self.b[0].payload)]


class ReadyNotJoined(RewiredTile):
    """Column 0's stream reports every offered group taken, whether the tile took it or not."""

    def patch(self, m, inner):
        return [self.a[0].ready.eq(self.a[0].valid)]


class BusyOneCycleLate(RewiredTile):
    def patch(self, m, inner):
        late = Signal()
        m.d.sync += late.eq(inner.busy)
        return [self.busy.eq(late)]


class ErrorFromOfferedOperands(RewiredTile):
    """``error`` also rises on an exponent-255 operand that is offered but not taken."""

    def patch(self, m, inner):
        seen = Signal()
        offered = Cat(*((x.exp == 0xFF) & s.valid for s in self.a for x in s.payload.a)).any()
        with m.If(offered):
            m.d.sync += seen.eq(1)
        return [self.error.eq(inner.error | seen)]


class ErrorNotSticky(RewiredTile):
    """``error`` is high only in the cycle after a bad operand was taken."""

    def patch(self, m, inner):
        last = Signal()
        m.d.sync += last.eq(inner.error)
        return [self.error.eq(inner.error & ~last)]


class ErrorIgnoringB(RewiredTile):
    """The error check sees only the A operands (B's exponent-255 fields read as 254)."""

    def patch(self, m, inner):
        return [inner.b[r].payload.b[i].exp.eq(Mux(x.exp == 0xFF, 0xFE, x.exp))
                for r in range(self.cfg.rows)
                for i, x in enumerate(self.b[r].payload.b)]


class ColumnBroadcastOneOff(RewiredTile):
    """Column 1's PEs take column 2's A operands (the broadcast wired one column off); the
    ``clear`` flags stay right."""

    def patch(self, m, inner):
        return [inner.a[1].payload.a.eq(self.a[2].payload.a)]


@pytest.mark.parametrize("mutant, expected", [
    (ClearIgnoredOnColumn1, {"random_reductions", "clear_and_reset"}),
    (Row1TakesRow0sB, {"directed_reductions", "random_reductions", "clear_and_reset"}),
    (ReadyNotJoined, {"random_reductions", "clear_and_reset", "error_flag"}),
    (BusyOneCycleLate, {"directed_reductions", "random_reductions"}),
    (ErrorFromOfferedOperands, {"error_flag"}),
    (ErrorNotSticky, {"error_flag"}),
    (ErrorIgnoringB, {"error_flag"}),
], ids=lambda x: x.__name__ if isinstance(x, type) else None)
def test_broken_tile_fails(mutant, expected, tb_options):
    failed = _run(mutant, tb_options)
    assert expected <= set(failed), failed


def test_column_broadcast_one_column_off(tb_options):
    failed = _run(ColumnBroadcastOneOff, tb_options,
                  BaselineTileConfig(rows=2, cols=3, lanes=4, int_bits=4))
    assert {"directed_reductions", "random_reductions"} <= set(failed), failed


def test_tile_built_for_other_pe_configuration(tb_options):
    """PEs keeping 6 fraction bits instead of 9 (the testbench checks against 9)."""
    failed = _run(lambda cfg: Bf16Tile(BaselineTileConfig(rows=cfg.rows, cols=cfg.cols,
                                                           keep_bits=6)), tb_options)
    assert "random_reductions" in failed, failed


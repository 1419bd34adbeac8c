"""The FPRaker tile's testbench (tb.fpraker.tile) catches deliberately broken tiles.

Each case replaces one block of ``fpraker.tile`` with a copy whose ports are rewired
(:class:`mutantutil.Patched`) — an exponent block that forgets the CSD lead carry, PEs that
ignore the B-zero done flags, odd rows served in the same cycle as even rows (no exponent-block
sharing), a column encoder lane that pops as soon as one PE has taken its term; with the
``pipeline`` stage, PEs that load the stage a cycle early (the wrong latency) and columns that
end a group before the stage has let every row start — and runs the
testbench at quick effort on a 2 x 2 tile: the named cocotb tests must fail.  Under
``sync = "independent"`` the broken blocks are a PE's term selector (cursors that keep the
previous group's position, terms that lose their sign, a last term not flagged, terms dropped
when the shift window holds them) and a column that ends its group before all its PEs finished.
"""

import pytest

import hdl.fpraker.tile as tile
import hdl.fpraker.tile_pe as tile_pe
from golden.fpraker.tile import TileConfig
from mutantutil import Patched, run_failed

CFG = TileConfig(rows=2, cols=2)
CFG_INDEP = TileConfig(rows=2, cols=2, sync="independent")
CFG_PIPE = TileConfig(rows=2, cols=2, pipeline=1)


def _home(block: str):
    """The module that builds ``block``: a PE builds its term selector, the tile the rest."""
    return tile_pe if block == "TermSelector" else tile


class NoLeadCarry(Patched):
    real = tile_pe.ExponentBlock

    def patch(self, m, inner):
        return [inner.lead.eq(0)]


class BZeroNotDone(Patched):
    real = tile_pe.TilePE

    def patch(self, m, inner):
        return [inner.first.eq(0)]


class NoSkew(Patched):
    real = tile_pe.TilePE

    def patch(self, m, inner):
        return [inner.serve.eq(self.busy & self.first)]


class PopOnAnyTake(Patched):
    real = tile.TileColumn

    def patch(self, m, inner):
        return [inner.taken_all.eq(self.taken_all | self.done_all | 0xFF)]


class CursorNotReset(Patched):
    real = tile_pe.TermSelector

    def patch(self, m, inner):
        return [inner.first.eq(0)]


class TermSignLost(Patched):
    real = tile_pe.TermSelector

    def patch(self, m, inner):
        return [self.neg.eq(0)]


class LastTermNotFlagged(Patched):
    real = tile_pe.TermSelector

    def patch(self, m, inner):
        return [self.last.eq(0)]


class PopWhenPresented(Patched):
    real = tile_pe.TermSelector

    def patch(self, m, inner):
        return [inner.pop.eq(self.valid)]


class ColumnEndsEarly(Patched):
    real = tile.TileColumn

    def patch(self, m, inner):
        return [inner.fin_all.eq(1)]


class ServedBeforeTheStage(Patched):
    """The PE loads the exponent block's registered outputs in the cycle the block computes
    them (one cycle early: the stage still holds the cycle before's)."""

    real = tile_pe.TilePE

    def patch(self, m, inner):
        return [inner.serve.eq(self.busy & (self.serve | self.first))]


class EndsBeforeTheStage(Patched):
    """The column signals its group's last cycle in the second cycle when its encoder has no
    term (the unpipelined tile's minimum of 2 cycles), before the stage has let the odd rows
    start."""

    real = tile.TileColumn

    def patch(self, m, inner):
        return [self.last.eq(inner.last | (inner.busy & inner.second & ~inner.valid.any()))]


@pytest.mark.parametrize("block, mutant, failing", [
    ("TilePE", ServedBeforeTheStage, {"random_reductions", "directed_reductions"}),
    ("TileColumn", EndsBeforeTheStage, {"directed_reductions"}),
])
def test_mutant_fails_pipelined(block, mutant, failing, monkeypatch, tb_options):
    monkeypatch.setattr(_home(block), block, mutant)
    failed = set(run_failed("fpraker.tile", CFG_PIPE, None, tb_options))
    assert failing <= failed, f"{mutant.__name__}: failing tests {sorted(failed)}"


@pytest.mark.parametrize("block, mutant, failing", [
    ("TermSelector", CursorNotReset, {"random_reductions"}),
    ("TermSelector", TermSignLost, {"random_reductions"}),
    ("TermSelector", LastTermNotFlagged, {"random_reductions"}),
    ("TermSelector", PopWhenPresented, {"random_reductions"}),
    ("TileColumn", ColumnEndsEarly, {"random_reductions"}),
])
def test_mutant_fails_independent(block, mutant, failing, monkeypatch, tb_options):
    monkeypatch.setattr(_home(block), block, mutant)
    failed = set(run_failed("fpraker.tile", CFG_INDEP, None, tb_options))
    assert failing <= failed, f"{mutant.__name__}: failing tests {sorted(failed)}"


@pytest.mark.parametrize("block, mutant, failing", [
    ("ExponentBlock", NoLeadCarry, {"random_reductions"}),
    ("TilePE", BZeroNotDone, {"random_reductions"}),
    ("TilePE", NoSkew, {"random_reductions"}),
    ("TileColumn", PopOnAnyTake, {"random_reductions"}),
])
def test_mutant_fails(block, mutant, failing, monkeypatch, tb_options):
    monkeypatch.setattr(_home(block), block, mutant)
    failed = set(run_failed("fpraker.tile", CFG, None, tb_options))
    assert failing <= failed, f"{mutant.__name__}: failing tests {sorted(failed)}"

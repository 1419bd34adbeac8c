"""The FPRaker tile's testbench (tb.fpraker.tile) catches deliberately broken tiles.

Each case replaces one block of ``fpraker.tile`` with a copy whose ports are rewired
(:class:`mutantutil.Patched`) — an exponent block that forgets the CSD lead carry, PEs that
ignore the B-zero done flags, odd rows served in the same cycle as even rows (no exponent-block
sharing), a column encoder lane that pops as soon as one PE has taken its term — and runs the
testbench at quick effort on a 2 x 2 tile: the named cocotb tests must fail.
"""

import pytest

import hdl.fpraker.tile as tile
from golden.fpraker.tile import TileConfig
from mutantutil import Patched, run_failed

CFG = TileConfig(rows=2, cols=2)


class NoLeadCarry(Patched):
    real = tile.ExponentBlock

    def patch(self, m, inner):
        return [inner.lead.eq(0)]


class BZeroNotDone(Patched):
    real = tile.TilePE

    def patch(self, m, inner):
        return [inner.first.eq(0)]


class NoSkew(Patched):
    real = tile.TilePE

    def patch(self, m, inner):
        return [inner.serve.eq(self.busy & self.first)]


class PopOnAnyTake(Patched):
    real = tile.TileColumn

    def patch(self, m, inner):
        return [inner.taken_all.eq(self.taken_all | self.done_all | 0xFF)]


@pytest.mark.parametrize("block, mutant, failing", [
    ("ExponentBlock", NoLeadCarry, {"random_reductions"}),
    ("TilePE", BZeroNotDone, {"random_reductions"}),
    ("TilePE", NoSkew, {"random_reductions"}),
    ("TileColumn", PopOnAnyTake, {"random_reductions"}),
])
def test_mutant_fails(block, mutant, failing, monkeypatch, tb_options):
    monkeypatch.setattr(tile, block, mutant)
    failed = set(run_failed("fpraker.tile", CFG, None, tb_options))
    assert failing <= failed, f"{mutant.__name__}: failing tests {sorted(failed)}"

"""The Equinox array's testbench (tb.equinox.array) catches deliberately broken arrays.

Each case builds ``equinox.array`` with one block broken — a PE that drops its partial-sum
input, weights written one cycle after the wavefront, the tile exponent latched one cycle late,
an exponent FIFO one entry short, normalizers truncating instead of rounding to nearest even —
and runs the testbench (quick effort, the paper's 4 x 4 x 4 array): the named cocotb tests must
fail.  (The pattern of tests/test_mutants.py.)
"""

import dataclasses
import itertools

from amaranth.hdl import Signal

import hdl.equinox.array
from golden.equinox import ArrayConfig
from mutantutil import Patched, run_failed

CFG = ArrayConfig(n=4, w=4)


def _run(tb_options):
    return run_failed("equinox.array", CFG, None, tb_options)


def _pe_dropping_psum_in_at(row: int, col: int):
    """PE(row, col) adds its dot product to 0 instead of the partial sum from above (the
    array builds its PEs row by row)."""
    count = itertools.count()

    class PEDroppingPsumIn(Patched):
        real = hdl.equinox.array.PE

        def __init__(self, cfg):
            self.index = next(count)
            self.cfg = cfg
            super().__init__(cfg)

        def patch(self, m, inner):
            return [inner.psum_in.eq(0)] if self.index == row * self.cfg.n + col else []

    return PEDroppingPsumIn


class PEWithLateWeights(Patched):
    """Every weight write lands one enabled cycle after the feeder presented it."""

    real = hdl.equinox.array.PE

    def patch(self, m, inner):
        load = Signal()
        wt = Signal.like(self.wt)
        with m.If(self.en):
            m.d.sync += [load.eq(self.wt_load), wt.eq(self.wt)]
        return [inner.wt_load.eq(load), inner.wt.eq(wt)]


class LateTileExponent(Patched):
    """The tile exponent is latched one enabled cycle after the row-0 write."""

    real = hdl.equinox.array.ExponentPath

    def patch(self, m, inner):
        load = Signal()
        e = Signal.like(self.wt_exp)
        with m.If(self.en):
            m.d.sync += [load.eq(self.wt_exp_load), e.eq(self.wt_exp)]
        return [inner.wt_exp_load.eq(load), inner.wt_exp.eq(e)]


def test_pe_dropping_the_partial_sum_from_above(tb_options, monkeypatch):
    monkeypatch.setattr(hdl.equinox.array, "PE", _pe_dropping_psum_in_at(1, 0))
    failed = _run(tb_options)
    assert {"tv8_dot_product", "tv9_tv10_normalizer", "jit_reload_back_to_back",
            "random_gemms"} <= set(failed), failed


def test_weight_reload_one_cycle_late(tb_options, monkeypatch):
    monkeypatch.setattr(hdl.equinox.array, "PE", PEWithLateWeights)
    failed = _run(tb_options)
    assert {"tv8_dot_product", "jit_reload_back_to_back", "random_gemms"} <= set(failed), failed


def test_tile_exponent_latched_one_cycle_late(tb_options, monkeypatch):
    monkeypatch.setattr(hdl.equinox.array, "ExponentPath", LateTileExponent)
    failed = _run(tb_options)
    assert {"tv8_dot_product", "tv9_tv10_normalizer", "random_gemms"} <= set(failed), failed


def test_exponent_fifo_one_entry_short(tb_options, monkeypatch):
    real = hdl.equinox.array.ExponentPath
    monkeypatch.setattr(hdl.equinox.array, "ExponentPath",
                        lambda cfg: real(cfg, depth=cfg.n - 1))
    failed = _run(tb_options)
    assert {"jit_reload_back_to_back", "random_gemms"} <= set(failed), failed


def test_normalizer_truncating(tb_options, monkeypatch):
    real = hdl.equinox.array.normalizer_config
    monkeypatch.setattr(hdl.equinox.array, "normalizer_config",
                        lambda m, A: dataclasses.replace(real(m, A), mode="rtz"))
    failed = _run(tb_options)
    assert {"tv9_tv10_normalizer", "random_gemms"} <= set(failed), failed

"""Register stages of the bit-parallel bf16 baseline PE and tile (``pipeline``).

``pipeline`` changes only when a group reaches the accumulators, never what they hold: the
configurations accept 0..3 and refuse anything else naming the field and the range; the cycle
models (``bf16_pe_cycles``, ``bf16_tile_cycles``, ``bf16_tile_busy``) are the single-cycle
models delayed by ``pipeline`` cycles, with idle cycles anywhere; each depth's Verilog holds
the registers of the cut points ``CUTS`` names.  Mutation checks: the PE or the tile built with
one stage more or fewer than the testbench expects fails it, and so do a PE whose ``valid`` and
``clear`` skip the last stage, a tile whose ``error`` skips its stages, a tile whose ``busy``
ignores the groups in flight and a tile whose PEs have one stage more than its side-band.
"""

import dataclasses
import re

import numpy as np
import pytest
from amaranth.back import verilog

import hdl.baseline.bf16_pe
import hdl.baseline.bf16_tile
from golden.baseline import (BF16_PE_MAX_PIPELINE, Acc, BaselineConfig, BaselineTileConfig,
                             baseline_group, bf16_pe_cycles, bf16_tile_busy, bf16_tile_cycles,
                             bf16_tile_run)
from golden.fpraker.pe import random_operands
from hdl.baseline import BF16PE, Bf16Tile
from hdl.baseline.bf16_pe import CUTS
from mutantutil import built_with, run_failed


# --------------------------------------------------------------------------------------------
# configurations


def test_the_tile_passes_its_depth_and_contexts_to_every_pe():
    cfg = BaselineTileConfig(rows=2, cols=2, pipeline=2)
    assert cfg.pe == BaselineConfig(pipeline=2)
    assert BaselineTileConfig(pipeline=1, contexts=4).pe == BaselineConfig(pipeline=1, contexts=4)
    assert [f.name for f in dataclasses.fields(BaselineTileConfig)][-2:] == ["pipeline",
                                                                              "contexts"]


# --------------------------------------------------------------------------------------------
# the PE's cycle model


def _pe_groups(cfg, n, seed):
    gen = np.random.default_rng(seed)
    A, B = random_operands(gen, n, cfg.lanes, "mix")
    return [(A[k].tolist(), B[k].tolist(), k % 5 == 0) for k in range(n)]


def _pe_run(cfg, groups, acc=Acc.ZERO):
    out = []
    for a, b, clear in groups:
        acc, _ = baseline_group(Acc.ZERO if clear else acc, a, b, cfg)
        out.append(acc)
    return out


@pytest.mark.parametrize("depth", range(BF16_PE_MAX_PIPELINE + 1))
def test_bf16_pe_cycles_is_the_group_model_delayed(depth):
    cfg = BaselineConfig(lanes=3, int_bits=4, pipeline=depth)
    groups = _pe_groups(cfg, 40, depth)
    want = _pe_run(cfg, groups)
    # back to back: group k shows after edge k + depth
    got = bf16_pe_cycles(cfg, groups + [None] * depth)
    assert len(got) == len(groups) + depth
    for t, acc in enumerate(got):
        assert acc == (want[t - depth] if t >= depth else Acc.ZERO), t
    # with idle cycles: the accumulator changes exactly `depth` cycles after a group
    gen = np.random.default_rng(10 + depth)
    cycles, when = [], []
    for g in groups:
        cycles += [None] * int(gen.integers(0, 3))
        when.append(len(cycles))
        cycles.append(g)
    got = bf16_pe_cycles(cfg, cycles + [None] * depth)
    for k, t in enumerate(when):
        assert got[t + depth] == want[k]
        if k and t + depth >= 1:
            assert got[t + depth - 1] == want[k - 1]


def test_bf16_pe_cycles_starts_from_a_given_accumulator():
    cfg = BaselineConfig(lanes=2, pipeline=1)
    start = Acc(False, 0, 2, 600)
    got = bf16_pe_cycles(cfg, [([0x3F80, 0], [0x4000, 0], False), None], start)
    assert got[0] == start
    assert got[1] == baseline_group(start, [0x3F80, 0], [0x4000, 0], cfg)[0]
    with pytest.raises(ValueError, match="sig"):
        bf16_pe_cycles(cfg, [None], Acc(False, 0, 0, 3))


def test_bf16_pe_cycles_rejects_an_exponent_255_operand():
    cfg = BaselineConfig(lanes=2, pipeline=2)
    with pytest.raises(ValueError, match="exponent field 255"):
        bf16_pe_cycles(cfg, [([0x7F80], [0x3F80], True), None, None])


# --------------------------------------------------------------------------------------------
# the tile's cycle model


def _tile_groups(cfg, n, seed):
    gen = np.random.default_rng(seed)
    A, _ = random_operands(gen, cfg.cols, n * cfg.lanes, "mix")
    _, B = random_operands(gen, cfg.rows, n * cfg.lanes, "mix")
    return A.reshape(cfg.cols, n, cfg.lanes), B.reshape(cfg.rows, n, cfg.lanes)


@pytest.mark.parametrize("depth", range(BF16_PE_MAX_PIPELINE + 1))
def test_bf16_tile_run_counts_the_pipeline_cycles(depth):
    cfg = BaselineTileConfig(rows=2, cols=3, lanes=4, int_bits=4, pipeline=depth)
    A, B = _tile_groups(cfg, 6, depth)
    r = bf16_tile_run(A, B, cfg)
    assert (r.out == bf16_tile_run(A, B, dataclasses.replace(cfg, pipeline=0)).out).all()
    assert r.cycles == 6 + depth
    assert r.useful == 6 * 2 * 3 * 4 and r.lane_cycles == (6 + depth) * 2 * 3 * 4
    assert r.stalls == ({"pipeline": depth * 2 * 3 * 4} if depth else {})
    assert r.useful + sum(r.stalls.values()) == r.lane_cycles
    assert (r.group_cycles == 1).all()


@pytest.mark.parametrize("depth", range(BF16_PE_MAX_PIPELINE + 1))
def test_bf16_tile_cycles_is_the_tile_run_delayed(depth):
    cfg = BaselineTileConfig(rows=2, cols=3, lanes=4, int_bits=4, pipeline=depth)
    G = 9
    A, B = _tile_groups(cfg, G, 20 + depth)
    gen = np.random.default_rng(depth)
    # clear on group 0 of every column and on a later group of column 1
    clear = np.zeros((cfg.cols, G), dtype=bool)
    clear[:, 0] = clear[1, 4] = True
    items, when = [], []
    for g in range(G):
        items += [None] * int(gen.integers(0, 3))
        when.append(len(items))
        items.append((A[:, g], B[:, g], clear[:, g]))
    items += [None] * depth
    got = bf16_tile_cycles(cfg, items)
    assert len(got) == len(items)
    for t, c in enumerate(got):
        assert c.out.shape == (cfg.rows, cfg.cols) and c.out.dtype == np.uint16
        done = [k for k, w in enumerate(when) if w + depth <= t]
        if not done:
            assert (c.out == 0).all(), t
            continue
        g = done[-1] + 1
        want = bf16_tile_run(A[:, :g], B[:, :g], cfg).out
        if g > 4:
            want[:, 1] = bf16_tile_run(A[:, 4:g], B[:, 4:g], cfg).out[:, 1]
        assert (c.out == want).all(), (t, c.out, want)
    assert [c.busy for c in got] == bf16_tile_busy(cfg, when, len(items))


def test_bf16_tile_busy_covers_the_groups_in_flight():
    cfg = BaselineTileConfig(rows=1, cols=1, lanes=2, pipeline=2)
    assert bf16_tile_busy(cfg, [0, 1, 5], 9) == [True, True, True, True, False, True, True,
                                                 True, False]
    assert bf16_tile_busy(dataclasses.replace(cfg, pipeline=0), [0, 1, 5], 7) == \
        [True, True, False, False, False, True, False]
    assert bf16_tile_busy(cfg, [], 3) == [False] * 3


def test_bf16_tile_cycles_rejects_bad_groups():
    cfg = BaselineTileConfig(rows=2, cols=2, lanes=2, pipeline=1)
    ok = np.full((2, 2), 0x3F80)
    with pytest.raises(ValueError, match="exponent field 255"):
        bf16_tile_cycles(cfg, [(np.full((2, 2), 0x7F80), ok, [True, True]), None])
    with pytest.raises(ValueError, match="shape"):
        bf16_tile_cycles(cfg, [(np.full((3, 2), 0x3F80), ok, [True, True]), None])


# --------------------------------------------------------------------------------------------
# the cut points in the Verilog


#: a register of each cut point, as the generated Verilog names it
CUT_REGISTERS = {"product": "product_prod0_d1", "exponent": "exponent_Ep_d1",
                 "align": "align_term0_d1"}


@pytest.mark.parametrize("depth", range(BF16_PE_MAX_PIPELINE + 1))
def test_each_depth_has_the_registers_of_its_cuts(depth):
    assert sorted(CUTS) == list(range(BF16_PE_MAX_PIPELINE + 1))
    assert len(CUTS[depth]) == depth
    text = verilog.convert(BF16PE(BaselineConfig(lanes=2, pipeline=depth)), name="pe",
                           emit_src=False)
    for cut, reg in CUT_REGISTERS.items():
        assert (reg in text) == (cut in CUTS[depth]), (depth, cut)
    # the group's valid travels through every stage
    assert set(re.findall(r"\b(product|exponent|align)_valid_d1\b", text)) == set(CUTS[depth])


# --------------------------------------------------------------------------------------------
# mutation checks: a wrong latency fails the testbenches


@pytest.mark.parametrize("cfg, built", [
    (BaselineConfig(lanes=2, pipeline=1), 0),
    (BaselineConfig(lanes=2, pipeline=1), 2),
    (BaselineConfig(lanes=2, frac_bits=16, pipeline=3), 2),
], ids=["1-built-0", "1-built-2", "3-built-2"])
def test_pe_with_a_wrong_latency(cfg, built, tb_options):
    failed = run_failed("baseline.bf16_pe", cfg, built_with(BF16PE, pipeline=built), tb_options)
    assert {"directed_vectors", "random_regression"} <= set(failed), failed


def test_pe_whose_valid_and_clear_skip_the_last_stage(tb_options, monkeypatch):
    real = hdl.baseline.bf16_pe.stage

    def stage(m, values, enable=True, **kw):
        if kw.get("name") == "align" and "valid" in values:
            # register the datapath only; valid and clear reach the accumulator a cycle early
            kept = {k: v for k, v in values.items() if k not in ("valid", "clear")}
            return {**values, **real(m, kept, enable, **kw)}
        return real(m, values, enable, **kw)

    monkeypatch.setattr(hdl.baseline.bf16_pe, "stage", stage)
    failed = run_failed("baseline.bf16_pe", BaselineConfig(lanes=2, pipeline=2), None, tb_options)
    assert {"directed_vectors", "random_regression"} <= set(failed), failed


#: a small tile (its testbench runs fast); the cases set its depth
TILE = BaselineTileConfig(rows=1, cols=2, lanes=2)


@pytest.mark.parametrize("depth, built", [(1, 0), (2, 3)], ids=["1-built-0", "2-built-3"])
def test_tile_with_a_wrong_latency(depth, built, tb_options):
    cfg = dataclasses.replace(TILE, pipeline=depth)
    failed = run_failed("baseline.bf16_tile", cfg, built_with(Bf16Tile, pipeline=built),
                        tb_options)
    assert {"directed_reductions", "random_reductions", "pipeline_timing"} <= set(failed), failed


def test_tile_whose_pes_are_a_stage_behind_its_busy(tb_options, monkeypatch):
    """The PEs have one stage more than the tile's ``busy`` and ``error`` side-band.  The tile
    driver reads the results one clock edge after it saw ``busy`` low, so only the cycle by
    cycle check sees them arrive late."""
    real = hdl.baseline.bf16_tile.BF16PE
    monkeypatch.setattr(hdl.baseline.bf16_tile, "BF16PE",
                        lambda cfg: real(dataclasses.replace(cfg, pipeline=cfg.pipeline + 1)))
    failed = run_failed("baseline.bf16_tile", dataclasses.replace(TILE, pipeline=1), None,
                        tb_options)
    assert "pipeline_timing" in failed, failed


def _tile_with_delay(monkeypatch, tb_options, pipeline, broken):
    """The tile's testbench failures with the tile's side-band delay lines replaced by
    ``broken(real_delay, m, value, depth, **kw)``."""
    real = hdl.baseline.bf16_tile.delay
    monkeypatch.setattr(hdl.baseline.bf16_tile, "delay",
                        lambda m, value, depth, **kw: broken(real, m, value, depth, **kw))
    return run_failed("baseline.bf16_tile", dataclasses.replace(TILE, pipeline=pipeline), None,
                      tb_options)


def test_tile_whose_error_skips_the_stages(tb_options, monkeypatch):
    def broken(real, m, value, depth, **kw):
        return value if kw.get("name") == "error" else real(m, value, depth, **kw)

    failed = _tile_with_delay(monkeypatch, tb_options, 2, broken)
    assert "pipeline_timing" in failed, failed


def test_tile_whose_busy_ignores_the_groups_in_flight(tb_options, monkeypatch):
    def broken(real, m, value, depth, **kw):
        if kw.get("name", "").startswith("flight"):
            real(m, value, depth, **kw)
            return value & 0
        return real(m, value, depth, **kw)

    failed = _tile_with_delay(monkeypatch, tb_options, 1, broken)
    assert {"directed_reductions", "random_reductions", "pipeline_timing"} <= set(failed), failed

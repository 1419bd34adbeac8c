# amaranth: UnusedElaboratable=no
"""Register stages of the FP → BFP block converters (``fast.converter``, ``equinox.quantizer``):
the ``pipeline`` field, the units' ``CUTS`` tables over the cut points of
:class:`hdl.common.bfp.BFPPipeline`, the cycle models
(:class:`golden.fast.converter.ConverterSim`, :class:`golden.equinox.QuantizerSim`) and the
mutation checks of the testbenches.

The cycle models are checked against their contract: blocks leave in order, each exactly once,
``latency`` cycles after they were taken when nothing stalls, and back-pressure holds the whole
pipeline; a bad block's ``error`` comes ``pipeline + 1`` advances after its acceptance.  Each
mutant is the unit built one stage off, or with one side-band (``valid``, ``error``) skipping
a stage, or with stages that do not stall: the testbench, which checks every cycle against the
cycle model, must fail.
"""

import dataclasses

import numpy as np
import pytest
from amaranth.back import verilog

import hdl.common.bfp
from golden.equinox import (QUANTIZER_MAX_PIPELINE, QUANTIZER_STAGES, QuantizerConfig,
                            QuantizerSim, quantize_cycles)
from golden.fast.converter import (CONVERTER_MAX_PIPELINE, CONVERTER_STAGES, ConverterConfig,
                                   ConverterSim, convert_cycles)
from hdl.common.bfp import CUT_POINTS
from hdl.equinox import Quantizer
from hdl.equinox.quantizer import CUTS as QUANTIZER_CUTS
from hdl.fast import Converter
from hdl.fast.converter import CUTS as CONVERTER_CUTS
from mutantutil import built_with, run_failed

#: per unit: configuration class, cycle model and its list form, depth-0 stages, maximum
UNITS = {
    "fast.converter": (ConverterConfig, ConverterSim, convert_cycles, CONVERTER_STAGES,
                       CONVERTER_MAX_PIPELINE),
    "equinox.quantizer": (QuantizerConfig, QuantizerSim, quantize_cycles, QUANTIZER_STAGES,
                          QUANTIZER_MAX_PIPELINE),
}
#: every depth either unit accepts
DEPTHS = range(max(CONVERTER_MAX_PIPELINE, QUANTIZER_MAX_PIPELINE) + 1)

#: an FP32 +Inf bit pattern (both units' bad value in FP32)
INF = 0x7F800000


def _block(cfg, bad: bool = False) -> list:
    """One input block of FP32 bit patterns (1.0), with an Inf in its last lane when ``bad``."""
    lanes = cfg.group if hasattr(cfg, "group") else cfg.w
    return [0x3F800000] * (lanes - 1) + [INF if bad else 0x3F800000]


# --------------------------------------------------------------------------------------------
# configuration and cut points


@pytest.mark.parametrize("unit", UNITS)
def test_latency_is_the_stages_plus_pipeline(unit):
    cls, _, _, stages, top = UNITS[unit]
    assert [cls(pipeline=d).latency for d in range(top + 1)] == list(range(stages,
                                                                          stages + top + 1))


@pytest.mark.parametrize("cuts, top", [(CONVERTER_CUTS, CONVERTER_MAX_PIPELINE),
                                       (QUANTIZER_CUTS, QUANTIZER_MAX_PIPELINE)],
                         ids=["converter", "quantizer"])
def test_cuts_cover_every_depth_one_stage_each(cuts, top):
    """Depth ``d`` takes ``d`` distinct cut points, those of depth ``d - 1`` and one more."""
    assert sorted(cuts) == list(range(top + 1))
    for depth, names in cuts.items():
        assert len(set(names)) == len(names) == depth, names
        assert set(names) <= set(CUT_POINTS)
        assert "increment" not in names or "normalize" in names, names
        if depth:
            assert set(cuts[depth - 1]) <= set(names), (depth, names)


@pytest.mark.parametrize("cuts", [("shift",), ("difference", "difference"), ("increment",)])
def test_bfp_pipeline_refuses_other_cuts(cuts):
    from golden.equinox.hbfp import quant_config

    with pytest.raises(ValueError, match="cut"):
        hdl.common.bfp.BFPPipeline(2, "fp32", quant_config(8, "floor", 0), cuts=cuts)


#: registers each cut point adds, by a name every one of its registers carries
CUT_REGISTERS = {"tree": "tree_es_", "difference": "difference_valid_d1",
                 "normalize": "normalize_", "increment": "increment_"}


@pytest.mark.parametrize("component, cfg, table", [
    (Converter, ConverterConfig(group=2), CONVERTER_CUTS),
    (Quantizer, QuantizerConfig(w=2, rounding="stoch", rbits=5), QUANTIZER_CUTS),
], ids=["converter", "quantizer"])
def test_stages_sit_at_their_cut_points(component, cfg, table):
    """Depth 0 has none of the stage registers; each depth has exactly those of its cuts, and
    ``pipeline`` error-flag registers."""
    assert set(CUT_REGISTERS) == set(CUT_POINTS)
    for depth, cuts in table.items():
        text = verilog.convert(component(dataclasses.replace(cfg, pipeline=depth)),
                               name="top", emit_src=False)
        for cut, reg in CUT_REGISTERS.items():
            assert (reg in text) == (cut in cuts), (depth, cut)
        assert [k for k in range(1, len(DEPTHS) + 1) if f"error_d{k} " in text] == \
            list(range(1, depth + 1)), depth


# --------------------------------------------------------------------------------------------
# the cycle models


def _random_cycles(cfg, gen, n: int, p_valid: float, p_ready: float, p_bad: float = 0.0):
    """``n`` cycles of ``(block or None, ready)``."""
    return [(_block(cfg, gen.random() < p_bad) if gen.random() < p_valid else None,
             bool(gen.random() < p_ready)) for _ in range(n)]


@pytest.mark.parametrize("unit", UNITS)
@pytest.mark.parametrize("depth", DEPTHS)
def test_back_to_back_blocks_leave_latency_cycles_later(unit, depth):
    cls, _, cycles_of, _, _ = UNITS[unit]
    cfg = cls(pipeline=depth)
    n = 12
    got = cycles_of(cfg, [(_block(cfg), True)] * n + [(None, True)] * (cfg.latency + 2))
    assert [c.taken for c in got] == list(range(n)) + [None] * (cfg.latency + 2)
    assert all(c.ready for c in got)
    assert [c.out for c in got] == [None] * cfg.latency + list(range(n)) + [None] * 2
    assert not any(c.error for c in got)


@pytest.mark.parametrize("unit", UNITS)
@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("p_valid, p_ready", [(0.7, 0.6), (1.0, 0.3), (0.4, 1.0)])
def test_stalls_hold_the_whole_pipeline(unit, depth, p_valid, p_ready):
    """Random valid and ready: ``i.ready = ~o.valid | o.ready``; every block leaves once, in
    order, after at least ``latency`` cycles; a shown block stays until it is read; and the
    blocks in flight keep their distance (the pipeline advances as a whole)."""
    cls, sim_cls, _, _, _ = UNITS[unit]
    cfg = cls(pipeline=depth)
    gen = np.random.default_rng(depth)
    sim = sim_cls(cfg)
    taken, left = {}, []
    shown = None
    for t, (block, ready) in enumerate(_random_cycles(cfg, gen, 600, p_valid, p_ready)):
        c = sim.step(block, ready)
        assert c.ready == (c.out is None or ready)
        assert shown is None or c.out == shown, "a shown block left without being read"
        if c.taken is not None:
            assert block is not None and c.taken == len(taken)
            taken[c.taken] = t
        if c.out is not None and ready:
            assert c.out == len(left) and t - taken[c.out] >= cfg.latency
            left.append(c.out)
        shown = c.out if c.out is not None and not ready else None
        inflight = [r[0] for r in sim.line if r is not None]
        assert inflight == sorted(inflight, reverse=True)
    assert len(left) > 50


@pytest.mark.parametrize("unit", UNITS)
@pytest.mark.parametrize("depth", DEPTHS)
def test_outputs_do_not_depend_on_the_depth_when_nothing_stalls(unit, depth):
    """With the consumer always ready, depth ``d`` is depth 0 delayed by ``d`` cycles."""
    cls, _, cycles_of, _, _ = UNITS[unit]
    gen = np.random.default_rng(7)
    base = cls()
    cyc = _random_cycles(base, gen, 200, 0.6, 1.0)
    cyc += [(None, True)] * depth
    ref = cycles_of(base, cyc)
    got = cycles_of(cls(pipeline=depth), cyc)
    assert [c.out for c in got[depth:]] == [c.out for c in ref[:len(ref) - depth]]
    assert [c.taken for c in got] == [c.taken for c in ref]


@pytest.mark.parametrize("unit", UNITS)
@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("p_ready", [1.0, 0.4])
def test_error_comes_pipeline_plus_one_advances_after_the_bad_block(unit, depth, p_ready):
    cls, sim_cls, _, _, _ = UNITS[unit]
    cfg = cls(pipeline=depth)
    gen = np.random.default_rng(depth + 10)
    for trial in range(20):
        sim = sim_cls(cfg)
        cycles = _random_cycles(cfg, gen, 40, 0.7, p_ready)
        k = int(gen.integers(0, 20))
        cycles[k] = (_block(cfg, True), cycles[k][1])
        advances, raised = None, None
        for t, (block, ready) in enumerate(cycles):
            c = sim.step(block, ready)
            if raised is None and c.error:
                raised = advances
            if advances is not None and c.ready:
                advances += 1
            if c.taken is not None and block[-1] == INF:
                advances = 1
        if raised is not None:
            assert raised == depth + 1, (trial, raised)
        else:
            assert advances is None or advances <= depth + 1, (trial, advances)


@pytest.mark.parametrize("unit", UNITS)
def test_cycle_model_keeps_a_raised_error(unit):
    cls, sim_cls, cycles_of, _, _ = UNITS[unit]
    cfg = cls(pipeline=2)
    got = cycles_of(cfg, [(None, True)] * 3, error=True)
    assert all(c.error for c in got)
    sim = sim_cls(cfg)
    assert sim.idle and not sim.step(None, True).error


# --------------------------------------------------------------------------------------------
# mutation checks: the testbenches catch a wrong latency and a side-band off its block

#: cocotb tests that stream blocks back to back (every cycle checked against the cycle model)
CONVERTER_TESTS = ("spec_vectors", "one_group_per_cycle")
QUANTIZER_TESTS = ("spec_vectors", "one_block_per_cycle")


def _failed(unit, cfg, factory, tb_options, tests) -> set:
    """The tests of ``tests`` that fail (only those run) against ``factory(cfg)``."""
    return set(run_failed(unit, cfg, factory, {**tb_options, "testcase": list(tests)}))


@pytest.mark.parametrize("cfg, built", [
    (ConverterConfig(group=5, m=6, pipeline=1), 0),
    (ConverterConfig(group=5, m=6, pipeline=3), 4),
], ids=["1-built-0", "3-built-4"])
def test_converter_with_a_wrong_latency(cfg, built, tb_options):
    failed = _failed("fast.converter", cfg, built_with(Converter, pipeline=built), tb_options,
                     CONVERTER_TESTS)
    assert failed == set(CONVERTER_TESTS), failed


@pytest.mark.parametrize("cfg, built", [
    (QuantizerConfig(w=3, rounding="stoch", rbits=5, pipeline=2), 1),
    (QuantizerConfig(w=3, in_fmt="bf16", m=4, pipeline=0), 1),
], ids=["stoch-2-built-1", "bf16-0-built-1"])
def test_quantizer_with_a_wrong_latency(cfg, built, tb_options):
    failed = _failed("equinox.quantizer", cfg, built_with(Quantizer, pipeline=built),
                     tb_options, QUANTIZER_TESTS)
    assert failed == set(QUANTIZER_TESTS), failed


def test_quantizer_whose_valid_skips_the_difference_stage(tb_options, monkeypatch):
    real = hdl.common.bfp.stage

    def stage(m, values, enable=True, **kw):
        if kw.get("name") == "difference" and enable:
            # the block's fields are registered, its valid bit goes straight on
            regs = real(m, {k: v for k, v in values.items() if k != "valid"}, enable, **kw)
            return {"valid": values["valid"], **regs}
        return real(m, values, enable, **kw)

    monkeypatch.setattr(hdl.common.bfp, "stage", stage)
    failed = _failed("equinox.quantizer", QuantizerConfig(w=3, pipeline=1), None, tb_options,
                     QUANTIZER_TESTS)
    assert failed == set(QUANTIZER_TESTS), failed


def test_converter_whose_valid_skips_the_tree_stage(tb_options, monkeypatch):
    real = hdl.common.bfp.stage

    def stage(m, values, enable=True, **kw):
        if kw.get("name") == "tree" and set(values) == {"valid"}:
            return values
        return real(m, values, enable, **kw)

    monkeypatch.setattr(hdl.common.bfp, "stage", stage)
    failed = _failed("fast.converter", ConverterConfig(group=5, m=6, pipeline=2), None,
                     tb_options, CONVERTER_TESTS)
    assert failed == set(CONVERTER_TESTS), failed


def test_converter_whose_error_flag_skips_a_stage(tb_options, monkeypatch):
    real = hdl.common.bfp.delay

    def delay(m, value, depth, **kw):
        if kw.get("name") == "error":
            depth -= 1
        return real(m, value, depth, **kw)

    monkeypatch.setattr(hdl.common.bfp, "delay", delay)
    tests = ("sticky_error_on_inf_and_nan", "one_group_per_cycle")
    failed = _failed("fast.converter", ConverterConfig(group=5, m=6, pipeline=3), None,
                     tb_options, tests)
    assert failed == {"sticky_error_on_inf_and_nan"}, failed


def test_quantizer_whose_rounding_stages_do_not_stall(tb_options, monkeypatch):
    """The rounding block's own registers loading every cycle: back-pressure loses blocks."""
    monkeypatch.setattr(hdl.common.bfp, "EnableInserter", lambda domains: lambda block: block)
    tests = ("random_blocks_under_backpressure", "one_block_per_cycle")
    failed = _failed("equinox.quantizer",
                     QuantizerConfig(w=3, rounding="stoch", rbits=5, pipeline=2), None,
                     tb_options, tests)
    assert failed == {"random_blocks_under_backpressure"}, failed

"""Register stages (``pipeline``) of FAST's fMAC and fMAC array.

Golden side: the configurations accept 0 up to each unit's maximum depth and refuse anything
else naming the field and the range; the cycle models (``FMACSim``, ``ArraySim``) at depth ``D``
are the depth-0 models with the accumulator (the fMAC) or the outputs (the array) exactly ``D``
cycles later, the same inputs taken in the same cycles, the same results.  RTL side: each depth
places its registers at the cut points its ``CUTS`` names.  Mutation checks: the testbenches
fail a unit built with one stage more or fewer than they expect, and one whose side-band
(the round's enable or ``clear``, a cell's partial-sum controls, the array's output valid line)
skips a stage.

The array's interleaved GEMMs (``contexts``): ``ArraySlots`` is one-context arrays in rotation
with the outputs ``pipeline + contexts - 1`` cycles later; the RTL holds every state register
in rings; the testbench fails an array whose ``acc_slot``, drain output or operand rings are
off by a context.
"""

import numpy as np
import pytest
from amaranth.back import verilog

import hdl.fast.array
import hdl.fast.fmac
from golden import ConfigError
from golden.fast.array import (
    FMAC_ARRAY_MAX_PIPELINE,
    ArrayIn,
    ArraySim,
    ArraySlots,
    FMACArrayConfig,
    array_gemm,
    array_sim,
    interleave,
)
from golden.fast.numerics import FMAC_WIDTHS, FastInputError, Quantized, gemm_quantized, rounds
from golden.fast.fmac import (FMAC_MAX_PIPELINE, FMACConfig, FMACSim, FMACSlots, fmac_cycles,
                              fmac_run, fmac_sim)
from hdl.fast import FMAC, FMACArray
from mutantutil import built_with, run_failed


# --------------------------------------------------------------------------------------------
# configurations


# --------------------------------------------------------------------------------------------
# the fMAC's cycle model


def _pairs(cfg, gen, n):
    widths = [m for m in FMAC_WIDTHS if m <= cfg.m_max]
    pairs = []
    for k in range(n):
        mx, my = (int(gen.choice(widths)) for _ in range(2))

        def operand(m):
            return (int(gen.integers(100, 150)), gen.integers(0, 2, cfg.group),
                    gen.integers(0, 1 << m, cfg.group))

        pairs.append((operand(mx), mx, operand(my), my, k % 4 == 0 or gen.random() < 0.2))
    return pairs


def _items(pairs, gen, gap):
    items = []
    for p in pairs:
        while gen.random() < gap:
            items.append(None)
        items.append(p)
    return items


@pytest.mark.parametrize("depth", range(FMAC_MAX_PIPELINE + 1))
@pytest.mark.parametrize("gap", [0.0, 0.3])
def test_fmac_cycles_is_the_one_cycle_fmac_with_a_later_accumulator(depth, gap):
    gen = np.random.default_rng(depth * 10 + int(gap * 10))
    base = FMACConfig(group=5, m_max=8)
    cfg = FMACConfig(group=5, m_max=8, pipeline=depth)
    pairs = _pairs(cfg, gen, 60)
    items = _items(pairs, gen, gap)
    ref, run = fmac_cycles(base, items), fmac_cycles(cfg, items)
    assert run.accepted == ref.accepted and run.inputs[:len(ref.inputs)] == ref.inputs
    assert len(run.outputs) == len(ref.outputs) + depth
    for t, o in enumerate(run.outputs):
        r = ref.outputs[min(t, len(ref.outputs) - 1)]
        assert (o.ready, o.busy, o.last, o.error) == (r.ready, r.busy, r.last, r.error), t
        assert o.acc == (ref.outputs[t - depth].acc if t >= depth else 0), t
    # a pair's result is in the accumulator from the cycle pipeline + 1 after its last round
    want = fmac_run(cfg, pairs)[0]
    for k, t in enumerate(run.accepted):
        done = t + rounds(pairs[k][1], pairs[k][3]) + depth + 1
        assert run.outputs[done].acc == int(np.float32(want[k]).view(np.uint32)), k
    if not gap:
        assert list(np.diff(run.accepted)) == [rounds(p[1], p[3]) for p in pairs[:-1]]


@pytest.mark.parametrize("contexts, depth", [(2, 0), (3, 2), (5, 1)])
def test_fmac_slots_are_one_cycle_fmacs_in_rotation(contexts, depth):
    """With ``contexts = C``, cycle ``t`` is context ``(slot + t) mod C``'s: its ready, busy
    and last are those of a one-cycle fMAC that sees only its own cycles' inputs; ``acc``
    shows context ``(slot + t - depth) mod C``, and each pair's result (the one-context
    fMAC's over its own context's pairs, from +0) from cycle ``t + C (rounds + 1) + depth``
    after the cycle ``t`` that takes it; ``error`` is the OR over the contexts."""
    gen = np.random.default_rng(contexts * 10 + depth)
    cfg = FMACConfig(group=4, m_max=6, pipeline=depth, contexts=contexts)
    one = FMACConfig(group=4, m_max=6)
    slot = int(gen.integers(0, contexts))
    pairs = _pairs(cfg, gen, 40)
    items = _items(pairs, gen, 0.3)
    run = fmac_cycles(cfg, items, FMACSlots(cfg, slot))
    refs = [FMACSim(one) for _ in range(contexts)]
    taken = {c: [] for c in range(contexts)}
    for t, (item, o) in enumerate(zip(run.inputs, run.outputs)):
        c = (slot + t) % contexts
        r = refs[c].outputs()
        assert (o.slot, o.acc_slot) == (c, (slot + t - depth) % contexts), t
        assert (o.ready, o.busy, o.last) == (r.ready, r.busy, r.last), t
        assert o.error == any(s.error for s in refs)
        if refs[c].step(item):
            taken[c].append((t, item))
    assert sum(len(v) for v in taken.values()) == len(pairs) == len(run.accepted)
    for c, mine in taken.items():
        want = fmac_run(one, [item for _, item in mine])[0] if mine else []
        for (t, item), acc in zip(mine, want):
            done = t + contexts * (rounds(item[1], item[3]) + 1) + depth
            assert run.outputs[done].acc_slot == c
            assert run.outputs[done].acc == int(np.float32(acc).view(np.uint32)), (c, t)


def test_fmac_contexts_range():
    for bad in (0, 7, True):
        with pytest.raises(ConfigError) as e:
            FMACConfig(contexts=bad)
        assert e.value.field == "contexts"
    with pytest.raises(FastInputError, match="FMACSlots"):
        FMACSim(FMACConfig(contexts=2))
    with pytest.raises(FastInputError, match="slot"):
        FMACSlots(FMACConfig(contexts=2), slot=2)
    assert isinstance(fmac_sim(FMACConfig(contexts=3)), FMACSlots)


def test_fmac_cycles_continues_a_model():
    """Two runs on one model equal one run of both; a model of another configuration is
    refused."""
    gen = np.random.default_rng(3)
    cfg = FMACConfig(group=4, m_max=4, pipeline=2)
    pairs = _pairs(cfg, gen, 20)
    whole = fmac_cycles(cfg, pairs)
    sim = FMACSim(cfg)
    first = fmac_cycles(cfg, pairs[:10], sim)
    second = fmac_cycles(cfg, pairs[10:], sim)
    assert first.outputs[-1].acc == int(np.float32(whole.accs[9]).view(np.uint32))
    assert second.outputs[-1].acc == whole.outputs[-1].acc
    with pytest.raises(FastInputError, match="sim"):
        fmac_cycles(FMACConfig(group=4, m_max=4), pairs, sim)


def test_fmac_width_above_m_max_sets_the_error_when_taken():
    cfg = FMACConfig(group=2, m_max=4, pipeline=3)
    ok = ((127, [0, 0], [1, 3]), 2, (127, [0, 1], [3, 3]), 2, True)
    wide = ((127, [0, 0], [15, 1]), 8, (127, [0, 0], [1, 1]), 2, True)
    run = fmac_cycles(cfg, [ok, wide])
    t = run.accepted[1]
    assert [o.error for o in run.outputs] == [False] * (t + 1) + [True] * (len(run.outputs) - t - 1)
    # processed at m_max: two chunks of X
    at_m_max = fmac_run(cfg, [((127, [0, 0], [15, 1]), 4, wide[2], 2, True)])[0][0]
    assert run.outputs[-1].acc == int(np.float32(at_m_max).view(np.uint32))


# --------------------------------------------------------------------------------------------
# the array's cycle model


def _quantized(gen, cfg, rows, nG, m):
    Es = gen.integers(110, 145, (rows, nG))
    q = gen.integers(0, 1 << m, (rows, nG, cfg.group))
    q[gen.random(q.shape) < 0.2] = 0
    return Quantized(Es, gen.integers(0, 2, q.shape), q, m)


@pytest.mark.parametrize("depth", range(1, FMAC_ARRAY_MAX_PIPELINE + 1))
@pytest.mark.parametrize("dataflow", ["fwd", "bwd_data", "wgrad"])
def test_array_outputs_are_the_one_cycle_array_delayed(depth, dataflow):
    """The inputs of a depth-0 GEMM (loads, vectors with bubbles, a WGRAD drain) followed by
    ``depth`` idle cycles: at depth ``D`` ``in_ready`` and ``error`` are the same in every
    cycle, ``out_valid``, ``right`` and ``top`` those of depth 0 ``D`` cycles earlier."""
    gen = np.random.default_rng(depth * 3 + len(dataflow))
    base = FMACArrayConfig(rows=2, cols=3, group=4, m_max=8)
    cfg = FMACArrayConfig(rows=2, cols=3, group=4, m_max=8, pipeline=depth)
    xq, yq = _quantized(gen, base, 5, 4, 4), _quantized(gen, base, 4, 4, 2)
    ref = array_gemm(base, xq, yq, dataflow, gaps=0.3, seed=depth)
    sim = ArraySim(cfg)
    inputs = ref.inputs + [ArrayIn(mx=4, my=2, dataflow=dataflow)] * depth
    outs = [sim.cycle(i) for i in inputs]
    zeros = (np.zeros(cfg.rows, np.uint32), np.zeros(cfg.cols, np.uint32))
    for t, o in enumerate(outs):
        if t < len(ref.outputs):
            assert (o.in_ready, o.error) == (ref.outputs[t].in_ready, ref.outputs[t].error), t
        late = ref.outputs[t - depth] if t >= depth else None
        assert o.out_valid == (late is not None and late.out_valid), t
        right, top = (late.right, late.top) if late is not None else zeros
        assert (o.right == right).all() and (o.top == top).all(), t
    # planned at depth D (each tile's loads wait for its last output): the same result
    run = array_gemm(cfg, xq, yq, dataflow, gaps=0.3, seed=depth)
    assert (run.out == ref.out).all()
    assert (run.out == gemm_quantized(xq, yq, dataflow, "paper", array=(2, 3))).all()


def test_array_gemms_back_to_back_at_every_depth():
    """GEMMs of every dataflow one after the other on one model (no reset): the same results
    at every depth."""
    results = {}
    for depth in range(FMAC_ARRAY_MAX_PIPELINE + 1):
        cfg = FMACArrayConfig(rows=3, cols=2, group=3, m_max=4, pipeline=depth)
        sim, g = ArraySim(cfg), np.random.default_rng(5)
        outs = []
        for df in ("fwd", "wgrad", "bwd_data", "wgrad"):
            xq, yq = _quantized(g, cfg, 4, 3, 4), _quantized(g, cfg, 3, 3, 4)
            outs.append(array_gemm(cfg, xq, yq, df, gaps=0.2, seed=depth, sim=sim).out)
        results[depth] = outs
    for depth in results:
        assert all((a == b).all() for a, b in zip(results[depth], results[0])), depth


def _plans(one, gen, contexts, dataflow):
    """One GEMM per context on its own one-context model (random shapes and bubbles), padded
    with idle cycles to one length: the plans and their results."""
    runs = []
    for k in range(contexts):
        m_, n_ = int(gen.integers(1, 5)), int(gen.integers(1, 5))
        nG = int(gen.integers(1, 5))
        xq, yq = _quantized(gen, one, m_, nG, 4), _quantized(gen, one, n_, nG, 2)
        sim = ArraySim(one)
        run = array_gemm(one, xq, yq, dataflow, gaps=0.3, seed=k, sim=sim)
        assert (run.out == gemm_quantized(xq, yq, dataflow, "paper",
                                          array=(one.rows, one.cols))).all()
        runs.append((run, sim))
    n = max(len(run.inputs) for run, _ in runs)
    for run, sim in runs:
        while len(run.inputs) < n:
            run.inputs.append(ArrayIn(mx=4, my=2, dataflow=dataflow))
            run.outputs.append(sim.cycle(run.inputs[-1]))
    return [run for run, _ in runs]


@pytest.mark.parametrize("contexts, depth", [(2, 0), (3, 2), (5, 1)])
@pytest.mark.parametrize("dataflow", ["fwd", "bwd_data", "wgrad"])
def test_array_slots_are_one_context_arrays_in_rotation(contexts, depth, dataflow):
    """With ``contexts = C``, cycle ``t`` serves context ``t mod C``: its ``in_ready`` is that
    of a one-context depth-0 array that sees only its own cycles' inputs, and ``out_valid``,
    ``right`` and ``top`` are context ``(t - L) mod C``'s from cycle ``t - L``, ``L =
    pipeline + C - 1``; every context's output vectors come out in its own order."""
    gen = np.random.default_rng(contexts * 10 + depth + len(dataflow))
    cfg = FMACArrayConfig(rows=2, cols=3, group=4, m_max=8, pipeline=depth, contexts=contexts)
    one = FMACArrayConfig(rows=2, cols=3, group=4, m_max=8)
    runs = _plans(one, gen, contexts, dataflow)
    inputs = interleave(cfg, [run.inputs for run in runs])
    L = depth + contexts - 1
    inputs += [ArrayIn(mx=4, my=2, dataflow=dataflow)] * L
    sim = ArraySlots(cfg)
    outs = [sim.cycle(i) for i in inputs]
    n = len(runs[0].inputs)
    shown = {k: [] for k in range(contexts)}
    for t, o in enumerate(outs):
        assert (o.slot, o.acc_slot) == (t % contexts, (t - L) % contexts), t
        if t < contexts * n:
            assert o.in_ready == runs[t % contexts].outputs[t // contexts].in_ready, t
        if t < L:
            assert not o.out_valid and not o.right.any() and not o.top.any(), t
            continue
        ref = runs[(t - L) % contexts].outputs[(t - L) // contexts]
        assert o.out_valid == ref.out_valid, t
        assert (o.right == ref.right).all() and (o.top == ref.top).all(), t
        if o.out_valid:
            shown[o.acc_slot].append(o.right if dataflow != "bwd_data" else o.top)
    for k, run in enumerate(runs):
        side = "top" if dataflow == "bwd_data" else "right"
        want = [getattr(r, side) for r in run.outputs if r.out_valid]
        assert len(shown[k]) == len(want) > 0
        assert all((a == b).all() for a, b in zip(shown[k], want)), k


def test_array_slots_error_is_one_sticky_flag():
    """An illegal input in any context's cycle sets ``error`` from the next cycle on."""
    cfg = FMACArrayConfig(rows=2, cols=2, group=2, m_max=4, contexts=3)
    sim = ArraySlots(cfg)
    ok, bad = ArrayIn(mx=2, my=2), ArrayIn(mx=2, my=2, dataflow=3)
    outs = [sim.cycle(i) for i in [ok, ok, ok, ok, bad, ok, ok, ok]]
    assert [o.error for o in outs] == [False] * 5 + [True] * 3


def test_array_contexts_range():
    for bad in (0, 7, True):
        with pytest.raises(ConfigError) as e:
            FMACArrayConfig(contexts=bad)
        assert e.value.field == "contexts"
    cfg = FMACArrayConfig(rows=2, cols=2, contexts=2)
    with pytest.raises(FastInputError, match="ArraySlots"):
        ArraySim(cfg)
    with pytest.raises(FastInputError, match="ArraySim"):
        ArraySlots(FMACArrayConfig())
    with pytest.raises(FastInputError, match="contexts"):
        array_gemm(cfg, *(_quantized(np.random.default_rng(0), cfg, 2, 1, 4),) * 2)
    with pytest.raises(FastInputError, match="one per context"):
        interleave(cfg, [[ArrayIn()]])
    with pytest.raises(FastInputError, match="one length"):
        interleave(cfg, [[ArrayIn()], [ArrayIn(), ArrayIn()]])
    assert isinstance(array_sim(cfg), ArraySlots) and isinstance(array_sim(cfg.one_context()),
                                                                 ArraySim)
    assert cfg.out_lag == 1 and FMACArrayConfig(pipeline=2, contexts=4).out_lag == 5


# --------------------------------------------------------------------------------------------
# RTL: the stage registers at their cut points


def _verilog(component) -> str:
    return verilog.convert(component, name="top", emit_src=False)


@pytest.mark.parametrize("depth", range(FMAC_MAX_PIPELINE + 1))
def test_fmac_stages_sit_at_the_named_cuts(depth):
    text = _verilog(FMAC(FMACConfig(group=2, m_max=2, pipeline=depth)))
    cuts = hdl.fast.fmac.CUTS[depth]
    assert len(cuts) == depth
    for name, reg in (("generator", "generator_bits_d1"), ("tree", "tree_p_d1"),
                      ("products", "products_prod_d1")):
        assert (reg in text) == (name in cuts), (depth, name)


@pytest.mark.parametrize("depth", range(FMAC_ARRAY_MAX_PIPELINE + 1))
def test_array_cell_stages_sit_at_the_named_cuts(depth):
    cfg = FMACArrayConfig(rows=1, cols=1, group=2, m_max=2, pipeline=depth)
    text = _verilog(hdl.fast.array.ArrayCell(cfg))
    cuts = hdl.fast.fmac.CUTS[depth]
    for name, reg in (("generator", "generator_bits_d1"), ("tree", "tree_p_d1"),
                      ("products", "products_prod_d1")):
        assert (reg in text) == (name in cuts), (depth, name)
    for ctl in ("first", "drain", "wgrad", "h_valid", "h_first"):
        assert (f"generator_{ctl}_d1" in text) == (depth > 0), (depth, ctl)


def test_array_output_side_runs_pipeline_cycles_late():
    """The deskew and the valid line run on the round side's controls delayed by
    ``pipeline`` registers (none at depth 0)."""
    for depth in (0, 2):
        cfg = FMACArrayConfig(rows=1, cols=1, group=1, m_max=2, pipeline=depth)
        text = _verilog(FMACArray(cfg))
        for ctl in ("boundary", "vin", "draining", "first"):
            assert (f"acc_{ctl}_d2" in text) == (depth == 2), (depth, ctl)
            assert f"acc_{ctl}_d3" not in text


def test_array_contexts_hold_every_state_register_in_rings():
    """With ``contexts = C``: each cell's ``S``, ``H``, ``V`` and the controller, skew, deskew
    and valid line are rings of ``C``; the FP32 adder has ``C - 1`` stages; one context
    generates no ring."""
    cfg = FMACArrayConfig(rows=2, cols=2, group=1, m_max=2, contexts=3)
    text = _verilog(FMACArray(cfg))
    for reg in ("S", "h", "v", "cx", "cy", "pend", "drain", "skew_l1_0", "skew_b1_0", "vline",
                "right0_0", "top1_0"):
        assert f"{reg}_ctx2" in text and f"{reg}_ctx3" not in text, reg
    assert "fp_add_live_d2" in text and "fp_add_live_d3" not in text
    assert "_ctx1" not in _verilog(FMACArray(cfg.one_context()))


# --------------------------------------------------------------------------------------------
# mutation checks: the testbenches catch a wrong latency and a side-band that skips a stage


@pytest.mark.parametrize("cfg, built", [
    (FMACConfig(m_max=4, pipeline=1), 0),
    (FMACConfig(m_max=4, pipeline=2), 3),
], ids=["1-built-0", "2-built-3"])
def test_fmac_with_a_wrong_latency(cfg, built, tb_options):
    failed = run_failed("fast.fmac", cfg, built_with(FMAC, pipeline=built), tb_options)
    assert {"spec_vectors", "random_dot_products"} <= set(failed), failed


def _skipping_stage(real, stage_name, keys):
    """``stage`` whose stage ``stage_name`` registers everything but ``keys``, which pass
    through a cycle early."""
    def stage(m, values, enable=True, **kw):
        if kw.get("name") == stage_name and isinstance(values, dict):
            kept = {k: v for k, v in values.items() if k not in keys}
            out = real(m, kept, enable, **kw)
            return {k: out[k] if k in out else values[k] for k in values}
        return real(m, values, enable, **kw)
    return stage


@pytest.mark.parametrize("key", ["en", "fresh"])
def test_fmac_whose_round_side_band_skips_a_stage(key, tb_options, monkeypatch):
    """The round's enable (``busy``) or its start-from-+0 flag reaches the accumulator one
    cycle ahead of the round's value."""
    monkeypatch.setattr(hdl.fast.fmac, "stage",
                        _skipping_stage(hdl.fast.fmac.stage, "generator", {key}))
    failed = run_failed("fast.fmac", FMACConfig(m_max=4, pipeline=1), None, tb_options)
    assert "random_dot_products" in failed, failed


@pytest.mark.parametrize("cfg, built", [
    (FMACArrayConfig(rows=2, cols=2, group=4, pipeline=1), 2),
    (FMACArrayConfig(rows=2, cols=2, group=4, pipeline=2), 1),
], ids=["1-built-2", "2-built-1"])
def test_array_with_a_wrong_latency(cfg, built, tb_options):
    failed = run_failed("fast.array", cfg, built_with(FMACArray, pipeline=built), tb_options)
    assert {"t20_every_dataflow_and_width", "steady_state_throughput",
            "random_gemms"} <= set(failed), failed


def test_array_whose_cell_controls_skip_a_stage(tb_options, monkeypatch):
    """The cells' partial-sum controls (first cycle of a beat, drain, ``H``'s tags) reach the
    partial-sum side one cycle ahead of the round's value."""
    monkeypatch.setattr(hdl.fast.array, "stage",
                        _skipping_stage(hdl.fast.array.stage, "generator",
                                        {"first", "drain", "h_valid", "h_first"}))
    failed = run_failed("fast.array", FMACArrayConfig(rows=2, cols=2, group=4, pipeline=1),
                        None, tb_options)
    assert {"t20_every_dataflow_and_width", "random_gemms"} <= set(failed), failed


def test_array_whose_valid_line_skips_a_stage(tb_options, monkeypatch):
    """The output valid line shifts on the round side's boundaries and vectors, one stage
    ahead of the partial sums it flags."""
    real = hdl.fast.array.delay

    def delay(m, value, depth, **kw):
        if kw.get("name") in ("acc_boundary", "acc_vin", "acc_first"):
            depth -= 1
        return real(m, value, depth, **kw)

    monkeypatch.setattr(hdl.fast.array, "delay", delay)
    failed = run_failed("fast.array", FMACArrayConfig(rows=2, cols=2, group=4, pipeline=2),
                        None, tb_options)
    assert {"t20_every_dataflow_and_width", "steady_state_throughput",
            "random_gemms"} <= set(failed), failed


# mutation checks of the interleaved array


def test_array_whose_acc_slot_ignores_the_adder_stages(tb_options, monkeypatch):
    """``acc_slot`` names the context the partial-sum side reads, not the one the adder's
    stages deliver."""
    real = hdl.fast.array.slots
    monkeypatch.setattr(hdl.fast.array, "slots",
                        lambda m, slot, shown, contexts, lag: real(m, slot, shown, contexts,
                                                                   lag - contexts + 1))
    failed = run_failed("fast.array", FMACArrayConfig(rows=2, cols=2, group=4, pipeline=1,
                                                      contexts=3), None, tb_options)
    assert {"t20_every_dataflow_and_width", "random_gemms",
            "illegal_inputs_set_error"} <= set(failed), failed


def test_array_whose_drain_shows_a_sum_from_the_wrong_cycle(tb_options, monkeypatch):
    """A WGRAD drain shows the last column's ``A`` without the adder's delay."""
    real = hdl.fast.array.delay

    def delay(m, value, depth, **kw):
        if kw.get("name", "").startswith("drain"):
            depth = 0
        return real(m, value, depth, **kw)

    monkeypatch.setattr(hdl.fast.array, "delay", delay)
    failed = run_failed("fast.array", FMACArrayConfig(rows=2, cols=2, group=4, pipeline=1,
                                                      contexts=3), None, tb_options)
    assert {"t20_every_dataflow_and_width", "random_gemms"} <= set(failed), failed


def test_array_whose_operand_ring_is_a_context_short(tb_options, monkeypatch):
    """Each cell's ``H`` ring holds one context fewer: the contexts' operands mix."""
    real = hdl.fast.array.hold

    def hold(m, reg, value, en, contexts, *, name):
        return real(m, reg, value, en, contexts - 1 if name == "h" else contexts, name=name)

    monkeypatch.setattr(hdl.fast.array, "hold", hold)
    failed = run_failed("fast.array", FMACArrayConfig(rows=2, cols=2, group=4, pipeline=1,
                                                      contexts=3), None, tb_options)
    assert {"t20_every_dataflow_and_width", "random_gemms"} <= set(failed), failed

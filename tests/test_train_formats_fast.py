"""The FAST training formats (``fast``, ``fast-low``, ``fast-high``): every GEMM equals the golden
``bfp_gemm`` with the widths Algorithm 1 chooses, the choices equal Eq. 1 and Eq. 2 computed
here from the golden functions, the fixed formats keep their widths, runs are deterministic."""

import copy
import math
from pathlib import Path

import numpy as np
import pytest

from flows.studies.train.formats.base import LayerInfo, RunInfo
from flows.studies.train.formats.fast import (
    ARRAY,
    FAST,
    FORMATS,
    FASTHigh,
    FASTLow,
    FASTLowG4,
    FastFormatError,
    MidBFP,
    MSFP12,
    lane_states_for,
    narrow,
    width_table,
)
from golden.fast.numerics import (
    LaneRNG,
    bfp_gemm,
    choose_m,
    epsilon,
    quantize_rows,
    rel_improvement,
    rounds,
)

# two layers with K not a multiple of 16 (the last group zero-padded)
LAYERS = (LayerInfo("l1", "linear", (37, 21)), LayerInfo("l2", "linear", (21, 10)))


def run_info(epochs=2, iterations=3, seed=5, layers=LAYERS):
    return RunInfo(layers=layers, epochs=epochs, iterations=iterations, seed=seed)


def data(rng, n=24, layers=LAYERS, scale=1.0):
    """Per layer: A (n, K), W (K, M), G (n, M), with magnitudes spread over decades so that
    2-bit groups lose a lot in some tensors and little in others."""
    out = {}
    for li in layers:
        K, M = li.weight_shape
        a = rng.standard_normal((n, K)) * np.exp2(rng.integers(-3, 4, size=(n, K)))
        out[li.name] = (np.maximum(a, 0).astype(np.float32),
                        (scale * rng.standard_normal((K, M))).astype(np.float32),
                        (1e-3 * rng.standard_normal((n, M))).astype(np.float32))
    return out


def bits(v):
    return np.asarray(v, dtype=np.float32).view(np.uint32)


def ref_width(fixed, r, l, i, L, I):
    if fixed is not None:
        return fixed
    return choose_m(r, epsilon(l, i, L, I, 0.6, 0.3))


def _fixed(fmt, tensor):
    """The fixed width of ``tensor`` in ``fmt`` (None: Algorithm 1 chooses)."""
    per = getattr(fmt, "fixed_by_tensor", None)
    return per[tensor] if per else fmt.fixed_m


def step_and_check(fmt, ref_rng, tensors, epoch, it, skip_bwd_data=()):
    """One training iteration through ``fmt``, every GEMM compared bit for bit with
    ``bfp_gemm`` at the widths computed here from the golden Eq. 1 / Eq. 2 functions.  Returns
    the widths ``{layer: (w, a, g)}`` computed here."""
    run = fmt.run
    L, I = len(run.layers), run.epochs * run.iterations
    i = (epoch - 1) * run.iterations + it + 1
    fmt.begin_step(epoch, it)
    chosen = {}
    for l, li in enumerate(run.layers, start=1):
        a, w, _ = tensors[li.name]
        xa = quantize_rows(a, 4, "trunc")
        xw = quantize_rows(np.ascontiguousarray(w.T), 4, "trunc")
        ma = ref_width(_fixed(fmt, "a"), rel_improvement(xa.Es, xa.q), l, i, L, I)
        mw = ref_width(_fixed(fmt, "w"), rel_improvement(xw.Es, xw.q), l, i, L, I)
        out = fmt.matmul(a, w, "fwd", li.name)
        ref = bfp_gemm(a, w, ma, mw, "fwd", "paper", ARRAY, rng=ref_rng)
        assert np.array_equal(bits(out), ref), (li.name, "fwd")
        chosen[li.name] = [mw, ma, None]
    for l, li in reversed(list(enumerate(run.layers, start=1))):
        a, w, g = tensors[li.name]
        mw, ma, _ = chosen[li.name]
        if li.name not in skip_bwd_data:
            probe = copy.deepcopy(ref_rng)   # the draws bwd_data's conversion of G will take
            gq = quantize_rows(g, 4, "sr", probe)
            mg = ref_width(_fixed(fmt, "g"), rel_improvement(gq.Es, gq.q), l, i, L, I)
            out = fmt.matmul(g, np.ascontiguousarray(w.T), "bwd_data", li.name)
            ref = bfp_gemm(g, w.T, mg, mw, "bwd_data", "paper", ARRAY, rng=ref_rng)
            assert np.array_equal(bits(out), ref), (li.name, "bwd_data")
        else:
            probe = copy.deepcopy(ref_rng)   # wgrad converts G's columns (groups along batch)
            gq = quantize_rows(np.ascontiguousarray(g.T), 4, "sr", probe)
            mg = ref_width(_fixed(fmt, "g"), rel_improvement(gq.Es, gq.q), l, i, L, I)
        out = fmt.matmul(np.ascontiguousarray(a.T), g, "wgrad", li.name)
        ref = bfp_gemm(a.T, g, ma, mg, "wgrad", "paper", ARRAY, rng=ref_rng)
        assert np.array_equal(bits(out), ref), (li.name, "wgrad")
        chosen[li.name][2] = mg
    fmt.end_step(1.0)
    return {k: tuple(v) for k, v in chosen.items()}


@pytest.mark.parametrize("cls", [FAST, FASTLow, FASTHigh, FASTLowG4])
def test_every_gemm_equals_bfp_gemm_with_the_chosen_widths(cls):
    """Two epochs of three iterations: each GEMM equals bfp_gemm with the widths computed here,
    and the summary's width map records exactly those widths."""
    run = run_info()
    fmt = cls(run)
    ref_rng = LaneRNG(lane_states_for(run.seed))
    rng = np.random.default_rng(11)
    expected = []
    for epoch in (1, 2):
        for it in range(run.iterations):
            expected.append(step_and_check(fmt, ref_rng, data(rng), epoch, it))
        rec = fmt.end_epoch(epoch)
        for li in LAYERS:
            ws = [e[li.name] for e in expected[-run.iterations:]]
            for k, t in enumerate("wag"):
                assert rec["mean_widths"][li.name][t] == pytest.approx(
                    sum(w[k] for w in ws) / len(ws))
    s = fmt.summary_record()
    assert s["iterations"] == len(expected) == 6
    for li in LAYERS:
        for k, t in enumerate("wag"):
            assert s["widths"][t][li.name] == "".join(str(e[li.name][k]) for e in expected)
    got = {c for t in "wag" for v in s["widths"][t].values() for c in v}
    if cls is FASTLowG4:   # the ablation: 4-bit gradients, 2-bit weights and activations
        assert {c for v in s["widths"]["g"].values() for c in v} == {"4"}
        assert {c for t in "wa" for v in s["widths"][t].values() for c in v} == {"2"}
        assert "W 2 bits, A 2 bits, G 4 bits" in width_table(s) and "fast-low-g4" not in FORMATS
    elif cls is FASTLow:
        assert got == {"2"}
    elif cls is FASTHigh:
        assert got == {"4"}
    else:
        # the scenario exercises both outcomes of Algorithm 1
        assert got == {"2", "4"}


def test_fmac_rounds_and_shapes_of_the_record():
    run = run_info(epochs=1, iterations=2)
    fmt = FAST(run)
    ref_rng = LaneRNG(lane_states_for(run.seed))
    rng = np.random.default_rng(3)
    widths = [step_and_check(fmt, ref_rng, data(rng, n=n), 1, it) for it, n in enumerate((24, 7))]
    s = fmt.summary_record()
    # the smaller second mini-batch starts a second shape table
    assert [t for _, t in s["shape_runs"]] == [0, 1] and s["shape_runs"][1][0] == 1
    exp = {"fwd": 0, "bwd_data": 0, "wgrad": 0}
    for it, n in enumerate((24, 7)):
        for li in LAYERS:
            K, M = li.weight_shape
            w, a, g = widths[it][li.name]
            table = s["gemm_shapes"][s["shape_runs"][it][1]][li.name]
            assert table == {"fwd": [n, K, M], "bwd_data": [n, M, K], "wgrad": [K, n, M]}
            exp["fwd"] += n * M * math.ceil(K / 16) * rounds(a, w)
            exp["bwd_data"] += n * K * math.ceil(M / 16) * rounds(g, w)
            exp["wgrad"] += K * M * math.ceil(n / 16) * rounds(a, g)
    assert s["fmac_rounds"] == exp


def test_g_width_from_wgrad_when_bwd_data_is_skipped():
    run = run_info(epochs=1, iterations=2)
    fmt = FAST(run)
    ref_rng = LaneRNG(lane_states_for(run.seed))
    rng = np.random.default_rng(8)
    for it in range(2):
        step_and_check(fmt, ref_rng, data(rng), 1, it, skip_bwd_data=("l1",))
    s = fmt.summary_record()
    assert s["g_source"] == {"l1": {"bwd_data": 0, "wgrad": 2}, "l2": {"bwd_data": 2, "wgrad": 0}}


def test_narrow_is_the_two_bit_conversion_under_sr():
    x = np.random.default_rng(2).standard_normal((9, 40)).astype(np.float32)
    q4 = quantize_rows(x, 4, "sr", LaneRNG(lane_states_for(7)))
    q2 = quantize_rows(x, 2, "sr", LaneRNG(lane_states_for(7)))
    n = narrow(q4, 2)
    assert n.m == 2
    for f in ("Es", "signs", "q"):
        assert np.array_equal(getattr(n, f), getattr(q2, f))
    assert narrow(q4, 4) is q4


def test_deterministic_for_a_seed_and_seed_dependent():
    tensors = data(np.random.default_rng(4))

    def go(seed):
        fmt = FAST(run_info(seed=seed))
        fmt.begin_step(1, 0)
        outs = [fmt.matmul(tensors["l1"][0], tensors["l1"][1], "fwd", "l1")]
        g, w = tensors["l1"][2], tensors["l1"][1]
        outs.append(fmt.matmul(g, np.ascontiguousarray(w.T), "bwd_data", "l1"))
        outs.append(fmt.matmul(np.ascontiguousarray(tensors["l1"][0].T), g, "wgrad", "l1"))
        fmt.end_step(0.0)
        return [bits(o) for o in outs], fmt.summary_record()

    a, sa = go(5)
    b, sb = go(5)
    c, _ = go(6)
    assert all(np.array_equal(x, y) for x, y in zip(a, b)) and sa == sb
    # truncation does not depend on the seed; stochastic rounding of G does
    assert np.array_equal(a[0], c[0])
    assert not np.array_equal(a[1], c[1])


def test_evaluation_uses_the_last_iterations_epsilon_and_is_not_recorded():
    run = run_info(epochs=1, iterations=2)
    fmt = FAST(run)
    ref_rng = LaneRNG(lane_states_for(run.seed))
    rng = np.random.default_rng(9)
    for it in range(2):
        step_and_check(fmt, ref_rng, data(rng), 1, it)
    fmt.end_epoch(1)
    before = fmt.summary_record()
    a, w, g = data(rng)["l2"]
    xa, xw = quantize_rows(a, 4, "trunc"), quantize_rows(np.ascontiguousarray(w.T), 4, "trunc")
    ma = choose_m(rel_improvement(xa.Es, xa.q), epsilon(2, 2, 2, 2))
    mw = choose_m(rel_improvement(xw.Es, xw.q), epsilon(2, 2, 2, 2))
    out = fmt.matmul(a, w, "fwd", "l2")
    assert np.array_equal(bits(out), bfp_gemm(a, w, ma, mw, "fwd", "paper", ARRAY))
    assert fmt.summary_record() == before
    with pytest.raises(FastFormatError, match="outside a training step"):
        fmt.matmul(g, np.ascontiguousarray(w.T), "bwd_data", "l2")


def test_contract_errors_and_non_finite_operands():
    fmt = FAST(run_info())
    tensors = data(np.random.default_rng(1))
    a, w, g = tensors["l1"]
    fmt.begin_step(1, 0)
    with pytest.raises(FastFormatError, match="before its 'fwd'") as e:
        fmt.matmul(g, np.ascontiguousarray(w.T), "bwd_data", "l1")
    assert isinstance(e.value, ValueError) and "\n" not in str(e.value)
    with pytest.raises(FastFormatError, match="unknown layer 'nope'"):
        fmt.matmul(a, w, "fwd", "nope")
    with pytest.raises(FastFormatError, match="unknown GEMM phase"):
        fmt.matmul(a, w, "sideways", "l1")
    bad = a.copy()
    bad[0, 0] = np.inf
    out = fmt.matmul(bad, w, "fwd", "l1")
    assert out.shape == (a.shape[0], w.shape[1]) and np.isnan(out).all()
    # the layer's backward GEMMs of a non-finite forward are NaN too, not an error
    assert np.isnan(fmt.matmul(g, np.ascontiguousarray(w.T), "bwd_data", "l1")).all()
    fmt.end_step(float("nan"))
    assert fmt.summary_record()["widths"]["w"]["l1"] == "-"


def test_formats_table_and_markdown():
    assert FORMATS == {"fast": FAST, "fast-low": FASTLow, "mid-bfp": MidBFP,
                       "fast-high": FASTHigh, "msfp12": MSFP12}
    assert (FASTLow.fixed_m, FASTHigh.fixed_m, FAST.fixed_m) == (2, 4, None)
    fmt = FAST(run_info(epochs=1, iterations=2))
    ref_rng = LaneRNG(lane_states_for(5))
    rng = np.random.default_rng(12)
    for it in range(2):
        step_and_check(fmt, ref_rng, data(rng), 1, it)
    s = fmt.summary_record()
    text = width_table(s)
    for li in LAYERS:
        shares = [s["widths"][t][li.name].count("4") / 2 for t in "wag"]
        row = next(line for line in text.splitlines() if line.startswith(f"| {li.name} |"))
        assert row.split("|")[2].strip().endswith(f"{100 * shares[0]:.0f} %")
    assert "Fixed 4-bit" in width_table(dict(s, algorithm=dict(s["algorithm"], adaptive=False,
                                                                  fixed_m=4)))


# ----------------------------------------------------------------------------------------------
# end to end, through the training engine

def test_end_to_end_cnn_two_epochs(tmp_path: Path):
    from flows.studies.train.data import load_dataset
    from flows.studies.train.loop import train

    d = load_dataset(None, 0, limit=200)
    res = train("cnn", FAST, d, 2, seed=0)
    assert res["diverged_at"] is None and len(res["epochs"]) == 2
    assert 0.0 <= res["final_test_accuracy"] <= 1.0
    s = res["format"]
    per = s["iterations_per_epoch"]
    assert s["iterations"] == 2 * per and s["layers"] == ["conv1", "conv2", "fc"]
    # the work the format counted, re-derived here from its shapes and widths
    exp = {"fwd": 0, "bwd_data": 0, "wgrad": 0}
    runs = s["shape_runs"] + [[s["iterations"], None]]
    for (start, t), (stop, _) in zip(runs, runs[1:]):
        for it in range(start, stop):
            for layer, phases in s["gemm_shapes"][t].items():
                w, a, g = (int(s["widths"][k][layer][it]) for k in "wag")
                for phase, (M, K, N) in phases.items():
                    mx, my = {"fwd": (a, w), "bwd_data": (g, w), "wgrad": (a, g)}[phase]
                    exp[phase] += M * N * math.ceil(K / 16) * rounds(mx, my)
    assert s["fmac_rounds"] == exp
    for rec in res["epochs"]:
        assert set(rec["format"]["mean_widths"]) == {"conv1", "conv2", "fc"}
    assert FAST.plot(res, tmp_path) == ["widths-fast.png"]
    assert (tmp_path / "widths-fast.png").stat().st_size > 0
    assert "| conv1 |" in FAST.markdown(res)

"""Schrödinger's FP training formats: QM+QE (``schrodinger``) and BitWave (``bitwave``).

The expected values are built from the golden transforms of :mod:`golden.gecko.schrodinger`
and :mod:`golden.gecko.codec` (or by hand from the Gecko field layout), never from the format's
own code path.
"""

import copy
import json
import math

import numpy as np
import pytest

from golden.common import float_to_fp32, fp32_to_float
from golden.gecko.codec import GeckoConfig, footprint
from golden.gecko.schrodinger import (
    GAMMA, BitWave, BitWaveConfig, bitwave_quantize, bwe_exp_bits, qe_chain, qe_clamp,
    qe_indicators, qm_delta, select_bits, truncate_mantissa,
)
from flows.studies.train.formats.base import LayerInfo, RunInfo
from flows.studies.train.formats.schrodinger import (
    BITWAVE_HISTORY, BITWAVE_THRESHOLD, FORMATS, BitWaveFormat, Schrodinger, StashFormatError,
    learning_epochs,
)

LAYERS = (LayerInfo("conv1", "conv", (9, 4)), LayerInfo("fc", "linear", (16, 3)))


def run_info(epochs=12, seed=3, layers=LAYERS, iterations=4):
    return RunInfo(layers=layers, epochs=epochs, iterations=iterations, seed=seed)


def rand(rng, shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def bits(x):
    return float_to_fp32(np.ascontiguousarray(x, dtype=np.float32)).reshape(-1)


def same_bits(a, b):
    return np.array_equal(np.asarray(a, np.float32).view(np.uint32),
                          np.asarray(b, np.float32).view(np.uint32))


# ------------------------------------------------------------------------------- registry


def test_formats_registry_and_defaults():
    assert FORMATS == {"schrodinger": Schrodinger, "bitwave": BitWaveFormat}
    f = Schrodinger(run_info())
    # the paper's reach per learning window (0.1 x 5 x 5005 steps) spread over this run's
    # learning steps (12 epochs of 4 iterations learn for 5 epochs), capped at 0.5 / gamma
    assert f.bit_lr == pytest.approx(min(0.1 * 5 * 5005 / (4 * 5), 0.5 / GAMMA))
    long = Schrodinger(run_info(epochs=10, iterations=100000))
    assert long.bit_lr == pytest.approx(0.1 * 5 * 5005 / (100000 * 5))
    assert f.gamma == GAMMA
    cfg = BitWaveFormat(run_info()).controller.cfg
    assert (cfg.history, cfg.threshold, cfg.fix_epoch) == (BITWAVE_HISTORY, BITWAVE_THRESHOLD, 5)


@pytest.mark.parametrize("epochs, learn", [(1, 1), (2, 1), (3, 1), (4, 2), (7, 3), (10, 5),
                                           (12, 5), (100, 5)])
def test_learning_epochs(epochs, learn):
    assert learning_epochs(epochs) == learn


@pytest.mark.parametrize("cls", [Schrodinger, BitWaveFormat])
def test_matmul_is_fp32(cls):
    f = cls(run_info())
    rng = np.random.default_rng(0)
    x, y = rand(rng, (7, 5)), rand(rng, (5, 6))
    for phase in ("fwd", "bwd_data", "wgrad"):
        assert same_bits(f.matmul(x, y, phase, "fc"), np.matmul(x, y, dtype=np.float32))


# ------------------------------------------------------------------------------- QM+QE stash


def test_stash_is_golden_composition_bit_exact():
    f = Schrodinger(run_info())
    rng = np.random.default_rng(1)
    f.n[("fc", "weight")] = [6.3, 3.7]
    f.n[("fc", "activation")] = [2.5, 2.5]
    pairs = {"weight": set(), "activation": set()}
    for it in range(40):
        f.begin_step(1, it)
        w = rand(rng, (16, 3), 4.0)
        a = np.maximum(rand(rng, (5, 16), 20.0), 0)
        for x, kind in ((w, "weight"), (a, "activation")):
            twin = copy.deepcopy(f.rng)
            u_m, u_e = twin.random(2)
            n_m, n_e = f.n[("fc", kind)]
            k_m, k_e = select_bits(n_m, u_m), select_bits(n_e, u_e)
            want = fp32_to_float(truncate_mantissa(qe_clamp(bits(x), k_e), k_m)).reshape(x.shape)
            got = f.stash(x, kind, "fc")
            assert got.dtype == np.float32 and got.shape == x.shape
            assert same_bits(got, want)
            pairs[kind].add((k_m, k_e))
    # both roundings of each bitlength occur, and mantissa and exponent draw independently
    assert {k for k, _ in pairs["weight"]} == {6, 7}
    assert {e for _, e in pairs["weight"]} == {3, 4}
    assert len(pairs["activation"]) == 4
    # the quantization is not the identity for these widths
    assert not same_bits(f.stash(w, "weight", "fc"), w)


def test_weight_and_activation_draw_separately():
    f = Schrodinger(run_info(layers=(LayerInfo("fc", "linear", (8, 8)),)))
    f.n[("fc", "weight")] = [4.5, 4.5]
    f.n[("fc", "activation")] = [4.5, 4.5]
    x = np.linspace(0.01, 3.0, 64, dtype=np.float32).reshape(8, 8) * np.float32(1.337)
    differ = 0
    for it in range(30):
        f.begin_step(1, it)
        qw = f.stash(x, "weight", "fc")
        qa = f.stash(x, "activation", "fc")
        differ += not same_bits(qw, qa)
    assert differ > 0


def test_evaluation_stash_uses_rounded_up_widths_without_draws_or_counting():
    f = Schrodinger(run_info())
    f.n[("fc", "activation")] = [5.2, 2.1]
    x = np.abs(rand(np.random.default_rng(2), (4, 16), 10.0))
    f.begin_step(1, 0)
    f.stash(x, "activation", "fc")
    f.end_step(1.0)
    counted = f.ledger.totals()["total"]["values"]
    f.end_epoch(1)                              # what follows is the test-set evaluation
    state = copy.deepcopy(f.rng.bit_generator.state)
    got = f.stash(x, "activation", "fc")
    want = fp32_to_float(truncate_mantissa(qe_clamp(bits(x), 3), 6)).reshape(x.shape)
    assert same_bits(got, want)
    assert f.rng.bit_generator.state == state
    assert f.ledger.totals()["total"]["values"] == counted == x.size


# ------------------------------------------------------------------------------- gradients


def _one_layer(**kw):
    return Schrodinger(run_info(layers=(LayerInfo("fc", "linear", (4, 3)),)), **kw)


def test_bitlength_gradients_match_golden_sums():
    lr = 0.01
    f = _one_layer(bit_lr=lr)
    n0 = {"weight": [5.6, 2.4], "activation": [3.3, 1.8]}
    for kind, n in n0.items():
        f.n[("fc", kind)] = list(n)
    rng = np.random.default_rng(5)
    # values beyond Vmax (about 8 at n_e = 2), inside, and under Vmin / 2
    w = np.array([[12.0, -0.3, 1.7], [-9.5, 0.02, -0.15], [3.1, -1.2, 0.6],
                  [0.7, -30.0, 2.2]], dtype=np.float32)
    a = np.array([[0.0, 0.4, 5.5, 40.0], [0.01, 1.9, 0.26, 7.7]], dtype=np.float32)
    f.begin_step(1, 0)
    draws = {}
    for x, kind in ((w, "weight"), (a, "activation")):
        twin = copy.deepcopy(f.rng)
        u = twin.random(2)
        draws[kind] = (select_bits(n0[kind][0], u[0]), select_bits(n0[kind][1], u[1]))
        f.stash(x, kind, "fc")
    lam = {"weight": 12 / 20, "activation": 8 / 20}
    grads = {"weight": rand(rng, w.shape), "activation": rand(rng, a.shape)}
    want_n = {}
    for x, kind in ((w, "weight"), (a, "activation")):
        g = grads[kind]
        k_m, k_e = draws[kind]
        v = bits(x)
        r = qe_clamp(v, k_e)
        g64 = g.reshape(-1).astype(np.float64)
        dn_m = GAMMA * lam[kind] + float(
            (g64 * qm_delta(r, math.floor(n0[kind][0]))).sum())
        d_v, d_vmax, d_vmin = qe_indicators(v, k_e)
        cmax, cmin = qe_chain(k_e)
        dn_e = (GAMMA * lam[kind] + float((g64 * d_vmax).sum()) * cmax
                + float((g64 * d_vmin).sum()) * cmin)
        out = f.stash_grad(g, kind, "fc")
        assert out.dtype == np.float32 and out.shape == g.shape
        assert same_bits(out, np.where(d_v.reshape(g.shape) == 1, g, np.float32(0) * g))
        want_n[kind] = (n0[kind][0] - lr * dn_m, n0[kind][1] - lr * dn_e)
    assert (qe_indicators(bits(w), draws["weight"][1])[0] == 0).any()  # the mask matters
    f.end_step(0.5)
    for kind, (m, e) in want_n.items():
        assert 0 < m < 23 and 0 < e < 8
        assert f.n[("fc", kind)] == [pytest.approx(m, rel=1e-12), pytest.approx(e, rel=1e-12)]


def test_regularizer_shrinks_bitlengths_when_task_gradient_is_zero():
    lr = 0.5
    f = _one_layer(bit_lr=lr)
    x = {"weight": np.ones((4, 3), np.float32), "activation": np.ones((6, 4), np.float32)}
    f.begin_step(1, 0)
    for kind in ("weight", "activation"):
        f.stash(x[kind], kind, "fc")
    for kind in ("weight", "activation"):
        f.stash_grad(np.zeros_like(x[kind]), kind, "fc")
    f.end_step(1.0)
    total = 12 + 24
    for kind, numel in (("weight", 12), ("activation", 24)):
        step = lr * GAMMA * numel / total
        assert f.n[("fc", kind)] == [pytest.approx(23 - step), pytest.approx(8 - step)]
    assert f.n[("fc", "activation")][0] < f.n[("fc", "weight")][0]


def test_bitlengths_clip_at_zero():
    f = _one_layer(bit_lr=1e3)
    x = np.ones((4, 3), np.float32)
    f.begin_step(1, 0)
    f.stash(x, "weight", "fc")
    f.stash_grad(np.zeros_like(x), "weight", "fc")
    f.end_step(1.0)
    assert f.n[("fc", "weight")] == [0.0, 0.0]
    f.begin_step(1, 1)
    q = f.stash(np.float32([[3.0, 0.75, 1.0]] * 4), "weight", "fc")
    # n_e = 0: 3.0 saturates to Vmax = (2 - 2^-23) * 2^0.5 and truncates to 2.0; 0.75 and 1.0 are
    # in range and keep only their leading one
    assert q[0].tolist() == [2.0, 0.5, 1.0]


def test_freezing_rounds_up_and_stops_learning():
    f = _one_layer(bit_lr=0.5)
    assert f.learn_epochs == 5
    f2 = Schrodinger(run_info(epochs=2, layers=(LayerInfo("fc", "linear", (4, 3)),)), bit_lr=0.5)
    assert f2.learn_epochs == 1
    f2.n[("fc", "weight")] = [7.2, 3.2]
    x = rand(np.random.default_rng(6), (4, 3), 3.0)
    f2.begin_step(1, 0)
    f2.stash(x, "weight", "fc")
    f2.stash_grad(np.zeros_like(x), "weight", "fc")
    f2.end_step(1.0)
    learned = list(f2.n[("fc", "weight")])
    assert learned[0] < 7.2 and learned[1] < 3.2
    rec = f2.end_epoch(1)
    assert rec["learning"] and rec["frozen"]
    assert rec["tensors"]["fc"]["weight"]["n_m"] == learned[0]
    assert f2.n[("fc", "weight")] == [8.0, 4.0] == [math.ceil(v) for v in learned]
    for it in range(3):
        f2.begin_step(2, it)
        state = copy.deepcopy(f2.rng.bit_generator.state)
        got = f2.stash(x, "weight", "fc")
        assert f2.rng.bit_generator.state == state
        assert same_bits(got, fp32_to_float(truncate_mantissa(qe_clamp(bits(x), 4), 8))
                         .reshape(x.shape))
        f2.stash_grad(rand(np.random.default_rng(it), x.shape), "weight", "fc")
        f2.end_step(1.0)
    assert f2.n[("fc", "weight")] == [8.0, 4.0]
    rec = f2.end_epoch(2)
    assert not rec["learning"] and rec["tensors"]["fc"]["weight"]["n_m_used"] == 8


# ------------------------------------------------------------------------------- footprints


W = np.array([[1.0, -2.0, 0.5, -0.25], [1.5, 3.0, -1.0, 0.75]], dtype=np.float32)
A = np.array([[0.0, 0.0, 1.0, 2.0, 0.0, 0.0, 1.0, 1.0]], dtype=np.float32)


def _gecko_hand(x, sign: int, man: int):
    """(lit, exact, stored) bits of one row of 8 values, from the Gecko field layout."""
    e = ((bits(x) >> 23) & 0xFF).astype(np.int64)
    mag = np.where(e == 0, 0, np.abs(e - 127))
    w = int(np.bitwise_or.reduce(mag)).bit_length()
    lit = 3 + 8 * w
    exact = 3 + 8 * (1 + w)
    words = -(-(sign + 1 + w + man) // 32)
    return lit, exact, 8 * 32 * words + 32


def test_footprint_totals_hand_checked():
    layers = (LayerInfo("fc", "linear", (4, 2)),)
    f = BitWaveFormat(run_info(layers=layers))
    f.controller.n_m = 4                       # every value above has at most 4 mantissa bits
    for it in range(2):
        f.begin_step(1, it)
        assert same_bits(f.stash(W, "weight", "fc"), W)
        assert same_bits(f.stash(A, "activation", "fc"), A)
        f.stash_grad(np.ones_like(W), "weight", "fc")
    t = f.ledger.totals()
    for kind, x, sign in (("weight", W, 1), ("activation", A, 0)):
        lit, exact, stored = _gecko_hand(x, sign, 4)
        fp = footprint(bits(x), GeckoConfig(man_width=4, sign_en=bool(sign)))
        assert (fp.exp_bits_lit, fp.exp_bits_exact, fp.total_bits) == (lit, exact, stored)
        b = t[kind]
        assert b["values"] == 16 and b["fp32_bits"] == 512
        assert b["sign_bits"] == 16 * sign
        assert b["mantissa_bits"] == 16 * 4
        assert b["exponent_bits"] == 16 * bwe_exp_bits(0) == 16 * 8
        assert b["gecko_exponent_bits"] == 2 * lit
        assert b["gecko_exponent_bits_exact"] == 2 * exact
        assert b["gecko_stored_bits"] == 2 * stored
        assert b["fp32_gecko_exponent_bits"] == 2 * lit
    # weights: MAG 0,1,1,2,0,1,0,1 -> w = 2; activations: MAG 0,0,0,1,0,0,0,0 -> w = 1
    assert t["weight"]["gecko_exponent_bits"] == 2 * 19
    assert t["activation"]["gecko_exponent_bits"] == 2 * 11
    s = f.summary_record()
    red = s["reductions"]
    assert red["BWM"]["total"] == pytest.approx(23 / 4)
    assert red["BWE"]["weight"] == pytest.approx(1.0)
    assert red["BWE+G"]["weight"] == pytest.approx(8 * 16 / (2 * 19))
    assert red["BWM+BWE"]["weight"] == pytest.approx(512 / (16 * (1 + 4 + 8)))
    assert red["BWM+BWE"]["activation"] == pytest.approx(512 / (16 * (4 + 8)))
    assert red["BWM+BWE+G"]["total"] == pytest.approx(1024 / (16 + 128 + 2 * (19 + 11)))
    assert s["reductions_exact"]["stored"]["weight"] == pytest.approx(512 / (2 * 288))
    assert s["gecko_exponent_ratio"]["activation"] == pytest.approx(2 * 11 / (8 * 16))
    assert s["paper"]["resnet18"]["BWM+BWE+G"] == 5.539


def test_qe_footprint_counts_sampled_exponent_bits():
    f = _one_layer()
    f.n[("fc", "weight")] = [3.0, 2.0]
    x = np.float32([[1.0, -0.5, 2.0], [0.25, -4.0, 1.5], [0.0, 3.0, -1.25], [6.0, 0.5, 1.0]])
    f.begin_step(1, 0)
    q = f.stash(x, "weight", "fc")
    b = f.ledger.totals()["weight"]
    fp = footprint(bits(q), GeckoConfig(man_width=3, sign_en=True))
    assert (b["values"], b["sign_bits"], b["mantissa_bits"], b["exponent_bits"]) == \
        (12, 12, 36, 24)
    assert b["gecko_exponent_bits"] == fp.exp_bits_lit
    assert b["fp32_gecko_exponent_bits"] == footprint(bits(x), GeckoConfig()).exp_bits_lit
    red = f.summary_record()["reductions"]
    assert red["QM"]["weight"] == pytest.approx(23 / 3)
    assert red["QE"]["weight"] == pytest.approx(4.0)
    assert red["QM+QE"]["weight"] == pytest.approx(32 / 6)
    assert red["QM+QE"]["activation"] is None          # no activation was stashed


# ------------------------------------------------------------------------------- BitWave


def test_bitwave_follows_golden_controller():
    f = BitWaveFormat(run_info(epochs=4))
    ref = BitWave(BitWaveConfig(history=BITWAVE_HISTORY, threshold=BITWAVE_THRESHOLD,
                                fix_epoch=2))
    rng = np.random.default_rng(7)
    x = rand(rng, (16, 3), 50.0)
    losses = iter(np.concatenate([np.linspace(2.5, 0.2, 30), 0.2 + np.linspace(0, 1, 12),
                                  np.full(20, 0.3)]))
    seen = set()
    for epoch in range(1, 5):
        for it in range(15):
            f.begin_step(epoch, it)
            got = f.stash(x, "weight", "fc")
            assert same_bits(got, fp32_to_float(bitwave_quantize(bits(x), ref.n_m, ref.k))
                             .reshape(x.shape))
            g = rand(rng, x.shape)
            assert f.stash_grad(g, "weight", "fc") is g
            loss = float(next(losses))
            f.end_step(loss)
            ref.step(loss)
            assert (f.controller.n_m, f.controller.k) == (ref.n_m, ref.k)
            seen.add(ref.n_m)
        rec = f.end_epoch(epoch)
        ref.end_epoch()
        assert (rec["n_m"], rec["k"], rec["fixed"]) == (ref.n_m, ref.k, ref.fixed)
        assert rec["fixed"] == (epoch >= 2)
    assert len(seen) > 3                      # the controller moved


# ------------------------------------------------------------------------------- misc


@pytest.mark.parametrize("cls", [Schrodinger, BitWaveFormat])
def test_deterministic(cls):
    def go(seed):
        f = cls(run_info(seed=seed))
        if cls is Schrodinger:
            for k in f.n:
                f.n[k] = [9.5, 4.5]
        rng = np.random.default_rng(11)
        outs = []
        for it in range(6):
            f.begin_step(1, it)
            for layer, shape in (("conv1", (9, 4)), ("fc", (16, 3))):
                outs.append(f.stash(rand(rng, shape, 9.0), "weight", layer))
                a = np.abs(rand(rng, (5, shape[0]), 9.0))
                outs.append(f.stash(a, "activation", layer))
            for layer, shape in (("fc", (16, 3)), ("conv1", (9, 4))):
                f.stash_grad(rand(rng, shape), "weight", layer)
                f.stash_grad(rand(rng, (5, shape[0])), "activation", layer)
            f.end_step(2.0 - 0.3 * it)
        f.end_epoch(1)
        return outs, f.summary_record()

    a, ra = go(1)
    b, rb = go(1)
    assert all(same_bits(x, y) for x, y in zip(a, b)) and ra == rb
    if cls is Schrodinger:
        c, _ = go(2)
        assert not all(same_bits(x, y) for x, y in zip(a, c))


def test_non_finite_tensors_pass_through_uncounted():
    f = _one_layer()
    x = np.float32([[np.inf, 1, 2], [0, 1, 2], [0, 1, np.nan], [1, 1, 1]])
    f.begin_step(1, 0)
    assert f.stash(x, "weight", "fc") is x
    g = np.ones_like(x)
    assert f.stash_grad(g, "weight", "fc") is g
    assert f.ledger.totals()["total"]["values"] == 0


def test_errors():
    f = _one_layer()
    f.begin_step(1, 0)
    with pytest.raises(StashFormatError, match="kind"):
        f.stash(np.ones((4, 3), np.float32), "bias", "fc")
    with pytest.raises(StashFormatError, match="unknown layer"):
        f.stash(np.ones((4, 3), np.float32), "weight", "fc9")
    with pytest.raises(StashFormatError, match="without its stash"):
        f.stash_grad(np.ones((4, 3), np.float32), "weight", "fc")
    with pytest.raises(StashFormatError, match="bit_lr"):
        _one_layer(bit_lr=-1.0)
    assert issubclass(StashFormatError, ValueError)


# ------------------------------------------------------------------------------- end to end


@pytest.mark.parametrize("name", ["schrodinger", "bitwave"])
def test_smoke_training(name):
    from flows.studies.train.data import load_dataset
    from flows.studies.train.loop import train
    data = load_dataset(None, 0, limit=200)
    r = train("cnn", FORMATS[name], data, 2)
    assert r["diverged_at"] is None
    assert r["final_test_accuracy"] > 0.2              # 10 classes: chance is 0.1
    assert len(r["epochs"]) == 2
    s = r["format"]
    b = s["bits"]
    # cnn: 3 layers, 2 stashes each per batch; 160 training samples in batches of 32
    iterations = 2 * 5
    # weights 9x16, 144x32, 128x10; im2col inputs 8x8 positions x 9, 4x4 x 144, then 32x2x2
    assert b["weight"]["values"] == iterations * (9 * 16 + 144 * 32 + 128 * 10)
    assert b["activation"]["values"] == iterations * 32 * (64 * 9 + 16 * 144 + 128)
    assert b["activation"]["sign_bits"] == 0            # images and ReLU/max-pool outputs
    assert b["weight"]["sign_bits"] == b["weight"]["values"]
    assert len(s["bitlengths"]) == 2
    tot = s["reductions"][("QM+QE+G" if name == "schrodinger" else "BWM+BWE+G")]["total"]
    assert tot > 1.0
    assert 0 < s["gecko_exponent_ratio"]["weight"] < 1
    assert r["epochs"][0]["format"]["learning"] is True
    json.dumps(r, allow_nan=False)                     # train.json takes the records as they are
    # the report's mean bits per value are the single-method reductions inverted: 23 / QM and
    # 8 / QE, per kind (BitWave: BWM, BWE); the paper's geo-means give 1.93 and 3.76 bits
    md = FORMATS[name].markdown(r)
    m_col, e_col = ("QM", "QE") if name == "schrodinger" else ("BWM", "BWE")
    red = s["reductions"]
    row = next(line for line in md.splitlines() if line.startswith("| mantissa |"))
    assert row.split(" | ")[1] == f"{23 / red[m_col]['weight']:.2f}"
    row = next(line for line in md.splitlines() if line.startswith("| exponent |"))
    assert row.split(" | ")[3] == f"{8 / red[e_col]['total']:.2f}"
    if name == "schrodinger":
        assert row.split(" | ")[5] == f"{8 / 2.126:.2f} |"

"""The bf16, fpraker, hbfp8 and hbfp12 training formats: each GEMM phase bit for bit against the
golden function it wraps, the storage hooks, the cycle accounting, determinism, and a short
training run per format."""

import importlib.util

import ml_dtypes
import numpy as np
import pytest

from flows.studies.train.formats.base import PHASES, LayerInfo, RunInfo
from flows.studies.train.formats.bf16 import BF16, bf16_round
from flows.studies.train.formats.bf16 import FORMATS as BF16_FORMATS
from flows.studies.train.formats.fpraker import FORMATS as FPRAKER_FORMATS
from flows.studies.train.formats.fpraker import FPRaker
from flows.studies.train.formats.hbfp import FORMATS as HBFP_FORMATS
from flows.studies.train.formats.hbfp import HBFP8, HBFP12, T, WIDE, acc_bits, store_tiles
from golden.common import bf16_to_float, float_to_bf16
from golden.equinox.hbfp import bfp_dequantize, bfp_dot, hbfp_matmul, weight_store
from golden.fpraker.gemm import tile_gemm
from golden.fpraker.tile import TileConfig

ALL = {**BF16_FORMATS, **FPRAKER_FORMATS, **HBFP_FORMATS}

RUN = RunInfo(layers=(LayerInfo("conv2", "conv", (144, 32)),), epochs=1, iterations=1, seed=0)


def bits(a):
    return np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)


def operands(seed, n=256, k=144, m=32):
    """The three phases' operands of a conv2-like layer: ReLU'd activations A (n, k), weights
    W (k, m) and output gradients G (n, m), at training-like scales."""
    rng = np.random.default_rng(seed)
    a = np.maximum(rng.standard_normal((n, k)), 0).astype(np.float32)
    w = (rng.standard_normal((k, m)) * 0.1).astype(np.float32)
    g = (rng.standard_normal((n, m)) * 1e-3).astype(np.float32)
    return {"fwd": (a, w), "bwd_data": (g, w.T), "wgrad": (a.T, g)}


# ------------------------------------------------------------------------------------------ bf16

def test_bf16_round_matches_ml_dtypes():
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(20000) * np.exp(rng.uniform(-30, 30, 20000))).astype(np.float32)
    ref = x.astype(ml_dtypes.bfloat16).astype(np.float32)
    assert np.array_equal(bits(bf16_round(x)), bits(ref))


@pytest.mark.parametrize("phase", PHASES)
def test_bf16_matmul_is_fp32_gemm_of_rounded_operands(phase):
    x, y = operands(2)[phase]
    out = BF16(RUN).matmul(x, y, phase, "conv2")
    ref = np.matmul(bf16_to_float(float_to_bf16(x)), bf16_to_float(float_to_bf16(y)),
                    dtype=np.float32)
    assert out.dtype == np.float32 and out.shape == ref.shape
    assert np.array_equal(bits(out), bits(ref))
    # the rounding happened: the FP32 product of the unrounded operands differs
    assert not np.array_equal(bits(out), bits(np.matmul(x, y, dtype=np.float32)))


# --------------------------------------------------------------------------------------- fpraker

@pytest.mark.parametrize("phase", PHASES)
def test_fpraker_matmul_is_tile_gemm_with_left_operand_serial(phase):
    x, y = operands(3)[phase]
    out = FPRaker(RUN).matmul(x, y, phase, "conv2")
    res = tile_gemm(float_to_bf16(x), float_to_bf16(y.T), TileConfig())
    ref = bf16_to_float(res.out).T
    assert out.dtype == np.float32 and out.shape == (x.shape[0], y.shape[1])
    assert np.array_equal(bits(out), bits(ref))
    # the other choice of serial operand gives other bits: the test pins the choice
    swapped = bf16_to_float(tile_gemm(float_to_bf16(y.T), float_to_bf16(x), TileConfig()).out)
    assert not np.array_equal(bits(out), bits(swapped))


def test_fpraker_matches_numpy_tile_model():
    # the NumPy tile model is the specification; the format runs the compiled copy
    x, y = operands(4, n=40)["fwd"]
    x, y = x[:, :20], y[:20, :12]
    out = FPRaker(RUN).matmul(x, y, "fwd", "conv2")
    res = tile_gemm(float_to_bf16(x), float_to_bf16(y.T), TileConfig(), engine="numpy")
    assert np.array_equal(bits(out), bits(bf16_to_float(res.out).T))


def test_fpraker_counts_training_gemms_per_phase():
    fmt = FPRaker(RUN)
    ops = operands(5, n=64)
    expect_cycles = {}
    fmt.begin_step(1, 0)
    for phase, (x, y) in ops.items():
        fmt.matmul(x, y, phase, "conv2")
        expect_cycles[phase] = tile_gemm(float_to_bf16(x), float_to_bf16(y.T)).cycles
    fmt.end_step(1.0)
    fmt.matmul(*ops["fwd"], "fwd", "conv2")       # evaluation: not counted
    rec = fmt.end_epoch(1)
    summary = fmt.summary_record()
    assert rec == summary
    assert summary["cycles"] == expect_cycles
    assert summary["macs"] == {p: x.shape[0] * x.shape[1] * y.shape[1]
                               for p, (x, y) in ops.items()}
    fmt.begin_step(2, 0)
    fmt.matmul(*ops["wgrad"], "wgrad", "conv2")
    fmt.end_step(1.0)
    assert fmt.end_epoch(2)["cycles"] == {"fwd": 0, "bwd_data": 0,
                                          "wgrad": expect_cycles["wgrad"]}
    assert fmt.summary_record()["cycles"]["wgrad"] == 2 * expect_cycles["wgrad"]


def test_fpraker_non_finite_operand_gives_nan():
    x, y = operands(6, n=16)["fwd"]
    x = x.copy()
    x[0, 0] = np.inf
    out = FPRaker(RUN).matmul(x, y, "fwd", "conv2")
    assert out.shape == (16, 32) and np.isnan(out).all()


# ------------------------------------------------------------------------------------------ hbfp

@pytest.mark.parametrize("cls", [HBFP8, HBFP12])
@pytest.mark.parametrize("phase", PHASES)
def test_hbfp_matmul_is_golden_hbfp_matmul(cls, phase):
    x, y = operands(7)[phase]
    fmt = cls(RUN)
    out = fmt.matmul(x, y, phase, "conv2")
    ref = bf16_to_float(hbfp_matmul(x, y, T, cls.m, acc_bits(cls.m)))
    assert out.dtype == np.float32 and out.shape == (x.shape[0], y.shape[1])
    assert np.array_equal(bits(out), bits(ref))
    assert fmt.summary_record() == {"m": cls.m, "T": T, "A": acc_bits(cls.m), "wide": WIDE}


@pytest.mark.parametrize("phase", PHASES)
def test_hbfp8_ablations_round_as_named(phase):
    """hbfp8-rne rounds every GEMM's operands to nearest even, hbfp8-rne-wgrad only the
    weight-gradient GEMM's; both equal the golden model with that rounding, bit for bit, and
    are trained only when named."""
    from flows.studies.train.formats import ABLATIONS, FORMATS

    x, y = operands(7)[phase]
    for name, rne in (("hbfp8-rne", True), ("hbfp8-rne-wgrad", phase == "wgrad")):
        cls = ABLATIONS[name]
        out = cls(RUN).matmul(x, y, phase, "conv2")
        ref = bf16_to_float(hbfp_matmul(x, y, T, 8, acc_bits(8), "rne" if rne else "floor"))
        assert np.array_equal(bits(out), bits(ref)), name
        assert cls(RUN).summary_record()["rounding"][phase] == ("rne" if rne else "floor")
        assert name not in FORMATS
    assert {"hbfp8-rne", "hbfp8-rne-wgrad"} <= set(ABLATIONS)


def test_hbfp8_and_hbfp12_differ_and_hbfp12_is_closer():
    x, y = operands(8)["fwd"]
    exact = x.astype(np.float64) @ y.astype(np.float64)
    err = {c.m: np.abs(c(RUN).matmul(x, y, "fwd", "l") - exact).mean() for c in (HBFP8, HBFP12)}
    assert err[12] < err[8]


@pytest.mark.parametrize("m", [8, 12])
def test_acc_bits_hold_t_largest_products(m):
    A = acc_bits(m)
    assert A >= 24
    big = -(1 << (m - 1))                 # the most negative mantissa: the largest product
    Ma = np.full(T, big)
    assert not bfp_dot(127, Ma, 127, Ma, A, m)[2]
    if A > 24:                             # the narrowest width: one bit less wraps
        assert bfp_dot(127, Ma, 127, Ma, A - 1, m)[2]
    # and through the whole datapath: blocks of values just below -2 quantize to the most
    # negative mantissa, and the T products sum to +4 T
    x = np.full((1, T), -1.9999999, dtype=np.float32)
    out = {c.m: c for c in (HBFP8, HBFP12)}[m](RUN).matmul(x, x.T.copy(), "fwd", "l")
    assert out[0, 0] == pytest.approx(4 * T, rel=2 ** -7)


def test_store_weight_is_wide_bfp_per_tile():
    rng = np.random.default_rng(9)
    w = (rng.standard_normal((144, 32)) * 0.05).astype(np.float32)
    got = HBFP8(RUN).store_weight(w, "conv2")
    assert got.dtype == np.float32 and got.shape == w.shape
    ref = np.zeros((160, 32))
    wp = np.zeros((160, 32), dtype=np.float32)
    wp[:144] = w
    for i in range(0, 160, T):
        for j in range(0, 32, T):
            tile = wp[i:i + T, j:j + T]
            ref[i:i + T, j:j + T] = bfp_dequantize(*weight_store(tile.reshape(-1), WIDE),
                                                   WIDE).reshape(T, T)
    assert np.array_equal(got, ref[:144].astype(np.float32))
    assert not np.array_equal(got, w)
    assert np.abs(got - w).max() <= np.abs(w).max() * 2.0 ** -13
    # one tile: the weight store of the flattened matrix
    one = w[:T, :T]
    assert np.array_equal(store_tiles(one),
                          bfp_dequantize(*weight_store(one.reshape(-1), WIDE), WIDE)
                          .reshape(T, T).astype(np.float32))
    # stored values are fixed points of the storage
    assert np.array_equal(HBFP12(RUN).store_weight(got, "conv2"), got)


def test_hbfp_non_finite():
    x, y = operands(10, n=16)["fwd"]
    x = x.copy()
    x[1, 2] = np.nan
    assert np.isnan(HBFP8(RUN).matmul(x, y, "fwd", "l")).all()
    w = y.copy()
    w[0, 0] = np.inf
    assert HBFP8(RUN).store_weight(w, "l") is w


# ------------------------------------------------------------------------------------ every format

def test_format_classes():
    assert set(ALL) == {"bf16", "fpraker", "hbfp8", "hbfp12"}
    for name, cls in ALL.items():
        assert cls.name == name and cls.summary and cls.paper


@pytest.mark.parametrize("name", sorted(ALL))
def test_deterministic(name):
    def run():
        fmt = ALL[name](RUN)
        fmt.begin_step(1, 0)
        outs = [fmt.matmul(x, y, p, "conv2") for p, (x, y) in operands(11, n=64).items()]
        outs.append(fmt.store_weight(operands(11)["fwd"][1], "conv2"))
        fmt.end_step(0.5)
        return outs, fmt.end_epoch(1), fmt.summary_record()

    (o1, e1, s1), (o2, e2, s2) = run(), run()
    assert all(np.array_equal(bits(a), bits(b)) for a, b in zip(o1, o2))
    assert e1 == e2 and s1 == s2


# -------------------------------------------------------------------------------- training runs

_ENGINE = importlib.util.find_spec("flows.studies.train.engine") is not None


@pytest.mark.skipif(not _ENGINE, reason="the training engine is not available")
@pytest.mark.parametrize("name", sorted(ALL))
def test_smoke_training(name):
    from flows.studies.train.data import load_dataset
    from flows.studies.train.loop import train

    data = load_dataset(None, 0, limit=200)
    r = train("cnn", ALL[name], data, 2)
    assert r["diverged_at"] is None and len(r["epochs"]) == 2
    assert all(np.isfinite(e["loss"]) for e in r["epochs"])
    assert 0.0 <= r["final_test_accuracy"] <= 1.0
    # two epochs on 160 images already beat chance (10 classes)
    assert max(e["train_accuracy"] for e in r["epochs"]) > 0.15
    if name == "fpraker":
        n = len(data.x_train)
        # cnn on 8x8 images: conv1 64 x 9 x 16, conv2 16 x 144 x 32, fc 128 x 10 MACs a sample
        per_image = 64 * 9 * 16 + 16 * 144 * 32 + 128 * 10
        assert r["format"]["macs"] == dict.fromkeys(PHASES, 2 * n * per_image)
        assert all(c > 0 for c in r["format"]["cycles"].values())
        assert [e["format"]["macs"]["fwd"] for e in r["epochs"]] == [n * per_image] * 2
    if name == "hbfp8":
        again = train("cnn", ALL[name], data, 2)
        assert again["epochs"] == r["epochs"]

"""Equinox through the CLI: the HBFP tensor analysis, configuration errors with one line and
exit status 2, the reports' linear area fit."""

import json

import numpy as np
import pytest

from flows.cli import main
from flows.declare import Scaling
from golden.equinox.hbfp import bfp_dequantize, bfp_quantize


def run(args, capsys):
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_hbfp_tensor_stats_equal_a_direct_computation(tmp_path, capsys):
    gen = np.random.default_rng(4)
    x = (gen.standard_normal((37, 48)) * np.exp2(gen.integers(-6, 6, (37, 1)))).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    code, out, err = run(["tensor-stats", str(tmp_path / "x.npy"), "--analysis", "hbfp",
                          "--hbfp-m", "6", "--hbfp-block", "16", "--hbfp-rounding", "rne",
                          "-o", str(tmp_path)], capsys)
    assert code == 0, err
    res = json.loads((tmp_path / "x.json").read_text())
    e, M = bfp_quantize(x.reshape(-1, 16), 6, "rne")
    err2 = ((x.reshape(-1, 16).astype(np.float64) - bfp_dequantize(e, M, 6)) ** 2).sum()
    want = np.sqrt(err2 / (x.astype(np.float64) ** 2).sum())
    assert res["tensors"][0]["rrmse"] == pytest.approx(want, rel=1e-12)
    assert res["bits_per_value"] == 6 + 8 / 16
    assert res["tensors"][0]["zeroed"] == int(((x.reshape(-1, 16) != 0) & (M == 0)).sum())


@pytest.mark.parametrize("args, message", [
    (["--hbfp-m", "17"], "argument --hbfp-m: '17' is not an integer from 2 to 16"),
    (["--hbfp-block", "0"], "argument --hbfp-block: '0' is not an integer from 1 to 65,536"),
    (["--hbfp-rounding", "up"], "argument --hbfp-rounding: invalid choice: 'up'"),
    ([], "non-finite value inf"),
])
def test_hbfp_tensor_stats_errors(args, message, tmp_path, capsys):
    x = np.ones(40, dtype=np.float32)
    if not args:
        x[17] = np.inf
    np.save(tmp_path / "x.npy", x)
    code, _, err = run(["tensor-stats", str(tmp_path / "x.npy"), "--analysis", "hbfp", *args,
                        "-o", str(tmp_path)], capsys)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("unit, setting, message", [
    ("equinox.quantizer", "m=20", "QuantizerConfig.m = 20"),
    ("equinox.quantizer", "rounding=nearest", "QuantizerConfig.rounding = 'nearest'"),
    ("equinox.array", "n=0", "ArrayConfig.n = 0"),
    ("equinox.array", "w=0", "ArrayConfig.w = 0"),
    ("equinox.array", "x_bits=20", "ArrayConfig.x_bits = 20"),
    ("equinox.array", "acc_bits=12", "ArrayConfig.acc_bits = 12"),
    ("equinox.dispatcher", "q_inf=20", "DispatchConfig.q_inf = 20"),
    ("equinox.dispatcher", "policy=lifo", "DispatchConfig.policy = 'lifo'"),
])
def test_configuration_errors_are_one_line(unit, setting, message, tmp_path, capsys):
    code, _, err = run(["generate", unit, "--set", setting, "-o", str(tmp_path)], capsys)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err


def test_scaling_fit_is_least_squares():
    s = Scaling(label="t", members=("a", "b", "c", "d"), size=("n",), size_label="n")
    res = {k: {"config": {"n": n}, "area_um2": a}
           for k, n, a in (("a", 1, 12.0), ("b", 2, 19.0), ("c", 4, 41.0), ("d", 8, 79.0))}
    pts, slope, intercept, r2 = s.fit(res)
    X = np.array([[1, 1], [2, 1], [4, 1], [8, 1]], dtype=float)
    (ws, wi), *_ = np.linalg.lstsq(X, np.array([12.0, 19.0, 41.0, 79.0]), rcond=None)
    assert slope == pytest.approx(ws) and intercept == pytest.approx(wi)
    resid = np.array([12.0, 19.0, 41.0, 79.0]) - X @ [ws, wi]
    assert r2 == pytest.approx(1 - (resid ** 2).sum() / ((np.array([12, 19, 41, 79.0]) - 37.75) ** 2).sum())
    assert s.fit({"a": res["a"]}) is None

"""The HBFP dot-product error study: files, the shape of its curves, the thesis's reference point
(checked against an independent Monte-Carlo run), determinism and argument errors."""

import json

import numpy as np
import pytest

from flows.studies.hbfp_error import (A_VALUES, BASE, K_VALUES, M_VALUES, SOURCE_M, STAGES,
                                      T_VALUES, HBFPStudyError, hbfp_error_study, rrmse)
from golden.common import bf16_to_float
from golden.equinox.hbfp import hbfp_matmul


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    out = tmp_path_factory.mktemp("hbfp")
    calls = []
    res = hbfp_error_study(out, samples=4096, progress=lambda d, t: calls.append((d, t)))
    return out, res, calls


def test_files_written(study):
    out, res, calls = study
    assert json.loads((out / "hbfp.json").read_text()) == res
    assert (out / "hbfp.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (out / "hbfp.md").read_text()
    assert "about 2 %" in md
    assert f"{100 * res['reference']['rrmse']:.3g} %" in md
    for title in ("mantissa width", "block size", "accumulator width", "dot-product length"):
        assert title in md
    total = calls[-1][1]
    assert [d for d, _ in calls] == list(range(1, total + 1))
    # one progress step per point; panel (e) computes its three stages in one step
    src = ("sources", "sources_T")
    assert total == sum(len(s) for n, p in res["panels"].items() if n not in src
                        for s in p["series"].values()) + sum(
        len(s) for n in src for s in res["panels"][n]["series"].values()) // len(STAGES)
    assert "(e) where the error comes from" in md


def test_panels_cover_their_ranges(study):
    _, res, _ = study
    p = res["panels"]
    assert p["m"]["x"] == list(range(2, 17)) == list(M_VALUES)
    assert p["T"]["x"] == list(T_VALUES) and p["A"]["x"] == list(A_VALUES)
    assert p["K"]["x"] == list(K_VALUES)
    for panel in p.values():
        for ys in panel["series"].values():
            assert len(ys) == len(panel["x"]) and all(np.isfinite(ys)) and min(ys) > 0


def test_error_falls_with_mantissa_width(study):
    _, res, _ = study
    for name, ys in res["panels"]["m"]["series"].items():
        # halving the quantization step roughly halves the error until the bf16 partial sums
        # dominate (m around 12)
        assert all(a > b for a, b in zip(ys[:9], ys[1:10])), name
        assert ys[-1] < ys[M_VALUES.index(8)] / 2, name
    # the plateau is set by the bfloat16 results: never below rounding the exact result once
    floor = res["floors"]["gaussian"]["bf16_output"]
    assert min(res["panels"]["m"]["series"]["gaussian"]) > floor


def test_error_sources_add_up_to_the_datapath(study):
    """Panel (e): its last stage is the whole datapath, so it equals panel (d) at m = 8 (whose
    24-bit accumulator never wraps at T = 16); at 16 bits the quantization error is far below
    the bf16 normalization's, and the bf16 sum of the K/T partials adds to it, more for more
    partials."""
    _, res, _ = study
    src = res["panels"]["sources"]["series"]
    assert res["panels"]["sources"]["x"] == list(K_VALUES) and SOURCE_M == (8, 16)
    for d in ("gaussian", "relu"):
        assert src[f"{d}, m = 8, + bf16 sum"] == res["panels"]["K"]["series"][d]
        q, n, f = (src[f"{d}, m = 16, {st}"] for st in STAGES)
        assert n[-1] < f[-1] / 5 and f[-1] > 4 * f[0]
        # zero-mean operands: no quantization bias to add up (relu's floor bias does, slowly)
        assert q[-1] < n[-1] / 5 if d == "gaussian" else q[-1] < f[-1] / 5
    # panel (f): its last stage is panel (b), and quantization grows with the block
    by_t = res["panels"]["sources_T"]["series"]
    assert by_t["gaussian, + bf16 sum"] == res["panels"]["T"]["series"]["gaussian"]
    q = by_t["gaussian, quantization"]
    assert q[-1] > 1.5 * q[0]


def test_accumulator_wraps_only_when_too_narrow(study):
    _, res, _ = study
    pa = res["panels"]["A"]
    m, T = BASE["m"], BASE["T"]
    # T largest products (2**(2m-2) each) fit from A = 2m - 1 + log2(T) + 1 bits on
    safe = 2 * m - 1 + int(np.log2(T)) + 1
    for d, ys in pa["series"].items():
        ok = [y for a, y in zip(pa["x"], ys) if a >= safe]
        assert len(set(ok)) == 1, d               # no wrap: A does not change a single bit
        assert all(w == 0 for a, w in zip(pa["x"], pa["wrapped"][d]) if a >= safe)
        assert pa["wrapped"][d][0] > 0 and ys[0] > 3 * ok[0]


def test_reference_point_matches_independent_run(study):
    _, res, _ = study
    ref = res["reference"]
    assert (ref["m"], ref["A"], ref["thesis_rrmse"]) == (8, 24, 0.02)
    A = res["panels"]["A"]
    assert ref["rrmse"] == A["series"]["gaussian"][A["x"].index(24)]
    # an independent draw of the same experiment: the same RRMSE up to sampling noise
    rng = np.random.default_rng(12345)
    x = rng.standard_normal((256, BASE["K"])).astype(np.float32)
    w = rng.standard_normal((BASE["K"], 64)).astype(np.float32)
    exact = x.astype(np.float64) @ w.astype(np.float64)
    mine = rrmse(bf16_to_float(hbfp_matmul(x, w, BASE["T"], 8, 24)), exact)
    assert ref["rrmse"] == pytest.approx(mine, rel=0.15)


def test_rrmse_definition():
    exact = np.array([3.0, -4.0])
    assert rrmse(exact, exact) == 0.0
    # errors (1, 1) against RMS sqrt(12.5)
    assert rrmse(exact + 1, exact) == pytest.approx(1 / np.sqrt(12.5))


def test_deterministic(tmp_path, monkeypatch):
    # shorter sweeps (the base point kept): determinism does not depend on their length
    import flows.studies.hbfp_error as study_mod

    monkeypatch.setattr(study_mod, "K_VALUES", (16, BASE["K"]))
    monkeypatch.setattr(study_mod, "M_VALUES", (2, 8, 16))
    monkeypatch.setattr(study_mod, "A_VALUES", (14, 24))
    monkeypatch.setattr(study_mod, "T_VALUES", (1, 16))
    a = hbfp_error_study(tmp_path / "a", seed=3, samples=64)
    b = hbfp_error_study(tmp_path / "b", seed=3, samples=64)
    c = hbfp_error_study(tmp_path / "c", seed=4, samples=64)
    assert (tmp_path / "a" / "hbfp.json").read_text() == (tmp_path / "b" / "hbfp.json").read_text()
    assert (tmp_path / "a" / "hbfp.md").read_text() == (tmp_path / "b" / "hbfp.md").read_text()
    assert a == b and a["panels"] != c["panels"]


@pytest.mark.parametrize("samples", [0, 100, -64, True, 64.0])
def test_bad_samples(tmp_path, samples):
    with pytest.raises(HBFPStudyError, match="samples"):
        hbfp_error_study(tmp_path, samples=samples)
    assert not (tmp_path / "hbfp.json").exists()

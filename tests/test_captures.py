"""Training-operand captures (flows.studies.captures): the writer's layout and round trip, the
interruption and non-finite rules, ``trainfab speedup`` on capture folders (per-GEMM cycles
against the golden tile model called here, the serial-operand choice, phases, epochs, errors),
``capture_stats`` against the analysis run on files built here, and a short captured training
run of the engine."""

import csv
import json
import zipfile

import numpy as np
import pytest

import flows
from golden.fpraker.tile import TileConfig
from flows import FlowError
from flows.cli import main
from flows.families.gecko import TENSOR_ANALYSES
from flows.studies.gecko_stats import gecko_stats
from flows.studies import captures, speedup
from flows.studies.captures import CaptureError, CaptureWriter
from golden.common import float_to_bf16
from golden.fpraker.gemm import tile_gemm

META = {"model": "tiny", "format": "fp32", "seed": 3, "batch_size": 6, "dataset": "synthetic"}
GECKO = next(a for a in TENSOR_ANALYSES if a.name == "gecko")


@pytest.fixture
def build(tmp_path, monkeypatch):
    """A private build folder (default outputs, no area files)."""
    monkeypatch.setattr(flows, "BUILD", tmp_path / "build")
    return tmp_path / "build"


def _layer_gemms(rng, n, k, m):
    """The engine's three GEMMs of one layer, (phase, x, y): ReLU-sparse activations A (n, k),
    weights W (k, m), gradients G (n, m) with some exact zeros."""
    A = np.maximum(rng.normal(size=(n, k)), 0).astype(np.float32)
    W = (0.3 * rng.normal(size=(k, m))).astype(np.float32)
    G = (0.01 * rng.normal(size=(n, m)) * (rng.random((n, m)) < 0.7)).astype(np.float32)
    return [("fwd", A, W), ("bwd_data", G, W.T), ("wgrad", A.T, G)]


#: the synthetic network: layer -> (n, k, m)
LAYERS = {"conv1": (12, 9, 5), "fc": (6, 13, 4)}


def _write(directory, epochs=(1, 2), seed=0, meta=META):
    """A capture of LAYERS over ``epochs``; returns {(epoch, layer, phase): (x, y)}."""
    rng = np.random.default_rng(seed)
    ops = {}
    with CaptureWriter(directory, meta) as w:
        for e in epochs:
            gemms = {lay: _layer_gemms(rng, *shape) for lay, shape in LAYERS.items()}
            order = [(lay, 0) for lay in LAYERS] + [(lay, i) for lay in reversed(LAYERS)
                                                   for i in (1, 2)]
            for lay, i in order:
                phase, x, y = gemms[lay][i]
                w(e, 0, lay, phase, x, y)  # the engine's callback signature
                ops[(e, lay, phase)] = (x, y)
    return ops


def _bf(a):
    return np.asarray(float_to_bf16(np.asarray(a, np.float32)), np.uint16)


# --- the writer


def test_writer_round_trip_and_manifest(tmp_path):
    d = tmp_path / "cap"
    ops = _write(d)
    man = json.loads((d / "manifest.json").read_text())
    assert man["kind"] == "trainfab-capture" and man["version"] == 1
    assert {k: man[k] for k in META} == META
    assert man["complete"] is True and man["epochs"] == [1, 2] and man["skipped"] == []
    assert len(man["gemms"]) == 2 * 3 * len(LAYERS)
    for g in man["gemms"]:
        x, y = ops[(g["epoch"], g["layer"], g["phase"])]
        assert g["name"] == f"{g['layer']}.{g['phase']}"
        assert g["file"] == f"e{g['epoch']:03d}.npz"
        assert g["serial"] == [x.shape[0], x.shape[1]]
        assert g["parallel"] == [y.shape[1], y.shape[0]]
        assert g["macs"] == x.shape[0] * x.shape[1] * y.shape[1]
        assert (g["serial_kind"], g["parallel_kind"]) == {
            "fwd": ("activation", "weight"), "bwd_data": ("gradient", "weight"),
            "wgrad": ("activation", "gradient")}[g["phase"]]
        with np.load(d / g["file"]) as z:
            S, P = z[f"{g['name']}.serial"], z[f"{g['name']}.parallel"]
        assert S.dtype == np.uint16 and P.dtype == np.uint16
        # C order: the tensor readers take members in storage order
        assert S.flags.c_contiguous and P.flags.c_contiguous
        np.testing.assert_array_equal(S, _bf(x))
        np.testing.assert_array_equal(P, _bf(y.T))
    # the stated orientation, spelled out per phase for one layer
    n, k, m = LAYERS["fc"]
    A, W = ops[(1, "fc", "fwd")]
    G = ops[(1, "fc", "bwd_data")][0]
    with np.load(d / "e001.npz") as z:
        np.testing.assert_array_equal(z["fc.fwd.serial"], _bf(A))                 # (N, K)
        np.testing.assert_array_equal(z["fc.fwd.parallel"], _bf(W.T))             # (M, K)
        np.testing.assert_array_equal(z["fc.bwd_data.serial"], _bf(G))            # (N, M)
        np.testing.assert_array_equal(z["fc.bwd_data.parallel"], _bf(W))          # (K, M)
        np.testing.assert_array_equal(z["fc.wgrad.serial"], _bf(A.T))             # (K, N)
        np.testing.assert_array_equal(z["fc.wgrad.parallel"], _bf(G.T))           # (M, N)
        assert z["fc.wgrad.parallel"].shape == (m, n)
    assert captures.read_manifest(d)["gemms"] == man["gemms"]


def test_interrupted_run_leaves_its_finished_epochs(tmp_path):
    d = tmp_path / "cap"
    rng = np.random.default_rng(1)
    w = CaptureWriter(d, META)
    assert captures.read_manifest(d)["gemms"] == []      # a capture from the start
    for phase, x, y in _layer_gemms(rng, 4, 8, 3):
        w.add(1, "fc", phase, x, y)
    assert not (d / "e001.npz").exists()                 # epoch 1 may still grow
    w.add(2, "fc", "fwd", *_layer_gemms(rng, 4, 8, 3)[0][1:])
    man = captures.read_manifest(d)                      # killed here: epoch 1 is readable
    assert man["epochs"] == [1] and man["complete"] is False
    assert [g["name"] for g in man["gemms"]] == ["fc.fwd", "fc.bwd_data", "fc.wgrad"]
    assert not list(d.glob(".*tmp"))
    # an exception in the run: what was captured is written, marked incomplete
    with pytest.raises(KeyboardInterrupt):
        with w:
            raise KeyboardInterrupt
    man = captures.read_manifest(d)
    assert man["epochs"] == [1, 2] and man["complete"] is False
    assert [g["name"] for g in man["gemms"] if g["epoch"] == 2] == ["fc.fwd"]


def test_non_finite_operands_are_skipped_with_a_note(tmp_path):
    d = tmp_path / "cap"
    x = np.ones((4, 8), np.float32)
    y = np.ones((8, 3), np.float32)
    with CaptureWriter(d, META) as w:
        w.add(1, "fc", "fwd", x, y)
        bad = x.copy()
        bad[1, 2] = np.nan
        w.add(1, "fc", "bwd_data", np.ones((4, 3), np.float32), y.T.copy())
        w.add(2, "fc", "fwd", bad, y)
        # 3.4e38 is finite in FP32 and Inf after rounding to bfloat16
        w.add(2, "fc", "wgrad", x.T.copy(), np.full((4, 3), 3.4e38, np.float32))
    man = captures.read_manifest(d)
    assert [(g["epoch"], g["name"]) for g in man["gemms"]] == [(1, "fc.fwd"), (1, "fc.bwd_data")]
    assert man["epochs"] == [1]        # epoch 2 had nothing finite: no file
    assert not (d / "e002.npz").exists()
    assert [(s["epoch"], s["phase"]) for s in man["skipped"]] == [(2, "fwd"), (2, "wgrad")]
    assert "x hold NaN or Inf" in man["skipped"][0]["reason"]
    assert "y hold NaN or Inf" in man["skipped"][1]["reason"]


def test_writer_errors(tmp_path):
    d = tmp_path / "cap"
    x, y = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    with pytest.raises(CaptureError, match="reserved"):
        CaptureWriter(d, {"gemms": 1})
    w = CaptureWriter(d, META)
    w.add(2, "fc", "fwd", x, y)
    with pytest.raises(CaptureError, match="captured twice in epoch 2"):
        w.add(2, "fc", "fwd", x, y)
    with pytest.raises(CaptureError, match="captures go forward"):
        w.add(1, "fc", "bwd_data", x, y)
    with pytest.raises(CaptureError, match="phase 'backward'"):
        w.add(2, "fc", "backward", x, y)
    with pytest.raises(CaptureError, match=r"cannot capture \(2, 3\) @ \(4, 3\)"):
        w.add(2, "fc", "wgrad", x, y.T)
    with pytest.raises(CaptureError, match="epochs are integers from 1"):
        w.add(0, "fc", "wgrad", x, y)
    w.close()
    with pytest.raises(CaptureError, match="closed"):
        w.add(3, "fc", "fwd", x, y)
    assert isinstance(CaptureError("x"), ValueError) and isinstance(CaptureError("x"), FlowError)
    # a folder with another tool's manifest is not overwritten
    other = tmp_path / "gen"
    other.mkdir()
    (other / "manifest.json").write_text('{"unit": "fpraker.pe"}')
    with pytest.raises(CaptureError, match="exists"):
        CaptureWriter(other, META)
    assert json.loads((other / "manifest.json").read_text()) == {"unit": "fpraker.pe"}


def test_the_writer_never_replaces_a_capture(tmp_path):
    """Replacing a capture is the output owner's job (train's private folder); the writer
    refuses a folder that holds one and removes nothing."""
    d = tmp_path / "cap"
    _write(d, epochs=(1, 2, 3))
    before = sorted(p.name for p in d.iterdir())
    with pytest.raises(captures.CaptureError, match="exists"):
        _write(d, epochs=(1,), seed=5)
    assert sorted(p.name for p in d.iterdir()) == before
    assert captures.read_manifest(d)["epochs"] == [1, 2, 3]


# --- trainfab speedup on captures


def _speedup(argv, capsys):
    code = main(["speedup", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def _error_line(argv, capsys) -> str:
    code, _, err = _speedup(argv, capsys)
    assert code == 2, err
    lines = [ln for ln in err.splitlines() if ln.startswith("trainfab: error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_speedup_on_a_capture(tmp_path, capsys, build):
    d = tmp_path / "cap"
    ops = _write(d)
    out = tmp_path / "out"
    code, stdout, err = _speedup([d, "--area-ratio", "4", "-o", out], capsys)
    assert code == 0, err
    assert "[24/24]" in err and "capture fp32" in stdout
    res = json.loads((out / "speedup.json").read_text())
    assert res["source"]["kind"] == "captures"
    recs = res["records"]
    assert len(recs) == 2 * len(ops)
    # every GEMM in both orientations, cycles as the golden tile model gives them here
    cfg = TileConfig()  # the paper tile: fpraker.tile's preset is its defaults
    mine = {}
    for (e, lay, phase), (x, y) in ops.items():
        S, P = _bf(x), _bf(y.T)
        for o, (a, b) in (("given", (S, P)), ("swapped", (P, S))):
            r = tile_gemm(a, b, cfg)
            mine[(e, lay, phase, o)] = r
    for r in recs:
        g = mine[(r["epoch"], r["layer"], r["phase"], r["orientation"])]
        assert r["fpraker_cycles"] == g.cycles
        assert r["baseline_cycles"] == g.tile_runs * g.groups
        # every cause of the tile model but the other protocol's (always zero here)
        assert r["stalls"] == {k: int(v) for k, v in g.stalls.items() if k != "column_wait"}
        assert g.stalls["column_wait"] == 0
        assert r["name"] == f"e{r['epoch']:03d}:{r['layer']}.{r['phase']}"
    # the serial operand per layer and phase: fewer cycles summed over the epochs
    cap, = res["captures"]
    best_total = 0
    for lay in LAYERS:
        for phase in ("fwd", "bwd_data", "wgrad"):
            given = sum(mine[(e, lay, phase, "given")].cycles for e in (1, 2))
            swapped = sum(mine[(e, lay, phase, "swapped")].cycles for e in (1, 2))
            c = cap["choice"][f"{lay}.{phase}"]
            assert c["serial"] == ("swapped" if swapped < given else "given")
            assert c["fpraker_cycles"] == {"given": given, "swapped": swapped}
            best_total += min(given, swapped)
            for r in recs:
                if (r["layer"], r["phase"]) == (lay, phase):
                    assert r["chosen"] == (r["orientation"] == c["serial"])
    assert cap["total"]["best"]["fpraker_cycles"] == best_total
    base = sum(mine[(e, lay, ph, "given")].tile_runs * mine[(e, lay, ph, "given")].groups
               for (e, lay, ph) in ops)
    assert cap["total"]["best"]["speedup_paper"] == pytest.approx((base / 8) / (best_total / 36))
    assert cap["total"]["best"]["speedup_ours"] == pytest.approx(4 * base / best_total)
    # per phase, per epoch, per layer
    assert list(res["phases"]) == ["fwd", "bwd_data", "wgrad"]
    for phase, v in res["phases"].items():
        assert set(v) == {"given", "swapped", "best"}
        assert v["given"]["fpraker_cycles"] == sum(
            mine[(e, lay, phase, "given")].cycles for e in (1, 2) for lay in LAYERS)
        assert v["best"]["gemms"] == 2 * len(LAYERS)
    assert [e["epoch"] for e in res["epochs"]] == [1, 2]
    for e in res["epochs"]:
        assert set(e["phases"]) == {"fwd", "bwd_data", "wgrad"}
        assert e["total"]["swapped"]["fpraker_cycles"] == sum(
            mine[(e["epoch"], lay, ph, "swapped")].cycles for lay in LAYERS
            for ph in ("fwd", "bwd_data", "wgrad"))
    assert list(res["layers"]) == list(LAYERS)
    assert res["phases"] == cap["phases"] and res["epochs"] == cap["epochs"]
    # re-choosing per GEMM and epoch is never slower than one choice per layer and phase
    assert cap["best_each_epoch"]["fpraker_cycles"] == sum(
        min(mine[(e, lay, ph, "given")].cycles, mine[(e, lay, ph, "swapped")].cycles)
        for (e, lay, ph) in ops)
    for r in res["records"]:
        assert r["useful"] + sum(r["stalls"].values()) == r["lane_cycles"]
    rows = list(csv.DictReader((out / "speedup.csv").open()))
    assert len(rows) == len(recs)
    assert {"capture", "epoch", "layer", "phase", "chosen"} <= set(rows[0])
    md = (out / "speedup.md").read_text()
    for text in ("### Per phase", "### Per epoch", "### Per layer", "ResNet18-Q 2.04x",
                 "SNLI 1.8x", "1.5x average", "| wgrad |", "| conv1 |"):
        assert text in md
    assert (out / "speedup.png").stat().st_size > 1000


def test_epoch_files_read_as_they_are(tmp_path, capsys, build):
    """``trainfab speedup DIR/e001.npz``: the naming rule takes dotted names as they are."""
    d = tmp_path / "cap"
    ops = _write(d, epochs=(1,))
    gemms = {g["name"]: g for g in speedup.file_pairs([d / "e001.npz"])}
    assert set(gemms) == {f"{lay}.{ph}" for lay in LAYERS for ph in ("fwd", "bwd_data", "wgrad")}
    assert gemms["conv1.wgrad"]["serial"].name == "conv1.wgrad.serial"
    assert gemms["conv1.wgrad"]["serial"].fmt == "bf16"
    code, _, err = _speedup([d / "e001.npz", "-o", tmp_path / "o"], capsys)
    assert code == 0, err
    res = json.loads((tmp_path / "o" / "speedup.json").read_text())
    cfg = TileConfig()  # the paper tile: fpraker.tile's preset is its defaults
    for r in res["records"]:
        lay, phase = r["name"].split(".")
        x, y = ops[(1, lay, phase)]
        assert r["fpraker_cycles"] == tile_gemm(_bf(x), _bf(y.T), cfg).cycles


def test_speedup_on_a_folder_of_captures(tmp_path, capsys, build):
    root = tmp_path / "run"
    _write(root / "bf16", epochs=(1,), meta={**META, "format": "bf16"})
    _write(root / "fp32", epochs=(1, 2), seed=4)
    (root / "train.json").write_text("{}")
    code, stdout, err = _speedup([root, "--quick", "-o", tmp_path / "o"], capsys)
    assert code == 0, err
    res = json.loads((tmp_path / "o" / "speedup.json").read_text())
    assert [c["label"] for c in res["captures"]] == ["bf16", "fp32"]
    assert [len(c["epochs"]) for c in res["captures"]] == [1, 2]
    assert res["records"][0]["name"].startswith("bf16/e001:")
    assert "capture bf16" in stdout and "capture fp32" in stdout
    # two folders given one by one: the same captures
    code, _, err = _speedup([root / "bf16", root / "fp32", "--quick", "-o", tmp_path / "p"],
                            capsys)
    assert code == 0, err
    res2 = json.loads((tmp_path / "p" / "speedup.json").read_text())
    assert [r["fpraker_cycles"] for r in res2["records"]] == [
        r["fpraker_cycles"] for r in res["records"]]


def test_broken_captures_are_one_line_errors(tmp_path, capsys, build):
    d = tmp_path / "cap"
    _write(d)
    (d / "e002.npz").unlink()
    line = _error_line([d], capsys)
    assert "lists e002.npz, which is missing" in line
    d = tmp_path / "cap2"
    _write(d)
    man = json.loads((d / "manifest.json").read_text())
    (d / "manifest.json").write_text(json.dumps(man)[:-20])
    assert "not a readable capture manifest" in _error_line([d], capsys)
    (d / "manifest.json").write_text(json.dumps({**man, "version": 7}))
    assert "capture version 7 is not supported" in _error_line([d], capsys)
    (d / "manifest.json").write_text(json.dumps({**man, "kind": "other"}))
    assert "not a trainfab capture manifest" in _error_line([d], capsys)
    bad = dict(man, gemms=[dict(man["gemms"][0], file="../e001.npz")])
    (d / "manifest.json").write_text(json.dumps(bad))
    assert "is not an epoch file" in _error_line([d], capsys)
    bad = dict(man, gemms=[dict(man["gemms"][0], macs=1)])
    (d / "manifest.json").write_text(json.dumps(bad))
    assert "macs 1 is not" in _error_line([d], capsys)
    # the manifest lists a GEMM the file does not hold, or with other shapes
    bad = dict(man, gemms=[*man["gemms"], dict(man["gemms"][0], layer="ghost", name="ghost.fwd")])
    (d / "manifest.json").write_text(json.dumps(bad))
    assert "lists ghost.fwd, but the file has no ghost.fwd.serial" in _error_line([d], capsys)
    g0 = man["gemms"][0]
    wrong = dict(g0, serial=[g0["serial"][0] + 1, g0["serial"][1]],
                 macs=(g0["serial"][0] + 1) * g0["parallel"][0] * g0["serial"][1])
    (d / "manifest.json").write_text(json.dumps(dict(man, gemms=[wrong])))
    assert "in the file" in _error_line([d], capsys)
    # a broken epoch file
    (d / "manifest.json").write_text(json.dumps(man))
    (d / "e001.npz").write_bytes(b"not a zip")
    assert "not a readable .npz" in _error_line([d], capsys)
    # folders that are not captures, and mixed sources
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "not a capture folder" in _error_line([empty], capsys)
    f = tmp_path / "g.npz"
    np.savez(f, **{"a.act": np.ones((2, 8), np.float32), "a.weight": np.ones((2, 8), np.float32)})
    assert "not both" in _error_line([f, empty], capsys)
    assert "--orientation given" in _error_line([empty, "--orientation", "given"], capsys)
    with pytest.raises(CaptureError, match="not found"):
        captures.find_captures([tmp_path / "nowhere"])


# --- tensor statistics of captures


def test_capture_stats_counts_each_tensor_once(tmp_path):
    d = tmp_path / "cap"
    ops = _write(d)
    opts = {"man_width": None, "sign_en": True, "lanes": 8}
    seen = []
    stats = captures.capture_stats(d, GECKO, opts, progress=lambda *a: seen.append(a))
    assert seen and seen[0][0].startswith("fp32/e001/weight: ")
    cap, = stats["captures"]
    assert cap["meta"] == META and [e["epoch"] for e in cap["epochs"]] == [1, 2]
    for e in cap["epochs"]:
        assert list(e["kinds"]) == ["weight", "activation", "gradient"]
        # independently: the analysis on a file of exactly that kind's tensors, built here
        for kind, pick in (("weight", lambda lay: ops[(e["epoch"], lay, "fwd")][1].T),
                           ("activation", lambda lay: ops[(e["epoch"], lay, "fwd")][0]),
                           ("gradient", lambda lay: ops[(e["epoch"], lay, "bwd_data")][0])):
            f = tmp_path / f"{kind}{e['epoch']}.npz"
            np.savez(f, **{lay: np.ascontiguousarray(_bf(pick(lay))) for lay in LAYERS})
            want = gecko_stats(f, **opts)
            got = e["kinds"][kind]
            for key in ("values", "gecko_bits", "paper_bits", "truncated_bits", "width_rows"):
                assert got["total"][key] == want["total"][key], (kind, key)
            assert sorted(t["gecko_bits"] for t in got["tensors"]) == sorted(
                t["gecko_bits"] for t in want["tensors"])
    weights = sum(k * m for _, k, m in LAYERS.values())
    assert cap["epochs"][0]["kinds"]["weight"]["total"]["values"] == weights
    md = captures.capture_stats_markdown(stats)
    assert "weights Gecko / FP32" in md and "gradients Gecko bits/value" in md
    assert "`fwd.parallel`" in md and "`bwd_data.serial`" in md
    json.dumps(stats)   # serializable as the CLI writes it


def test_capture_stats_on_a_folder_of_captures_and_other_analyses(tmp_path):
    from flows.families.equinox import TENSOR_ANALYSES as HBFP

    root = tmp_path / "run"
    _write(root / "a", epochs=(1,), meta={**META, "format": "bf16"})
    _write(root / "b", epochs=(1,))
    hbfp = HBFP[0]
    stats = captures.capture_stats(root, hbfp, {"m": 8, "block": 16, "rounding": "floor"})
    assert [c["label"] for c in stats["captures"]] == ["bf16", "fp32"]
    assert stats["captures"][0]["epochs"][0]["kinds"]["gradient"]["block"] == 16
    assert "RRMSE" in captures.capture_stats_markdown(stats)
    with pytest.raises(CaptureError, match="not a capture folder"):
        captures.capture_stats(tmp_path, hbfp, {})


# --- a captured training run


def test_engine_capture_end_to_end(tmp_path, capsys, build):
    from flows.studies.train.data import load_dataset
    from flows.studies.train.loop import train
    from flows.studies.train.formats import FORMATS

    data = load_dataset(None, 0, limit=200)
    d = tmp_path / "cap" / "fp32"
    meta = {"model": "cnn", "format": "fp32", "seed": 0, "batch_size": 16, "dataset": "digits"}
    with CaptureWriter(d, meta) as w:
        train("cnn", FORMATS["fp32"], data, 2, batch_size=16, capture=w)
    man = captures.read_manifest(d)
    assert man["epochs"] == [1, 2] and man["complete"]
    layers = list(dict.fromkeys(g["layer"] for g in man["gemms"]))
    assert len(man["gemms"]) == 2 * 3 * len(layers)
    for g in man["gemms"]:
        assert g["iteration"] == 0
    by = {(g["epoch"], g["name"]): g for g in man["gemms"]}
    for lay in layers:
        fwd, bwd, wg = (by[(1, f"{lay}.{p}")] for p in ("fwd", "bwd_data", "wgrad"))
        n, k = fwd["serial"]
        m = fwd["parallel"][0]
        assert bwd["serial"] == [n, m] and bwd["parallel"] == [k, m]
        assert wg["serial"] == [k, n] and wg["parallel"] == [m, n]
    code, _, err = _speedup([tmp_path / "cap", "--quick", "-o", tmp_path / "o"], capsys)
    assert code == 0, err
    res = json.loads((tmp_path / "o" / "speedup.json").read_text())
    assert [e["epoch"] for e in res["epochs"]] == [1, 2]
    with zipfile.ZipFile(d / "e001.npz") as z:
        assert len(z.namelist()) == 2 * 3 * len(layers)

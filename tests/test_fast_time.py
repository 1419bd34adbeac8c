"""The FAST time-to-accuracy study: GEMM pricing on the fMAC array and the iso-area arrays
(expected cycles derived here from ``rounds``), time to accuracy, trajectories, outputs, errors."""

import json
import math
from pathlib import Path

import pytest

from flows.studies.fast_time import (
    FastTimeError,
    ISO_AREA,
    fast_time_study,
    iteration_tables,
    width_matrix,
)
from golden.fast.numerics import rounds

CELLS = 256 * 64
PER = 3          # iterations per epoch
EPOCHS = 3
LAYERS = ["c1", "fc"]
FULL = {"c1": {"fwd": [4096, 27, 64], "bwd_data": [4096, 64, 27], "wgrad": [27, 4096, 64]},
        "fc": {"fwd": [1000, 37, 50], "bwd_data": [1000, 50, 37], "wgrad": [37, 1000, 50]}}
LAST = {"c1": {"fwd": [1536, 27, 64], "bwd_data": [1536, 64, 27], "wgrad": [27, 1536, 64]},
        "fc": {"fwd": [375, 37, 50], "bwd_data": [375, 50, 37], "wgrad": [37, 375, 50]}}


def widths_for(kind):
    """Per tensor and layer one width per iteration (lists of ints)."""
    n = PER * EPOCHS
    if kind == "fast-low":
        return {t: {l: [2] * n for l in LAYERS} for t in "wag"}
    if kind == "fast-high":
        return {t: {l: [4] * n for l in LAYERS} for t in "wag"}
    return {"w": {"c1": [2, 2, 2, 2, 4, 4, 4, 4, 4], "fc": [2, 4, 4, 4, 4, 4, 4, 4, 4]},
            "a": {"c1": [2, 2, 2, 2, 2, 2, 4, 4, 4], "fc": [4] * n},
            "g": {"c1": [2, 2, 4, 2, 4, 4, 4, 4, 4], "fc": [2, 2, 2, 4, 4, 4, 4, 4, 4]}}


def shapes_of(it):
    return LAST if it % PER == PER - 1 else FULL


def expected_fast(widths):
    """Per-iteration cycles and per-phase fMAC rounds, from the shapes and widths directly."""
    cyc, work = [], {"fwd": 0, "bwd_data": 0, "wgrad": 0}
    for it in range(PER * EPOCHS):
        c = 0
        for layer in LAYERS:
            w, a, g = (widths[t][layer][it] for t in "wag")
            for phase, (mx, my) in (("fwd", (a, w)), ("bwd_data", (g, w)), ("wgrad", (a, g))):
                M, K, N = shapes_of(it)[layer][phase]
                rw = M * N * math.ceil(K / 16) * rounds(mx, my)
                c += math.ceil(rw / CELLS)
                work[phase] += rw
        cyc.append(c)
    return cyc, work


def expected_mac_epoch(pes):
    return sum(math.ceil(M * K * N / pes) for it in range(PER) for layer in LAYERS
               for (M, K, N) in shapes_of(it)[layer].values())


def summary(kind, fmac_rounds=None):
    w = widths_for(kind)
    return {
        "layers": LAYERS, "iterations_per_epoch": PER, "iterations": PER * EPOCHS,
        "widths": {t: {l: "".join(map(str, v)) for l, v in w[t].items()} for t in "wag"},
        "gemm_shapes": [FULL, LAST],
        "shape_runs": [[e * PER + k, k // (PER - 1)] for e in range(EPOCHS) for k in (0, PER - 1)],
        "fmac_rounds": fmac_rounds if fmac_rounds is not None else expected_fast(w)[1],
        "algorithm": {"adaptive": kind == "fast"},
    }


def run_record(accs, fmt=None):
    return {"final_test_accuracy": accs[-1], "diverged_at": None,
            "epochs": [{"epoch": e + 1, "loss": 1.0, "train_accuracy": a, "test_accuracy": a,
                        "format": {}} for e, a in enumerate(accs)],
            "format": fmt or {}}


ACCS = {"fp32": [0.80, 0.90, 0.95], "fast": [0.85, 0.946, 0.96], "fast-low": [0.5, 0.6, 0.7],
        "fast-high": [0.90, 0.95, 0.96], "bf16": [0.94, 0.95, 0.95]}


def write_run(folder: Path, names=tuple(ACCS)) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    fmts = {n: run_record(ACCS[n], summary(n) if n.startswith("fast") else None) for n in names}
    doc = {"config": {"model": "toy", "epochs": EPOCHS}, "formats": fmts}
    (folder / "train.json").write_text(json.dumps(doc))
    return folder


def test_shape_runs_expand_per_iteration():
    tabs = iteration_tables(summary("fast"))
    assert [t is LAST for t in tabs] == [it % PER == PER - 1 for it in range(PER * EPOCHS)]


def test_pricing_and_time_to_accuracy(tmp_path):
    res = fast_time_study(write_run(tmp_path / "run"), tmp_path / "out")
    rows = {(r["array"], r["format"]) for r in res["rows"]}
    target = 0.95 - 0.005
    assert res["target"]["accuracy"] == pytest.approx(target)
    by_fmt = {r["format"]: r for r in res["rows"] if r["kind"] == "fmac"}
    assert set(by_fmt) == {"fast", "fast-low", "fast-high"}
    for name, r in by_fmt.items():
        cyc, work = expected_fast(widths_for(name))
        ep = [sum(cyc[e * PER:(e + 1) * PER]) for e in range(EPOCHS)]
        assert r["epoch_cycles"] == ep
        assert res["fast_work"][name]["fmac_rounds"] == work
        assert res["fast_work"][name]["matches"] is True
        hit = next((e for e, a in enumerate(ACCS[name]) if a >= target), None)
        if hit is None:
            assert r["reached_epoch"] is None and r["tta_cycles"] is None
        else:
            assert r["reached_epoch"] == hit + 1
            assert r["tta_cycles"] == sum(ep[:hit + 1])
            assert r["tta_seconds"] == pytest.approx(sum(ep[:hit + 1]) / 500e6)
    assert by_fmt["fast-low"]["reached_epoch"] is None
    # the adaptive run does less work per epoch than HighBFP and more than LowBFP here
    assert (by_fmt["fast-low"]["cycles_per_epoch"] < by_fmt["fast"]["cycles_per_epoch"]
            < by_fmt["fast-high"]["cycles_per_epoch"])
    fast_tta = by_fmt["fast"]["tta_cycles"]
    mac = {r["array"]: r for r in res["rows"] if r["kind"] == "mac"}
    assert set(mac) == set(ISO_AREA)
    expect_src = {"HFP8": "fp32", "MSFP-12": "fast-high", "INT-12": "fp32", "bfloat16": "bf16",
                  "FP16": "fp32", "FP32": "fp32"}
    for array, r in mac.items():
        assert r["format"] == expect_src[array]
        pes = {"HFP8": 245 ** 2, "MSFP-12": 230 ** 2, "INT-12": 210 ** 2, "bfloat16": 180 ** 2,
               "FP16": 150 ** 2, "FP32": 180 ** 2 // 2}[array]
        assert r["pes"] == pes
        one = expected_mac_epoch(pes)
        assert r["epoch_cycles"] == [one] * EPOCHS
        hit = next(e for e, a in enumerate(ACCS[r["format"]]) if a >= target)
        assert r["tta_cycles"] == one * (hit + 1)
        assert r["tta_speedup_fast"] == pytest.approx(one * (hit + 1) / fast_tta)
        assert r["epoch_speedup_fast"] == pytest.approx(one / by_fmt["fast"]["cycles_per_epoch"])
    assert ("bfloat16", "bf16") in rows
    out = tmp_path / "out"
    assert json.loads((out / "fast_time.json").read_text())["rows"] == json.loads(
        json.dumps(res["rows"]))
    md = (out / "fast_time.md").read_text()
    assert "2-6x" in md and "MSFP-12" in md and "not reached" in md
    assert (out / "widths.png").stat().st_size > 0


def test_own_target_first_to_target_and_width_work(tmp_path):
    res = fast_time_study(write_run(tmp_path / "run"), tmp_path / "out")
    by_fmt = {r["format"]: r for r in res["rows"] if r["kind"] == "fmac"}
    for name, r in by_fmt.items():
        own = ACCS[name][-1] - 0.005
        assert r["own_target"] == pytest.approx(own)
        hit = next(e for e, a in enumerate(ACCS[name]) if a >= own)
        assert r["own_reached_epoch"] == hit + 1
        assert r["own_tta_cycles"] == sum(r["epoch_cycles"][:hit + 1])
    # fastest first, only the rows that reach the target
    first = res["first_to_target"]
    secs = [t for *_, t in first]
    assert secs == sorted(secs) and len(first) == sum(
        r["tta_seconds"] is not None for r in res["rows"])
    md = (tmp_path / "out" / "fast_time.md").read_text()
    assert f"**First to the target: {first[0][0]}**" in md
    # MACs per layer, epoch and width pair: every iteration's GEMMs at their recorded widths
    wm = res["width_macs"]
    w = widths_for("fast")
    for layer in LAYERS:
        for epoch in range(1, EPOCHS + 1):
            expect: dict = {}
            for it in range((epoch - 1) * PER, epoch * PER):
                wv, av, gv = (w[t][layer][it] for t in "wag")
                for phase, (mx, my) in (("fwd", (av, wv)), ("bwd_data", (gv, wv)),
                                        ("wgrad", (av, gv))):
                    M, K, N = shapes_of(it)[layer][phase]
                    expect[f"{mx}x{my}"] = expect.get(f"{mx}x{my}", 0) + M * K * N
            assert json.loads(json.dumps(wm))[layer][str(epoch)] == expect
    assert "## MACs at each width (`fast`)" in md


def test_width_matrix_reads_the_record():
    s = summary("fast")
    m = width_matrix(s, "g")
    assert m.shape == (2, PER * EPOCHS)
    assert m[0].tolist() == widths_for("fast")["g"]["c1"]


def test_mismatched_format_count_is_reported(tmp_path):
    folder = write_run(tmp_path / "run")
    doc = json.loads((folder / "train.json").read_text())
    doc["formats"]["fast"]["format"]["fmac_rounds"]["fwd"] += 1
    (folder / "train.json").write_text(json.dumps(doc))
    res = fast_time_study(folder, tmp_path / "out")
    assert res["fast_work"]["fast"]["matches"] is False


def test_without_fp32_there_is_no_target(tmp_path):
    res = fast_time_study(write_run(tmp_path / "run", ("fast", "bf16")), tmp_path / "out")
    assert res["target"] is None
    assert all(r["tta_cycles"] is None for r in res["rows"])
    mac = {r["array"]: r for r in res["rows"] if r["kind"] == "mac"}
    assert mac["bfloat16"]["format"] == "bf16" and mac["HFP8"]["format"] is None
    assert mac["bfloat16"]["epoch_cycles"] == [expected_mac_epoch(180 ** 2)] * EPOCHS


@pytest.mark.parametrize("case, match", [
    ("no_dir", "no such run folder"),
    ("no_json", "no such file"),
    ("bad_json", "not readable JSON"),
    ("no_formats", "no 'formats' table"),
    ("no_fast", "no 'fast' run"),
    ("no_widths", "no width record"),
])
def test_errors(tmp_path, case, match):
    folder = tmp_path / "run"
    if case != "no_dir":
        folder.mkdir()
    if case == "bad_json":
        (folder / "train.json").write_text("{not json")
    elif case == "no_formats":
        (folder / "train.json").write_text(json.dumps({"config": {}}))
    elif case == "no_fast":
        write_run(folder, ("fp32", "bf16"))
    elif case == "no_widths":
        write_run(folder)
        doc = json.loads((folder / "train.json").read_text())
        del doc["formats"]["fast"]["format"]["widths"]
        (folder / "train.json").write_text(json.dumps(doc))
    with pytest.raises(FastTimeError, match=match) as e:
        fast_time_study(folder, tmp_path / "out")
    assert isinstance(e.value, ValueError) and "\n" not in str(e.value)


def test_end_to_end_with_the_engine(tmp_path):
    try:
        from flows.studies.train.loop import train
    except ImportError:  # pragma: no cover - the engine is part of the tree
        pytest.skip("the training engine is not available")
    from flows.studies.train.data import load_dataset
    from flows.studies.train.formats.base import Format
    from flows.studies.train.formats.fast import FAST

    d = load_dataset(None, 0, limit=200)
    fmts = {"fp32": train("cnn", Format, d, 2, seed=0), "fast": train("cnn", FAST, d, 2, seed=0)}
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "train.json").write_text(json.dumps({"config": {"model": "cnn"},
                                                   "formats": fmts}))
    lines = []
    res = fast_time_study(folder, tmp_path / "out", progress=lines.append)
    assert lines and res["model"] == "cnn"
    assert res["fast_work"]["fast"]["matches"] is True
    assert res["target"]["fp32_final"] == fmts["fp32"]["final_test_accuracy"]
    fast = next(r for r in res["rows"] if r["format"] == "fast" and r["kind"] == "fmac")
    assert len(fast["epoch_cycles"]) == 2 and all(c > 0 for c in fast["epoch_cycles"])
    for f in ("fast_time.json", "fast_time.md", "widths.png"):
        assert (tmp_path / "out" / f).stat().st_size > 0


def test_formats_from_another_run_replace_the_stand_ins(tmp_path):
    """The Table II formats trained in a second run of the same model and schedule: their
    arrays use their own accuracies ("measured"), the main run's formats stay its own, and a run
    of another model is refused in one line."""
    from flows.studies.fast_time import merge_runs

    main = write_run(tmp_path / "run")
    other = tmp_path / "baselines"
    other.mkdir()
    accs = {"fp32": [0.1, 0.1, 0.1], "hfp8": [0.80, 0.948, 0.95], "int12": [0.3, 0.4, 0.5],
            "msfp12": [0.9, 0.95, 0.96], "fp16": [0.95, 0.96, 0.96]}
    doc = {"config": {"model": "toy", "epochs": EPOCHS},
           "formats": {n: run_record(a) for n, a in accs.items()}}
    (other / "train.json").write_text(json.dumps(doc))
    res = fast_time_study(main, tmp_path / "out", extra_runs=[other])
    mac = {r["array"]: r for r in res["rows"] if r["kind"] == "mac"}
    for array, fmt in (("HFP8", "hfp8"), ("INT-12", "int12"), ("MSFP-12", "msfp12"),
                       ("FP16", "fp16")):
        assert (mac[array]["format"], mac[array]["format_note"]) == (fmt, "measured")
        assert res["runs"][fmt] == str(other)
    # fp32 comes from the main run (0.95 at the end), not from the second one's 0.1
    assert res["runs"]["fp32"] == str(main) and res["target"]["fp32_final"] == 0.95
    assert mac["HFP8"]["reached_epoch"] == 2 and mac["INT-12"]["reached_epoch"] is None
    doc["config"]["model"] = "other"
    (other / "train.json").write_text(json.dumps(doc))
    with pytest.raises(FastTimeError, match="not comparable with .*: model 'other' against "
                                            "'toy'"):
        merge_runs(json.loads((main / "train.json").read_text()), main, [other])


def test_iso_area_sizes_from_trainfab_areas(tmp_path):
    """``trainfab area`` reports of the fMAC (m_max = 4) and the 16-MAC units size the arrays:
    PEs = 256 * 64 * area(fMAC) * 16 / area(16 MACs); a report of another configuration is
    not used; rows without a report keep the paper's size; every row gives the paper's PEs and
    its time to accuracy at that size."""
    from flows import registry
    from flows.config import load_config
    from flows.studies.fast_time import AREA_UNITS, load_areas

    def report(folder, name, area, **over):
        unit_name, base = AREA_UNITS[name]
        unit = registry.get(unit_name)
        cfg = unit.hardware_config(unit.make_config(load_config(unit), **{**base, **over}))
        folder.mkdir(parents=True)
        (folder / "area.json").write_text(json.dumps({"unit": unit_name, "config": cfg,
                                                      "area_um2": area}))

    areas = tmp_path / "areas"
    report(areas / "fmac", "fMAC", 1000.0)
    report(areas / "hfp8", "HFP8", 7000.0)
    report(areas / "bf16", "bfloat16", 9000.0)
    report(areas / "int12-wrong", "INT-12", 1.0, acc_bits=24)       # another configuration
    found = load_areas(areas)
    assert set(found) == {"fMAC", "HFP8", "bfloat16"}
    res = fast_time_study(write_run(tmp_path / "run"), tmp_path / "out", areas=areas)
    mac = {r["array"]: r for r in res["rows"] if r["kind"] == "mac"}
    assert mac["HFP8"]["pes"] == CELLS * 1000 * 16 // 7000
    assert mac["bfloat16"]["pes"] == CELLS * 1000 * 16 // 9000
    assert mac["FP32"]["pes"] == mac["bfloat16"]["pes"] // 2
    assert mac["INT-12"]["pes"] == 210 ** 2 and mac["MSFP-12"]["pes"] == 230 ** 2
    assert mac["HFP8"]["size_source"].startswith("trainfab: 16 MACs 7,000 µm² = 7.00x")
    fast_tta = next(r for r in res["rows"] if r["format"] == "fast")["tta_cycles"]
    for array, r in mac.items():
        assert r["paper_pes"] == ISO_AREA[array][0]
        one = expected_mac_epoch(r["paper_pes"])
        hit = r["reached_epoch"]
        assert r["paper_tta_speedup_fast"] == pytest.approx(one * hit / fast_tta)
    md = (tmp_path / "out" / "fast_time.md").read_text()
    assert "Sizes from trainfab's Table IV syntheses (fMAC at m_max = 4: 1,000 µm²)" in md
    with pytest.raises(FastTimeError, match="no such folder"):
        load_areas(tmp_path / "none")

"""One test per defect found by trying every writing command as a new user and as an adversary
would: each reproduces the defect's recipe and fails on the code before its fix.

Defects 4, 5 and 7 (an interrupted ``close`` changing its folder, two ``close`` runs mixing
their files, two ``train --capture`` runs mixing captures) are also cases of the fault matrix
(``test_data_safety.py``: ``close-sigint-stage``, ``close-sigterm-install``,
``close-concurrent``, ``train-concurrent``); the tests here reproduce their own recipes.
"""

import json
import os
import re
import signal
import struct
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from flows import runs
from flows.cli import main
from flows.studies import captures
from test_data_safety import default_signals

ROOT = Path(__file__).resolve().parent.parent
TINY_TRAIN = ["--model", "mlp", "--epochs", "1", "--limit", "60", "-j", "1"]


def run(args, capsys):
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def cli(args, env=None, **kwargs):
    """The CLI in a process of its own, as the console script runs it."""
    return subprocess.run([sys.executable, "-m", "flows.cli", *map(str, args)], cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
                          capture_output=True, text=True, timeout=600, **kwargs)


# 1 ------------------------------------------------------------------------------------------


def test_1_a_failed_run_keeps_the_users_failed_folder(tmp_path, capsys):
    x = tmp_path / "x"
    (x / "results.failed").mkdir(parents=True)
    (x / "results.failed" / "thesis.tex").write_text("precious")
    code, _, err = run(["study", "fpraker-rows", tmp_path / "NOT_A_CAPTURE", "-o",
                        x / "results"], capsys)
    assert code == 2 and "not a folder" in one_line(err)
    assert (x / "results.failed" / "thesis.tex").read_text() == "precious"
    # a failing area run (a truncated liberty) keeps its logs in a fresh folder of its own
    (x / "area.failed").mkdir()
    (x / "area.failed" / "thesis.tex").write_text("precious")
    lib = tmp_path / "cut.lib"
    lib.write_text("library (junk) { cell (INVX1) { area : 1; ")
    code, _, err = run(["area", "common.round", "--liberty", lib, "-o", x / "area"], capsys)
    assert code == 2
    fresh = [p for p in x.iterdir() if p.name.startswith("area.failed-")]
    assert len(fresh) == 1 and str(fresh[0]) in one_line(err)
    assert (x / "area.failed" / "thesis.tex").read_text() == "precious"


def test_1_a_failed_run_without_files_leaves_no_failed_folder(tmp_path, capsys):
    """Defect 19 too: a failed fpraker-rows study pointed to an empty failed folder."""
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = run(["study", "fpraker-rows", empty, "-o", tmp_path / "out"], capsys)
    assert code == 2 and "files of the failed run" not in one_line(err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty"]


# 2 ------------------------------------------------------------------------------------------


def test_2_timing_never_writes_through_a_symbolic_link(tmp_path, capsys):
    d = tmp_path / "DIR"
    d.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    (d / "timing.md").symlink_to("../victim.txt")
    code, out, err = run(["timing", "common.round", "-o", d], capsys)
    assert code == 2 and "symbolic link" in one_line(err)
    assert victim.read_text() == "keep" and (d / "timing.md").is_symlink()
    assert "syntheses" not in out  # refused before any synthesis


# 3 and 12 -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A finished training run's output folder (two formats)."""
    out = tmp_path_factory.mktemp("prev") / "prev"
    assert main(["train", *TINY_TRAIN, "--formats", "fp32,bf16", "-o", str(out)]) == 0
    return out


def _state(folder: Path) -> dict:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*")
            if p.is_file()}


@pytest.mark.parametrize("bad", ["foreign-manifest", "format-is-a-file", "read-only"])
def test_3_a_capture_problem_is_found_before_training(bad, finished_run, tmp_path, capsys,
                                                      monkeypatch):
    import shutil

    prev = tmp_path / "prev"
    shutil.copytree(finished_run, prev)
    before = _state(prev)
    cap = tmp_path / "bad"
    cap.mkdir()
    if bad == "foreign-manifest":
        (cap / "fp32").mkdir()
        (cap / "fp32" / "manifest.json").write_text('{"unit": "not a capture"}')
    elif bad == "format-is-a-file":
        (cap / "fp32").write_text("a file")
    else:
        monkeypatch.setattr(runs.folders, "_writable", lambda folder: Path(folder) != cap)
    from flows.studies.train import loop

    monkeypatch.setattr(loop, "train", lambda *a, **k: pytest.fail("training started"))
    code, _, err = run(["train", *TINY_TRAIN, "--formats", "fp32", "-o", prev, "--capture",
                        cap], capsys)
    assert code == 2, err
    assert str(cap) in one_line(err)
    assert _state(prev) == before


def test_12_a_manifest_that_is_a_folder_stops_train_before_it_installs(finished_run, tmp_path,
                                                                      capsys):
    import shutil

    prev = tmp_path / "prev"
    shutil.copytree(finished_run, prev)
    (prev / runs.MANIFEST).unlink()
    (prev / runs.MANIFEST).mkdir()
    before = _state(prev)
    code, _, err = run(["train", *TINY_TRAIN, "--formats", "fp32", "-o", prev], capsys)
    assert code == 2 and "is a folder" in one_line(err)
    assert _state(prev) == before


# 4 and 5 ------------------------------------------------------------------------------------


def test_4_an_interrupted_close_leaves_its_folder_as_it_was(tmp_path):
    out = tmp_path / "close"
    args = ["close", "common.round", "--set", "in_width=8", "--clock-ns", "100", "-o", out]
    assert cli(args).returncode == 0
    before = _state(out)
    # Ctrl-C once the first depth's synthesis is in place in the run's private folder
    proc = subprocess.Popen([sys.executable, "-m", "flows.cli", *map(str, args)], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=default_signals)
    while proc.poll() is None and not list(tmp_path.glob(".close.run-*/pipeline0/area.json")):
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode in (0, 130), err
    after = _state(out)
    if proc.returncode == 130 and after != before:  # interrupted while its files moved in
        report = json.loads((out / "close.json").read_text())
        assert report["rows"] and (out / "pipeline0" / "area.json").exists()
    else:
        assert after == before or proc.returncode == 0
    # exactly one run's files, whichever it is
    for folder in [out, *[p for p in out.iterdir() if p.is_dir()]]:
        listed = runs.load_manifest(folder)
        assert len({r for _, r in listed.files.values()}) == 1


def test_5_two_close_runs_into_one_folder_do_not_mix(tmp_path):
    out = tmp_path / "close"
    base = ["close", "common.round", "--clock-ns", "100", "-o", out]
    procs = [subprocess.Popen([sys.executable, "-m", "flows.cli", *map(str, base), "--set",
                               f"in_width={w}"], cwd=ROOT, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for w in (8, 12)]
    for p in procs:
        assert p.wait(timeout=600) == 0, p.stderr.read()
    report = json.loads((out / "close.json").read_text())
    width = report["base"]["in_width"]
    for d in [out, *[p for p in out.iterdir() if p.is_dir()]]:
        area = json.loads((d / "area.json").read_text())
        assert area["config"]["in_width"] == width, d
    ids = {r for d in [out, *[p for p in out.iterdir() if p.is_dir()]]
           for _, r in runs.load_manifest(d).files.values()}
    assert len(ids) == 1


# 6, 7 and 8 ---------------------------------------------------------------------------------


def test_6_an_interrupted_capture_is_marked_incomplete(tmp_path, monkeypatch):
    from flows.studies.train import loop
    from flows.studies.train import run as train_run

    def interrupted(model, cls, data, epochs, *, capture=None, **kwargs):
        x, y = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
        capture(1, 0, "fc", "fwd", x, y)
        capture(2, 0, "fc", "fwd", x, y)
        raise KeyboardInterrupt  # Ctrl-C reaches the worker in epoch 2

    monkeypatch.setattr(loop, "train", interrupted)

    class Events:
        def put(self, event):
            pass

    opts = train_run.TrainOptions(model="mlp", formats=("fp32",), capture=str(tmp_path),
                                  limit=60)
    with pytest.raises(KeyboardInterrupt):
        train_run._train_one("fp32", opts, Events())
    man = captures.read_manifest(tmp_path / "fp32")
    assert man["complete"] is False and man["epochs"] == [1, 2]


def test_7_and_8_a_capture_folder_holds_one_runs_formats(tmp_path):
    cap = tmp_path / "cap"
    first = cli(["train", *TINY_TRAIN, "--formats", "fp32", "-o", tmp_path / "a",
                 "--capture", cap])
    assert first.returncode == 0, first.stderr
    procs = [subprocess.Popen([sys.executable, "-m", "flows.cli", "train", *TINY_TRAIN,
                               "--formats", fmt, "--seed", seed, "-o", str(tmp_path / out),
                               "--capture", str(cap)], cwd=ROOT, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for fmt, seed, out in (("bf16", "1", "b"), ("bf16,fp32", "2", "c"))]
    for p in procs:
        assert p.wait(timeout=600) == 0, p.stderr.read()
    formats = sorted(p.name for p in cap.iterdir() if p.is_dir())
    seeds = {captures.read_manifest(cap / f)["seed"] for f in formats}
    # one run's formats, from one run: never fp32 of the first run beside the second's bf16
    assert formats in (["bf16"], ["bf16", "fp32"]) and len(seeds) == 1
    assert seeds == ({1} if formats == ["bf16"] else {2})


# 9, 10 and 17 -------------------------------------------------------------------------------


def _dataset(path: Path, labels) -> Path:
    y = np.asarray(labels, np.int64)
    np.savez(path, x=np.zeros((len(y), 4), np.float32), y=y)
    return path


@pytest.mark.parametrize("label", [10**9, 2_000_000])
def test_9_labels_are_capped(label, tmp_path, capsys):
    data = _dataset(tmp_path / "d.npz", [0, 1] * 50 + [label])
    code, _, err = run(["train", "--model", "mlp", "--formats", "fp32", "--dataset", data,
                        "-o", tmp_path / "out"], capsys)
    assert code == 2 and "classes" in one_line(err) and "9,999" in err
    assert not (tmp_path / "out").exists()


def _npy_header(shape, dtype="<f4") -> bytes:
    header = repr({"descr": dtype, "fortran_order": False, "shape": shape}).encode()
    header += b" " * (-(len(header) + 11) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header


def test_10_a_huge_declared_shape_is_refused(tmp_path, capsys):
    import zipfile

    path = tmp_path / "huge.npz"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("x.npy", _npy_header((10**12, 1, 8, 8)) + b"\0" * 64)
        z.writestr("y.npy", _npy_header((2,), "<i8") + b"\0" * 16)
    code, _, err = run(["train", "--formats", "fp32", "--dataset", path,
                        "-o", tmp_path / "out"], capsys)
    assert code == 2 and "truncated" in one_line(err) and "MemoryError" not in err


def test_17_a_text_file_as_dataset(tmp_path, capsys):
    path = tmp_path / "d.npz"
    path.write_text("hello")
    code, _, err = run(["train", "--formats", "fp32", "--dataset", path, "-o",
                        tmp_path / "out"], capsys)
    assert code == 2 and "not an .npz archive" in one_line(err) and "pickle" not in err


# 11 -----------------------------------------------------------------------------------------


def test_11_study_fast_time_names_every_bad_run(tmp_path, capsys):
    capture = tmp_path / "capture"
    capture.mkdir()
    (capture / "manifest.json").write_text("{}")
    a_file = tmp_path / "file"
    a_file.write_text("x")
    no_fast = tmp_path / "no-fast"
    no_fast.mkdir()
    (no_fast / "train.json").write_text(json.dumps({"formats": {"fp32": {}}}))
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "train.json").write_text("{")
    no_widths = tmp_path / "no-widths"
    no_widths.mkdir()
    (no_widths / "train.json").write_text(json.dumps({"formats": {"fast": {"format": {}}}}))
    malformed = tmp_path / "malformed"
    malformed.mkdir()
    fmt = {k: None for k in ("layers", "iterations_per_epoch", "iterations", "widths",
                             "gemm_shapes", "shape_runs")}
    (malformed / "train.json").write_text(json.dumps(
        {"formats": {"fast": {"format": fmt, "epochs": []}}}))
    for run_dir, words in ((tmp_path / "missing", "no such run folder"),
                           (a_file, "a file"), (capture, "capture folder"),
                           (no_fast, "no 'fast' run"), (broken, "not readable JSON"),
                           (no_widths, "no width record"), (malformed, "cannot be priced")):
        code, _, err = run(["study", "fast-time", run_dir, "-o", tmp_path / "out"], capsys)
        assert code == 2 and words in one_line(err) and "internal error" not in err, err
    assert not (tmp_path / "out").exists()


# 13 -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("args, words", [
    (["study", "hbfp", "--cycles", "2000"], "study hbfp takes no --cycles"),
    (["study", "hbfp", "--loads", "0.5"], "study hbfp takes no --loads"),
    (["study", "hbfp", "--set", "policy=fair"], "study hbfp takes no --set"),
    (["study", "fpraker-rows", "--cycles", "2000"], "takes no --cycles"),
    (["study", "fpraker-rows", "--loads", "0.5"], "takes no --loads"),
    (["tensor-stats", "x.npz", "--analysis", "gecko", "--hbfp-rounding", "rne"],
     "--hbfp-rounding applies to --analysis hbfp"),
    (["tensor-stats", "x.npz", "--analysis", "gecko", "--hbfp-m", "9"],
     "--hbfp-m applies to --analysis hbfp"),
    (["tensor-stats", "x.npz", "--analysis", "gecko", "--hbfp-m", "1000000"],
     "--hbfp-m: '1000000' is not an integer from 2 to 16"),
])
def test_13_options_that_do_not_apply_are_refused(args, words, capsys):
    code, _, err = run(args, capsys)
    assert code == 2 and words in one_line(err)


def test_13_hbfp_m_has_a_range(tmp_path, capsys):
    path = tmp_path / "t.npz"
    np.savez(path, w=np.ones((4, 8), np.float32))
    code, _, err = run(["tensor-stats", path, "--analysis", "hbfp", "--hbfp-m", "1000000",
                        "-o", tmp_path / "out"], capsys)
    assert code == 2 and "from 2 to 16" in one_line(err)


# 14 -----------------------------------------------------------------------------------------


def test_14_no_infinity_is_printed_as_a_result(tmp_path, capsys):
    pair = tmp_path / "pair.npz"
    np.savez(pair, **{"l.act": np.zeros((8, 16), np.float32),
                      "l.weight": np.ones((8, 16), np.float32)})
    code, _, err = run(["speedup", pair, "--area-ratio", "1e308", "-o", tmp_path / "a"], capsys)
    assert code == 2 and "--area-ratio" in one_line(err)
    code, out, err = run(["speedup", pair, "-o", tmp_path / "b"], capsys)
    assert code == 0, err
    assert "infx" not in out and not re.search(r"\binf\b", out) and "unbounded" in out
    doc = (tmp_path / "b" / "speedup.json").read_text()
    assert "Infinity" not in doc and json.loads(doc)


def test_14_paths_refuses_an_unusable_clock(tmp_path, capsys):
    out = tmp_path / "area"
    assert run(["area", "common.round", "--set", "in_width=8", "-o", out], capsys)[0] == 0
    report = json.loads((out / "area.json").read_text())
    report["clock_ns"] = -1
    # the user's edit makes the report the user's: paths only reads it
    (out / "area.json").write_text(json.dumps(report))
    code, out_text, err = run(["paths", out, "--between", "*", "*"], capsys)
    assert code == 2 and "clock_ns -1" in one_line(err) and "no path" not in out_text


# 15 and 16 ----------------------------------------------------------------------------------


def _capture(folder: Path) -> Path:
    with captures.CaptureWriter(folder, {"model": "m", "format": "fp32", "seed": 0,
                                         "batch_size": 2, "dataset": "d"}) as w:
        w.add(1, "fc", "fwd", np.ones((2, 8), np.float32), np.ones((8, 4), np.float32))
        w.add(1, "fc", "bwd_data", np.ones((2, 4), np.float32), np.ones((4, 8), np.float32))
    return folder


def test_15_errors_name_the_capture_not_a_private_file(tmp_path, capsys):
    cap = _capture(tmp_path / "cap")
    code, _, err = run(["tensor-stats", cap, "--man-width", "8", "-o", tmp_path / "out"],
                       capsys)
    line = one_line(err)
    assert code == 2 and str(cap / "e001.npz") in line
    assert "trainfab-capture-stats-" not in line and "/tmp/tmp" not in line


def test_16_a_capture_version_that_is_a_string(tmp_path, capsys):
    cap = _capture(tmp_path / "cap")
    man = json.loads((cap / "manifest.json").read_text())
    (cap / "manifest.json").write_text(json.dumps({**man, "version": "1"}))
    code, _, err = run(["tensor-stats", cap, "-o", tmp_path / "out"], capsys)
    line = one_line(err)
    assert code == 2 and 'version "1" is not a number' in line


# 18 -----------------------------------------------------------------------------------------


def test_18_path_messages(tmp_path, capsys):
    f = tmp_path / "FILE"
    f.write_text("mine")
    code, _, err = run(["timing", "common.round", "-o", f], capsys)
    assert code == 2 and "it is a file, not a folder" in one_line(err)
    code, _, err = run(["timing", "common.round", "--markdown", f / "x.md"], capsys)
    assert code == 2 and f"{f} is a file, not a folder" in one_line(err)
    assert f.read_text() == "mine"


def test_18_paths_reads_a_close_folder(tmp_path, capsys):
    out = tmp_path / "close"
    assert run(["close", "common.round", "--set", "in_width=8", "--clock-ns", "100", "-o",
                out], capsys)[0] == 0
    code, text, err = run(["paths", out, "--between", "*", "*"], capsys)
    assert code == 0, err
    assert "no mapped netlist" not in err and "| `*` | `*` |" in text


# 19 -----------------------------------------------------------------------------------------


def test_19_no_matplotlib_warning_when_every_format_diverges(tmp_path):
    from flows.studies.train.run import plots

    results = {"fp32": {"epochs": [{"epoch": 1, "loss": None, "test_accuracy": None}]}}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plots(tmp_path, results)
    assert (tmp_path / "accuracy.png").exists()


# the layout of make training: outputs of other commands inside a run's folder ----------------


def test_an_output_nested_in_another_survives_its_rerun(tmp_path, capsys):
    """``make training`` keeps the capture and the studies inside the training run's folder:
    a second run into the outer folder replaces its own files only."""
    out = tmp_path / "run"
    study = ["study", "dispatch", "--cycles", "1000", "--loads", "0.5", "-o", out]
    assert run(study, capsys)[0] == 0
    assert run(["generate", "common.round", "-o", out / "verilog"], capsys)[0] == 0
    inner = _state(out / "verilog")
    assert run(study, capsys)[0] == 0
    assert _state(out / "verilog") == inner

"""``trainfab train`` end to end: every format on a small configuration, reproducible output,
bad input refused before anything is written, Ctrl-C keeping finished epochs, and the capture
read back by ``trainfab speedup``."""

import json
import os
import stat

import numpy as np
import pytest

from flows.cli import main
from flows.studies.train import run as train_run
from flows.studies.train.formats import FORMATS

#: the test suite's configuration: every format, 2 epochs, 100 samples
SMALL = ["--epochs", "2", "--limit", "100", "-j", "2"]


def _train(args, capsys=None):
    code = main(["train", *args])
    return code


@pytest.fixture(scope="module")
def all_formats(tmp_path_factory):
    """One run of every format on ``cnn`` (2 epochs, 100 samples), with a capture."""
    out = tmp_path_factory.mktemp("train")
    cap = tmp_path_factory.mktemp("capture")
    code = main(["train", "--model", "cnn", "--formats", "all", *SMALL, "--seed", "3",
                 "--capture", str(cap), "-o", str(out)])
    return code, out, cap


def test_every_format_trains_and_reports(all_formats):
    code, out, _ = all_formats
    assert code == 0
    doc = json.loads((out / "train.json").read_text())
    assert list(doc["formats"]) == list(FORMATS)
    assert doc["config"]["epochs"] == 2 and doc["config"]["train_samples"] == 80
    for name, r in doc["formats"].items():
        assert r["diverged_at"] is None, name
        assert [e["epoch"] for e in r["epochs"]] == [1, 2], name
        for e in r["epochs"]:
            assert 0.0 <= e["test_accuracy"] <= 1.0 and e["loss"] > 0
        assert r["final_test_accuracy"] == r["epochs"][-1]["test_accuracy"]
    md = (out / "train.md").read_text()
    for name in FORMATS:
        assert f"| {name} |" in md
    rows = (out / "train.csv").read_text().splitlines()
    assert rows[0] == "format,epoch,loss,train_accuracy,test_accuracy"
    assert len(rows) == 1 + 2 * len(FORMATS)
    for png in ("accuracy.png", "loss.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # no times or host names in the JSON
    text = (out / "train.json").read_text()
    assert os.uname().nodename not in text and "wall" not in text


def test_the_same_seed_gives_the_same_json_byte_for_byte(tmp_path):
    runs = []
    for i in range(2):
        out = tmp_path / f"r{i}"
        assert main(["train", "--model", "mlp", "--formats", "fp32,fast,schrodinger,bitwave",
                     *SMALL, "--seed", "5", "-o", str(out)]) == 0
        runs.append((out / "train.json").read_bytes())
    assert runs[0] == runs[1]
    out = tmp_path / "other"
    assert main(["train", "--model", "mlp", "--formats", "fp32", *SMALL, "--seed", "6",
                 "-o", str(out)]) == 0
    a = json.loads(runs[0])["formats"]["fp32"]["epochs"]
    b = json.loads((out / "train.json").read_text())["formats"]["fp32"]["epochs"]
    assert a != b


def test_capture_feeds_the_speedup_study_per_phase(all_formats, tmp_path, capsys):
    code, _, cap = all_formats
    assert code == 0
    manifest = json.loads((cap / "fpraker" / "manifest.json").read_text())
    phases = {g["phase"] for g in manifest["gemms"]}
    epochs = {g["epoch"] for g in manifest["gemms"]}
    assert phases == {"fwd", "bwd_data", "wgrad"} and epochs == {1, 2}
    assert {g["layer"] for g in manifest["gemms"]} == {"conv1", "conv2", "fc"}
    out = tmp_path / "speedup"
    capsys.readouterr()
    assert main(["speedup", str(cap / "fpraker"), "-o", str(out)]) == 0
    res = json.loads((out / "speedup.json").read_text())
    assert set(res["phases"]) == {"fwd", "bwd_data", "wgrad"}
    md = (out / "speedup.md").read_text()
    for phase in ("fwd", "bwd_data", "wgrad"):
        assert phase in md
    # the operand floor and the out-of-bounds share, per GEMM and per phase
    for r in res["records"]:
        assert 0 < r["floor_cycles"] and r["useful"] <= r["useful_no_ob"]
    best = res["captures"][0]["phases"]["wgrad"]["best"]
    assert 0.0 <= best["ob_term_share"] < 1.0 and best["floor_cycles"] > 0
    assert "### Operand floor, out-of-bounds skipping and K" in md and "| K | GEMMs |" in md
    # sampled rows: every sum weighs each GEMM once, by its whole size, so stalls stay within
    # the lane-cycles of the cycles they belong to (8 x 8 tiles of 8 lanes)
    sampled = tmp_path / "sampled"
    assert main(["speedup", str(cap / "fpraker"), "--max-rows", "8", "-o", str(sampled)]) == 0
    res = json.loads((sampled / "speedup.json").read_text())
    assert any(r["weight"] > 1 for r in res["records"])
    for p, v in res["captures"][0]["phases"].items():
        b = v["best"]
        assert b["sync_cycles"] <= b["fpraker_cycles"] * 512, p
        assert b["sync_cycles_no_ob"] <= b["cycles_no_ob"] * 512, p
        assert b["macs"] == sum(r["M"] * r["N"] * r["K"] * r["weight"] for r in res["records"]
                                if r["phase"] == p and r["chosen"])


@pytest.mark.parametrize("args, message", [
    (["--model", "vgg"], "unknown model 'vgg'"),
    (["--model", "lenet"], "lenet needs images of at least 12x12 pixels, got 8x8"),  # digits
    (["--formats", "fp32,fp7"], "unknown format 'fp7'"),
    (["--formats", "fp32,fp32"], "named twice"),
    (["--formats", "hbfp8-floor"], "known formats: fp32, bf16, int8, int12, hfp8, fp16, "
                                   "fpraker, hbfp8, hbfp12, fast, fast-low, mid-bfp, fast-high, "
                                   "msfp12, schrodinger, bitwave, hbfp8-rne, hbfp8-rne-wgrad, "
                                   "fast-low-g4, msfp12-sr, hfp8-e4m2"),
    (["--epochs", "0"], "--epochs: '0' is not an integer from 1 to 1,000"),
    (["--batch-size", "0"], "--batch-size: '0' is not an integer from 1 to 4,096"),
    (["--seed", "-1"], "--seed: '-1' is not an integer from 0 to 4,294,967,295"),
    (["-j", "0"], "-j/--jobs: '0' is not an integer from 1 to 64"),
    (["--limit", "5"], "--limit: '5' is not an integer from 10 to 10,000,000"),
    (["--stop-after", "fpraker"], "--stop-after takes FORMAT=EPOCH items, not 'fpraker'"),
    (["--stop-after", "fp7=1"], "--stop-after: unknown format 'fp7'"),
    (["--stop-after", "bf16=1,bf16=2"], "--stop-after names format 'bf16' twice"),
    (["--formats", "fp32", "--stop-after", "bf16=1"], "'bf16', which is not trained"),
    (["--epochs", "3", "--stop-after", "bf16=4"],
     "--stop-after bf16 must be an integer in 1..3, not 4"),
])
def test_bad_options_are_one_line_and_write_nothing(args, message, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["train", *args, "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and message in err
    assert not out.exists()


def _npz(path, **arrays):
    np.savez(path, **arrays)
    return str(path)


def test_a_format_stopped_early_is_compared_at_its_epoch(tmp_path):
    out = tmp_path / "out"
    assert main(["train", "--model", "mlp", "--formats", "fp32,bf16,hbfp8", "--epochs", "3",
                 "--limit", "60", "-j", "2", "--stop-after", "hbfp8=1", "-o", str(out)]) == 0
    doc = json.loads((out / "train.json").read_text())
    assert doc["config"]["stop_after"] == {"hbfp8": 1} and doc["config"]["epochs"] == 3
    r = doc["formats"]["hbfp8"]
    assert r["stopped_after"] == 1 and [e["epoch"] for e in r["epochs"]] == [1]
    assert len(doc["formats"]["bf16"]["epochs"]) == 3
    acc = {n: doc["formats"][n]["epochs"][0]["test_accuracy"] for n in ("fp32", "bf16", "hbfp8")}
    md = (out / "train.md").read_text()
    assert "(epoch 1 of 3: --stop-after)" in md
    row = next(line for line in md.splitlines() if line.startswith("| hbfp8 | 1 |"))
    assert row.split(" | ")[2] == f"{100 * acc['hbfp8']:.2f} %"
    assert f"{100 * acc['bf16']:.2f} % ({100 * (acc['hbfp8'] - acc['bf16']):+.2f} points)" in row


def test_progress_lines_off_a_terminal_give_the_time_left():
    import io

    now = [100.0]
    stream = io.StringIO()
    p = train_run._Progress({"bf16": 4, "fpraker": 1}, True, stream=stream,
                            clock=lambda: now[0], label="lenet")
    assert p.lines_on and not p.bars
    p.start("bf16")
    now[0] += 30.0
    p.batch("bf16", 1, 9, 20, 2.0)  # under a minute since the last line: quiet
    now[0] += 30.0
    p.batch("bf16", 1, 9, 20, 1.5)  # half an epoch of 4 in 60 s: 7 min left
    now[0] += 60.0
    p.epoch("bf16", {"epoch": 1, "loss": 1.25, "test_accuracy": 0.5})
    lines = stream.getvalue().splitlines()
    assert lines == ["lenet bf16: started, 4 epochs (0 s)",
                     "lenet bf16: epoch 0.50 of 4, loss 1.500 (60 s, about 7 min left)",
                     "lenet bf16: epoch 1 of 4 done, loss 1.250, test 50.0 % (2 min, about "
                     "6 min left)"]


@pytest.mark.parametrize("case, message", [
    ("missing", "no such file"),
    ("no_y", "'y'"),
    ("lengths", "but y has 30 labels"),
    ("nan", "NaN"),
    ("labels", "label"),
])
def test_bad_datasets_are_one_line_and_write_nothing(case, message, tmp_path, capsys):
    rng = np.random.default_rng(0)
    x = rng.random((40, 6)).astype(np.float32)
    y = rng.integers(0, 3, 40)
    f = tmp_path / "d.npz"
    if case == "missing":
        path = str(tmp_path / "absent.npz")
    elif case == "no_y":
        path = _npz(f, x=x)
    elif case == "lengths":
        path = _npz(f, x=x, y=y[:30])
    elif case == "nan":
        x[3, 2] = np.nan
        path = _npz(f, x=x, y=y)
    else:
        y[5] = -1
        path = _npz(f, x=x, y=y)
    out = tmp_path / "out"
    assert main(["train", "--model", "mlp", "--formats", "fp32", "--dataset", path,
                 "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and message.lower() in err.lower(), err
    assert not out.exists()


def test_a_user_dataset_trains(tmp_path):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(120, 5)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64)
    path = _npz(tmp_path / "d.npz", x=x, y=y)
    out = tmp_path / "out"
    assert main(["train", "--model", "mlp", "--formats", "fp32", "--epochs", "3",
                 "--dataset", path, "-o", str(out)]) == 0
    doc = json.loads((out / "train.json").read_text())
    assert doc["config"]["dataset"] == "d"
    assert doc["formats"]["fp32"]["final_test_accuracy"] > 0.7


def test_conv_models_refuse_flat_data(tmp_path, capsys):
    x = np.zeros((40, 5), np.float32)
    y = np.arange(40) % 2
    path = _npz(tmp_path / "d.npz", x=x, y=y)
    assert main(["train", "--model", "cnn", "--dataset", path, "-o", str(tmp_path / "o")]) == 2
    assert "image data" in capsys.readouterr().err


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_an_unwritable_output_folder_is_refused_first(tmp_path, capsys):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        assert main(["train", "--formats", "fp32", "-o", str(ro / "out")]) == 2
        assert "not writable" in capsys.readouterr().err
    finally:
        ro.chmod(stat.S_IRWXU)


def test_an_output_path_that_is_a_file_is_refused_first(tmp_path, capsys):
    f = tmp_path / "file"
    f.write_text("mine")
    assert main(["train", "--formats", "fp32", "-o", str(f)]) == 2
    assert "is a file" in capsys.readouterr().err
    assert f.read_text() == "mine"


def test_ctrl_c_keeps_the_finished_epochs(tmp_path, monkeypatch, capsys):
    """The parent is interrupted right after it has recorded fp32's second epoch: the output
    holds exactly the epochs it had received, and says the run was interrupted."""
    real = train_run._Progress.epoch

    def interrupt_after_two(self, name, record):
        real(self, name, record)
        if name == "fp32" and record["epoch"] == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(train_run._Progress, "epoch", interrupt_after_two)
    out = tmp_path / "out"
    code = main(["train", "--model", "mlp", "--formats", "fp32", "--epochs", "50",
                 "--limit", "200", "-j", "1", "-o", str(out)])
    assert code == 130
    doc = json.loads((out / "train.json").read_text())
    assert doc["interrupted"] is True
    assert [e["epoch"] for e in doc["formats"]["fp32"]["epochs"]] == [1, 2]
    assert "Interrupted" in (out / "train.md").read_text()


def test_a_diverging_format_is_reported_and_the_others_go_on(tmp_path, monkeypatch):
    from flows.studies.train.formats.base import Format

    class Exploding(Format):
        name = "exploding"

        def matmul(self, x, y, phase, layer):
            out = super().matmul(x, y, phase, layer)
            return out * np.float32(np.inf) if self.epoch >= 2 else out

    monkeypatch.setitem(FORMATS, "exploding", Exploding)
    out = tmp_path / "out"
    assert main(["train", "--model", "mlp", "--formats", "fp32,exploding", "--epochs", "3",
                 "--limit", "200", "-o", str(out)]) == 0
    doc = json.loads((out / "train.json").read_text())
    assert doc["formats"]["exploding"]["diverged_at"] == 2
    assert [e["epoch"] for e in doc["formats"]["exploding"]["epochs"]] == [1]
    assert len(doc["formats"]["fp32"]["epochs"]) == 3
    assert "diverged at epoch 2" in (out / "train.md").read_text()

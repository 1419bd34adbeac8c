"""``docs/training.md``'s generator (:mod:`flows.studies.train.report`): the Fashion-MNIST and
digits parts, a part without runs kept from the page as it stands, the published figures beside
fp32, a format stopped early compared at its epoch, and a page it did not write left alone."""

import json

import pytest

from flows.studies.train import report


def _run(folder, model, accs: dict, stopped=None, epochs=3, train=60000, test=10000):
    """A ``train.json`` of ``model`` with the final accuracies ``accs`` (fp32 gets one record
    per epoch, its accuracy rising by a point an epoch up to the final one)."""
    formats = {}
    for name, acc in accs.items():
        n = stopped[1] if stopped and stopped[0] == name else epochs
        recs = [{"epoch": e, "loss": 1.0, "train_accuracy": 0.5,
                 "test_accuracy": acc - 0.01 * (n - e), "format": {}} for e in range(1, n + 1)]
        formats[name] = {"final_test_accuracy": acc, "best_epoch": n, "diverged_at": None,
                         "stopped_after": n if n < epochs else None, "epochs": recs,
                         "format": {}}
    cfg = {"model": model, "formats": list(accs), "epochs": epochs, "batch_size": 32, "seed": 0,
           "dataset": "fashion-mnist", "train_samples": train, "test_samples": test,
           "limit": None, "stop_after": {stopped[0]: stopped[1]} if stopped else {},
           "hyperparameters": {"lr": 0.05, "momentum": 0.9, "weight_decay": 5e-4,
                               "schedule": "cosine"}}
    d = folder / model
    d.mkdir(parents=True)
    (d / "train.json").write_text(json.dumps({"config": cfg, "formats": formats}))
    (d / "train.md").write_text(f"# Training in every format: `{model}`\n\n![a](accuracy.png)\n"
                                "\n## fast\n\nwidths\n")


def test_fashion_part_with_the_published_figures_and_a_stopped_format(tmp_path):
    _run(tmp_path, "lenet", {"fp32": 0.90, "bf16": 0.895, "fpraker": 0.87},
         stopped=("fpraker", 1))
    text = report.build(tmp_path)
    assert text.splitlines()[2] == report.MARKER
    assert "<!-- part: fashion-mnist -->" in text and "<!-- part: digits -->" not in text
    # fpraker against fp32 at epoch 1 (0.88), not at the end (0.90)
    assert "| fpraker | 87.00 % (-1.00, epoch 1) |" in text
    assert "| bf16 | 89.50 % (-0.50) |" in text
    published = [p for p in report.PUBLISHED if p[0] == "lenet"]
    for _, net, _, acc, _ in published:
        assert f"| `lenet` | 90.00 % | {net} |" in text and f"| {100 * acc:.1f} % |" in text
    assert "`fpraker` stops after epoch 1 of the same schedule" in text
    assert "#### Accuracy, footprints and widths" in text and "###### fast" in text
    assert "![" not in text


def test_a_part_without_runs_is_kept_from_the_page(tmp_path):
    _run(tmp_path / "digits", "mlp", {"fp32": 0.98, "bf16": 0.97}, epochs=10, train=1437,
         test=360)
    first = report.build(tmp_path)
    digits = report.kept_part(first, "digits")
    assert digits and digits[0] == "<!-- part: digits -->" and "| bf16 | 97.00 % (-1.00) |" in digits
    assert "One test image is 0.28 points." in "\n".join(digits)
    # the Fashion-MNIST runs come later, in another build folder: the digits part stays
    other = tmp_path / "later"
    _run(other, "lenet", {"fp32": 0.90})
    second = report.build(other, old=first)
    assert report.kept_part(second, "digits") == digits
    assert "<!-- part: fashion-mnist -->" in second
    assert second.index("part: fashion-mnist") < second.index("part: digits")


def test_nothing_to_report_and_a_foreign_page_are_errors(tmp_path, capsys):
    with pytest.raises(report.FlowError, match="no train.json of lenet, resnet"):
        report.build(tmp_path)
    _run(tmp_path, "lenet", {"fp32": 0.9})
    page = tmp_path / "page.md"
    page.write_text("# my notes\n\nkeep me\n")
    assert report.main([str(tmp_path), str(page)]) == 2
    assert "is not a page this generator wrote" in capsys.readouterr().err
    assert page.read_text() == "# my notes\n\nkeep me\n"
    fresh = tmp_path / "fresh.md"
    assert report.main([str(tmp_path), str(fresh)]) == 0
    assert report.MARKER in fresh.read_text()
    assert report.main([str(tmp_path), str(fresh)]) == 0  # its own page: replaced


def test_table_ii_part_combines_the_two_lenet_runs(tmp_path):
    """``lenet-baselines`` beside ``lenet``: every Table II column from whichever run trained it,
    the change against fp32, the paper's ResNet-18 figure and range, the fp32 check; the part
    sits between the Fashion-MNIST and digits parts."""
    _run(tmp_path, "lenet", {"fp32": 0.90, "bf16": 0.895, "fast": 0.88, "fast-low": 0.85,
                             "fast-high": 0.899})
    _run(tmp_path, "lenet-baselines", {"fp32": 0.90, "int8": 0.87, "int12": 0.898,
                                       "hfp8": 0.893, "fp16": 0.90, "mid-bfp": 0.89,
                                       "msfp12": 0.894})
    text = report.build(tmp_path)
    part = "\n".join(report.kept_part(text, "table-ii"))
    assert "| `lenet`, 3 epochs | 90.00 % | 89.50 % | 90.00 % | 87.00 % | 89.80 % | 89.40 % | " \
           "85.00 % | 89.00 % | 89.90 % | 89.30 % | 88.00 % |" in part
    assert "| `lenet` vs FP32 (points) | +0.00 | -0.50 | +0.00 | -3.00 |" in part
    # the paper's INT8 column: ResNet-18 65.53, and its four CNNs lose 5.24 to 2.30 points
    assert "| paper: ResNet-18 | 68.60 | 68.55 | 68.57 | 65.53 |" in part
    assert "-5.24 to -2.30" in part
    assert "fp32 trains in both runs: its records are identical" in part
    assert text.index("part: fashion-mnist") < text.index("part: table-ii")
    # a column no run trained says so
    (tmp_path / "lenet" / "train.json").unlink()
    alone = "\n".join(report.kept_part(report.build(tmp_path), "table-ii"))
    assert "| not trained |" in alone or "not trained" in alone


def test_sweeps_part_tables(tmp_path):
    """The HBFP grid (rows m, columns T, wide / narrow storage and the gain) and the FAST
    alpha x beta grid (accuracy, 4-bit share from the width record, fMAC work against
    HighBFP from the rounds)."""
    _run(tmp_path / "sweeps", "hbfp", {"fp32": 0.90, "hbfp4-t16": 0.80, "hbfp4-t16-w4": 0.75,
                                       "hbfp8-t16": 0.88, "hbfp8-t64-w8": 0.86}, train=9600,
         test=2400)
    _run(tmp_path / "sweeps", "fast", {"fp32": 0.90, "fast-a0.6-b0.3": 0.89,
                                       "fast-a0.4-b0.3": 0.88}, train=9600, test=2400)
    doc = json.loads((tmp_path / "sweeps" / "fast" / "train.json").read_text())
    doc["formats"]["fast-a0.6-b0.3"]["format"] = {
        "widths": {"w": {"l": "2244"}, "a": {"l": "4444"}, "g": {"l": "22-2"}},
        "fmac_rounds": {"fwd": 30, "bwd_data": 10, "wgrad": 0},
        "group_pairs": {"fwd": 10, "bwd_data": 10, "wgrad": 0}}
    (tmp_path / "sweeps" / "fast" / "train.json").write_text(json.dumps(doc))
    part = "\n".join(report.kept_part(report.build(tmp_path), "sweeps"))
    assert "| mantissa bits | T = 16 | T = 64 |" in part
    assert "| 4 | 80.00 % / 75.00 % (+5.00) | — / — |" in part
    assert "| 8 | 88.00 % / — | — / 86.00 % |" in part
    # 6 of 11 recorded choices are 4-bit; 40 rounds over 4 x 20 pairs = 0.50x
    assert "89.00 % (-1.00); 55 % 4-bit; 0.50x" in part
    assert "| 0.4 | 88.00 % (-2.00); — 4-bit; — |" in part
    assert "alpha = 0.6, beta = 0.3" in part


def test_sweeps_part_bfp_table(tmp_path):
    _run(tmp_path / "sweeps", "bfp", {"fp32": 0.90, "bfp-m2-g8": 0.70, "bfp-m4-g16": 0.89,
                                      "bfp-m4-g32": 0.88}, train=9600, test=2400)
    part = "\n".join(report.kept_part(report.build(tmp_path), "sweeps"))
    assert "| m | g = 8 | g = 16 | g = 32 |" in part
    assert "| 2 | 70.00 % (-20.00) | — | — |" in part
    assert "| 4 | — | 89.00 % (-1.00) | 88.00 % (-2.00) |" in part
    assert "Fig. 20" in part

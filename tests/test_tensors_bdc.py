"""``trainfab tensor-stats --analysis bdc``: FPRaker's base-delta compression footprint of tensor
files and training captures (spec docs/specs/fpraker.md §7)."""

import json

import numpy as np
import pytest

from flows import FlowError
from flows.cli import main
from flows.families.fpraker import TENSOR_ANALYSES
from flows.studies import bdc, captures
from flows.studies.tensors import write_safetensors
from golden.common import float_to_bf16, fp32_to_bf16_rne
from golden.fpraker.bdc import BDCConfig, footprint
from test_captures import _write

BDC = next(a for a in TENSOR_ANALYSES if a.name == "bdc")


@pytest.fixture
def data():
    r = np.random.default_rng(9)
    return {"w": (r.standard_normal((33, 7)) * 0.05).astype(np.float32),   # 231: partial group
            "a": np.maximum(r.standard_normal(1000), 0).astype(np.float32)}


def test_cli_on_an_fp32_npz_rounds_to_bf16_and_counts_the_golden_bits(tmp_path, data, capsys):
    np.savez(tmp_path / "m.npz", **data)
    code = main(["tensor-stats", str(tmp_path / "m.npz"), "--analysis", "bdc",
                 "-o", str(tmp_path / "out")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "# FPRaker base-delta compression of" in out and "| w | 231 |" in out
    stats = json.loads((tmp_path / "out" / "m.json").read_text())
    assert stats["group"] == 32
    for row in stats["tensors"]:
        fp = footprint(fp32_to_bf16_rne(data[row["name"]].reshape(-1).view(np.uint32)))
        assert row["bdc_bits"] == fp.bits and row["groups"] == fp.groups
        assert row["header_groups"] == fp.header_hist.tolist()
        assert row["bits_per_value"] == fp.bits / fp.count and row["ratio"] == fp.ratio
        assert row["escape_share"] == fp.escape_share
    assert stats["total"]["bdc_bits"] == sum(r["bdc_bits"] for r in stats["tensors"])
    # ReLU zeros force the escape in most groups of "a"; the weights never escape
    rows = {r["name"]: r for r in stats["tensors"]}
    assert rows["a"]["escape_share"] > 0.9 and rows["w"]["escape_share"] == 0
    assert rows["w"]["bits_per_value"] < 13


def test_bf16_safetensors_are_measured_as_they_are_at_any_group(tmp_path, data, capsys):
    bits = float_to_bf16(data["w"])
    write_safetensors(tmp_path / "x.safetensors", {"w": bits}, bf16=("w",))
    for group in (8, 64):
        assert main(["tensor-stats", str(tmp_path / "x.safetensors"), "--analysis", "bdc",
                     "--bdc-group", str(group), "-o", str(tmp_path / f"o{group}")]) == 0
        row = json.loads((tmp_path / f"o{group}" / "x.json").read_text())["tensors"][0]
        assert row["format"] == "bf16"
        assert row["bdc_bits"] == footprint(bits.reshape(-1), BDCConfig(group=group)).bits
    capsys.readouterr()


def test_chunks_change_nothing(tmp_path, monkeypatch):
    x = (np.random.default_rng(2).standard_normal(5000) * 3).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    whole = bdc.bdc_stats(tmp_path / "x.npy", group=7)
    monkeypatch.setattr(bdc, "CHUNK_VALUES", 100)
    seen = []
    chunked = bdc.bdc_stats(tmp_path / "x.npy", group=7, progress=lambda *a: seen.append(a))
    assert chunked["tensors"] == whole["tensors"] and len(seen) == -(-5000 // 98)
    assert whole["tensors"][0]["bdc_bits"] == footprint(fp32_to_bf16_rne(x.view(np.uint32)),
                                                        BDCConfig(group=7)).bits


@pytest.mark.parametrize("value", ["1", "65", "x"])
def test_a_bad_group_is_a_one_line_usage_error(tmp_path, data, capsys, value):
    np.save(tmp_path / "a.npy", data["a"])
    code = main(["tensor-stats", str(tmp_path / "a.npy"), "--analysis", "bdc",
                 "--bdc-group", value])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "--bdc-group" in err[0] and "2 to 64" in err[0], err


def test_empty_tensors_have_no_values_to_measure(tmp_path, capsys):
    np.savez(tmp_path / "e.npz", a=np.zeros(0, np.float32), b=np.ones(4, np.float32))
    stats = bdc.bdc_stats(tmp_path / "e.npz")
    assert stats["tensors"][0]["ratio"] is None and stats["tensors"][1]["groups"] == 1
    assert "| a | 0 | no values (an empty tensor) |" in bdc.bdc_markdown(stats)
    np.save(tmp_path / "z.npy", np.zeros((2, 0), np.float32))
    with pytest.raises(FlowError, match="no values to measure"):
        bdc.bdc_stats(tmp_path / "z.npy")
    code = main(["tensor-stats", str(tmp_path / "z.npy"), "--analysis", "bdc",
                 "-o", str(tmp_path / "out")])
    assert code == 2 and "no values to measure" in capsys.readouterr().err


def test_the_default_analysis_is_still_gecko(tmp_path, data, capsys):
    np.save(tmp_path / "a.npy", data["a"])
    assert main(["tensor-stats", str(tmp_path / "a.npy"), "-o", str(tmp_path)]) == 0
    assert "Gecko footprint" in capsys.readouterr().out


def test_capture_stats_per_kind(tmp_path, capsys):
    _write(tmp_path / "cap", epochs=(1, 2), meta={"model": "tiny", "format": "bf16", "seed": 1,
                                                  "batch_size": 6, "dataset": "synthetic"})
    stats = captures.capture_stats(tmp_path / "cap", BDC, {"group": 32})
    epoch = stats["captures"][0]["epochs"][0]
    assert set(epoch["kinds"]) == {"weight", "activation", "gradient"}
    for kind, result in epoch["kinds"].items():
        t = result["total"]
        assert t["bdc_bits"] == sum(r["bdc_bits"] for r in result["tensors"])
        assert 8 < t["bits_per_value"] < 17
    md = captures.capture_stats_markdown(stats)
    assert "weights BDC bits/value" in md and "gradients escape groups" in md
    assert main(["tensor-stats", str(tmp_path / "cap"), "--analysis", "bdc",
                 "-o", str(tmp_path / "out")]) == 0
    assert "activations BDC / bf16" in capsys.readouterr().out
    assert json.loads((tmp_path / "out" / "cap.json").read_text())["analysis"] == "bdc"

"""Tensor files (.npy/.npz/.safetensors) and the Gecko footprint statistics over them."""

import json

import numpy as np
import pytest

from flows import FlowError, tensors
from flows.cli import main
from flows.tensors import gecko_stats, read_tensors, write_safetensors
from golden.common import float_to_bf16
from golden.gecko import GeckoConfig, compress


@pytest.fixture
def data():
    r = np.random.default_rng(5)
    return {
        "w": (r.standard_normal((33, 7)) * 0.05).astype(np.float32),   # 231 values: not a multiple of 8
        "a": np.maximum(r.standard_normal(1000), 0).astype(np.float32),
        "h": r.standard_normal(50).astype(np.float16),
    }


def _bits(tensor):
    return np.concatenate(list(tensor.chunks()))


def test_npy_npz_safetensors_give_the_same_bits(tmp_path, data):
    np.save(tmp_path / "w.npy", data["w"])
    np.savez(tmp_path / "d.npz", w=data["w"], a=data["a"])
    write_safetensors(tmp_path / "m.safetensors", {"w": data["w"], "a": data["a"]})
    expect = data["w"].reshape(-1).view(np.uint32)
    (t,) = read_tensors(tmp_path / "w.npy")
    assert t.fmt == "fp32" and t.shape == (33, 7) and np.array_equal(_bits(t), expect)
    npz = {t.name: t for t in read_tensors(tmp_path / "d.npz")}
    st = {t.name: t for t in read_tensors(tmp_path / "m.safetensors")}
    for name in ("w", "a"):
        want = data[name].reshape(-1).view(np.uint32)
        assert np.array_equal(_bits(npz[name]), want)
        assert np.array_equal(_bits(st[name]), want)


def test_bf16_and_float16_tensors(tmp_path, data):
    bf = float_to_bf16(data["w"])
    write_safetensors(tmp_path / "m.safetensors", {"bf": bf, "h": data["h"]}, bf16=("bf",))
    st = {t.name: t for t in read_tensors(tmp_path / "m.safetensors")}
    assert st["bf"].fmt == "bf16" and np.array_equal(_bits(st["bf"]), bf.reshape(-1))
    assert st["h"].fmt == "fp32"
    assert np.array_equal(_bits(st["h"]), data["h"].astype(np.float32).view(np.uint32))


@pytest.mark.parametrize("man_width", [None, 0, 3, 7])
def test_stats_equal_the_golden_stream_across_chunks(tmp_path, data, monkeypatch, man_width):
    """Chunked accounting equals compressing the whole tensor at once (chunks of 80 values)."""
    monkeypatch.setattr(tensors, "CHUNK", 80)
    write_safetensors(tmp_path / "m.safetensors", {"w": data["w"], "a": data["a"]})
    s = gecko_stats(tmp_path / "m.safetensors", man_width=man_width)
    total_bits = 0
    for row, name in zip(s["tensors"], ("w", "a")):
        bits = data[name].reshape(-1).view(np.uint32)
        fp = compress(bits, GeckoConfig(man_width=man_width)).footprint()
        assert row["gecko_bits"] == fp.total_bits
        assert row["width_rows"] == fp.width_hist.tolist()
        assert row["fp32_bits"] == 32 * bits.size
        mw = 23 if man_width is None else man_width
        assert row["truncated_bits"] == bits.size * (9 + mw)
        assert row["paper_bits"] == fp.exp_bits_lit + bits.size * (1 + mw)
        total_bits += fp.total_bits
    assert s["total"]["gecko_bits"] == total_bits
    assert s["total"]["values"] == data["w"].size + data["a"].size


def test_cli_tensor_stats(tmp_path, data, capsys):
    np.save(tmp_path / "a.npy", data["a"])
    code = main(["tensor-stats", str(tmp_path / "a.npy"), "--man-width", "7", "-o", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "| a | 1000 |" in out and "million values per minute" in out
    stats = json.loads((tmp_path / "a.json").read_text())
    assert stats["tensors"][0]["gecko_ratio"] < stats["tensors"][0]["truncated_ratio"] < 1


@pytest.mark.parametrize("make, needle", [
    (lambda p: (p / "x.txt").write_text("hi") and p / "x.txt", "unsupported tensor file type"),
    (lambda p: p / "missing.npy", "not found"),
    (lambda p: (np.save(p / "i.npy", np.arange(5)), p / "i.npy")[1], "not a float tensor"),
    (lambda p: ((p / "bad.safetensors").write_bytes(b"\x05\x00\x00\x00\x00\x00\x00\x00{bad}"),
                p / "bad.safetensors")[1], "not a readable .safetensors"),
    (lambda p: (np.save(p / "inf.npy", np.array([1.0, np.inf], np.float32)), p / "inf.npy")[1],
     "Inf/NaN"),
])
def test_bad_tensor_files(tmp_path, make, needle, capsys):
    path = make(tmp_path)
    code = main(["tensor-stats", str(path), "-o", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err


def test_man_width_out_of_range_for_bf16_is_a_config_error(tmp_path, data):
    write_safetensors(tmp_path / "b.safetensors", {"bf": float_to_bf16(data["w"])}, bf16=("bf",))
    with pytest.raises(FlowError, match="man_width"):
        gecko_stats(tmp_path / "b.safetensors", man_width=10)

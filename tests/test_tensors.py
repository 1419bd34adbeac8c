"""Tensor files (.npy/.npz/.safetensors) and the Gecko footprint statistics over them."""

import json

import numpy as np
import pytest

from flows import FlowError, tensors
from flows.cli import main
from flows.families.gecko import gecko_stats
from flows.tensors import read_tensors, write_safetensors
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


def _bits(tensor, size=64):
    return np.concatenate(list(tensor.chunks(size)))


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


@pytest.mark.parametrize("man_width, lanes", [(None, 8), (0, 8), (3, 3), (7, 5)])
def test_stats_equal_the_golden_stream_across_chunks(tmp_path, data, monkeypatch, man_width, lanes):
    """Chunked accounting equals compressing the whole tensor at once (chunks of 10 rows)."""
    monkeypatch.setattr(tensors, "CHUNK_ROWS", 10)
    write_safetensors(tmp_path / "m.safetensors", {"w": data["w"], "a": data["a"]})
    s = gecko_stats(tmp_path / "m.safetensors", man_width=man_width, lanes=lanes)
    total_bits = 0
    for row, name in zip(s["tensors"], ("w", "a")):
        bits = data[name].reshape(-1).view(np.uint32)
        fp = compress(bits, GeckoConfig(lanes=lanes, man_width=man_width)).footprint()
        assert row["gecko_bits"] == fp.total_bits
        assert row["width_rows"] == fp.width_hist.tolist()
        assert row["fp32_bits"] == 32 * bits.size
        mw = 23 if man_width is None else man_width
        assert row["truncated_bits"] == bits.size * (9 + mw)
        assert row["paper_bits"] == fp.exp_bits_lit + bits.size * (1 + mw)
        total_bits += fp.total_bits
    assert s["total"]["gecko_bits"] == total_bits
    assert s["total"]["values"] == data["w"].size + data["a"].size


def test_storage_order_and_byte_order(tmp_path, data):
    """Fortran-order and big-endian arrays: .npy and .npz agree, values in storage order."""
    f = np.asfortranarray(data["w"])
    big = data["a"].astype(">f4")
    np.save(tmp_path / "f.npy", f)
    np.save(tmp_path / "big.npy", big)
    np.savez(tmp_path / "d.npz", f=f, big=big)
    npz = {t.name: t for t in read_tensors(tmp_path / "d.npz")}
    storage = f.T.reshape(-1).view(np.uint32)  # column-major = the transpose in C order
    assert np.array_equal(_bits(read_tensors(tmp_path / "f.npy")[0]), storage)
    assert np.array_equal(_bits(npz["f"]), storage)
    native = data["a"].view(np.uint32)
    assert np.array_equal(_bits(read_tensors(tmp_path / "big.npy")[0]), native)
    assert np.array_equal(_bits(npz["big"]), native)


def test_no_sign_counts_no_sign_bits(tmp_path, data):
    np.save(tmp_path / "a.npy", data["a"])
    s = gecko_stats(tmp_path / "a.npy", man_width=4, sign_en=False)
    row = s["tensors"][0]
    assert row["truncated_bits"] == row["values"] * (8 + 4)
    assert row["gecko_bits"] == compress(data["a"].view(np.uint32),
                                         GeckoConfig(man_width=4, sign_en=False)).footprint().total_bits


def _truncated_npz(p):
    np.savez(p / "t.npz", a=np.zeros(1000, np.float32))
    import zipfile
    with zipfile.ZipFile(p / "t.npz") as z:
        raw = z.read("a.npy")
    with zipfile.ZipFile(p / "cut.npz", "w") as z:
        z.writestr("a.npy", raw[:-400])
    return p / "cut.npz"


def _truncated_npy(p):
    np.save(p / "t.npy", np.zeros(1000, np.float32))
    raw = (p / "t.npy").read_bytes()
    (p / "t.npy").write_bytes(raw[:-400])
    return p / "t.npy"


def _safetensors_with(p, header: bytes, data: bytes = b""):
    path = p / "x.safetensors"
    path.write_bytes(len(header).to_bytes(8, "little") + header + data)
    return path


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
    (_truncated_npz, "truncated: 900 of 1000 values"),
    (_truncated_npy, "truncated: 900 of 1000 values"),
    (lambda p: _safetensors_with(p, b"[1, 2]"), "not a JSON object"),
    (lambda p: _safetensors_with(p, b'{"w": {"dtype": "F32", "shape": [4]}}'),
     "lacks dtype, shape or data_offsets"),
    (lambda p: _safetensors_with(p, b'{"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}',
                                 b"\0" * 8), "the file has"),
    (lambda p: _safetensors_with(p, b'{"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 12]}}',
                                 b"\0" * 16), "do not match its shape"),
    (lambda p: _safetensors_with(p, b'{"w": {"dtype": "I8", "shape": [4], "data_offsets": [0, 4]}}',
                                 b"\0" * 4), "dtype I8"),
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

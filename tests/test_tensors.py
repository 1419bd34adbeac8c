"""Tensor files (.npy/.npz/.safetensors) and the Gecko footprint statistics over them."""

import json

import numpy as np
import pytest

from flows import FlowError
from flows.studies import tensors
from flows.cli import main
from flows.studies.gecko_stats import gecko_stats
from flows.studies.tensors import read_tensors, write_safetensors
from golden.common import float_to_bf16
from golden.gecko.codec import GeckoConfig, compress


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


# --- malformed shapes, offsets and containers: one error line naming the file, never a wrong count


def _npy_with(p, shape, data: bytes, descr="<f4", name="x.npy"):
    """A ``.npy`` file whose header claims ``shape`` (anything NumPy's writer accepts), followed
    by ``data``."""
    import io
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": descr, "fortran_order": False,
                                               "shape": shape})
    path = p / name
    path.write_bytes(buf.getvalue() + data)
    return path


def _npz_with(p, members: dict, name="x.npz"):
    """An ``.npz`` (zip) archive holding ``members`` (name → raw bytes) as they are."""
    import zipfile
    path = p / name
    with zipfile.ZipFile(path, "w") as z:
        for member, raw in members.items():
            z.writestr(member, raw)
    return path


def _cli_error(path, tmp_path, capsys) -> str:
    code = main(["tensor-stats", str(path), "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("trainfab: error: "), err
    assert str(path) in lines[0], err
    return lines[0]


@pytest.mark.parametrize("shape, needle", [
    ((-5,), "shape (-5,) is not"),
    ((3, -1), "shape (3, -1) is not"),
    ((True, 4), "shape (True, 4) is not"),
    ((2**62, 2), ("shape (4611686018427387904, 2) needs 36893488147419103232 bytes but the file "
                  "holds 16 after its header")),
    ((5,), "shape (5,) needs 20 bytes but the file holds 16 after its header"),
    ((0, 2**62, 4), "shape (0, 4611686018427387904, 4) is too large for any array"),
], ids=["negative", "negative-2d", "bool", "int64-overflow", "short", "empty-but-huge"])
def test_npy_shape_is_validated_against_the_file(tmp_path, capsys, shape, needle):
    path = _npy_with(tmp_path, shape, np.arange(4, dtype="<f4").tobytes())
    assert needle in _cli_error(path, tmp_path, capsys)
    with pytest.raises(FlowError, match="shape"):
        read_tensors(path)


def test_npy_count_uses_python_integers(tmp_path):
    """Counts beyond int64 are refused by size, never wrapped: and a legitimate count is exact."""
    (t,) = read_tensors(_npy_with(tmp_path, (2, 2), np.arange(4, dtype="<f4").tobytes()))
    assert t.count == 4 and type(t.count) is int
    (t,) = read_tensors(_npy_with(tmp_path, (), np.ones(1, "<f4").tobytes()))  # a scalar: 1 value
    assert t.count == 1 and _bits(t).tolist() == [0x3F800000]
    (t,) = read_tensors(_npy_with(tmp_path, (1,) * 2000 + (4,), np.zeros(4, "<f4").tobytes()))
    assert t.count == 4
    (t,) = read_tensors(_npy_with(tmp_path, (0,) + (1,) * 2000, b""))
    assert t.count == 0
    header = {"w": {"dtype": "F32", "shape": [1] * 5000 + [2, 2], "data_offsets": [0, 16]},
              "e": {"dtype": "F32", "shape": [0] + [1] * 5000 + [3], "data_offsets": [16, 16]}}
    tensors = read_tensors(_safetensors_with(tmp_path, json.dumps(header).encode(), b"\0" * 16))
    assert [t.count for t in tensors] == [4, 0]


@pytest.mark.parametrize("shape, data, needle", [
    ((2**62, 2), b"\0" * 16, ("x.npz:a.npy: truncated: 4 of 9223372036854775808 values present: "
                              "shape (4611686018427387904, 2) needs 36893488147419103232 bytes "
                              "but the member holds 16 after its header")),
    ((-5,), b"", "x.npz:a.npy: shape (-5,) is not"),
    ((False,), b"", "x.npz:a.npy: shape (False,) is not"),
], ids=["huge", "negative", "bool"])
def test_npz_member_shape_is_validated_against_the_member(tmp_path, capsys, shape, data, needle):
    import io
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f4", "fortran_order": False,
                                               "shape": shape})
    path = _npz_with(tmp_path, {"a.npy": buf.getvalue() + data})
    assert needle in _cli_error(path, tmp_path, capsys)


_ST_W = {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}


@pytest.mark.parametrize("header, data, needle", [
    # 2**64 bytes claimed by offsets spanning none: the product must not wrap
    ({"w": {"dtype": "F32", "shape": [2**62, 4], "data_offsets": [0, 0]}}, b"",
     "data_offsets [0, 0] do not match its shape (4611686018427387904, 4)"),
    ({"w": _ST_W, "v": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}}, b"\0" * 24,
     "tensors 'w' and 'v' overlap"),
    ({"w": _ST_W, "v": _ST_W}, b"\0" * 16, "tensors 'w' and 'v' overlap"),
    ({"w": {"dtype": "F32", "shape": [True, 4], "data_offsets": [0, 16]}}, b"\0" * 16,
     "malformed shape"),
    ({"w": {"dtype": "F32", "shape": [4], "data_offsets": [False, 16]}}, b"\0" * 16,
     "malformed data_offsets"),
    ({"w": {"dtype": ["F32"], "shape": [4], "data_offsets": [0, 16]}}, b"\0" * 16,
     "dtype ['F32'] is not a string"),
    ({"w": {"dtype": {"a": 1}, "shape": [4], "data_offsets": [0, 16]}}, b"\0" * 16,
     "is not a string"),
    ({"w": {"dtype": "F32", "shape": [4], "data_offsets": [-16, 0]}}, b"\0" * 16, "negative"),
    ({"w": {"dtype": "F32", "shape": [4], "data_offsets": [16, 0]}}, b"\0" * 16,
     "begin after their end"),
    ({"w": {"dtype": "F32", "shape": [4], "data_offsets": [2**70, 2**70 + 16]}}, b"\0" * 16,
     "the file has"),
    ({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}, "__metadata__": [1]},
     b"\0" * 16, "__metadata__ is not"),
    ({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}, "__metadata__": {"a": 1}},
     b"\0" * 16, "__metadata__ is not"),
    ({"w": {"dtype": "F32", "shape": 4, "data_offsets": [0, 16]}}, b"\0" * 16, "malformed shape"),
    ({"w": {"dtype": "F32", "shape": [2**62, 0, 4], "data_offsets": [0, 0]}}, b"",
     "shape (4611686018427387904, 0, 4) is too large for any array"),
], ids=["huge-shape-no-data", "overlap", "same-region", "bool-dim", "bool-offset", "list-dtype",
        "dict-dtype", "negative-offset", "begin-after-end", "offset-past-file", "metadata-list",
        "metadata-int-value", "int-shape", "empty-but-huge"])
def test_safetensors_header_is_validated(tmp_path, capsys, header, data, needle):
    path = _safetensors_with(tmp_path, json.dumps(header).encode(), data)
    assert needle in _cli_error(path, tmp_path, capsys)


@pytest.mark.parametrize("header, needle", [
    (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    (b'{"w": ' * 100_000 + b"1" + b"}" * 100_000, "nested too deeply"),
    ((b'{"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}, '
      b'"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}'), "key 'w' appears twice"),
    (b'{"w": {"dtype": "F32", "shape": [1' + b"0" * 5000 + b'], "data_offsets": [0, 16]}}',
     "not a readable .safetensors"),
    ('{"w": 1}'.encode("utf-16"), "not UTF-8"),
], ids=["deep-list", "deep-object", "duplicate-key", "5000-digit-int", "utf-16"])
def test_safetensors_malformed_json(tmp_path, capsys, header, needle):
    path = _safetensors_with(tmp_path, header, b"\0" * 16)
    assert needle in _cli_error(path, tmp_path, capsys)


def test_safetensors_header_size_is_capped(tmp_path, capsys):
    """The format caps the header at 100 MB: a longer one is refused before being read (the file
    is sparse, so this costs nothing)."""
    path = tmp_path / "big.safetensors"
    with open(path, "wb") as f:
        f.write((100_000_001).to_bytes(8, "little"))
        f.truncate(8 + 100_000_001 + 16)
    assert "header of 100000001 bytes exceeds the format's limit of 100000000" in \
        _cli_error(path, tmp_path, capsys)
    (tmp_path / "short.safetensors").write_bytes(b"\x01\x02")
    assert "shorter than" in _cli_error(tmp_path / "short.safetensors", tmp_path, capsys)


@pytest.mark.parametrize("make", [
    lambda p: (np.savez(p / "x.npz"), p / "x.npz")[1],
    lambda p: _npz_with(p, {"readme.txt": b"hello", "a.bin": b"\0" * 8}),
    lambda p: _safetensors_with(p, b"{}"),
    lambda p: _safetensors_with(p, b'{"__metadata__": {"format": "pt"}}'),
], ids=["empty-npz", "npz-without-npy", "empty-safetensors", "safetensors-metadata-only"])
def test_a_file_without_tensors_is_an_error(tmp_path, capsys, make):
    path = make(tmp_path)
    assert f"no tensors in {path}" in _cli_error(path, tmp_path, capsys)


def test_an_empty_tensor_beside_others_is_fine(tmp_path, capsys):
    write_safetensors(tmp_path / "m.safetensors", {"e": np.zeros((0, 3), np.float32),
                                                   "w": np.ones(4, np.float32)})
    np.savez(tmp_path / "m.npz", e=np.zeros(0, np.float32), w=np.ones(4, np.float32))
    for path in (tmp_path / "m.safetensors", tmp_path / "m.npz"):
        assert [(t.name, t.count) for t in read_tensors(path)] == [("e", 0), ("w", 4)]
        assert main(["tensor-stats", str(path), "-o", str(tmp_path / "out")]) == 0
        assert "| e | 0 |" in capsys.readouterr().out


def test_a_directory_or_special_file_is_named_as_such(tmp_path, capsys):
    (tmp_path / "d.npy").mkdir()
    assert f"{tmp_path / 'd.npy'} is a directory, not a tensor file" in \
        _cli_error(tmp_path / "d.npy", tmp_path, capsys)
    assert f"{tmp_path} is a directory, not a tensor file" in _cli_error(tmp_path, tmp_path, capsys)
    import os
    os.mkfifo(tmp_path / "f.npy")  # reading a FIFO would hang
    assert "is not a regular file" in _cli_error(tmp_path / "f.npy", tmp_path, capsys)


@pytest.mark.parametrize("dtype", ["int16", "int32", "int64", "uint8", "uint64"])
def test_other_integer_dtypes_say_how_integers_are_read(tmp_path, capsys, dtype):
    np.save(tmp_path / "i.npy", np.arange(5, dtype=dtype))
    line = _cli_error(tmp_path / "i.npy", tmp_path, capsys)
    assert f"dtype {dtype} is not a float tensor" in line
    assert "uint32 arrays are read as FP32 bit patterns and uint16 arrays as bfloat16 bit " \
           "patterns" in line


def test_uint_arrays_are_bit_patterns(tmp_path):
    """uint32 is FP32 bits, uint16 bf16 bits: documented in the module docstring."""
    bits32 = np.array([0x3F800000, 0x7F7FFFFF, 1], np.uint32)
    bits16 = np.array([0x3F80, 0xC000, 1], np.uint16)
    np.save(tmp_path / "u32.npy", bits32)
    np.save(tmp_path / "u16.npy", bits16)
    (t32,), (t16,) = read_tensors(tmp_path / "u32.npy"), read_tensors(tmp_path / "u16.npy")
    assert t32.fmt == "fp32" and _bits(t32).tolist() == bits32.tolist()
    assert t16.fmt == "bf16" and _bits(t16).tolist() == bits16.tolist()
    doc = tensors.__doc__
    assert "uint32" in doc and "uint16" in doc and "bit patterns" in doc


def test_float64_overflow_is_one_error_line(tmp_path, capsys):
    """A float64 beyond FP32's range becomes Inf (and the analysis refuses it) without a NumPy
    RuntimeWarning, which the command line would print on stderr."""
    import warnings
    np.save(tmp_path / "big.npy", np.array([1e300, 2.0]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        code = main(["tensor-stats", str(tmp_path / "big.npy"), "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Inf/NaN" in err, err


@pytest.mark.parametrize("major, minor", [(1, 5), (7, 0), (0, 0)])
def test_unsupported_npy_version(tmp_path, capsys, major, minor):
    """Versions 1.0, 2.0 and 3.0 only, as NumPy itself."""
    path = _npy_with(tmp_path, (4,), np.zeros(4, "<f4").tobytes())
    raw = bytearray(path.read_bytes())
    raw[6:8] = bytes([major, minor])
    path.write_bytes(bytes(raw))
    assert f"unsupported .npy format version {major}.{minor}" in _cli_error(path, tmp_path, capsys)


@pytest.mark.parametrize("analysis", ["gecko", "hbfp"])
def test_a_file_whose_tensors_are_all_empty_has_no_values_to_measure(tmp_path, capsys,
                                                                      analysis):
    """Ratios of 0 bits to 0 bits would read as a perfect compression: say there is nothing."""
    np.save(tmp_path / "e.npy", np.zeros((3, 0), np.float32))
    np.savez(tmp_path / "e.npz", a=np.zeros(0, np.float32), b=np.zeros((0, 4), np.float32))
    for path, shapes in ((tmp_path / "e.npy", "e (3, 0)"),
                         (tmp_path / "e.npz", "a (0,), b (0, 4)")):
        code = main(["tensor-stats", str(path), "--analysis", analysis,
                     "-o", str(tmp_path / "out")])
        err = capsys.readouterr().err
        assert code == 2 and err.strip() == (f"trainfab: error: {path}: no values to measure: "
                                             f"every tensor is empty ({shapes})"), err
    assert not (tmp_path / "out").exists()
    with pytest.raises(FlowError, match="no values to measure"):
        gecko_stats(tmp_path / "e.npz")


def test_an_empty_tensor_has_no_ratios(tmp_path):
    np.savez(tmp_path / "m.npz", e=np.zeros(0, np.float32), w=np.ones(4, np.float32))
    stats = gecko_stats(tmp_path / "m.npz")
    empty, full = stats["tensors"]
    assert empty["gecko_ratio"] is None and empty["width_share"] is None
    assert full["gecko_ratio"] > 0 and stats["total"]["values"] == 4
    from flows.studies.gecko_stats import stats_markdown
    assert "| e | 0 | no values (an empty tensor) |" in stats_markdown(stats)

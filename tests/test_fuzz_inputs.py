"""Property-based (fuzz) tests of the input readers: tensor files and TOML configurations.

The rule checked on every generated input: the reader either raises :class:`flows.FlowError`
with one short line naming the file, or gives a correct result -- for tensor files, every
tensor's count is the product of its shape and its values are the ones NumPy itself reads (or,
for ``.safetensors``, the ones in the tensor's region of the file); for configurations, the
fields of the TOML table.  Never another exception type, never a hang (reading runs under a time
limit, chunk by chunk, and may not read more values than the file holds).

Inputs are valid files (``np.save``, ``np.savez``, :func:`flows.studies.tensors.write_safetensors`) with
bytes flipped, inserted, deleted or cut off, and headers rewritten with random dimensions,
offsets, dtypes, versions, lengths and nesting.

Hypothesis runs derandomized (the same examples on every run) without an example database (no
``.hypothesis`` folder); the number of examples follows ``--effort``: ``standard`` (``make
test``) a bounded number, ``full`` (``make test-full``) many more.  ``TRAINFAB_FUZZ_EXAMPLES``
overrides it.
"""

import contextlib
import io
import itertools
import json
import math
import os
import signal
import struct
import tempfile
import threading
import tomllib
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir

from flows import FlowError, registry
from flows.cli import main
from flows.config import load_config, parse_set
from flows.studies.tensors import read_tensors, write_safetensors

# Hypothesis's own caches go to the temporary folder, not a .hypothesis folder in the repository
# (the example database is off altogether: database=None below)
if not os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):
    set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "trainfab-hypothesis")

#: examples per property and effort level
EXAMPLES = {"quick": 40, "standard": 150, "full": 5000}
#: a reading that takes longer than this is a hang
TIME_LIMIT_S = 30


def fuzz_settings(effort: str, scale: float = 1.0) -> settings:
    n = int(os.environ.get("TRAINFAB_FUZZ_EXAMPLES") or EXAMPLES[effort])
    return settings(max_examples=max(1, int(n * scale)), deadline=None, derandomize=True,
                    database=None, print_blob=False,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much,
                                           HealthCheck.function_scoped_fixture])


class Hang(BaseException):
    """A reader ran past :data:`TIME_LIMIT_S` (a ``BaseException``, so that no ``except
    Exception`` in the code under test can turn it into an ordinary error)."""


@contextlib.contextmanager
def time_limit(seconds: float = TIME_LIMIT_S):
    """Fail (rather than hang) when the block runs longer than ``seconds``."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def expired(signum, frame):
        raise Hang(f"no result after {seconds} s: the reader hangs")

    old = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def assert_one_line(e: FlowError, path) -> None:
    msg = str(e)
    assert msg and len(msg.splitlines()) == 1 and "\r" not in msg, repr(msg)
    assert len(msg) < 1000, msg
    assert str(path) in msg, msg


def read_all(path, chunk: int):
    """``[(tensor, bits)]`` read through the public path, ``chunk`` values at a time, or
    ``None`` after checking the :class:`FlowError` is one line naming the file."""
    size = os.path.getsize(path)
    if path.suffix == ".npz":  # the values are bounded by the members' uncompressed sizes
        with contextlib.suppress(zipfile.BadZipFile, OSError, ValueError, EOFError), \
                zipfile.ZipFile(path) as z:
            size = sum(info.file_size for info in z.infolist())
    try:
        with time_limit():
            out = []
            for t in read_tensors(path):
                assert type(t.count) is int and t.count == math.prod(t.shape) and t.count >= 0
                assert all(type(d) is int and d >= 0 for d in t.shape), t.shape
                assert t.count * 2 <= size, (t.shape, size)  # at least 2 bytes per value
                parts = []
                for k, bits in enumerate(t.chunks(chunk)):
                    assert k < -(-t.count // chunk), "more chunks than values"
                    assert 0 < bits.size <= chunk
                    assert bits.dtype == (np.uint16 if t.fmt == "bf16" else np.uint32)
                    parts.append(bits)
                bits = np.concatenate(parts) if parts else np.zeros(0, np.uint32)
                assert bits.size == t.count
                out.append((t, bits))
            assert out, "a file without tensors must be an error"
            return out
    except FlowError as e:
        assert_one_line(e, path)
        return None


def numpy_bits(arr: np.ndarray) -> np.ndarray:
    """The bit patterns the reader must give for an array NumPy read: storage order, FP32 for
    floats and uint32, bf16 for uint16."""
    x = np.ravel(arr, order="K")
    x = x.astype(x.dtype.newbyteorder("="))
    if x.dtype in (np.uint16, np.uint32):
        return x
    if x.dtype == np.float32:
        return x.view(np.uint32)
    with np.errstate(all="ignore"):
        return x.astype(np.float32).view(np.uint32)


# --- byte-level mutations

CHUNKS = st.sampled_from([1, 3, 7, 64, 4096])


@st.composite
def mutate(draw, raw: bytes, hot: int = 0) -> bytes:
    """``raw`` with up to four bytes flipped or set, runs inserted or deleted, or its tail cut;
    with ``hot``, half of the positions fall in the first ``hot`` bytes (a header)."""
    raw = bytearray(raw)
    for _ in range(draw(st.integers(0, 4))):
        if not raw:
            break
        top = min(hot, len(raw)) if hot and draw(st.booleans()) else len(raw)
        i = draw(st.integers(0, top - 1))
        op = draw(st.sampled_from(["flip", "set", "cut", "insert", "delete"]))
        if op == "flip":
            raw[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "set":
            raw[i] = draw(st.sampled_from([0, 1, 0x20, 0x22, 0x2C, 0x5B, 0x7B, 0x7F, 0x80, 0xFF]))
        elif op == "cut":
            del raw[i:]
        elif op == "insert":
            raw[i:i] = draw(st.binary(min_size=1, max_size=8))
        else:
            del raw[i:i + draw(st.integers(1, 8))]
    return bytes(raw)


# --- .npy

NPY_DTYPES = ["<f4", ">f4", "<f2", ">f2", "<f8", ">f8", "<u2", ">u2", "<u4", ">u4",
              "<i4", "|u1", "|b1", "<c8"]
HUGE = [2**31, 2**32 + 1, 2**62, 2**63, 2**64, 10**40, 2**1100]


@st.composite
def arrays(draw, dtypes=NPY_DTYPES) -> np.ndarray:
    dtype = np.dtype(draw(st.sampled_from(dtypes)))
    shape = tuple(draw(st.lists(st.integers(0, 5), max_size=3)))
    n = math.prod(shape)
    raw = draw(st.binary(min_size=n * dtype.itemsize, max_size=n * dtype.itemsize))
    arr = np.frombuffer(raw, dtype=dtype).reshape(shape)
    return np.asfortranarray(arr) if draw(st.booleans()) else arr


def npy_bytes(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


def dim_text():
    return st.one_of(st.integers(-3, 6).map(str), st.sampled_from(HUGE).map(str),
                     st.sampled_from(["True", "False", "1.5", "-0", "None", "(2,)", "'3'",
                                      "0x" + "f" * 4000]))


@st.composite
def npy_header_text(draw) -> str:
    """A ``.npy`` header dictionary with random entries (mostly NumPy-like)."""
    descr = draw(st.one_of(
        st.sampled_from(NPY_DTYPES + ["<f16", "V0", "O", "<U4", "S0", "<M8[ns]"]).map(repr),
        st.sampled_from(["[('a', '<f4')]", "('<f4', (2,))", "('<f4', -1)", "5", "None", "[]",
                         "[(" * 50 + "'<f4'" + ")]" * 50, "'" + "x" * 300 + "'"])))
    order = draw(st.sampled_from(["False", "True", "0", "None"]))
    if draw(st.integers(0, 9)) == 0:
        depth = draw(st.sampled_from([10, 100, 300, 3000]))
        shape = "(" * depth + ")" * depth
    else:
        dims = draw(st.lists(dim_text(), max_size=4))
        shape = "(" + "".join(d + ", " for d in dims) + ")"
    keys = {"descr": descr, "fortran_order": order, "shape": shape}
    if draw(st.integers(0, 9)) == 0:
        keys.pop(draw(st.sampled_from(sorted(keys))))
    if draw(st.integers(0, 9)) == 0:
        keys["extra"] = "1"
    return "{" + "".join(f"'{k}': {v}, " for k, v in keys.items()) + "}"


@st.composite
def npy_files(draw) -> bytes:
    arr = draw(arrays())
    raw = npy_bytes(arr)
    kind = draw(st.sampled_from(["valid", "bytes", "header", "header"]))
    if kind == "valid":
        return raw
    if kind == "bytes":
        return draw(mutate(raw, hot=128))
    # a rewritten header before the array's own data (or part of it)
    text = draw(npy_header_text()).encode()
    version = draw(st.sampled_from([(1, 0)] * 6 + [(2, 0), (3, 0), (1, 5), (4, 0)]))
    pad = b" " * draw(st.integers(0, 70)) + b"\n"
    length = struct.pack("<H" if version[0] == 1 else "<I", len(text) + len(pad))
    data = raw[len(raw) - arr.nbytes:]
    cut = draw(st.integers(0, len(data)))
    data = data[:cut] if draw(st.booleans()) else data
    return b"\x93NUMPY" + bytes(version) + length + text + pad + data


def test_fuzz_npy(effort, tmp_path):
    path = tmp_path / "x.npy"

    @fuzz_settings(effort)
    @given(raw=npy_files(), chunk=CHUNKS)
    def check(raw, chunk):
        path.write_bytes(raw)
        ours = read_all(path, chunk)
        if ours is None:
            return
        ref = np.load(path, allow_pickle=False)  # accepted, so NumPy must read it too
        ((t, bits),) = ours
        assert t.name == "x" and t.shape == ref.shape and t.count == ref.size
        assert np.array_equal(bits, numpy_bits(ref))

    check()


# --- .npz

MEMBER_NAMES = ["a", "b", "w.x", "x/y", "", "é", "a\nb", "n" * 200]


@st.composite
def npz_files(draw) -> bytes:
    members = draw(st.lists(st.tuples(st.sampled_from(MEMBER_NAMES),
                                      st.sampled_from([".npy", ".npy", ".npy", ".txt", ""])),
                            max_size=3, unique=True))
    buf = io.BytesIO()
    method = draw(st.sampled_from([zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED]))
    with zipfile.ZipFile(buf, "w", method) as z:
        for stem, ext in members:
            raw = draw(npy_files()) if ext == ".npy" else draw(st.binary(max_size=16))
            info = zipfile.ZipInfo(stem + ext or "-", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = method  # a fixed date: the same bytes on every run
            z.writestr(info, raw)
    raw = buf.getvalue()
    return draw(mutate(raw)) if draw(st.integers(0, 3)) == 0 else raw


def test_fuzz_npz(effort, tmp_path):
    path = tmp_path / "x.npz"

    @fuzz_settings(effort)
    @given(raw=npz_files(), chunk=CHUNKS)
    def check(raw, chunk):
        path.write_bytes(raw)
        ours = read_all(path, chunk)
        if ours is None:
            return
        with zipfile.ZipFile(path) as z:  # what NumPy reads from each member
            names = [n for n in z.namelist() if n.endswith(".npy")]
            assert [t.name for t, _ in ours] == [n[:-4] for n in names]
            for t, bits in ours:
                with z.open(t.name + ".npy") as f:
                    ref = np.lib.format.read_array(f, allow_pickle=False)
                assert t.shape == ref.shape and t.count == ref.size
                assert np.array_equal(bits, numpy_bits(ref))

    check()


# --- .safetensors

ST_DTYPES = {"F32": "<f4", "F16": "<f2", "BF16": "<u2", "F64": "<f8"}
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats()
    | st.text(max_size=4) | st.sampled_from(list(ST_DTYPES) + ["I8", "U16", ""]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                                max_size=3),
    max_leaves=8)


@st.composite
def safetensors_files(draw) -> bytes:
    names = draw(st.lists(st.sampled_from(["w", "b", "x.y", "é", "", "__metadata_"]),
                          min_size=draw(st.sampled_from([0] + [1] * 7)), max_size=3,
                          unique=True))
    arrs, bf16 = {}, []
    for name in names:
        arr = draw(arrays(["<f4", "<f2", "<u2"]))
        if arr.dtype == np.uint16:
            bf16.append(name)
        arrs[name] = np.ascontiguousarray(arr)
    raw = _safetensors_bytes(arrs, tuple(bf16))
    (n,) = struct.unpack("<Q", raw[:8])
    header, data = json.loads(raw[8:8 + n]), raw[8 + n:]
    # header mutations
    for _ in range(draw(st.sampled_from([0, 0, 1, 1, 2, 3]))):
        op = draw(st.sampled_from(["shape", "offsets", "dtype", "drop", "info", "metadata", "add",
                                   "overlap"]))
        tensors = [k for k in header if k != "__metadata__"]
        if op in ("shape", "offsets", "dtype", "drop", "info", "overlap") and not tensors:
            continue
        name = draw(st.sampled_from(tensors)) if tensors else None
        info = header.get(name)
        if op == "shape" and isinstance(info, dict):
            info["shape"] = draw(st.one_of(
                st.lists(st.one_of(st.integers(-2, 6), st.sampled_from(HUGE), st.booleans()),
                         max_size=4), JSON_VALUES))
        elif op == "offsets" and isinstance(info, dict):
            span = len(data) + 8
            info["data_offsets"] = draw(st.one_of(
                st.lists(st.one_of(st.integers(-4, span), st.sampled_from(HUGE), st.booleans()),
                         min_size=2, max_size=2), JSON_VALUES))
        elif op == "dtype" and isinstance(info, dict):
            info["dtype"] = draw(st.one_of(st.sampled_from(list(ST_DTYPES) + ["I8", "f32"]),
                                           JSON_VALUES))
        elif op == "drop" and isinstance(info, dict) and info:
            info.pop(draw(st.sampled_from(sorted(info))))
        elif op == "info":
            header[name] = draw(JSON_VALUES)
        elif op == "metadata":
            header["__metadata__"] = draw(st.one_of(st.dictionaries(st.text(max_size=3),
                                                                    st.text(max_size=3)),
                                                    JSON_VALUES))
        elif op == "add":
            header[draw(st.text(max_size=3))] = {
                "dtype": draw(st.sampled_from(list(ST_DTYPES))),
                "shape": draw(st.lists(st.integers(0, 4), max_size=2)),
                "data_offsets": draw(st.lists(st.integers(0, len(data)), min_size=2, max_size=2))}
        elif op == "overlap" and len(tensors) > 1 and isinstance(info, dict):
            other = header[draw(st.sampled_from([t for t in tensors if t != name]))]
            if isinstance(other, dict) and "data_offsets" in other:
                info["data_offsets"] = other["data_offsets"]
    text = json.dumps(header)
    nesting = draw(st.sampled_from([0] * 12 + [1, 10, 500, 3000, 100_000]))
    if nesting:
        text = '{"w": ' * nesting + text + "}" * nesting if draw(st.booleans()) else \
            "[" * nesting + text + "]" * nesting
    if draw(st.integers(0, 19)) == 0 and tensors_in(header):
        # the same key twice
        first = json.dumps(tensors_in(header)[0])
        text = "{" + first + ": 1, " + text[1:] if text.startswith("{") else text
    head = text.encode() + b" " * draw(st.integers(0, 7))
    length = draw(st.sampled_from(["right"] * 15 + ["delta", "random", "huge"]))
    n = len(head)
    if length == "delta":
        n += draw(st.integers(-8, 8))
    elif length == "random":
        n = draw(st.integers(0, 2**64 - 1))
    elif length == "huge":
        n = draw(st.sampled_from([100_000_000, 100_000_001, 2**63, 2**64 - 1]))
    raw = struct.pack("<Q", max(n, 0)) + head + data
    return draw(mutate(raw, hot=len(head) + 8)) if draw(st.integers(0, 4)) == 0 else raw


def tensors_in(header) -> list:
    return [k for k in header if k != "__metadata__"] if isinstance(header, dict) else []


def _safetensors_bytes(arrs: dict, bf16: tuple) -> bytes:
    """The bytes :func:`write_safetensors` writes for ``arrs``."""
    with tempfile.TemporaryDirectory() as tmp:
        write_safetensors(os.path.join(tmp, "m.safetensors"), arrs, bf16=bf16)
        with open(os.path.join(tmp, "m.safetensors"), "rb") as f:
            return f.read()


def test_fuzz_safetensors(effort, tmp_path):
    path = tmp_path / "x.safetensors"

    @fuzz_settings(effort)
    @given(raw=safetensors_files(), chunk=CHUNKS)
    def check(raw, chunk):
        path.write_bytes(raw)
        ours = read_all(path, chunk)
        if ours is None:
            return
        # accepted: check against the file's own bytes, parsed here independently
        (n,) = struct.unpack("<Q", raw[:8])
        assert n <= min(len(raw) - 8, 100_000_000)
        header = json.loads(raw[8:8 + n].decode("utf-8"))
        assert [t.name for t, _ in ours] == tensors_in(header)
        spans = []
        for t, bits in ours:
            info = header[t.name]
            begin, end = info["data_offsets"]
            assert 0 <= begin <= end <= len(raw) - 8 - n
            assert t.shape == tuple(info["shape"])
            region = raw[8 + n + begin:8 + n + end]
            values = np.frombuffer(region, dtype=ST_DTYPES[info["dtype"]])
            assert values.size == t.count == math.prod(info["shape"])
            assert t.fmt == ("bf16" if info["dtype"] == "BF16" else "fp32")
            assert np.array_equal(bits, numpy_bits(values))
            if begin < end:
                spans.append((begin, end))
        spans.sort()
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans)), "overlapping regions"

    check()


# --- the command line over all three formats


def test_fuzz_tensor_stats_command(effort, tmp_path):
    """``trainfab tensor-stats`` on the same inputs: exit 0, or exit 2 with one error line."""

    @fuzz_settings(effort, scale=0.4)
    @given(file=st.one_of(npy_files().map(lambda r: ("x.npy", r)),
                          npz_files().map(lambda r: ("x.npz", r)),
                          safetensors_files().map(lambda r: ("x.safetensors", r))),
           analysis=st.sampled_from(["gecko", "hbfp"]))
    def check(file, analysis):
        name, raw = file
        path = tmp_path / name
        path.write_bytes(raw)
        out, err = io.StringIO(), io.StringIO()
        with time_limit(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["tensor-stats", str(path), "--analysis", analysis,
                         "-o", str(tmp_path / "out")])
        lines = err.getvalue().strip().splitlines()
        if code == 0:
            assert not lines, err.getvalue()
        else:
            assert code == 2 and len(lines) == 1, err.getvalue()
            assert lines[0].startswith("trainfab: error: ") and "internal error" not in lines[0]

    check()


# --- TOML configurations (unit fpraker.encoder: fields lanes and encoding)

ENCODER = registry.get("fpraker.encoder")


def toml_value():
    return st.one_of(
        st.integers(-(2**70), 2**70).map(str), st.integers(1, 64).map(str),
        st.sampled_from(['"csd"', '"binary"', "'csd'", '"""binary"""', "true", "false", "inf",
                         "nan", "1.5", "8.0", "0x10", "1979-05-27", "07:32:00", "[]", "[8]",
                         "{}", "{lanes = 8}", '"booth"', "1" + "0" * 5000, "--1", "", '"\\q"']),
        st.text(max_size=6).map(json.dumps),
        st.tuples(st.sampled_from(["[", "{a = "]), st.sampled_from([2, 50, 400, 5000, 100_000]))
        .map(lambda t: t[0] * t[1] + "1" + ("]" if t[0] == "[" else "}") * t[1]))


@st.composite
def toml_bodies(draw) -> bytes:
    lines = []
    for _ in range(draw(st.integers(0, 4))):
        lines.append(draw(st.sampled_from(
            ["[fpraker.encoder]", "[fpraker.encoder]", "[fpraker]", "[fpraker.encoder.sub]",
             "[[fpraker.encoder]]", "[gecko.x]", "", "# comment", "fpraker.encoder.lanes = 4",
             "fpraker = 1", "[fpraker.\"encoder\"]"])))
        for _ in range(draw(st.integers(0, 3))):
            key = draw(st.sampled_from(["lanes", "encoding", "lanes", "encoding", "colour",
                                        '"lanes"', "lanes.x", "a" + ".a" * 150]))
            lines.append(f"{key} = {draw(toml_value())}")
    raw = "\n".join(lines).encode()
    return draw(mutate(raw)) if draw(st.integers(0, 3)) == 0 else raw


def test_fuzz_config_file(effort, tmp_path):
    path = tmp_path / "c.toml"

    @fuzz_settings(effort)
    @given(raw=toml_bodies())
    def check(raw):
        path.write_bytes(raw)
        try:
            with time_limit():
                cfg = load_config(ENCODER, str(path))
        except FlowError as e:
            assert_one_line(e, path)
            return
        table = tomllib.loads(raw.decode("utf-8"))["fpraker"]["encoder"]
        assert set(table) <= {"lanes", "encoding"}
        assert cfg.lanes == table.get("lanes", 8) and type(cfg.lanes) is int
        assert cfg.encoding == table.get("encoding", "csd") and cfg.encoding in ("csd", "binary")

    check()


def test_fuzz_config_set(effort):
    """``--set field=value`` strings: a configuration or one FlowError line."""

    @fuzz_settings(effort, scale=0.5)
    @given(item=st.one_of(
        st.tuples(st.sampled_from(["lanes", "encoding", "colour", "", " lanes "]), toml_value())
        .map(lambda t: f"{t[0]}={t[1]}"), st.text(max_size=12)))
    def check(item):
        try:
            with time_limit():
                parse_set(item)
                cfg = load_config(ENCODER, None, [item])
        except FlowError as e:
            msg = str(e)
            assert msg and len(msg.splitlines()) == 1 and len(msg) < 1000, repr(msg)
            return
        assert cfg.lanes in range(1, 65) and cfg.encoding in ("csd", "binary")

    check()


# --- configuration files: the defects the fuzzing is about, as plain examples


@pytest.mark.parametrize("body, needle", [
    (b"[fpraker.encoder]\nencoding = \"caf\xe9\"\n",
     "not UTF-8 text (invalid continuation byte at byte 33)"),
    (b"\xff\xfe[\x00", "not UTF-8 text"),
    (b"a = " + b"[" * 100_000 + b"]" * 100_000, "malformed TOML: nested too deeply"),
    (b"a = " + b"{b = " * 100_000 + b"1" + b"}" * 100_000, "malformed TOML: nested too deeply"),
    (b"a" + b".a" * 100_000 + b" = 1",
     "malformed TOML: a dotted key of more than 100 parts (line 1)"),
    (b"[fpraker.encoder]\nlanes = 1" + b"0" * 5000, "malformed TOML: Exceeds the limit"),
    (b"[fpraker.encoder]\nlanes = " + b"[" * 300 + b"]" * 300,
     "EncoderConfig.lanes = [[[[[[[[[[[[[[[[[["),
    (b"[fpraker.encoder]\nencoding = \"" + b"x" * 100_000 + b"\"",
     "EncoderConfig.encoding = 'xxxxxxxxxx"),
], ids=["latin-1", "utf-16", "deep-array", "deep-inline-table", "long-dotted-key", "huge-int",
        "deep-value", "long-value"])
def test_bad_config_file_is_one_line_naming_it(tmp_path, capsys, body, needle):
    path = tmp_path / "c.toml"
    path.write_bytes(body)
    with pytest.raises(FlowError) as info, time_limit():
        load_config(ENCODER, str(path))
    msg = str(info.value)
    assert msg.startswith(f"{path}: ") and needle in msg and len(msg.splitlines()) == 1, msg
    assert len(msg) < 300, msg
    code = main(["generate", "fpraker.encoder", "-c", str(path), "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and str(path) in err, err


def test_config_directory_says_so(tmp_path, capsys):
    (tmp_path / "cfg.toml").mkdir()
    with pytest.raises(FlowError, match=f"^{tmp_path / 'cfg.toml'} is a directory, not a TOML "
                                        "configuration file$"):
        load_config(ENCODER, str(tmp_path / "cfg.toml"))
    code = main(["generate", "fpraker.encoder", "-c", str(tmp_path), "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and "is a directory" in err and len(err.strip().splitlines()) == 1, err


def test_invalid_value_names_its_source(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text("[fpraker.encoder]\nlanes = 0\n")
    with pytest.raises(FlowError, match=f"^{path}: EncoderConfig.lanes = 0 is invalid"):
        load_config(ENCODER, str(path))
    with pytest.raises(FlowError, match="^--set lanes: EncoderConfig.lanes = 99 is invalid"):
        load_config(ENCODER, str(path), ["lanes=99"])

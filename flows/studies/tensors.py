"""Tensor files for statistics: ``.npy``, ``.npz`` and ``.safetensors``, read in bounded chunks.

No deep-learning framework is needed: ``.npy`` files and ``.npz`` members are read after their
NumPy headers, and ``.safetensors`` files are parsed directly (an 8-byte little-endian header
length, a JSON header of ``{name: {dtype, shape, data_offsets}}``, then the raw little-endian
data).  Data is read chunk by chunk with plain reads, so memory use is bounded by the chunk size
whatever the file size.

Values come out as bit patterns: float32 tensors as FP32 (``uint32``), safetensors ``BF16``
tensors as bfloat16 (``uint16``), float16 and float64 tensors converted to FP32 (float16
exactly, float64 with NumPy's round to nearest even; beyond FP32's range they become Inf, which
the analyses refuse).  Big-endian arrays are byte-swapped.  Values are taken in their storage
order (column-major for Fortran-order arrays): the order in which a memory controller streams
them, and the order that keeps reading memory-bounded.

Integer arrays are not converted to floats: a ``uint32`` array is read as FP32 *bit patterns*
(each element is the 32-bit encoding of one FP32 value) and a ``uint16`` array as bfloat16 bit
patterns, which is how bfloat16 tensors are usually stored in ``.npy``/``.npz`` files (NumPy has
no bfloat16 type).  Every other integer dtype (int8..int64, uint8, uint64) is an error: convert
integer data with ``astype(np.float32)`` first.

Malformed files are refused with a :class:`~flows.FlowError` of one line naming the file (and
the tensor or member): every dimension must be a non-negative integer, the data the shape needs
must be in the file, safetensors data regions must lie in the file and not overlap, and a file
must hold at least one tensor.  Counts are Python integers (no int64 wrap-around).

Statistics over tensor files (:class:`TensorAnalysis`) are declared by the family modules
(:mod:`flows.families`); ``trainfab tensor-stats`` runs them.
"""

import json
import math
import struct
import warnings
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from .. import FlowError

#: rows of ``lanes`` values per chunk: memory stays bounded whatever the tensor size, and since a
#: chunk is a whole number of rows and of 10-row metadata words, chunk boundaries change nothing
CHUNK_ROWS = 10 * 65536

_SAFETENSORS_DTYPES = {"F32": ("<f4", "fp32"), "BF16": ("<u2", "bf16"), "F16": ("<f2", "fp32"),
                       "F64": ("<f8", "fp32")}
#: the safetensors format's own limit on the JSON header (the reference implementation refuses
#: longer ones): a larger length is refused before anything is read
SAFETENSORS_MAX_HEADER = 100_000_000
#: the ``.npy`` format versions NumPy reads
_NPY_VERSIONS = ((1, 0), (2, 0), (3, 0))
#: errors of reading a zip archive or a member's compressed stream
_ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, OSError,
               RuntimeError, NotImplementedError, ValueError)


@dataclass
class Tensor:
    """One tensor of a file: its name, shape, format and a chunk reader.

    ``chunks(size)`` yields the tensor's bit patterns (``fmt``) in storage order, ``size`` values
    at a time (the last chunk may be shorter).
    """

    name: str
    shape: tuple
    fmt: str  # "fp32" or "bf16": the bit patterns ``chunks`` yields
    source_dtype: str
    chunks: Callable[[int], Iterator[np.ndarray]]

    @property
    def count(self) -> int:
        return math.prod(self.shape)  # Python integers: never wraps


# --- one-line, bounded error messages


def _short(value, limit: int = 80) -> str:
    """``repr(value)`` on one line, cut to about ``limit`` characters."""
    try:
        text = repr(value)
    except RecursionError:
        return f"<deeply nested {type(value).__name__}>"
    except ValueError:  # an integer of more than 4300 digits (a .npy header's hex literal)
        if isinstance(value, int):
            text = f"<{value.bit_length()}-bit integer>"
        elif isinstance(value, (tuple, list)):
            items = [_short(v, limit) for v in value[:limit // 4]]
            text = ", ".join(items) + ("," if len(value) == 1 and type(value) is tuple else "")
            text = f"({text})" if type(value) is tuple else f"[{text}]"
        else:
            text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _label(text: str) -> str:
    """A file member's name as is when printable and short, else its (cut) repr."""
    return text if text.isprintable() and len(text) <= 120 else _short(text, 120)


def _reason(e: BaseException) -> str:
    """An exception's message on one line of at most 160 characters."""
    lines = str(e).strip().splitlines()
    text = lines[0] if lines else type(e).__name__
    return text if len(text) <= 160 else text[:159] + "…"


def _num(n) -> str:
    """An integer in decimal, or a bound for an astronomically large one (``None``)."""
    return "more than 2**1024" if n is None else str(n)


def _valid_dim(d) -> bool:
    return isinstance(d, int) and not isinstance(d, bool) and d >= 0


def _count(shape: tuple) -> int | None:
    """The number of values of a validated shape, or ``None`` when it is astronomically large
    (beyond 2**1024: no file holds that, and the exact product could take long to compute)."""
    if 0 in shape:
        return 0
    if sum(d.bit_length() - 1 for d in shape) >= 1024:  # the product is at least 2**1024
        return None
    return math.prod(shape)


#: the most bytes an array's shape may span (NumPy's limit, and any 64-bit framework's)
_MAX_BYTES = 2**63 - 1


def _check_representable(shape: tuple, itemsize: int, where: str) -> None:
    """Refuse an empty shape whose other dimensions span more than :data:`_MAX_BYTES` (such as
    ``(0, 2**62, 4)``): no array has it, and NumPy refuses it."""
    nonzero = tuple(d for d in shape if d)
    if (sum(d.bit_length() - 1 for d in nonzero) >= 63  # the product is at least 2**63
            or math.prod(nonzero) * itemsize > _MAX_BYTES):
        raise FlowError(f"{where}: shape {_short(shape)} is too large for any array: its non-zero "
                        "dimensions span more than 2**63 - 1 bytes")


def _check_fits(shape: tuple, itemsize: int, have: int, where: str, holder: str) -> int:
    """The value count of ``shape``, after checking its ``itemsize``-byte values fit in the
    ``have`` bytes after the header."""
    count = _count(shape)
    need = None if count is None else count * itemsize
    if need is None or need > have:
        have = max(have, 0)
        raise FlowError(f"{where}: truncated: {have // itemsize} of {_num(count)} values present: "
                        f"shape {_short(shape)} needs {_num(need)} bytes but the {holder} holds "
                        f"{have} after its header")
    _check_representable(shape, itemsize, where)
    return count


# --- bit patterns


def _native(dtype: np.dtype) -> np.dtype:
    return dtype.newbyteorder("=") if dtype.byteorder not in ("=", "|") else dtype


def _as_bits(arr: np.ndarray, fmt: str) -> np.ndarray:
    arr = np.asarray(arr).reshape(-1)
    arr = arr.astype(_native(arr.dtype), copy=False)
    if fmt == "bf16":
        return arr.view(np.uint16)
    if arr.dtype == np.float32:
        return arr.view(np.uint32)
    if arr.dtype == np.uint32:
        return arr
    with np.errstate(over="ignore"):  # float64 beyond FP32's range → Inf, without a warning
        return arr.astype(np.float32).view(np.uint32)


def _numpy_fmt(dtype: np.dtype, where: str) -> str:
    if dtype.hasobject:
        raise FlowError(f"{where}: object arrays are not tensors")
    native = _native(dtype)
    if native in (np.float32, np.uint32, np.float16, np.float64):
        return "fp32"
    if native == np.uint16:
        return "bf16"
    name = _label(str(dtype))
    if dtype.kind in "iu" and dtype.shape == ():
        raise FlowError(f"{where}: dtype {name} is not a float tensor (float16/32/64); integer "
                        "arrays are not converted: uint32 arrays are read as FP32 bit patterns "
                        "and uint16 arrays as bfloat16 bit patterns")
    raise FlowError(f"{where}: dtype {name} is not a float tensor (float16/32/64, or uint32 FP32 / "
                    "uint16 bf16 bit patterns)")


# --- .npy and .npz


def _file_chunks(path: Path, offset: int, dtype: np.dtype, count: int, fmt: str,
                 where: str) -> Callable[[int], Iterator[np.ndarray]]:
    """Chunks of ``count`` values stored from byte ``offset`` of a file, read with plain reads
    (not a memory map) so that only one chunk is ever resident."""
    def gen(size: int):
        try:
            f = open(path, "rb")
        except OSError as e:
            raise FlowError(f"{where}: cannot read: {e.strerror or _reason(e)}") from None
        with f:
            f.seek(offset)
            done = 0
            while done < count:
                n = min(size, count - done)
                try:
                    data = np.fromfile(f, dtype=dtype, count=n)
                except OSError as e:
                    raise FlowError(f"{where}: cannot read: {e.strerror or _reason(e)}") from None
                if data.size != n:
                    raise FlowError(f"{where}: truncated: {done + data.size} of {count} values present")
                yield _as_bits(data, fmt)
                done += n
    return gen


def _npy_header(f, where: str, what: str) -> tuple[tuple, np.dtype, int]:
    """``(shape, dtype, data offset)`` of an open ``.npy`` stream, leaving it at the data; the
    shape is checked to be a tuple of non-negative integers."""
    try:
        with warnings.catch_warnings():  # e.g. NumPy's warning about Python 2 headers
            warnings.simplefilter("ignore")
            major, minor = np.lib.format.read_magic(f)
            if (major, minor) not in _NPY_VERSIONS:
                raise FlowError(f"{where}: not a readable {what} (unsupported .npy format version "
                                f"{major}.{minor}; NumPy writes 1.0, 2.0 and 3.0)")
            # 3.0 differs from 2.0 only in allowing UTF-8 field names, which no tensor has
            read = (np.lib.format.read_array_header_1_0 if major == 1
                    else np.lib.format.read_array_header_2_0)
            shape, _, dtype = read(f)
    except FlowError:
        raise
    except Exception as e:  # NumPy's header parser (ast.literal_eval, np.dtype) raises many types
        raise FlowError(f"{where}: not a readable {what} ({_reason(e)})") from None
    if not isinstance(shape, tuple) or not all(_valid_dim(d) for d in shape):
        raise FlowError(f"{where}: shape {_short(shape)} is not a tuple of non-negative integers")
    return shape, dtype, f.tell()


def _npy(path: Path) -> list[Tensor]:
    where = str(path)
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            shape, dtype, offset = _npy_header(f, where, ".npy file")
    except OSError as e:
        raise FlowError(f"{path}: cannot read: {e.strerror or _reason(e)}") from None
    fmt = _numpy_fmt(dtype, where)
    count = _check_fits(shape, dtype.itemsize, size - offset, where, "file")
    return [Tensor(path.stem, shape, fmt, str(dtype),
                   _file_chunks(path, offset, dtype, count, fmt, where))]


def _npz_chunks(path: Path, member: str, offset: int, dtype: np.dtype, count: int, fmt: str,
                where: str) -> Callable[[int], Iterator[np.ndarray]]:
    """Chunks of the ``count`` values of an ``.npz`` member after its ``offset``-byte header."""
    def gen(size: int):
        left = count
        try:
            with zipfile.ZipFile(path) as archive, archive.open(member) as f:
                f.read(offset)
                while left:
                    n = min(size, left)
                    data = f.read(n * dtype.itemsize)
                    if len(data) != n * dtype.itemsize:
                        raise FlowError(f"{where}: truncated: "
                                        f"{count - left + len(data) // dtype.itemsize} of {count} "
                                        "values present")
                    yield _as_bits(np.frombuffer(data, dtype=dtype), fmt)
                    left -= n
        except _ZIP_ERRORS as e:
            raise FlowError(f"{where}: cannot read the data ({_reason(e)})") from None
    return gen


def _npz(path: Path) -> list[Tensor]:
    found = []
    try:
        with zipfile.ZipFile(path) as archive:
            seen = set()
            for info in archive.infolist():
                if not info.filename.endswith(".npy") or info.is_dir():
                    continue
                where = f"{path}:{_label(info.filename)}"
                if info.filename in seen:
                    raise FlowError(f"{where}: the archive holds two members of this name")
                seen.add(info.filename)
                with archive.open(info) as f:
                    shape, dtype, offset = _npy_header(f, where, ".npy member")
                found.append((info, where, shape, dtype, offset))
    except FlowError:
        raise
    except _ZIP_ERRORS as e:
        raise FlowError(f"{path}: not a readable .npz file ({_reason(e)})") from None
    if not found:
        raise FlowError(f"no tensors in {path} (an .npz archive without .npy members)")
    tensors = []
    for info, where, shape, dtype, offset in found:
        fmt = _numpy_fmt(dtype, where)
        # the member's uncompressed size as the archive records it (its reader stops there)
        count = _check_fits(shape, dtype.itemsize, info.file_size - offset, where, "member")
        tensors.append(Tensor(info.filename[:-4], shape, fmt, str(dtype),
                              _npz_chunks(path, info.filename, offset, dtype, count, fmt, where)))
    return tensors


# --- .safetensors


class _DuplicateKey(Exception):
    pass


def _unique_pairs(pairs: list) -> dict:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return out


def _safetensors(path: Path) -> list[Tensor]:
    def bad(why):
        return FlowError(f"{path}: not a readable .safetensors file ({why})")

    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise bad(f"{size} bytes, shorter than the 8-byte header length")
            (n,) = struct.unpack("<Q", head)
            if n > SAFETENSORS_MAX_HEADER:
                raise bad(f"header of {n} bytes exceeds the format's limit of "
                          f"{SAFETENSORS_MAX_HEADER}")
            if n > size - 8:
                raise bad(f"header length {n} exceeds the file")
            raw = f.read(n)
    except OSError as e:
        raise FlowError(f"{path}: cannot read: {e.strerror or _reason(e)}") from None
    if len(raw) != n:
        raise bad(f"header length {n} exceeds the file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise bad(f"the header is not UTF-8 text: {e.reason} at byte {8 + e.start}") from None
    try:
        header = json.loads(text, object_pairs_hook=_unique_pairs)
    except _DuplicateKey as e:
        raise bad(f"key {_short(e.args[0])} appears twice in the header") from None
    except RecursionError:
        raise bad("the header JSON is nested too deeply") from None
    except ValueError as e:  # JSONDecodeError, and integers of more than 4300 digits
        raise bad(_reason(e)) from None
    if not isinstance(header, dict):
        raise bad("the header is not a JSON object")
    if "__metadata__" in header:
        meta = header["__metadata__"]
        if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
            raise bad(f"__metadata__ is not an object of strings: {_short(meta)}")
    base = 8 + n
    tensors, regions = [], []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        where = f"tensor {_short(name)}"
        if not isinstance(info, dict) or not {"dtype", "shape", "data_offsets"} <= info.keys():
            raise bad(f"{where} lacks dtype, shape or data_offsets")
        dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
        if not isinstance(dtype, str):
            raise FlowError(f"{path}: {where}: dtype {_short(dtype)} is not a string; supported: "
                            f"{', '.join(_SAFETENSORS_DTYPES)}")
        if dtype not in _SAFETENSORS_DTYPES:
            raise FlowError(f"{path}: {where} has dtype {_label(dtype)}; supported: "
                            f"{', '.join(_SAFETENSORS_DTYPES)}")
        if not isinstance(shape, list) or not all(_valid_dim(d) for d in shape):
            raise bad(f"{where} has a malformed shape {_short(shape)}: expected a list of "
                      "non-negative integers")
        if (not isinstance(offsets, list) or len(offsets) != 2
                or not all(isinstance(o, int) and not isinstance(o, bool) for o in offsets)):
            raise bad(f"{where} has malformed data_offsets {_short(offsets)}: expected "
                      "[begin, end], two integers")
        begin, end = offsets
        if begin < 0 or end < 0:
            raise bad(f"{where} data_offsets {_short(offsets)} are negative")
        if begin > end:
            raise bad(f"{where} data_offsets {_short(offsets)} begin after their end")
        if base + end > size:
            raise bad(f"{where} ends at byte {_short(base + end)} but the file has {size} bytes")
        np_dtype, fmt = _SAFETENSORS_DTYPES[dtype]
        itemsize = np.dtype(np_dtype).itemsize
        shape = tuple(shape)
        count = _count(shape)
        need = None if count is None else count * itemsize
        if need != end - begin:
            raise bad(f"{where} data_offsets {_short(offsets)} do not match its shape "
                      f"{_short(shape)}: {dtype} needs {_num(need)} bytes, the offsets span "
                      f"{end - begin}")
        _check_representable(shape, itemsize, f"{path}: {where}")
        if begin < end:
            regions.append((begin, end, len(regions), name))
        tensors.append(Tensor(name, shape, fmt, dtype,
                              _file_chunks(path, base + begin, np.dtype(np_dtype), count, fmt,
                                           f"{path}: {where}")))
    if not tensors:
        raise FlowError(f"no tensors in {path} (the safetensors header lists none)")
    regions.sort()
    reach = None  # the region reaching furthest so far
    for region in regions:
        if reach is not None and region[0] < reach[1]:
            raise bad(f"tensors {_short(reach[3])} and {_short(region[3])} overlap (data_offsets "
                      f"[{reach[0]}, {reach[1]}] and [{region[0]}, {region[1]}])")
        if reach is None or region[1] > reach[1]:
            reach = region
    return tensors


def read_tensors(path) -> list[Tensor]:
    """The tensors of a ``.npy``, ``.npz`` or ``.safetensors`` file (data read lazily).

    Raises :class:`FlowError` (one line naming the file) for a missing, unreadable, malformed or
    empty file."""
    path = Path(path)
    try:
        if path.is_dir():
            raise FlowError(f"{path} is a directory, not a tensor file")
        if not path.exists():
            raise FlowError(f"tensor file {path} not found")
        if not path.is_file():
            raise FlowError(f"{path} is not a regular file (a device, pipe or socket), "
                            "not a tensor file")
    except OSError as e:
        raise FlowError(f"{path}: cannot read: {e.strerror or _reason(e)}") from None
    readers = {".npy": _npy, ".npz": _npz, ".safetensors": _safetensors}
    if path.suffix not in readers:
        raise FlowError(f"{path}: unsupported tensor file type {path.suffix!r}; "
                        f"expected one of {', '.join(readers)}")
    return readers[path.suffix](path)


def footprint_rows(path, chunk_size, measure, make_row, additive, lists, finish, progress=None):
    """The per-tensor loop every footprint analysis shares: each tensor of the file ``path``
    streamed in chunks of ``chunk_size`` values, ``measure(tensor, chunk, k)`` giving chunk
    ``k``'s footprint (footprints add with ``+``), ``make_row(tensor, footprint or None)`` the
    tensor's row; the rows summed into a ``total`` row (:func:`sum_rows` of the ``additive``
    counts and the element-wise ``lists``).  ``progress(name, done, total)`` per chunk.
    ``finish(row)`` completes the total row (its ratios).  Returns the result's common part,
    ``{"tensors": rows, "total": total, "seconds", "values_per_second"}``; a file whose tensors
    hold no values is a :class:`~flows.FlowError` (ratios of nothing would read as 0)."""
    import time

    start = time.monotonic()
    rows, total = [], None
    for tensor in read_tensors(path):
        fp = None
        for k, chunk in enumerate(tensor.chunks(chunk_size(tensor))):
            part = measure(tensor, chunk, k)
            fp = part if fp is None else fp + part
            if progress:
                progress(tensor.name, min((k + 1) * chunk_size(tensor), tensor.count),
                         tensor.count)
        row = make_row(tensor, fp)
        rows.append(row)
        total = row if total is None else sum_rows(total, row, additive, lists)
    if not total or not total["values"]:
        shapes = ", ".join(f"{r['name']} {tuple(r['shape'])}" for r in rows[:4])
        raise FlowError(f"{path}: no values to measure: every tensor is empty ({shapes}"
                        f"{', …' if len(rows) > 4 else ''})")
    seconds = time.monotonic() - start
    total = finish(total)
    return {"tensors": rows, "total": total, "seconds": round(seconds, 3),
            "values_per_second": round(total["values"] / seconds) if seconds > 0 else None}


def report_rows(result: dict, line) -> list[str]:
    """The table rows and closing line of a footprint report: ``line(row)`` per tensor, the
    total's when there are several tensors, and the values measured per minute."""
    lines = [line(r) for r in result["tensors"]]
    if result["total"] and len(result["tensors"]) > 1:
        lines.append(line(result["total"]))
    rate = result["values_per_second"]
    values = result["total"]["values"] if result["total"] else 0
    return lines + ["", f"{values} values in {result['seconds']} s"
                    + (f" ({rate * 60 / 1e6:.0f} million values per minute)" if rate else "")]


def sum_rows(a: dict, b: dict, additive, lists=()) -> dict:
    """The ``total`` row of two tensors' rows: the ``additive`` counts summed, the ``lists``
    summed element by element, the format kept when both share it (else ``mixed``), and every
    other field of ``a`` (a configuration such as ``man_width``) kept.  Derived ratios are the
    caller's to recompute."""
    out = {**a, "name": "total", "shape": [], "source_dtype": "",
           "format": a["format"] if a["format"] == b["format"] else "mixed"}
    for key in additive:
        out[key] = a[key] + b[key]
    for key in lists:
        out[key] = [x + y for x, y in zip(a[key], b[key])]
    return out


def write_safetensors(path, tensors: dict[str, np.ndarray], bf16: tuple = ()) -> None:
    """Write a ``.safetensors`` file (float32 tensors; names in ``bf16`` hold uint16 bf16 bits)."""
    header, blobs, offset = {}, [], 0
    for name, arr in tensors.items():
        arr = np.ascontiguousarray(arr)
        dtype = "BF16" if name in bf16 else {np.dtype("float32"): "F32",
                                             np.dtype("float16"): "F16"}[arr.dtype]
        raw = arr.astype("<u2" if dtype == "BF16" else arr.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": dtype, "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in blobs:
            f.write(raw)


__all__ = ["CHUNK_ROWS", "Tensor", "read_tensors", "write_safetensors", "report_rows",
           "footprint_rows", "sum_rows"]

"""Tensor files for statistics: ``.npy``, ``.npz`` and ``.safetensors``, read in bounded chunks.

No deep-learning framework is needed: ``.npy`` files and ``.npz`` members are read after their
NumPy headers, and ``.safetensors`` files are parsed directly (an 8-byte little-endian header
length, a JSON header of ``{name: {dtype, shape, data_offsets}}``, then the raw little-endian
data).  Data is read chunk by chunk with plain reads, so memory use is bounded by the chunk size
whatever the file size.

Values come out as bit patterns: float32 and uint32 tensors as FP32 (``uint32``), safetensors
``BF16`` tensors and ``uint16`` arrays as bfloat16 (``uint16``), float16 and float64 tensors
converted to FP32 (float16 exactly, float64 with NumPy's round to nearest even).  Big-endian
arrays are byte-swapped.  Values are taken in their storage order (column-major for
Fortran-order arrays): the order in which a memory controller streams them, and the order that
keeps reading memory-bounded.

Statistics over tensor files (:class:`TensorAnalysis`) are declared by the family modules
(:mod:`flows.families`); ``trainfab tensor-stats`` runs them.
"""

import json
import os
import struct
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from . import FlowError

#: rows of ``lanes`` values per chunk: memory stays bounded whatever the tensor size, and since a
#: chunk is a whole number of rows and of 10-row metadata words, chunk boundaries change nothing
CHUNK_ROWS = 10 * 65536

_SAFETENSORS_DTYPES = {"F32": ("<f4", "fp32"), "BF16": ("<u2", "bf16"), "F16": ("<f2", "fp32"),
                       "F64": ("<f8", "fp32")}


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
        return int(np.prod(self.shape, dtype=np.int64))


@dataclass(frozen=True, kw_only=True)
class TensorAnalysis:
    """A statistic over every tensor of a file (``trainfab tensor-stats --analysis NAME``),
    declared by a family module."""

    name: str
    summary: str
    #: ``run(path, progress=None, **options)`` → a JSON-serializable dict; ``progress`` is
    #: ``None`` or called as ``progress(tensor_name, values_done, values_total)``
    run: Callable[..., dict]
    #: ``markdown(result)`` → the report printed and written beside the JSON
    markdown: Callable[[dict], str]
    #: command-line options: ``(flags, argparse keyword arguments)``, whose ``dest`` is the
    #: keyword ``run`` takes
    options: tuple[tuple[tuple[str, ...], dict], ...] = ()


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
    return arr.astype(np.float32).view(np.uint32)


def _numpy_fmt(dtype: np.dtype, where: str) -> str:
    native = _native(dtype)
    if native in (np.float32, np.uint32, np.float16, np.float64):
        return "fp32"
    if native == np.uint16:
        return "bf16"
    raise FlowError(f"{where}: dtype {dtype} is not a float tensor (float16/32/64, or uint32 FP32 / "
                    "uint16 bf16 bit patterns)")


def _file_chunks(path: Path, offset: int, dtype: np.dtype, count: int, fmt: str,
                 where: str) -> Callable[[int], Iterator[np.ndarray]]:
    """Chunks of ``count`` values stored from byte ``offset`` of a file, read with plain reads
    (not a memory map) so that only one chunk is ever resident."""
    def gen(size: int):
        with open(path, "rb") as f:
            f.seek(offset)
            done = 0
            while done < count:
                n = min(size, count - done)
                data = np.fromfile(f, dtype=dtype, count=n)
                if data.size != n:
                    raise FlowError(f"{where}: truncated: {done + data.size} of {count} values present")
                yield _as_bits(data, fmt)
                done += n
    return gen


def _npy(path: Path) -> list[Tensor]:
    try:
        with open(path, "rb") as f:
            shape, _, dtype = _npy_header(f)
            offset = f.tell()
    except (ValueError, OSError) as e:
        raise FlowError(f"{path}: not a readable .npy file ({e})") from None
    if dtype.hasobject:
        raise FlowError(f"{path}: object arrays are not tensors")
    fmt = _numpy_fmt(dtype, str(path))
    count = int(np.prod(shape, dtype=np.int64))
    return [Tensor(path.stem, tuple(shape), fmt, str(dtype),
                   _file_chunks(path, offset, dtype, count, fmt, str(path)))]


def _npy_header(f):
    """``(shape, fortran_order, dtype)`` of an open ``.npy`` stream, leaving it at the data."""
    major, _ = np.lib.format.read_magic(f)
    read = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
    return read(f)


def _npz(path: Path) -> list[Tensor]:
    try:
        archive = zipfile.ZipFile(path)
        members = [m for m in archive.namelist() if m.endswith(".npy")]
        headers = {}
        for member in members:
            with archive.open(member) as f:
                headers[member] = _npy_header(f)
    except (zipfile.BadZipFile, OSError, ValueError) as e:
        raise FlowError(f"{path}: not a readable .npz file ({e})") from None
    tensors = []
    for member in members:
        shape, _, dtype = headers[member]
        where = f"{path}:{member}"
        if dtype.hasobject:
            raise FlowError(f"{where}: object arrays are not tensors")
        fmt = _numpy_fmt(dtype, where)

        def gen(size, member=member, dtype=dtype, fmt=fmt, where=where,
                count=int(np.prod(shape, dtype=np.int64))):
            with archive.open(member) as f:
                _npy_header(f)
                left = count
                while left:
                    n = min(size, left)
                    data = f.read(n * dtype.itemsize)
                    if len(data) != n * dtype.itemsize:
                        raise FlowError(f"{where}: truncated: {count - left + len(data) // dtype.itemsize}"
                                        f" of {count} values present")
                    yield _as_bits(np.frombuffer(data, dtype=dtype), fmt)
                    left -= n
        tensors.append(Tensor(member[:-4], tuple(shape), fmt, str(dtype), gen))
    return tensors


def _safetensors(path: Path) -> list[Tensor]:
    def bad(why):
        return FlowError(f"{path}: not a readable .safetensors file ({why})")

    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            if n > size - 8:
                raise bad(f"header length {n} exceeds the file")
            header = json.loads(f.read(n))
    except (OSError, struct.error, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise bad(e) from None
    if not isinstance(header, dict):
        raise bad("the header is not a JSON object")
    base = 8 + n
    tensors = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(info, dict) or not {"dtype", "shape", "data_offsets"} <= info.keys():
            raise bad(f"tensor {name!r} lacks dtype, shape or data_offsets")
        dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
        if dtype not in _SAFETENSORS_DTYPES:
            raise FlowError(f"{path}: tensor {name!r} has dtype {dtype}; supported: "
                            f"{', '.join(_SAFETENSORS_DTYPES)}")
        if (not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape)
                or not isinstance(offsets, list) or len(offsets) != 2
                or not all(isinstance(o, int) for o in offsets)):
            raise bad(f"tensor {name!r} has a malformed shape or data_offsets")
        np_dtype, fmt = _SAFETENSORS_DTYPES[dtype]
        begin, end = offsets
        shape = tuple(shape)
        count = int(np.prod(shape, dtype=np.int64))
        if end - begin != count * np.dtype(np_dtype).itemsize or begin < 0:
            raise bad(f"tensor {name!r} data_offsets {offsets} do not match its shape {shape}")
        if base + end > size:
            raise bad(f"tensor {name!r} ends at byte {base + end} but the file has {size} bytes")
        tensors.append(Tensor(name, shape, fmt, dtype,
                              _file_chunks(path, base + begin, np.dtype(np_dtype), count, fmt,
                                           f"{path}: tensor {name!r}")))
    return tensors


def read_tensors(path) -> list[Tensor]:
    """The tensors of a ``.npy``, ``.npz`` or ``.safetensors`` file (data read lazily)."""
    path = Path(path)
    if not path.is_file():
        raise FlowError(f"tensor file {path} not found")
    readers = {".npy": _npy, ".npz": _npz, ".safetensors": _safetensors}
    if path.suffix not in readers:
        raise FlowError(f"{path}: unsupported tensor file type {path.suffix!r}; "
                        f"expected one of {', '.join(readers)}")
    return readers[path.suffix](path)


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


__all__ = ["CHUNK_ROWS", "Tensor", "TensorAnalysis", "read_tensors", "write_safetensors"]

"""Operands of ``trainfab speedup``: the tensor files' naming rule, bf16 conversion, row
sampling and the chunked reading of the rows kept."""

from pathlib import Path

import numpy as np

from ... import FlowError

#: naming rule: suffix -> (pair kind, role)
SUFFIXES = {".serial": ("serial/parallel", "serial"), ".parallel": ("serial/parallel", "parallel"),
            ".act": ("act/weight", "serial"), ".weight": ("act/weight", "parallel")}
QUICK_ROWS = 16
#: --model's default --max-rows: token rows per layer (the 8 sentences have 154 tokens; all of
#: them take the 2-core machine about 40 minutes, 64 about 17)
MODEL_ROWS = 64
QUICK_WEIGHT_ROWS = 64


def to_bf16(x: np.ndarray, where: str) -> np.ndarray:
    """float32 values or FP32 (uint32) / bf16 (uint16) bit patterns → bf16 bits; refuses
    NaN/Inf."""
    from golden.common import float_to_bf16, fp32_to_bf16_rne

    x = np.asarray(x)
    if x.dtype == np.uint16:
        b = x
    elif x.dtype == np.uint32:
        b = fp32_to_bf16_rne(x)
    else:
        b = float_to_bf16(x.astype(np.float32))
    b = np.asarray(b, dtype=np.uint16)
    if b.size and (((b >> 7) & 0xFF) == 0xFF).any():
        raise FlowError(f"{where}: holds NaN or Inf values (after rounding to bfloat16); the "
                        "tile model takes finite values only")
    return b


def sample_rows(M: int, limit: int | None, key: str | None = None) -> np.ndarray:
    """Row indices kept by ``--max-rows``: all; or, without ``key``, ``i·M//limit`` for
    i < limit (evenly spaced); or, with ``key``, ``limit`` rows drawn without replacement by a
    generator seeded from ``key`` (a GEMM's name: the same rows in every run), in increasing
    order.  Evenly spaced rows can alias with the data's structure (a convolution's rows are
    images × pixels: a stride of 196 over 784-pixel images keeps four fixed pixels of each,
    border pixels whose gradients are mostly zero), so captures and files are sampled at
    random."""
    if limit is None or limit >= M:
        return np.arange(M)
    if key is not None:
        import zlib

        rng = np.random.default_rng(zlib.crc32(key.encode()))
        return np.sort(rng.choice(M, size=limit, replace=False)).astype(np.int64)
    return np.arange(limit, dtype=np.int64) * M // limit


def _read_rows(t, rows: np.ndarray, where: str) -> np.ndarray:
    """The bf16 bits of rows ``rows`` of a 2-D tensor, read chunk by chunk."""
    from ..tensors import CHUNK_ROWS

    M, K = t.shape
    want = np.zeros(M, bool)
    want[rows] = True
    per = max(1, CHUNK_ROWS * 8 // max(K, 1))  # whole rows per chunk
    out, r0 = [], 0
    for chunk in t.chunks(per * K):
        n = chunk.size // K
        block = chunk.reshape(n, K)
        sel = want[r0:r0 + n]
        if sel.any():
            out.append(to_bf16(block[sel], where))
        r0 += n
    return np.concatenate(out) if out else np.zeros((0, K), np.uint16)


def file_pairs(paths) -> list[dict]:
    """The GEMMs of the tensor files: ``[{name, serial: Tensor, parallel: Tensor, rule,
    file}]`` in file order; one-line :class:`FlowError` for any tensor outside the rule."""
    from ..tensors import read_tensors

    gemms = []
    many = len(paths) > 1
    for path in paths:
        tensors = read_tensors(path)
        found = {}
        for t in tensors:
            stem, dot, suffix = t.name.rpartition(".")
            if not dot or f".{suffix}" not in SUFFIXES or not stem:
                raise FlowError(f"{path}: tensor {t.name!r} does not follow the naming rule: "
                                "G.serial + G.parallel or G.act + G.weight")
            rule, role = SUFFIXES[f".{suffix}"]
            slot = found.setdefault((stem, rule), {})
            slot[role] = t
        for (stem, rule), slot in found.items():
            if len(slot) != 2:
                have, = slot.values()
                role, = slot
                other = {"serial/parallel": ("parallel", "serial"),
                         "act/weight": ("weight", "act")}[rule][role == "parallel"]
                raise FlowError(f"{path}: tensor {have.name!r} has no partner {stem}.{other} "
                                f"(pairs are G.serial + G.parallel or G.act + G.weight)")
            for t in slot.values():
                if len(t.shape) != 2:
                    raise FlowError(f"{path}: tensor {t.name!r} has shape {tuple(t.shape)}; a "
                                    "GEMM operand must be 2-D (rows, K)")
                if 0 in t.shape:
                    raise FlowError(f"{path}: tensor {t.name!r} is empty (shape "
                                    f"{tuple(t.shape)})")
            s, q = slot["serial"], slot["parallel"]
            if s.shape[1] != q.shape[1]:
                raise FlowError(f"{path}: GEMM {stem}: cannot multiply {s.name} {tuple(s.shape)} "
                                f"by {q.name} {tuple(q.shape)}: both need the reduction index "
                                f"on their last axis, and {s.shape[1]} != {q.shape[1]}")
            name = f"{Path(path).stem}:{stem}" if many else stem
            gemms.append({"name": name, "serial": s, "parallel": q, "rule": rule,
                          "file": str(path)})
    names = [g["name"] for g in gemms]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup:
        raise FlowError(f"GEMM {dup!r} appears twice (as G.serial/G.parallel and G.act/G.weight)")
    return gemms

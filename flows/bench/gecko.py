"""``trainfab bench``: the throughput of ``tensor-stats --analysis gecko`` and of the golden
Gecko compressor."""

import os
import time



def _bench_file_ok(path, n: int) -> bool:
    """Whether a cached bench tensor is a whole ``.npy`` of ``n`` float32 values."""
    import numpy as np

    try:
        with open(path, "rb") as f:
            np.lib.format.read_magic(f)
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
            data_start = f.tell()
        return (shape == (n,) and dtype == np.float32
                and os.path.getsize(path) == data_start + 4 * n)
    except (OSError, ValueError):
        return False


def bench_gecko(n: int = 25_000_000, seed: int = 0) -> dict:
    """Throughput of ``trainfab tensor-stats`` on a generated FP32 ``.npy`` tensor of ``n`` values.

    The tensor (N(0, 0.02), like trained weights) is written under ``build/bench`` and read back
    in chunks exactly as the command does; the golden ``compress`` speed is measured on 1 M values.
    """
    import numpy as np

    from golden.gecko.codec import GeckoConfig, compress

    from .. import build_dir
    from ..runs import ensure_dir
    from ..studies.gecko_stats import gecko_stats

    rng = np.random.default_rng(seed)
    out = ensure_dir(build_dir() / "bench", "bench data folder")
    path = out / f"normal_{n}.npy"
    if not _bench_file_ok(path, n):  # missing, or damaged (truncated, overwritten): rewrite it
        values = (rng.standard_normal(n) * 0.02).astype(np.float32)
        tmp = out / f".{path.name}.{os.getpid()}"
        with open(tmp, "wb") as f:
            np.save(f, values)
        os.replace(tmp, path)
    t0 = time.perf_counter()
    stats = gecko_stats(path, man_width=7)
    t1 = time.perf_counter()
    bits = (rng.standard_normal(1_000_000) * 0.02).astype(np.float32).view(np.uint32)
    t2 = time.perf_counter()
    compress(bits, GeckoConfig(man_width=7))
    t3 = time.perf_counter()
    return {"values": n, "file_mb": path.stat().st_size / 1e6,
            "stats_values_per_min": n / (t1 - t0) * 60,
            "gecko_ratio": stats["total"]["gecko_ratio"],
            "compress_values_per_s": bits.size / (t3 - t2)}


def gecko_table(scale: int = 1, seed: int = 0) -> str:
    """``trainfab bench``'s Gecko table."""
    g = bench_gecko(n=25_000_000 // scale, seed=seed)
    return (f"| Gecko | value |\n|---|---|\n"
            f"| tensor-stats on a {g['file_mb']:.0f} MB FP32 .npy ({g['values']:,} values) | "
            f"{g['stats_values_per_min'] / 1e6:,.0f} million values/min |\n"
            f"| golden compress() | {g['compress_values_per_s'] / 1e6:.1f} million values/s |\n"
            f"| Gecko footprint at man_width=7 / FP32 | {g['gecko_ratio']:.3f} |")


__all__ = ["bench_gecko", "gecko_table"]

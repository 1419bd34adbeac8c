"""``trainfab bench``: the speed of the HBFP golden model."""

import time


def bench_hbfp(scale: int = 1, seed: int = 0) -> dict:
    """``hbfp_matmul`` of ``512 x 1024`` by ``1024 x 512`` (``/ scale`` rows) with ``T = 128``,
    N(0, 1) operands; best of three runs."""
    import numpy as np

    from golden.equinox.hbfp import hbfp_matmul

    rng = np.random.default_rng(seed)
    B = 512 // scale
    X = rng.standard_normal((B, 1024)).astype(np.float32)
    W = rng.standard_normal((1024, 512)).astype(np.float32)
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        hbfp_matmul(X, W, 128)
        times.append(time.perf_counter() - t0)
    return {"shape": (B, 1024, 512), "T": 128, "seconds": min(times)}


def hbfp_table(scale: int = 1, seed: int = 0) -> str:
    r = bench_hbfp(scale, seed)
    B, K, N = r["shape"]
    return (f"| Equinox golden model | value |\n|---|---|\n"
            f"| hbfp_matmul {B}x{K} . {K}x{N}, T = {r['T']}, floor | {r['seconds']:.2f} s |")


__all__ = ["bench_hbfp", "hbfp_table"]

"""``trainfab bench``: the speed of the FAST golden model."""

import time


def bench_fast(scale: int = 1, seed: int = 0) -> dict:
    """Speed of the FAST golden model.

    * ``bfp_quantize`` over a tensor of ``4_000_000 / scale`` FP32 values (N(0, 1) with a wide
      exponent spread), truncation and stochastic rounding (random values drawn beforehand),
      and the LaneRNG draws for it; best of three runs;
    * ``bfp_gemm`` of ``256 x 1024`` by ``1024 x 256`` (``/ scale`` rows), paper mode,
      ``mx = my = 4``, FWD on a 16 x 16 array.
    """
    import numpy as np

    from golden.fast.numerics import LaneRNG, bfp_gemm, bfp_quantize_groups

    rng = np.random.default_rng(seed)
    n = 4_000_000 // scale // 16 * 16
    x = (rng.standard_normal(n) * np.exp2(rng.integers(-20, 20, n))).astype(np.float32)
    groups = x.reshape(-1, 16)
    rand = LaneRNG().draws(groups.shape[0])
    M = 256 // scale
    X = rng.standard_normal((M, 1024)).astype(np.float32)
    Y = rng.standard_normal((1024, 256)).astype(np.float32)
    return {"values": n,
            "trunc_values_per_s": n / _best(lambda: bfp_quantize_groups(groups, 4, "trunc")),
            "sr_values_per_s": n / _best(lambda: bfp_quantize_groups(groups, 4, "sr", rand)),
            "lfsr_draws_per_s": groups.shape[0] / _best(lambda: LaneRNG().draws(len(groups))),
            "gemm_shape": (M, 1024, 256),
            "gemm_s": _best(lambda: bfp_gemm(X, Y, 4, 4, "fwd", "paper", array=(16, 16)), 1)}


def _best(run, repeat: int = 3) -> float:
    """Best wall time of ``repeat`` runs (the first also pays for first-touch memory)."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return min(times)


def fast_table(scale: int = 1, seed: int = 0) -> str:
    r = bench_fast(scale, seed)
    M, K, N = r["gemm_shape"]
    return (f"| FAST golden model | value |\n|---|---|\n"
            f"| bfp_quantize, truncation, {r['values']:,} values | "
            f"{r['trunc_values_per_s'] / 1e6:.1f} million values/s |\n"
            f"| bfp_quantize, stochastic rounding (LaneRNG draws excluded) | "
            f"{r['sr_values_per_s'] / 1e6:.1f} million values/s |\n"
            f"| LaneRNG | {r['lfsr_draws_per_s'] / 1e3:.0f} thousand 16-lane draws/s |\n"
            f"| bfp_gemm {M}x{K} . {K}x{N}, paper mode, mx = my = 4 | {r['gemm_s']:.2f} s |")


__all__ = ["bench_fast", "fast_table"]

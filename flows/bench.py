"""Benchmarks of the golden models: speed of the batch models and cycles per group.

Run ``trainfab bench`` or ``python -m flows.bench`` (add ``--quick`` for a smaller run).  Numbers are printed as a
Markdown table and returned as a dict by :func:`bench_fpraker_pe`.
"""

import argparse
import time

import numpy as np

from golden.baseline import BaselineConfig, baseline_dot_batch
from golden.fpraker.pe import KMAX_LIMIT, PEConfig, pe_dot_batch, random_operands

#: the four PE variants of spec §3.5 / TV18, in the expected order of mean cycles per group
VARIANTS = (
    ("CSD + OB", PEConfig()),
    ("CSD, no OB", PEConfig(kmax=KMAX_LIMIT)),
    ("binary + OB", PEConfig(encoding="binary")),
    ("binary, no OB", PEConfig(encoding="binary", kmax=KMAX_LIMIT)),
)


def _data(rng, n, K, kind):
    A, B = random_operands(rng, n, K, "normal")
    if kind == "50% zeros":
        A = np.where(rng.random(A.shape) < 0.5, 0, A).astype(np.uint16)
    return A, B


def bench_fpraker_pe(n: int = 100_000, K: int = 64, n_cycles: int = 100_000, seed: int = 0):
    """Measure the FPRaker PE golden model.

    Parameters
    ----------
    n, K : int
        Rows and row length of the speed run (default PE config, N(0,1) data).
    n_cycles : int
        Groups per variant for the cycle statistics (each one group of 8 pairs from acc = 0,
        the setting of spec §3.5's prototype numbers).
    seed : int

    Returns
    -------
    dict
        ``mac_per_s`` of the FPRaker and baseline batch models, and ``cycles`` mapping
        (data, variant) to the mean cycles per 8-MAC group.
    """
    rng = np.random.default_rng(seed)
    A, B = random_operands(rng, n, K, "normal")
    t0 = time.perf_counter()
    pe_dot_batch(A, B, PEConfig())
    t1 = time.perf_counter()
    baseline_dot_batch(A, B, BaselineConfig())
    t2 = time.perf_counter()
    result = {"mac_per_s": {"fpraker.pe": n * K / (t1 - t0), "baseline.bf16_pe": n * K / (t2 - t1)},
              "cycles": {}}
    for kind in ("N(0,1)", "50% zeros"):
        A, B = _data(rng, n_cycles, 8, kind)
        for name, cfg in VARIANTS:
            result["cycles"][(kind, name)] = float(pe_dot_batch(A, B, cfg)[1].mean())
    return result


def bench_gecko(n: int = 25_000_000, seed: int = 0) -> dict:
    """Throughput of ``trainfab tensor-stats`` on a generated FP32 ``.npy`` tensor of ``n`` values.

    The tensor (N(0, 0.02), like trained weights) is written under ``build/bench`` and read back
    in chunks exactly as the command does; the golden ``compress`` speed is measured on 1 M values.
    """
    from golden.gecko import GeckoConfig, compress

    from . import BUILD
    from .tensors import gecko_stats

    rng = np.random.default_rng(seed)
    out = BUILD / "bench"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"normal_{n}.npy"
    if not path.exists():
        np.save(path, (rng.standard_normal(n) * 0.02).astype(np.float32))
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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10x smaller runs")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    scale = 10 if args.quick else 1
    r = bench_fpraker_pe(n=100_000 // scale, n_cycles=100_000 // scale, seed=args.seed)
    print("| golden model | MAC/s |\n|---|---|")
    for unit, speed in r["mac_per_s"].items():
        print(f"| {unit} | {speed:,.0f} |")
    print("\n| data | " + " | ".join(name for name, _ in VARIANTS) + " |")
    print("|---" * (len(VARIANTS) + 1) + "|")
    for kind in ("N(0,1)", "50% zeros"):
        row = " | ".join(f"{r['cycles'][(kind, name)]:.3f}" for name, _ in VARIANTS)
        print(f"| {kind} | {row} |")
    g = bench_gecko(n=25_000_000 // scale, seed=args.seed)
    print(f"\n| Gecko | value |\n|---|---|\n"
          f"| tensor-stats on a {g['file_mb']:.0f} MB FP32 .npy ({g['values']:,} values) | "
          f"{g['stats_values_per_min'] / 1e6:,.0f} million values/min |\n"
          f"| golden compress() | {g['compress_values_per_s'] / 1e6:.1f} million values/s |\n"
          f"| Gecko footprint at man_width=7 / FP32 | {g['gecko_ratio']:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

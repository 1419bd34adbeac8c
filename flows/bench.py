"""Benchmarks of the golden models: speed of the batch models and cycles per group.

Run ``python -m flows.bench`` (add ``--quick`` for a smaller run).  Numbers are printed as a
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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

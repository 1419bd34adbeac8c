"""``trainfab bench``: the FPRaker golden models' speed and cycle statistics, and the PE's
two exponent modes against exact sums."""

import time


def variants() -> tuple:
    """The four PE variants of spec §3.5 / TV18, in the expected order of mean cycles per group."""
    from golden.fpraker.pe import KMAX_LIMIT, PEConfig

    return (
        ("CSD + OB", PEConfig()),
        ("CSD, no OB", PEConfig(kmax=KMAX_LIMIT)),
        ("binary + OB", PEConfig(encoding="binary")),
        ("binary, no OB", PEConfig(encoding="binary", kmax=KMAX_LIMIT)),
    )


#: data sets of the cycle statistics
DATA = ("N(0,1)", "50% zeros")


def _data(rng, n, K, kind):
    import numpy as np

    from golden.fpraker.pe import random_operands

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
    import numpy as np

    from golden.baseline import BaselineConfig, baseline_dot_batch
    from golden.fpraker.pe import PEConfig, pe_dot_batch, random_operands

    rng = np.random.default_rng(seed)
    A, B = random_operands(rng, n, K, "normal")
    t0 = time.perf_counter()
    pe_dot_batch(A, B, PEConfig())
    t1 = time.perf_counter()
    baseline_dot_batch(A, B, BaselineConfig())
    t2 = time.perf_counter()
    result = {"mac_per_s": {"fpraker.pe": n * K / (t1 - t0), "baseline.bf16_pe": n * K / (t2 - t1)},
              "cycles": {}}
    for kind in DATA:
        A, B = _data(rng, n_cycles, 8, kind)
        for name, cfg in variants():
            result["cycles"][(kind, name)] = float(pe_dot_batch(A, B, cfg)[1].mean())
    return result


def pe_tables(scale: int = 1, seed: int = 0) -> str:
    """``trainfab bench``'s tables: MAC/s of both PE models, mean cycles per group."""
    r = bench_fpraker_pe(n=100_000 // scale, n_cycles=100_000 // scale, seed=seed)
    names = [name for name, _ in variants()]
    lines = ["| golden model | MAC/s |", "|---|---|"]
    lines += [f"| {unit} | {speed:,.0f} |" for unit, speed in r["mac_per_s"].items()]
    lines += ["", "| data | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    lines += [f"| {kind} | " + " | ".join(f"{r['cycles'][(kind, name)]:.3f}" for name in names)
              + " |" for kind in DATA]
    return "\n".join(lines)


def tile_tables(scale: int = 1, seed: int = 0) -> str:
    """``trainfab bench``'s tile table: MAC/s of the tile GEMM model's two engines on a
    MiniLM-sized layer (:func:`golden.fpraker.tile_batch.bench_tile_gemm`)."""
    from golden.fpraker.tile_batch import bench_tile_gemm

    return bench_tile_gemm(scale=scale, seed=seed)


def exp_mode_tables(scale: int = 1, seed: int = 0) -> str:
    """``trainfab bench``'s comparison of the PE's two exponent modes (spec §3.3 step E, the
    paper's once-per-group Block 1): on random dot products of K = 64 per operand kind, the
    share of results within the spec's TV18 tolerance ``2**-7 * sum|a*b|`` of the exact sum
    (``math.fsum`` of the exact float64 products), the largest and mean error as a fraction of
    that tolerance, and the mean cycles per 8-MAC group (standalone PE, no tile stalls)."""
    import math

    import numpy as np

    from golden.common import bf16_to_float
    from golden.fpraker.pe import PEConfig, pe_dot_batch, random_operands

    rng = np.random.default_rng(seed)
    n = max(200, 20_000 // scale)
    lines = ["| operands | exponent mode | within 2^-7·Σ|ab| | max error / bound | "
             "mean error / bound | cycles per group |", "|---|---|---|---|---|---|"]
    data = [(kind, *random_operands(rng, n, 64, kind))
            for kind in ("normal", "relu", "wide", "cancel")]
    real = _minilm_pairs(max(1, 16 // scale))
    if real is not None:
        data.append(real)
    for kind, A, B in data:
        prod = bf16_to_float(A).astype(np.float64) * bf16_to_float(B).astype(np.float64)
        exact = np.array([math.fsum(r) for r in prod])
        bound = np.abs(prod).sum(axis=1) / 128
        for mode in ("step", "group"):
            out, cyc = pe_dot_batch(A, B, PEConfig(exp_mode=mode))
            err = np.abs(bf16_to_float(out).astype(np.float64) - exact)
            rel = np.where(bound > 0, err / np.where(bound > 0, bound, 1), 0.0)
            lines.append(f"| {kind} | {mode} | {np.mean(err <= bound):.3%} | {rel.max():.3f} | "
                         f"{rel.mean():.4f} | {cyc.mean() / (A.shape[1] / 8):.3f} |")
    if real is None:
        lines.append("\n(MiniLM rows appear once `trainfab speedup --model minilm` or "
                     "`make demo` has fetched the model into build/models.)")
    return "\n".join(lines)


def _minilm_pairs(rows: int):
    """``("MiniLM …", A, B)``: every token of the study's sentences against the first ``rows``
    output features of MiniLM's first FFN output layer (K = 1536), bf16 — when the model is
    already in ``build/models`` (the bench does not fetch); else None."""
    import numpy as np

    from golden.common import float_to_bf16

    from ..studies import models

    if not (models.models_dir() / "minilm").is_dir():
        return None
    x, W = models.layer_operands("minilm", say=lambda msg: None)
    bits = lambda v: float_to_bf16(np.ascontiguousarray(v, dtype=np.float32))
    A = np.repeat(bits(x), rows, axis=0)
    B = np.tile(bits(W[:rows]), (x.shape[0], 1))
    return (f"MiniLM {models.POWER_LAYER} (K = {x.shape[1]})", A, B)


__all__ = ["variants", "bench_fpraker_pe", "pe_tables", "tile_tables", "exp_mode_tables"]

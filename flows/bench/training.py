"""The training GEMMs' speed: every number format of ``trainfab train`` beside NumPy's float32
matmul, on one training-sized layer in its three phases.

The float32 matmul is what an emulator that quantizes and then lets the BLAS accumulate runs,
so the ratio of a format's MAC/s to it is what exactness costs.  The layer is a 3 x 3
convolution of ResNet-18's first stage as one GEMM of :data:`SHAPE`: ``fwd`` is
``(M, K) @ (K, N)``, ``bwd_data`` ``(M, N) @ (N, K)`` and ``wgrad`` ``(K, M) @ (M, N)``,
on ReLU x N(0, 1) activations, N(0, 0.05) weights and N(0, 10**-3) gradients.

Each thread setting runs in a process of its own, started with OpenBLAS, OpenMP, MKL and
numba limited to that many threads (the limits only hold when set before NumPy loads):
``python -m flows.bench.training THREADS`` prints the measurements as JSON.
"""

import json
import os
import subprocess
import sys
import time

import numpy as np

#: (M, K, N) of the benchmarked layer: 256 output positions, 64 x 3 x 3 inputs, 64 outputs
SHAPE = (256, 576, 64)
#: the one-thread ratio each format should reach (the rest have no goal)
GOALS = {"bf16": 0.02, "int8": 0.02, "int12": 0.02, "hfp8": 0.02, "fp16": 0.02,
         "hbfp8": 0.02, "hbfp12": 0.02, "fast": 0.02, "fast-low": 0.02, "mid-bfp": 0.02,
         "fast-high": 0.02, "msfp12": 0.02, "fpraker": 0.002, "schrodinger": 0.9,
         "bitwave": 0.9}
#: thread counts measured, each in its own process
THREADS = (1, 2)
_ENV = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")


def shape(scale: int = 1) -> tuple:
    """The benchmarked ``(M, K, N)``: :data:`SHAPE`, with ``M`` and ``K`` divided by ``scale``
    (``--quick``: 10), at least 16."""
    M, K, N = SHAPE
    return max(16, M // scale), max(16, K // scale), N


def _operands(M, K, N, seed):
    rng = np.random.default_rng(seed)
    a = np.maximum(rng.standard_normal((M, K)), 0).astype(np.float32)
    w = (0.05 * rng.standard_normal((K, N))).astype(np.float32)
    g = (1e-3 * rng.standard_normal((M, N))).astype(np.float32)
    return {"fwd": (a, w), "bwd_data": (g, np.ascontiguousarray(w.T)),
            "wgrad": (np.ascontiguousarray(a.T), g)}


def _seconds(f, budget: float) -> float:
    """The fastest of repeated calls of ``f`` after one warm-up call (compilation), repeating
    until ``budget`` seconds have passed (at least twice)."""
    f()
    best, spent, n = float("inf"), 0.0, 0
    while n < 2 or spent < budget:
        start = time.perf_counter()
        f()
        took = time.perf_counter() - start
        best, spent, n = min(best, took), spent + took, n + 1
    return best


def measure(scale: int = 1, seed: int = 0) -> dict:
    """MAC/s of float32 and of every format, per phase, in this process's thread setting."""
    from flows.studies.train.formats import FORMATS, LayerInfo, RunInfo

    M, K, N = shape(scale)
    macs = M * K * N
    ops = _operands(M, K, N, seed)
    budget = 0.5 / scale
    run = RunInfo(layers=(LayerInfo("conv", "conv", (K, N)),), epochs=1, iterations=1,
                  seed=seed)
    rows = {"float32": {p: macs / _seconds(lambda x=x, y=y: np.matmul(x, y), budget)
                        for p, (x, y) in ops.items()}}
    for name, cls in FORMATS.items():
        if name == "fp32":
            continue
        fmt = cls(run)
        fmt.begin_step(1, 0)
        rows[name] = {p: macs / _seconds(lambda x=x, y=y, p=p: fmt.matmul(x, y, p, "conv"),
                                         budget)
                      for p, (x, y) in ops.items()}
    return rows


def _in_process(threads: int, scale: int, seed: int) -> dict:
    env = {**os.environ, **{k: str(threads) for k in _ENV}}
    out = subprocess.run([sys.executable, "-m", "flows.bench.training", str(threads),
                          str(scale), str(seed)], env=env, capture_output=True, text=True,
                         check=False)
    if out.returncode:
        raise RuntimeError(f"the {threads}-thread GEMM benchmark failed: "
                           f"{(out.stderr.strip().splitlines() or ['no message'])[-1]}")
    return json.loads(out.stdout)


def gemm_table(scale: int = 1, seed: int = 0) -> str:
    """``trainfab bench``'s training-GEMM table: per format and thread setting, M MAC/s in each
    phase, and the ratio of the three phases' total time to float32's."""
    M, K, N = shape(scale)
    lines = [f"Training GEMMs, layer M = {M}, K = {K}, N = {N} in its three phases "
             "(million MACs per second; ratio = float32 time / format time over the three "
             "phases)", "",
             "| format | threads | fwd | bwd_data | wgrad | ratio to float32 | goal (1 thread) |",
             "|---|---|---|---|---|---|---|"]
    for threads in THREADS:
        rows = _in_process(threads, scale, seed)
        f32_time = sum(1 / v for v in rows["float32"].values())
        for name, r in rows.items():
            ratio = f32_time / sum(1 / v for v in r.values())
            goal = GOALS.get(name)
            verdict = ("" if goal is None or threads != 1 else
                       f"≥ {goal:g}: {'met' if ratio >= goal else 'missed'}")
            lines.append(f"| {name} | {threads} | {r['fwd'] / 1e6:,.0f} | "
                         f"{r['bwd_data'] / 1e6:,.0f} | {r['wgrad'] / 1e6:,.0f} | "
                         f"{ratio:.4f} | {verdict} |")
    return "\n".join(lines)


__all__ = ["SHAPE", "GOALS", "THREADS", "shape", "measure", "gemm_table"]


if __name__ == "__main__":
    print(json.dumps(measure(int(sys.argv[2]), int(sys.argv[3]))))

"""Equinox/HBFP (``docs/specs/equinox.md``): the weight-stationary BFP systolic array, the BFP
quantizer and the priority request/instruction dispatcher.
"""

import time

from .. import FlowError
from ..studies import tensors
from ..bench import Bench
from ..registry import Unit
from ..report import Comparison, Part, Scaling
from ..studies.tensors import TensorAnalysis
from ..eda.timing import ClockTarget

ORDER = 50

UNITS = (
    Unit(name="equinox.array",
         summary="Equinox weight-stationary hbfp8 systolic array: n x n PEs of w 8-bit MACs, "
                 "input skew, exponent adder and FIFO, bf16 normalizers, just-in-time weight "
                 "reload",
         config="ArrayConfig", component="SystolicArray", preset="equinox-paper",
         extra_configs=({"n": 2, "w": 2}, {"n": 3, "w": 8}, {"n": 2, "w": 3, "conv_lat": 2}),
         test_sizes={"quick": 200, "standard": 2000, "full": 20000},
         synth_overrides={"n": 2, "w": 2},
         demo_config={"n": 2, "w": 2}),
    Unit(name="equinox.quantizer",
         summary="Equinox FP32/bf16 -> hbfp8 block quantizer: max exponent, floor/rne/rtz/"
                 "stochastic rounding (LFSR or injected random bits), one block per cycle",
         config="QuantizerConfig", component="Quantizer", preset="equinox-paper",
         extra_configs=({"rounding": "rne"}, {"rounding": "rtz"}, {"rounding": "stoch"},
                        {"in_fmt": "bf16", "rounding": "rne", "w": 3, "m": 4},
                        {"rounding": "stoch", "rbits": 5, "m": 16, "w": 1},
                        {"in_fmt": "bf16", "rounding": "stoch", "rbits": 8, "m": 12},
                        # register stages (every cycle checked against the cycle model)
                        {"w": 3, "rounding": "stoch", "rbits": 5, "pipeline": 3},
                        {"in_fmt": "bf16", "rounding": "rne", "w": 3, "m": 4, "pipeline": 4}),
         test_sizes={"quick": 500, "standard": 3000, "full": 100000},
         synth_overrides={"w": 4}),
    Unit(name="equinox.dispatcher",
         summary="Equinox request + instruction dispatcher: inference/training queues, "
                 "adaptive batching with null padding, PRIORITY/FAIR/INF_ONLY issue policy",
         config="DispatchConfig", component="Dispatcher", preset="equinox-paper",
         extra_configs=(
             # TV16 itself
             {"b_inf": 2, "thresh": 2, "t_batch": 6, "inf_len": 4, "trn_len": 12},
             {"policy": "fair", "b_inf": 4, "done_lag": 3, "inf_len": 6, "trn_len": 20},
             {"policy": "inf_only", "b_inf": 1, "inf_len": 5, "q_inf": 3},
             {"adaptive": False, "b_inf": 4, "q_inf": 4, "q_trn": 1, "inf_len": 8,
              "trn_len": 16},
             {"b_inf": 3, "thresh": 0, "t_batch": 1, "inf_len": 1, "trn_len": 2,
              "done_lag": 2, "q_trn": 2}),
         test_sizes={"quick": 4000, "standard": 25000, "full": 500000},
         synth_overrides={"b_inf": 4}),
)


#: PE widths the thesis's area model is checked at (§2.3, TV20: PE area against w)
PE_WIDTHS = (1, 2, 4, 8, 16)
#: array shapes ``(n, w)`` measured beside the preset's 4 x 4 x 4 for the N²W fit (TV20)
ARRAY_SHAPES = ((2, 2), (4, 1), (2, 4), (4, 2), (8, 1))

PARTS = tuple(
    Part(name=f"equinox.array/pe-w{w}", unit="equinox.array",
         component="PE", overrides={"w": w},
         summary=f"one PE of w = {w}: {w} signed 8 x 8 multipliers, adder tree, 24-bit "
                 "accumulator adder, weight and psum registers")
    for w in PE_WIDTHS
) + tuple(
    Part(name=f"equinox.array/{n}x{n}x{w}", unit="equinox.array", overrides={"n": n, "w": w},
         summary=f"the array at n = {n}, w = {w} (N²W = {n * n * w}), for the area fit")
    for n, w in ARRAY_SHAPES
)

SCALINGS = (
    Scaling(label="Equinox PE area against w (TV20)",
            members=tuple(f"equinox.array/pe-w{w}" for w in PE_WIDTHS),
            size=lambda c: c["w"], size_label="w",
            paper="the thesis's a_alu is per w-wide MAC lane (Eq. 4.1)"),
    Scaling(label="Equinox array area against N²W (TV20)",
            members=("equinox.array",) + tuple(f"equinox.array/{n}x{n}x{w}"
                                               for n, w in ARRAY_SHAPES),
            size=lambda c: c["n"] * c["n"] * c["w"], size_label="N²W",
            paper="the thesis's area model is linear in m·n²·w (Eq. 4.1: m n² w a_alu)"),
)

COMPARISONS = (
    Comparison(label="dispatcher / 16 x 16 x 8 array (256 PEs of w = 8)",
               numerator="equinox.dispatcher", denominator="equinox.array/pe-w8",
               denominator_count=256, paper_ratio=(0.79 + 0.49) / 185.60,
               source="Equinox Table 6.4: request + instruction dispatchers (0.79 + 0.49 mm²) / "
                      "MMU (185.60 mm², m arrays of n = 143); the array's skew, exponent FIFO "
                      "and normalizers are left out of ours"),
)

# --------------------------------------------------------------------------------------------
# HBFP quantization error of a tensor file

def hbfp_stats(path, *, m: int = 8, block: int = 64, rounding: str = "floor",
               progress=None) -> dict:
    """How well every tensor of a file survives HBFP quantization (spec §1.3-§1.5).

    The tensor's values, in storage order, are cut into blocks of ``block`` (the last one padded
    with zeros; with ``block`` dividing the last dimension these are row segments, the
    activations' blocking, A8), each quantized to ``m``-bit mantissas with ``rounding``
    (``floor``, ``rne`` or ``rtz``).  Per tensor and in total: the RRMSE against the FP32 values
    (the thesis's error metric, §1.11), the share of non-zero values that became zero, and the
    storage in bits per value (``m + 8 / block``) and its ratio to FP32.  Non-finite values are
    an error (A7).  Tensors are streamed in chunks, so memory stays bounded.
    """
    import numpy as np

    from golden.equinox.hbfp import ROUNDINGS, HBFPInputError, bfp_dequantize, bfp_quantize

    from golden.equinox.hbfp import M_RANGE

    if isinstance(m, bool) or not isinstance(m, int) or not M_RANGE[0] <= m <= M_RANGE[1]:
        raise FlowError(f"--hbfp-m {m!r} is invalid: allowed an integer in "
                        f"{M_RANGE[0]}..{M_RANGE[1]}")
    if isinstance(block, bool) or not isinstance(block, int) or not 1 <= block <= 1 << 16:
        raise FlowError(f"--hbfp-block {block!r} is invalid: allowed an integer in 1..65536")
    if rounding not in ROUNDINGS[:3]:
        raise FlowError(f"--hbfp-rounding {rounding!r} is invalid: allowed floor, rne or rtz")
    start = time.monotonic()
    rows = []
    for tensor in tensors.read_tensors(path):
        err2 = ref2 = 0.0
        nonzero = zeroed = 0
        size = block * 65536
        for k, chunk in enumerate(tensor.chunks(size)):
            x = (chunk.astype(np.uint32) << 16).view(np.float32) if tensor.fmt == "bf16" else \
                chunk.view(np.float32)
            pad = -x.size % block
            xb = np.concatenate([x, np.zeros(pad, np.float32)]).reshape(-1, block)
            try:
                e, M = bfp_quantize(xb, m, rounding)
            except HBFPInputError as exc:
                where = f", in the chunk of values from {k * size}" if k else ""
                raise FlowError(f"{path}: tensor {tensor.name!r}{where}: {exc}") from None
            ref = xb.astype(np.float64)
            err2 += float(((ref - bfp_dequantize(e, M, m)) ** 2).sum())
            ref2 += float((ref ** 2).sum())
            nz = ref != 0
            nonzero += int(nz.sum())
            zeroed += int((nz & (M == 0)).sum())
            if progress:
                progress(tensor.name, min((k + 1) * size, tensor.count), tensor.count)
        rows.append({"name": tensor.name, "shape": list(tensor.shape), "format": tensor.fmt,
                     "values": tensor.count, "err2": err2, "ref2": ref2, "nonzero": nonzero,
                     "zeroed": zeroed})
    total = {"name": "total", "values": sum(r["values"] for r in rows)}
    for key in ("err2", "ref2", "nonzero", "zeroed"):
        total[key] = sum(r[key] for r in rows)
    for r in rows + [total]:
        r["rrmse"] = (r["err2"] / r["ref2"]) ** 0.5 if r["ref2"] else 0.0
        r["zeroed_share"] = r["zeroed"] / r["nonzero"] if r["nonzero"] else 0.0
    seconds = time.monotonic() - start
    return {"file": str(path), "m": m, "block": block, "rounding": rounding,
            "bits_per_value": m + 8 / block, "ratio_to_fp32": (m + 8 / block) / 32,
            "tensors": rows, "total": total, "seconds": round(seconds, 3)}


def hbfp_markdown(s: dict) -> str:
    head = ("| tensor | values | RRMSE vs FP32 | non-zero values flushed to 0 |\n"
            "|---|---|---|---|")
    lines = [f"# HBFP quantization of {s['file']} (m = {s['m']}, blocks of {s['block']}, "
             f"{s['rounding']})", "",
             f"Storage: {s['bits_per_value']:.3f} bits per value, {s['ratio_to_fp32']:.3f} of "
             "FP32.", "", head]
    for r in s["tensors"] + ([s["total"]] if len(s["tensors"]) > 1 else []):
        lines.append(f"| {r['name']} | {r['values']} | {r['rrmse']:.3e} | "
                     f"{100 * r['zeroed_share']:.2f} % |")
    lines += ["", f"{s['total']['values']} values in {s['seconds']} s"]
    return "\n".join(lines) + "\n"


TENSOR_ANALYSES = (
    TensorAnalysis(
        name="hbfp", summary="HBFP quantization error (RRMSE) and storage per tensor",
        run=hbfp_stats, markdown=hbfp_markdown,
        options=((("--hbfp-m",), {"dest": "m", "type": int, "default": 8,
                                  "help": "HBFP mantissa bits, two's complement, 2 to 16 "
                                          "(default 8)"}),
                 (("--hbfp-block",), {"dest": "block", "type": int, "default": 64,
                                      "help": "values per shared exponent, 1 to 65,536 "
                                              "(default 64)"}),
                 (("--hbfp-rounding",), {"dest": "rounding", "default": "floor",
                                         "help": "floor, rne or rtz (default floor)"}))),
)


# --------------------------------------------------------------------------------------------
# benchmark

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


BENCHES = (
    Bench(name="hbfp", summary="HBFP golden model: tiled hbfp_matmul time", run=hbfp_table),
)


#: the configurations that close the quantizer's timing (``trainfab timing``); the Equinox
#: array keeps its single-cycle PE, as the thesis requires
TIMING = (
    ClockTarget(unit="equinox.quantizer", overrides={"pipeline": 2},
                note="floor rounding (the paper's), two stages"),
    ClockTarget(unit="equinox.quantizer", label="equinox.quantizer (stochastic)",
                overrides={"rounding": "stoch", "pipeline": 3},
                note="stochastic rounding, three stages"),
)

__all__ = ["UNITS", "TIMING", "PARTS", "SCALINGS", "COMPARISONS", "TENSOR_ANALYSES", "BENCHES", "hbfp_stats", "hbfp_markdown", "bench_hbfp",
           "hbfp_table"]

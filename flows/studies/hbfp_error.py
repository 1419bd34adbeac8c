"""The HBFP dot-product error study: how far Equinox's block-floating-point dot products are from
exact ones, against mantissa width, block size, accumulator width and dot-product length (the
four panels of the HBFP thesis's Fig. 3.1).

Every point is a batch of dot products computed by the golden datapath,
:func:`golden.equinox.hbfp.hbfp_matmul` (``X`` quantized per row segment of ``T``, ``W`` per
``T x T`` tile, ``floor`` rounding unless a series says ``rne``, ``A``-bit wrapping
accumulators, bfloat16 K-tile partials summed in bfloat16), and compared with the exact dot
products of the same FP32 operands, computed in float64 (exact to far below the errors
measured).

Error measure
-------------
For ``n`` dot products with exact values ``z_i`` (float64) and HBFP results ``ẑ_i`` (bfloat16
values)::

    RRMSE = sqrt(mean_i (ẑ_i - z_i)**2) / sqrt(mean_i z_i**2)

the root-mean-square error relative to the root-mean-square of the exact results (a fraction;
the tables print it in percent).  Normalizing by the RMS of the results rather than per dot
product keeps dot products that happen to be near zero from dominating.

Operands
--------
``W`` is ``(K, 64)`` standard normal; ``X`` is ``(samples / 64, K)`` and comes in two
distributions drawn from the same normal samples: ``gaussian`` (N(0, 1), like gradients) and
``relu`` (``max(N(0, 1), 0)``, like activations after a ReLU).  Both are drawn once per ``seed``
at the longest ``K``; shorter dot products use the leading columns of ``X`` and rows of ``W``.

Panels (the other parameters at the base point ``m = 8``, ``T = 16``, ``A = 24``, ``K = 256``)
---------------------------------------------------------------------------------------------
(a) mantissa width ``m`` = 2..16, with the accumulator that cannot wrap for that ``m`` and ``T``
    (:func:`flows.studies.train.formats.hbfp.acc_bits`), with ``floor`` and with ``rne``
    rounding;
(b) block size ``T`` = 1..256 (``T = 1``: every element has its own exponent), accumulator
    again never wrapping;
(c) accumulator width ``A`` = 14..28 at ``m = 8``, ``T = 16``: the golden accumulator wraps
    silently, so ``A`` matters only through wrapping (every product is exact and the normalizer
    reads the whole accumulator); the fraction of K-tile accumulations that wrapped is recorded
    beside the error (from :func:`golden.equinox.hbfp.tile_partials`);
(d) dot-product length ``K`` = 16..4096: longer dot products add more bfloat16-rounded K-tile
    partials;
(e) where the error comes from, against ``K`` at ``m`` = 8 and 16 (``T = 16``, an accumulator
    that never wraps), in three stages of the same datapath: **quantization** (the exact dot
    products of the quantized operands: the block formats' own error), **+ normalization**
    (each K-tile's partial normalized to bfloat16, the partials then summed exactly) and **+
    bf16 sum** (the partials summed in bfloat16 in ascending K order: the whole datapath).  At
    16 bits quantization is negligible and the error is the bfloat16 rounding of the K/T
    partials and of their running sum, which grows with the number of partials;
(f) the same three stages against the block size ``T`` at ``m = 8``, ``K = 256``: a larger
    block shares one exponent among more values, so its small values keep fewer bits
    (quantization), while it leaves fewer K-tile partials to sum.

``floor`` rounding (the Equinox quantizer's) moves every element of a block down, by half a
step on average: the weight errors are biased.  Against zero-mean operands the biased errors
cancel, but against the non-negative ``relu`` operands they add up coherently over the dot
product, so the ``relu`` error grows with ``K`` (and with ``T``, which coarsens the steps) where
the Gaussian one stays flat; ``rne`` has no such bias.

``T = 16`` is the block size of the ``hbfp8``/``hbfp12`` training formats (the default Equinox
array's ``n * w``).  For scale, the record also holds the RRMSE of merely rounding the exact
results to bfloat16 (the output format's own floor) and of NumPy's FP32 GEMM.

The thesis's reference point is quoted beside ours: 8-bit mantissas with a 24-bit accumulator
give dot products with about 2 % RRMSE.
"""

import json
from pathlib import Path
from typing import Callable

import numpy as np

from golden.common import bf16_to_float, float_to_bf16
from golden.equinox.hbfp import (bfp_dequantize, hbfp_matmul, hbfp_matmul_quantized,
                                 quantize_activations, quantize_weights, tile_partials)

from .train.formats.hbfp import T as BASE_T
from .train.formats.hbfp import acc_bits

#: dot products per row of ``X``: ``W`` has this many columns
COLS = 64
#: the base point every panel varies one parameter of
BASE = {"m": 8, "T": BASE_T, "A": 24, "K": 256}
#: the swept values of each panel
M_VALUES = tuple(range(2, 17))
T_VALUES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
A_VALUES = tuple(range(14, 29))
K_VALUES = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
#: mantissa widths of the error-source panel (e)
SOURCE_M = (8, 16)
#: the stages of panel (e), in datapath order
STAGES = ("quantization", "+ normalization", "+ bf16 sum")
#: operand distributions of ``X``
DISTRIBUTIONS = ("gaussian", "relu")
#: the thesis's reference point: (m, A, RRMSE)
THESIS_POINT = {"m": 8, "A": 24, "rrmse": 0.02}


class HBFPStudyError(ValueError):
    """An argument of the HBFP error study outside its range."""


def rrmse(approx: np.ndarray, exact: np.ndarray) -> float:
    """``sqrt(mean((approx - exact)**2)) / sqrt(mean(exact**2))`` in float64."""
    a = np.asarray(approx, dtype=np.float64)
    e = np.asarray(exact, dtype=np.float64)
    return float(np.sqrt(np.mean((a - e) ** 2)) / np.sqrt(np.mean(e ** 2)))


def error_sources(x, w, exact, T: int, m: int) -> tuple:
    """The RRMSE of HBFP's ``x @ w`` after each stage of :data:`STAGES`: the exact product of
    the quantized operands, the K-tile partials normalized to bfloat16 and summed exactly, and
    the golden result (the partials summed in bfloat16)."""
    A = acc_bits(m, T)
    ex, Mx = quantize_activations(x, T, m)
    ew, Mw = quantize_weights(w, T, m)
    B, K = np.shape(x)
    N = np.shape(w)[1]
    xq = bfp_dequantize(ex, Mx, m).reshape(B, -1)[:, :K]
    kt, nt = ew.shape
    tiles = Mw.reshape(kt, T, nt, T).transpose(0, 2, 1, 3).reshape(kt, nt, T * T)
    wq = bfp_dequantize(ew, tiles, m).reshape(kt, nt, T, T).transpose(0, 2, 1, 3).reshape(
        kt * T, nt * T)[:K, :N]
    parts, _ = tile_partials(ex, Mx, ew, Mw, T, m, A)
    summed = bf16_to_float(parts[..., :N]).astype(np.float64).sum(axis=0)
    full = bf16_to_float(hbfp_matmul_quantized(ex, Mx, ew, Mw, T, m, A)[:, :N])
    return rrmse(xq @ wq, exact), rrmse(summed, exact), rrmse(full, exact)


def _operands(seed: int, rows: int):
    rng = np.random.default_rng(seed)
    kmax = max(K_VALUES)
    x = rng.standard_normal((rows, kmax)).astype(np.float32)
    w = rng.standard_normal((kmax, COLS)).astype(np.float32)
    return {"gaussian": x, "relu": np.maximum(x, np.float32(0))}, w


def hbfp_error_study(out_dir: Path, *, seed: int = 0, samples: int = 8192,
                     progress: Callable | None = None) -> dict:
    """Run the four-panel HBFP error study and write ``hbfp.json``, ``hbfp.md`` and ``hbfp.png``.

    Parameters
    ----------
    out_dir : Path
        Folder for the three files (created if missing).
    seed : int
        Seeds the operands; the results are a deterministic function of ``seed`` and
        ``samples``.
    samples : int
        Dot products per point, a positive multiple of 64 (``X`` has ``samples / 64`` rows).
    progress : callable, optional
        ``progress(done, total)`` after every point.

    Returns
    -------
    dict
        ``{"config": {...}, "reference": {...}, "floors": {...}, "panels": {"m", "T", "A", "K"}}``
        where each panel is ``{"x": [values], "fixed": {...}, "series": {name: [RRMSE]}}`` (the
        ``A`` panel also has ``"wrapped": {distribution: [fraction]}``) and ``reference`` is the
        thesis's point (``m = 8``, ``A = 24``) beside ours at ``T = 16``, ``K = 256``, Gaussian
        operands.  Also written to ``hbfp.json``.

    Raises
    ------
    HBFPStudyError
        ``samples`` not a positive multiple of 64.
    """
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < COLS \
            or samples % COLS:
        raise HBFPStudyError(f"samples = {samples!r} is invalid: allowed a positive multiple "
                             f"of {COLS}")
    xs, w = _operands(seed, samples // COLS)
    exact = {(d, k): xs[d][:, :k].astype(np.float64) @ w[:k].astype(np.float64)
             for d in DISTRIBUTIONS for k in K_VALUES}
    total = (2 * len(M_VALUES) + 2 * len(T_VALUES) + len(A_VALUES) + len(K_VALUES)
             + len(SOURCE_M) * len(K_VALUES)) * len(DISTRIBUTIONS)
    done = 0

    def point(d, m, T, A, K, rounding="floor"):
        nonlocal done
        out = bf16_to_float(hbfp_matmul(xs[d][:, :K], w[:K], T, m, A, rounding))
        done += 1
        if progress is not None:
            progress(done, total)
        return rrmse(out, exact[d, K])

    b = BASE
    panels = {}
    series = {d: [point(d, m, b["T"], acc_bits(m, b["T"]), b["K"]) for m in M_VALUES]
              for d in DISTRIBUTIONS}
    for d in DISTRIBUTIONS:
        series[f"{d}, rne"] = [point(d, m, b["T"], acc_bits(m, b["T"]), b["K"], "rne")
                               for m in M_VALUES]
    panels["m"] = {"x": list(M_VALUES), "fixed": {"T": b["T"], "A": "never wraps",
                                                  "K": b["K"]}, "series": series}
    panels["T"] = {"x": list(T_VALUES),
                   "fixed": {"m": b["m"], "A": "never wraps", "K": b["K"]},
                   "series": {d: [point(d, b["m"], t, acc_bits(b["m"], t), b["K"])
                                  for t in T_VALUES] for d in DISTRIBUTIONS}}
    series, wrapped = {}, {}
    for d in DISTRIBUTIONS:
        ex, Mx = quantize_activations(xs[d][:, :b["K"]], b["T"], b["m"])
        ew, Mw = quantize_weights(w[:b["K"]], b["T"], b["m"])
        series[d] = [point(d, b["m"], b["T"], a, b["K"]) for a in A_VALUES]
        wrapped[d] = [float(tile_partials(ex, Mx, ew, Mw, b["T"], b["m"], a)[1][..., :COLS].mean())
                      for a in A_VALUES]
    panels["A"] = {"x": list(A_VALUES), "fixed": {"m": b["m"], "T": b["T"], "K": b["K"]},
                   "series": series, "wrapped": wrapped}
    panels["K"] = {"x": list(K_VALUES), "fixed": {"m": b["m"], "T": b["T"], "A": b["A"]},
                   "series": {d: [point(d, b["m"], b["T"], b["A"], k) for k in K_VALUES]
                              for d in DISTRIBUTIONS}}

    sources = {}
    for d in DISTRIBUTIONS:
        for m in SOURCE_M:
            rows = []
            for k in K_VALUES:
                rows.append(error_sources(xs[d][:, :k], w[:k], exact[d, k], b["T"], m))
                done += 1
                if progress is not None:
                    progress(done, total)
            for i, st in enumerate(STAGES):
                sources[f"{d}, m = {m}, {st}"] = [r[i] for r in rows]
    panels["sources"] = {"x": list(K_VALUES), "fixed": {"T": b["T"], "A": "never wraps"},
                         "series": sources}
    by_t = {}
    for d in DISTRIBUTIONS:
        rows = []
        for t in T_VALUES:
            rows.append(error_sources(xs[d][:, :b["K"]], w[:b["K"]], exact[d, b["K"]], t,
                                      b["m"]))
            done += 1
            if progress is not None:
                progress(done, total)
        for i, st in enumerate(STAGES):
            by_t[f"{d}, {st}"] = [r[i] for r in rows]
    panels["sources_T"] = {"x": list(T_VALUES), "fixed": {"m": b["m"], "A": "never wraps",
                                                          "K": b["K"]}, "series": by_t}

    ours = panels["A"]["series"]["gaussian"][A_VALUES.index(THESIS_POINT["A"])]
    floors = {}
    for d in DISTRIBUTIONS:
        z = exact[d, b["K"]]
        floors[d] = {
            "bf16_output": rrmse(bf16_to_float(float_to_bf16(z.astype(np.float32))), z),
            "fp32_gemm": rrmse(np.matmul(xs[d][:, :b["K"]], w[:b["K"]], dtype=np.float32), z),
        }
    res = {
        "config": {"seed": seed, "samples": samples, "cols": COLS, "base": dict(b),
                   "rounding": "floor", "distributions": list(DISTRIBUTIONS),
                   "metric": "sqrt(mean((hbfp - exact)^2)) / sqrt(mean(exact^2)), exact in "
                             "float64 from the FP32 operands"},
        "reference": {"m": THESIS_POINT["m"], "A": THESIS_POINT["A"], "T": b["T"], "K": b["K"],
                      "distribution": "gaussian", "rrmse": ours,
                      "thesis_rrmse": THESIS_POINT["rrmse"]},
        "floors": floors,
        "panels": panels,
    }
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "hbfp.json").write_text(json.dumps(res, indent=2) + "\n")
    (out_dir / "hbfp.md").write_text(markdown(res))
    plot(res, out_dir / "hbfp.png")
    return res


def _pts(series: dict, d: str, i: int) -> str:
    """How much the bf16 sum of the partials raises distribution ``d``'s RRMSE at point ``i``,
    in percentage points."""
    v = series[f"{d}, + bf16 sum"][i] - series[f"{d}, + normalization"][i]
    return f"{100 * v:.2f} points"


def _pct(v: float) -> str:
    return f"{100 * v:.3g} %"


def _table(title: str, name: str, panel: dict, extra: dict | None = None) -> list[str]:
    fixed = ", ".join(f"{k} = {v}" for k, v in panel["fixed"].items())
    cols = list(panel["series"]) + list(extra or {})
    lines = [f"### {title} ({fixed})", "", f"| {name} | " + " | ".join(cols) + " |",
             "|" + "---|" * (len(cols) + 1)]
    for i, x in enumerate(panel["x"]):
        cells = [_pct(panel["series"][s][i]) for s in panel["series"]]
        cells += [f"{100 * v[i]:.3g} %" for v in (extra or {}).values()]
        lines.append(f"| {x} | " + " | ".join(cells) + " |")
    return lines + [""]


def _sources_table(panel: dict) -> list[str]:
    """Panel (e), one row per K and mantissa width, and what its numbers say."""
    fixed = ", ".join(f"{k} = {v}" for k, v in panel["fixed"].items())
    ser = panel["series"]
    lines = [f"### (e) where the error comes from ({fixed})", "",
             "Each stage adds one step of the datapath: **quantization** = the exact dot "
             "products of the quantized operands; **+ normalization** = each K-tile's partial "
             "normalized to bf16, the partials summed exactly; **+ bf16 sum** = the partials "
             "summed in bf16 in ascending K order (the whole datapath, as in (d)).", "",
             "| K | m | " + " | ".join(f"{d}: {st}" for d in DISTRIBUTIONS for st in STAGES)
             + " |", "|---|---|" + "---|" * (len(DISTRIBUTIONS) * len(STAGES))]
    for m in SOURCE_M:
        for i, k in enumerate(panel["x"]):
            lines.append(f"| {k} | {m} | " + " | ".join(
                _pct(ser[f"{d}, m = {m}, {st}"][i]) for d in DISTRIBUTIONS for st in STAGES)
                + " |")
    lines.append("")
    ks = panel["x"]
    lo, hi = ks.index(min(ks)), ks.index(max(ks))
    g = lambda m, st, i, d="gaussian": _pct(ser[f"{d}, m = {m}, {st}"][i])  # noqa: E731
    top = max(SOURCE_M)
    lines += [f"At m = {top} the quantization error is {g(top, STAGES[0], hi)} at K = "
              f"{ks[hi]}: the floor is the bf16 datapath. Normalizing each K-tile's partial to "
              f"bf16 gives {g(top, STAGES[1], lo)} at K = {ks[lo]} and "
              f"{g(top, STAGES[1], hi)} at K = {ks[hi]}; summing the K/T partials in bf16 "
              f"brings it to {g(top, STAGES[2], lo)} and {g(top, STAGES[2], hi)} (Gaussian "
              "operands): the error grows with the number of bf16-rounded partials, K/T. At m = "
              f"{min(SOURCE_M)} the quantization error itself is {g(min(SOURCE_M), STAGES[0], lo)}"
              f" at K = {ks[lo]} and {g(min(SOURCE_M), STAGES[0], hi)} at K = {ks[hi]} "
              f"(`relu`: {g(min(SOURCE_M), STAGES[0], lo, 'relu')} and "
              f"{g(min(SOURCE_M), STAGES[0], hi, 'relu')}, the floor rounding's bias adding up).",
              ""]
    return lines


def markdown(res: dict) -> str:
    """The study's tables (RRMSE in percent), with the thesis's reference point beside ours."""
    ref, cfg = res["reference"], res["config"]
    b = cfg["base"]
    lines = [
        "# HBFP dot-product error",
        "",
        f"RRMSE = {cfg['metric']}; {cfg['samples']} dot products per point, seed "
        f"{cfg['seed']}, {cfg['rounding']} rounding unless a column says otherwise.  `X` "
        "is N(0, 1) (`gaussian`) or max(N(0, 1), 0) (`relu`), `W` is N(0, 1).  Base point: "
        f"m = {b['m']}, T = {b['T']}, A = {b['A']}, K = {b['K']}.",
        "",
        "| point | RRMSE |",
        "|---|---|",
        f"| thesis: {ref['m']}-bit mantissa, {ref['A']}-bit accumulator | about "
        f"{100 * ref['thesis_rrmse']:.0f} % |",
        f"| ours: m = {ref['m']}, A = {ref['A']}, T = {ref['T']}, K = {ref['K']}, "
        f"{ref['distribution']} | {_pct(ref['rrmse'])} |",
    ]
    for d, f in res["floors"].items():
        lines.append(f"| bf16 rounding of the exact results alone ({d}) | "
                     f"{_pct(f['bf16_output'])} |")
        lines.append(f"| NumPy FP32 GEMM ({d}) | {_pct(f['fp32_gemm'])} |")
    lines.append("")
    p = res["panels"]
    lines += _table("(a) mantissa width", "m", p["m"])
    lines += _table("(b) block size", "T", p["T"])
    lines += _table("(c) accumulator width", "A", p["A"],
                    {f"wrapped ({d})": v for d, v in p["A"]["wrapped"].items()})
    lines += _table("(d) dot-product length", "K", p["K"])
    if "sources" in p:
        lines += _sources_table(p["sources"])
    if "sources_T" in p:
        lines += _table("(f) where the error comes from, against block size", "T",
                        p["sources_T"])
        ser, ts = p["sources_T"]["series"], p["sources_T"]["x"]
        lo, hi = ts.index(1), ts.index(max(ts))
        lines += [f"Quantization alone (Gaussian) goes from {_pct(ser['gaussian, quantization'][lo])}"
                  f" at T = 1 to {_pct(ser['gaussian, quantization'][hi])} at T = {ts[hi]}: "
                  "a block's shared exponent is its largest value's, so its small values keep "
                  "fewer mantissa bits as the block grows; summing the partials in bf16 raises "
                  f"the error by {_pts(ser, 'gaussian', lo)} at T = 1 (K partials) and by "
                  f"{_pts(ser, 'gaussian', hi)} at T = {ts[hi]} (one partial).", ""]
    lines += ["`floor` moves every element of a block down (half a step on average): against "
              "the non-negative `relu` operands these biased errors add up over the dot product, "
              "so the `relu` error grows with K and T; `rne` has no bias.", "",
              "\"never wraps\": the narrowest accumulator, at least 24 bits, that holds T "
              "largest products.  \"wrapped\": fraction of the K-tile accumulations whose sum "
              "did not fit A bits (the accumulator wraps silently).", ""]
    return "\n".join(lines)


def plot(res: dict, path: Path) -> None:
    """The four panels, RRMSE on a log scale."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    titles = {"m": "(a) mantissa width m", "T": "(b) block size T",
              "A": "(c) accumulator width A", "K": "(d) dot-product length K"}
    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    ref = res["reference"]
    for ax, (key, panel) in zip(axes.flat, res["panels"].items()):
        for name, ys in panel["series"].items():
            ax.plot(panel["x"], [100 * v for v in ys], marker="o", ms=3, label=name,
                    ls="--" if "rne" in name else "-")
        if key in ("T", "K"):
            ax.set_xscale("log", base=2)
        fixed = ", ".join(f"{k} = {v}" for k, v in panel["fixed"].items())
        ax.set(yscale="log", xlabel=key, ylabel="RRMSE (%)", title=f"{titles[key]}\n{fixed}")
        ax.grid(True, which="both", alpha=0.3)
    axes.flat[2].plot([ref["A"]], [100 * ref["thesis_rrmse"]], ls="", marker="*", ms=12,
                      color="k", label="thesis: m = 8, A = 24")
    axes.flat[0].plot([ref["m"]], [100 * ref["thesis_rrmse"]], ls="", marker="*", ms=12,
                      color="k", label="thesis: m = 8, A = 24")
    for ax in axes.flat:
        ax.legend(fontsize=8)
        lo, hi = ax.get_ylim()
        ax.yaxis.set_major_formatter("{x:g}")
        # minor labels only where the axis shows fewer than three decade ticks
        majors = np.floor(np.log10(hi)) - np.ceil(np.log10(lo)) + 1
        ax.yaxis.set_minor_formatter("{x:g}" if majors < 3 else NullFormatter())
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


__all__ = ["hbfp_error_study", "rrmse", "markdown", "plot", "HBFPStudyError", "BASE",
           "M_VALUES", "T_VALUES", "A_VALUES", "K_VALUES", "DISTRIBUTIONS", "THESIS_POINT"]

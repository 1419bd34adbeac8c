"""Cycle-model studies: ``trainfab study dispatch``, the Equinox scheduler's inference tail
latency and training throughput against the offered inference load (thesis Fig 6.5, §6.2.6).

The study runs the golden dispatcher (:func:`golden.equinox.dispatch_run`) under each issue
policy — Equinox's priority scheduler, the fair-share round robin and the inference-only
baseline — with Poisson inference arrivals and training always available (thesis §6.1.4: "training
requests are always available").  Every policy sees the same arrival sequence at a given load
(one seed per load point), so the curves differ only by the policy.

Definitions
-----------
* Service time ``S = inf_len + done_lag``: cycles from a batch's start to its completion on an
  otherwise idle unit (:attr:`golden.equinox.DispatchConfig.service_time`); the model's service
  time is fixed, so it is also the mean.  Latency target: ``10 S`` (§3.4, the p99 target of
  Equinox_500µs).
* Offered load ``ρ``: arrival rate as a fraction of the inference-only capacity ``b_inf /
  (S + 1)`` requests per cycle (full batches back to back).
* A run: ``cycles / 10`` warm-up cycles, ``cycles`` measured cycles, then a drain of
  ``20 S + t_batch`` cycles without new arrivals (training goes on).  Latency is host arrival
  to completion pulse, over the requests arriving in the measured window; a request still
  unfinished after the drain counts as infinitely late.  p99 is the empirical quantile (the
  smallest latency at or above 99 % of the requests, no interpolation).  Training throughput is
  training instructions issued per cycle in the measured window (at most 1: one issue per
  cycle).
* Highest load meeting the target: the largest grid load up to which every grid load has
  ``p99 <= 10 S``; the throughput ratios compare these loads.
"""

import json
import math
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from .. import FlowError, build_dir

#: default grid of offered loads (fractions of the inference-only capacity)
LOADS = tuple(round(0.05 * k, 2) for k in range(1, 21)) + (1.1, 1.2)
POLICIES = ("priority", "fair", "inf_only")
#: measured cycles per run ``--cycles`` accepts (memory and time grow with them: 2 M cycles
#: take about 70 MB and 3 s a run, and a study makes three runs per load)
CYCLES_RANGE = (1000, 10_000_000)
#: measured cycles per run of `trainfab study dispatch` (default of --cycles)
CYCLES_DEFAULT = 200_000
#: the most load points a study runs
MAX_LOADS = 1000
#: the loads accepted (fractions of the inference-only capacity)
LOAD_RANGE = (0.0, 10.0)
#: the latency target in service times (§3.4)
TARGET = 10
#: the thesis's claims the study is set beside (§3.3, §5.3 Fig 6.5)
CLAIMS = ("priority scheduling matches the inference-only throughput under the latency target "
          "and beats fair-share by 1.3x (thesis §6.2.6, Fig 6.5)")


@dataclass(frozen=True)
class Point:
    """One (policy, load) run."""

    policy: str
    load: float
    #: offered requests per cycle
    rate: float
    #: requests arriving in the measured window, and how many of them completed
    requests: int
    completed: int
    #: p99 latency in cycles (``inf`` if more than 1 % never completed)
    p99: float
    #: mean latency of the completed requests, cycles
    mean: float
    #: training instructions per cycle in the measured window
    trn_ipc: float
    #: inference instructions per cycle in the measured window
    inf_ipc: float
    #: fraction of the measured cycles in priority mode
    prio_share: float


def p99(latencies) -> float:
    """The empirical 99th percentile (``inf`` entries allowed: requests never completed)."""
    x = np.sort(np.asarray(latencies, dtype=np.float64))
    if x.size == 0:
        return math.nan
    return float(x[math.ceil(0.99 * x.size) - 1])


def arrivals(cfg, load: float, cycles: int, seed: int, index: int) -> tuple:
    """The inference and training arrivals of one load point and the run's total length
    (warm-up + measured window + drain)."""
    from golden.equinox import poisson_arrivals, training_always

    warm = cycles // 10
    drain = 20 * cfg.service_time + cfg.timeout
    total = warm + cycles + drain
    gen = np.random.default_rng([seed, index])
    inf = poisson_arrivals(load * cfg.capacity, warm + cycles, gen)
    return inf, training_always(cfg, total), warm, total


def run_point(cfg, policy: str, load: float, cycles: int, seed: int, index: int) -> Point:
    """One policy at one load (arrivals from :func:`arrivals`)."""
    from golden.equinox import dispatch_run
    from golden.equinox.dispatcher import INF, TRN

    pcfg = replace(cfg, policy=policy)
    inf, trn, warm, total = arrivals(pcfg, load, cycles, seed, index)
    run = dispatch_run(pcfg, inf, trn, total)
    if policy != "inf_only" and not (run.trn_accept < 0).any():
        raise FlowError("internal: training ran dry during the study")
    lo, hi = warm, warm + cycles
    sel = (run.inf_arrival >= lo) & (run.inf_arrival < hi)
    lat = run.latency()[sel].astype(np.float64)
    done = lat >= 0
    lat[~done] = math.inf
    window = slice(lo - run.start, hi - run.start)
    return Point(policy=policy, load=load, rate=load * pcfg.capacity, requests=int(sel.sum()),
                 completed=int(done.sum()), p99=p99(lat),
                 mean=float(lat[done].mean()) if done.any() else math.nan,
                 trn_ipc=run.issued(TRN, lo, hi) / cycles, inf_ipc=run.issued(INF, lo, hi) / cycles,
                 prio_share=float(run.mode[window].mean()))


def max_load(points, target_cycles: float) -> float:
    """The largest load up to which every load meets the target (0 if the first misses)."""
    best = 0.0
    for p in sorted(points, key=lambda p: p.load):
        if not p.p99 <= target_cycles:
            break
        best = p.load
    return best


def dispatch_study(cfg, loads=LOADS, cycles: int = 200_000, seed: int = 1,
                   policies=POLICIES, progress=None) -> dict:
    """Run every policy at every load; returns the points and the summary.

    Parameters
    ----------
    cfg : golden.equinox.DispatchConfig
        Everything but ``policy``, which the study sets.
    loads : sequence of float
        Offered inference loads (fractions of the inference-only capacity), > 0.
    cycles : int
        Measured cycles per run.
    seed : int
        Seed of the arrivals; a load point's arrivals are the same for every policy.
    progress : callable, optional
        ``progress(done, total, point)`` after each run.
    """
    loads = sorted({float(x) for x in loads})
    points, total, k = [], len(loads) * len(policies), 0
    for index, load in enumerate(loads):
        for policy in policies:
            points.append(run_point(cfg, policy, load, cycles, seed, index))
            k += 1
            if progress:
                progress(k, total, points[-1])
    S = cfg.service_time
    best = {pol: max_load([p for p in points if p.policy == pol], TARGET * S)
            for pol in policies}

    def ratio(a, b):
        if a not in best or b not in best:
            return None
        return best[a] / best[b] if best[b] > 0 else math.inf if best[a] > 0 else math.nan

    return {"config": {k: getattr(cfg, k) for k in cfg.__dataclass_fields__ if k != "policy"},
            "service_time": S, "target_cycles": TARGET * S, "capacity": cfg.capacity,
            "cycles": cycles, "seed": seed, "loads": loads, "policies": list(policies),
            "points": [p.__dict__ for p in points], "max_load": best,
            "ratio_priority_fair": ratio("priority", "fair"),
            "ratio_priority_inf_only": ratio("priority", "inf_only")}


def _fmt_lat(v: float, S: int) -> str:
    return "never (>1 % unfinished)" if math.isinf(v) else f"{v:.0f} ({v / S:.1f} S)"


def format_ratio(r) -> str:
    """A throughput ratio for reports: ``1.90x``, ``inf`` or ``n/a``."""
    if r is None or (isinstance(r, float) and math.isnan(r)):
        return "n/a"
    return "inf" if math.isinf(r) else f"{r:.2f}x"


def markdown(res: dict) -> str:
    """The study as a markdown report: set-up, per-load table, summary beside the thesis."""
    S, pols = res["service_time"], res["policies"]
    cfg = res["config"]
    pts = {(p["policy"], p["load"]): p for p in res["points"]}
    lines = [
        "# Equinox dispatcher: inference p99 latency and training throughput vs load",
        "",
        f"Golden cycle model (`golden.equinox.dispatch_run`), {res['cycles']:,} measured cycles "
        f"per point, seed {res['seed']}; Poisson inference arrivals, training always "
        "available. Configuration: " + ", ".join(f"{k}={v}" for k, v in cfg.items()) + ".",
        "",
        (f"Service time S = inf_len + done_lag = {S} cycles; inference-only capacity "
         f"b_inf / (S + 1) = {res['capacity']:.4f} requests/cycle (load 1.0); latency target "
         f"{TARGET} S = {res['target_cycles']} cycles. Latency: host arrival to completion."),
        "",
        "| load | requests/cycle | " + " | ".join(f"{p} p99, cycles (S)" for p in pols) + " | "
        + " | ".join(f"{p} training instr/cycle" for p in pols if p != "inf_only") + " |",
        "|---|---|" + "---|" * (len(pols) + len([p for p in pols if p != "inf_only"])),
    ]
    for load in res["loads"]:
        row = [f"{load:g}", f"{load * res['capacity']:.4f}"]
        row += [_fmt_lat(pts[(p, load)]["p99"], S) for p in pols]
        row += [f"{pts[(p, load)]['trn_ipc']:.3f}" for p in pols if p != "inf_only"]
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "| policy | highest load meeting p99 <= 10 S | training instr/cycle there |",
              "|---|---|---|"]
    for p in pols:
        best = res["max_load"][p]
        ipc = f"{pts[(p, best)]['trn_ipc']:.3f}" if best > 0 else "-"
        lines.append(f"| {p} | {best:g} | {ipc} |")
    lines += [
        "",
        "| comparison | this model | thesis |",
        "|---|---|---|",
        ("| priority / fair-share, inference throughput under the target | "
         f"{format_ratio(res['ratio_priority_fair'])} | 1.3x |"),
        (f"| priority / inference-only | {format_ratio(res['ratio_priority_inf_only'])} | "
         "1.0x (\"matches\") |"),
        "",
        f"Thesis: {CLAIMS}. The load grid limits the resolution of the ratios.",
        "",
    ]
    return "\n".join(lines)


def plot(res: dict, path: Path) -> None:
    """p99 latency (in service times, log scale, target marked) and training throughput
    against load, one curve per policy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator

    S = res["service_time"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    top = 0
    for p in res["policies"]:
        pts = [q for q in res["points"] if q["policy"] == p]
        finite = [q for q in pts if math.isfinite(q["p99"])]
        top = max([top] + [q["p99"] / S for q in finite])
    top = max(top * 1.5, TARGET * 3)
    for p in res["policies"]:
        pts = sorted((q for q in res["points"] if q["policy"] == p), key=lambda q: q["load"])
        x = [q["load"] for q in pts]
        y = [q["p99"] / S if math.isfinite(q["p99"]) else top for q in pts]
        line, = ax1.plot(x, y, marker="o", ms=3, label=p)
        over = [(a, b) for a, b, q in zip(x, y, pts) if not math.isfinite(q["p99"])]
        if over:
            ax1.plot(*zip(*over), ls="", marker="^", color=line.get_color())
        if p != "inf_only":
            ax2.plot(x, [q["trn_ipc"] for q in pts], marker="o", ms=3, label=p,
                     color=line.get_color())
    ax1.axhline(TARGET, color="k", ls="--", lw=1, label=f"target {TARGET} S")
    ax1.set(yscale="log", xlabel="offered inference load (fraction of inference-only capacity)",
            ylabel=f"p99 latency / service time (S = {S} cycles)", ylim=(None, top * 1.2),
            title="inference p99 latency (▲: >1 % never finished)")
    ax1.yaxis.set_major_locator(FixedLocator([v for v in (1, 2, 3, 5, 10, 20, 50, 100, 200, 500,
                                                          1000) if v <= top * 1.2]))
    ax1.yaxis.set_major_formatter("{x:g}")
    ax1.yaxis.set_minor_locator(NullLocator())
    ax1.yaxis.set_minor_formatter(NullFormatter())
    ax2.set(xlabel="offered inference load", ylabel="training instructions per cycle",
            ylim=(0, 1.02), title="training throughput")
    for ax in (ax1, ax2):
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


#: the files the study writes into its output folder
OUTPUTS = ("dispatch.md", "dispatch.png", "dispatch.json")


def write(res: dict, outdir: Path | None = None) -> dict:
    """Write ``dispatch.md``, ``dispatch.png`` and ``dispatch.json`` into ``outdir`` (default
    ``build/study/dispatch``); returns their paths."""
    from ..runs import staged

    outdir = outdir or build_dir() / "study" / "dispatch"
    names = {"markdown": "dispatch.md", "plot": "dispatch.png", "json": "dispatch.json"}
    with staged(outdir, names=OUTPUTS, last=("dispatch.json",)) as work:
        (work / names["markdown"]).write_text(markdown(res))
        (work / names["json"]).write_text(json.dumps(res, indent=2, default=float) + "\n")
        plot(res, work / names["plot"])
    from ..runs import resolve

    outdir = resolve(outdir)
    return {k: outdir / v for k, v in names.items()}


def parse_loads(text: str) -> list[float]:
    """``0.1,0.5,0.9`` or ``start:stop:step`` (inclusive) → loads; :class:`FlowError` if bad
    (the message names the option and says why: not numbers, out of (0, 10], the start after
    the stop, more than :data:`MAX_LOADS` points)."""
    shown = text if len(text) <= 60 else text[:59] + "…"
    lo, hi = LOAD_RANGE
    try:
        if ":" in text:
            a, b, s = (float(v) for v in text.split(":"))
        else:
            loads = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise FlowError(f"--loads {shown!r}: expected comma-separated numbers or "
                        f"start:stop:step") from None
    if ":" in text:
        if not all(math.isfinite(v) for v in (a, b, s)):
            raise FlowError(f"--loads {shown!r}: start, stop and step must be finite numbers")
        if s <= 0:
            raise FlowError(f"--loads {shown!r}: the step must be positive")
        if a > b:
            raise FlowError(f"--loads {shown!r}: the start {a:g} is after the stop {b:g}")
        n = math.floor((b - a) / s + 1e-9) + 1
        if n > MAX_LOADS:
            raise FlowError(f"--loads {shown!r}: {n:,} load points; at most {MAX_LOADS:,} "
                            "(use a larger step)")
        loads = [round(a + k * s, 10) for k in range(n)]
    elif len(loads) > MAX_LOADS:
        raise FlowError(f"--loads: {len(loads):,} load points; at most {MAX_LOADS:,}")
    if not loads or any(not (lo < x <= hi) for x in loads):  # also false for nan
        raise FlowError(f"--loads {shown!r}: loads must be in ({lo:g}, {hi:g}] (fractions of "
                        f"the inference-only capacity)")
    return loads


def main_dispatch(cfg, loads, cycles: int, seed: int, outdir=None, quiet: bool = False) -> dict:
    """``trainfab study dispatch``: run, write, print the summary; progress on stderr.  The
    output folder and the numbers are checked before anything runs."""
    from ..runs import precheck

    precheck(outdir or build_dir() / "study" / "dispatch", OUTPUTS)
    lo, hi = CYCLES_RANGE
    if isinstance(cycles, bool) or not isinstance(cycles, int) or not lo <= cycles <= hi:
        raise FlowError(f"--cycles {cycles}: give {lo:,} to {hi:,} measured cycles per run")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
        raise FlowError(f"--seed {seed}: give a seed from 0 to 2**32-1")
    start = time.monotonic()

    tty = sys.stderr.isatty()

    def progress(k, total, p):
        text = (f"study dispatch: {k}/{total} runs ({p.policy} at load {p.load:g}), "
                f"{time.monotonic() - start:.0f} s")
        if tty:
            print("\r" + text, end="", file=sys.stderr, flush=True)
        elif p.policy == POLICIES[-1] or k == total:      # one line per load point
            print(text, file=sys.stderr, flush=True)

    res = dispatch_study(cfg, loads, cycles, seed, progress=None if quiet else progress)
    if tty and not quiet:
        print(file=sys.stderr)
    paths = write(res, outdir)
    res["paths"] = {k: str(v) for k, v in paths.items()}
    return res


__all__ = ["LOADS", "POLICIES", "CYCLES_RANGE", "MAX_LOADS", "LOAD_RANGE", "TARGET", "Point",
           "p99", "arrivals", "run_point", "max_load",
           "format_ratio", "dispatch_study", "markdown", "plot", "write", "parse_loads",
           "main_dispatch", "CYCLES_DEFAULT", "OUTPUTS"]

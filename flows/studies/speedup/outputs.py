"""The files of ``trainfab speedup``: the CSV of every GEMM, the plots (per GEMM, or per
capture and phase) and :func:`write`, which moves them into place with the JSON and the
markdown report."""

import csv
import io
import json
import math
from pathlib import Path

import numpy as np

from .gemm import PAPER_MODELS, PAPER_SPEEDUP
from .tables import _label, markdown

#: the files a run writes into its output folder
OUTPUTS = ("speedup.md", "speedup.json", "speedup.csv", "speedup.png")
#: the CSV columns of every GEMM (stall columns follow)
CSV_FIELDS = ("name", "orientation", "M", "N", "K", "macs", "tile_runs", "groups",
              "fpraker_cycles", "baseline_cycles", "speedup_same_tiles", "speedup_paper",
              "speedup_ours", "serial_values", "serial_terms", "serial_zero_fraction",
              "ideal_eq4", "lane_cycles", "useful", "useful_fraction")


#: the extra CSV columns of captured GEMMs
CSV_CAPTURE_FIELDS = ("capture", "epoch", "layer", "phase", "serial_operand", "chosen")


def to_csv(res: dict) -> str:
    causes = list(dict.fromkeys(k for r in res["records"] for k in r["stalls"]))
    fields = CSV_FIELDS + (CSV_CAPTURE_FIELDS if res["source"]["kind"] == "captures" else ())
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([*fields, *(f"stall_{c}" for c in causes),
                *(f"stall_fraction_{c}" for c in causes)])
    for r in res["records"]:
        w.writerow([("" if r[f] is None else r[f]) for f in fields]
                   + [r["stalls"].get(c, 0) for c in causes]
                   + [r["stall_fractions"].get(c, 0.0) for c in causes])
    return buf.getvalue()


def plot(res: dict, path: Path) -> None:
    """Per-GEMM iso-area speedup (36:8) with the Eq. 4 ideal, and the lane-cycle breakdown
    (captures: :func:`plot_captures`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if res["source"]["kind"] == "captures":
        return plot_captures(res, path)

    orients = list(res["summary"])
    fig, axes = plt.subplots(2, len(orients), figsize=(max(7, 6 * len(orients)), 8),
                             squeeze=False)
    for j, o in enumerate(orients):
        rs = [r for r in res["records"] if r["orientation"] == o]
        x = np.arange(len(rs))
        names = [_short_name(r["name"]) for r in rs]
        ax = axes[0][j]
        ax.bar(x, [r["speedup_paper"] for r in rs], color="tab:blue", label="iso-area 36:8")
        if res["area_ratio"] is not None:
            ax.plot(x, [r["speedup_ours"] for r in rs], "s", color="tab:green", ms=4,
                    label=f"iso-area ours (R={res['area_ratio']:.2f})")
        ideal = [r["ideal_eq4"] if math.isfinite(r["ideal_eq4"]) else np.nan for r in rs]
        ax.plot(x, ideal, "_", color="tab:red", ms=10, mew=2, label="Eq. 4 ideal")
        ax.axhline(PAPER_SPEEDUP, color="k", ls="--", lw=1, label="paper average 1.5x")
        ax.axhline(1.0, color="grey", lw=0.8)
        s = res["summary"][o]
        ax.set(title=f"serial = {_label(o, res)}: total {s['speedup_paper']:.2f}x (36:8)",
               ylabel="speedup over iso-area baseline")
        ax.set_xticks(x, names, rotation=90, fontsize=6)
        ax.legend(fontsize=7)
        ax.grid(axis="y", alpha=0.3)
        ax = axes[1][j]
        causes = list(dict.fromkeys(k for r in rs for k in r["stalls"]))
        bottom = np.array([r["useful_fraction"] for r in rs])
        ax.bar(x, bottom, color="tab:green", label="useful")
        colors = plt.get_cmap("tab10")
        for i, c in enumerate(causes):
            v = np.array([r["stall_fractions"].get(c, 0.0) for r in rs])
            ax.bar(x, v, bottom=bottom, color=colors(i % 10 if i != 2 else 9), label=c)
            bottom = bottom + v
        ax.set(ylabel="fraction of lane cycles", ylim=(0, 1.22), yticks=np.linspace(0, 1, 6),
               title="where lane cycles go (Fig. 15 analogue)")
        ax.set_xticks(x, names, rotation=90, fontsize=6)
        ax.legend(fontsize=7, loc="upper center", ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_captures(res: dict, path: Path) -> None:
    """Per capture: the iso-area speedup (36:8, chosen serial operand) per epoch and phase, and
    the lane-cycle breakdown per phase."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    caps = [c for c in res["captures"] if c["total"]]
    fig, axes = plt.subplots(2, max(1, len(caps)), figsize=(max(7, 5.5 * len(caps)), 8),
                             squeeze=False)
    colors = plt.get_cmap("tab10")
    for j, cap in enumerate(caps):
        ax = axes[0][j]
        epochs = [e["epoch"] for e in cap["epochs"]]
        for i, p in enumerate(cap["phases"]):
            ys = [e["phases"][p]["best"]["speedup_paper"] if p in e["phases"] else np.nan
                  for e in cap["epochs"]]
            ax.plot(epochs, ys, "o-", color=colors(i), ms=3, label=p)
        ax.plot(epochs, [e["total"]["best"]["speedup_paper"] for e in cap["epochs"]], "s-",
                color="k", ms=4, label="all phases")
        ax.axhline(PAPER_SPEEDUP, color="k", ls="--", lw=1, label="paper average 1.5x")
        for (m, v), ls in zip(PAPER_MODELS.items(), (":", "-.")):
            ax.axhline(v, color="grey", ls=ls, lw=1, label=f"paper {m} {v}x")
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set(title=f"{cap['label']}: run {cap['total']['best']['speedup_paper']:.2f}x "
                     "(36:8, chosen serial)", xlabel="epoch",
               ylabel="speedup over iso-area baseline")
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
        ax = axes[1][j]
        views = {**{p: v["best"] for p, v in cap["phases"].items()},
                 "all": cap["total"]["best"]}
        x = np.arange(len(views))
        causes = list(dict.fromkeys(k for v in views.values() for k in v["stall_fractions"]))
        bottom = np.array([v["useful_fraction"] for v in views.values()])
        ax.bar(x, bottom, color="tab:green", label="useful")
        for i, c in enumerate(causes):
            h = np.array([v["stall_fractions"].get(c, 0.0) for v in views.values()])
            ax.bar(x, h, bottom=bottom, color=colors(i % 10 if i != 2 else 9), label=c)
            bottom = bottom + h
        ax.set(ylabel="fraction of lane cycles", ylim=(0, 1.22), yticks=np.linspace(0, 1, 6),
               title="where lane cycles go (Fig. 15 analogue)")
        ax.set_xticks(x, list(views))
        ax.legend(fontsize=7, loc="upper center", ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _short_name(name: str) -> str:
    return (name.replace("encoder.layer.", "L").replace(".attention.self.", ".")
            .replace(".attention.output.dense", ".att_out").replace(".intermediate.dense", ".ffn1")
            .replace(".output.dense", ".ffn2"))


def write(res: dict, outdir: Path) -> dict:
    from ...runs import staged

    with staged(outdir, names=OUTPUTS, last=("speedup.json",)) as work:
        (work / "speedup.md").write_text(markdown(res))
        (work / "speedup.csv").write_text(to_csv(res))
        plot(res, work / "speedup.png")
        # JSON has no infinity: an unbounded ratio (no non-zero serial term) is null there
        (work / "speedup.json").write_text(json.dumps(_finite(res), indent=2, default=_json)
                                           + "\n")
    return {Path(n).suffix[1:]: outdir / n for n in OUTPUTS}


def _finite(obj):
    """``obj`` with every infinite or NaN float as ``None``."""
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    if isinstance(obj, (float, np.floating)) and not math.isfinite(obj):
        return None
    return obj


def _json(v):
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    return str(v)

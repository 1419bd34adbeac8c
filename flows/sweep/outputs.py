"""The outputs of a sweep: the table (``sweep.csv``, ``sweep.json``), the plots of each
measure against each swept field and of the area-fmax front, and ``sweep.md``."""

import csv
import io
import json
import math
from pathlib import Path

from golden import config_dict

from .plan import (CLOCK, LABELS, MEASURES, RESULTS, SYNTH_MEASURES, Plan, _canonical,
                   fmt_value)


def table(plan: Plan, records: dict) -> list[dict]:
    """One row per point in grid order: grid values, measures, ``error`` ('' when none)."""
    rows = []
    for p in plan.points:
        rec = records[p.hash]
        err = rec.get("error")
        row = dict(p.values)
        for m in plan.measures:
            row.update({c: rec["measures"].get(c) for c in MEASURES[m]})
        row["error"] = err.strip().splitlines()[0] if err else ""
        rows.append(row)
    return rows


def _csv_cell(v) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


#: the report files a sweep writes (plots come on top)
REPORT_FILES = ("sweep.csv", "sweep.json", "sweep.md")


def write_outputs(plan: Plan, records: dict, out: Path) -> dict:
    """Write ``sweep.csv``, ``sweep.json``, ``sweep.md`` and the plots; return their paths.
    They move into ``out`` together (:func:`flows.runs.staged`), replacing an earlier sweep's
    report and plots; the resumable store (``results.jsonl``, ``points/``) stays."""
    from ..runs import staged

    with staged(out, names=REPORT_FILES, keep=(RESULTS, "points"),
                last=("sweep.md",)) as work:
        plots = _write_report(plan, records, out, work)
    return {"csv": out / "sweep.csv", "json": out / "sweep.json", "markdown": out / "sweep.md",
            "plots": [out / p.name for p in plots]}


def _write_report(plan: Plan, records: dict, out: Path, work: Path) -> list[Path]:
    rows = table(plan, records)
    cols = plan.columns
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(cols)
    for row in rows:
        w.writerow([_csv_cell(row[c]) for c in cols])
    (work / "sweep.csv").write_text(buf.getvalue())
    doc = {**plan.identity(), "columns": cols,
           "rows": [{**row, "hash": p.hash, "config": config_dict(p.cfg),
                     "verilog_sha256": records[p.hash].get("verilog_sha256")}
                    for row, p in zip(rows, plan.points)]}
    (work / "sweep.json").write_text(json.dumps(doc, indent=2, ensure_ascii=False, default=str)
                                     + "\n")
    plots = write_plots(plan, rows, work)
    (work / "sweep.md").write_text(markdown(plan, rows, plots, out))
    return plots


def plotted_columns(plan: Plan) -> list[str]:
    return [c for m in plan.measures if m in SYNTH_MEASURES for c in MEASURES[m]]


def write_plots(plan: Plan, rows: list[dict], out: Path) -> list[Path]:
    """``<measure>_vs_<field>.png`` for every plotted column and every field with ≥ 2 values,
    and :data:`FRONT_PLOT` when area and fmax were measured at two points or more, into
    ``out`` (the sweep's private folder: an earlier sweep's plots that this one does not draw
    go when the report moves into place)."""
    fields = [f for f, v in plan.grid.items() if len(v) > 1]
    want = [(c, f) for c in plotted_columns(plan) for f in fields]
    names = {f"{c}_vs_{f}.png" for c, f in want}
    front = front_points(rows) if {"area_um2", "fmax_mhz"} <= set(plotted_columns(plan)) else []
    if len(front) > 0 and len(_measured(rows)) >= 2:
        names.add(FRONT_PLOT)
    if not names:
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    for col, field in want:
        path = out / f"{col}_vs_{field}.png"
        _plot(plt, plan, rows, col, field, path)
        paths.append(path)
    if FRONT_PLOT in names:
        paths.append(out / FRONT_PLOT)
        _plot_front(plt, plan, rows, front, paths[-1])
    return paths


#: the area-fmax plot of every measured point, its Pareto front drawn
FRONT_PLOT = "area_um2_vs_fmax_mhz.png"


def _measured(rows) -> list[dict]:
    return [r for r in rows if _is_number(r.get("area_um2")) and _is_number(r.get("fmax_mhz"))]


def front_points(rows) -> list[dict]:
    """The points no other point beats in both area and fmax (smaller or equal area and
    higher or equal fmax, one of them strictly): the area-fmax front, by rising fmax."""
    pts = _measured(rows)
    front = [r for r in pts
             if not any(o["area_um2"] <= r["area_um2"] and o["fmax_mhz"] >= r["fmax_mhz"]
                        and (o["area_um2"], o["fmax_mhz"]) != (r["area_um2"], r["fmax_mhz"])
                        for o in pts)]
    return sorted(front, key=lambda r: (r["fmax_mhz"], r["area_um2"]))


def _plot_front(plt, plan: Plan, rows, front, path: Path) -> None:
    pts = _measured(rows)
    fig, ax = plt.subplots(figsize=(6.4, 4.2), layout="constrained")
    ax.scatter([r["fmax_mhz"] for r in pts], [r["area_um2"] for r in pts], s=18, alpha=0.6,
               label="points")
    ax.plot([r["fmax_mhz"] for r in front], [r["area_um2"] for r in front], "o-", color="C3",
            ms=5, label="front (no point smaller and faster)")
    fields = [f for f, v in plan.grid.items() if len(v) > 1]
    for r in front:
        ax.annotate(",".join(f"{f}={fmt_value(r[f])}" for f in fields), (r["fmax_mhz"],
                    r["area_um2"]), fontsize=6, xytext=(3, 3), textcoords="offset points")
    ax.set(xlabel=LABELS.get("fmax_mhz", "fmax_mhz"), ylabel=LABELS.get("area_um2", "area_um2"),
           title=f"{plan.unit.name}: area against fmax")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _plot(plt, plan: Plan, rows, col: str, field: str, path: Path) -> None:
    others = [f for f, v in plan.grid.items() if f != field and len(v) > 1]
    xs_all = list(dict.fromkeys(row[field] for row in rows))
    numeric = all(_is_number(x) for x in xs_all)
    pos = {_canonical(x): (x if numeric else k) for k, x in enumerate(xs_all)}
    groups: dict[tuple, list] = {}
    for row in rows:
        key = tuple(row[o] for o in others)
        y = row[col]
        groups.setdefault(key, []).append(
            (pos[_canonical(row[field])], y if _is_number(y) else math.nan))
    fig, ax = plt.subplots(figsize=(6.4, 4.2), layout="constrained")  # laid out in one draw
    styles = ("-", "--", ":", "-.")
    for k, (key, pts) in enumerate(groups.items()):
        pts.sort()
        label = ", ".join(f"{o}={fmt_value(v)}" for o, v in zip(others, key)) or None
        # lines that coincide (a field without effect) stay visible: other dashes and sizes
        ax.plot([x for x, _ in pts], [y for _, y in pts], marker="os^Dv<>p"[k % 8],
                ms=max(3, 8 - k % 6), ls=styles[k % 4], label=label, alpha=0.85)
    ticks = [pos[_canonical(x)] for x in xs_all]
    ax.set_xticks(ticks, [fmt_value(x) for x in xs_all])
    ax.set(xlabel=field + (" (ns)" if field == CLOCK else ""), ylabel=LABELS.get(col, col),
           title=f"{plan.unit.name}: {col} vs {field}")
    ax.grid(True, alpha=0.3)
    if len(groups) > 1:
        ax.legend(fontsize=7, ncol=2 if len(groups) > 8 else 1)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _md_cell(v) -> str:
    if v is None or v == "":
        return "–"
    if isinstance(v, float):
        return f"{v:,.4g}" if abs(v) < 1000 else f"{v:,.1f}"
    return fmt_value(v) if isinstance(v, bool) else str(v).replace("|", "\\|")


def _command(plan: Plan, out: Path) -> str:
    parts = ["trainfab sweep", plan.unit.name]
    parts += [f"--grid {k}={','.join(fmt_value(v) for v in vs)}" for k, vs in plan.grid.items()]
    base = config_dict(plan.base)
    parts += [f"--set {k}={fmt_value(v)}" for k, v in base.items() if k not in plan.grid]
    parts.append(f"--measure {','.join(plan.measures)}")
    if plan.liberty:
        parts.append(f"--liberty {plan.liberty}")
    if "regress" in plan.measures:
        parts.append(f"--seed {plan.seed} --effort {plan.effort}")
    return " ".join(parts)


def markdown(plan: Plan, rows: list[dict], plots: list[Path], out: Path) -> str:
    cols = plan.columns
    base = ", ".join(f"{k}={fmt_value(v)}" for k, v in config_dict(plan.base).items()
                     if k not in plan.grid)
    grid = "; ".join(f"{k} ∈ {{{', '.join(fmt_value(v) for v in vs)}}}"
                     for k, vs in plan.grid.items())
    lines = [f"# Sweep: {plan.unit.name}", "",
             f"{len(rows)} points: {grid}. Base configuration: {base or 'every field is swept'}.",
             f"Measures: {', '.join(plan.measures)}"
             + (f"; liberty `{plan.liberty}`" if plan.liberty else "")
             + (f"; testbench seed {plan.seed}, effort {plan.effort}"
                if "regress" in plan.measures else "") + ".", "",
             f"Reproduce: `{_command(plan, out)}`", "",
             "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in rows:
        lines.append("| " + " | ".join(_md_cell(row[c]) for c in cols) + " |")
    lines.append("")
    ok = [r for r in rows if not r["error"]]
    for col, pick, what in (("area_um2", min, "smallest area"), ("fmax_mhz", max, "highest fmax")):
        vals = [r for r in ok if _is_number(r.get(col))]
        if vals:
            best = pick(vals, key=lambda r: r[col])
            label = ",".join(f"{k}={fmt_value(best[k])}" for k in plan.grid)
            lines.append(f"- {what}: {label}: {LABELS[col]} {_md_cell(best[col])}")
    errors = [r for r in rows if r["error"]]
    if errors:
        lines.append(f"- {len(errors)} points failed; see the error column and "
                     f"`{RESULTS}` (a rerun retries them)")
    if "regress" in plan.measures:
        failed = sum(1 for r in ok if r.get("passed") is False)
        lines.append(f"- regression: {len(ok) - failed} passed, {failed} failed")
    if plots:
        lines += ["", "## Plots", ""] + [f"![{p.stem}]({p.name})" for p in plots]
    return "\n".join(lines) + "\n"

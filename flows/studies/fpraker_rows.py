"""``trainfab study fpraker-rows``: what more PE rows per tile cost the FPRaker tile.

Every row of a tile shares its column's term encoder (the serial operand A, one value stream
per column), so more rows mean more PEs that one encoder lane serves.  Under ``lockstep``
column synchronization (``docs/specs/fpraker.md`` §5.3) a lane advances only when every PE of
the column has taken its term or is done with the lane, so the column goes at the pace of its
slowest PE term by term; under ``independent`` each PE walks the broadcast terms on its own and
the PEs of a column meet only at group boundaries.  The paper reports that going to more rows
per tile costs 6 % of performance on average (its §V-E, Fig. 19).

The study runs the same GEMMs on tiles of 1, 2, 4 and 8 rows (:data:`ROWS`) and 8 columns under
both protocols, on the golden cycle model :func:`golden.fpraker.gemm.tile_gemm`, and reports
the **cycles per group**, ``cycles / (tile_runs × groups)``: the time a tile takes for one group
of 8 MACs per PE, the same work per PE whatever the rows (a tile of R rows does N/R times fewer
tile runs on a GEMM of N parallel rows, so per-MAC throughput per PE is inversely proportional to
it).  The cost of R rows is ``cycles per group(R) / cycles per group(1) − 1``, and against 2
rows, the smallest tile whose exponent blocks are shared by a pair of PEs (one row pays no
row-pair skew), beside the paper's 6 %.

Operands: with no capture folder, two synthetic GEMMs of bf16 values (serial 256 × 256 N(0,1)
and ReLU'd N(0,1), i.e. half zeros, against a 64 × 256 N(0,1) parallel operand), drawn from the
seed; with a capture folder of ``trainfab train --capture`` (``DIR/manifest.json``), every GEMM
of its last captured epoch, as captured (serial = the engine's first operand), at most
:data:`CAPTURE_ROWS` rows of each operand, grouped by phase.  The parallel operand's rows are
cut to a multiple of 8 so that every tile height divides them.
"""

import dataclasses
import json
import time
from pathlib import Path

import numpy as np

from .. import FlowError

#: tile heights studied (8 columns, the paper's tile width)
ROWS = (1, 2, 4, 8)
COLS = 8
SYNCS = ("lockstep", "independent")
#: the paper's cost of more rows per tile (§V-E, Fig. 19: "reduces performance by 6 % on
#: average")
PAPER_ROWS_COST = 0.06
#: rows kept of each captured operand (evenly spaced)
CAPTURE_ROWS = 256
OUTPUTS = ("fpraker_rows.md", "fpraker_rows.json", "fpraker_rows.png")


def synthetic_operands(seed: int) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """``(name, S, P)`` of the two synthetic GEMMs (bf16 bit patterns), drawn from ``seed``."""
    from golden.common import float_to_bf16

    rng = np.random.default_rng(seed)
    P = float_to_bf16(rng.standard_normal((64, 256)).astype(np.float32))
    S = rng.standard_normal((256, 256)).astype(np.float32)
    return [("N(0,1) x N(0,1)", float_to_bf16(S), P),
            ("ReLU(N(0,1)) x N(0,1)", float_to_bf16(np.maximum(S, 0)), P)]


def capture_operands(folder) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """``(name, S, P)`` of every GEMM of the last captured epoch of the capture ``folder``
    (named ``e<epoch> <layer>.<phase>``), serial as captured, at most :data:`CAPTURE_ROWS`
    evenly spaced rows of each operand."""
    from . import captures
    from .speedup import _read_rows, file_pairs, sample_rows

    folder = Path(folder)
    if not captures.is_capture(folder):
        raise FlowError(f"{folder}: not a capture folder of `trainfab train --capture` (no "
                        "manifest.json); give e.g. build/training/cnn/capture/fpraker")
    man = captures.read_manifest(folder)
    if not man["gemms"]:
        raise FlowError(f"{folder}: the capture holds no GEMM (the run stopped before its "
                        "first epoch was written)")
    last = max(g["epoch"] for g in man["gemms"])
    out = []
    for g in man["gemms"]:
        if g["epoch"] != last:
            continue
        path = folder / g["file"]
        pair = {p["name"]: p for p in file_pairs([path])}.get(g["name"])
        if pair is None:
            raise captures.CaptureError(f"{path}: the manifest lists {g['name']}, but the file "
                                        "does not hold it")
        s, q = pair["serial"], pair["parallel"]
        S = _read_rows(s, sample_rows(s.shape[0], CAPTURE_ROWS), f"{path}: {s.name}")
        P = _read_rows(q, sample_rows(q.shape[0], CAPTURE_ROWS), f"{path}: {q.name}")
        out.append((f"e{last:03d} {g['name']}", S, P))
    return out


def rows_study(operands, base, rows=ROWS, syncs=SYNCS, progress=None) -> dict:
    """Cycles per group of every GEMM of ``operands`` (``(name, S, P)``) on tiles of ``rows``
    rows and :data:`COLS` columns under each of ``syncs``, the other fields from ``base`` (a
    :class:`~golden.fpraker.tile.TileConfig`).  Returns ``{"gemms": [...], "total": {sync:
    {rows: cycles per group over all GEMMs}}, "cost": {sync: {rows: cost against the first
    rows}}, "cost_vs_2": {sync: {rows > 2: cost against 2 rows}}, "stalls": {sync: {rows:
    {cause: lane-cycle fraction}}}}``."""
    from golden.fpraker.gemm import tile_gemm

    runs = [(sync, R) for sync in syncs for R in rows]
    gemms, totals = [], {}
    done = 0
    for name, S, P in operands:
        n = (P.shape[0] // 8) * 8
        if n == 0:
            continue
        P = P[:n]
        entry = {"name": name, "M": int(S.shape[0]), "N": n, "K": int(S.shape[1]),
                 "cycles_per_group": {}}
        for sync, R in runs:
            cfg = dataclasses.replace(base, rows=R, cols=COLS, sync=sync)
            r = tile_gemm(S, P, cfg)
            slots = int(r.tile_runs) * int(r.groups)
            entry["cycles_per_group"].setdefault(sync, {})[R] = int(r.cycles) / slots
            t = totals.setdefault((sync, R), {"cycles": 0, "slots": 0, "lane": 0, "stalls": {}})
            t["cycles"] += int(r.cycles)
            t["slots"] += slots
            t["lane"] += int(r.lane_cycles)
            for k, v in r.stalls.items():
                t["stalls"][k] = t["stalls"].get(k, 0) + int(v)
            done += 1
            if progress is not None:
                progress(done, len(runs) * len(operands), f"{name} {sync} {R} rows")
        gemms.append(entry)
    if not gemms:
        raise FlowError("no GEMM with at least 8 parallel rows to study")
    total = {sync: {R: totals[sync, R]["cycles"] / totals[sync, R]["slots"] for R in rows}
             for sync in syncs}
    return {
        "rows": list(rows), "cols": COLS, "syncs": list(syncs), "gemms": gemms, "total": total,
        "cost": {sync: {R: total[sync][R] / total[sync][rows[0]] - 1 for R in rows}
                 for sync in syncs},
        "cost_vs_2": ({sync: {R: total[sync][R] / total[sync][2] - 1 for R in rows if R > 2}
                       for sync in syncs} if 2 in rows else {}),
        "stalls": {sync: {R: {k: v / totals[sync, R]["lane"]
                              for k, v in totals[sync, R]["stalls"].items()}
                          for R in rows} for sync in syncs},
        "paper_cost": PAPER_ROWS_COST,
    }


def markdown(res: dict, source: str, cfg_text: str) -> str:
    rows, syncs = res["rows"], res["syncs"]
    first = rows[0]
    lines = ["# FPRaker tile: the cost of more rows", "",
             f"Operands: {source}. Tiles of {', '.join(map(str, rows))} rows and {res['cols']} "
             f"columns, {cfg_text}. Cycles per group = tile cycles / (tile runs × groups): the "
             "time of one group of 8 MACs per PE. Cost = cycles per group against "
             f"{first} row{'s' if first > 1 else ''} − 1; paper: more rows per tile cost "
             f"{res['paper_cost']:.0%} of performance on average (§V-E, Fig. 19).", "",
             "## All GEMMs", "",
             "| synchronization | " + " | ".join(f"{R} row{'s' if R > 1 else ''}" for R in rows) + " | "
             + " | ".join(f"cost of {R}" for R in rows[1:]) + " | paper |",
             "|---|" + "---|" * (2 * len(rows))]
    for sync in syncs:
        lines.append(f"| {sync} | " + " | ".join(f"{res['total'][sync][R]:.3f}" for R in rows)
                     + " | " + " | ".join(f"{res['cost'][sync][R]:+.1%}" for R in rows[1:])
                     + f" | −{res['paper_cost']:.0%} performance |")
    if res["cost_vs_2"]:
        more = [R for R in rows if R > 2]
        lines += ["", "Against 2 rows (the smallest tile whose exponent blocks serve a pair of "
                  "PEs; one row has no row-pair skew):", "",
                  "| synchronization | " + " | ".join(f"cost of {R} vs 2" for R in more)
                  + " | paper |", "|---|" + "---|" * (len(more) + 1)]
        for sync in syncs:
            lines.append(f"| {sync} | " + " | ".join(f"{res['cost_vs_2'][sync][R]:+.1%}"
                                                     for R in more)
                         + f" | −{res['paper_cost']:.0%} performance |")
    causes = sorted({k for sync in syncs for R in rows for k in res["stalls"][sync][R]})
    lines += ["", "## Stalls (share of lane-cycles)", "",
              "| synchronization | rows | " + " | ".join(causes) + " |",
              "|---|---|" + "---|" * len(causes)]
    for sync in syncs:
        for R in rows:
            st = res["stalls"][sync][R]
            lines.append(f"| {sync} | {R} | " + " | ".join(f"{st.get(c, 0):.1%}" for c in causes)
                         + " |")
    lines += ["", "## Per GEMM (cycles per group)", "",
              "| GEMM | M×K | N | " + " | ".join(f"{s} {R}" for s in syncs for R in rows) + " |",
              "|---|---|---|" + "---|" * (len(syncs) * len(rows))]
    for g in res["gemms"]:
        lines.append(f"| {g['name']} | {g['M']}×{g['K']} | {g['N']} | "
                     + " | ".join(f"{g['cycles_per_group'][s][R]:.3f}" for s in syncs
                                  for R in rows) + " |")
    return "\n".join(lines) + "\n"


def plot(res: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    rows = res["rows"]
    for sync, marker in zip(res["syncs"], "os"):
        ax.plot(rows, [res["total"][sync][R] for R in rows], marker=marker, label=sync)
    base = min(res["total"][s][rows[0]] for s in res["syncs"])
    ax.plot(rows, [base * (1 + res["paper_cost"]) if R > rows[0] else base for R in rows],
            ls=":", color="gray", label=f"paper: −{res['paper_cost']:.0%} for more rows")
    ax.set_xscale("log", base=2)
    ax.set_xticks(rows, [str(R) for R in rows])
    ax.set_xlabel("PE rows per tile (8 columns)")
    ax.set_ylabel("cycles per group")
    ax.set_title("FPRaker tile: cycles per group against rows")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def fpraker_rows_study(base, out: Path, capture=None, seed: int = 1, progress=None,
                       operands=None) -> dict:
    """Run the study (module docstring) into the folder ``out``: ``fpraker_rows.md``,
    ``.json`` and ``.png``.  ``base``: the tile configuration whose other fields every tile
    keeps; ``capture``: a capture folder, else the synthetic operands of ``seed``
    (``operands``: :func:`capture_operands` of ``capture`` when the caller read them already)."""
    t0 = time.monotonic()
    if capture is not None:
        operands = operands if operands is not None else capture_operands(capture)
        source = f"the last captured epoch of `{capture}` (serial as captured)"
    else:
        operands = synthetic_operands(seed)
        source = f"synthetic bf16 GEMMs, seed {seed}"
    res = rows_study(operands, base, progress=progress)
    fields = {f.name: getattr(base, f.name) for f in dataclasses.fields(base)
              if f.name not in ("rows", "cols", "sync")}
    cfg_text = ", ".join(f"{k}={v}" for k, v in fields.items())
    res.update(source=source, config=fields, seconds=time.monotonic() - t0)
    (out / "fpraker_rows.md").write_text(markdown(res, source, cfg_text))
    (out / "fpraker_rows.json").write_text(json.dumps(res, indent=2, default=str) + "\n")
    plot(res, out / "fpraker_rows.png")
    return res


__all__ = ["ROWS", "COLS", "SYNCS", "PAPER_ROWS_COST", "CAPTURE_ROWS", "synthetic_operands",
           "capture_operands", "rows_study", "markdown", "plot", "fpraker_rows_study"]

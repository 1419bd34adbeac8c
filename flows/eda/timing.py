"""The clock table: every pipelined unit at the configuration that closes its timing.

``trainfab timing`` synthesizes each :class:`ClockTarget` the families declare (``TIMING`` in
``flows/families/<family>.py``): the unit's paper configuration with the target's field
overrides (its ``pipeline`` depth, and ``contexts`` where the unit interleaves), ABC targeting
the target's period, and OpenSTA timing with buffer trees on the nets of more than
:data:`MAX_FANOUT` loads (as ``trainfab close --max-fanout``).  It prints one row per target
(area, gate equivalents, flip-flops, fmax, whether the target is met, the critical path) and
writes them as ``timing.json`` and ``timing.md`` into its output folder, each synthesis in a
folder of its own; ``--markdown FILE`` also writes the table there (``make timing`` writes
``docs/timing.md``).

A target that is missed is a result, not an error: its row says so and names the critical
path, and the run still exits 0.  ``-j N`` runs ``N`` syntheses at a time, the largest first
(the 8 x 8 tiles take tens of minutes each; the others seconds to minutes).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from .. import FlowError, build_dir
from ..declare import ClockTarget
from .close import _pool, meets, synth_depth

#: buffer trees on nets of more than this many loads (the figures of ``trainfab close``)
MAX_FANOUT = 16


def targets(names=()) -> list[ClockTarget]:
    """The families' clock targets (``TIMING``), or those of the units or labels ``names``;
    :class:`FlowError` for a name no target has."""
    from .. import families

    found = families.clock_targets()
    if not names:
        return found
    known = {t.unit for t in found} | {t.name for t in found}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise FlowError(f"no clock target for {', '.join(unknown)}; targets: "
                        f"{', '.join(t.name for t in found)}")
    return [t for t in found if t.unit in names or t.name in names]


def _folder(target: ClockTarget) -> str:
    return target.name.replace("/", "-").replace(" ", "-")


def _task(target: ClockTarget, liberty: str, out: Path) -> dict:
    from golden import config_dict

    from .. import registry
    from ..config import load_config

    unit = registry.get(target.unit)
    cfg = unit.make_config(load_config(unit), **target.overrides)
    return {"unit": unit.name, "config": config_dict(cfg), "clock_ns": target.clock_ns,
            "liberty": liberty, "outdir": str(out / _folder(target)), "max_fanout": MAX_FANOUT}


def row(target: ClockTarget, report: dict) -> dict:
    """One row of the table from a target and its synthesis' area report."""
    path = None
    if report.get("critical_path_ns") is not None:
        path = (f"{report.get('startpoint')} → {report.get('endpoint')}, "
                f"{report['critical_path_ns']:.2f} ns")
    return {"name": target.name, "unit": target.unit, "overrides": dict(target.overrides),
            "target_mhz": target.target_mhz, "clock_ns": target.clock_ns,
            "area_um2": report.get("area_um2"), "area_ge": report.get("area_ge"),
            "flip_flops": report.get("flip_flops"), "fmax_mhz": report.get("fmax_mhz"),
            "meets": meets(report), "critical_path": path, "note": target.note,
            "outdir": report.get("outdir")}


def timing(chosen: list[ClockTarget], *, liberty: str = "osu018", jobs: int = 1,
           outdir: Path | None = None, echo=print, command: str = "trainfab timing") -> dict:
    """Synthesize every target (``jobs`` at a time, the large ones first); the rows in the
    targets' order and the output folder.  Writes ``timing.json`` and ``timing.md`` there
    (the page stamped with ``command``)."""
    from ..runs import precheck, staged

    out = precheck(Path(outdir) if outdir else build_dir() / "timing",
                   ("timing.json", "timing.md"))
    order = sorted(range(len(chosen)), key=lambda k: not chosen[k].large)
    # the whole folder moves into place when every synthesis is done: an interrupted run
    # leaves the earlier table and its syntheses whole
    with staged(out, names=("timing.json", "timing.md"), last=("timing.md", "timing.json")) \
            as work:
        tasks = [_task(chosen[k], liberty, work) for k in order]
        echo(f"timing: {len(tasks)} syntheses ({jobs} at a time); output {out}")
        reports = _synthesize_all(chosen, order, tasks, jobs, echo)
        rows = [row(chosen[k], reports[k]) for k in range(len(chosen))]
        result = {"liberty": liberty, "max_fanout": MAX_FANOUT, "rows": rows,
                  "outdir": str(work)}
        (work / "timing.json").write_text(json.dumps(result, indent=1))
        (work / "timing.md").write_text(markdown(result, command))
    result["outdir"] = str(out)
    for r in rows:
        if r.get("outdir"):
            r["outdir"] = r["outdir"].replace(str(work), str(out), 1)
    return result


def _synthesize_all(chosen, order, tasks, jobs, echo) -> dict:
    """Every task's area report by the target's index (``jobs`` at a time), a line each."""
    start = time.monotonic()
    reports = {}

    def done(k, report):
        t = chosen[k]
        r = row(t, report)
        state = "meets" if r["meets"] else "misses"
        echo(f"[{len(reports)}/{len(tasks)}] {t.name}: {r['fmax_mhz']} MHz, {state} "
             f"{t.target_mhz:g} MHz ({time.monotonic() - start:.0f} s)")

    if jobs == 1 or len(tasks) == 1:
        for k, task in zip(order, tasks):
            reports[k] = synth_depth(task)
            done(k, reports[k])
    else:
        from concurrent.futures import as_completed

        with _pool(min(jobs, len(tasks))) as pool:
            futures = {pool.submit(synth_depth, task): k for k, task in zip(order, tasks)}
            for future in as_completed(futures):
                k = futures[future]
                reports[k] = future.result()
                done(k, reports[k])
    return reports


def _num(v, fmt: str) -> str:
    return "—" if v is None else fmt.format(v)


def _config(overrides: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in overrides.items()) or "depth 0"


def table(rows: list[dict]) -> str:
    """The rows as a markdown table."""
    lines = ["| unit | configuration | target MHz | area µm² | GE | flip-flops | fmax MHz "
             "| meets | critical path | what the stages are |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| `{r['name']}` | {_config(r['overrides'])} | {r['target_mhz']:g} | "
            f"{_num(r['area_um2'], '{:,.0f}')} | {_num(r['area_ge'], '{:,.0f}')} | "
            f"{_num(r['flip_flops'], '{:,}')} | {_num(r['fmax_mhz'], '{:.1f}')} | "
            f"{'yes' if r['meets'] else '**no**'} | {r['critical_path'] or '—'} | "
            f"{r['note']} |")
    return "\n".join(lines)


def markdown(result: dict, command: str = "trainfab timing") -> str:
    """The table as the generated page ``docs/timing.md``, stamped with the command, the commit,
    the date, the machine and the tools' versions."""
    from ..host import commit, machine
    from .tools import versions

    v = versions()
    tools = ", ".join(f"{k} {v[k]}" for k in ("yosys", "opensta", "amaranth"))
    rows = result["rows"]
    missed = [r["name"] for r in rows if not r["meets"]]
    summary = (f"{len(rows) - len(missed)} of {len(rows)} configurations meet their target"
               + (f"; missed: {', '.join(f'`{m}`' for m in missed)}." if missed else "."))
    return "\n".join([
        "# Timing closure",
        "",
        f"<!-- generated by `{command}`; do not edit -->",
        "",
        f"Generated by `{command}` at commit {commit()} on {time.strftime('%Y-%m-%d')}, on "
        f"{machine()}. Tools: {tools}. Liberty: OSU 0.18 µm (`{result['liberty']}`).",
        "",
        "Every pipelined unit at its paper configuration with the stages (and, where the unit "
        "interleaves, the contexts) that close its timing: ABC targets the period of the "
        f"target clock, and OpenSTA times the netlist with buffer trees on the nets of more "
        f"than {result['max_fanout']} loads (`--max-fanout {result['max_fanout']}`). The "
        "targets are 200 MHz for the units and 150 MHz for the 8 × 8 tiles. yosys/ABC results "
        "move 2–5 % from run to run. What each depth costs, and the critical path of every "
        "depth `trainfab close` tried, is in [units.md](units.md).",
        "",
        summary,
        "",
        table(rows),
        "",
    ])


__all__ = ["MAX_FANOUT", "targets", "timing", "row", "table", "markdown"]

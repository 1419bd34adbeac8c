"""Register-to-register paths of a synthesized unit: ``trainfab paths DIR --between FROM TO``.

Reads a folder written by ``trainfab area`` (or ``close``, ``report``, ``make paper``): its
``area.json`` names the unit's top module, liberty and clock period, and the mapped netlist
``<top>.mapped.v`` lies beside it.  For each ``--between FROM TO`` pair OpenSTA gives the worst
path from the cells matching ``FROM`` to those matching ``TO`` (glob patterns over the
flattened netlist's instance names: a register's flip-flops keep the register's hierarchical
name with a ``_reg`` suffix, e.g. ``pe0_0.accumulator.x[3]_reg``, so ``pe0_0.accumulator.x*``
names the whole register).  The table gives each path's length (the clock period it alone would
need, setup included: the run's period minus the path's slack), the clock that allows, and the
path's start and end.  A loop — a register back to itself through logic — bounds the clock
however many stages are added around it; this is how the docs name the loops that bound a
unit.

With ``--max-fanout N`` the same pairs are also timed on a copy of the netlist with a buffer
tree on every net of more than ``N`` loads that a cell drives (:mod:`flows.eda.fanout`; yosys
+ ABC leave the nets flip-flops drive unbuffered), with the whole design's worst path on both
netlists and the buffers' count and area: how much of a path is missing buffering rather than
the design's logic.

Errors (one line, exit status 2): a folder without ``area.json`` or the mapped netlist, a
pattern that matches no cell (the message lists the netlist's register names), a missing
OpenSTA, a tool failure.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from .. import FlowError

#: most register names a "no cell matches" error lists
SHOWN_REGISTERS = 40


def registers(netlist_text: str) -> list[str]:
    """The register names of a mapped netlist: flip-flop instance names without their bit
    index and ``_reg`` suffix, in order of first appearance."""
    names = re.findall(r"^\s*DFF\w*\s+\\?(\S+)\s*\(", netlist_text, re.M)
    return list(dict.fromkeys(re.sub(r"(\[\d+\])?_reg$", "", n) for n in names))


def _tcl_string(s: str) -> str:
    """``s`` as one Tcl word (braces keep glob characters and brackets literal)."""
    if any(c in s for c in "{}\\\n"):
        raise FlowError(f"pattern {s!r}: braces, backslashes and newlines are not allowed")
    return "{" + s + "}"


def script(run: dict, netlist: str, pairs: list[tuple[str, str]]) -> str:
    """The OpenSTA script: the run's clock and I/O constraints (as ``trainfab area`` times
    it), then per pair one line ``PATH k slack start end`` or ``NONE k from|to|path``."""
    from .synth import sta_script

    head = sta_script(run["top"], Path(netlist), Path(run["liberty"]), run["clock_ns"],
                      run["has_clock"])
    head = head.split("report_checks", 1)[0]
    body = []
    for k, (a, b) in enumerate(pairs):
        body.append(f"""set f [get_cells -quiet {_tcl_string(a)}]
set t [get_cells -quiet {_tcl_string(b)}]
if {{[llength $f] == 0}} {{ puts "NONE {k} from" }} elseif {{[llength $t] == 0}} {{ puts "NONE {k} to" }} else {{
  set p [find_timing_paths -from $f -to $t -path_delay max]
  if {{[llength $p] == 0}} {{ puts "NONE {k} path" }} else {{
    foreach e $p {{ puts "PATH {k} [get_property $e slack] [get_full_name [get_property $e startpoint]] [get_full_name [get_property $e endpoint]]" }}
  }}
}}""")
    return head + "\n".join(body) + "\nputs \"WORST\"\nreport_checks -path_delay max -digits 3\nexit\n"


def load_run(folder: Path) -> tuple[dict, Path]:
    """``(run, netlist)`` of an area folder: ``run`` holds ``top``, ``liberty``, ``clock_ns``
    and ``has_clock``.  A ``close`` folder is read through the synthesis of its chosen depth
    (``pipeline<d>/``, which its ``close.json`` names)."""
    from .. import registry
    from ..options import check_clock

    folder = Path(folder)
    if not folder.is_dir():
        raise FlowError(f"{folder}: not a folder (give a folder written by `trainfab area`)")
    close = folder / "close.json"
    if close.is_file() and not any(folder.glob("*.mapped.v")):
        try:
            best = json.loads(close.read_text())["best"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise FlowError(f"{close}: not a close report ({e})") from None
        if not isinstance(best, int) or isinstance(best, bool) or best < 0:
            raise FlowError(f"{close}: its chosen depth {best!r} is not a pipeline depth")
        folder = folder / f"pipeline{best}"
    report = folder / "area.json"
    if not report.is_file():
        raise FlowError(f"{folder}: no area.json (give a folder written by `trainfab area`)")
    try:
        r = json.loads(report.read_text())
        unit = registry.get(r["unit"])
        run = {"unit": unit.name, "top": unit.top, "liberty": r["liberty"],
               "clock_ns": r["clock_ns"]}
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise FlowError(f"{report}: not an area report ({e})") from None
    try:
        run["clock_ns"] = check_clock(run["clock_ns"])
    except FlowError:
        raise FlowError(f"{report}: clock_ns {run['clock_ns']!r} is not a clock period "
                        "trainfab times at (a number of nanoseconds from 0.01 to 100000)") \
            from None
    if not isinstance(run["liberty"], str):
        raise FlowError(f"{report}: not an area report (liberty {run['liberty']!r})")
    netlist = folder / f"{run['top']}.mapped.v"
    if not netlist.is_file():
        raise FlowError(f"{folder}: no mapped netlist {netlist.name}")
    if not Path(run["liberty"]).is_file():
        raise FlowError(f"{report}: its liberty {run['liberty']} is gone")
    run["has_clock"] = bool(re.search(r"^\s*input\s+clk\s*;", netlist.read_text(), re.M))
    return run, netlist


def _query(sta: str, run: dict, netlist: Path, pairs, tmp: Path, tag: str) -> tuple[dict, dict]:
    """OpenSTA on ``netlist``: the worst path of each pair (index → row fields or ``None``)
    and the whole design's worst path (:func:`~flows.eda.synth.parse_sta`)."""
    from .synth import _run, parse_sta

    tcl = tmp / f"paths{tag}.tcl"
    tcl.write_text(script(run, str(netlist.resolve()), pairs))
    out = _run([sta, "-no_splash", "-exit", str(tcl)], tmp / f"paths{tag}.log", "OpenSTA")
    found: dict[int, dict] = {}
    for line in out.split("WORST", 1)[0].splitlines():
        parts = line.split()
        if parts[:1] == ["NONE"]:
            k, what = int(parts[1]), parts[2]
            if what == "path":
                found[k] = None
                continue
            pattern = pairs[k][0 if what == "from" else 1]
            regs = registers(netlist.read_text())
            shown = ", ".join(regs[:SHOWN_REGISTERS]) + (" …" if len(regs) > SHOWN_REGISTERS
                                                         else "")
            raise FlowError(f"no cell of {netlist.name} matches {pattern!r}; its registers: "
                            f"{shown}")
        if parts[:1] == ["PATH"] and len(parts) == 5:
            k, slack = int(parts[1]), float(parts[2])
            ns = run["clock_ns"] - slack
            found[k] = {"ns": round(ns, 3), "mhz": round(1000 / ns, 1) if ns > 0 else None,
                        "start": parts[3], "end": parts[4]}
    worst = parse_sta(out.split("WORST", 1)[-1], run["clock_ns"])
    return found, worst


def paths(folder, pairs: list[tuple[str, str]], max_fanout: int | None = None):
    """The worst path of each ``(FROM, TO)`` pair in an area run's ``folder``: ``from``, ``to``,
    ``ns`` (the period that path needs), ``mhz``, ``start`` and ``end``.  With ``max_fanout``
    each row also has ``buffered`` (the same fields on the netlist with buffer trees,
    :func:`flows.eda.fanout.buffer_fanout`), and the result is ``(rows, summary)``:
    ``summary`` holds the whole design's worst path before and after (``design``,
    ``design_buffered``) and what the buffering added (``buffering``)."""
    import tempfile

    from .fanout import check_max_fanout
    from .tools import require

    check_max_fanout(max_fanout)
    folder = Path(folder)
    run, netlist = load_run(folder)
    sta = require("sta")
    with tempfile.TemporaryDirectory(prefix="trainfab-paths-") as tmp:
        tmp = Path(tmp)
        found, worst = _query(sta, run, netlist, pairs, tmp, "")
        rows = []
        for k, (a, b) in enumerate(pairs):
            if k not in found:
                raise FlowError(f"OpenSTA gave no answer for {a!r} → {b!r}; see its output")
            rows.append({"from": a, "to": b, **(found[k] or dict(NO_PATH))})
        if max_fanout is None:
            return rows
        from .fanout import buffer_fanout

        text, added = buffer_fanout(netlist.read_text(), Path(run["liberty"]), max_fanout)
        buffered = tmp / netlist.name
        buffered.write_text(text)
        found_b, worst_b = _query(sta, run, buffered, pairs, tmp, "_buffered")
    for k, row in enumerate(rows):
        row["buffered"] = found_b.get(k) or dict(NO_PATH)
    return rows, {"design": worst, "design_buffered": worst_b,
                  "buffering": {**added, "max_fanout": max_fanout}}


#: the fields of a pair without a path
NO_PATH = {"ns": None, "mhz": None, "start": None, "end": None}


def _cell(r: dict) -> str:
    if r["ns"] is None:
        return "no path"
    return f"{r['ns']:.3f} ({r['mhz']:.1f} MHz)" if r["mhz"] else f"{r['ns']:.3f}"


def table(rows: list[dict], summary: dict | None = None) -> str:
    """Markdown table of :func:`paths`' rows (with ``summary``, the buffered netlist's column,
    the whole design's worst path and the buffers added)."""
    if summary is None:
        lines = ["| from | to | path ns | clock it allows | start → end |",
                 "|---|---|---|---|---|"]
        for r in rows:
            if r["ns"] is None:
                lines.append(f"| `{r['from']}` | `{r['to']}` | no path | | |")
            else:
                mhz = f"{r['mhz']:.1f} MHz" if r["mhz"] else "n/a"
                lines.append(f"| `{r['from']}` | `{r['to']}` | {r['ns']:.3f} | {mhz} | "
                             f"`{r['start']}` → `{r['end']}` |")
        return "\n".join(lines)
    b = summary["buffering"]
    lines = ["| from | to | path ns (MHz), as mapped | with fanout ≤ " + str(b["max_fanout"])
             + " | start → end, as mapped |", "|---|---|---|---|---|"]
    for r in rows + [{"from": "(whole design)", "to": "", **_design(summary["design"]),
                      "buffered": _design(summary["design_buffered"])}]:
        ends = f"`{r['start']}` → `{r['end']}`" if r["start"] else ""
        to = f"`{r['to']}`" if r["to"] else ""
        lines.append(f"| `{r['from']}` | {to} | {_cell(r)} | {_cell(r['buffered'])} | {ends} |")
    lines.append("")
    lines.append(f"Buffer trees: {b['nets']} nets of more than {b['max_fanout']} loads (the "
                 f"largest {b['largest_fanout']}), {b['buffers']} {b['buffer']} cells in up to "
                 f"{b['levels']} levels, {b['area_um2']:,.0f} µm². No wire capacitance in either "
                 "netlist (no placement).")
    return "\n".join(lines)


def _design(worst: dict) -> dict:
    return {"ns": worst.get("critical_path_ns"), "mhz": worst.get("fmax_mhz"),
            "start": worst.get("startpoint"), "end": worst.get("endpoint")}


__all__ = ["registers", "script", "load_run", "paths", "table"]

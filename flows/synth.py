"""Area and timing: yosys synthesis onto a liberty, then OpenSTA on the mapped netlist.

Recipe (DESIGN.md; checked with Debian's yosys 0.23 and OpenSTA 2.0.17):
``read_verilog`` → ``synth -flatten`` → ``dfflegalize`` to plain D flip-flops (so that yosys'
``stat -tech cmos`` transistor estimate counts every cell) → ``dfflibmap`` → ``abc -liberty`` with
the clock period as delay target and ABC's buffering and gate sizing (without them one minimum
inverter drives hundreds of flip-flop enables and a 10 ns design times at 500 ns) →
``splitnets``, hide internal names, ``opt_clean -purge`` (OpenSTA's Verilog reader rejects the
constant concatenations yosys writes otherwise) → ``stat -liberty`` (µm²) → ``write_verilog``.

Timing: one clock on ``clk`` with the requested period, every other input and every output
constrained at 0 ns against it, so register→register, input→register, register→output and
input→output paths all count.  The critical path is ``period - worst slack``; fmax is its inverse.
Combinational units (no ``clk``) get a virtual clock.
"""

import json
import re
import subprocess
import time
from pathlib import Path

from golden import config_dict

from . import BUILD, FlowError
from .generate import manifest, to_verilog
from .registry import Unit
from .tools import liberty as find_liberty
from .tools import require, versions

DEFAULT_CLOCK_NS = 10.0


#: ABC mapping script: yosys' default liberty flow plus buffering and up/down-sizing to {D}
ABC_SCRIPT = ("+strash;&get,-n;&fraig,-x;&put;scorr;dc2;dretime;strash;&get,-n;&dch,-f;&nf,{D};"
              "&put;buffer,-p;upsize,{D};dnsize,{D};stime,-p")


def yosys_script(top: str, source: Path, lib: Path, netlist: Path, generic_json: Path,
                 mapped_json: Path, clock_ns: float = 10.0) -> str:
    return "\n".join([
        f"read_verilog {source}",
        f"synth -flatten -top {top}",
        "dfflegalize -cell $_DFF_P_ 01",
        f"tee -q -o {generic_json} stat -json -tech cmos",
        f"dfflibmap -liberty {lib}",
        f"abc -D {round(clock_ns * 1000)} -liberty {lib} -script {ABC_SCRIPT}",
        "splitnets",
        "rename -hide w:*.*",
        "opt_clean -purge",
        f"tee -q -o {mapped_json} stat -json -liberty {lib}",
        f"stat -liberty {lib}",
        f"write_verilog -noattr -noexpr {netlist}",
        "",
    ])


def sta_script(top: str, netlist: Path, lib: Path, clock_ns: float, has_clock: bool) -> str:
    clock = (f"create_clock -name clk -period {clock_ns} [get_ports clk]\n"
             "set inputs [delete_from_list [all_inputs] [get_ports clk]]\n") if has_clock else (
             f"create_clock -name clk -period {clock_ns}\nset inputs [all_inputs]\n")
    return (f"read_liberty {lib}\nread_verilog {netlist}\nlink_design {top}\n{clock}"
            "set_input_delay 0 -clock clk $inputs\n"
            "set_output_delay 0 -clock clk [all_outputs]\n"
            "report_checks -path_delay max -digits 3\n"
            "exit\n")


def _run(cmd, log: Path, what: str, timeout: float = 3600) -> str:
    # run inside the output folder: OpenSTA leaves a .history_sta file in its working directory
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=log.parent)
    log.write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-5:])
        raise FlowError(f"{what} failed (exit {proc.returncode}); see {log}:\n{tail}")
    return proc.stdout + proc.stderr


def parse_sta(text: str, clock_ns: float) -> dict:
    """Worst path of an OpenSTA ``report_checks`` (``slack`` is relative to ``clock_ns``)."""
    if re.search(r"^Error", text, re.M):
        raise FlowError("OpenSTA reported errors: " + re.search(r"^Error.*$", text, re.M).group(0))
    slack = re.search(r"^\s*(-?[\d.]+)\s+slack", text, re.M)
    if slack is None:
        return {"critical_path_ns": None, "fmax_mhz": None, "startpoint": None, "endpoint": None,
                "note": "no constrained timing path"}
    path_ns = clock_ns - float(slack.group(1))
    start = re.search(r"^Startpoint: (\S+)", text, re.M)
    end = re.search(r"^Endpoint: (\S+)", text, re.M)
    return {
        "critical_path_ns": round(path_ns, 4),
        "fmax_mhz": round(1000.0 / path_ns, 2) if path_ns > 0 else None,
        "slack_ns": float(slack.group(1)),
        "startpoint": start.group(1) if start else None,
        "endpoint": end.group(1) if end else None,
    }


def area(unit: Unit, cfg, *, liberty: str = "osu018", clock_ns: float = DEFAULT_CLOCK_NS,
         outdir: Path | None = None, factory=None) -> dict:
    """Synthesize ``unit`` at ``cfg`` and time it; write ``area.json``/``area.md``; return the report.

    Raises :class:`FlowError` when yosys, OpenSTA or the liberty is missing or a tool fails.
    """
    if clock_ns <= 0:
        raise FlowError(f"--clock-ns must be positive, got {clock_ns}")
    yosys, sta = require("yosys"), require("sta")
    lib = find_liberty(liberty).resolve()
    outdir = Path(outdir or BUILD / "area" / unit.name)
    outdir.mkdir(parents=True, exist_ok=True)
    text = to_verilog(unit, cfg, factory)
    source = outdir / f"{unit.top}.v"
    source.write_text(text)
    netlist = outdir / f"{unit.top}.mapped.v"
    generic_json, mapped_json = outdir / "stat_generic.json", outdir / "stat_mapped.json"
    script = yosys_script(unit.top, source, lib, netlist, generic_json, mapped_json, clock_ns)
    (outdir / "synth.ys").write_text(script)
    t0 = time.monotonic()
    ylog = _run([yosys, "-q", "-l", str(outdir / "yosys.log"), "-s", str(outdir / "synth.ys")],
                outdir / "yosys.out", "yosys")
    synth_s = time.monotonic() - t0
    ylog = (outdir / "yosys.log").read_text()
    chip = re.findall(r"Chip area for module .*?:\s*([\d.]+)", ylog)
    if not chip:
        raise FlowError(f"yosys printed no chip area; see {outdir / 'yosys.log'}")
    generic = next(iter(json.loads(generic_json.read_text())["modules"].values()))
    mapped = next(iter(json.loads(mapped_json.read_text())["modules"].values()))
    flops = sum(n for cell, n in generic["num_cells_by_type"].items() if "DFF" in cell)
    has_clock = bool(re.search(r"^\s*input\s+clk\s*;", text, re.M))
    sta_tcl = sta_script(unit.top, netlist, lib, clock_ns, has_clock)
    (outdir / "timing.tcl").write_text(sta_tcl)
    t0 = time.monotonic()
    sta_out = _run([sta, "-no_splash", "-exit", str(outdir / "timing.tcl")],
                   outdir / "timing.log", "OpenSTA")
    sta_s = time.monotonic() - t0
    timing = parse_sta(sta_out, clock_ns)
    man = manifest(unit, cfg, text)
    report = {
        "unit": unit.name,
        "config": config_dict(cfg),
        "area_um2": float(chip[-1]),
        "cells": mapped["num_cells"],
        "cells_by_type": mapped["num_cells_by_type"],
        "flip_flops": flops,
        "transistors_estimate": int(generic["estimated_num_transistors"]),
        "generic_cells": generic["num_cells"],
        "clock_ns": clock_ns,
        **timing,
        "liberty": str(lib),
        "tools": versions(),
        "verilog_sha256": man["verilog_sha256"],
        "yosys_script": script,
        "sta_script": sta_tcl,
        "seconds": {"synthesis": round(synth_s, 2), "timing": round(sta_s, 2)},
    }
    (outdir / "area.json").write_text(json.dumps(report, indent=2) + "\n")
    (outdir / "area.md").write_text(markdown(report))
    report["outdir"] = str(outdir)
    return report


def markdown(r: dict) -> str:
    cfg = ", ".join(f"{k}={v}" for k, v in r["config"].items())
    fmax = f"{r['fmax_mhz']:.1f} MHz" if r.get("fmax_mhz") else "n/a"
    path = f"{r['critical_path_ns']:.3f} ns" if r.get("critical_path_ns") else "n/a"
    tools = "\n".join(f"| {k} | {v} |" for k, v in r["tools"].items())
    return f"""# Area and timing: {r['unit']}

Configuration: {cfg}

| metric | value |
|---|---|
| cell area | {r['area_um2']:.1f} µm² |
| cells (mapped) | {r['cells']} |
| flip-flops | {r['flip_flops']} |
| transistors (yosys `stat -tech cmos` estimate) | {r['transistors_estimate']} |
| critical path | {path} ({r.get('startpoint')} → {r.get('endpoint')}) |
| fmax | {fmax} |
| clock constraint | {r['clock_ns']} ns |

Liberty: `{r['liberty']}`

| tool | version |
|---|---|
{tools}

Verilog sha256 `{r['verilog_sha256']}`.

yosys script:
```
{r['yosys_script']}```

OpenSTA script:
```
{r['sta_script']}```
"""


__all__ = ["DEFAULT_CLOCK_NS", "area", "markdown", "parse_sta", "yosys_script", "sta_script"]

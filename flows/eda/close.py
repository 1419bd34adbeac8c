"""Timing closure: the smallest ``pipeline`` depth of a unit that meets a clock period.

``trainfab close UNIT --clock-ns P`` synthesizes the unit (:func:`flows.eda.synth.area`, ABC
targeting ``P``) at ``pipeline = 0, 1, …`` up to the unit's maximum depth, ``-j N`` depths at a
time, and stops at the first batch in which a depth meets the period (OpenSTA's worst slack at
``P`` is ``>= 0``); the smallest such depth is chosen.  Its configuration is written as
``<unit>.toml`` (a file ``--config`` reads as it is), its synthesis' ``area.json`` and
``area.md`` beside it, and the table of the depths tried as ``close.md``/``close.json``; each
depth's full synthesis stays in ``pipeline<d>/``.

The maximum depth is the configuration's own: the largest ``pipeline`` its ``__post_init__``
accepts (found by building the configuration at increasing depths).  A unit without a
``pipeline`` field is refused in one line naming those that have one.

Before any synthesis of the unit, the period is checked against the liberty's flip-flop: a
one-flip-flop design is mapped with the same yosys recipe and timed by OpenSTA (input → D:
the setup time; clock → Q → output: the clock-to-Q delay).  A period below their sum cannot be
met at any depth (every pipelined path starts at a clock-to-Q and ends at a setup) and is
refused (exit status 2).  When no depth meets the period, the run ends with exit status 1,
naming the critical path of the depth with the best slack.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import shutil
import tempfile
from pathlib import Path

from .. import FlowError, build_dir, progress
from ..registry import Unit

#: largest depth probed when looking for a configuration's maximum
PROBE_LIMIT = 64


def has_pipeline(unit: Unit) -> bool:
    """Whether the unit's configuration class has a ``pipeline`` field."""
    return "pipeline" in {f.name for f in dataclasses.fields(unit.config_class())}


def pipelined_units() -> list[str]:
    """Names of the registered units that have a ``pipeline`` field."""
    from .. import registry

    return [u.name for u in registry.UNITS.values() if has_pipeline(u)]


def max_depth(cfg) -> int:
    """The largest ``pipeline`` the configuration class accepts with ``cfg``'s other fields."""
    from golden import ConfigError

    depth = 0
    while depth < PROBE_LIMIT:
        try:
            dataclasses.replace(cfg, pipeline=depth + 1)
        except ConfigError:
            break
        depth += 1
    return depth


def min_depth(cfg) -> int:
    """The smallest ``pipeline`` the configuration class accepts with ``cfg``'s other fields
    (0 but for a configuration that needs stages, e.g. the bit-parallel PE's interleaved dot
    products)."""
    from golden import ConfigError

    for depth in range(PROBE_LIMIT + 1):
        try:
            dataclasses.replace(cfg, pipeline=depth)
        except ConfigError:
            continue
        return depth
    return 0


# --------------------------------------------------------------------------------------------
# the flip-flop floor


FLOP_VERILOG = """module flop(input clk, input d, output q);
  reg r;
  always @(posedge clk) r <= d;
  assign q = r;
endmodule
"""


@functools.cache
def flop_timing(lib: Path) -> dict:
    """Setup time and clock-to-Q delay (ns) of the flip-flop yosys maps onto from ``lib``:
    a one-flip-flop design through the area recipe, timed by OpenSTA with a 100 ns clock and
    0 ns input/output delays (setup = period − slack of input → D; clock-to-Q = period − slack
    of clock → Q → output)."""
    from .synth import _run, tool_error, yosys_script
    from .tools import require

    yosys, sta = require("yosys"), require("sta")
    work = Path(tempfile.mkdtemp(prefix="trainfab-flop-"))
    try:
        (work / "flop.v").write_text(FLOP_VERILOG)
        (work / "flop.ys").write_text(yosys_script("flop", Path("flop.v"), lib,
                                                   Path("flop.mapped.v"), Path("g.json"),
                                                   Path("m.json"), 100.0))
        _run([yosys, "-q", "-l", "yosys.log", "-s", "flop.ys"], work / "yosys.out", "yosys")
        period = 100.0
        (work / "flop.tcl").write_text(
            f"read_liberty {lib}\nread_verilog flop.mapped.v\nlink_design flop\n"
            f"create_clock -name clk -period {period} [get_ports clk]\n"
            "set_input_delay 0 -clock clk [get_ports d]\n"
            "set_output_delay 0 -clock clk [get_ports q]\n"
            "puts SETUP\nreport_checks -path_delay max -from [get_ports d] -digits 4\n"
            "puts CLKQ\nreport_checks -path_delay max -to [get_ports q] -digits 4\nexit\n")
        out = _run([sta, "-no_splash", "-exit", "flop.tcl"], work / "sta.log", "OpenSTA")
        setup_text, _, clkq_text = out.partition("CLKQ")
        slacks = [re.search(r"^\s*(-?[\d.]+)\s+slack", t, re.M) for t in (setup_text, clkq_text)]
        if not all(slacks):
            raise FlowError("OpenSTA gave no flip-flop timing for the liberty's flip-flop: "
                            + tool_error(out))
        cell = re.search(r"^\s*(\S+)\s+\S+\s*\(\s*\.", (work / "flop.mapped.v").read_text(), re.M)
        return {"setup_ns": round(period - float(slacks[0].group(1)), 4),
                "clk_to_q_ns": round(period - float(slacks[1].group(1)), 4),
                "cell": cell.group(1) if cell else None}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def check_period(clock_ns: float, lib: Path) -> dict:
    """The liberty's flip-flop timing; :class:`FlowError` when ``clock_ns`` is below its
    clock-to-Q plus setup."""
    ff = flop_timing(Path(lib))
    floor = ff["setup_ns"] + ff["clk_to_q_ns"]
    if clock_ns < floor:
        raise FlowError(f"--clock-ns {clock_ns:g}: below the flip-flop's clock-to-Q plus setup "
                        f"({ff['clk_to_q_ns']:.3f} + {ff['setup_ns']:.3f} = {floor:.3f} ns, "
                        f"{ff['cell'] or 'flip-flop'} of {Path(lib).name}): no pipeline depth "
                        "can meet it")
    return ff


# --------------------------------------------------------------------------------------------
# one depth


def meets(report: dict) -> bool:
    """Whether an area report meets its clock: worst slack >= 0 (no timed path: met)."""
    slack = report.get("slack_ns")
    return True if slack is None and report.get("critical_path_ns") is None else (
        slack is not None and slack >= 0)


def synth_depth(task: dict) -> dict:
    """Synthesize one depth (the same function in this process and in worker processes);
    ``task``: ``unit`` (name), ``config`` (dict), ``clock_ns``, ``liberty``, ``outdir`` and
    optionally ``max_fanout`` (buffer trees, :func:`flows.eda.synth.area`)."""
    from .. import registry
    from .synth import area

    unit = registry.get(task["unit"])
    cfg = unit.make_config(None, **task["config"])
    return area(unit, cfg, liberty=task["liberty"], clock_ns=task["clock_ns"],
                outdir=Path(task["outdir"]), progress=False,
                **({"max_fanout": task["max_fanout"]} if "max_fanout" in task else {}))


def _row(depth: int, r: dict) -> dict:
    return {"pipeline": depth, "area_um2": r.get("area_um2"), "area_ge": r.get("area_ge"),
            "flip_flops": r.get("flip_flops"), "fmax_mhz": r.get("fmax_mhz"),
            "slack_ns": r.get("slack_ns"), "critical_path_ns": r.get("critical_path_ns"),
            "startpoint": r.get("startpoint"), "endpoint": r.get("endpoint"),
            "meets": meets(r)}


def _pool(jobs: int):
    """Worker processes for ``-j N`` (spawned, as the sweep's)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn"))


def _run_batch(tasks: list[dict], jobs: int) -> list[dict]:
    if jobs == 1 or len(tasks) == 1:
        return [synth_depth(t) for t in tasks]
    with _pool(min(jobs, len(tasks))) as pool:
        return list(pool.map(synth_depth, tasks))


# --------------------------------------------------------------------------------------------
# outputs


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    raise FlowError(f"cannot write the configuration value {value!r} as TOML")


def config_toml(unit: Unit, cfg, note: str) -> str:
    """The configuration as a TOML file with one ``[<unit>]`` table (every field; TOML has no
    null, so a field left at its default ``None`` is written as a comment and reads back as
    that default)."""
    lines = [f"# {line}" for line in note.splitlines()]
    lines.append(f"[{unit.name}]")
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if value is None and f.default is None:
            lines.append(f"# {f.name}: not set (its default)")
            continue
        lines.append(f"{f.name} = {_toml_value(value)}")
    return "\n".join(lines) + "\n"


def _cell(v, fmt: str = "{}") -> str:
    return "n/a" if v is None else fmt.format(v)


def table(rows: list[dict]) -> str:
    """The depths tried, as a Markdown table."""
    head = ("| pipeline | area µm² | GE | flip-flops | fmax MHz | slack ns | meets? |\n"
            "|---|---|---|---|---|---|---|")
    body = [f"| {r['pipeline']} | {_cell(r['area_um2'], '{:,.1f}')} | "
            f"{_cell(r['area_ge'], '{:,.0f}')} | {_cell(r['flip_flops'])} | "
            f"{_cell(r['fmax_mhz'], '{:.1f}')} | {_cell(r['slack_ns'], '{:.3f}')} | "
            f"{'yes' if r['meets'] else 'no'} |" for r in rows]
    return "\n".join([head, *body])


def _markdown(unit: Unit, result: dict) -> str:
    chosen = result["chosen"]
    verdict = (f"Chosen: `pipeline = {chosen}`, the smallest depth that meets "
               f"{result['clock_ns']:g} ns (configuration: `{result['toml']}`)."
               if chosen is not None else
               f"No depth up to {result['max_depth']} meets {result['clock_ns']:g} ns; best "
               f"pipeline = {result['best']} ({result['best_path']}).")
    ff = result["flop"]
    return (f"# Timing closure: {unit.name} at {result['clock_ns']:g} ns "
            f"({1000 / result['clock_ns']:.1f} MHz)\n\n"
            f"Base configuration: {', '.join(f'{k}={v}' for k, v in result['base'].items())}; "
            f"depths 0..{result['max_depth']}.\n\n{table(result['rows'])}\n\n{verdict}\n\n"
            f"Flip-flop floor ({ff['cell']}): clock-to-Q {ff['clk_to_q_ns']:.3f} ns + setup "
            f"{ff['setup_ns']:.3f} ns.  Liberty: `{result['liberty']}`.  Each depth's synthesis "
            "is in `pipeline<d>/`."
            + (f"  Timed with buffer trees on the nets of more than {result['max_fanout']} loads "
               "(`--max-fanout`)." if result.get("max_fanout") is not None else "") + "\n")


# --------------------------------------------------------------------------------------------
# the command


def close(unit: Unit, base, clock_ns: float, *, liberty: str = "osu018", jobs: int = 1,
          outdir: Path | None = None, max_fanout: int | None = None) -> dict:
    """Find the smallest ``pipeline`` depth of ``unit`` (configuration ``base``, its own
    ``pipeline`` ignored) that meets ``clock_ns``; write the outputs (module docstring) into
    ``outdir`` (default ``build/close/<unit>``) and return the result: ``rows`` (one per depth
    tried), ``chosen`` (a depth, or ``None``), ``best`` and ``best_path`` (the depth with the
    best slack and its critical path), ``outdir``.  With ``max_fanout`` every depth is timed
    with buffer trees on its high-fanout nets (:func:`flows.eda.synth.area`)."""
    from ..runs import precheck, staged
    from .fanout import check_max_fanout
    from ..options import check_clock
    from .tools import liberty as find_liberty
    from .tools import require

    if not has_pipeline(unit):
        raise FlowError(f"{unit.name} has no pipeline field; units with one: "
                        f"{', '.join(pipelined_units()) or 'none'}")
    clock_ns = check_clock(clock_ns)
    check_max_fanout(max_fanout)
    final = precheck(outdir or build_dir() / "close" / unit.name)
    require("yosys")
    require("sta")
    lib = find_liberty(liberty).resolve()
    flop = check_period(clock_ns, lib)
    top = max_depth(base)
    low = min_depth(base)
    depths = list(range(low, top + 1))
    toml_name = f"{unit.name}.toml"
    # the whole folder moves into place when the run ends: an interrupted or failed run
    # leaves the earlier run's folder whole, and two runs into one folder never mix
    with staged(final, names=(toml_name, "area.json", "area.md", "close.json", "close.md"),
                last=("close.md", "close.json")) as work:
        result = _search(unit, base, clock_ns, lib, flop, depths, jobs, max_fanout, work,
                         final)
        cfg = dataclasses.replace(base, pipeline=result["best"])
        note = (f"trainfab close {unit.name} --clock-ns {clock_ns:g}: "
                + (f"the smallest pipeline depth that meets {clock_ns:g} ns"
                   if result["chosen"] is not None else
                   f"no depth meets {clock_ns:g} ns; the depth with the best slack"))
        (work / toml_name).write_text(config_toml(unit, cfg, note))
        src = work / f"pipeline{result['best']}"
        for name in ("area.json", "area.md"):
            shutil.copyfile(src / name, work / name)
        (work / "close.md").write_text(_markdown(unit, result))
        (work / "close.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    result["outdir"] = str(final)
    return result


def _search(unit, base, clock_ns, lib, flop, depths, jobs, max_fanout, work, final) -> dict:
    """Synthesize the depths (``jobs`` at a time) into ``work/pipeline<d>`` until one meets
    ``clock_ns``; the result without its files."""
    low, top = depths[0], depths[-1]
    rows: list[dict] = []
    reports: dict[int, dict] = {}
    progress.echo(f"{unit.name}: pipeline depths {low}..{top} at {clock_ns:g} ns "
                  f"({'one at a time' if jobs == 1 else f'{jobs} at a time'}); output {final}")
    chosen = None
    for start in range(0, len(depths), jobs):
        batch = depths[start:start + jobs]
        for d in batch:
            progress.echo(f"[{d - low + 1}/{len(depths)}] {unit.name} pipeline={d}: "
                          f"synthesizing …")
        tasks = [{"unit": unit.name, "config": {**_config(base), "pipeline": d},
                  "clock_ns": clock_ns, "liberty": str(lib),
                  "outdir": str(work / f"pipeline{d}"),
                  **({"max_fanout": max_fanout} if max_fanout is not None else {})}
                 for d in batch]
        for d, r in zip(batch, _run_batch(tasks, jobs)):
            reports[d] = r
            row = _row(d, r)
            rows.append(row)
            progress.echo(f"[{d - low + 1}/{len(depths)}] {unit.name} pipeline={d}: "
                          f"{_cell(row['area_um2'], '{:,.1f}')} µm², {row['flip_flops']} "
                          f"flip-flops, fmax {_cell(row['fmax_mhz'], '{:.1f}')} MHz: "
                          f"{'meets' if row['meets'] else 'misses'} {clock_ns:g} ns")
        met = [row["pipeline"] for row in rows if row["meets"]]
        if met:
            chosen = min(met)
            break
    best = chosen if chosen is not None else max(
        rows, key=lambda row: (row["slack_ns"] if row["slack_ns"] is not None else float("-inf"),
                               -row["pipeline"]))["pipeline"]
    b = reports[best]
    best_path = (f"critical path {b.get('startpoint')} → {b.get('endpoint')}, "
                 f"{_cell(b.get('critical_path_ns'), '{:.3f}')} ns")
    return {"unit": unit.name, "clock_ns": clock_ns, "liberty": str(lib),
            "base": _config(base), "max_depth": top, "rows": rows, "chosen": chosen,
            "best": best, "best_path": best_path, "flop": flop,
            "toml": f"{unit.name}.toml", "max_fanout": max_fanout}


def _config(cfg) -> dict:
    from golden import config_dict

    return config_dict(cfg)


__all__ = ["close", "has_pipeline", "pipelined_units", "max_depth", "min_depth", "flop_timing",
           "check_period", "meets", "table", "config_toml", "synth_depth"]

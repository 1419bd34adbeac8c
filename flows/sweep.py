"""Design-space sweeps: ``trainfab sweep UNIT --grid FIELD=V1,V2,… [--grid …]``.

A sweep measures one unit at every point of a grid, the cross product of the ``--grid`` fields,
on local processes or on a Dask distributed cluster, and writes one table and a plot of each
measure against each swept field.

Usage::

    trainfab sweep UNIT --grid FIELD=V1,V2,… [--grid …] [--config/-c FILE|PRESET]
                   [--set/-s FIELD=VALUE …] [--measure area,timing,regress] [-j N]
                   [--scheduler ADDRESS] [--liberty osu018|PATH.lib] [--seed 1]
                   [--effort quick|standard|full] [--output/-o DIR] [--fresh]

Grid
----
* ``--grid FIELD=V1,V2,…`` (repeatable, one field per option) sweeps a configuration field of the
  unit over the listed values, parsed like ``--set`` values (TOML scalars: ``4``, ``2.5``,
  ``true``; a bare word is a string: ``csd``; quote a value that holds a comma).  The grid is the
  cross product of every ``--grid`` field, in the order the options are given, the last field
  varying fastest; ``--config``/``--set`` give the base configuration the other fields take.
* ``clock_ns`` is a grid field of its own: the synthesis clock constraint (ns, default 10), not a
  configuration field; it needs the ``area`` or ``timing`` measure.
* Errors (one line, exit status 2), all found before anything runs: no ``--grid``; a field that
  is neither the unit's nor ``clock_ns`` (the message lists the unit's fields); a field given in
  two ``--grid`` options or also in ``--set``; an empty value list; a value listed twice (an
  error, never silently deduplicated); two points that are the same configuration; a point the
  configuration class rejects (the message names the point); a ``clock_ns`` outside the range
  ``trainfab area --clock-ns`` accepts (0.01 to 100000 ns).
* Run-time fields are refused: a field that the hardware does not depend on (Gecko's
  ``man_width``, ``sign_en``, ``fixed_width``: side-band inputs whose configuration value is only
  the testbench's default) would give the same area and timing at every value.  Fields the unit
  declares as run-time inputs (:attr:`flows.declare.Unit.runtime_fields`) are refused at once;
  for every other swept configuration field the Verilog (:func:`flows.eda.generate.to_verilog`) is
  generated at the first grid point with that field set to each of its values, and again around
  each one-field change of that point; if every value gives the same Verilog everywhere, the
  sweep stops with ``field man_width does not change the hardware of gecko.compressor: …``.
  Conversions are cached, so each configuration is converted once.  The check is skipped when
  ``regress`` is the only measure: a run-time field does change what the testbench exercises.
  Likewise ``--set`` of a declared run-time field is refused unless ``regress`` is measured
  (as ``trainfab area`` refuses it).

Measures (``--measure``, comma-separated, default ``area,timing``)
----------------------------------------------------------------
* ``area``: ``area_um2``, ``area_ge``, ``cells``, ``flip_flops``, ``transistors_estimate``;
  ``timing``: ``critical_path_ns``, ``fmax_mhz``.  Both come from one :func:`flows.eda.synth.area`
  call per point (yosys + OpenSTA onto ``--liberty`` at the point's ``clock_ns``), run in the
  point's own folder ``<out>/points/<hash>/`` (netlists, logs, ``area.json``, ``area.md``).
* ``regress``: ``passed``, ``tests``, ``failed`` of the unit's cocotb testbench
  (:func:`flows.eda.simulate.run_testbench`) at ``--seed`` and ``--effort`` (default ``quick``), with
  its simulator build and run folders inside the point's folder (``<out>/points/<hash>/sim/``).
* A point's hash is the sha256 of its canonical JSON: unit, full configuration
  (``golden.config_dict``), ``clock_ns``, the resolved liberty path, the measures, and the seed and
  effort when ``regress`` is measured.

Parallel runs
-------------
* Local: ``-j N`` worker processes (:class:`concurrent.futures.ProcessPoolExecutor`, spawned
  fresh), default the number of CPUs this process may use (``os.sched_getaffinity``, else
  ``os.cpu_count()``): yosys, OpenSTA and the simulators are single-threaded, so one point per
  core; never more processes than points to run.  ``-j 1`` runs the points one after another in
  this process.
* Dask: ``--scheduler ADDRESS`` sends every point to the Dask distributed cluster whose
  scheduler listens at ``ADDRESS`` (``dask.distributed.Client``, ``client.submit(...,
  pure=False)``, ``dask.distributed.as_completed``); ``-j`` does not apply.  Workers run the same
  function as local processes (:func:`compute_point`, which gets the unit's name and the
  configuration as a plain dict) and return the point's record; only this process writes the
  sweep's files.  Point folders are written by the worker, at the same path on the worker's
  machine (share the output folder, e.g. over NFS, to keep the netlists in one place), and the
  liberty is passed as this machine's resolved path, which must exist on every worker (the
  default ``osu018`` does after ``make setup``).

  Setting up a cluster: on one machine start the scheduler with ``dask scheduler`` (it listens
  on ``tcp://HOST:8786``); on each machine that computes, ``dask worker tcp://HOST:8786
  --nthreads 1`` (one worker process per core: ``--nworkers N --nthreads 1``; one thread per
  process, because a point runs single-threaded tools and the testbench runner is not
  thread-safe).  Every worker machine needs trainfab installed the same way (``make setup`` in
  a checkout of the same commit, which also installs yosys, OpenSTA, Icarus and the liberty)
  and the worker started from that virtual environment (``.venv/bin/dask worker …``).  Then
  run ``trainfab sweep … --scheduler tcp://HOST:8786``.  Points a worker loses (a crash, a
  machine gone) are rescheduled by Dask.

Progress, resume and interruption
---------------------------------
* A start line says how many points the grid has, how many are already done and where they
  run; then one line per finished point, e.g. ``[7/24] lanes=4,encoding=csd,clock_ns=5: 12345.0
  µm², fmax 210.0 MHz (3.2 s)``.
* Each finished point is appended at once to ``<out>/results.jsonl`` (one JSON object a line,
  flushed and fsynced) with its hash, grid values, configuration, measures, error, Verilog
  sha256, tool versions, host and seconds.  A rerun with the same output folder skips every
  point whose hash is there without an error (a truncated last line, from a killed run, is
  ignored); points that ended in an error are run again.  ``--fresh`` deletes
  ``results.jsonl`` and ``points/`` first.  The hash does not cover the generator's code or the
  tools' versions: use ``--fresh`` after changing either.
* Ctrl-C stops the sweep (the CLI exits 130); finished points stay in ``results.jsonl``.
  Local workers are stopped with the tools they run; on a Dask cluster the queued points are
  cancelled, and points already running on a worker finish there unrecorded.
* One sweep at a time per output folder (a lock file, ``.sweep.lock``, there while a sweep
  runs).

Outputs (default folder ``build/sweep/<unit>-<10 hex digits of the sweep's hash>``, ``-o DIR``)
--------------------------------------------------------------------------------------------
* ``sweep.csv`` and ``sweep.json``: one row per point in grid order; columns: the grid fields,
  then the measures' columns, then ``error`` (empty when the point succeeded).  Wall-clock times
  and host names are kept out of both (they are in ``results.jsonl``), so a serial and a
  parallel run of the same sweep give byte-identical tables.  ``sweep.json`` also has the unit,
  the base configuration, the grid, the measures, the liberty, and per row the point's hash, full
  configuration and Verilog sha256.
* ``<measure>_vs_<field>.png``: each numeric area/timing measure against each swept field with
  two or more values, one line per combination of the other fields (matplotlib, Agg);
  ``area_um2_vs_fmax_mhz.png``: every measured point's area against its fmax, with the front of
  the points no other point beats in both (e.g. a ``pipeline`` grid's area-fmax trade-off).
* ``sweep.md``: the set-up, the table, the smallest-area and highest-fmax points, the errors and
  the plots.

Exit status: 0 when every point succeeded and every regression passed; 1 when a regression
failed or a point ended in an error (its row has the error; the sweep goes on with the other
points); 2 for a usage, configuration or environment error found before anything ran.
"""

import argparse
import contextlib
import csv
import dataclasses
import io
import itertools
import json
import math
import os
import signal
import socket
import time
from pathlib import Path

from golden import ConfigError, config_dict

from . import FlowError, progress
from .declare import EFFORTS
from .layout import DEFAULT_CLOCK_NS, DEFAULT_LIBERTY

#: the special grid field: the synthesis clock constraint in ns (not a configuration field)
CLOCK = "clock_ns"
#: measure → its table columns
MEASURES = {
    "area": ("area_um2", "area_ge", "cells", "flip_flops", "transistors_estimate"),
    "timing": ("critical_path_ns", "fmax_mhz"),
    "regress": ("passed", "tests", "failed"),
}
#: measures that need synthesis (one flows.eda.synth.area() call per point gives both)
SYNTH_MEASURES = ("area", "timing")
DEFAULT_MEASURES = "area,timing"
#: axis labels of the plotted columns
LABELS = {
    "area_um2": "cell area (µm²)",
    "area_ge": "gate equivalents (NAND2)",
    "cells": "cells",
    "flip_flops": "flip-flops",
    "transistors_estimate": "transistors (yosys estimate)",
    "critical_path_ns": "critical path (ns)",
    "fmax_mhz": "fmax (MHz)",
}
RESULTS = "results.jsonl"
#: local worker processes ``-j`` accepts
JOBS_RANGE = (1, 4096)
#: the most points a sweep may have (the grid's cross product is checked before it is listed)
MAX_POINTS = 100_000


# --------------------------------------------------------------------------------------------
# command line


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add the ``sweep`` subcommand's arguments to ``p``."""
    from .options import SEED_HELP, SEED_RANGE, UNIT_HELP, bounded

    p.add_argument("unit", help=UNIT_HELP)
    p.add_argument("--grid", "-g", action="append", default=[], metavar="FIELD=V1,V2,…",
                   help="sweep a configuration field (or clock_ns, the synthesis clock "
                        "constraint in ns) over these values, parsed like --set values; "
                        "repeatable: the grid is the cross product, the last field varying "
                        "fastest. A value listed twice is an error (not deduplicated)")
    p.add_argument("--config", "-c", metavar="FILE|PRESET",
                   help="TOML file or preset name from flows/configs: the base configuration "
                        "(default: the unit's paper preset)")
    p.add_argument("--set", "-s", dest="sets", action="append", default=[],
                   metavar="FIELD=VALUE", help="override one base configuration field (repeatable)")
    p.add_argument("--measure", "-m", default=DEFAULT_MEASURES, metavar="LIST",
                   help="comma-separated: area, timing (one synthesis per point gives both), "
                        "regress (cocotb testbench) (default: %(default)s). Fields that do not "
                        "change the Verilog (run-time inputs) can be swept only with regress alone")
    p.add_argument("--jobs", "-j", type=bounded(int, *JOBS_RANGE), default=None, metavar="N",
                   help=f"local worker processes, {JOBS_RANGE[0]} to {JOBS_RANGE[1]} (default: "
                        "the number of CPUs; 1: one point after another in this process)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="run the points on the Dask distributed cluster of this scheduler "
                        "(tcp://HOST:8786) instead of local processes")
    p.add_argument("--liberty", default=DEFAULT_LIBERTY,
                   help=f"{DEFAULT_LIBERTY} (default) or a .lib path")
    p.add_argument("--seed", type=bounded(int, *SEED_RANGE), default=1,
                   help=f"testbench seed for regress, {SEED_HELP} (default 1)")
    p.add_argument("--effort", choices=EFFORTS, default="quick",
                   help="testbench size for regress (default quick)")
    p.add_argument("--output", "-o", metavar="DIR",
                   help="output folder (default build/sweep/<unit>-<hash of the sweep>); "
                        "a rerun into the same folder skips the points already done")
    p.add_argument("--fresh", action="store_true",
                   help="forget the points already done in the output folder and start over")


# --------------------------------------------------------------------------------------------
# the plan: grid, points and their hashes, all checked before anything runs


def _canonical(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def _sha(obj) -> str:
    from .eda.generate import sha256

    return sha256(_canonical(obj))


def fmt_value(v) -> str:
    """A grid value as the user would type it: ``true``, ``5`` (for 5.0), ``2.5``, ``csd``."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        short = f"{v:g}"
        return short if float(short) == v else repr(v)
    return "none" if v is None else str(v)


def split_values(text: str) -> list[str]:
    """``a,b,"c,d",[1,2]`` → the comma-separated items (commas inside quotes or brackets kept)."""
    items, cur, quote, depth = [], [], None, 0
    for ch in text:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append("".join(cur).strip())
            cur = []
            continue
        cur.append(ch)
    items.append("".join(cur).strip())
    return items


def parse_grid(items) -> dict[str, list]:
    """``["lanes=1,2", "encoding=csd,binary"]`` → ``{"lanes": [1, 2], "encoding": [...]}``."""
    from .config import parse_set

    grid: dict[str, list] = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise FlowError(f"--grid {item!r}: expected FIELD=V1,V2,…")
        if key in grid:
            raise FlowError(f"--grid {key}: given twice; list all its values in one --grid")
        if not text.strip():
            raise FlowError(f"--grid {key}: no values; expected {key}=V1,V2,…")
        values = []
        for piece in split_values(text):
            if not piece:
                raise FlowError(f"--grid {item!r}: empty value in the list")
            value = parse_set(f"{key}={piece}")[1]
            if key == CLOCK:
                value = _clock(piece, value)
            if any(type(v) is type(value) and v == value for v in values):
                raise FlowError(f"--grid {key}: value {fmt_value(value)} is listed twice")
            values.append(value)
        grid[key] = values
    return grid


def _clock(text: str, value) -> float:
    from .options import CLOCK_RANGE_NS, check_clock

    try:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise FlowError("not a number")
        return check_clock(value)
    except FlowError:
        lo, hi = CLOCK_RANGE_NS
        raise FlowError(f"--grid {CLOCK}: {text!r} is not a clock period: give a number of "
                        f"nanoseconds from {lo:g} to {hi:g}") from None


def parse_measures(text: str) -> list[str]:
    names = [m.strip() for m in text.split(",") if m.strip()]
    unknown = [m for m in names if m not in MEASURES]
    if unknown or not names:
        raise FlowError(f"--measure {text!r}: unknown measure {(unknown or [''])[0]!r}; "
                        f"choose from {', '.join(MEASURES)}")
    return [m for m in MEASURES if m in names]  # canonical order, duplicates dropped


@dataclasses.dataclass
class Point:
    """One grid point: its grid values, configuration, clock constraint and hash."""

    index: int
    values: dict
    cfg: object
    clock_ns: float | None
    hash: str

    @property
    def label(self) -> str:
        return ",".join(f"{k}={fmt_value(v)}" for k, v in self.values.items())


@dataclasses.dataclass
class Plan:
    unit: object
    base: object
    grid: dict
    measures: list
    liberty: str | None
    seed: int
    effort: str
    points: list
    spec_hash: str

    @property
    def columns(self) -> list[str]:
        return [*self.grid, *(c for m in self.measures for c in MEASURES[m]), "error"]

    @property
    def synth(self) -> bool:
        return any(m in SYNTH_MEASURES for m in self.measures)

    def identity(self) -> dict:
        """What the sweep is, without where or how it runs (also the head of ``sweep.json``)."""
        out = {"unit": self.unit.name, "base_config": config_dict(self.base),
               "grid": self.grid, "measures": self.measures, "liberty": self.liberty}
        if "regress" in self.measures:
            out.update(seed=self.seed, effort=self.effort)
        return out


def _point_hash(unit, cfg, clock_ns, liberty, measures, seed, effort) -> str:
    doc = {"unit": unit.name, "config": config_dict(cfg), "clock_ns": clock_ns,
           "liberty": liberty, "measures": sorted(measures)}
    if "regress" in measures:
        doc.update(seed=seed, effort=effort)
    return _sha(doc)


def plan_sweep(args) -> Plan:
    """Check everything about a sweep and list its points; :class:`FlowError` on any problem."""
    from . import registry
    from .config import load_config, parse_set, refuse_runtime_sets
    from .eda.tools import liberty as find_liberty

    unit = registry.get(args.unit)
    measures = parse_measures(args.measure)
    if not args.grid:
        raise FlowError("nothing to sweep: give at least one --grid FIELD=V1,V2,…")
    grid = parse_grid(args.grid)
    base = load_config(unit, args.config, args.sets)
    names = [f.name for f in dataclasses.fields(base)]
    for key in grid:
        if key != CLOCK and key not in names:
            raise FlowError(f"--grid {key}: unknown field for {unit.name}; fields: "
                            f"{', '.join(names)} (and {CLOCK}, the synthesis clock constraint)")
    synth = any(m in SYNTH_MEASURES for m in measures)
    for item in args.sets:
        key = parse_set(item)[0]
        if key in grid:
            raise FlowError(f"--grid {key}: also given with --set; give it in one place")
    if "regress" not in measures:
        refuse_runtime_sets(unit, args.sets, "the " + " and ".join(measures))
    if CLOCK in grid and not synth:
        raise FlowError(f"--grid {CLOCK}: the clock constraint only matters for the area and "
                        f"timing measures, not for {','.join(measures)}")
    liberty = str(find_liberty(args.liberty).resolve()) if synth else None
    seed, effort = args.seed, args.effort
    size = math.prod(len(v) for v in grid.values())
    if size > MAX_POINTS:
        sizes = " × ".join(str(len(v)) for v in grid.values())
        raise FlowError(f"the grid has {size:,} points ({sizes}); a sweep runs at most "
                        f"{MAX_POINTS:,}")
    points, seen = [], {}
    for index, combo in enumerate(itertools.product(*grid.values())):
        values = dict(zip(grid, combo))
        overrides = {k: v for k, v in values.items() if k != CLOCK}
        label = ",".join(f"{k}={fmt_value(v)}" for k, v in values.items())
        try:
            cfg = dataclasses.replace(base, **overrides)
        except (ConfigError, TypeError, ValueError) as e:
            raise FlowError(f"{unit.name}: grid point {label} is invalid: {e}") from None
        clock_ns = float(values.get(CLOCK, DEFAULT_CLOCK_NS)) if synth else None
        h = _point_hash(unit, cfg, clock_ns, liberty, measures, seed, effort)
        if h in seen:
            raise FlowError(f"{unit.name}: grid points {seen[h]} and {label} are the same "
                            f"configuration; list each value once")
        seen[h] = label
        # the table shows the configuration's own value (after the class's normalization)
        shown = {k: (v if k == CLOCK else getattr(cfg, k)) for k, v in values.items()}
        points.append(Point(index, shown, cfg, clock_ns, h))
    if measures != ["regress"]:
        check_hardware_fields(unit, grid, points)
    # the grid as pairs: the fields' order is part of the sweep (the table's row order)
    spec = {"unit": unit.name, "base": config_dict(base), "grid": list(grid.items()),
            "measures": measures, "liberty": liberty}
    if "regress" in measures:
        spec.update(seed=seed, effort=effort)
    return Plan(unit, base, grid, measures, liberty, seed, effort, points, _sha(spec)[:10])


def check_hardware_fields(unit, grid: dict, points: list) -> None:
    """Refuse swept configuration fields whose every value gives the same Verilog (see the
    module docstring: compared at the first point and around each one-field change of it)."""
    from .eda.generate import sha256, to_verilog

    fields = [f for f in grid if f != CLOCK and len(grid[f]) > 1]
    declared = [f for f in fields if f in unit.runtime_fields]
    if declared:  # the unit's own list of run-time inputs: no need to convert anything
        _refuse_static(unit, declared)
    if not fields:
        return
    by_values = {}
    for p in points:
        by_values.setdefault(tuple((k, _canonical(v)) for k, v in zip(grid, _raw(grid, p))
                                   if k != CLOCK), p.cfg)
    cache: dict[str, str] = {}

    def verilog_hash(assign: dict) -> str:
        cfg = by_values[tuple((k, _canonical(assign[k])) for k in grid if k != CLOCK)]
        key = _canonical(config_dict(cfg))
        if key not in cache:
            try:
                cache[key] = sha256(to_verilog(unit, cfg))
            except Exception as e:  # a generator bug for this configuration: name it
                label = ",".join(f"{k}={fmt_value(v)}" for k, v in assign.items())
                raise FlowError(f"{unit.name}: cannot generate the Verilog of grid point "
                                f"{label}: {type(e).__name__}: {e}") from None
        return cache[key]

    first = dict(zip(grid, _raw(grid, points[0])))
    static = []
    for f in fields:
        anchors = [first] + [{**first, g: w} for g in fields if g != f for w in grid[g]
                             if w != first[g]]
        if not any(len({verilog_hash({**a, f: v}) for v in grid[f]}) > 1 for a in anchors):
            static.append(f)
    if static:
        _refuse_static(unit, static)


def _refuse_static(unit, static: list) -> None:
    what = f"field {static[0]} does" if len(static) == 1 else f"fields {', '.join(static)} do"
    raise FlowError(f"{what} not change the hardware of {unit.name}: every value gives the "
                    f"same Verilog; run-time fields cannot be swept for area or timing "
                    f"(sweep them with --measure regress alone)")


def _raw(grid: dict, p: Point) -> tuple:
    """The point's grid values as listed in ``grid`` (before the configuration's normalization)."""
    combo, rest = [], p.index
    for values in reversed(list(grid.values())):
        rest, k = divmod(rest, len(values))
        combo.append(values[k])
    return tuple(reversed(combo))


# --------------------------------------------------------------------------------------------
# one point: the same function locally and on Dask workers


def compute_point(task: dict) -> dict:
    """Measure one point; returns its record (never raises for a failing point: the error goes
    into the record).  ``task`` holds only plain data: ``unit`` (name), ``config`` (dict),
    ``clock_ns``, ``liberty``, ``measures``, ``seed``, ``effort``, ``outdir``, ``hash``."""
    from . import registry

    start = time.monotonic()
    rec = {"hash": task["hash"], "measures": {}, "error": None}
    try:
        unit = registry.get(task["unit"])
        cfg = unit.make_config(None, **task["config"])
        outdir = Path(task["outdir"])
        outdir.mkdir(parents=True, exist_ok=True)
        if any(m in SYNTH_MEASURES for m in task["measures"]):
            from .eda.synth import area

            r = area(unit, cfg, liberty=task["liberty"], clock_ns=task["clock_ns"], outdir=outdir,
                     progress=False)   # the sweep's own lines and bar say where it is
            for m in SYNTH_MEASURES:
                if m in task["measures"]:
                    rec["measures"].update({c: r.get(c) for c in MEASURES[m]})
            rec["verilog_sha256"] = r["verilog_sha256"]
            rec["tools"] = r["tools"]
        if "regress" in task["measures"]:
            from .eda.simulate import run_testbench

            res = run_testbench(unit, cfg, seed=task["seed"], effort=task["effort"],
                                build_root=outdir)
            rec["measures"].update(passed=res.passed, tests=res.tests, failed=res.failed)
            rec["log"] = str(res.log)
    except Exception as e:  # recorded in the point's row; the sweep goes on
        rec["error"] = str(e) if isinstance(e, FlowError) else f"{type(e).__name__}: {e}"
    rec["seconds"] = round(time.monotonic() - start, 2)
    rec["host"] = socket.gethostname()
    rec["pid"] = os.getpid()
    return rec


# --------------------------------------------------------------------------------------------
# results.jsonl


def read_results(path: Path) -> dict[str, dict]:
    """Point hash → its last record in ``results.jsonl``; unreadable lines (a truncated last
    line from a killed run) are ignored."""
    done = {}
    try:
        text = path.read_text()
    except FileNotFoundError:
        return done
    for line in text.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and "hash" in rec:
            done[rec["hash"]] = rec
    return done


class ResultLog:
    """Appends one JSON line per finished point, durably (flush + fsync)."""

    def __init__(self, path: Path):
        # cut a truncated last line, so that the next record starts on a line of its own
        if path.exists():
            data = path.read_bytes()
            if data and not data.endswith(b"\n"):
                with open(path, "r+b") as f:
                    f.truncate(data.rfind(b"\n") + 1)
        self.path = path
        try:  # never through a symbolic link
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        except OSError as e:
            raise FlowError(f"cannot write {path}: {e.strerror or e}") from None
        self.f = os.fdopen(fd, "a", encoding="utf-8")

    def append(self, rec: dict) -> None:
        try:
            self.f.write(json.dumps(rec, ensure_ascii=False, default=str) + "\n")
            self.f.flush()
            os.fsync(self.f.fileno())
        except OSError as e:
            raise FlowError(f"cannot write {self.path}: {e.strerror or e}") from None

    def close(self) -> None:
        self.f.close()


# --------------------------------------------------------------------------------------------
# running


def _default_outdir(plan: Plan) -> Path:
    from . import build_dir

    return build_dir() / "sweep" / f"{plan.unit.name}-{plan.spec_hash}"


def _task(plan: Plan, p: Point, out: Path) -> dict:
    return {"unit": plan.unit.name, "config": config_dict(p.cfg), "clock_ns": p.clock_ns,
            "liberty": plan.liberty, "measures": list(plan.measures), "seed": plan.seed,
            "effort": plan.effort, "outdir": str(out / "points" / p.hash), "hash": p.hash}


def _run_serial(tasks, done):
    for task in tasks:
        done(task, compute_point(task))


def _run_local(tasks, jobs: int, done):
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    pool = ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_worker_init)
    try:
        futures = {pool.submit(compute_point, t): t for t in tasks}
        for fut in as_completed(futures):
            done(futures[fut], _result(fut))
    except BaseException:
        # Ctrl-C (or a failure here): stop every worker with its tools at once; a worker left
        # alone would go on with the calls already queued to it
        procs = list((getattr(pool, "_processes", None) or {}).values())
        for proc in procs:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except (ProcessLookupError, PermissionError):
                pass
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def _worker_init() -> None:
    """A local worker leads a process group of its own, with the tools it starts: Ctrl-C in a
    terminal reaches only the sweep's process, which then ends each worker's group."""
    os.setpgid(0, 0)


def _result(fut) -> dict | None:
    """A future's record; when the worker itself died (a crash, a lost machine), a record
    holding only the error."""
    try:
        return fut.result()
    except Exception as e:
        return {"error": f"worker failed: {type(e).__name__}: {e}"}


def _connect(address: str):
    try:
        from dask.distributed import Client
    except ImportError:
        raise FlowError("--scheduler needs dask[distributed] in this environment; run "
                        "'make setup' (or: pip install 'dask[distributed]')") from None

    class _Client(Client):
        """A client that, when it cannot connect, stops its event loop at once: otherwise the
        half-made client's destructor tries to close the connection it never had, waits 20 s
        and prints a traceback after the one-line error."""

        def __init__(self, *args, **kwargs):
            try:
                super().__init__(*args, **kwargs)
            except BaseException:
                with contextlib.suppress(Exception):
                    self.status = "closed"        # nothing for close() (and __del__) to do
                with contextlib.suppress(Exception):
                    self._loop_runner.stop()
                raise

    try:
        return _Client(address, timeout="10s", set_as_default=False)
    except (OSError, TimeoutError, ValueError) as e:
        raise FlowError(f"--scheduler {address}: cannot connect to a Dask scheduler "
                        f"({type(e).__name__}: {e})") from None


def _run_dask(client, tasks, done):
    from dask.distributed import as_completed

    futures = {}
    try:
        for t in tasks:
            futures[client.submit(compute_point, t, pure=False)] = t
        for fut in as_completed(list(futures), loop=client.loop):
            done(futures[fut], _result(fut))
    except BaseException:
        client.cancel(list(futures))
        raise


def _summary(rec: dict) -> str:
    if rec.get("error"):
        return "ERROR " + rec["error"].strip().splitlines()[0]
    m, parts = rec["measures"], []
    if "area_um2" in m:
        parts.append(f"{m['area_um2']:.1f} µm²")
    if "fmax_mhz" in m:
        parts.append(f"fmax {m['fmax_mhz']:.1f} MHz" if m["fmax_mhz"] else "fmax n/a")
    if "passed" in m:
        parts.append(f"regress {'PASS' if m['passed'] else 'FAIL'} "
                     f"{m['tests'] - m['failed']}/{m['tests']}")
    return ", ".join(parts)


def cmd_sweep(args) -> int:
    """``trainfab sweep``: plan, run the points not done yet, write the table, plots and
    summary.  Exit 0, or 1 when a point failed or a regression failed."""
    from .runs import ensure_dir, locked, precheck
    from .eda.tools import require

    if args.jobs is not None and args.scheduler:
        raise FlowError("-j/--jobs sets local processes; with --scheduler the cluster's workers "
                        "run the points")
    if args.jobs is not None and not JOBS_RANGE[0] <= args.jobs <= JOBS_RANGE[1]:
        raise FlowError(f"-j {args.jobs}: give {JOBS_RANGE[0]} to {JOBS_RANGE[1]} processes")
    plan = plan_sweep(args)
    jobs = args.jobs or _cpus()
    out = precheck(Path(args.output) if args.output else _default_outdir(plan), REPORT_FILES)
    _check_store(out)
    existed = out.exists()
    ensure_dir(out)
    try:
        with locked(out / ".sweep.lock", busy=f"another sweep is running in {out}"):
            return _sweep(plan, args, out, jobs, require)
    finally:
        if not existed:  # a sweep that stopped before writing anything leaves no folder
            with contextlib.suppress(OSError):
                out.rmdir()


def _own_results(out: Path) -> bool:
    """Whether ``out/results.jsonl`` is a sweep's results file: a regular file the folder's
    manifest lists.  Its hash is not compared: the file grows a record at a time, a killed
    sweep can leave a last line cut short, and the sweep reads it record by record."""
    from .runs import load_manifest

    path = out / RESULTS
    return (path.is_file() and not path.is_symlink()
            and RESULTS in load_manifest(out).files)


def _check_store(out: Path) -> None:
    """The sweep's resumable store in ``out`` (``results.jsonl``, ``points/``) is trainfab's, or
    absent: a file of the user's of that name, a link or a folder in the way stops the sweep
    before it runs."""
    results, points = out / RESULTS, out / "points"
    if os.path.lexists(results) and not _own_results(out):
        raise FlowError(f"{results} is not the results file of a sweep trainfab ran (a file of "
                        "yours, a link or one changed since): move it away or give another "
                        "output folder")
    if os.path.lexists(points) and (points.is_symlink() or not points.is_dir()):
        raise FlowError(f"{points} is {'a symbolic link' if points.is_symlink() else 'a file'}, "
                        "where a sweep keeps its points: move it away or give another output "
                        "folder")


def _cpus() -> int:
    """CPUs this process may use (its affinity mask where the system has one)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # pragma: no cover (macOS)
        return os.cpu_count() or 1


def _sweep(plan: Plan, args, out: Path, jobs: int, require) -> int:
    if args.fresh:  # only what an earlier sweep wrote (the folder's manifests prove it)
        from .runs import remove_owned

        if _own_results(out):
            (out / RESULTS).unlink()
        if (out / "points").is_dir():
            for point in sorted((out / "points").iterdir()):
                if point.is_dir() and not point.is_symlink():
                    remove_owned(point)
            with contextlib.suppress(OSError):
                (out / "points").rmdir()
    records = read_results(out / RESULTS)
    todo = [p for p in plan.points
            if p.hash not in records or records[p.hash].get("error")]
    total, ndone = len(plan.points), len(plan.points) - len(todo)
    client = None
    if not todo:
        where = ""
    elif args.scheduler:
        client = _connect(args.scheduler)
        threads = client.nthreads()
        where = (f"on the Dask cluster at {args.scheduler} ({len(threads)} workers, "
                 f"{sum(threads.values())} threads"
                 f"{'; waiting for workers to join' if not threads else ''})")
    else:
        if plan.synth:
            require("yosys")
            require("sta")
        if "regress" in plan.measures and plan.unit.tests.sim == "icarus":
            require("iverilog")
        jobs = min(jobs, len(todo))
        where = "in this process" if jobs == 1 else f"on {jobs} local processes"
    where = f" {where}" if where else ""
    print(f"{plan.unit.name}: {total} points, {ndone} already done, {len(todo)} to run{where}; "
          f"output {out}", flush=True)
    tasks = [_task(plan, p, out) for p in todo]
    by_hash = {p.hash: p for p in plan.points}
    count = [ndone]
    log = ResultLog(out / RESULTS) if todo else None
    # a bar with the time left on a terminal (standard error); the [i/n] lines stay for logs
    bar = progress.bar(len(todo), plan.unit.name, "points", enabled=bool(todo))

    def done(task, rec):
        from .runs import record

        p = by_hash[task["hash"]]
        rec = {"hash": p.hash, "measures": {}, **rec}
        rec["point"] = p.values
        rec["config"] = config_dict(p.cfg)
        log.append(rec)
        record(out, [RESULTS])  # the store is trainfab's: --fresh may remove it
        records[p.hash] = rec
        count[0] += 1
        progress.echo(f"[{count[0]}/{total}] {p.label}: {_summary(rec)} "
                      f"({rec.get('seconds', 0):.1f} s)")
        bar.update()

    try:
        if client is not None:
            _run_dask(client, tasks, done)
        elif todo and jobs == 1:
            _run_serial(tasks, done)
        elif todo:
            _run_local(tasks, jobs, done)
    finally:
        bar.close()
        if log:
            log.close()
        if client is not None:
            client.close()
    paths = write_outputs(plan, records, out)
    errors = [p for p in plan.points if records[p.hash].get("error")]
    failed = [p for p in plan.points if records[p.hash]["measures"].get("passed") is False]
    if errors:
        print(f"{len(errors)} of {total} points failed (error column; rerun to retry them): "
              + "; ".join(p.label for p in errors[:5]) + (" …" if len(errors) > 5 else ""))
    if failed:
        print(f"{len(failed)} of {total} points failed their regression: "
              + "; ".join(p.label for p in failed[:5]) + (" …" if len(failed) > 5 else ""))
    plots = paths["plots"]
    print(f"written: {paths['markdown']}, {paths['csv']}, {paths['json']}"
          + (f", {len(plots)} plots {out}/*_vs_*.png" if plots else ""))
    return 1 if errors or failed else 0


# --------------------------------------------------------------------------------------------
# outputs


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
    from .runs import staged

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


__all__ = ["CLOCK", "MEASURES", "FRONT_PLOT", "add_arguments", "check_hardware_fields",
           "cmd_sweep", "compute_point", "front_points", "parse_grid", "plan_sweep",
           "read_results", "split_values", "table", "write_outputs"]


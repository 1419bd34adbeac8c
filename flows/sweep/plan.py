"""The plan of a sweep: its constants, command-line options, grid parsing, points and their
hashes, and the check that every swept field changes the hardware; all checked before anything
runs."""

import argparse
import dataclasses
import itertools
import json
import math

from golden import ConfigError, config_dict

from .. import FlowError
from ..declare import EFFORTS
from ..layout import DEFAULT_CLOCK_NS, DEFAULT_LIBERTY

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
    from ..options import SEED_HELP, SEED_RANGE, UNIT_HELP, bounded

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
    from ..eda.generate import sha256

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
    from ..config import parse_set

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
    from ..options import CLOCK_RANGE_NS, check_clock

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
    from .. import registry
    from ..config import load_config, parse_set, refuse_runtime_sets
    from ..eda.tools import liberty as find_liberty

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
    package docstring: compared at the first point and around each one-field change of it)."""
    from ..eda.generate import sha256, to_verilog

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

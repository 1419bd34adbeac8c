"""``trainfab area UNIT``: yosys area and OpenSTA timing of one unit."""

import json
from pathlib import Path

from .. import registry
from ..declare import resolve
from ..layout import LAYOUT
from ..options import UNIT_HELP
from .common import clock_arg, config_args, liberty_arg


def add_arguments(p) -> None:
    p.add_argument("unit", help=UNIT_HELP)
    config_args(p)
    liberty_arg(p)
    clock_arg(p)
    p.add_argument("--output", "-o", metavar="DIR",
                   help="output folder (default build/area/UNIT, which holds the latest run of "
                        "the unit: a run of another configuration replaces it)")
    p.add_argument("--breakdown", action="store_true",
                   help="also synthesize hierarchically and report the area of each block")
    p.add_argument("--max-fanout", type=int, metavar="N", default=None,
                   help="buffer trees on every cell-driven net of more than N loads (2 to "
                        "10,000) before timing, as placement-aware synthesis inserts them; "
                        "default: the netlist as mapped")


def run(args) -> int:
    from ..config import load_config, refuse_runtime_sets
    from ..eda.fanout import check_max_fanout
    from ..eda.synth import _area_files, area, breakdown_markdown
    from ..runs import precheck

    check_max_fanout(args.max_fanout)
    unit = registry.get(args.unit)
    refuse_runtime_sets(unit, args.sets, "the area")
    cfg = load_config(unit, args.config, args.sets)
    before = None if args.output else _last_run(unit)
    precheck(Path(args.output) if args.output else LAYOUT.area(unit.name),
             _area_files(unit.top))
    print(f"{unit.name}: synthesizing …", flush=True)
    r = area(unit, cfg, liberty=args.liberty, clock_ns=args.clock_ns,
             outdir=Path(args.output) if args.output else None, breakdown=args.breakdown,
             max_fanout=args.max_fanout)
    _print_report(unit, r)
    if args.breakdown:
        print(breakdown_markdown(r))
        if unit.synth.breakdown_table:
            print(resolve(unit.synth.breakdown_table)(r))
    print(f"report: {r['outdir']}/area.json, {r['outdir']}/area.md")
    _note_replaced(unit, before, r)
    return 0


def _print_report(unit, r: dict) -> None:
    fmax = f"{r['fmax_mhz']:.1f} MHz" if r.get("fmax_mhz") else "n/a"
    ge = f" ({r['area_ge']:,.0f} GE)" if r.get("area_ge") else ""
    path = (f" ({r['startpoint']} → {r['endpoint']})" if r.get("startpoint") else "")
    print(f"{unit.name}: {r['area_um2']:.1f} µm²{ge}, {r['cells']} cells, {r['flip_flops']} "
          f"flip-flops, ~{r['transistors_estimate']} transistors, critical path "
          f"{r.get('critical_path_ns')} ns{path}, fmax {fmax}")
    b = r.get("fanout_buffers")
    if b is not None:
        print(f"{unit.name}: with buffer trees on nets of more than {b['max_fanout']} loads: "
              f"{b['buffers']} {b['buffer']} on {b['nets']} nets, {b['area_um2']:,.1f} µm² "
              f"(area as mapped {r['area_um2_as_mapped']:.1f} µm²)")


def _note_replaced(unit, before, r: dict) -> None:
    """Say when this run replaced the default folder's report of another configuration."""
    run = {"config": r["config"], "clock_ns": r["clock_ns"], "liberty": r["liberty"],
           "max_fanout": (r.get("fanout_buffers") or {}).get("max_fanout")}
    if before is None or before == run:
        return
    changed = [f"{k}={v}" for k, v in before["config"].items() if r["config"].get(k, v) != v]
    changed += [f"{k} {before[k]}" for k in ("clock_ns", "liberty", "max_fanout")
                if before[k] != run[k]]
    print(f"note: this replaced the report of another run of {unit.name} in "
          f"{r['outdir']} ({', '.join(changed) or 'another configuration'}); the default "
          "folder holds the latest run of each unit: give -o DIR to keep several")


def _last_run(unit):
    """What the last area run into the unit's default folder measured (configuration, clock,
    liberty), or ``None`` when there is none that can be read."""
    try:
        old = json.loads(LAYOUT.area_report(unit.name).read_text())
        return {"config": dict(old["config"]), "clock_ns": old["clock_ns"],
                "liberty": old["liberty"],
                "max_fanout": (old.get("fanout_buffers") or {}).get("max_fanout")}
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return None

"""``trainfab close UNIT --clock-ns P``: the smallest pipeline depth that meets the period
(:func:`flows.eda.close.close`); exit status 1 when none does."""

import sys
from pathlib import Path

from .. import FlowError, registry
from ..options import UNIT_HELP
from .common import clock_arg, config_args, jobs_arg, liberty_arg, output_arg


def add_arguments(p) -> None:
    p.add_argument("unit", help=UNIT_HELP + " (one with a pipeline field)")
    clock_arg(p, required=True, help_text="the clock period to meet, in ns")
    config_args(p)
    liberty_arg(p)
    jobs_arg(p, "depths synthesized at a time, in worker processes (default 1)")
    output_arg(p, "build/close/UNIT")
    p.add_argument("--max-fanout", type=int, metavar="N", default=None,
                   help="time every depth with buffer trees on nets of more than N loads "
                        "(2 to 10,000), as `area --max-fanout`")


def run(args) -> int:
    """Exit 0 when a depth meets the period, 1 when none does."""
    from ..config import load_config, refuse_runtime_sets
    from ..eda.close import close, has_pipeline, pipelined_units, table

    unit = registry.get(args.unit)
    if not has_pipeline(unit):
        raise FlowError(f"{unit.name} has no pipeline field; units with one: "
                        f"{', '.join(pipelined_units()) or 'none'}")
    refuse_runtime_sets(unit, args.sets, "the timing")
    base = load_config(unit, args.config, args.sets)
    r = close(unit, base, args.clock_ns, liberty=args.liberty, jobs=args.jobs,
              outdir=Path(args.output) if args.output else None, max_fanout=args.max_fanout)
    print(table(r["rows"]))
    out = Path(r["outdir"])
    if r["chosen"] is None:
        print(f"trainfab: {unit.name}: no pipeline depth up to {r['max_depth']} meets "
              f"{r['clock_ns']:g} ns; best pipeline={r['best']}: {r['best_path']}",
              file=sys.stderr)
        print(f"written: {out / r['toml']} (pipeline={r['best']}), {out}/area.json, "
              f"{out}/area.md, {out}/close.md")
        return 1
    print(f"{unit.name}: pipeline={r['chosen']} meets {r['clock_ns']:g} ns; written: "
          f"{out / r['toml']}, {out}/area.json, {out}/area.md, {out}/close.md")
    return 0

"""``trainfab regress UNIT… | --all``: cocotb regressions against the golden models."""

import sys

from .. import FlowError
from ..declare import EFFORTS
from ..options import SEED_HELP, SEED_RANGE, SIMULATORS, bounded
from .common import config_args, fixed_fields, units_of


def add_arguments(p) -> None:
    p.add_argument("units", nargs="*", metavar="UNIT",
                   help="units to run ('trainfab list' lists them); or --all")
    p.add_argument("--all", action="store_true",
                   help="run every unit (long at standard effort: use --effort quick for a "
                        "first look)")
    config_args(p)
    p.add_argument("--sim", choices=SIMULATORS, default=None,
                   help="simulator (default: each unit's own, icarus for most)")
    p.add_argument("--seed", type=bounded(int, *SEED_RANGE), default=1,
                   help=f"seed of the testbenches' random stimuli, {SEED_HELP} (default 1)")
    p.add_argument("--effort", choices=EFFORTS, default="standard",
                   help="size of the testbenches' random parts (default standard, as make test)")
    p.add_argument("--waves", action="store_true", help="dump waveforms into the run folder")
    p.add_argument("--all-configs", action="store_true",
                   help="also run the non-default configurations the test suite uses")


def run(args) -> int:
    from ..config import load_config
    from ..eda.simulate import failure_details, run_testbench

    if not args.units and not args.all:
        raise FlowError("regress needs the units to run (see 'trainfab list') or --all for "
                        "every unit")
    if args.units and args.all:
        raise FlowError("give units or --all, not both")
    units = units_of(args.units)
    if (args.config or args.sets) and len(units) != 1:
        raise FlowError("--config/--set need exactly one unit")
    jobs = []
    for unit in units:
        base = load_config(unit, args.config, args.sets)
        if args.all_configs:
            configs, skipped = unit.user_test_configs(base, fixed=fixed_fields(unit, args),
                                                      effort=args.effort)
            for line in skipped:
                print(f"{unit.name}: not run: {line}", flush=True)
        else:
            configs = [("default", base)]
        jobs += [(unit, cfg) for _, cfg in configs]
    failed = 0
    for k, (unit, cfg) in enumerate(jobs, 1):
        print(f"[{k}/{len(jobs)}] {unit.name} …", flush=True)
        result = run_testbench(unit, cfg, seed=args.seed, sim=args.sim, effort=args.effort,
                               waves=args.waves)
        print(f"[{k}/{len(jobs)}] {result.summary()}", flush=True)
        if not result.passed:
            failed += 1
            print(failure_details(result), file=sys.stderr)
    print(f"{len(jobs) - failed} passed, {failed} failed")
    return 1 if failed else 0

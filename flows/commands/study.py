"""``trainfab study dispatch|hbfp|fast-time|fpraker-rows [RUN]``: the studies of the
papers' claims that need no synthesis."""

import argparse
from pathlib import Path

from .. import FlowError, registry
from ..layout import LAYOUT
from ..options import SEED_HELP, SEED_RANGE, bounded
from .common import config_args

STUDIES = ("dispatch", "hbfp", "fast-time", "fpraker-rows")


def add_arguments(p) -> None:
    from ..studies.dispatch import CYCLES_DEFAULT, CYCLES_RANGE

    p.add_argument("study", choices=STUDIES, help="which study")
    p.add_argument("run", nargs="?", metavar="RUN",
                   help="fast-time: the output folder of a `trainfab train` run with `fast`; "
                        "fpraker-rows: a capture folder of `trainfab train --capture` "
                        "(default: synthetic operands)")
    config_args(p)
    p.add_argument("--with", dest="with_runs", action="append", default=[], metavar="RUN",
                   help="fast-time: another `trainfab train` run of the same model, data, "
                        "schedule and seed whose formats RUN lacks (repeatable; e.g. "
                        "build/training/lenet-baselines)")
    p.add_argument("--areas", metavar="DIR", default=None,
                   help="fast-time: a folder of `trainfab area` reports of the fMAC (m_max=4) "
                        "and baseline.mac16 formats, which size the iso-area arrays (default: "
                        "the paper's sizes)")
    p.add_argument("--loads", metavar="LIST|A:B:STEP", default=None,
                   help="dispatch: offered inference loads, fractions of the inference-only "
                        "capacity (default 0.05:1:0.05 plus 1.1, 1.2)")
    p.add_argument("--cycles", type=bounded(int, *CYCLES_RANGE), default=None,
                   help=f"dispatch: measured cycles per run, {CYCLES_RANGE[0]:,} to "
                        f"{CYCLES_RANGE[1]:,} (default {CYCLES_DEFAULT:,})")
    p.add_argument("--samples", type=_hbfp_samples, default=None, metavar="N",
                   help="hbfp: dot products per point, a multiple of 64 from 64 to 1,048,576 "
                        "(default 8,192)")
    p.add_argument("--seed", type=bounded(int, *SEED_RANGE), default=None,
                   help=f"dispatch, hbfp, fpraker-rows: seed of the random operands or "
                        f"arrivals, {SEED_HELP} (default 1)")
    p.add_argument("--output", "-o", metavar="DIR",
                   help="output folder (default build/study/<study>)")


def _hbfp_samples(text: str) -> int:
    """``study hbfp --samples``: a multiple of 64 from 64 to 2**20."""
    n = bounded(int, 64, 1 << 20)(text)
    if n % 64:
        raise argparse.ArgumentTypeError(f"{n} is not a multiple of 64")
    return n


#: the options of ``study`` each study takes (beyond RUN, --seed and -o)
_STUDY_OPTIONS = {"dispatch": {"config", "sets", "loads", "cycles", "seed"},
                  "hbfp": {"seed", "samples"},
                  "fast-time": {"with_runs", "areas"},
                  "fpraker-rows": {"config", "sets", "seed"}}
_STUDY_FLAGS = {"with_runs": "--with", "areas": "--areas", "config": "--config", "sets": "--set",
                "loads": "--loads", "cycles": "--cycles",
                "seed": "--seed", "samples": "--samples"}


def run(args) -> int:
    given = {name for name in _STUDY_FLAGS if getattr(args, name) not in (None, [])}
    extra = sorted(given - _STUDY_OPTIONS[args.study], key=list(_STUDY_FLAGS).index)
    if extra:
        takers = [n for n, o in _STUDY_OPTIONS.items() if extra[0] in o]
        raise FlowError(f"study {args.study} takes no {_STUDY_FLAGS[extra[0]]} (only "
                        + (", ".join(takers[:-1]) + " and " if len(takers) > 1 else "")
                        + f"{takers[-1]} take it)")
    if args.seed is None:
        args.seed = 1
    if args.study == "hbfp":
        return _study_hbfp(args)
    if args.study == "fast-time":
        return _study_fast_time(args)
    if args.study == "fpraker-rows":
        return _study_fpraker_rows(args)
    if args.run is not None:
        raise FlowError(f"study {args.study} takes no RUN folder")
    return _study_dispatch(args)


def _study_output(args, name: str, names) -> Path:
    from ..runs import precheck

    return precheck(Path(args.output) if args.output else LAYOUT.study(name), names)


def _study_hbfp(args) -> int:
    from ..runs import staged
    from ..studies.hbfp_error import hbfp_error_study

    if args.run is not None:
        raise FlowError("study hbfp takes no RUN folder")
    names = ("hbfp.md", "hbfp.json", "hbfp.png")
    out = _study_output(args, "hbfp", names)
    with staged(out, names=names) as work:
        hbfp_error_study(work, seed=args.seed, **({"samples": args.samples}
                                                   if args.samples is not None else {}))
        text = (work / "hbfp.md").read_text()
    print(text)
    print(f"written: {out / 'hbfp.md'}, {out / 'hbfp.json'}, {out / 'hbfp.png'}")
    return 0


def _study_fast_time(args) -> int:
    from ..runs import staged
    from ..studies.fast_time import fast_time_study, load_areas, load_run, merge_runs

    if args.run is None:
        raise FlowError("study fast-time needs the folder of a `trainfab train` run with the "
                        "fast format (e.g. build/train/cnn)")
    names = ("fast_time.md", "fast_time.json", "widths.png")
    out = _study_output(args, "fast-time", names)
    # a run the study cannot use is refused before any work
    merge_runs(load_run(Path(args.run)), Path(args.run), args.with_runs)
    areas = Path(args.areas) if args.areas is not None else None
    if areas is not None:
        load_areas(areas)
    with staged(out, names=names) as work:
        fast_time_study(Path(args.run), work, extra_runs=[Path(r) for r in args.with_runs],
                        areas=areas)
        text = (work / "fast_time.md").read_text()
    print(text)
    print(f"written: {out / 'fast_time.md'}, {out / 'fast_time.json'}, {out / 'widths.png'}")
    return 0


def _study_fpraker_rows(args) -> int:
    from .. import progress
    from ..config import load_config, parse_set
    from ..runs import staged
    from ..studies.fpraker_rows import (OUTPUTS, ROWS, SYNCS, capture_operands,
                                       fpraker_rows_study)

    fixed = [parse_set(item)[0] for item in args.sets]
    for name in ("rows", "cols", "sync"):
        if name in fixed:
            raise FlowError(f"--set {name}: the study varies rows ({', '.join(map(str, ROWS))}) "
                            f"and sync ({', '.join(SYNCS)}) at 8 columns")
    cfg = load_config(registry.get("fpraker.tile"), args.config, args.sets)
    if args.run is not None and not Path(args.run).is_dir():
        raise FlowError(f"study fpraker-rows: {args.run} is not a folder; give a capture "
                        "folder of `trainfab train --capture` or nothing (synthetic operands)")
    out = _study_output(args, "fpraker-rows", OUTPUTS)
    # the capture is read (and refused when it is not one) before any work
    operands = capture_operands(args.run) if args.run is not None else None
    with staged(out, names=OUTPUTS) as work, \
            progress.bar(None, "fpraker-rows", "tile runs") as bar:
        def step(done, total, what):
            bar.set_total(total)
            bar.set(done, what)
        fpraker_rows_study(cfg, work, capture=args.run, seed=args.seed, progress=step,
                           operands=operands)
        text = (work / "fpraker_rows.md").read_text()
    print(text)
    print(f"written: {out / 'fpraker_rows.md'}, {out / 'fpraker_rows.json'}, "
          f"{out / 'fpraker_rows.png'}")
    return 0


def _study_dispatch(args) -> int:
    from ..config import load_config, parse_set
    from ..studies.dispatch import (CYCLES_DEFAULT, LOADS, format_ratio, main_dispatch,
                                   parse_loads)

    unit = registry.get("equinox.dispatcher")
    if any(parse_set(item)[0] == "policy" for item in args.sets):
        raise FlowError("--set policy: the study runs every policy (priority, fair, inf_only)")
    cfg = load_config(unit, args.config, args.sets)
    loads = parse_loads(args.loads) if args.loads is not None else LOADS
    cycles = args.cycles if args.cycles is not None else CYCLES_DEFAULT
    res = main_dispatch(cfg, loads, cycles, args.seed,
                        Path(args.output) if args.output else None)
    S = res["service_time"]
    for policy in res["policies"]:
        print(f"{policy}: highest load with p99 <= 10 S ({10 * S} cycles): "
              f"{res['max_load'][policy]:g}")
    for name, key in (("priority/fair", "ratio_priority_fair"),
                      ("priority/inf_only", "ratio_priority_inf_only")):
        print(f"{name}: {format_ratio(res[key])}")
    print(f"written: {res['paths']['markdown']}, {res['paths']['plot']}, {res['paths']['json']}")
    return 0

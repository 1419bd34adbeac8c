"""The ``trainfab`` command line.

Exit status: 0 success, 1 a failing check (a regression failed), 2 a usage, configuration or
environment error.  Errors are one line; set ``TRAINFAB_DEBUG=1`` for a traceback.
"""

import argparse
import json
import os
import sys
from pathlib import Path

from . import FlowError, families, registry
from .options import SEED_HELP, SEED_RANGE, UNIT_HELP, bounded
from .config import load_config, presets, refuse_runtime_sets
from .declare import EFFORTS, resolve


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise FlowError(f"{message} (see '{self.prog} --help')")




def _config_args(p, multi: bool = False):
    p.add_argument("--config", "-c", metavar="FILE|PRESET",
                   help="TOML file or preset name from flows/configs (default: the unit's paper preset)")
    p.add_argument("--set", "-s", dest="sets", action="append", default=[], metavar="FIELD=VALUE",
                   help="override one configuration field (repeatable)")


def _clock_ns(text: str) -> float:
    """``--clock-ns``: a finite period in the range the flow accepts (one-line error otherwise)."""
    from .eda.synth import check_clock

    return check_clock(text)


def _units(names) -> list:
    """The named units, each once, in the order given (default: every unit)."""
    return ([registry.get(n) for n in dict.fromkeys(names)] if names
            else list(registry.UNITS.values()))


def cmd_list(args) -> int:
    if args.unit is not None:
        from .config import describe_fields

        print(describe_fields(registry.get(args.unit)))
        return 0
    print("units:")
    width = max(len(n) for n in registry.UNITS)
    for unit in registry.UNITS.values():
        print(f"  {unit.name:<{width}}  {unit.summary}")
    print("presets:")
    for name, path in presets().items():
        print(f"  {name:<{width}}  {path}")
    return 0


def cmd_generate(args) -> int:
    from .eda.generate import generate

    unit = registry.get(args.unit)
    cfg = load_config(unit, args.config, args.sets)
    man = generate(unit, cfg, Path(args.output) if args.output else None)
    print(f"{unit.name}: {man['verilog']} ({len(man['ports'])} ports, sha256 "
          f"{man['verilog_sha256'][:16]}…); manifest {Path(man['verilog']).with_suffix('.json')}")
    return 0


def _fixed_fields(unit, args) -> set[str]:
    """The configuration fields a user set explicitly: ``--set`` fields and those of a
    ``--config`` file's table for the unit."""
    from .config import parse_set, preset_path, read_toml, unit_table

    fixed = {parse_set(item)[0] for item in args.sets}
    if args.config is not None:
        fixed |= set(unit_table(read_toml(preset_path(args.config)), unit) or {})
    return fixed


def cmd_regress(args) -> int:
    from .eda.simulate import failure_details, run_testbench

    if not args.units and not args.all:
        raise FlowError("regress needs the units to run (see 'trainfab list') or --all for "
                        "every unit")
    if args.units and args.all:
        raise FlowError("give units or --all, not both")
    units = _units(args.units)
    if (args.config or args.sets) and len(units) != 1:
        raise FlowError("--config/--set need exactly one unit")
    jobs = []
    for unit in units:
        base = load_config(unit, args.config, args.sets)
        if args.all_configs:
            configs, skipped = unit.user_test_configs(base, fixed=_fixed_fields(unit, args),
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


def cmd_area(args) -> int:
    from .eda.fanout import check_max_fanout
    from .eda.synth import area, breakdown_markdown

    check_max_fanout(args.max_fanout)

    unit = registry.get(args.unit)
    refuse_runtime_sets(unit, args.sets, "the area")
    cfg = load_config(unit, args.config, args.sets)
    before = None if args.output else _area_config(unit)
    from . import build_dir
    from .eda.synth import _area_files
    from .runs import precheck

    precheck(Path(args.output) if args.output else build_dir() / "area" / unit.name,
             _area_files(unit.top))
    print(f"{unit.name}: synthesizing …", flush=True)
    r = area(unit, cfg, liberty=args.liberty, clock_ns=args.clock_ns,
             outdir=Path(args.output) if args.output else None, breakdown=args.breakdown,
             max_fanout=args.max_fanout)
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
    if args.breakdown:
        print(breakdown_markdown(r))
        if unit.synth.breakdown_table:
            print(registry.resolve(unit.synth.breakdown_table)(r))
    print(f"report: {r['outdir']}/area.json, {r['outdir']}/area.md")
    run = {"config": r["config"], "clock_ns": r["clock_ns"], "liberty": r["liberty"],
           "max_fanout": (r.get("fanout_buffers") or {}).get("max_fanout")}
    if before is not None and before != run:
        changed = [f"{k}={v}" for k, v in before["config"].items()
                   if r["config"].get(k, v) != v]
        changed += [f"{k} {before[k]}" for k in ("clock_ns", "liberty", "max_fanout")
                    if before[k] != run[k]]
        print(f"note: this replaced the report of another run of {unit.name} in "
              f"{r['outdir']} ({', '.join(changed) or 'another configuration'}); the default "
              "folder holds the latest run of each unit: give -o DIR to keep several")
    return 0


def _area_config(unit):
    """What the last area run into the unit's default folder measured (configuration, clock,
    liberty), or ``None`` when there is none that can be read."""
    from . import build_dir

    try:
        old = json.loads((build_dir() / "area" / unit.name / "area.json").read_text())
        return {"config": dict(old["config"]), "clock_ns": old["clock_ns"],
                "liberty": old["liberty"],
                "max_fanout": (old.get("fanout_buffers") or {}).get("max_fanout")}
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return None


def cmd_report(args) -> int:
    from .report import report

    return report(liberty=args.liberty, clock_ns=args.clock_ns, markdown=args.markdown,
                  units=_units(args.units))


def _tensor_analyses() -> dict:
    return {a.name: a for a in families.tensor_analyses()}


def _option_default(kwargs: dict):
    """The value an analysis option has when it is not given."""
    if "default" in kwargs:
        return kwargs["default"]
    return {"store_false": True, "store_true": False}.get(kwargs.get("action"))


def _analysis_options(args, analysis, analyses) -> dict:
    """The chosen analysis's options (``{dest: value}``); :class:`FlowError` for an option of
    another analysis given on the command line."""
    for other in analyses.values():
        if other.name == analysis.name:
            continue
        for flags, kwargs in other.options:
            if hasattr(args, kwargs["dest"]):
                raise FlowError(f"{flags[0]} applies to --analysis {other.name}, not "
                                f"{analysis.name}")
    return {kwargs["dest"]: getattr(args, kwargs["dest"], _option_default(kwargs))
            for _, kwargs in analysis.options}


def cmd_tensor_stats(args) -> int:
    from . import build_dir

    def progress(name, done, total):
        print(f"\r{name}: {done}/{total} values", end="", file=sys.stderr, flush=True)

    if args.analysis is None:
        raise FlowError("no family declares a tensor analysis")
    from .runs import precheck, staged

    analyses = _tensor_analyses()
    analysis = analyses[args.analysis]
    options = _analysis_options(args, analysis, analyses)
    source = Path(args.file)
    stem = source.resolve().name if source.is_dir() else source.stem
    names = (f"{stem}.md", f"{stem}.json")
    out = precheck(Path(args.output) if args.output else build_dir() / "tensor-stats", names)
    shown = progress if sys.stderr.isatty() else None
    if source.is_dir():  # a training capture (trainfab train --capture)
        from .studies import captures

        if not captures.is_capture(source) and not any(
                d.is_dir() and captures.is_capture(d) for d in source.iterdir()):
            raise FlowError(f"{source} is a directory, not a tensor file, nor a capture folder "
                            "of `trainfab train --capture` (no manifest.json in it or in its "
                            "sub-folders)")

        stats = captures.capture_stats(source, analysis, options, progress=shown)
        text = captures.capture_stats_markdown(stats)
    else:
        from .studies.tensors import read_tensors

        tensors = read_tensors(source)
        if not any(t.count for t in tensors):  # statistics of nothing would read as ratios of 0
            shapes = ", ".join(f"{t.name} {tuple(t.shape)}" for t in tensors[:4])
            raise FlowError(f"{source}: no values to measure: every tensor is empty ({shapes}"
                            f"{', …' if len(tensors) > 4 else ''})")
        stats = resolve(analysis.run)(source, progress=shown, **options)
        text = resolve(analysis.markdown)(stats)
    if sys.stderr.isatty():
        print(file=sys.stderr)
    with staged(out, names=names, collection=True) as work:
        (work / names[0]).write_text(text)
        (work / names[1]).write_text(json.dumps(stats, indent=2) + "\n")
    print(text)
    print(f"written: {out / names[0]}, {out / names[1]}")
    return 0


def cmd_bench(args) -> int:
    from .bench import main as bench_main

    return bench_main(["--quick"] if args.quick else [])


#: the options of ``study`` each study takes (beyond RUN, --seed and -o)
_STUDY_OPTIONS = {"dispatch": {"config", "sets", "loads", "cycles", "seed"},
                  "hbfp": {"seed", "samples"},
                  "fast-time": set(),
                  "fpraker-rows": {"config", "sets", "seed"}}
_STUDY_FLAGS = {"config": "--config", "sets": "--set", "loads": "--loads", "cycles": "--cycles",
                "seed": "--seed", "samples": "--samples"}


def cmd_study(args) -> int:
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
    from . import build_dir
    from .runs import precheck

    return precheck(Path(args.output) if args.output else build_dir() / "study" / name, names)


def _study_hbfp(args) -> int:
    from .runs import staged
    from .studies.hbfp_error import hbfp_error_study

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
    from .runs import staged
    from .studies.fast_time import fast_time_study, load_run

    if args.run is None:
        raise FlowError("study fast-time needs the folder of a `trainfab train` run with the "
                        "fast format (e.g. build/train/cnn)")
    names = ("fast_time.md", "fast_time.json", "widths.png")
    out = _study_output(args, "fast-time", names)
    load_run(Path(args.run))  # a run the study cannot use is refused before any work
    with staged(out, names=names) as work:
        fast_time_study(Path(args.run), work)
        text = (work / "fast_time.md").read_text()
    print(text)
    print(f"written: {out / 'fast_time.md'}, {out / 'fast_time.json'}, {out / 'widths.png'}")
    return 0


def _study_fpraker_rows(args) -> int:
    from . import progress
    from .config import parse_set
    from .runs import staged
    from .studies.fpraker_rows import (OUTPUTS, ROWS, SYNCS, capture_operands,
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
    from .config import parse_set
    from .studies.dispatch import (CYCLES_DEFAULT, LOADS, format_ratio, main_dispatch,
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


def cmd_train(args) -> int:
    from .studies.train.run import TrainOptions, output_folder, parse_formats, train

    opts = TrainOptions(model=args.model, formats=parse_formats(args.formats),
                        epochs=args.epochs, seed=args.seed, jobs=args.jobs,
                        dataset=args.dataset, capture=args.capture, output=args.output,
                        batch_size=args.batch_size, limit=args.limit)
    run = train(opts)
    out = output_folder(opts)
    print((out / "train.md").read_text())
    print(f"written: {out / 'train.md'}, {out / 'train.json'}, {out / 'train.csv'}, "
          f"{out / 'accuracy.png'}, {out / 'loss.png'}")
    if opts.capture:
        print(f"captured operands: {opts.capture}/<format> (trainfab speedup, tensor-stats)")
    if run.interrupted:
        raise KeyboardInterrupt
    if run.errors:
        for name, (msg, _) in run.errors.items():
            print(f"trainfab: format {name} failed: {msg}", file=sys.stderr)
        return 1
    return 0


def cmd_demo(args) -> int:
    from .report import demo

    return demo(seed=args.seed, sim=args.sim)


def cmd_paper(args) -> int:
    from .report import paper

    return paper(seed=args.seed, sim=args.sim, jobs=args.jobs, markdown=args.markdown)


def _hbfp_samples(text: str) -> int:
    """``study hbfp --samples``: a multiple of 64 from 64 to 2**20."""
    n = bounded(int, 64, 1 << 20)(text)
    if n % 64:
        raise argparse.ArgumentTypeError(f"{n} is not a multiple of 64")
    return n


def _span(bounds) -> str:
    return f"{bounds[0]:,} to {bounds[1]:,}"


#: help of every ``unit`` argument
def build_parser() -> argparse.ArgumentParser:
    from .eda.simulate import SIMULATORS
    from .studies.dispatch import CYCLES_DEFAULT, CYCLES_RANGE

    p = _Parser(prog="trainfab", description="Generate, verify and measure low-precision "
                "DNN-training arithmetic units (FPRaker, FAST, Equinox/HBFP, Gecko).")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    s = sub.add_parser("list", help="units and presets; with a UNIT, its configuration fields "
                       "(type, default, allowed values, meaning)")
    s.add_argument("unit", nargs="?", metavar="UNIT",
                   help="show this unit's configuration fields (for --set and --config)")
    s.set_defaults(func=cmd_list)

    s = sub.add_parser("generate", help="Verilog and a JSON manifest for one unit")
    s.add_argument("unit", help=UNIT_HELP)
    _config_args(s)
    s.add_argument("--output", "-o", metavar="DIR", help="output folder (default build/generate/UNIT)")
    s.set_defaults(func=cmd_generate)

    s = sub.add_parser("regress", help="cocotb regressions against the golden models")
    s.add_argument("units", nargs="*", metavar="UNIT",
                   help="units to run ('trainfab list' lists them); or --all")
    s.add_argument("--all", action="store_true",
                   help="run every unit (long at standard effort: use --effort quick for a "
                        "first look)")
    _config_args(s)
    s.add_argument("--sim", choices=SIMULATORS, default=None,
                   help="simulator (default: each unit's own, icarus for most)")
    s.add_argument("--seed", type=bounded(int, *SEED_RANGE), default=1,
                   help=f"seed of the testbenches' random stimuli, {SEED_HELP} (default 1)")
    s.add_argument("--effort", choices=EFFORTS, default="standard",
                   help="size of the testbenches' random parts (default standard, as make test)")
    s.add_argument("--waves", action="store_true", help="dump waveforms into the run folder")
    s.add_argument("--all-configs", action="store_true",
                   help="also run the non-default configurations the test suite uses")
    s.set_defaults(func=cmd_regress)

    for name, func, text in (("area", cmd_area, "yosys area and OpenSTA timing for one unit"),):
        s = sub.add_parser(name, help=text)
        s.add_argument("unit", help=UNIT_HELP)
        _config_args(s)
        s.add_argument("--liberty", default="osu018", help="osu018 (default) or a .lib path")
        s.add_argument("--clock-ns", type=_clock_ns, default=10.0,
                       help="clock period constraint in ns, 0.01 to 100000 (default 10)")
        s.add_argument("--output", "-o", metavar="DIR",
                       help="output folder (default build/area/UNIT, which holds the latest run "
                            "of the unit: a run of another configuration replaces it)")
        s.add_argument("--breakdown", action="store_true",
                       help="also synthesize hierarchically and report the area of each block")
        s.add_argument("--max-fanout", type=int, metavar="N", default=None,
                       help="buffer trees on every cell-driven net of more than N loads (2 to "
                            "10,000) before timing, as placement-aware synthesis inserts them; "
                            "default: the netlist as mapped")
        s.set_defaults(func=func)

    from .eda import close

    s = sub.add_parser("close", help=close.HELP)
    close.add_arguments(s, _config_args, _clock_ns)
    s.set_defaults(func=close.cmd)

    from .eda import timing

    s = sub.add_parser("timing", help=timing.HELP)
    timing.add_arguments(s)
    s.set_defaults(func=timing.cmd)

    from . import sweep

    s = sub.add_parser("sweep", help="area, timing or regressions of one unit over a grid of "
                       "configurations, on local processes or a Dask cluster")
    sweep.add_arguments(s)
    s.set_defaults(func=sweep.cmd_sweep)

    from .eda import paths, power
    from .studies import speedup

    for name, mod in (("power", power), ("paths", paths), ("speedup", speedup)):
        s = sub.add_parser(name, help=mod.HELP)
        mod.add_arguments(s)
        s.set_defaults(func=mod.cmd)

    s = sub.add_parser("report", help="area/timing of every unit at its paper preset, with ratios")
    s.add_argument("units", nargs="*", metavar="UNIT",
                   help="only these units (default: every unit)")
    s.add_argument("--liberty", default="osu018",
                   help="the standard cells to synthesize onto: osu018 (default) or a .lib path")
    s.add_argument("--clock-ns", type=_clock_ns, default=10.0,
                   help="clock period constraint in ns, 0.01 to 100000 (default 10)")
    s.add_argument("--markdown", metavar="FILE",
                   help="also write the report as a stamped results page (commit, date, "
                        "machine, tool versions) to FILE, e.g. docs/results.md")
    s.set_defaults(func=cmd_report)

    analyses = _tensor_analyses()
    s = sub.add_parser("tensor-stats", help="statistics of a tensor file (.npy, .npz, "
                       ".safetensors) or of a training capture folder (per epoch and kind): " + "; ".join(f"{a.name}: {a.summary}"
                                                     for a in analyses.values()))
    s.add_argument("file", help="a tensor file, or a capture folder of `trainfab train --capture`")
    default = next((a.name for a in analyses.values() if a.default), next(iter(analyses), None))
    s.add_argument("--analysis", choices=list(analyses), default=default,
                   help="which statistic (default: %(default)s)")
    for analysis in analyses.values():
        for flags, kwargs in analysis.options:
            # not given: absent from the arguments (an option of another analysis is an error)
            kwargs = dict(kwargs, help=kwargs.get("help", "") + f" [--analysis {analysis.name}]",
                          default=argparse.SUPPRESS)
            if "range" in kwargs:
                kwargs["type"] = bounded(int, *kwargs.pop("range"))
            s.add_argument(*flags, **kwargs)
    s.add_argument("--output", "-o", metavar="DIR", help="output folder (default build/tensor-stats)")
    s.set_defaults(func=cmd_tensor_stats)

    s = sub.add_parser("bench", help="speed of the golden models and cycle statistics")
    s.add_argument("--quick", action="store_true", help="smaller sizes")
    s.set_defaults(func=cmd_bench)

    s = sub.add_parser("study", help="studies: 'dispatch' = Equinox scheduler p99 latency and "
                       "training throughput vs inference load, per policy; 'hbfp' = HBFP "
                       "dot-product error vs mantissa, block and accumulator width; 'fast-time' "
                       "= FAST's training time and width map of a `trainfab train` run; "
                       "'fpraker-rows' = FPRaker tile cycles per group for 1, 2, 4 and 8 rows "
                       "under both column synchronizations")
    s.add_argument("study", choices=["dispatch", "hbfp", "fast-time", "fpraker-rows"],
                   help="which study")
    s.add_argument("run", nargs="?", metavar="RUN",
                   help="fast-time: the output folder of a `trainfab train` run with `fast`; "
                        "fpraker-rows: a capture folder of `trainfab train --capture` "
                        "(default: synthetic operands)")
    _config_args(s)
    s.add_argument("--loads", metavar="LIST|A:B:STEP", default=None,
                   help="dispatch: offered inference loads, fractions of the inference-only "
                        "capacity (default 0.05:1:0.05 plus 1.1, 1.2)")
    s.add_argument("--cycles", type=bounded(int, *CYCLES_RANGE), default=None,
                   help=f"dispatch: measured cycles per run, {CYCLES_RANGE[0]:,} to "
                        f"{CYCLES_RANGE[1]:,} (default {CYCLES_DEFAULT:,})")
    s.add_argument("--samples", type=_hbfp_samples, default=None, metavar="N",
                   help="hbfp: dot products per point, a multiple of 64 from 64 to 1,048,576 "
                        "(default 8,192)")
    s.add_argument("--seed", type=bounded(int, *SEED_RANGE), default=None,
                   help=f"dispatch, hbfp, fpraker-rows: seed of the random operands or "
                        f"arrivals, {SEED_HELP} (default 1)")
    s.add_argument("--output", "-o", metavar="DIR",
                   help="output folder (default build/study/<study>)")
    s.set_defaults(func=cmd_study)

    from .studies.train import run as train_run

    s = sub.add_parser("train", help=train_run.HELP)
    s.add_argument("--model", default="cnn", help="mlp, cnn or cnn-q4 (default %(default)s)")
    s.add_argument("--formats", default="all", metavar="LIST",
                   help="comma-separated formats, or all (default): fp32, bf16, fpraker, hbfp8, "
                        "hbfp12, fast, fast-low, fast-high, schrodinger, bitwave")
    s.add_argument("--epochs", type=bounded(int, *train_run.EPOCHS_RANGE), default=None,
                   help=f"training epochs, {_span(train_run.EPOCHS_RANGE)} (default: the "
                   "model's own, see docs/cli.md)")
    s.add_argument("--batch-size", type=bounded(int, *train_run.BATCH_RANGE), default=None,
                   help=f"mini-batch size, {_span(train_run.BATCH_RANGE)} (default 32)")
    s.add_argument("--seed", type=bounded(int, *train_run.SEED_RANGE), default=0,
                   help="seed of the split, initialization, data order and rounding, "
                        f"{SEED_HELP} (default 0)")
    s.add_argument("-j", "--jobs", type=bounded(int, *train_run.JOBS_RANGE), default=2,
                   help=f"formats trained at once, one process each, "
                        f"{_span(train_run.JOBS_RANGE)} (default 2)")
    s.add_argument("--dataset", metavar="FILE.npz",
                   help="a dataset: x (N,C,H,W) or (N,F) floats, y integer labels "
                        "(default: scikit-learn's digits, split 80/20 by the seed)")
    s.add_argument("--limit", type=bounded(int, *train_run.LIMIT_RANGE), default=None,
                   metavar="N", help="keep N samples of the shuffled dataset (quick runs), "
                                     f"{_span(train_run.LIMIT_RANGE)}")
    s.add_argument("--capture", metavar="DIR",
                   help="record both operands of every GEMM of one mini-batch per epoch, "
                        "as bf16, in DIR/<format>/")
    s.add_argument("--output", "-o", metavar="DIR",
                   help="output folder (default build/train/<model>)")
    s.set_defaults(func=cmd_train)

    s = sub.add_parser("demo", help="generate, quick-regress and measure one small unit of each "
                       "family, with a comparison table and a plot (make demo)")
    s.add_argument("--sim", choices=SIMULATORS, default=None,
                   help="simulator (default: each unit's own)")
    s.add_argument("--seed", type=bounded(int, *SEED_RANGE), default=1,
                   help=f"seed of the quick regressions, {SEED_HELP} (default 1)")
    s.set_defaults(func=cmd_demo)

    s = sub.add_parser("paper", help="every unit at its paper configuration with its parts, the "
                       "papers' ratios and scalings, tile power and speedup on MiniLM, the "
                       "term-encoder sweep and the 8 x 8 tiles (make paper; about 1 h 20 min on "
                       "2 cores, its estimate printed first)")
    s.add_argument("--sim", choices=SIMULATORS, default=None,
                   help="simulator (default: each unit's own)")
    s.add_argument("--seed", type=bounded(int, *SEED_RANGE), default=1,
                   help=f"seed of the quick regressions, {SEED_HELP} (default 1)")
    s.add_argument("-j", "--jobs", type=bounded(int, 1, 64), default=None, metavar="N",
                   help="local processes of the term-encoder sweep, and paper-size syntheses "
                        "run at once, 1 to 64 (default: one per CPU)")
    s.add_argument("--markdown", metavar="FILE",
                   help="when every step passed, also write the summary as a stamped results "
                        "page (commit, date, machine, tool versions) to FILE (make paper: "
                        "docs/results.md)")
    s.set_defaults(func=cmd_paper)
    return p


def _terminate(signum, frame):
    raise KeyboardInterrupt  # a killed run cleans up like an interrupted one


def _silence_unused_elaboratables() -> None:
    """A run stopped part-way through building a design (Ctrl-C, an error) leaves Amaranth
    elaboratables it never used, and Amaranth warns about each when it is collected: thousands
    of lines after the one-line message for a large tile.  Amaranth itself keeps quiet when
    the interpreter ends in an exception; so does a run of the command that ends in an error
    (only the command's own process: the silence is for the rest of the process)."""
    unused = sys.modules.get("amaranth._unused")
    if unused is not None:
        unused.MustUse._MustUse__silence = True


def main(argv=None) -> int:
    try:
        try:
            code = _main(argv)
        finally:
            if argv is None:
                _ignore_signals()
    except KeyboardInterrupt:  # a Ctrl-C that came as the run ended
        code = _interrupted(argv)
    return code


def _ignore_signals() -> None:
    """The run's outcome is decided: a late Ctrl-C or SIGTERM must not turn it into a
    traceback as the interpreter shuts down (its threads, its worker processes)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


#: whether this process has said that its run was interrupted (once)
_TOLD: list = []


def _interrupted(argv) -> int:
    """Exit status 130, said once per process of the console script."""
    if argv is None:
        _ignore_signals()
        if _TOLD:
            return 130
        _TOLD.append(True)
    print("trainfab: interrupted", file=sys.stderr)
    return 130


def _main(argv=None) -> int:
    import signal

    if argv is None:  # the console script (or python -m), not a caller's process
        from .runs import arm_faults

        signal.signal(signal.SIGTERM, _terminate)
        arm_faults()
    try:
        args = build_parser().parse_args(argv)
        try:
            return args.func(args)
        except BaseException:
            if argv is None:
                _silence_unused_elaboratables()
            raise
    except FlowError as e:
        print(f"trainfab: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return _interrupted(argv)
    except RecursionError:
        print("trainfab: error: input nested too deeply to read", file=sys.stderr)
        return 2
    except OSError as e:  # a file system problem outside the checked paths: still one line
        if os.environ.get("TRAINFAB_DEBUG"):
            raise
        where = f": {e.filename}" if e.filename else ""
        print(f"trainfab: error: {e.strerror or e}{where}", file=sys.stderr)
        return 2
    except Exception as e:  # one line for users; the traceback on request
        if os.environ.get("TRAINFAB_DEBUG"):
            raise
        print(f"trainfab: internal error: {type(e).__name__}: {e} "
              f"(set TRAINFAB_DEBUG=1 for a traceback)", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

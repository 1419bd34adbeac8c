"""``trainfab tensor-stats FILE|CAPTURE``: a statistic of every tensor of a file or of a
training capture (per epoch and kind), as a family declares it (:class:`flows.declare.
TensorAnalysis`)."""

import argparse
import json
import sys
from pathlib import Path

from .. import FlowError, families
from ..declare import resolve
from ..layout import LAYOUT
from ..options import bounded


def tensor_analyses() -> dict:
    return {a.name: a for a in families.tensor_analyses()}


def add_arguments(p) -> None:
    analyses = tensor_analyses()
    p.description = "; ".join(f"{a.name}: {a.summary}" for a in analyses.values())
    p.add_argument("file", help="a tensor file, or a capture folder of `trainfab train "
                                "--capture`")
    default = next((a.name for a in analyses.values() if a.default), next(iter(analyses), None))
    p.add_argument("--analysis", choices=list(analyses), default=default,
                   help="which statistic (default: %(default)s)")
    for analysis in analyses.values():
        for flags, kwargs in analysis.options:
            # not given: absent from the arguments (an option of another analysis is an error)
            kwargs = dict(kwargs, help=kwargs.get("help", "") + f" [--analysis {analysis.name}]",
                          default=argparse.SUPPRESS)
            if "range" in kwargs:
                kwargs["type"] = bounded(int, *kwargs.pop("range"))
            p.add_argument(*flags, **kwargs)
    p.add_argument("--output", "-o", metavar="DIR",
                   help="output folder (default build/tensor-stats)")


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


def run(args) -> int:
    def progress(name, done, total):
        print(f"\r{name}: {done}/{total} values", end="", file=sys.stderr, flush=True)

    if args.analysis is None:
        raise FlowError("no family declares a tensor analysis")
    from ..runs import precheck, staged

    analyses = tensor_analyses()
    analysis = analyses[args.analysis]
    options = _analysis_options(args, analysis, analyses)
    source = Path(args.file)
    stem = source.resolve().name if source.is_dir() else source.stem
    names = (f"{stem}.md", f"{stem}.json")
    out = precheck(Path(args.output) if args.output else LAYOUT.tensor_stats, names)
    shown = progress if sys.stderr.isatty() else None
    if source.is_dir():  # a training capture (trainfab train --capture)
        from ..studies import captures

        if not captures.is_capture(source) and not any(
                d.is_dir() and captures.is_capture(d) for d in source.iterdir()):
            raise FlowError(f"{source} is a directory, not a tensor file, nor a capture folder "
                            "of `trainfab train --capture` (no manifest.json in it or in its "
                            "sub-folders)")

        stats = captures.capture_stats(source, analysis, options, progress=shown)
        text = captures.capture_stats_markdown(stats)
    else:
        from ..studies.tensors import read_tensors

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

"""``trainfab timing [UNIT…]`` (``make timing``): every pipelined unit at the configuration that
closes its timing, one table (:mod:`flows.eda.timing`)."""

from pathlib import Path

from .common import jobs_arg, liberty_arg, output_arg


def add_arguments(p) -> None:
    p.add_argument("units", nargs="*", metavar="UNIT",
                   help="only these units (or target labels); default: every target")
    liberty_arg(p)
    jobs_arg(p, "syntheses at a time, in worker processes (default 1)")
    output_arg(p, "build/timing")
    p.add_argument("--markdown", metavar="FILE", help="also write the table to FILE")


def run(args) -> int:
    from ..eda.timing import table, targets, timing
    from ..runs import check_target_file, write_atomic

    chosen = targets(args.units)
    if args.markdown:
        check_target_file(args.markdown)
    command = "trainfab timing" + (f" --markdown {args.markdown}" if args.markdown else "")
    r = timing(chosen, liberty=args.liberty, jobs=args.jobs,
               outdir=Path(args.output) if args.output else None, command=command)
    print(table(r["rows"]))
    if args.markdown:
        write_atomic(args.markdown, (Path(r["outdir"]) / "timing.md").read_text())
    out = Path(r["outdir"])
    print(f"written: {out}/timing.md, {out}/timing.json"
          + (f", {args.markdown}" if args.markdown else ""))
    return 0

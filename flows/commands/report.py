"""``trainfab report [UNIT…]``: area/timing of every unit at its paper preset, with ratios."""

from .common import clock_arg, liberty_arg, units_of


def add_arguments(p) -> None:
    p.add_argument("units", nargs="*", metavar="UNIT",
                   help="only these units (default: every unit)")
    liberty_arg(p)
    clock_arg(p)
    p.add_argument("--markdown", metavar="FILE",
                   help="also write the report as a stamped results page (commit, date, "
                        "machine, tool versions) to FILE, e.g. docs/results.md")


def run(args) -> int:
    from ..report import report

    return report(liberty=args.liberty, clock_ns=args.clock_ns, markdown=args.markdown,
                  units=units_of(args.units))

"""``trainfab paper`` (``make paper``): every unit at its paper configuration and every table
of the papers."""

from ..options import SEED_HELP, SEED_RANGE, SIMULATORS, bounded


def add_arguments(p) -> None:
    p.add_argument("--sim", choices=SIMULATORS, default=None,
                   help="simulator (default: each unit's own)")
    p.add_argument("--seed", type=bounded(int, *SEED_RANGE), default=1,
                   help=f"seed of the quick regressions, {SEED_HELP} (default 1)")
    p.add_argument("-j", "--jobs", type=bounded(int, 1, 64), default=None, metavar="N",
                   help="local processes of the term-encoder sweep, and paper-size syntheses "
                        "run at once, 1 to 64 (default: one per CPU)")
    p.add_argument("--markdown", metavar="FILE",
                   help="when every step passed, also write the summary as a stamped results "
                        "page (commit, date, machine, tool versions) to FILE (make paper: "
                        "docs/results.md)")


def run(args) -> int:
    from ..report import paper

    return paper(seed=args.seed, sim=args.sim, jobs=args.jobs, markdown=args.markdown)

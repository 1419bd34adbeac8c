"""``trainfab demo`` (``make demo``): one small unit of each family, generated,
quick-regressed and measured, with a comparison table and a plot."""

from ..options import SEED_HELP, SEED_RANGE, SIMULATORS, bounded


def add_arguments(p) -> None:
    p.add_argument("--sim", choices=SIMULATORS, default=None,
                   help="simulator (default: each unit's own)")
    p.add_argument("--seed", type=bounded(int, *SEED_RANGE), default=1,
                   help=f"seed of the quick regressions, {SEED_HELP} (default 1)")


def run(args) -> int:
    from ..report import demo

    return demo(seed=args.seed, sim=args.sim)

"""Benchmarks: speed of the golden models, cycle statistics and tool throughput.

Run ``trainfab bench`` or ``python -m flows.bench`` (add ``--quick`` for 10x smaller runs).  Each
family declares its entries (:class:`flows.declare.Bench`, naming a function of this package's
modules); their Markdown tables are printed in the families' order.
"""

import argparse

from .. import families
from ..declare import resolve


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10x smaller runs")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    scale = 10 if args.quick else 1
    print("\n\n".join(resolve(b.run)(scale=scale, seed=args.seed) for b in families.benches()))
    return 0


__all__ = ["main"]


if __name__ == "__main__":
    raise SystemExit(main())

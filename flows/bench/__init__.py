"""Benchmarks: speed of the golden models, cycle statistics and tool throughput.

Run ``trainfab bench`` or ``python -m flows.bench`` (add ``--quick`` for 10x smaller runs).  Each
family declares its entries (:class:`flows.declare.Bench`, naming a function of this package's
modules); their Markdown tables are printed in the families' order, then the training GEMMs'
table (:mod:`flows.bench.training`: every number format beside float32, one thread and two).
``--gemms`` prints that table alone.
"""

import argparse

from .. import families
from ..declare import resolve


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10x smaller runs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--gemms", action="store_true",
                        help="only the training GEMMs of every number format")
    args = parser.parse_args(argv)
    scale = 10 if args.quick else 1
    from .training import gemm_table

    runs = [] if args.gemms else [resolve(b.run) for b in families.benches()]
    print("\n\n".join(run(scale=scale, seed=args.seed) for run in [*runs, gemm_table]))
    return 0


__all__ = ["main"]


if __name__ == "__main__":
    raise SystemExit(main())

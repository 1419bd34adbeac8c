"""Benchmarks: speed of the golden models, cycle statistics and tool throughput.

Run ``trainfab bench`` or ``python -m flows.bench`` (add ``--quick`` for 10x smaller runs).  Each
family declares its entries (:class:`Bench`, in ``flows/families/<family>.py``); their Markdown
tables are printed in the families' order.
"""

import argparse
from dataclasses import dataclass
from typing import Callable

from . import families


@dataclass(frozen=True, kw_only=True)
class Bench:
    """One benchmark of ``trainfab bench``."""

    name: str
    summary: str
    #: ``run(scale=…, seed=…)`` → Markdown table(s); run sizes are divided by ``scale`` (10 for
    #: ``--quick``)
    run: Callable[..., str]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10x smaller runs")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    scale = 10 if args.quick else 1
    print("\n\n".join(b.run(scale=scale, seed=args.seed) for b in families.benches()))
    return 0


__all__ = ["Bench", "main"]


if __name__ == "__main__":
    raise SystemExit(main())

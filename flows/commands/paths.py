"""``trainfab paths DIR --between FROM TO``: the worst paths between cell groups of an area
run's netlist (:mod:`flows.eda.paths`); it writes nothing."""

import json


def add_arguments(p) -> None:
    p.add_argument("folder", metavar="DIR",
                   help="a folder written by `trainfab area` (area.json and the mapped netlist)")
    p.add_argument("--between", nargs=2, action="append", metavar=("FROM", "TO"), required=True,
                   help="instance-name patterns (glob, e.g. 'pe0_0.accumulator.x*'); repeat "
                        "for more pairs")
    p.add_argument("--max-fanout", type=int, metavar="N", default=None,
                   help="also time the pairs with a buffer tree on every cell-driven net of "
                        "more than N loads (2 to 10,000), as placement-aware synthesis would "
                        "insert")
    p.add_argument("--json", action="store_true", help="print the paths as JSON")


def run(args) -> int:
    from ..eda.paths import paths, table

    if args.max_fanout is None:
        rows = paths(args.folder, [tuple(p) for p in args.between])
        print(json.dumps(rows, indent=2) if args.json else table(rows))
        return 0
    rows, summary = paths(args.folder, [tuple(p) for p in args.between], args.max_fanout)
    print(json.dumps({"paths": rows, **summary}, indent=2) if args.json
          else table(rows, summary))
    return 0

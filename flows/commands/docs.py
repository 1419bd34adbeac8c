"""``trainfab docs [--check]`` (``make docs``): the documentation's tables regenerated from the
declarations (:mod:`flows.docgen`); ``--check`` only says which pages are stale (exit 1)."""

import sys

from .. import HERE


def add_arguments(p) -> None:
    p.add_argument("--check", action="store_true",
                   help="change nothing: exit 1 and name the pages whose tables are stale")


def run(args) -> int:
    from ..docgen import regenerate

    root = HERE.parent
    changed = regenerate(root, check=args.check)
    if args.check:
        if changed:
            print(f"trainfab: stale generated tables in {', '.join(changed)}; run make docs",
                  file=sys.stderr)
            return 1
        print("generated tables are current")
        return 0
    print(f"regenerated: {', '.join(changed)}" if changed else "generated tables are current")
    return 0

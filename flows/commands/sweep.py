"""``trainfab sweep UNIT --grid FIELD=V1,V2…``: area, timing or regressions of one unit over a
grid of configurations (:mod:`flows.sweep`, which defines the options: ``make paper`` runs a
sweep too)."""

from ..sweep import add_arguments


def run(args) -> int:
    from ..sweep import cmd_sweep

    return cmd_sweep(args)


__all__ = ["add_arguments", "run"]

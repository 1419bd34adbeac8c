"""``trainfab list [UNIT]``: the units and presets; a unit's configuration fields."""

from .. import registry


def add_arguments(p) -> None:
    p.add_argument("unit", nargs="?", metavar="UNIT",
                   help="show this unit's configuration fields (for --set and --config)")


def run(args) -> int:
    from ..config import describe_fields, presets

    if args.unit is not None:
        print(describe_fields(registry.get(args.unit)))
        return 0
    units = registry.units()
    print("units:")
    width = max(len(n) for n in units)
    for unit in units.values():
        print(f"  {unit.name:<{width}}  {unit.summary}")
    print("presets:")
    for name, path in presets().items():
        print(f"  {name:<{width}}  {path}")
    return 0

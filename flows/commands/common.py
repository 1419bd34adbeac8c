"""Arguments and helpers several commands share."""

from __future__ import annotations

from .. import registry
from ..layout import DEFAULT_CLOCK_NS, DEFAULT_LIBERTY
from ..options import CLOCK_RANGE_NS, bounded, check_clock

def config_args(p) -> None:
    """``--config``/``--set`` of a command that builds a unit."""
    p.add_argument("--config", "-c", metavar="FILE|PRESET",
                   help="TOML file or preset name from flows/configs (default: the unit's "
                        "paper preset)")
    p.add_argument("--set", "-s", dest="sets", action="append", default=[],
                   metavar="FIELD=VALUE",
                   help="override one configuration field (repeatable)")


def clock_arg(p, required: bool = False, help_text: str | None = None) -> None:
    """``--clock-ns``: a finite period in the range the flow accepts."""
    lo, hi = CLOCK_RANGE_NS
    p.add_argument("--clock-ns", type=check_clock, required=required,
                   default=None if required else DEFAULT_CLOCK_NS,
                   metavar="P" if required else "X",
                   help=help_text or f"clock period constraint in ns, {lo:g} to {hi:g} "
                                     f"(default {DEFAULT_CLOCK_NS:g})")


def liberty_arg(p) -> None:
    p.add_argument("--liberty", default=DEFAULT_LIBERTY,
                   help=f"{DEFAULT_LIBERTY} (default) or a .lib path")


def output_arg(p, default: str) -> None:
    p.add_argument("--output", "-o", metavar="DIR", help=f"output folder (default {default})")


def jobs_arg(p, help_text: str, default=1) -> None:
    p.add_argument("--jobs", "-j", type=bounded(int, 1, 64), default=default, metavar="N",
                   help=help_text)


def units_of(names) -> list:
    """The named units, each once, in the order given (default: every unit)."""
    return ([registry.get(n) for n in dict.fromkeys(names)] if names
            else list(registry.units().values()))


def fixed_fields(unit, args) -> set[str]:
    """The configuration fields a user set explicitly: ``--set`` fields and those of a
    ``--config`` file's table for the unit."""
    from ..config import parse_set, preset_path, read_toml, unit_table

    fixed = {parse_set(item)[0] for item in args.sets}
    if args.config is not None:
        fixed |= set(unit_table(read_toml(preset_path(args.config)), unit) or {})
    return fixed


def span(bounds) -> str:
    return f"{bounds[0]:,} to {bounds[1]:,}"


__all__ = ["config_args", "clock_arg", "liberty_arg",
           "output_arg", "jobs_arg", "units_of", "fixed_fields", "span"]

"""The unit registry: every unit the families declare (:mod:`flows.families`), by name.

A unit's declaration (:class:`flows.declare.Unit`) names its configuration class and component
by class name under the layout ``golden|hdl|tb/<family>/<unit>.py``; names are resolved only
when used, so listing units imports nothing heavy, and ``hdl`` never imports ``tb``.
"""

from . import FlowError
from .declare import EFFORTS, Unit, config_label, resolve


def units() -> dict[str, Unit]:
    """Every unit of every family, by name, in the families' order."""
    from . import families

    return {u.name: u for u in families.units()}


def __getattr__(name):
    # UNITS is collected on use
    if name == "UNITS":
        return units()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def get(name: str) -> Unit:
    """The unit called ``name``; :class:`FlowError` listing the known units otherwise."""
    known = units()
    try:
        return known[name]
    except KeyError:
        raise FlowError(f"unknown unit {name!r}; known units: {', '.join(sorted(known))}") from None


__all__ = ["EFFORTS", "Unit", "config_label", "get", "resolve", "units"]

"""Families: each module of this package declares everything the flows know about one family.

A family module (``flows/families/<family>.py``) imports :mod:`flows.declare` only and may
define these sequences of its declarations (a missing one is empty):

``UNITS``
    :class:`~flows.declare.Unit` entries, each named ``<family>.<unit>``;
``PARTS``
    :class:`~flows.declare.Part` entries: sub-blocks the papers report separately;
``COMPARISONS``
    :class:`~flows.declare.Comparison` entries: area ratios the papers state;
``SCALINGS``
    :class:`~flows.declare.Scaling` entries: area against a size measure, with a linear fit;
``OWN_CLOCKS``
    :class:`~flows.declare.OwnClock` entries: a design beside its baseline at each one's fmax;
``TIMING``
    :class:`~flows.declare.ClockTarget` entries: the configurations that close each
    pipelined unit's timing (``trainfab timing``);
``TENSOR_ANALYSES``
    :class:`~flows.declare.TensorAnalysis` entries for ``trainfab tensor-stats``;
``BENCHES``
    :class:`~flows.declare.Bench` entries for ``trainfab bench``;
``ORDER``
    an integer placing the family in listings and reports.

:data:`FAMILIES` lists the family modules: adding a family is one file here and its name in
that list.
"""

import functools
import importlib
from types import ModuleType

from .. import FlowError

#: the family modules of this package
FAMILIES = ("fpraker", "baseline", "gecko", "fast", "equinox", "common")

#: what a family module may declare (each a sequence; a missing one is empty)
DECLARATIONS = ("UNITS", "PARTS", "COMPARISONS", "BENCHES", "TENSOR_ANALYSES", "SCALINGS",
                "OWN_CLOCKS", "TIMING")


@functools.cache
def modules() -> tuple[ModuleType, ...]:
    """The family modules, ordered by their ``ORDER`` then by name."""
    found = [importlib.import_module(f"{__name__}.{name}") for name in FAMILIES]
    return tuple(sorted(found, key=lambda m: (getattr(m, "ORDER", 100), m.__name__)))


def family_name(module: ModuleType) -> str:
    return module.__name__.rsplit(".", 1)[-1]


def collect(declaration: str) -> list:
    """Every family's entries of ``declaration`` (one of :data:`DECLARATIONS`), in family order."""
    if declaration not in DECLARATIONS:
        raise ValueError(f"unknown family declaration {declaration!r}")
    return [entry for module in modules() for entry in getattr(module, declaration, ())]


def units() -> list:
    """Every family's units; :class:`FlowError` for a misnamed or repeated unit."""
    seen = {}
    for module in modules():
        family = family_name(module)
        for unit in getattr(module, "UNITS", ()):
            if unit.family != family:
                raise FlowError(f"{module.__name__} declares unit {unit.name!r}, which is not "
                                f"named {family}.<unit>")
            if unit.name in seen:
                raise FlowError(f"unit {unit.name!r} is declared twice")
            seen[unit.name] = unit
    return list(seen.values())


def parts() -> list:
    return collect("PARTS")


def clock_targets() -> list:
    return collect("TIMING")


def comparisons() -> list:
    return collect("COMPARISONS")


def benches() -> list:
    return collect("BENCHES")


def tensor_analyses() -> list:
    return collect("TENSOR_ANALYSES")


def scalings() -> list:
    return collect("SCALINGS")


def own_clocks() -> list:
    return collect("OWN_CLOCKS")


__all__ = ["FAMILIES", "DECLARATIONS", "modules", "family_name", "collect", "units", "parts",
           "comparisons", "benches", "tensor_analyses", "scalings", "own_clocks",
           "clock_targets"]

"""Families: each module of this package declares everything the flows know about one family.

A family module (``flows/families/<family>.py``) may define:

``UNITS``
    :class:`flows.registry.Unit` entries, each named ``<family>.<unit>``;
``PARTS``
    :class:`flows.report.Part` entries: sub-blocks the papers report separately;
``COMPARISONS``
    :class:`flows.report.Comparison` entries: area ratios the papers state;
``BENCHES``
    :class:`flows.bench.Bench` entries for ``trainfab bench``;
``TENSOR_ANALYSES``
    :class:`flows.studies.tensors.TensorAnalysis` entries for ``trainfab tensor-stats``;
``SCALINGS``
    :class:`flows.report.Scaling` entries: area against a size measure, with a linear fit;
``OWN_CLOCKS``
    :class:`flows.report.OwnClock` entries: a design beside its baseline at each one's fmax;
``TIMING``
    :class:`flows.eda.timing.ClockTarget` entries: the configurations that close each
    pipelined unit's timing (``trainfab timing``);
``ORDER``
    an integer placing the family in listings and reports (default 100; ties by module name).

Modules are discovered with :mod:`pkgutil` (names starting with ``_`` are skipped), so adding a
family means adding one file here and touching no other flow code.
"""

import functools
import importlib
import pkgutil
from types import ModuleType

from .. import FlowError

#: what a family module may declare (each a sequence; a missing one is empty)
DECLARATIONS = ("UNITS", "PARTS", "COMPARISONS", "BENCHES", "TENSOR_ANALYSES", "SCALINGS",
                "OWN_CLOCKS", "TIMING")


def discover(package: str = __name__) -> list[ModuleType]:
    """The family modules of ``package``, ordered by their ``ORDER`` then by name."""
    pkg = importlib.import_module(package)
    found = [importlib.import_module(f"{package}.{info.name}")
             for info in pkgutil.iter_modules(pkg.__path__) if not info.name.startswith("_")]
    return sorted(found, key=lambda m: (getattr(m, "ORDER", 100), m.__name__))


@functools.cache
def modules() -> tuple[ModuleType, ...]:
    """The family modules of this package (discovered once)."""
    return tuple(discover())


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


__all__ = ["DECLARATIONS", "discover", "modules", "family_name", "collect", "units", "parts",
           "comparisons", "benches", "tensor_analyses", "scalings",
           "own_clocks", "clock_targets"]

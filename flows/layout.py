"""Where each command writes under the build folder, and the defaults every flow shares.

:data:`LAYOUT` is the one place that spells the build folder's sub-folders
(``build/area/<unit>/``, ``build/close/<unit>/`` …) and the defaults of the synthesis flows
(the 10 ns clock, the OSU 0.18 µm liberty); the commands, the studies and the reports ask it.
The build folder itself is :func:`flows.build_dir` (``$TRAINFAB_BUILD`` or ``./build``), read
when asked, so that a program that points it elsewhere moves every default with it.
"""

from __future__ import annotations

from pathlib import Path

from . import build_dir

#: the clock period every synthesis is constrained to unless told (ns)
DEFAULT_CLOCK_NS = 10.0
#: the standard cells every synthesis maps onto unless told: OSU 0.18 µm
DEFAULT_LIBERTY = "osu018"


class Layout:
    """The build folder's places, each a path under :func:`flows.build_dir`."""

    @property
    def root(self) -> Path:
        return build_dir()

    def area(self, unit: str) -> Path:
        """``build/area/<unit>/``: the latest ``trainfab area`` run of a unit."""
        return self.root / "area" / unit

    def area_report(self, unit: str) -> Path:
        """``build/area/<unit>/area.json``."""
        return self.area(unit) / "area.json"

    def generate(self, unit: str) -> Path:
        return self.root / "generate" / unit

    def close(self, unit: str) -> Path:
        return self.root / "close" / unit

    def power(self, unit: str) -> Path:
        return self.root / "power" / unit

    def sim(self, unit: str) -> Path:
        return self.root / "sim" / unit

    def sweep(self, name: str) -> Path:
        return self.root / "sweep" / name

    def study(self, name: str) -> Path:
        return self.root / "study" / name

    def train(self, model: str) -> Path:
        return self.root / "train" / model

    @property
    def timing(self) -> Path:
        return self.root / "timing"

    @property
    def report(self) -> Path:
        return self.root / "report"

    @property
    def demo(self) -> Path:
        return self.root / "demo"

    @property
    def paper(self) -> Path:
        return self.root / "paper"

    @property
    def speedup(self) -> Path:
        return self.root / "speedup"

    @property
    def tensor_stats(self) -> Path:
        return self.root / "tensor-stats"

    @property
    def bench(self) -> Path:
        return self.root / "bench"

    @property
    def models(self) -> Path:
        return self.root / "models"


#: the build layout
LAYOUT = Layout()

__all__ = ["DEFAULT_CLOCK_NS", "DEFAULT_LIBERTY", "Layout", "LAYOUT"]

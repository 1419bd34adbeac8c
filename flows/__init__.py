"""trainfab flows: configuration presets, Verilog generation, cocotb regressions, area/timing."""

import os
from pathlib import Path

#: the flows package folder (presets live in its configs/)
HERE = Path(__file__).resolve().parent
#: where every generated artefact goes: ``$TRAINFAB_BUILD`` or ``./build`` (git-ignored)
BUILD = Path(os.environ.get("TRAINFAB_BUILD") or Path.cwd() / "build").resolve()


def build_dir() -> Path:
    """The build folder (:data:`BUILD`), read when called, so that a program (or a test) that
    points ``flows.BUILD`` elsewhere moves every default output folder with it."""
    return BUILD


class FlowError(Exception):
    """A usage, configuration or environment error the CLI reports as one line (exit status 2)."""

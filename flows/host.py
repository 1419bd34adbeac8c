"""The machine and the checkout a result was measured on, and the installed packages' versions
(stamped on every generated page and report)."""

import importlib.metadata
import os
import subprocess
from pathlib import Path


def package_version(dist: str) -> str:
    """The installed version of the Python distribution ``dist``, or ``not installed``."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def machine() -> str:
    """The machine a generated page was measured on: CPU model, cores, Python version."""
    import platform

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}"


def commit() -> str:
    """The trainfab checkout's commit (``git describe``-like: hash, ``+changes`` when the
    working tree differs), or ``unknown`` outside a git checkout."""
    root = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
                              capture_output=True, text=True, timeout=30)
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain",
                                "--untracked-files=no"],
                               capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    if head.returncode:
        return "unknown"
    return head.stdout.strip() + (" +changes" if dirty.stdout.strip() else "")


__all__ = ["package_version", "machine", "commit"]

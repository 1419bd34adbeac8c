"""trainfab flows: configuration presets, Verilog generation, cocotb regressions, area/timing."""

import errno
import os
from pathlib import Path

#: the flows package folder (presets live in its configs/)
HERE = Path(__file__).resolve().parent


def _build_folder() -> tuple[Path, str | None]:
    """``$TRAINFAB_BUILD`` or ``./build``, resolved, and why it is unusable (``None`` if it is
    not known to be).  Never raises: a bad build folder must not stop ``--help`` or commands
    that write nothing; :func:`build_dir` reports it when a command needs the folder."""
    raw = os.environ.get("TRAINFAB_BUILD") or os.path.join(os.curdir, "build")
    try:
        return Path(raw).resolve(), None
    except (OSError, RuntimeError) as e:  # RuntimeError: a symbolic-link loop (Python < 3.13)
        loop = isinstance(e, RuntimeError) or getattr(e, "errno", None) == errno.ELOOP
        why = ("it is a loop of symbolic links" if loop
               else getattr(e, "strerror", None) or str(e))
        try:
            shown = Path(os.path.abspath(raw))
        except OSError:  # the working folder is gone
            shown = Path(raw)
        return shown, f"build folder {shown} (TRAINFAB_BUILD or ./build) cannot be used: {why}"


#: where every generated artefact goes: ``$TRAINFAB_BUILD`` or ``./build`` (git-ignored)
BUILD, _BUILD_PROBLEM = _build_folder()
_BUILD_FROM_ENVIRONMENT = BUILD


def build_dir() -> Path:
    """The build folder (:data:`BUILD`), read when called, so that a program (or a test) that
    points ``flows.BUILD`` elsewhere moves every default output folder with it.  Raises
    :class:`FlowError` when the folder from the environment cannot be used (a symbolic-link
    loop)."""
    if _BUILD_PROBLEM is not None and BUILD == _BUILD_FROM_ENVIRONMENT:
        raise FlowError(_BUILD_PROBLEM)
    return BUILD


def shown(path) -> str:
    """``path`` relative to the working folder when it lies inside it (so that reports and
    generated pages do not name the machine's folders), else as it is."""
    import os

    rel = os.path.relpath(path)
    return str(path) if rel == ".." or rel.startswith(".." + os.sep) else rel


class FlowError(Exception):
    """A usage, configuration or environment error the CLI reports as one line (exit status 2)."""

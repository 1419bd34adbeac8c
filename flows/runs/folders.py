"""Output folders' paths: checks, creation, atomic writes of single files, one-line errors,
and the fault points of the data-safety tests."""

from __future__ import annotations

import errno
import os
import signal
import tempfile
from pathlib import Path

from .. import FlowError

#: errors of a full file system
_FULL = (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC))
#: errors of a folder that cannot be written
_NOT_WRITABLE = (errno.EROFS, errno.EACCES, errno.EPERM)


# --------------------------------------------------------------------------------------------
# fault injection (the data-safety tests)


#: the process whose runs ``TRAINFAB_FAULT`` stops (:func:`arm_faults`): the command's own,
#: not its worker processes, which inherit the environment
_FAULT_PID: int | None = None


def arm_faults() -> None:
    """Let ``TRAINFAB_FAULT`` act in this process (the CLI's main process calls this)."""
    global _FAULT_PID
    _FAULT_PID = os.getpid()


def fault(point: str, count: int | None = None) -> None:
    """Act on ``TRAINFAB_FAULT`` at ``point`` (the ``count``-th time it is reached).

    ``TRAINFAB_FAULT=POINT[:N]:ACTION`` with ACTION ``sigint`` or ``sigterm`` (the process
    signals itself: the signal is then handled exactly as one from outside at that moment),
    ``enospc`` or ``eio`` (an ``OSError`` as a full disk or a failing device raise it).
    Points: ``stage`` (the private folder exists, the work has not started), ``install:N``
    (after the N-th file moved into place), ``manifest`` (before the manifests move), each of
    the outermost run of the command's own process.  Unset, it does nothing."""
    spec = os.environ.get("TRAINFAB_FAULT")
    if not spec or _FAULT_PID != os.getpid():
        return
    *where, action = spec.split(":")
    want = where[0] if where else ""
    n = int(where[1]) if len(where) > 1 and where[1].isdigit() else None
    if want != point or (n is not None and n != count):
        return
    if action in ("sigint", "sigterm"):
        # the handler has run when raise_signal returns (or noted it, while files move)
        signal.raise_signal(signal.SIGINT if action == "sigint" else signal.SIGTERM)
    elif action in ("enospc", "eio"):
        code = errno.ENOSPC if action == "enospc" else errno.EIO
        raise OSError(code, os.strerror(code))


# --------------------------------------------------------------------------------------------
# paths


def resolve(path, what: str = "output folder") -> Path:
    """``path`` made absolute with its symbolic links resolved; :class:`FlowError` naming it
    when that is impossible (a symbolic-link loop)."""
    try:
        return Path(path).resolve()
    except RuntimeError:  # Python < 3.13: "Symlink loop from …"
        raise FlowError(f"{what} {path} cannot be used: it is a loop of symbolic links") from None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise FlowError(f"{what} {path} cannot be used: it is a loop of symbolic "
                            "links") from None
        raise FlowError(f"{what} {path} cannot be used: {e.strerror or e}") from None


def check_output(path, what: str = "output folder") -> Path:
    """Check, before a run computes anything, that ``path`` is or can become a writable
    folder; returns it resolved.  :class:`FlowError` naming ``path`` otherwise."""
    final = resolve(path, what)
    if final.exists() and not final.is_dir():
        raise FlowError(f"{what} {final} cannot be created: it is a file, not a folder")
    existing = next((p for p in [final, *final.parents] if os.path.lexists(p)), None)
    if existing is not None and not existing.is_dir():
        raise FlowError(f"{what} {final} cannot be created: {existing} is a file, not a folder")
    if existing is not None and not _writable(existing):
        if existing == final:
            raise FlowError(f"{what} {final} is not writable")
        raise FlowError(f"{what} {final} cannot be created: {existing} is not writable")
    if existing == final and not _writable(final.parent):
        # the private folder and the lock live beside the output folder
        raise FlowError(f"{what} {final} is not writable: its parent folder {final.parent} "
                        "is not writable")
    return final


def _writable(folder: Path) -> bool:
    """Whether files can be created in ``folder``: permissions, and a read-only file system
    (which ``os.access`` does not see for root)."""
    if not os.access(folder, os.W_OK | os.X_OK):
        return False
    try:
        return not os.statvfs(folder).f_flag & os.ST_RDONLY
    except OSError:
        return True


def ensure_dir(path, what: str = "output folder", shown=None) -> Path:
    """Create ``path`` (and its parents) as a folder; :class:`FlowError` naming ``shown``
    (default ``path``) when a file is in the way or the folder cannot be created."""
    path = Path(path)
    shown = shown or path
    try:
        path.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        blocker = next((p for p in [path, *path.parents] if p.exists() and not p.is_dir()), path)
        raise FlowError(f"{what} {shown} cannot be created: {blocker} is a file, not a "
                        f"folder") from None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise FlowError(f"{what} {shown} cannot be created: it is a loop of symbolic "
                            "links") from None
        if e.errno in _NOT_WRITABLE:
            raise FlowError(f"{what} {shown} cannot be created: its parent folder is not "
                            f"writable ({e.strerror})") from None
        if e.errno in _FULL:
            raise DiskFull(f"{what} {shown} cannot be created: {e.strerror}") from None
        raise FlowError(f"{what} {shown} cannot be created: {e.strerror}") from None
    return path


def _full(e: OSError) -> bool:
    return isinstance(e, OSError) and e.errno in _FULL


def no_space(folder) -> bool:
    """Whether the file system of ``folder`` is full (less than 1 MiB free)."""
    try:
        st = os.statvfs(folder)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < 1 << 20


class DiskFull(FlowError):
    """The file system of an output folder is full (the folder is left as it was)."""


def write_atomic(path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder, so that readers
    see the old or the new content, never a part.  A full disk or a folder that cannot be
    written is a :class:`FlowError` naming ``path`` (the old content stays).  For trainfab's
    own bookkeeping files and the file a user names (``--markdown FILE``); output folders go
    through :func:`staged`."""
    path = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    except OSError as e:
        raise _file_error(path, e) from None
    try:
        mask = os.umask(0o022)
        os.umask(mask)
        os.fchmod(fd, 0o666 & ~mask)  # as an ordinary file, not mkstemp's owner-only mode
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError):
            raise _file_error(path, e) from None
        raise


def _file_error(path: Path, e: OSError) -> FlowError:
    if _full(e):
        return DiskFull(f"cannot write {path}: {e.strerror or e}")
    if e.errno in _NOT_WRITABLE:
        return FlowError(f"cannot write {path}: its folder is not writable ({e.strerror})")
    return FlowError(f"cannot write {path}: {e.strerror or e}")


def check_target_file(path, option: str = "--markdown") -> Path:
    """A file the user names for a run to write at its end (``--markdown FILE``), checked
    before the run: its folder exists and is writable, and the path is not a folder."""
    p = Path(path)
    if str(path).endswith(os.sep) or (os.path.lexists(p) and p.is_dir()):
        raise FlowError(f"{option} {path}: it is a folder; give a file name")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.exists():
        blocker = next((q for q in [parent, *parent.parents] if os.path.lexists(q)), None)
        if blocker is not None and not blocker.is_dir():
            raise FlowError(f"{option} {path}: {blocker} is a file, not a folder")
        raise FlowError(f"{option} {path}: folder {parent} does not exist")
    if not parent.is_dir():
        raise FlowError(f"{option} {path}: {parent} is a file, not a folder")
    if not _writable(parent):
        raise FlowError(f"{option} {path}: folder {parent} is not writable")
    return p

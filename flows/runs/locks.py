"""Lock files beside output folders, and signals deferred while files move into place."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import signal
import sys
import threading
from pathlib import Path

from .. import FlowError

from .folders import _FULL, _NOT_WRITABLE, DiskFull, check_output, ensure_dir


# --------------------------------------------------------------------------------------------
# locks


@contextlib.contextmanager
def locked(lockfile, waiting: str | None = None, busy: str | None = None):
    """Hold an exclusive lock on ``lockfile`` (created if needed) and remove the file when done.

    When another run holds it: print ``waiting`` (if given) and wait, or, with ``busy``, raise
    :class:`FlowError` with that message at once.  The holder removes the file before it
    releases the lock; a run that was waiting on the removed file then finds the path gone
    or naming another file, and locks again on the file now there (the usual protocol for lock
    files that are deleted), so exclusion holds and no lock file is left behind.
    """
    lockfile = Path(lockfile)
    told = False
    fd = None
    try:
        while True:
            with _deferred_signals():  # a signal now cannot lose the file just made
                fd = _open(lockfile)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if busy is not None:
                    raise FlowError(busy) from None
                if waiting and not told:
                    print(waiting, file=sys.stderr, flush=True)
                    told = True
                fcntl.flock(fd, fcntl.LOCK_EX)
            held = os.fstat(fd)
            try:
                now = os.stat(lockfile, follow_symlinks=False)
            except FileNotFoundError:
                now = None
            if now is not None and (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino):
                break
            # the previous holder removed that file: lock the one there now
            with _deferred_signals():
                os.close(fd)
                fd = None
        yield
    finally:
        if fd is not None:
            with _deferred_signals():  # a signal now cannot leave the lock file behind
                _give_up(fd, lockfile)


def _open(lockfile: Path) -> int:
    """The lock file's descriptor (created if needed); one-line errors."""
    try:
        return os.open(lockfile, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
    except OSError as e:
        where = lockfile.parent
        if e.errno in _NOT_WRITABLE:
            raise FlowError(f"output folder {where} is not writable ({e.strerror})") from None
        if e.errno == errno.ELOOP:
            raise FlowError(f"cannot lock {where}: {lockfile.name} is a symbolic link "
                            "trainfab did not make; remove it") from None
        if e.errno in _FULL:
            raise DiskFull(f"cannot lock {where}: {e.strerror}") from None
        raise FlowError(f"cannot lock {where}: {e.strerror or e}") from None


def _give_up(fd: int, lockfile: Path) -> None:
    """Release and close ``fd``: the lock file goes when this run holds the lock (its run is
    over) or nobody does (the run stopped while it waited, or just after it made the file);
    a file another run holds stays, and that run removes it."""
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return  # another run holds it, and removes it when done
        try:
            same = os.stat(lockfile, follow_symlinks=False).st_ino == os.fstat(fd).st_ino
        except OSError:
            same = False
        if same:
            with contextlib.suppress(OSError):
                os.unlink(lockfile)
    finally:
        os.close(fd)


def _lockfile(folder: Path) -> Path:
    return folder.parent / f".{folder.name}.lock"


@contextlib.contextmanager
def exclusive(folder, what: str):
    """Hold ``folder``'s run lock for a whole run (``report``, ``demo``, ``paper``); tells the
    user when it waits for another run.  The run still writes through :func:`staged`."""
    folder = check_output(folder)
    ensure_dir(folder.parent, shown=folder)
    with locked(folder.parent / f".{folder.name}.run.lock",
                f"trainfab: waiting for another {what} run using {folder}"):
        yield folder


@contextlib.contextmanager
def _deferred_signals():
    """Defer Ctrl-C and SIGTERM while files move into place (see the module docstring).

    The handlers are swapped for ones that only note the signal; afterwards the old handlers
    are back and a noted signal is delivered to them (the CLI's raise ``KeyboardInterrupt``).
    Python runs signal handlers in the main thread whichever thread the signal reached, so
    this holds in threaded programs too; outside the main thread nothing is deferred."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    noted: list[int] = []
    old = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        handler = signal.getsignal(sig)
        if handler in (signal.SIG_IGN, None):
            continue  # an ignored signal stays ignored
        old[sig] = handler
        signal.signal(sig, lambda signum, frame: noted.append(signum))
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
        for sig in dict.fromkeys(noted):
            handler = old[sig]
            if callable(handler):
                handler(sig, None)
            else:  # SIG_DFL: deliver it again, now with its default action
                os.kill(os.getpid(), sig)

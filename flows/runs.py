"""Output folders that concurrent and interrupted runs cannot corrupt.

Every command that writes a report works in a private temporary folder beside its output
folder and moves its files into place only when it has succeeded (:func:`staged`), under a
lock on the output folder, with stale files of an earlier run removed first.  So:

* any number of runs may target the same output folder at once; each prints the numbers of its
  own files, and the folder ends up holding the complete set of files of one of them;
* a run that fails or is interrupted (Ctrl-C, a tool error, an invalid option found late)
  leaves the output folder as it was.

Whole-suite runs (``report``, ``demo``) also hold a lock on their folder for their whole run
(:func:`exclusive`), so that their summary and the per-unit folders under it come from one run.

Folders are created with :func:`ensure_dir`, which turns "a file is in the way" and permission
problems into one-line :class:`~flows.FlowError` messages naming the path.
"""

import contextlib
import fcntl
import glob
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

from . import FlowError


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
        raise FlowError(f"{what} {shown} cannot be created: {e.strerror}") from None
    return path


def write_atomic(path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder, so that readers
    see the old or the new content, never a part."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def _flock(lockfile: Path, waiting: str | None = None):
    with open(lockfile, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if waiting:
                print(waiting, file=sys.stderr, flush=True)
            fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _lockfile(folder: Path) -> Path:
    return folder.parent / f".{folder.name}.lock"


@contextlib.contextmanager
def exclusive(folder, what: str):
    """Hold ``folder``'s lock for a whole run; tells the user when it waits for another run."""
    folder = Path(folder).resolve()
    ensure_dir(folder.parent, shown=folder)
    with _flock(_lockfile(folder), f"trainfab: waiting for another {what} run using {folder}"):
        yield folder


@contextlib.contextmanager
def _no_interrupt():
    """Defer Ctrl-C while files are moved into place (the move takes milliseconds)."""
    if hasattr(signal, "pthread_sigmask"):
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        try:
            yield
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
    else:  # pragma: no cover
        yield


@contextlib.contextmanager
def staged(final, stale=(), last=()):
    """A private folder for a run's outputs, moved into ``final`` when the block succeeds.

    Yields the private folder (beside ``final``, on the same file system).  When the block
    succeeds, :func:`install` moves its files into ``final`` (``stale``: an earlier run's file
    names to remove; ``last``: index files to move last).  On failure or interruption
    ``final`` is untouched: after a :class:`~flows.FlowError` the private folder becomes
    ``<final>.failed`` (its tool logs), which the error message names; after anything else
    (Ctrl-C) it is deleted.
    """
    final = Path(final).resolve()
    ensure_dir(final.parent, shown=final)
    if final.exists() and not final.is_dir():
        raise FlowError(f"output folder {final} cannot be created: it is a file, not a folder")
    _remove_abandoned(final)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.run-", dir=final.parent))
    try:
        yield tmp
        install(tmp, final, stale, last)
    except FlowError as e:
        # keep a failed run's files (tool logs) for the user, apart from the outputs
        failed = final.parent / f"{final.name}.failed"
        with _flock(_lockfile(final)):
            shutil.rmtree(failed, ignore_errors=True)
            with contextlib.suppress(OSError):
                os.replace(tmp, failed)
        raise FlowError(f"{e} (files of the failed run: {failed})") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


#: a private folder this old belongs to a run that was killed (``kill -9``, a power cut)
ABANDONED_AFTER_S = 24 * 3600.0


def _remove_abandoned(final: Path) -> None:
    """Delete the private folders of runs into ``final`` that were killed before they could
    clean up (older than :data:`ABANDONED_AFTER_S`)."""
    now = time.time()
    for tmp in final.parent.glob(f".{glob.escape(final.name)}.run-*"):
        with contextlib.suppress(OSError):
            if tmp.is_dir() and now - tmp.stat().st_mtime > ABANDONED_AFTER_S:
                shutil.rmtree(tmp, ignore_errors=True)


def install(tmp: Path, final: Path, stale=(), last=()) -> None:
    """Move every file of ``tmp`` into ``final`` (created if needed), after removing the names
    in ``stale`` from it; the names in ``last`` move last (an index such as ``area.json``)."""
    ensure_dir(final)
    names = sorted(p.name for p in tmp.iterdir() if p.is_file())
    names.sort(key=lambda n: n in last)
    with _flock(_lockfile(final)), _no_interrupt():
        for name in set(stale) - set(names):
            with contextlib.suppress(FileNotFoundError, IsADirectoryError):
                (final / name).unlink()
        for name in names:
            os.replace(tmp / name, final / name)


def prune(root, keep: int, min_age_s: float = 3600.0) -> int:
    """Delete all but the ``keep`` newest sub-folders of ``root`` that are older than
    ``min_age_s`` (a run still writing into one is younger); returns how many went."""
    root = Path(root)
    if not root.is_dir():
        return 0
    folders = sorted((p for p in root.iterdir() if p.is_dir()),
                     key=lambda p: p.stat().st_mtime, reverse=True)
    now, gone = time.time(), 0
    for p in folders[keep:]:
        if now - p.stat().st_mtime > min_age_s:
            shutil.rmtree(p, ignore_errors=True)
            gone += 1
    return gone


__all__ = ["ensure_dir", "write_atomic", "exclusive", "staged", "install", "prune"]

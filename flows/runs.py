"""Output folders that concurrent and interrupted runs cannot corrupt.

Every command that writes a report works in a private temporary folder beside its output
folder and moves its files into place only when it has succeeded (:func:`staged`), under a
lock on the output folder, with stale files of an earlier run removed first.  So:

* any number of runs may target the same output folder at once; each prints the numbers of its
  own files, and the folder ends up holding the complete set of files of one of them;
* a run that fails or is interrupted (Ctrl-C, a tool error, an invalid option found late, a
  full disk) leaves the output folder as it was;
* Ctrl-C (or SIGTERM) while the files move into place (a few milliseconds) is deferred until
  the move is complete: the folder then holds the new run's complete set of files, and the
  run still ends as interrupted (the CLI prints ``interrupted`` and exits with 130, without
  its report).

Files of the user's are never removed.  Each output folder holds a manifest,
:data:`MANIFEST`, of the files trainfab moved into it and the sha256 of each.  A stale file
(a name an earlier run wrote that the new run does not write) is removed only when the
manifest lists it and its content still has the recorded hash: a file trainfab did not write,
or one edited since, stays, whatever a report such as ``area.json`` lists.  Names are plain
file names inside the folder (no ``/``); symbolic links are never followed.  A file of the new
run replaces a file of the same name in the folder.

Locks are files beside the folder (``.<name>.lock``); the run holding one removes it when it
is done (a run waiting on a removed lock file takes the lock again on the new file), so no lock
file outlives the runs.

Whole-suite runs (``report``, ``demo``) also hold a lock on their folder for their whole run
(:func:`exclusive`), so that their summary and the per-unit folders under it come from one run.

Folders are checked with :func:`check_output` before a run computes anything and created with
:func:`ensure_dir`; both turn "a file is in the way", a symbolic-link loop, a read-only or
immutable file system and permission problems into one-line :class:`~flows.FlowError`
messages naming the output folder (never the private folder).
"""

import contextlib
import errno
import fcntl
import glob
import hashlib
import json
import os
import shutil
import signal
import stat
import sys
import tempfile
import threading
import time
from pathlib import Path

from . import FlowError

#: the manifest of the files trainfab wrote into an output folder (name → sha256)
MANIFEST = ".trainfab-files.json"
#: errors of a full file system
_FULL = (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC))
#: errors of a folder that cannot be written
_NOT_WRITABLE = (errno.EROFS, errno.EACCES, errno.EPERM)


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
    if existing is not None and not os.access(existing, os.W_OK | os.X_OK):
        if existing == final:
            raise FlowError(f"{what} {final} is not writable")
        raise FlowError(f"{what} {final} cannot be created: {existing} is not writable")
    if existing == final and not os.access(final.parent, os.W_OK | os.X_OK):
        # the private folder and the lock live beside the output folder
        raise FlowError(f"{what} {final} is not writable: its parent folder {final.parent} "
                        "is not writable")
    return final


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
    written is a :class:`FlowError` naming ``path`` (the old content stays)."""
    path = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    except OSError as e:
        raise FlowError(f"cannot write {path}: {e.strerror or e}") from None
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
            raise (DiskFull if _full(e) else FlowError)(
                f"cannot write {path}: {e.strerror or e}") from None
        raise


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
    while True:
        try:
            fd = os.open(lockfile, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as e:
            where = lockfile.parent
            if e.errno in _NOT_WRITABLE:
                raise FlowError(f"output folder {where} is not writable ({e.strerror})") from None
            raise FlowError(f"cannot lock {where}: {e.strerror or e}") from None
        try:
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
                now = os.stat(lockfile)
            except FileNotFoundError:
                now = None
        except BaseException:
            os.close(fd)
            raise
        if now is not None and (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino):
            break
        os.close(fd)  # the previous holder removed that file: lock the one there now
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.unlink(lockfile)
        os.close(fd)


def _lockfile(folder: Path) -> Path:
    return folder.parent / f".{folder.name}.lock"


@contextlib.contextmanager
def exclusive(folder, what: str):
    """Hold ``folder``'s lock for a whole run; tells the user when it waits for another run."""
    folder = check_output(folder)
    ensure_dir(folder.parent, shown=folder)
    with locked(_lockfile(folder), f"trainfab: waiting for another {what} run using {folder}"):
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


# --------------------------------------------------------------------------------------------
# the manifest of trainfab's files in an output folder


def _plain_name(name) -> bool:
    return (isinstance(name, str) and name not in ("", ".", "..", MANIFEST) and "/" not in name
            and "\0" not in name)


def file_sha256(path) -> str | None:
    """The sha256 of the regular file at ``path``; ``None`` when it is missing, a symbolic
    link, a folder or anything but a regular file, or unreadable."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        h = hashlib.sha256()
        while chunk := os.read(fd, 1 << 20):
            h.update(chunk)
        return h.hexdigest()
    except OSError:
        return None
    finally:
        os.close(fd)


def read_manifest(folder) -> dict[str, str]:
    """Name → sha256 of the files trainfab wrote into ``folder`` (empty without a readable
    manifest; entries that are not plain names or hashes are dropped)."""
    try:
        doc = json.loads((Path(folder) / MANIFEST).read_text())
        files = doc["files"]
        return {n: h for n, h in files.items() if _plain_name(n) and isinstance(h, str)
                and len(h) == 64}
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return {}


def _write_manifest(folder: Path, files: dict) -> None:
    doc = {"about": "files trainfab wrote into this folder, with their sha256: trainfab "
                    "removes a file as stale only when it is listed here with its content "
                    "unchanged", "files": dict(sorted(files.items()))}
    write_atomic(folder / MANIFEST, json.dumps(doc, indent=1) + "\n")


def remove_stale(folder, names, keep=()) -> list[str]:
    """Remove from ``folder`` the files of ``names`` (except ``keep``) that trainfab wrote
    there and that are unchanged since (:data:`MANIFEST`); returns the names removed.  The
    caller holds the folder's lock (or is its only writer)."""
    folder = Path(folder)
    own = read_manifest(folder)
    gone = []
    for name in sorted(set(names) - set(keep)):
        if _plain_name(name) and name in own and file_sha256(folder / name) == own[name]:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(folder / name)
            gone.append(name)
    return gone


def record(folder, names) -> None:
    """Add the files ``names`` of ``folder`` to its manifest, as they are now (files trainfab
    has just written); listed files that are gone are dropped."""
    folder = Path(folder)
    files = {n: h for n, h in read_manifest(folder).items() if os.path.lexists(folder / n)}
    for name in names:
        h = file_sha256(folder / name)
        if h is not None and _plain_name(name):
            files[name] = h
    _write_manifest(folder, files)


# --------------------------------------------------------------------------------------------
# staged runs


@contextlib.contextmanager
def staged(final, stale=(), last=()):
    """A private folder for a run's outputs, moved into ``final`` when the block succeeds.

    Yields the private folder (beside ``final``, on the same file system).  When the block
    succeeds, :func:`install` moves its files into ``final`` (``stale``: names of files an
    earlier run may have written that this run replaces, removed when the manifest proves
    them trainfab's; ``last``: index files to move last).  On failure or interruption
    ``final`` is untouched: after a :class:`~flows.FlowError` the private folder becomes
    ``<final>.failed`` (its tool logs), which the error message names; after a full disk it
    is deleted and the error names ``final``; after anything else (Ctrl-C) it is deleted.
    """
    final = check_output(final)
    ensure_dir(final.parent, shown=final)
    _remove_abandoned(final)
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.run-", dir=final.parent))
    except OSError as e:
        raise _write_error(final, e) from None
    try:
        try:
            yield tmp
        except OSError as e:
            if _full(e):
                raise _write_error(final, e) from None
            raise
        install(tmp, final, stale, last)
    except DiskFull:
        raise  # the private folder goes (below): a full disk keeps no failed run
    except FlowError as e:
        # keep a failed run's files (tool logs) for the user, apart from the outputs
        failed = final.parent / f"{final.name}.failed"
        with locked(_lockfile(final)):
            shutil.rmtree(failed, ignore_errors=True)
            with contextlib.suppress(OSError):
                os.replace(tmp, failed)
        raise FlowError(f"{e} (files of the failed run: {failed})") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _write_error(final: Path, e: OSError) -> FlowError:
    """The one-line error of ``e``, met while writing a run into ``final``."""
    if _full(e):
        return DiskFull(f"no space left on the device of output folder {final} "
                        f"({e.strerror}); the folder is unchanged")
    if e.errno in _NOT_WRITABLE:
        return FlowError(f"output folder {final} is not writable ({e.strerror})")
    return FlowError(f"output folder {final} cannot be written: {e.strerror or e}")


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


def _move(src: Path, dst: Path) -> None:
    """``os.replace``; across file systems (an output folder that is a mount point of its
    own) through a copy inside the destination folder, so the replacement stays atomic."""
    try:
        os.replace(src, dst)
    except OSError as e:
        if e.errno != errno.EXDEV:
            raise
        fd, part = tempfile.mkstemp(prefix=f".{dst.name}.", dir=dst.parent)
        try:
            with open(src, "rb") as f, os.fdopen(fd, "wb") as g:
                shutil.copyfileobj(f, g)
            os.replace(part, dst)
        except BaseException:
            Path(part).unlink(missing_ok=True)
            raise


def install(tmp: Path, final: Path, stale=(), last=()) -> None:
    """Move every file of ``tmp`` into ``final`` (created if needed), after removing the files
    of ``stale`` that the new run does not write and that the manifest proves trainfab wrote
    (see the module docstring); the names in ``last`` move last (an index such as
    ``area.json``).  Everything that can be checked is checked before the first file moves."""
    final = Path(final)
    ensure_dir(final)
    names = sorted(p.name for p in tmp.iterdir() if p.is_file())
    names.sort(key=lambda n: n in last)
    new = {name: file_sha256(tmp / name) for name in names}
    with locked(_lockfile(final)), _deferred_signals():
        if not os.access(final, os.W_OK | os.X_OK):
            raise FlowError(f"output folder {final} is not writable")
        for name in names:
            target = final / name
            if target.is_dir() and not target.is_symlink():
                raise FlowError(f"output folder {final}: {name} is a folder; the run writes a "
                                "file of that name")
        try:
            remove_stale(final, stale, keep=names)
            for name in names:
                _move(tmp / name, final / name)
            files = {n: h for n, h in read_manifest(final).items()
                     if n not in new and os.path.lexists(final / n)}
            files.update({n: h for n, h in new.items() if h is not None})
            _write_manifest(final, files)
        except OSError as e:
            raise _write_error(final, e) from None


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


__all__ = ["MANIFEST", "DiskFull", "no_space", "resolve", "check_output", "ensure_dir",
           "write_atomic", "locked",
           "exclusive", "file_sha256", "read_manifest", "remove_stale", "record", "staged",
           "install", "prune"]

"""Staged runs: a private folder per run, moved into its output folder whole."""

from __future__ import annotations

import contextlib
import errno
import glob
import os
import shutil
import tempfile
import time
from pathlib import Path

from .. import FlowError

from .folders import (_NOT_WRITABLE, DiskFull, _full, _writable, ensure_dir, fault,
                      no_space)
from .locks import _deferred_signals, _lockfile, locked
from .manifest import (MANIFEST, Manifest, _check_folder, _manifest_text, _new_run_id,
                       _not_ours, file_sha256, load_manifest, owned_tree, precheck)

#: text files larger than this are moved as they are (no private-path rewriting)
_REWRITE_LIMIT = 64 << 20
#: the private folders of this process's runs under way, and their output folders
_ACTIVE: dict[str, str] = {}


def public(path) -> str:
    """``path`` as it will be once the runs under way in this process are in place: a path
    inside a private folder named inside its output folder (for the lines a run prints)."""
    text = str(path)
    for _ in range(len(_ACTIVE) + 1):
        for work, final in _ACTIVE.items():
            if text == work or text.startswith(work + os.sep):
                text = final + text[len(work):]
                break
        else:
            break
    return text


# --------------------------------------------------------------------------------------------
# staged runs


class Stage:
    """One output folder of a run: its private folder ``work``, moved into ``final`` by
    :meth:`install`.  Made by :func:`staged` (one folder) or :func:`staged_all` (several moved
    together, as ``train`` and its capture)."""

    def __init__(self, final, *, names=(), folders=(), last=(), collection=False, keep=(),
                 what="output folder"):
        self.what = what
        self.final = precheck(final, names, folders, what)
        self.last = tuple(last)
        self.collection = collection
        self.keep = frozenset(keep)
        self.run = _new_run_id()
        self.work: Path | None = None
        self.top = True
        self._undo_log: list = []
        self._trash: Path | None = None
        self._stale_dirs: list[Path] = []

    def open(self) -> Path:
        ensure_dir(self.final.parent, self.what, shown=self.final)
        _remove_abandoned(self.final)
        try:
            self.work = Path(tempfile.mkdtemp(prefix=f".{self.final.name}.run-",
                                              dir=self.final.parent))
        except OSError as e:
            raise _write_error(self.final, e, self.what) from None
        return self.work

    def discard(self) -> None:
        if self.work is not None:
            shutil.rmtree(self.work, ignore_errors=True)

    def keep_failed(self) -> Path | None:
        """Move the private folder's files to a fresh ``<final>.failed-…`` folder (none when
        it holds no file); returns it."""
        if self.work is None or not self.work.is_dir():
            return None
        if not any(f for _, _, f in os.walk(self.work)):
            self.discard()
            return None
        stamp = time.strftime("%Y%m%d-%H%M%S")
        for n in range(1000):
            failed = self.final.parent / (f"{self.final.name}.failed-{stamp}"
                                          + (f"-{n}" if n else ""))
            try:
                os.mkdir(failed)  # a fresh name: never one that exists
            except FileExistsError:
                continue
            except OSError:
                break
            try:
                os.replace(self.work, failed)  # onto the empty folder this run just made
                return failed
            except OSError:
                with contextlib.suppress(OSError):
                    os.rmdir(failed)
                break
        self.discard()
        return None

    def install(self) -> None:
        """Move the private folder's tree into ``final`` under its lock, signals deferred:
        every check first, then moves that are undone if one fails."""
        _install_all([self])

    def undo(self) -> None:
        """Put every file back where it was (the moves of :func:`_apply`, in reverse)."""
        for entry in reversed(self._undo_log):
            with contextlib.suppress(OSError):
                if entry[0] == "move":
                    os.replace(entry[1], entry[2])
                else:
                    os.rmdir(entry[1])
        self._undo_log = []

    def commit(self) -> None:
        """The moves stand: delete what was set aside and the folders left empty."""
        if self._trash is not None:
            shutil.rmtree(self._trash, ignore_errors=True)
        for d in self._stale_dirs:
            with contextlib.suppress(OSError):
                os.rmdir(self.final / d)
        self._undo_log = []
        self._trash = None


@contextlib.contextmanager
def staged(final, names=(), folders=(), last=(), collection=False, keep=(),
           what="output folder"):
    """A private folder for a run's outputs, moved into ``final`` when the block succeeds.

    ``names`` and ``folders``: the files and sub-folders the run will write (relative to
    ``final``) when they are known in advance; they are checked before the block runs (a file
    of the user's in the way is an error before any work).  ``last``: index files moved last
    (``area.json``).  ``collection``: keep the other runs' files (see the module docstring).
    ``keep``: names at the top of ``final`` that stay whatever the run writes (a sweep's
    resumable store).

    Yields the private folder (beside ``final``, on the same file system).  On failure or
    interruption ``final`` is untouched: after a :class:`~flows.FlowError` the private
    folder's files move to a fresh ``<final>.failed-…`` folder, which the error names; after
    a full disk or anything else (Ctrl-C) it is deleted."""
    with staged_all([Stage(final, names=names, folders=folders, last=last,
                           collection=collection, keep=keep, what=what)]) as (work,):
        yield work


@contextlib.contextmanager
def staged_all(stages: list[Stage]):
    """:func:`staged` for several output folders at once: every folder is checked before the
    block, and they move into place together (under all their locks, signals deferred)."""
    try:
        top = not _ACTIVE  # faults stop the outermost run only (nested runs are its parts)
        with _deferred_signals():  # a signal now cannot leave a private folder behind
            works = [s.open() for s in stages]
            _ACTIVE.update({str(s.work): str(s.final) for s in stages})
        for s in stages:
            s.top = top
        if top:
            fault("stage")
        try:
            yield tuple(works)
        except OSError as e:
            if _full(e) or any(no_space(s.final.parent) for s in stages):
                raise _write_error(stages[0].final, e, stages[0].what) from None
            raise
        _install_all(stages)
    except DiskFull:
        for s in stages:
            s.discard()
        raise
    except FlowError as e:
        if any(no_space(s.final.parent) for s in stages):
            for s in stages:
                s.discard()
            raise DiskFull(f"{e} (no space left on the device of {stages[0].what} "
                           f"{stages[0].final}; the folder is unchanged)") from None
        kept = [f for f in (s.keep_failed() for s in stages) if f is not None]
        if kept:
            raise type(e)(f"{e} (files of the failed run: {', '.join(map(str, kept))})") \
                from None
        raise
    finally:
        with _deferred_signals():
            for s in stages:
                _ACTIVE.pop(str(s.work), None)
                s.discard()


def _install_all(stages: list[Stage]) -> None:
    with contextlib.ExitStack() as stack:
        for s in sorted(stages, key=lambda s: str(s.final)):
            ensure_dir(s.final, s.what)
            stack.enter_context(locked(_lockfile(s.final)))
        stack.enter_context(_deferred_signals())
        done = []
        try:
            for s in stages:
                _install(s, commit=False)
                done.append(s)
        except BaseException:
            for s in reversed(done):
                s.undo()
            raise
        for s in stages:
            s.commit()


def _write_error(final: Path, e: OSError, what: str = "output folder") -> FlowError:
    """The one-line error of ``e``, met while writing a run into ``final``."""
    if _full(e):
        return DiskFull(f"no space left on the device of {what} {final} "
                        f"({e.strerror}); the folder is unchanged")
    if e.errno in _NOT_WRITABLE:
        return FlowError(f"{what} {final} is not writable ({e.strerror})")
    return FlowError(f"{what} {final} cannot be written: {e.strerror or e}")


#: a private folder this old belongs to a run that was killed (``kill -9``, a power cut)
ABANDONED_AFTER_S = 24 * 3600.0


def _remove_abandoned(final: Path) -> None:
    """Delete the private folders of runs into ``final`` that were killed before they could
    clean up (older than :data:`ABANDONED_AFTER_S`)."""
    now = time.time()
    for tmp in final.parent.glob(f".{glob.escape(final.name)}.run-*"):
        with contextlib.suppress(OSError):
            if tmp.is_dir() and not tmp.is_symlink() \
                    and now - tmp.stat().st_mtime > ABANDONED_AFTER_S:
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
            os.unlink(src)
        except BaseException:
            Path(part).unlink(missing_ok=True)
            raise


def _rewrite_private_paths(work: Path, final: Path, path: Path) -> None:
    """Replace the private folder's path by the output folder's in a text file of the run."""
    try:
        if path.stat().st_size > _REWRITE_LIMIT:
            return
        data = path.read_bytes()
    except OSError:
        return
    old = str(work).encode()
    if old not in data:
        return
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return
    path.write_bytes(data.replace(old, str(final).encode()))


def _walk(work: Path) -> tuple[list[Path], list[Path]]:
    """The relative folders (outermost first, ``.`` included) and files of the private tree.
    Hidden names (``.``-prefixed: temporaries, nested runs' private folders and locks,
    manifests) and symbolic links stay behind."""
    dirs, files = [Path(".")], []
    for root, subdirs, names in os.walk(work):
        rel = Path(root).relative_to(work)
        keep = []
        for d in sorted(subdirs):
            if d.startswith(".") or (Path(root) / d).is_symlink():
                continue
            keep.append(d)
            dirs.append(rel / d)
        subdirs[:] = keep
        for n in sorted(names):
            p = Path(root) / n
            if n.startswith(".") or p.is_symlink() or not p.is_file():
                continue
            files.append(rel / n)
    return dirs, files


def _install(s: Stage, commit: bool = False) -> None:
    """Check and move ``s.work`` into ``s.final`` (see :class:`Stage`)."""
    work, final = s.work, s.final
    if not _writable(final):
        raise FlowError(f"{s.what} {final} is not writable")
    dirs, files = _walk(work)
    for rel in files:
        _rewrite_private_paths(work, final, work / rel)
    new = {rel: file_sha256(work / rel) for rel in files}
    # every check before the first move
    manifests: dict[Path, Manifest] = {Path("."): load_manifest(final)}
    for rel in dirs[1:]:
        _check_folder(final, rel, manifests)
    for rel in files:
        target = final / rel
        m = manifests.get(rel.parent)
        if os.path.lexists(target) and (m is None or not m.owns_file(target.parent, rel.name)):
            raise FlowError(_not_ours(target, s.what, final))
    # what goes: in every folder the run writes (but a collection's top), the files and
    # folders of trainfab's that the run does not write
    stale_files: list[Path] = []
    stale_dirs: list[Path] = []
    wanted_files = set(files)
    wanted_dirs = set(dirs)
    new_manifests: dict[Path, Manifest] = {}
    for rel in dirs:
        old = manifests.get(rel, Manifest())
        m = Manifest()
        top = rel == Path(".")
        here = final / rel
        for name, entry in old.files.items():
            if (rel / name) in wanted_files or not old.owns_file(here, name):
                continue
            if top and (s.collection or name in s.keep):
                m.files[name] = entry
            else:
                stale_files.append(rel / name)
        if here.is_dir():
            for name in sorted(os.listdir(here)):
                if (rel / name) in wanted_dirs or not old.owns_folder(here, name):
                    continue
                if top and (s.collection or name in s.keep):
                    m.folders[name] = old.folders.get(name)
                else:
                    f, d = owned_tree(here / name)
                    stale_files += [p.relative_to(final) for p in f]
                    stale_dirs += [p.relative_to(final) for p in d] + [rel / name]
        for f in files:
            if f.parent == rel and new[f] is not None:
                m.files[f.name] = (new[f], s.run)
        for d in dirs[1:]:
            if d.parent == rel:
                m.folders[d.name] = s.run
        new_manifests[rel] = m
    for rel, m in new_manifests.items():
        (work / rel / MANIFEST).write_text(_manifest_text(m))
    order = sorted(files, key=lambda f: (f.name in s.last, len(f.parts)))
    s._undo_log = []
    s._trash = None
    s._stale_dirs = stale_dirs
    try:
        _apply(s, dirs, order, stale_files, manifests)
    except BaseException as e:
        s.undo()
        if isinstance(e, OSError):
            raise _write_error(final, e, s.what) from None
        raise
    if commit:
        s.commit()


def _apply(s: Stage, dirs, order, stale_files, manifests) -> None:
    work, final = s.work, s.final
    log = s._undo_log
    s._trash = Path(tempfile.mkdtemp(prefix=".trainfab-old.", dir=final))
    log.append(("rmdir", s._trash))
    k = 0

    def aside(rel: Path) -> None:
        nonlocal k
        k += 1
        dst = s._trash / f"{k}"
        os.replace(final / rel, dst)
        log.append(("move", dst, final / rel))

    for rel in stale_files:
        if os.path.lexists(final / rel):
            aside(rel)
    for rel in dirs[1:]:
        if not os.path.lexists(final / rel):
            os.mkdir(final / rel)
            log.append(("rmdir", final / rel))
    for n, rel in enumerate(order, 1):
        if os.path.lexists(final / rel):
            aside(rel)
        _move(work / rel, final / rel)
        log.append(("move", final / rel, work / rel))
        if s.top:
            fault("install", n)
    if s.top:
        fault("manifest")
    for rel in dirs:
        if os.path.lexists(final / rel / MANIFEST):
            aside(rel / MANIFEST)
        _move(work / rel / MANIFEST, final / rel / MANIFEST)
        log.append(("move", final / rel / MANIFEST, work / rel / MANIFEST))




def install(tmp: Path, final: Path, last=(), collection=False) -> None:
    """Move every file of ``tmp`` into ``final`` as a run's outputs (:func:`staged` without the
    block: for a caller that built the private folder itself)."""
    s = Stage(final, last=last, collection=collection)
    s.work = Path(tmp)
    _install_all([s])


def prune(root, keep: int, min_age_s: float = 3600.0) -> int:
    """Delete all but the ``keep`` newest sub-folders of ``root`` that are older than
    ``min_age_s`` (a run still writing into one is younger); returns how many went.  For
    trainfab's own caches (``build/sim/<unit>/runs``), whose folders each hold one run."""
    root = Path(root)
    if not root.is_dir():
        return 0
    folders = sorted((p for p in root.iterdir() if p.is_dir() and not p.is_symlink()),
                     key=lambda p: p.stat().st_mtime, reverse=True)
    now, gone = time.time(), 0
    for p in folders[keep:]:
        if now - p.stat().st_mtime > min_age_s:
            shutil.rmtree(p, ignore_errors=True)
            gone += 1
    return gone

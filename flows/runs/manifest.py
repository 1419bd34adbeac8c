"""The manifest of what trainfab wrote into a folder, and the checks made before a run."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import time
from pathlib import Path

from .. import FlowError

from .folders import check_output, write_atomic

#: the manifest of the files trainfab wrote into an output folder
MANIFEST = ".trainfab-files.json"
#: the manifest format this trainfab writes (it reads 1 and 2)
MANIFEST_VERSION = 2


# --------------------------------------------------------------------------------------------
# the manifest of trainfab's files in a folder


class DamagedManifest(FlowError):
    """A folder's manifest cannot be read: nothing in the folder can be proven trainfab's."""


def _plain_name(name) -> bool:
    return (isinstance(name, str) and name not in ("", ".", "..", MANIFEST) and "/" not in name
            and "\0" not in name)


def _is_hash(h) -> bool:
    return isinstance(h, str) and len(h) == 64 and all(c in "0123456789abcdef" for c in h)


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


class Manifest:
    """What trainfab wrote into one folder: ``files`` (name → ``(sha256, run)``) and
    ``folders`` (name → run)."""

    def __init__(self, files=None, folders=None):
        self.files: dict[str, tuple[str, str | None]] = dict(files or {})
        self.folders: dict[str, str | None] = dict(folders or {})

    def owns_file(self, folder: Path, name: str) -> bool:
        """Whether ``folder/name`` is a regular file trainfab wrote, unchanged since."""
        entry = self.files.get(name)
        return entry is not None and file_sha256(folder / name) == entry[0]

    def owns_folder(self, folder: Path, name: str) -> bool:
        """Whether ``folder/name`` is a real folder (not a link) that this manifest lists as
        made by trainfab's run into ``folder`` (the output of another command nested inside,
        such as ``make training``'s capture beside its run, is not)."""
        path = folder / name
        if path.is_symlink() or not path.is_dir():
            return False
        return name in self.folders

    def doc(self) -> dict:
        return {"about": "what trainfab wrote into this folder: it replaces or removes a file "
                         "only when it is listed here with its content unchanged",
                "version": MANIFEST_VERSION,
                "files": {n: {"sha256": h, "run": r} for n, (h, r) in sorted(self.files.items())},
                "folders": {n: {"run": r} for n, r in sorted(self.folders.items())}}


def load_manifest(folder) -> Manifest:
    """The manifest of ``folder`` (empty when there is none).  :class:`DamagedManifest` when
    one is there but cannot be read as trainfab's: a folder, a link, unreadable, not JSON, or
    JSON of another shape or a newer version."""
    folder = Path(folder)
    path = folder / MANIFEST
    if not os.path.lexists(path):
        return Manifest()
    what = None
    if path.is_symlink():
        what = "a symbolic link"
    elif path.is_dir():
        what = "a folder"
    else:
        try:
            doc = json.loads(path.read_bytes())
        except (OSError, ValueError, RecursionError) as e:
            what = "unreadable" if isinstance(e, OSError) else "not trainfab's JSON"
        else:
            parsed = _parse_manifest(doc)
            if isinstance(parsed, Manifest):
                return parsed
            what = parsed
    raise DamagedManifest(
        f"{folder}: its manifest {MANIFEST} is {what}, so trainfab cannot tell which files "
        "there it wrote; move the folder's files away (or give another output folder)")


def _parse_manifest(doc) -> Manifest | str:
    if not isinstance(doc, dict) or not isinstance(doc.get("files"), dict):
        return "not a trainfab manifest"
    version = doc.get("version", 1)
    if isinstance(version, bool) or not isinstance(version, int):
        return f"of version {version!r}, not a number"
    if version > MANIFEST_VERSION:
        return f"of version {version} (this trainfab reads up to {MANIFEST_VERSION})"
    files, folders = {}, {}
    for name, entry in doc["files"].items():
        if isinstance(entry, dict):
            h, run = entry.get("sha256"), entry.get("run")
        else:
            h, run = entry, None
        if _plain_name(name) and _is_hash(h):
            files[name] = (h, run if isinstance(run, str) else None)
    raw = doc.get("folders", {})
    if isinstance(raw, dict):
        for name, entry in raw.items():
            if _plain_name(name):
                run = entry.get("run") if isinstance(entry, dict) else None
                folders[name] = run if isinstance(run, str) else None
    return Manifest(files, folders)


def read_manifest(folder) -> dict[str, str]:
    """Name → sha256 of the files trainfab wrote into ``folder`` (empty without a readable
    manifest)."""
    try:
        return {n: h for n, (h, _) in load_manifest(folder).files.items()}
    except DamagedManifest:
        return {}


def _manifest_text(m: Manifest) -> str:
    return json.dumps(m.doc(), indent=1) + "\n"


def owned_tree(folder) -> tuple[list[Path], list[Path]]:
    """The files (manifests included) and folders under ``folder`` that trainfab wrote and that
    are unchanged: what removing ``folder`` as trainfab's may take.  Folders deepest first."""
    folder = Path(folder)
    files: list[Path] = []
    folders: list[Path] = []
    try:
        m = load_manifest(folder)
    except DamagedManifest:
        return files, folders
    for name in m.files:
        if m.owns_file(folder, name):
            files.append(folder / name)
    for name in sorted(os.listdir(folder)) if folder.is_dir() else []:
        if m.owns_folder(folder, name):
            f, d = owned_tree(folder / name)
            files += f
            folders += d
            folders.append(folder / name)
    if os.path.isfile(folder / MANIFEST) and not os.path.islink(folder / MANIFEST):
        files.append(folder / MANIFEST)
    return files, folders


def remove_owned(folder) -> bool:
    """Remove what trainfab wrote under ``folder`` (:func:`owned_tree`), and each folder left
    empty; ``folder`` itself too when nothing else is in it.  Returns whether it is gone."""
    folder = Path(folder)
    files, folders = owned_tree(folder)
    for f in files:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f)
    for d in [*folders, folder]:
        with contextlib.suppress(OSError):
            os.rmdir(d)
    return not os.path.lexists(folder)


def remove_stale(folder, names, keep=()) -> list[str]:
    """Remove from ``folder`` the files of ``names`` (except ``keep``) that trainfab wrote
    there and that are unchanged since (:data:`MANIFEST`), and drop them from the manifest;
    returns the names removed.  The caller holds the folder's lock (or is its only writer)."""
    folder = Path(folder)
    m = load_manifest(folder)
    gone = []
    for name in sorted(set(names) - set(keep)):
        if _plain_name(name) and m.owns_file(folder, name):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(folder / name)
            gone.append(name)
            del m.files[name]
    if gone:
        write_atomic(folder / MANIFEST, _manifest_text(m))
    return gone


def record(folder, names, run: str | None = None) -> None:
    """Add the files ``names`` of ``folder`` to its manifest, as they are now (files trainfab
    has just written in place: a sweep's resumable results); listed files that are gone are
    dropped."""
    folder = Path(folder)
    m = load_manifest(folder)
    m.files = {n: e for n, e in m.files.items() if os.path.lexists(folder / n)}
    for name in names:
        h = file_sha256(folder / name)
        if h is not None and _plain_name(name):
            m.files[name] = (h, run)
    write_atomic(folder / MANIFEST, _manifest_text(m))


# --------------------------------------------------------------------------------------------
# checks before a run


def _new_run_id() -> str:
    return f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}-{os.urandom(3).hex()}"


def precheck(final, names=(), folders=(), what: str = "output folder") -> Path:
    """Every check of an output folder that can fail before a run computes anything: it is
    or can become a writable folder, its manifest (and those of ``folders``) can be read, and
    each of ``names`` (paths relative to it, ``a/b`` for a file in a sub-folder) is absent or
    a file trainfab wrote there unchanged.  Returns the folder resolved."""
    final = check_output(final, what)
    if not final.is_dir():
        return final
    manifests = {Path("."): load_manifest(final)}
    for sub in folders:
        _check_folder(final, Path(sub), manifests)
    for name in names:
        rel = Path(name)
        parent = rel.parent
        if parent != Path(".") and not _check_folder(final, parent, manifests):
            continue
        m = manifests[parent]
        target = final / rel
        if os.path.lexists(target) and not m.owns_file(target.parent, rel.name):
            raise FlowError(_not_ours(target, what, final))
    return final


def _check_folder(final: Path, rel: Path, manifests: dict) -> bool:
    """Whether ``final/rel`` exists as a folder trainfab made (its manifest read into
    ``manifests``); :class:`FlowError` when something else is in the way."""
    here = Path(".")
    for part in rel.parts:
        parent, here = here, here / part
        if here in manifests:
            continue
        path = final / here
        if not os.path.lexists(path):
            return False
        if path.is_symlink() or not path.is_dir():
            kind = "a symbolic link" if path.is_symlink() else "a file"
            raise FlowError(f"{path} is {kind}, where the run writes a folder; trainfab does "
                            "not replace it: move it away or give another output folder")
        if parent not in manifests:
            return False
        if not manifests[parent].owns_folder(final / parent, part):
            raise FlowError(f"{path} is a folder trainfab did not write (no manifest lists "
                            "it); the run writes a folder of that name: move it away or give "
                            "another output folder")
        manifests[here] = load_manifest(path)
    return True


def _not_ours(target: Path, what: str, final: Path) -> str:
    if target.is_symlink():
        kind = "a symbolic link"
    elif target.is_dir():
        kind = "a folder"
    else:
        kind = "a file trainfab did not write (or one changed since it wrote it)"
    return (f"{target} is {kind}; the run writes a file of that name and never replaces "
            f"one of yours: move it away or give another {what}")

"""The state of a folder tree, for the data-safety tests: every entry, links not followed."""

import hashlib
import os
from pathlib import Path


def snapshot(root) -> dict[str, tuple]:
    """``{relative path: ("file", sha256) | ("link", target) | ("dir",)}`` of everything under
    ``root`` (hidden entries included; symbolic links recorded, never followed)."""
    root = Path(root)
    found: dict[str, tuple] = {}
    if not os.path.lexists(root):
        return found
    for dirpath, dirnames, filenames in os.walk(root):
        base = Path(dirpath)
        for name in list(dirnames):
            path = base / name
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                found[rel] = ("link", os.readlink(path))
                dirnames.remove(name)
            else:
                found[rel] = ("dir",)
        for name in filenames:
            path = base / name
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                found[rel] = ("link", os.readlink(path))
            else:
                found[rel] = ("file", hashlib.sha256(path.read_bytes()).hexdigest())
    return found

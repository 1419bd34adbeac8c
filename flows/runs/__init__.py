"""The one owner of output folders: no run removes, overwrites or mixes a file it did not write.

Every command that writes works in a *private folder* beside its output folder and moves the
whole tree it wrote into place only when it has succeeded (:func:`staged`), under a lock on the
output folder, with the signals that stop a run deferred while the files move.  So:

* any number of runs may target the same output folder at once; each prints the numbers of its
  own files, and the folder ends up holding the complete set of files of one of them;
* a run that fails or is interrupted (Ctrl-C, SIGTERM, a tool error, an invalid option found
  late, a full disk) leaves the output folder as it was;
* Ctrl-C (or SIGTERM) while the files move into place (a few milliseconds) is deferred until
  the move is complete: the folder then holds the new run's complete set of files, and the run
  still ends as interrupted (exit status 130);
* a move that fails part-way (a full disk, an I/O error) is undone: the old files go back.

**The manifest decides.**  Each folder trainfab writes holds a manifest, :data:`MANIFEST`, of
the files (and sub-folders) it moved there, with the sha256 of each file and the run that wrote
it.  A file may be replaced or removed only when the manifest lists it and its content still has
the recorded hash: a file trainfab did not write, one edited since, a symbolic link or a folder
in the way is never touched, and a run that would have to replace one stops before it computes
anything (or, found only at the end, before its first file moves) with a one-line error naming
it.  A folder whose manifest is damaged (not trainfab's JSON, a folder, unreadable) cannot prove
anything: runs into it are refused until the user moves the folder's files away.

An output folder holds one run: when a run is installed, the files and folders an earlier run
wrote there that the new run does not write are removed (only those the manifest proves
trainfab's, unchanged).  A *collection* folder (``generate -o``, ``tensor-stats``: one pair of
files per input) keeps the other runs' files and replaces only the names the new run writes.
Symbolic links are never followed: names are plain names inside their folder.  Paths of the
private folder in the run's text files are rewritten to the output folder's as they move;
hidden files of the private folder (names starting with ``.``: temporaries) stay behind.

A run that fails with an error keeps what it wrote (its tool logs) in a folder it creates
under a fresh name, ``<output>.failed-<date>-<time>[-<n>]``, which the error names; it never
deletes or reuses one.  A full disk or an interruption keeps nothing.

Locks are files beside the folder (``.<name>.lock``); the run holding one removes it when it
is done (a run waiting on a removed lock file takes the lock again on the file now there), so
no lock file outlives the runs.  Whole-suite runs (``report``, ``demo``, ``paper``) also hold
``.<name>.run.lock`` for their whole run (:func:`exclusive`): a second one waits.

``TRAINFAB_FAULT`` (for the fault-injection tests) stops a run at a named point: see
:func:`fault`.
"""

from .folders import (DiskFull, arm_faults, check_output, check_target_file, ensure_dir, fault,
                      no_space, resolve, write_atomic)
from .locks import exclusive, locked
from .manifest import (MANIFEST, MANIFEST_VERSION, DamagedManifest, Manifest, file_sha256,
                       load_manifest, owned_tree, precheck, read_manifest, record,
                       remove_owned, remove_stale)
from .stage import ABANDONED_AFTER_S, Stage, install, prune, public, staged, staged_all

__all__ = ["MANIFEST", "MANIFEST_VERSION", "ABANDONED_AFTER_S", "DiskFull", "DamagedManifest", "Manifest", "no_space", "resolve",
           "check_output", "check_target_file", "ensure_dir", "write_atomic", "locked",
           "exclusive", "file_sha256", "load_manifest", "read_manifest", "owned_tree",
           "remove_owned", "remove_stale", "record", "precheck", "Stage", "staged",
           "staged_all", "public", "install", "prune", "fault", "arm_faults"]

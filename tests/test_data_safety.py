"""Data safety of every command that writes: faults injected into real runs of small jobs.

Each case copies a folder holding an earlier run's complete output of the command, adds a
user's own files to it (a file, a folder) and beside it (``<output>.failed/thesis.tex``, a file
outside the folder that links point to), then runs the command under one fault:

=================  ==========================================================================
``symlink``        (b) the run's first output name is a symbolic link to a file outside
``sigint-stage``   (c) Ctrl-C as the run starts its work (``TRAINFAB_FAULT=stage:sigint``)
``sigterm-install``(c) SIGTERM while the files move into place (after the first)
``concurrent``     (d) two runs of the command into the folder at once
``read-only``      (e) the folder on a read-only mount (``chmod`` where mounts are not allowed)
``enospc-install`` (e) the disk full while the files move into place (after the second)
``manifest-corrupt`` (f) the folder's manifest overwritten with garbage
=================  ==========================================================================

The user's files of (a) are present in every case.  ``make test`` runs (b) on every command
and one more fault on each in turn: on every other command one of the two (c) points (each on
a quarter of the commands), on the others one of (d), (e) read-only, (e) full disk and (f)
(each on an eighth of them), so that every fault runs on two to five commands; ``--effort full``
runs every fault on every command (the matrix of ``make test-full``) and adds Ctrl-C and SIGTERM at the other points, a manifest that is a folder or another program's
JSON, a real full disk (a small tmpfs in a private mount namespace, as root) and a Ctrl-C that
arrives at any moment of the work.  ``demo`` and ``paper`` run one unit each
(tests/safety_driver.py).

Every case asserts: no file of the user's changed (hashes before and after); the folder holds
either the old complete output (byte for byte) or the new complete output (every file its
manifests list, with the listed hashes, all from one run, nothing else of trainfab's), never a
mix; no private folder, lock or set-aside file is left; the exit status is the one documented
(0, 1, 2 or 130); standard error has one message line and no traceback.  The suite prints its
matrix (commands × faults, the cases that held) at the end of the pytest run.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import flows
from flows import runs
from snapshot import snapshot

ROOT = Path(__file__).resolve().parent.parent
DRIVER = ROOT / "tests" / "safety_driver.py"
#: this pytest run's shared folder (inputs and the matrix's records), set by conftest
SHARED = Path(os.environ.get("TRAINFAB_SAFETY_DIR", flows.BUILD / "data-safety" / "local"))
TIMEOUT = 600


# --------------------------------------------------------------------------------------------
# the commands


@dataclass(frozen=True)
class Command:
    """A writing command at a small configuration."""

    name: str
    #: the arguments after ``trainfab``; ``{out}``, ``{case}`` and ``{inputs}`` are filled in
    args: tuple[str, ...]
    #: the output folder, relative to the case folder
    out: str = "out"
    #: files every run writes at the top of its output folder
    outputs: tuple[str, ...] = ()
    #: other output folders of the run (train's capture), relative to the case folder
    extra: tuple[str, ...] = ()
    #: a driver of tests/safety_driver.py (demo and paper at a small size)
    driver: str | None = None
    #: the exit statuses of a run that succeeded
    ok: tuple[int, ...] = (0,)
    #: the command reads its folder and writes nothing there (paths)
    reads: bool = False
    #: inputs the command needs (see :func:`inputs`)
    needs: tuple[str, ...] = ()
    #: files of its output folder a run keeps from the earlier runs (a sweep's results)
    store: tuple[str, ...] = ()


SMALL_ROUND = ("common.round", "--set", "in_width=8")
COMMANDS = [
    Command("generate", ("generate", *SMALL_ROUND, "-o", "{out}"),
            outputs=("common_round.v", "common_round.json")),
    Command("area", ("area", *SMALL_ROUND, "-o", "{out}"),
            outputs=("area.json", "area.md", "common_round.v")),
    Command("close", ("close", *SMALL_ROUND, "--clock-ns", "100", "-o", "{out}"),
            outputs=("close.json", "close.md", "area.json", "common.round.toml"), ok=(0, 1)),
    Command("timing", ("timing", "common.round", "-o", "{out}"),
            outputs=("timing.json", "timing.md")),
    Command("power", ("power", "baseline.mac16", "--set", "fmt=int8", "--set", "lanes=1",
                      "--groups", "4", "-o", "{out}"), outputs=("power.json", "power.md")),
    Command("paths", ("paths", "{out}", "--between", "*", "*"), reads=True,
            outputs=("area.json",)),
    Command("sweep", ("sweep", *SMALL_ROUND, "--grid", "pipeline=0", "-j", "1", "-o", "{out}"),
            outputs=("sweep.csv", "sweep.json", "sweep.md"), store=("results.jsonl",)),
    Command("report", ("report", "common.round"), out="build/report",
            outputs=("report.json", "report.md")),
    Command("demo", ("demo",), out="build/demo", driver="small-demo",
            outputs=("summary.json", "summary.md", "demo.png")),
    Command("paper", ("paper",), out="build/paper", driver="small-paper",
            outputs=("summary.json", "summary.md", "times.json")),
    Command("train", ("train", "--model", "mlp", "--formats", "fp32", "--epochs", "1",
                      "--limit", "60", "-j", "1", "-o", "{out}", "--capture", "{case}/cap"),
            outputs=("train.json", "train.md", "train.csv"), extra=("cap",)),
    Command("speedup", ("speedup", "{inputs}/pair.npz", "--area-ratio", "4", "-o", "{out}"),
            outputs=("speedup.json", "speedup.md", "speedup.csv"), needs=("pair",)),
    Command("tensor-stats", ("tensor-stats", "{inputs}/t.npz", "-o", "{out}"),
            outputs=("t.md", "t.json"), needs=("tensor",)),
    Command("study-dispatch", ("study", "dispatch", "--cycles", "1000", "--loads", "0.5",
                               "-o", "{out}"), outputs=("dispatch.json", "dispatch.md")),
    Command("study-hbfp", ("study", "hbfp", "--samples", "64", "-o", "{out}"),
            outputs=("hbfp.json", "hbfp.md")),
    Command("study-fast-time", ("study", "fast-time", "{inputs}/fast-run", "-o", "{out}"),
            outputs=("fast_time.json", "fast_time.md"), needs=("fast-run",)),
    Command("study-fpraker-rows", ("study", "fpraker-rows", "{inputs}/capture/fp32",
                                   "-o", "{out}"),
            outputs=("fpraker_rows.json", "fpraker_rows.md"), needs=("capture",)),
]
BY_NAME = {c.name: c for c in COMMANDS}

#: faults of make test, and those --effort full adds
STANDARD = ("symlink", "sigint-stage", "sigterm-install", "concurrent", "read-only",
            "enospc-install", "manifest-corrupt")
FULL = ("sigterm-stage", "sigint-install", "sigint-manifest", "manifest-folder",
        "manifest-foreign", "full-disk", "sigint-async")
#: what a fault ends in: the old output ("old") or the new ("new"), and the exit statuses
EXPECT = {"symlink": ("old", (2,)), "sigint-stage": ("old", (130,)),
          "sigterm-stage": ("old", (130,)), "sigterm-install": ("new", (130,)),
          "sigint-install": ("new", (130,)), "sigint-manifest": ("new", (130,)),
          "concurrent": ("new", None), "read-only": ("old", (2,)),
          "enospc-install": ("old", (2,)), "full-disk": ("old", (2,)),
          "manifest-corrupt": ("old", (2,)), "manifest-folder": ("old", (2,)),
          "manifest-foreign": ("old", (2,)), "sigint-async": ("either", None)}
#: faults that stop a run before its work: standard error is exactly one line
BEFORE_WORK = ("symlink", "read-only", "manifest-corrupt", "manifest-folder",
               "manifest-foreign")


def _can_mount() -> bool:
    if os.geteuid() != 0 or not shutil.which("unshare"):
        return False
    return subprocess.run(["unshare", "-m", "--propagation", "private", "true"],
                          capture_output=True).returncode == 0


MOUNTS = _can_mount()


#: make test: every command takes (b) and, in turn, one of the two signal points of (c) (even
#: commands) or one of the folder faults (d), (e) and (f) (odd commands), so that each runs on
#: a share of the commands (all of them, and the faults of FULL, at --effort full)
SIGNALS = ("sigint-stage", "sigterm-install")
FOLDERS = ("concurrent", "enospc-install", "read-only", "manifest-corrupt")


def cases(effort: str):
    for k, command in enumerate(COMMANDS):
        if effort == "full":
            faults = STANDARD + FULL
        elif command.reads:  # paths: the faults that apply to a reader
            faults = ("symlink", ("concurrent", "read-only")[k % 2])
        else:
            faults = ("symlink", SIGNALS[(k // 2) % 2] if k % 2 == 0 else FOLDERS[(k // 2) % 4])
        for fault in faults:
            if command.reads and fault in ("sigterm-install", "enospc-install",
                                           "sigint-install", "sigint-manifest", "sigint-stage",
                                           "sigterm-stage", "manifest-corrupt",
                                           "manifest-folder", "manifest-foreign", "full-disk"):
                continue  # paths moves nothing into place and keeps no manifest
            yield command.name, fault


def pytest_generate_tests(metafunc):
    if "case" in metafunc.fixturenames:
        effort = metafunc.config.getoption("--effort")
        params = list(cases(effort))
        metafunc.parametrize("case", params, ids=[f"{c}-{f}" for c, f in params])


# --------------------------------------------------------------------------------------------
# running the command


def _env(case: Path, fault: str | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TRAINFAB_FAULT"}
    env["TRAINFAB_BUILD"] = str(case / "build")
    env["PYTHONPATH"] = str(ROOT)
    if fault:
        env["TRAINFAB_FAULT"] = fault
    return env


def _argv(command: Command, case: Path) -> list[str]:
    args = [a.format(out=case / command.out, case=case, inputs=SHARED / "inputs")
            for a in command.args]
    if command.driver:
        return [sys.executable, str(DRIVER), command.driver, *args]
    return [sys.executable, "-m", "flows.cli", *args]


def default_signals() -> None:
    """In the child before it runs the command: Ctrl-C and SIGTERM with their default actions,
    whatever this process has (a background job of a non-interactive shell starts with SIGINT
    ignored, and Python then installs no KeyboardInterrupt handler)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _start(command: Command, case: Path, fault: str | None = None, wrap=()):
    return subprocess.Popen([*wrap, *_argv(command, case)], cwd=ROOT, env=_env(case, fault),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=default_signals)


def _finish(proc) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"the run took more than {TIMEOUT} s\n{err}")
    return proc.returncode, out, err


def _run(command: Command, case: Path, fault: str | None = None, wrap=()):
    return _finish(_start(command, case, fault, wrap))


# --------------------------------------------------------------------------------------------
# inputs and the earlier run's output, made once per pytest run (shared by the workers)


def _once(name: str, make) -> Path:
    """``SHARED/name``, made by ``make(folder)`` by the first worker that asks."""
    folder = SHARED / name
    done = SHARED / f"{name}.done"
    SHARED.mkdir(parents=True, exist_ok=True)
    with runs.locked(SHARED / f".{name}.lock"):
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            make(folder)
            done.write_text("")
    return folder


def _cli(args: list[str], build: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "flows.cli", *map(str, args)], cwd=ROOT,
                          env={**os.environ, "TRAINFAB_BUILD": str(build),
                               "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr


def _make_inputs(folder: Path) -> None:
    rng = np.random.default_rng(0)
    np.savez(folder / "t.npz", w=rng.standard_normal((16, 32)).astype(np.float32))
    np.savez(folder / "pair.npz", **{"l.act": rng.standard_normal((16, 32)).astype(np.float32),
                                     "l.weight": rng.standard_normal((8, 32)).astype(np.float32)})
    small = ["--model", "mlp", "--epochs", "1", "--limit", "60", "-j", "1"]
    _cli(["train", *small, "--formats", "fast", "-o", folder / "fast-run"], folder / "build")
    # a one-GEMM capture, as train writes them
    from flows.studies.captures import CaptureWriter

    with CaptureWriter(folder / "capture" / "fp32", {"model": "mlp", "format": "fp32",
                                                     "seed": 0, "batch_size": 8,
                                                     "dataset": "digits"}) as w:
        for phase, x, y in (("fwd", (8, 16), (16, 8)), ("bwd_data", (8, 8), (8, 16)),
                            ("wgrad", (16, 8), (8, 8))):
            w.add(1, "fc", phase, rng.standard_normal(x).astype(np.float32),
                  rng.standard_normal(y).astype(np.float32))


def _user_files(case: Path, command: Command) -> None:
    """A user's own files in the output folder, in a folder of its own there, and beside it."""
    out = case / command.out
    out.mkdir(parents=True, exist_ok=True)
    (out / "my-notes.txt").write_text("the user's notes")
    (out / "mine").mkdir(exist_ok=True)
    (out / "mine" / "data.csv").write_text("1,2,3\n")
    failed = out.parent / f"{out.name}.failed"
    failed.mkdir(exist_ok=True)
    (failed / "thesis.tex").write_text("precious")
    (case / "victim.txt").write_text("outside the output folder")


def _make_template(command: Command):
    def make(folder: Path) -> None:
        if command.reads:  # paths reads an area run's folder
            _cli(["area", *SMALL_ROUND, "-o", folder / command.out], folder / "build")
        else:
            code, _, err = _run(command, folder)
            assert code in command.ok, err
        _user_files(folder, command)
    return make


@pytest.fixture
def prepared(tmp_path):
    """``(command, case folder)``: a copy of the command's template (an earlier run's
    output and the user's files) in a fresh folder."""
    def prepare(command: Command) -> Path:
        if command.needs:
            _once("inputs", _make_inputs)
        template = _once(f"template-{command.name}", _make_template(command))
        case = tmp_path / "case"
        shutil.copytree(template, case, symlinks=True)
        return case
    return prepare


# --------------------------------------------------------------------------------------------
# checks


def _folders(command: Command, case: Path) -> list[Path]:
    return [case / command.out, *(case / e for e in command.extra)]


def _listed(folder: Path) -> tuple[dict[str, tuple[str, str | None]], set[str]]:
    """Every file the manifests under ``folder`` list (relative path → (sha256, run)) and the
    folders they list (:class:`flows.runs.DamagedManifest` for a damaged one)."""
    files, folders = {}, set()

    def walk(here: Path, prefix: str) -> None:
        m = runs.load_manifest(here)
        for name, entry in m.files.items():
            files[prefix + name] = entry
        for name in sorted(os.listdir(here)):
            if m.owns_folder(here, name):
                folders.add(prefix + name)
                walk(here / name, prefix + name + "/")

    walk(folder, "")
    return files, folders


def _assert_new(command: Command, case: Path, before: dict, old_runs: set) -> set:
    """The folders hold one complete new run; returns its run ids (one per folder)."""
    snap = snapshot(case)
    ids = set()
    for folder in _folders(command, case):
        rel = folder.relative_to(case).as_posix()
        files, _ = _listed(folder)
        for name, (sha, run) in files.items():
            entry = snap.get(f"{rel}/{name}")
            assert entry == ("file", sha), f"{rel}/{name} is not the file its manifest lists"
        runs_here = {run for name, (_, run) in files.items() if name not in command.store}
        assert len(runs_here) <= 1, f"{rel} mixes the files of runs {sorted(runs_here)}"
        assert not runs_here & old_runs, f"{rel} still holds the earlier run"
        ids |= runs_here
        for name in command.outputs if folder == case / command.out else ():
            assert name in files, f"{rel}/{name} is missing from the new output"
        # nothing of trainfab's that the manifests do not list (user files excepted)
        listed = {f"{rel}/{n}" for n in files} | {f"{rel}/{n}" for n in _listed(folder)[1]}
        for path, entry in snap.items():
            if not path.startswith(rel + "/") or path in before and before[path] == entry:
                continue
            if entry == ("dir",) or path.endswith(runs.MANIFEST):
                continue
            assert path in listed, f"{path} is in the folder but no manifest lists it"
    return ids


def _assert_no_leftovers(command: Command, case: Path) -> None:
    """No private folder, lock file or set-aside file beside or in the output folders (the
    caches under build/ keep their own locks)."""
    left = []
    for folder in _folders(command, case):
        near = list(folder.parent.glob(".*")) + list(folder.rglob(".*"))
        left += [p for p in near if p.name.endswith(".lock") or ".run-" in p.name
                 or p.name.startswith(".trainfab-old")]
    assert not left, f"left behind: {left}"


def _assert_message(err: str, code: int, strict: bool) -> None:
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    if code == 0:
        return
    messages = [line for line in lines if line.startswith(("trainfab: error", "trainfab: "
                                                            "interrupted", "trainfab: internal"))]
    assert len(messages) == 1, err
    assert not messages[0].startswith("trainfab: internal"), err
    if strict:
        assert len(lines) == 1, err


def _record(command: str, fault: str, held: bool) -> None:
    results = SHARED / "results"
    results.mkdir(parents=True, exist_ok=True)
    order = [list(BY_NAME).index(command), list(EXPECT).index(fault)]
    (results / f"{command}--{fault}.json").write_text(json.dumps(
        {"command": command, "fault": fault, "held": held, "order": order}))


# --------------------------------------------------------------------------------------------
# the faults


def _damage_manifest(folder: Path, how: str) -> None:
    path = folder / runs.MANIFEST
    path.unlink()
    if how == "manifest-corrupt":
        path.write_bytes(b"\x00garbage{")
    elif how == "manifest-folder":
        path.mkdir()
    else:
        path.write_text(json.dumps({"name": "another program's", "files": ["a", "b"]}))


def _read_only_wrap(folder: Path):
    if MOUNTS:
        script = ('mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" "$0" && '
                  'exec "$@"')
        return ("unshare", "-m", "--propagation", "private", "sh", "-c", script, str(folder))
    os.chmod(folder, 0o555)
    return ()


POINTS = {"sigint-stage": "stage:sigint", "sigterm-stage": "stage:sigterm",
          "sigterm-install": "install:1:sigterm", "sigint-install": "install:1:sigint",
          "sigint-manifest": "manifest:sigint", "enospc-install": "install:2:enospc"}


def _set_up_fault(command: Command, case: Path, fault: str) -> None:
    """What a fault changes before the run: a link where an output goes, a damaged manifest."""
    out = case / command.out
    if fault == "symlink":
        target = out / command.outputs[0]
        if os.path.lexists(target):
            target.unlink()
        target.symlink_to(os.path.relpath(case / "victim.txt", out))
    elif fault.startswith("manifest-"):
        _damage_manifest(out, fault)


def _fault_run(command: Command, case: Path, fault: str) -> list[tuple[int, str, str]]:
    out = case / command.out
    if fault in POINTS:
        return [_run(command, case, POINTS[fault])]
    if fault == "concurrent":
        procs = [_start(command, case), _start(command, case)]
        return [_finish(p) for p in procs]
    if fault == "read-only":
        try:
            return [_run(command, case, wrap=_read_only_wrap(out))]
        finally:
            os.chmod(out, 0o755)
    if fault == "sigint-async":
        proc = _start(command, case)
        deadline = time.monotonic() + TIMEOUT
        while proc.poll() is None and time.monotonic() < deadline:
            if list(out.parent.glob(f".{out.name}.run-*")):
                break
            time.sleep(0.01)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)  # as Ctrl-C reaches a terminal's job
        return [_finish(proc)]
    return [_run(command, case)]  # symlink, manifest-*: set up before


# --------------------------------------------------------------------------------------------
# the cases


def test_fault(case, prepared):
    name, fault = case
    command = BY_NAME[name]
    if fault == "full-disk" and not MOUNTS:
        pytest.skip("a full disk needs a private mount namespace (root and unshare)")
    held = False
    try:
        case_dir = prepared(command)
        if fault == "full-disk":
            _full_disk_case(command, case_dir)
        else:
            _case(command, case_dir, fault)
        held = True
    finally:
        _record(name, fault, held)


def _case(command: Command, case: Path, fault: str) -> None:
    _set_up_fault(command, case, fault)
    before = snapshot(case)
    outputs = [f.relative_to(case).as_posix() for f in _folders(command, case)]

    def under_outputs(path: str) -> bool:
        return any(path == o or path.startswith(o + "/") for o in outputs)

    def failed_folder(path: str) -> bool:
        return any(path.startswith(o + ".failed-") for o in outputs)

    listed_before = {}
    for folder in _folders(command, case):
        try:
            files, _ = _listed(folder) if folder.is_dir() else ({}, set())
        except runs.DamagedManifest:
            files = {}
        rel = folder.relative_to(case).as_posix()
        listed_before.update({f"{rel}/{n}": e for n, e in files.items()})
    old_runs = {run for _, run in listed_before.values()}
    # the user's: every file no manifest lists (the damaged manifest of (f) included)
    user = {p: e for p, e in before.items() if p not in listed_before and e[0] != "dir"
            and (under_outputs(p) or not p.startswith("build/"))  # build/: trainfab's caches
            and not (p.endswith(runs.MANIFEST) and fault not in ("manifest-corrupt",
                                                                "manifest-folder",
                                                                "manifest-foreign"))}
    results = _fault_run(command, case, fault)
    outcome, codes = EXPECT[fault]
    if command.reads:  # paths writes nothing: it runs whatever the folder's state
        codes = (0, 2) if fault == "symlink" else (0, 130) if fault == "sigint-async" else (0,)
    elif fault == "sigint-async":
        codes = (*command.ok, 130)
    for code, _, err in results:
        allowed = codes or (*command.ok, *((2,) if command.name == "sweep" else ()))
        assert code in allowed, f"exit {code}, expected {allowed}: {err}"
        _assert_message(err, code, strict=fault in BEFORE_WORK)
    after = snapshot(case)
    for path, entry in user.items():
        assert after.get(path) == entry, f"the user's {path} changed"
    _assert_no_leftovers(command, case)
    # outside the output folders: only caches under build/ and fresh failed-run folders
    for path in set(before) | set(after):
        if under_outputs(path) or failed_folder(path) or path.startswith("build/"):
            continue
        assert after.get(path) == before.get(path), f"{path} changed"
    changed = {p for p in set(before) | set(after)
               if under_outputs(p) and before.get(p) != after.get(p)}
    if command.reads or outcome == "old" or (outcome == "either" and not changed):
        assert not changed, f"the output folder changed: {sorted(changed)[:8]}"
    else:
        _assert_new(command, case, before, old_runs)


def _full_disk_case(command: Command, case: Path) -> None:
    """The output folder on a nearly full tmpfs: the run fails with one line naming the full
    disk (exit 2), and the folder is as it was."""
    src = case
    fs = case.parent / "fs"
    before = snapshot(src)
    argv = [a.format(out=fs / command.out, case=fs, inputs=SHARED / "inputs")
            for a in command.args]
    if command.driver:
        argv = ["--driver", command.driver, *argv]
    # the copy's pages (4 KB at least per file and folder) and 2 MB to spare
    size_kb = 2048 + sum(4 * max(1, -(-p.stat().st_size // 4096)) if p.is_file() else 4
                         for p in src.rglob("*"))
    proc = subprocess.run(["unshare", "-m", "--propagation", "private", sys.executable,
                           str(DRIVER), "full-disk", str(size_kb), str(src), str(fs), "--",
                           *argv],
                          cwd=ROOT, env=_env(fs), capture_output=True, text=True,
                          timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["rc"] in (2,) + ((0,) if command.reads else ()), doc["err"]
    _assert_message(doc["err"], doc["rc"], strict=False)
    after = {k: tuple(v) for k, v in doc["snapshot"].items() if k != "filler.bin"}
    assert {k: v for k, v in before.items() if not k.startswith("build")} == \
        {k: v for k, v in after.items() if not k.startswith("build") and ".failed-" not in k}

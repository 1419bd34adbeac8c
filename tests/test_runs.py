"""Runs that cannot collide or leave mixed output folders, caches that are checked before
reuse, and one-line errors for unusable paths, clocks and options.

Each test reproduces a way the flow could report wrong numbers or leave a folder whose files
disagree: concurrent ``area`` runs into one folder, failed and interrupted runs, a damaged
simulator build or bench tensor, a waveform written outside its run folder.
"""

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import flows
from flows import registry, runs
from flows.cli import main
from flows.eda.generate import to_verilog
from flows.eda.simulate import run_testbench

ROOT = Path(__file__).resolve().parent.parent
TRAINFAB = [sys.executable, "-m", "flows.cli"]
AREA_LINE = re.compile(r"^fpraker\.encoder: ([\d.]+) µm².*?, (\d+) flip-flops", re.M)


def run(args, capsys):
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def _cli(args, build: Path, **kwargs):
    env = {**os.environ, "TRAINFAB_BUILD": str(build)}
    return subprocess.Popen(TRAINFAB + args, cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs)


def _state(folder: Path) -> dict:
    """The run's files in ``folder`` (not the manifest of trainfab's files)."""
    return {p.name: p.read_bytes() for p in folder.iterdir()
            if p.is_file() and p.name != runs.MANIFEST}


def _assert_consistent(folder: Path, top: str) -> dict:
    """The folder holds exactly the files its area.json lists, and that report describes the
    Verilog beside it."""
    report = json.loads((folder / "area.json").read_text())
    verilog = (folder / f"{top}.v").read_bytes()
    assert hashlib.sha256(verilog).hexdigest() == report["verilog_sha256"]
    assert sorted(_state(folder)) == report["files"]
    return report


def test_concurrent_area_runs_into_one_folder_give_the_serial_numbers(tmp_path):
    """Two runs of different configurations into one folder at once each print the numbers of
    the same run done alone, and the folder ends up holding one complete run."""
    configs = {"1": ["--set", "lanes=1"], "3": ["--set", "lanes=3", "--set", "encoding=binary"]}
    serial = {}
    for key, sets in configs.items():
        proc = _cli(["area", "fpraker.encoder", *sets, "-o", str(tmp_path / f"alone{key}")],
                    tmp_path / "build")
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        serial[key] = AREA_LINE.search(out).groups()
        report = json.loads((tmp_path / f"alone{key}" / "area.json").read_text())
        assert serial[key] == (f"{report['area_um2']:.1f}", str(report["flip_flops"]))
    assert serial["1"] != serial["3"]

    shared = tmp_path / "shared"
    procs = {key: _cli(["area", "fpraker.encoder", *sets, "-o", str(shared)], tmp_path / "build")
             for key, sets in configs.items()}
    for key, proc in procs.items():
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        assert AREA_LINE.search(out).groups() == serial[key]
    report = _assert_consistent(shared, "fpraker_encoder")
    assert report["config"]["lanes"] in (1, 3)
    assert not list(tmp_path.glob(".shared.run-*"))


def test_failed_runs_leave_the_output_folder_as_it_was(tmp_path, capsys):
    out = tmp_path / "D"
    assert run(["area", "fpraker.encoder", "--set", "lanes=1", "-o", str(out)], capsys)[0] == 0
    before = _state(out)
    garbage = tmp_path / "garbage.lib"
    garbage.write_text("library (junk) { cell (INVX1) { area : 1; ")  # cut short
    code, _, err = run(["area", "fpraker.encoder", "--set", "lanes=2", "--liberty", str(garbage),
                        "-o", str(out)], capsys)
    # a yosys failure is one line: its own error message, and where its log went
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "yosys failed" in err and "ERROR" in err and "D.failed-" in err
    failed = list(tmp_path.glob("D.failed-*"))
    assert len(failed) == 1 and (failed[0] / "yosys.log").exists() and str(failed[0]) in err
    assert _state(out) == before
    code, _, err = run(["area", "fpraker.encoder", "--set", "lanes=2", "--clock-ns", "nan",
                        "-o", str(out)], capsys)
    assert code == 2 and "clock" in err
    assert _state(out) == before
    _assert_consistent(out, "fpraker_encoder")


#: runs the CLI with SIGINT's default disposition, whatever this process's is: a shell starts
#: a background job of a non-interactive shell with SIGINT ignored, and a program started with
#: SIGINT ignored keeps it ignored (Python then installs no KeyboardInterrupt handler)
WITH_DEFAULT_SIGINT = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
                       "os.execv(sys.executable, [sys.executable, '-m', 'flows.cli', "
                       "*sys.argv[1:]])")
#: a yosys that starts and then runs until it is stopped: a synthesis that is surely under way
#: when the test interrupts it
ENDLESS_YOSYS = """#!/bin/sh
[ "$1" = "-V" ] && { echo "Yosys (a stand-in that never finishes)"; exit 0; }
echo "synthesis started" > yosys.log
exec sleep 600
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_run_leaves_the_output_folder_as_it_was(sig, tmp_path, capsys):
    out = tmp_path / "D"
    assert run(["area", "fpraker.encoder", "--set", "lanes=1", "-o", str(out)], capsys)[0] == 0
    before = _state(out)
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "yosys").write_text(ENDLESS_YOSYS)
    (tools / "yosys").chmod(0o755)
    env = {**os.environ, "TRAINFAB_BUILD": str(tmp_path / "build"),
           "PATH": f"{tools}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.Popen([sys.executable, "-c", WITH_DEFAULT_SIGINT, "area", "fpraker.encoder",
                             "--set", "lanes=8", "-o", str(out)], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    while not list(tmp_path.glob(".D.run-*/yosys.log")):   # interrupt it during synthesis
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    assert _state(out) == before
    assert not list(tmp_path.glob(".D.run-*")) and not list(tmp_path.glob(".D.lock"))


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_while_files_move_into_place_completes_the_move(sig, tmp_path, monkeypatch):
    """The documented behaviour (flows.runs): the signal waits until every file is in place,
    then the run ends as interrupted; the folder holds the complete new set of files."""
    from flows.cli import _terminate

    final = tmp_path / "D"
    with runs.staged(final) as work:
        for name in ("a.txt", "b.txt", "c.txt"):
            (work / name).write_text(f"old {name}")
    real_replace, moved = os.replace, []

    def replace(src, dst):
        if not moved:  # the signal arrives while the first file moves into place
            signal.raise_signal(sig)
        moved.append(Path(dst).name)
        real_replace(src, dst)

    old = {signal.SIGINT: signal.signal(signal.SIGINT, signal.default_int_handler),
           signal.SIGTERM: signal.signal(signal.SIGTERM, _terminate)}
    try:
        monkeypatch.setattr(os, "replace", replace)
        with pytest.raises(KeyboardInterrupt):
            with runs.staged(final) as work:
                for name in ("a.txt", "b.txt", "c.txt"):
                    (work / name).write_text(f"new {name}")
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
    assert {n: (final / n).read_text() for n in ("a.txt", "b.txt", "c.txt")} == \
        {n: f"new {n}" for n in ("a.txt", "b.txt", "c.txt")}
    assert sorted(runs.read_manifest(final)) == ["a.txt", "b.txt", "c.txt"]
    assert not list(tmp_path.glob(".D.run-*"))


def test_private_folders_of_killed_runs_are_removed(tmp_path, capsys):
    """A run killed with SIGKILL cannot clean up; the next run into the folder removes its
    private folder once it is a day old (a younger one may belong to a run still going)."""
    old, young = tmp_path / ".D.run-killed", tmp_path / ".D.run-going"
    for folder, age in ((old, runs.ABANDONED_AFTER_S + 60), (young, 60)):
        folder.mkdir()
        (folder / "yosys.log").write_text("")
        os.utime(folder, (time.time() - age, time.time() - age))
    assert run(["generate", "fpraker.encoder", "--set", "lanes=1", "-o", str(tmp_path / "D")],
               capsys)[0] == 0
    assert not old.exists() and young.exists()


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "0", "-1", "0.0004", "1e9", "abc"])
def test_unusable_clock_periods_are_one_line_errors(value, capsys):
    code, _, err = run(["area", "fpraker.encoder", f"--clock-ns={value}"], capsys)
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and "--clock-ns" in err and "nanoseconds" in err


def test_paths_that_cannot_be_folders(tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    for args in (["area", "fpraker.encoder", "-o", str(blocker / "sub")],
                 ["generate", "fpraker.encoder", "-o", str(blocker)]):
        code, _, err = run(args, capsys)
        assert code == 2 and len(err.strip().splitlines()) == 1, err
        assert f"{blocker} is a file" in err or "it is a file" in err, err
    proc = _cli(["regress", "fpraker.encoder", "--set", "lanes=1"], blocker)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and f"{blocker} is a file, not a folder" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    code, _, err = run(["area", "fpraker.encoder", "--liberty", str(tmp_path)], capsys)
    assert code == 2 and "is a directory" in err


def test_a_damaged_simulator_build_is_rebuilt(tmp_path):
    unit = registry.get("fpraker.encoder")
    cfg = unit.make_config(lanes=2)
    first = run_testbench(unit, cfg, effort="quick", build_root=tmp_path)
    assert first.passed
    (vvp,) = tmp_path.glob("sim/fpraker.encoder/icarus-*/sim.vvp")
    size = vvp.stat().st_size
    with open(vvp, "r+b") as f:                      # truncated, as by a full disk or a kill
        f.truncate(size // 3)
    again = run_testbench(unit, cfg, effort="quick", build_root=tmp_path)
    assert again.passed and again.tests == first.tests
    assert vvp.stat().st_size == size


def test_waves_are_written_into_the_run_folder(tmp_path, capsys):
    unit = registry.get("fpraker.encoder")
    result = run_testbench(unit, unit.make_config(lanes=1), effort="quick", waves=True,
                           build_root=tmp_path)
    assert result.passed
    assert result.waves is not None and result.waves.parent == result.log.parent
    assert result.waves.stat().st_size > 0 and str(result.waves) in result.summary()
    # nothing dumped into the shared build folder
    assert not list(tmp_path.glob("sim/fpraker.encoder/icarus-*/*.fst"))


def test_old_run_folders_are_pruned(tmp_path):
    """All but the newest are deleted, except folders young enough that a run may still be
    writing into them."""
    now = time.time()
    for k in range(6):
        folder = tmp_path / f"run{k}"
        folder.mkdir()
        age = {5: 10, 4: 20}.get(k, 7200 + k)
        os.utime(folder, (now - age, now - age))
    assert runs.prune(tmp_path, keep=1) == 4
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run4", "run5"]


def test_all_configs_keeps_the_users_fields_and_says_what_it_leaves_out(capsys,
                                                                      passing_testbenches):
    code, out, err = run(["regress", "fpraker.pe", "--all-configs", "--set", "frac_bits=10"],
                         capsys)
    assert code == 0, err
    seen = [cfg for _, cfg in passing_testbenches]
    assert "not run: dmax=12: invalid with your settings" in out
    assert "frac_bits, which you set" in out
    assert seen and all(cfg.frac_bits == 10 for cfg in seen)
    assert len(set(seen)) == len(seen)                       # no job runs twice
    assert f"{len(seen)} passed, 0 failed" in out


def test_run_time_fields_are_not_hardware(capsys):
    code, _, err = run(["area", "gecko.compressor", "--set", "man_width=3"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "man_width is a run-time input of gecko.compressor" in err


def test_no_zero_width_signals_in_verilog():
    """dmax = 0 leaves the PE without lane shifters rather than with a ``[-1:0]`` amount."""
    unit = registry.get("fpraker.pe")
    text = to_verilog(unit, unit.make_config(lanes=1, dmax=0, frac_bits=14, int_bits=2))
    assert not re.search(r"\[-\d+:", text)


def test_a_damaged_bench_tensor_is_rewritten(tmp_path, monkeypatch):
    import flows.bench.gecko as gecko

    monkeypatch.setattr(flows, "BUILD", tmp_path)
    first = gecko.bench_gecko(n=5000)
    path = tmp_path / "bench" / "normal_5000.npy"
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.truncate(size - 100)
    again = gecko.bench_gecko(n=5000)
    assert path.stat().st_size == size and again["gecko_ratio"] == first["gecko_ratio"]


def test_a_second_whole_suite_run_waits_for_the_first(tmp_path):
    folder = tmp_path / "demo"
    with runs.exclusive(folder, "demo"):
        proc = subprocess.Popen(
            [sys.executable, "-c", "from flows.runs import exclusive\n"
             f"with exclusive({str(folder)!r}, 'demo'):\n    print('ran')"],
            cwd=ROOT, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(1.5)
        assert proc.poll() is None                           # still waiting
    out, err = proc.communicate(timeout=60)
    assert "waiting for another demo run" in err and out.strip() == "ran"


def test_the_suite_writes_into_its_own_build_folder():
    expected = os.environ.get("TRAINFAB_TEST_BUILD") or ROOT / "build" / "tests"
    assert flows.BUILD == Path(expected).resolve()


# --- files of the user's are never removed; the folder says what trainfab wrote


def test_a_users_file_of_an_output_name_stops_the_run_before_it_starts(tmp_path, capsys):
    """A file of the user's where the run writes one (area.json here) is never replaced: the
    run stops at once (no synthesis) with one line naming it, and every file stays."""
    out = tmp_path / "D"
    out.mkdir()
    (out / "thesis.tex").write_text("my thesis")
    (out / "area.json").write_text('{"files": ["thesis.tex", "../outside.txt"]}')
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    code, text, err = run(["area", "fpraker.encoder", "--set", "lanes=1", "-o", str(out)],
                          capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"{out / 'area.json'} is a file trainfab did not write" in err
    assert "synthesizing" not in text
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert not list(tmp_path.glob("D.failed*"))


def test_an_edited_report_is_not_overwritten(tmp_path, capsys):
    """A file trainfab wrote and the user edited since is the user's now."""
    out = tmp_path / "D"
    assert run(["generate", "fpraker.encoder", "--set", "lanes=1", "-o", str(out)],
               capsys)[0] == 0
    (out / "fpraker_encoder.json").write_text("my notes")
    code, _, err = run(["generate", "fpraker.encoder", "--set", "lanes=2", "-o", str(out)],
                       capsys)
    assert code == 2 and "changed since it wrote it" in err, err
    assert (out / "fpraker_encoder.json").read_text() == "my notes"


def test_stale_files_are_removed_only_when_trainfab_wrote_them_unchanged(tmp_path):
    final = tmp_path / "D"
    with runs.staged(final) as work:
        for name in ("own.log", "edited.log", "linked.log"):
            (work / name).write_text(f"{name} as written")
        (work / "sub").mkdir()
        (work / "sub" / "own.txt").write_text("in a folder")
    (final / "edited.log").write_text("the user's notes")              # changed since
    (tmp_path / "elsewhere.log").write_text("linked.log as written")     # same content …
    (final / "linked.log").unlink()
    (final / "linked.log").symlink_to(tmp_path / "elsewhere.log")        # … behind a link
    (final / "user.log").write_text("never written by trainfab")
    with runs.staged(final) as work:  # a run that writes other files: the old ones are stale
        (work / "new.log").write_text("new")
    assert not (final / "own.log").exists() and not (final / "sub").exists()
    assert (final / "edited.log").read_text() == "the user's notes"
    assert (final / "linked.log").is_symlink()
    assert (tmp_path / "elsewhere.log").read_text() == "linked.log as written"
    assert (final / "user.log").exists() and (final / "new.log").exists()
    assert set(runs.read_manifest(final)) == {"new.log"}


def test_a_stale_folder_keeps_the_users_files(tmp_path):
    final = tmp_path / "D"
    with runs.staged(final) as work:
        (work / "old").mkdir()
        (work / "old" / "a.txt").write_text("a")
    (final / "old" / "mine.txt").write_text("mine")
    with runs.staged(final) as work:
        (work / "b.txt").write_text("b")
    assert sorted(p.name for p in (final / "old").iterdir()) == ["mine.txt"]


def test_a_collection_folder_keeps_the_other_runs_files(tmp_path):
    final = tmp_path / "D"
    for name in ("a", "b"):
        with runs.staged(final, collection=True) as work:
            (work / f"{name}.md").write_text(name)
    assert set(runs.read_manifest(final)) == {"a.md", "b.md"}


def test_a_forged_manifest_cannot_reach_outside_the_folder(tmp_path):
    final = tmp_path / "D"
    final.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    digest = hashlib.sha256(b"keep me").hexdigest()
    (final / runs.MANIFEST).write_text(json.dumps({"files": {"../victim.txt": digest,
                                                             str(victim): digest}}))
    assert runs.remove_stale(final, ["../victim.txt", str(victim)]) == []
    assert victim.read_text() == "keep me"


# --- lock files


def test_runs_leave_no_lock_files(tmp_path, capsys):
    for args in (["generate", "fpraker.encoder", "--set", "lanes=1", "-o", str(tmp_path / "G")],
                 ["area", "fpraker.encoder", "--set", "lanes=1", "-o", str(tmp_path / "A")]):
        assert run(args, capsys)[0] == 0
    with runs.exclusive(tmp_path / "R", "report"):
        assert (tmp_path / ".R.run.lock").exists()
    assert not list(tmp_path.glob(".*.lock")), list(tmp_path.glob(".*"))


def test_a_removed_lock_file_still_excludes(tmp_path):
    """A run waiting on a lock file that its holder then removes locks the file there now, so
    two runs never hold the lock at once."""
    lock = tmp_path / ".D.lock"
    holder = runs.locked(lock)
    holder.__enter__()
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys\nfrom flows.runs import locked\n"
         f"with locked({str(lock)!r}, waiting='waiting'):\n"
         "    print('held', flush=True)\n    sys.stdin.read()\n"],
        cwd=ROOT, text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE)
    try:
        assert proc.stderr.readline().strip() == "waiting"
        holder.__exit__(None, None, None)                     # removes the file, then unlocks
        assert proc.stdout.readline().strip() == "held"
        with pytest.raises(flows.FlowError, match="busy"):
            with runs.locked(lock, busy="busy"):
                pass
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
    assert proc.returncode == 0 and not lock.exists()


# --- unusable folders and full disks: one line naming the output folder, the folder unchanged


def test_symbolic_link_loops_are_one_line_errors(tmp_path, capsys):
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    for target in (loop, loop / "sub"):
        code, _, err = run(["generate", "fpraker.encoder", "-o", str(target)], capsys)
        assert code == 2 and len(err.strip().splitlines()) == 1, err
        assert "loop of symbolic links" in err and str(loop) in err, err
    env = {**os.environ, "TRAINFAB_BUILD": str(loop)}
    proc = subprocess.run(TRAINFAB + ["--help"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0 and "usage: trainfab" in proc.stdout, proc.stderr
    proc = subprocess.run(TRAINFAB + ["generate", "fpraker.encoder"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert f"build folder {loop}" in proc.stderr and "loop of symbolic links" in proc.stderr


def _fill_disk_in_private_folders(monkeypatch):
    """Writes into a run's private folder fail as on a full disk."""
    import errno
    import pathlib

    real = pathlib.Path.write_text

    def write_text(self, *args, **kwargs):
        if ".run-" in str(self):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "write_text", write_text)


def test_a_full_disk_during_generate_names_the_folder_and_keeps_the_old_files(
        tmp_path, capsys, monkeypatch):
    out = tmp_path / "D"
    assert run(["generate", "fpraker.encoder", "--set", "lanes=1", "-o", str(out)], capsys)[0] == 0
    before = _state(out)
    _fill_disk_in_private_folders(monkeypatch)
    code, _, err = run(["generate", "fpraker.encoder", "--set", "lanes=2", "-o", str(out)], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"no space left on the device of output folder {out}" in err and ".run-" not in err
    assert _state(out) == before
    assert not list(tmp_path.glob(".D.run-*")) and not (tmp_path / "D.failed").exists()


def _yosys_cut_short(monkeypatch):
    """yosys runs but its statistics file is cut short (as when the disk fills up)."""
    import flows.eda.synth as synth

    def fake_run(cmd, log, what, timeout=3600):
        folder = log.parent
        (folder / "yosys.log").write_text("Chip area for module '\\\\fpraker_encoder': 1.0\n")
        (folder / "stat_generic.json").write_text('{"modules": {"\\\\fpraker_encoder": {"num')
        (folder / "stat_mapped.json").write_text("")
        log.write_text("")
        return ""

    monkeypatch.setattr(synth, "_run", fake_run)


def test_a_full_disk_during_area_names_the_folder_and_keeps_the_old_files(
        tmp_path, capsys, monkeypatch):
    out = tmp_path / "D"
    assert run(["area", "fpraker.encoder", "--set", "lanes=1", "-o", str(out)], capsys)[0] == 0
    before = _state(out)
    _yosys_cut_short(monkeypatch)
    monkeypatch.setattr(runs, "no_space", lambda folder: True)
    code, _, err = run(["area", "fpraker.encoder", "--set", "lanes=2", "-o", str(out)], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"no space left on the device of output folder {out}" in err, err
    assert _state(out) == before
    # with space left, a cut file is yosys' fault: named, with where its log is
    monkeypatch.setattr(runs, "no_space", lambda folder: False)
    code, _, err = run(["area", "fpraker.encoder", "--set", "lanes=2", "-o", str(out)], capsys)
    assert code == 2 and "yosys wrote no readable stat_generic.json" in err, err
    assert "internal error" not in err and _state(out) == before


def test_an_output_folder_that_cannot_be_written_is_named(tmp_path, capsys, monkeypatch):
    """A read-only or immutable folder: one line naming it, before anything runs (not the
    private folder's name, nor a file the run would not write)."""
    out = tmp_path / "D"
    assert run(["area", "fpraker.encoder", "--set", "lanes=1", "-o", str(out)], capsys)[0] == 0
    before = _state(out)
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: Path(p) != out and
                        real_access(p, mode, **kw))
    for args in (["area", "fpraker.encoder", "--set", "lanes=2"],
                 ["generate", "fpraker.encoder"], ["study", "dispatch"],
                 ["tensor-stats", str(ROOT / "tests" / "conftest.py")]):
        code, out_text, err = run(args + ["-o", str(out)], capsys)
        assert code == 2 and err.strip() == f"trainfab: error: output folder {out} is not " \
            "writable", err
        assert "synthesizing" not in out_text or args[0] == "area"
    assert _state(out) == before


def test_an_output_folder_on_another_file_system_is_written(tmp_path):
    """An output folder that is a mount point of its own: renames into it fail with EXDEV, and
    the files are copied in instead (each still replaced atomically)."""
    import errno

    final = tmp_path / "D"
    real = os.replace

    def replace(src, dst):
        if ".run-" in str(src):
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        return real(src, dst)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(os, "replace", replace)
        with runs.staged(final) as work:
            (work / "a.txt").write_text("a")
    assert (final / "a.txt").read_text() == "a" and runs.read_manifest(final) == {
        "a.txt": hashlib.sha256(b"a").hexdigest()}
    assert not list(tmp_path.glob(".D.run-*"))


def test_an_empty_liberty_is_refused_before_synthesis(tmp_path, capsys):
    empty = tmp_path / "empty.lib"
    empty.write_text("")
    code, _, err = run(["area", "fpraker.encoder", "--liberty", str(empty),
                        "-o", str(tmp_path / "D")], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"liberty file {empty} defines no cells" in err
    assert not (tmp_path / "D.failed").exists() and not (tmp_path / "D").exists()

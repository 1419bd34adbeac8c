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
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}


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
    garbage.write_text("library (junk) { cell (")
    code, _, err = run(["area", "fpraker.encoder", "--set", "lanes=2", "--liberty", str(garbage),
                        "-o", str(out)], capsys)
    # a yosys failure is one line: its own error message, and where its log went
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "yosys failed" in err and "ERROR" in err and "D.failed" in err
    assert (tmp_path / "D.failed" / "yosys.log").exists()
    assert _state(out) == before
    code, _, err = run(["area", "fpraker.encoder", "--set", "lanes=2", "--clock-ns", "nan",
                        "-o", str(out)], capsys)
    assert code == 2 and "clock" in err
    assert _state(out) == before
    _assert_consistent(out, "fpraker_encoder")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_run_leaves_the_output_folder_as_it_was(sig, tmp_path, capsys):
    out = tmp_path / "D"
    assert run(["area", "fpraker.encoder", "--set", "lanes=1", "-o", str(out)], capsys)[0] == 0
    before = _state(out)
    proc = _cli(["area", "fpraker.encoder", "--set", "lanes=8", "-o", str(out)], tmp_path / "build")
    deadline = time.monotonic() + 120
    while not list(tmp_path.glob(".D.run-*/yosys.log")):   # interrupt it during synthesis
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    assert _state(out) == before
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


def test_all_configs_keeps_the_users_fields_and_says_what_it_leaves_out(capsys, monkeypatch):
    import flows.eda.simulate

    seen = []

    class Passed:
        passed, tests, failed = True, 1, 0

        def summary(self):
            return "PASS"

    monkeypatch.setattr(flows.eda.simulate, "run_testbench",
                        lambda unit, cfg, **kw: (seen.append(cfg), Passed())[1])
    code, out, err = run(["regress", "fpraker.pe", "--all-configs", "--set", "frac_bits=10"],
                         capsys)
    assert code == 0, err
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
    import flows.families.gecko as gecko

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

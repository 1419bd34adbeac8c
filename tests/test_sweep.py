"""``trainfab sweep`` (flows.sweep): serial, local-process and Dask runs give byte-identical
tables; resume runs only the missing points; Ctrl-C keeps finished points; failed points are
recorded and retried; plots are PNG files; bad grids are one-line errors before anything runs.

Real synthesis uses fpraker.encoder at 1–2 lanes (about a second a point); the error and
regression-outcome paths use stand-ins for ``flows.eda.synth.area`` / ``run_testbench``.
"""

import argparse
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import flows
from flows import FlowError, registry, sweep
from flows.cli import main as cli_main
from flows.eda.generate import sha256, to_verilog
from flows.eda.simulate import TbResult

ROOT = Path(__file__).resolve().parent.parent
GRID = ["fpraker.encoder", "--grid", "lanes=1,2", "--grid", "clock_ns=5,10"]
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(autouse=True)
def build(tmp_path, monkeypatch):
    """Default output folders go under tmp_path, never the repository's build/."""
    folder = tmp_path / "build"
    monkeypatch.setattr(flows, "BUILD", folder)
    monkeypatch.setenv("TRAINFAB_BUILD", str(folder))
    return folder


def args_of(argv):
    p = argparse.ArgumentParser()
    sweep.add_arguments(p)
    return p.parse_args(argv)


def run(argv, capsys):
    code = cli_main(["sweep", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def tables(folder: Path) -> tuple[bytes, bytes]:
    return (folder / "sweep.csv").read_bytes(), (folder / "sweep.json").read_bytes()


@pytest.fixture(scope="module")
def serial(tmp_path_factory):
    """The 4-point sweep run serially (-j 1) in this process, with real yosys/OpenSTA."""
    out = tmp_path_factory.mktemp("serial")
    argv = GRID + ["-j", "1", "-o", str(out)]
    code = cli_main(["sweep", *argv])
    assert code == 0
    return out


def test_serial_table_has_one_row_per_point_in_grid_order(serial):
    rows = (serial / "sweep.csv").read_text().splitlines()
    assert rows[0] == ("lanes,clock_ns,area_um2,area_ge,cells,flip_flops,transistors_estimate,"
                       "critical_path_ns,fmax_mhz,error")
    assert [r.split(",")[:2] for r in rows[1:]] == [["1", "5.0"], ["1", "10.0"], ["2", "5.0"],
                                                    ["2", "10.0"]]
    doc = json.loads((serial / "sweep.json").read_text())
    assert doc["grid"] == {"lanes": [1, 2], "clock_ns": [5.0, 10.0]}
    assert doc["columns"] == rows[0].split(",")
    one, two = doc["rows"][0], doc["rows"][2]
    assert two["area_um2"] > one["area_um2"] > 0 and two["flip_flops"] > one["flip_flops"]
    assert all(r["error"] == "" and r["fmax_mhz"] > 0 for r in doc["rows"])
    # wall-clock times stay out of the tables; results.jsonl has them, one line per point
    assert "seconds" not in (serial / "sweep.json").read_text()
    lines = (serial / "results.jsonl").read_text().splitlines()
    assert len(lines) == 4 and all("seconds" in json.loads(line) for line in lines)
    # every point synthesized in its own folder, named by its hash
    for r in doc["rows"]:
        report = json.loads((serial / "points" / r["hash"] / "area.json").read_text())
        assert report["area_um2"] == r["area_um2"] and report["clock_ns"] == r["clock_ns"]
        assert report["verilog_sha256"] == r["verilog_sha256"]


def test_plots_are_png_files(serial):
    for col in sweep.MEASURES["area"] + sweep.MEASURES["timing"]:
        for field in ("lanes", "clock_ns"):
            path = serial / f"{col}_vs_{field}.png"
            assert path.read_bytes()[:8] == PNG, path
            assert f"({path.name})" in (serial / "sweep.md").read_text()
    front = serial / sweep.FRONT_PLOT
    assert front.read_bytes()[:8] == PNG and f"({front.name})" in (serial / "sweep.md").read_text()


def test_the_area_fmax_front_keeps_the_points_nothing_beats():
    rows = [{"area_um2": 10.0, "fmax_mhz": 100.0}, {"area_um2": 12.0, "fmax_mhz": 90.0},
            {"area_um2": 20.0, "fmax_mhz": 200.0}, {"area_um2": 30.0, "fmax_mhz": 190.0},
            {"area_um2": 20.0, "fmax_mhz": 200.0}, {"area_um2": None, "fmax_mhz": 500.0},
            {"area_um2": 25.0, "fmax_mhz": 250.0}]
    front = [(r["area_um2"], r["fmax_mhz"]) for r in sweep.front_points(rows)]
    # (12, 90) is beaten by (10, 100), (30, 190) by (20, 200); equal points both stay; the
    # point without an area (a failed synthesis) is not measured
    assert front == [(10.0, 100.0), (20.0, 200.0), (20.0, 200.0), (25.0, 250.0)]


def test_dask_cluster_gives_the_serial_tables_byte_for_byte(serial, tmp_path, capsys):
    from dask.distributed import LocalCluster

    out = tmp_path / "dask"
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster:
        code, text, _ = run(GRID + ["--scheduler", cluster.scheduler_address, "-o", str(out)],
                            capsys)
    assert code == 0, text
    assert "4 to run on the Dask cluster" in text and "(2 workers, 2 threads)" in text
    assert tables(out) == tables(serial)
    hosts = {json.loads(line)["pid"] for line in (out / "results.jsonl").read_text().splitlines()}
    assert os.getpid() not in hosts  # computed by the workers, not here


@pytest.fixture
def no_plots(monkeypatch):
    """Tests of the run logic skip drawing (about 0.15 s a plot); test_plots_are_png_files
    covers the plots."""
    monkeypatch.setattr(sweep.outputs, "write_plots", lambda plan, rows, out: [])


def test_resume_runs_only_the_missing_points(serial, tmp_path, capsys, no_plots):
    out = tmp_path / "resume"
    shutil.copytree(serial, out)
    results = out / "results.jsonl"
    lines = results.read_text().splitlines(keepends=True)
    # one point lost, and a last line cut short by a killed run
    results.write_text("".join(lines[:1] + lines[2:]) + '{"hash": "6aa2')
    calls = []
    real = sweep.compute_point

    def counted(task):
        calls.append(task["hash"])
        return real(task)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(sweep.points, "compute_point", counted)
        code, text, _ = run(GRID + ["-j", "2", "-o", str(out)], capsys)
    assert code == 0, text
    assert calls == [json.loads(lines[1])["hash"]]
    assert "4 points, 3 already done, 1 to run" in text
    assert [line.split("]")[0] for line in text.splitlines() if line.startswith("[")] == ["[4/4"]
    assert tables(out) == tables(serial)
    assert len(results.read_text().splitlines()) == 4  # the cut line is gone, the new one whole

    # two points lost: they run on two local worker processes, same tables again
    lines = results.read_text().splitlines(keepends=True)
    results.write_text("".join(lines[:2]))
    code, text, _ = run(GRID + ["-j", "2", "-o", str(out)], capsys)
    assert code == 0 and "2 already done, 2 to run on 2 local processes" in text
    assert tables(out) == tables(serial)
    # nothing left to do
    code, text, _ = run(GRID + ["-o", str(out)], capsys)
    assert code == 0 and "4 already done, 0 to run" in text
    assert tables(out) == tables(serial)


def test_ctrl_c_exits_130_and_keeps_finished_points(tmp_path):
    out = tmp_path / "interrupted"
    # Python's own Ctrl-C handler even where this test runs with SIGINT ignored (a background job)
    script = ("import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
              "from flows.cli import main; sys.exit(main(['sweep', *sys.argv[1:]]))")
    cmd = [sys.executable, "-c", script, "fpraker.encoder", "--grid", "lanes=1,2,3,4",
           "--grid", "encoding=csd,binary", "-j", "2", "-o", str(out)]
    proc = subprocess.Popen(cmd, cwd=ROOT, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    progress = []
    for line in proc.stdout:
        if line.startswith("["):
            progress.append(line)
            break
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
    rest, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err
    assert "interrupted" in err
    progress += [line for line in rest.splitlines() if line.startswith("[")]
    records = (out / "results.jsonl").read_text().splitlines()
    # a point is recorded before its progress line is printed: Ctrl-C between the two (both
    # workers finishing together) leaves one more record than lines
    assert len(progress) >= 1 and len(progress) <= len(records) <= len(progress) + 1
    # the run stopped: the grid's other points were not all measured (whatever the load, the
    # seven points left take far longer than the interrupt)
    assert len(records) < 8
    recorded = [json.loads(r)["point"] for r in records]
    for line in progress:
        shown = line.split("] ", 1)[1].split(":", 1)[0]
        point = dict(kv.split("=", 1) for kv in shown.split(","))
        assert any({k: str(v) for k, v in rec.items()} == point for rec in recorded), line
    assert not (out / "sweep.csv").exists()


def _fake_area(fail_lanes):
    def area(unit, cfg, *, liberty, clock_ns, outdir, **kw):
        if cfg.lanes in fail_lanes:
            raise FlowError(f"yosys failed (exit 1)\nsecond line lanes={cfg.lanes}")
        return {"area_um2": 100.0 * cfg.lanes, "area_ge": 4.2 * cfg.lanes, "cells": cfg.lanes,
                "flip_flops": 2, "transistors_estimate": 10, "critical_path_ns": clock_ns / 2,
                "fmax_mhz": 2000 / clock_ns, "verilog_sha256": "0" * 64, "tools": {}}
    return area


def test_failed_point_is_recorded_then_retried(tmp_path, capsys, monkeypatch, build, no_plots):
    import flows.eda.synth

    monkeypatch.setattr(flows.eda.synth, "area", _fake_area({2}))
    argv = ["fpraker.encoder", "--grid", "lanes=1,2,3", "--measure", "timing", "-j", "1"]
    code, text, _ = run(argv, capsys)
    assert code == 1
    assert "[2/3] lanes=2: ERROR yosys failed (exit 1) (" in text
    assert "1 of 3 points failed" in text
    (out,) = (build / "sweep").iterdir()  # the default folder: build/sweep/<unit>-<hash>
    assert out.name.startswith("fpraker.encoder-")
    rows = (out / "sweep.csv").read_text().splitlines()
    assert rows == ["lanes,critical_path_ns,fmax_mhz,error", "1,5.0,200.0,",
                    "2,,,yosys failed (exit 1)", "3,5.0,200.0,"]
    assert "1 points failed" in (out / "sweep.md").read_text()

    monkeypatch.setattr(flows.eda.synth, "area", _fake_area(set()))
    code, text, _ = run(argv, capsys)
    assert code == 0
    assert "3 points, 2 already done, 1 to run" in text and "[3/3] lanes=2: fmax 200.0 MHz" in text
    assert (out / "sweep.csv").read_text().splitlines()[2] == "2,5.0,200.0,"
    # --fresh forgets the finished points
    code, text, _ = run(argv + ["--fresh"], capsys)
    assert code == 0 and "3 points, 0 already done, 3 to run" in text
    assert len((out / "results.jsonl").read_text().splitlines()) == 3


def test_regress_only_may_sweep_a_run_time_field(tmp_path, capsys, monkeypatch):
    import flows.eda.simulate

    def fake_run(unit, cfg, *, seed, effort, build_root, **kw):
        assert effort == "quick" and seed == 3 and str(build_root).startswith(str(tmp_path))
        failed = 1 if cfg.man_width == 3 else 0
        return TbResult(unit.name, {}, "icarus", seed, 8, failed, 0.1, Path("sim.log"),
                        Path("results.xml"))

    monkeypatch.setattr(flows.eda.simulate, "run_testbench", fake_run)
    code, text, _ = run(["gecko.compressor", "--grid", "man_width=3,7", "--measure", "regress",
                         "--seed", "3", "-j", "1", "-o", str(tmp_path / "o")], capsys)
    assert code == 1  # a failing regression
    assert "[1/2] man_width=3: regress FAIL 7/8" in text and "1 of 2 points failed their" in text
    assert (tmp_path / "o" / "sweep.csv").read_text() == (
        "man_width,passed,tests,failed,error\n3,false,8,1,\n7,true,8,0,\n")
    assert not list((tmp_path / "o").glob("*.png"))


def test_real_regression_points(tmp_path, capsys):
    code, text, _ = run(["fpraker.encoder", "--grid", "lanes=1,3", "--measure", "regress",
                         "-j", "2", "-o", str(tmp_path)], capsys)
    assert code == 0, text
    rows = json.loads((tmp_path / "sweep.json").read_text())["rows"]
    assert [(r["lanes"], r["passed"], r["failed"]) for r in rows] == [(1, True, 0), (3, True, 0)]
    assert all(r["tests"] > 0 for r in rows)
    assert json.loads((tmp_path / "sweep.json").read_text())["effort"] == "quick"


def _refused(argv, match):
    with pytest.raises(FlowError, match=match) as e:
        sweep.cmd_sweep(args_of(argv + ["-o", "/nonexistent/never-created"]))
    assert "\n" not in str(e.value)
    return str(e.value)


@pytest.mark.parametrize("argv, match", [
    (["fpraker.encoder"], "nothing to sweep: give at least one --grid"),
    (["fpraker.encoder", "--grid", "lanes="], "--grid lanes: no values"),
    (["fpraker.encoder", "--grid", "lanes=1,,2"], "empty value"),
    (["fpraker.encoder", "--grid", "width=1,2"],
     r"--grid width: unknown field for fpraker.encoder; fields: lanes, encoding \(and clock_ns"),
    (["fpraker.encoder", "--grid", "lanes=0,1"],
     r"grid point lanes=0 is invalid: EncoderConfig.lanes = 0 is invalid"),
    (["fpraker.encoder", "--grid", "lanes=1", "--grid", "encoding=csd,bcd"],
     "grid point lanes=1,encoding=bcd is invalid"),
    (["fpraker.encoder", "--grid", "lanes=1,2,1"], "--grid lanes: value 1 is listed twice"),
    (["fpraker.encoder", "--grid", "clock_ns=5,5.0"], "--grid clock_ns: value 5 is listed twice"),
    (["fpraker.encoder", "--grid", "lanes=1", "--grid", "lanes=2"], "given twice"),
    (["fpraker.encoder", "--grid", "lanes=1,2", "-s", "lanes=3"], "also given with --set"),
    (["fpraker.encoder", "--grid", "clock_ns=0,5"], "'0' is not a clock period"),
    (["fpraker.encoder", "--grid", "clock_ns=fast"], "'fast' is not a clock period"),
    (["fpraker.encoder", "--grid", "clock_ns=5,10", "--measure", "regress"],
     "clock constraint only matters for the area and timing"),
    (["fpraker.encoder", "--grid", "lanes=1,2", "--measure", "area,power"],
     "unknown measure 'power'"),
    (["fpraker.encoder", "--grid", "lanes=" + ",".join(map(str, range(1, 65))), "--grid",
      "encoding=csd,binary", "--grid", "clock_ns=" + ",".join(str(c) for c in range(1, 1000))],
     r"the grid has 127,872 points \(64 × 2 × 999\); a sweep runs at most 100,000"),
    (["fpraker.encoder", "--grid", "lanes=1,2", "-j", "2", "--scheduler", "tcp://x:1"],
     "with --scheduler"),
    (["gecko.compressor", "--grid", "lanes=4,8", "-s", "sign_en=false"],
     "--set sign_en: sign_en is a run-time input of gecko.compressor"),
    (["gecko.compressor", "--grid", "man_width=3,7,23", "--measure", "area,regress"],
     ("field man_width does not change the hardware of gecko.compressor: every value gives "
      "the same Verilog; run-time fields cannot be swept")),
])
def test_refusals_are_one_line_errors_before_anything_runs(argv, match, build):
    _refused(argv, match)
    assert not build.exists() and not Path("/nonexistent").exists()


def test_run_time_fields_are_found_from_the_verilog(monkeypatch):
    """Without the unit's own list of run-time inputs, the Verilog tells: gecko's man_width and
    sign_en give byte-identical Verilog at every value (checked here directly too), lanes does
    not."""
    unit = registry.get("gecko.compressor")
    fields = {f.name: getattr(unit, f.name) for f in dataclasses.fields(unit)}
    plain = type("PlainUnit", (type(unit),), {"runtime_fields": property(lambda self: ())})(
        **fields)
    monkeypatch.setattr(registry, "get", lambda name: plain)
    base = unit.make_config(lanes=4)
    texts = {sha256(to_verilog(unit, dataclasses.replace(base, man_width=m, sign_en=s)))
             for m, s in ((3, True), (7, False), (23, True))}
    assert len(texts) == 1
    message = _refused(["gecko.compressor", "--grid", "lanes=4,8", "--grid", "man_width=3,7"],
                       "field man_width does not change the hardware of gecko.compressor")
    assert "lanes" not in message
    plan = sweep.plan_sweep(args_of(["gecko.compressor", "--grid", "man_width=3,7",
                                     "--measure", "regress"]))
    assert [p.values for p in plan.points] == [{"man_width": 3}, {"man_width": 7}]


def test_grid_values_parse_like_set_values():
    assert sweep.parse_grid(["a=1,2.5,true,csd,\"x,y\""]) == {"a": [1, 2.5, True, "csd", "x,y"]}
    assert sweep.parse_grid(["clock_ns=5,2.5"]) == {"clock_ns": [5.0, 2.5]}
    assert sweep.split_values("[1,2],3") == ["[1,2]", "3"]


def test_points_hash_the_configuration_clock_and_measures():
    a = sweep.plan_sweep(args_of(GRID))
    b = sweep.plan_sweep(args_of(GRID + ["--measure", "area"]))
    c = sweep.plan_sweep(args_of(["fpraker.encoder", "--grid", "clock_ns=5,10", "--grid",
                                  "lanes=1,2"]))
    assert len({p.hash for p in a.points}) == 4
    assert not {p.hash for p in a.points} & {p.hash for p in b.points}
    # the same points listed in another order are the same points (resume across orders)
    assert {p.hash for p in a.points} == {p.hash for p in c.points}
    assert a.spec_hash != c.spec_hash  # but another sweep (its own default folder)


@pytest.mark.parametrize("argv, needle", [
    (["-j", "0"], "argument --jobs/-j: '0' is not an integer from 1 to 4,096"),
    (["--seed", "-1"], "argument --seed: '-1' is not an integer from 0 to 4,294,967,295"),
])
def test_numeric_options_are_bounded(argv, needle, capsys, build):
    code, _, err = run(["fpraker.encoder", "--grid", "lanes=1,2", *argv], capsys)
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err
    assert not build.exists()


def test_an_unreachable_scheduler_is_one_line_and_leaves_nothing(tmp_path):
    """The client that could not connect is closed at once: no traceback from its destructor
    after the error (which came with a 20 s wait)."""
    out = tmp_path / "o"
    proc = subprocess.run([sys.executable, "-m", "flows.cli", "sweep", "fpraker.encoder",
                           "--grid", "lanes=1,2", "--scheduler", "notanaddress", "-o", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "trainfab: error: --scheduler notanaddress: cannot connect to a Dask scheduler "
        "(ValueError: missing port number in address 'notanaddress')"], proc.stderr
    assert not out.exists()

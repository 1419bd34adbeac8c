"""flows.progress: bars, phase lines, elapsed times and the last run's time — with fake
streams and clocks (nothing here depends on wall time or load)."""

import io
import json
import os
import re
import shutil

import pytest

from flows import progress
from flows.eda import synth
from flows.studies.train import run as train_run


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self):
        return True


class Clock:
    def __init__(self, t=1000.0):
        self.t = t

    def __call__(self):
        return self.t


@pytest.mark.parametrize("seconds, text", [(0, "0 s"), (12.4, "12 s"), (89, "89 s"),
                                           (90, "2 min"), (31 * 60 + 10, "31 min"),
                                           (3600, "1 h"), (3900, "1 h 5 min"), (-3, "0 s")])
def test_elapsed(seconds, text):
    assert progress.elapsed(seconds) == text


def test_bars_are_silent_off_a_terminal():
    out = io.StringIO()
    with progress.bar(3, "report", "units", stream=out) as b:
        b.update()
        b.set_postfix("x")
        b.set(2.5, "y")
    assert out.getvalue() == "" and not progress.bars_shown()
    out = Terminal()
    with progress.bar(3, "report", "units", stream=out, enabled=False) as b:
        b.update()
    assert out.getvalue() == ""


def test_bars_on_a_terminal_count_and_close(monkeypatch):
    monkeypatch.setattr(shutil, "get_terminal_size",
                        lambda fallback=(100, 24): os.terminal_size((0, 24)))
    assert progress.columns() == progress.DEFAULT_COLUMNS   # a pty that reports no width
    out = Terminal()
    b = progress.bar(4, "report", "units", stream=out)
    assert progress.bars_shown()
    b.update()
    b.set_postfix("fpraker.tile")
    text = out.getvalue()
    assert "report" in text and "1/4 units" in text and "fpraker.tile" in text
    b.close()
    b.close()                                                # idempotent
    assert not progress.bars_shown()


def test_echo_prints_plain_lines_and_goes_around_bars():
    out = io.StringIO()
    progress.echo("[1/2] a: done", out)
    assert out.getvalue() == "[1/2] a: done\n"
    err, out = Terminal(), io.StringIO()
    with progress.bar(2, "sweep", "points", stream=err):
        progress.echo("[2/2] b: done", out)
    assert "[2/2] b: done\n" in out.getvalue()
    progress.phase("paper: speedup study", out)
    assert out.getvalue().endswith("paper: speedup study …\n")


def test_phases_off_a_terminal_are_one_plain_line_each():
    out, clock = io.StringIO(), Clock()
    ph = progress.Phases("fpraker.tile", estimate=31 * 60, stream=out, clock=clock)
    ph.start("yosys read")
    clock.t += 12
    ph.start("yosys synth", "flatten")
    ph.start("yosys synth", "flatten")                      # the same phase: no new line
    ph.tick()                                               # nothing off a terminal
    clock.t += 200
    ph.start("abc mapping")
    ph.close()
    assert out.getvalue().splitlines() == [
        "fpraker.tile: yosys read (0 s; last time 31 min) …",
        "fpraker.tile: yosys synth (flatten, 12 s; last time 31 min) …",
        "fpraker.tile: abc mapping (4 min; last time 31 min) …"]
    assert "\r" not in out.getvalue()


def test_phases_on_a_terminal_tick_in_place():
    out, clock = Terminal(), Clock()
    ph = progress.Phases("u", stream=out, clock=clock)
    ph.start("OpenSTA timing")
    clock.t += 5
    ph.tick()
    ph.close()
    assert out.getvalue() == ("\r\x1b[Ku: OpenSTA timing (0 s) …"
                              "\r\x1b[Ku: OpenSTA timing (5 s) …\n")


def test_disabled_phases_print_nothing():
    out = io.StringIO()
    with progress.Phases("u", stream=out, enabled=False) as ph:
        ph.start("yosys read")
    assert out.getvalue() == ""


YOSYS_LOG = """\
1. Executing Verilog-2005 frontend: m.v
2. Executing SYNTH pass.
2.1. Executing HIERARCHY pass (managing design hierarchy).
2.2. Executing PROC pass (convert processes to netlists).
2.2.1. Executing PROC_CLEAN pass (remove empty switches from decision trees).
2.3. Executing FLATTEN pass (flatten design).
2.4. Executing OPT_EXPR pass (perform const folding).
2.16. Executing MEMORY pass.
2.21. Executing TECHMAP pass (map to technology primitives).
2.22. Executing OPT pass (performing simple optimizations).
2.23. Executing ABC pass (technology mapping using ABC).
2.26. Printing statistics.
3. Executing DFFLEGALIZE pass (convert FFs to types supported by the target).
4. Executing DFFLIBMAP pass (mapping DFF cells to sequential cells from liberty).
5. Executing ABC pass (technology mapping using ABC).
6. Executing SPLITNETS pass (splitting up multi-bit signals).
8. Printing statistics.
9. Executing Verilog backend.
"""

EXPECTED = [("yosys read", None), ("yosys synth", None), ("yosys synth", "elaborate"),
            ("yosys synth", "flatten"), ("yosys synth", "coarse"), ("yosys synth", "memory"),
            ("yosys synth", "techmap"), ("yosys synth", "abc -fast"), ("flip-flop mapping", None),
            ("abc mapping", None), ("yosys netlist", None)]


def test_yosys_phases_from_the_log_line_by_line():
    parser = synth.YosysPhases()
    seen = [got for line in YOSYS_LOG.splitlines(keepends=True)
            if (got := parser.feed(line)) is not None]
    assert seen == EXPECTED                 # the late OPT pass does not go back to "coarse"


def test_yosys_phases_from_pieces_cut_mid_line():
    parser = synth.YosysPhases("hierarchical ")
    seen = []
    for i in range(0, len(YOSYS_LOG), 7):
        got = parser.feed(YOSYS_LOG[i:i + 7])
        if got is not None:
            seen.append(got)
    assert seen[-1] == ("hierarchical yosys netlist", None)
    assert [s for s in seen if s[0] == "hierarchical yosys synth"][-1][1] == "abc -fast"


def test_the_log_watch_announces_phases_as_the_log_grows(tmp_path):
    log, out = tmp_path / "yosys.log", io.StringIO()
    ph = progress.Phases("u", stream=out, clock=Clock())
    watch = synth._LogWatch(log, ph, synth.YosysPhases())
    watch.poll()                                            # no log yet
    lines = YOSYS_LOG.splitlines(keepends=True)
    log.write_text("".join(lines[:4]))
    watch.poll()
    with open(log, "a") as f:
        f.write("".join(lines[4:]))
    watch.poll()
    assert out.getvalue().splitlines() == ["u: yosys synth (elaborate, 0 s) …",
                                           "u: yosys netlist (0 s) …"]


def test_timings_estimate_from_the_same_configuration_else_the_last_run(tmp_path):
    path = tmp_path / "t" / "times.json"
    t = progress.Timings(path)
    assert t.estimate("fpraker.tile", "a") == (None, False)
    t.record("fpraker.tile", "a", 1860.04)
    t.record("fpraker.tile", "b", 60)
    assert t.estimate("fpraker.tile", "a") == (1860.04, True)
    assert t.estimate("fpraker.tile", "c") == (60.0, False)
    data = json.loads(path.read_text())
    assert data == {"version": 1, "tasks": {"fpraker.tile": {
        "configs": {"a": 1860.04, "b": 60.0}, "last": {"config": "b", "seconds": 60.0}}}}
    path.write_text("{not json")
    assert t.estimate("fpraker.tile", "a") == (None, False)
    t.record("u", "k", 1)                                   # a broken file is started afresh
    assert t.estimate("u", "k") == (1.0, True)
    assert progress.config_key({"b": 1, "a": 2}) == progress.config_key({"a": 2, "b": 1})


def test_the_training_bars_follow_batches_and_epochs(monkeypatch):
    monkeypatch.setattr(shutil, "get_terminal_size",
                        lambda fallback=(100, 24): os.terminal_size((120, 24)))
    out = Terminal()
    p = train_run._Progress({"bf16": 3, "hbfp8": 3}, True, stream=out)
    p.batch("bf16", 2, 4, 10, 0.5)
    assert p.bars["bf16"].n == pytest.approx(1.5)
    p.epoch("hbfp8", {"epoch": 2, "loss": 0.25, "test_accuracy": 0.5})
    assert p.bars["hbfp8"].n == 2
    text = out.getvalue()
    assert "loss 0.500" in text and "test 50.0 %" in text and "epochs" in text
    p.close()
    assert not progress.bars_shown()
    # off a terminal no bars (lines instead, tests/test_train_cli.py); disabled, nothing
    lines = io.StringIO()
    p = train_run._Progress({"bf16": 3}, True, stream=lines)
    assert not p.bars_on and p.lines_on and not p.bars
    quiet = io.StringIO()
    p = train_run._Progress({"bf16": 3}, False, stream=quiet)
    p.start("bf16")
    p.batch("bf16", 1, 0, 10, 0.5)
    p.epoch("bf16", {"epoch": 1, "loss": 0.5, "test_accuracy": 0.5})
    p.close()
    assert not p.bars_on and not p.lines_on and quiet.getvalue() == ""


@pytest.mark.skipif(shutil.which("yosys") is None or shutil.which("sta") is None,
                    reason="needs yosys and OpenSTA")
def test_area_prints_its_phases_and_records_its_time(tmp_path, monkeypatch, capsys):
    import flows
    from flows import registry

    monkeypatch.setattr(flows, "BUILD", tmp_path / "build")
    unit = registry.get("fpraker.encoder")
    cfg = unit.make_config(lanes=1)
    synth.area(unit, cfg, outdir=tmp_path / "a")
    first = capsys.readouterr().out.splitlines()
    assert re.fullmatch(r"fpraker\.encoder: yosys read \(\d+ s\) …", first[0]), first
    assert first[-1].startswith("fpraker.encoder: OpenSTA timing (")
    times = json.loads((tmp_path / "build" / synth.TIMES).read_text())
    assert list(times["tasks"]) == ["fpraker.encoder"]
    synth.area(unit, cfg, outdir=tmp_path / "a")
    again = capsys.readouterr().out.splitlines()
    assert all("; last time " in line for line in again), again
    synth.area(unit, cfg, outdir=tmp_path / "a", progress=False)
    assert capsys.readouterr().out == ""

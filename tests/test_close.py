"""``trainfab close``: the smallest pipeline depth that meets a period (flows/eda/close.py).

The selection logic and the error paths run on fake syntheses (figures that depend on the
depth only); one real run closes the bf16 adder at a period its combinational form misses.
"""

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import flows.eda.close
import flows.eda.synth
from flows import registry
from flows.cli import main
from flows.config import load_config
from golden.common.fp_add import FPAddConfig

FLOP = {"setup_ns": 0.2, "clk_to_q_ns": 0.15, "cell": "DFFPOSX1"}


def _fake_area_for(path_ns, calls):
    """A stand-in for :func:`flows.eda.synth.area`: depth ``d`` has the critical path
    ``path_ns[d]`` and ``10 * d`` flip-flops; it writes area.json/area.md as area does."""
    lock = threading.Lock()

    def fake(unit, cfg, *, liberty="osu018", clock_ns=10.0, outdir=None, factory=None,
             breakdown=False, progress=True):
        d = cfg.pipeline
        with lock:
            calls.append(d)
        path = path_ns[d]
        r = {"unit": unit.name, "config": unit.hardware_config(cfg), "area_um2": 1000.0 + 100 * d,
             "area_ge": (1000.0 + 100 * d) / 24, "flip_flops": 10 * d, "cells": 50,
             "critical_path_ns": path, "slack_ns": round(clock_ns - path, 4),
             "fmax_mhz": round(1000 / path, 2), "clock_ns": clock_ns,
             "startpoint": f"start{d}", "endpoint": f"end{d}"}
        outdir = Path(outdir)
        outdir.mkdir(parents=True, exist_ok=True)
        (outdir / "area.json").write_text(json.dumps(r))
        (outdir / "area.md").write_text(f"# fake depth {d}\n")
        return {**r, "outdir": str(outdir)}

    return fake


@pytest.fixture
def fake_synth(monkeypatch):
    """Fake syntheses and flip-flop timing; returns ``(set_paths, calls)``."""
    calls = []
    paths = {}

    monkeypatch.setattr(flows.eda.close, "flop_timing", lambda lib: FLOP)
    monkeypatch.setattr(flows.eda.synth, "area", _fake_area_for(paths, calls))
    return paths, calls


def test_a_field_left_at_its_default_none_reads_back(fake_synth, tmp_path, capsys):
    """TOML has no null: Gecko's ``fixed_width`` (default ``None``: the format's own width) is
    written as a comment, and the file reads back as the configuration it was written from."""
    paths, calls = fake_synth
    paths.update({0: 10.0, 1: 4.0, 2: 3.0})
    unit = registry.get("gecko.compressor")
    out = tmp_path / "out"
    rc = main(["close", "gecko.compressor", "--clock-ns", "5", "--set", "lanes=2", "-o",
               str(out)])
    assert rc == 0, capsys.readouterr()
    text = (out / "gecko.compressor.toml").read_text()
    assert "fixed_width" in text and "fixed_width =" not in text
    want = unit.make_config(lanes=2, pipeline=1)
    assert want.fixed_width is None
    assert load_config(unit, str(out / "gecko.compressor.toml")) == want


def test_chooses_the_smallest_depth_that_meets_and_stops(fake_synth, tmp_path, capsys):
    paths, calls = fake_synth
    paths.update({0: 10.0, 1: 5.2, 2: 3.9, 3: 3.0, 4: 2.5, 5: 2.4})
    out = tmp_path / "out"
    rc = main(["close", "common.fp_add", "--clock-ns", "4", "--set", "fmt=bf16", "-o", str(out)])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert calls == [0, 1, 2]                        # stops at the first depth that meets
    assert "| 2 | 1,200.0 | 50 | 20 | 256.4 | 0.100 | yes |" in text
    assert "| 1 | 1,100.0 | 46 | 10 | 192.3 | -1.200 | no |" in text
    assert "pipeline=2 meets 4 ns" in text
    # progress: a line per depth
    assert "[1/6] common.fp_add pipeline=0:" in text and "misses 4 ns" in text
    # the configuration reads back as it is, and the chosen depth's report is beside it
    cfg = load_config(registry.get("common.fp_add"), str(out / "common.fp_add.toml"))
    assert cfg == FPAddConfig(fmt="bf16", pipeline=2)
    assert json.loads((out / "area.json").read_text())["config"]["pipeline"] == 2
    assert (out / "area.md").read_text() == "# fake depth 2\n"
    result = json.loads((out / "close.json").read_text())
    assert result["chosen"] == 2 and [r["pipeline"] for r in result["rows"]] == [0, 1, 2]
    assert "Chosen: `pipeline = 2`" in (out / "close.md").read_text()


def test_a_combinational_depth_that_meets_is_chosen(fake_synth, tmp_path, capsys):
    paths, calls = fake_synth
    paths.update({0: 4.0, 1: 2.0, 2: 1.0, 3: 1.0})
    rc = main(["close", "common.round", "--clock-ns", "5", "-o", str(tmp_path)])
    assert rc == 0 and calls == [0]
    assert load_config(registry.get("common.round"),
                       str(tmp_path / "common.round.toml")).pipeline == 0


def test_parallel_depths_still_choose_the_smallest(fake_synth, tmp_path, capsys, monkeypatch):
    """-j 2: depths go two at a time; when both of a pair meet, the smaller one is chosen, and
    no later pair is synthesized."""
    paths, calls = fake_synth
    paths.update({0: 10.0, 1: 6.0, 2: 3.9, 3: 3.0, 4: 2.5, 5: 2.4})
    monkeypatch.setattr(flows.eda.close, "_pool", lambda jobs: ThreadPoolExecutor(jobs))
    rc = main(["close", "common.fp_add", "--clock-ns", "4", "-j", "2", "-o", str(tmp_path)])
    assert rc == 0, capsys.readouterr()
    assert sorted(calls) == [0, 1, 2, 3]
    assert load_config(registry.get("common.fp_add"),
                       str(tmp_path / "common.fp_add.toml")).pipeline == 2


def test_no_depth_meets_names_the_best_critical_path(fake_synth, tmp_path, capsys):
    paths, calls = fake_synth
    paths.update({0: 12.0, 1: 9.0, 2: 9.5})
    rc = main(["close", "baseline.mac16", "--clock-ns", "5", "--set", "lanes=2",
               "-o", str(tmp_path)])
    cap = capsys.readouterr()
    assert rc == 1
    assert calls == [0, 1, 2]
    err = cap.err.strip().splitlines()
    assert len(err) == 1 and "no pipeline depth up to 2 meets 5 ns" in err[0]
    assert "best pipeline=1" in err[0] and "start1 → end1" in err[0], err
    # the best depth's configuration and report are still written
    assert load_config(registry.get("baseline.mac16"),
                       str(tmp_path / "baseline.mac16.toml")).pipeline == 1


def test_a_unit_without_a_pipeline_field_is_refused(fake_synth, tmp_path, capsys):
    paths, calls = fake_synth
    rc = main(["close", "equinox.array", "--clock-ns", "5", "-o", str(tmp_path / "x")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and calls == [] and len(err) == 1
    assert "equinox.array has no pipeline field" in err[0]
    for name in flows.eda.close.pipelined_units():
        assert name in err[0]
    assert not (tmp_path / "x").exists()


def test_a_period_below_the_flip_flop_is_refused_before_synthesis(fake_synth, tmp_path, capsys):
    paths, calls = fake_synth
    rc = main(["close", "common.fp_add", "--clock-ns", "0.3", "-o", str(tmp_path / "x")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and calls == [] and len(err) == 1
    assert "below the flip-flop's clock-to-Q plus setup (0.150 + 0.200 = 0.350 ns" in err[0]


def test_the_liberty_flip_flop_timing_is_measured():
    """The real measurement on OSU 0.18 µm: a positive setup and clock-to-Q, well below 1 ns."""
    flows.eda.close.flop_timing.cache_clear()
    from flows.eda.tools import OSU018

    ff = flows.eda.close.flop_timing(OSU018)
    assert ff["cell"].startswith("DFF")
    assert 0 < ff["setup_ns"] < 1 and 0 < ff["clk_to_q_ns"] < 1, ff


@pytest.mark.parametrize("args, message", [
    (["--set", "pipeline=9"], "FPAddConfig.pipeline = 9 is invalid: allowed an integer in 0..5"),
    (["--set", "pipeline=-1"], "FPAddConfig.pipeline = -1 is invalid: allowed an integer in 0..5"),
    (["-j", "0"], "argument --jobs/-j"),
])
def test_usage_errors(fake_synth, tmp_path, capsys, args, message):
    paths, calls = fake_synth
    rc = main(["close", "common.fp_add", "--clock-ns", "5", "-o", str(tmp_path), *args])
    err = capsys.readouterr().err
    assert rc == 2 and calls == [] and message in err, err


def test_the_output_folder_is_checked_before_synthesis(fake_synth, tmp_path, capsys):
    paths, calls = fake_synth
    blocker = tmp_path / "file"
    blocker.write_text("")
    rc = main(["close", "common.fp_add", "--clock-ns", "5", "-o", str(blocker)])
    assert rc == 2 and calls == []
    assert "is a file, not a folder" in capsys.readouterr().err


def test_real_close_of_the_bf16_adder(tmp_path, capsys):
    """bf16 adder at 6 ns: the combinational adder misses it, a pipelined one meets it; the
    written configuration gives the same synthesis through ``trainfab area --config``."""
    out = tmp_path / "close"
    rc = main(["close", "common.fp_add", "--clock-ns", "6", "--set", "fmt=bf16",
               "-o", str(out)])
    text = capsys.readouterr().out
    assert rc == 0, text
    result = json.loads((out / "close.json").read_text())
    rows = result["rows"]
    assert not rows[0]["meets"] and result["chosen"] in (1, 2), rows
    assert rows[-1]["meets"] and all(not r["meets"] for r in rows[:-1])
    assert rows[-1]["flip_flops"] > rows[0]["flip_flops"] == 0
    chosen = json.loads((out / "area.json").read_text())
    assert chosen["config"] == {"fmt": "bf16", "pipeline": result["chosen"]}
    rc = main(["area", "common.fp_add", "--config", str(out / "common.fp_add.toml"),
               "--clock-ns", "6", "-o", str(tmp_path / "area")])
    assert rc == 0
    again = json.loads((tmp_path / "area" / "area.json").read_text())
    assert again["verilog_sha256"] == chosen["verilog_sha256"]
    assert again["area_um2"] == chosen["area_um2"] and again["slack_ns"] >= 0


def test_a_rerun_removes_the_depth_folders_of_an_earlier_deeper_run(fake_synth, tmp_path,
                                                                    capsys, monkeypatch):
    """Depth folders written by trainfab (a manifest proves it) that the new run did not try go;
    a folder holding a file of the user's stays, with that file."""
    from flows.runs import staged

    paths, calls = fake_synth
    fake = flows.eda.synth.area

    def staged_area(unit, cfg, *, outdir=None, **kw):  # area's outputs come with a manifest
        with staged(Path(outdir)) as work:
            r = fake(unit, cfg, outdir=work, **kw)
        return {**r, "outdir": str(outdir)}

    monkeypatch.setattr(flows.eda.synth, "area", staged_area)
    paths.update({0: 10.0, 1: 5.2, 2: 3.9, 3: 3.0, 4: 2.5, 5: 2.3})
    out = tmp_path / "out"
    assert main(["close", "common.fp_add", "--clock-ns", "2.4", "-o", str(out)]) == 0
    assert sorted(p.name for p in out.glob("pipeline*")) == [f"pipeline{d}" for d in range(6)]
    (out / "pipeline4" / "notes.txt").write_text("mine\n")
    assert main(["close", "common.fp_add", "--clock-ns", "4", "-o", str(out)]) == 0
    capsys.readouterr()
    assert sorted(p.name for p in out.glob("pipeline*")) == ["pipeline0", "pipeline1",
                                                              "pipeline2", "pipeline4"]
    assert [p.name for p in (out / "pipeline4").iterdir()
            if not p.name.startswith(".")] == ["notes.txt"]


def test_close_times_every_depth_with_buffer_trees_when_asked(monkeypatch, tmp_path):
    """``--max-fanout N`` reaches every depth's area run; without it, none gets the option."""
    seen = []

    def fake(unit, cfg, **kw):
        seen.append(kw.get("max_fanout", "absent"))
        return _fake_area_for({0: 10.0, 1: 4.0, 2: 4.0, 3: 4.0}, [])(unit, cfg, **{
            k: v for k, v in kw.items() if k != "max_fanout"})

    monkeypatch.setattr(flows.eda.close, "flop_timing", lambda lib: FLOP)
    monkeypatch.setattr(flows.eda.synth, "area", fake)
    assert main(["close", "common.fp_add", "--clock-ns", "5", "--max-fanout", "16", "-o",
                 str(tmp_path / "a")]) == 0
    assert seen == [16, 16]
    assert json.loads((tmp_path / "a" / "close.json").read_text())["max_fanout"] == 16
    assert "buffer trees on the nets of more than 16 loads" in (tmp_path / "a" /
                                                                "close.md").read_text()
    seen.clear()
    assert main(["close", "common.fp_add", "--clock-ns", "5", "-o", str(tmp_path / "b")]) == 0
    assert seen == ["absent", "absent"]


def test_depths_start_at_the_smallest_the_configuration_accepts():
    """Interleaved dot products of the bit-parallel PE need stages, so `close` starts there."""
    from golden.baseline import BaselineConfig, MAC16Config

    assert flows.eda.close.min_depth(MAC16Config(contexts=5)) == 0
    pe = BaselineConfig(pipeline=1, contexts=3)
    assert flows.eda.close.min_depth(pe) == 1
    assert flows.eda.close.max_depth(pe) == 3

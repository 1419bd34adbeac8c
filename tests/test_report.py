"""``make demo`` and ``make paper`` (flows.report): the demo's units cover every family and
write their table, JSON and plot; the paper run prints its time estimate before anything else,
from recorded step times when there are some.

Generation, regressions, synthesis and the studies are replaced by stand-ins, so these tests
take seconds; the real tools run in ``test_area.py``, ``test_testbenches.py`` and the flows' own
tests.
"""

import json

import pytest

import flows
import flows.eda.generate
import flows.eda.simulate
import flows.eda.synth
from flows import families, registry, report
from flows.eda.simulate import TbResult

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(autouse=True)
def build(tmp_path, monkeypatch):
    """Default output folders go under tmp_path, never the repository's build/."""
    folder = tmp_path / "build"
    monkeypatch.setattr(flows, "BUILD", folder)
    return folder


def _fake_area(unit, cfg, *, liberty="osu018", clock_ns=10.0, outdir=None, factory=None,
               breakdown=False):
    """An area report whose figures grow with the configuration's numbers (deterministic)."""
    hw = unit.hardware_config(cfg)
    size = 1000 + 100 * sum(v for v in hw.values() if isinstance(v, int)) + 7 * len(unit.name)
    return {"unit": unit.name, "config": unit.hardware_config(cfg), "area_um2": 10.0 * size,
            "area_ge": 10.0 * size / 24, "ge_um2": 24.0, "cells": size // 50,
            "flip_flops": size // 1000, "transistors_estimate": size // 10,
            "fmax_mhz": 50.0 + size % 200, "critical_path_ns": 10.0, "clock_ns": clock_ns,
            "seconds": {"synthesis": 1.0, "timing": 0.1}, "outdir": str(outdir)}


def _fake_generate(unit, cfg, outdir=None):
    return {"verilog": f"{outdir}/{unit.top}.v", "verilog_sha256": "0" * 64}


@pytest.fixture
def fakes(monkeypatch, tmp_path):
    """Stand-ins for generate, the regressions (``failing``: unit names that fail) and area."""
    failing = set()

    def run_testbench(unit, cfg=None, **kw):
        failed = int(unit.name in failing)
        return TbResult(unit.name, {}, "icarus", 1, 3, failed, 0.1, tmp_path / "sim.log",
                        tmp_path / "results.xml")

    monkeypatch.setattr(flows.eda.generate, "generate", _fake_generate)
    monkeypatch.setattr(flows.eda.simulate, "run_testbench", run_testbench)
    monkeypatch.setattr(flows.eda.simulate, "failure_details", lambda tb: "details")
    monkeypatch.setattr(flows.eda.synth, "area", _fake_area)
    return failing


# --------------------------------------------------------------------------------------------
# make demo


def test_demo_covers_every_family_at_a_valid_small_configuration():
    declared = {families.family_name(m) for m in families.modules() if getattr(m, "UNITS", ())}
    units = report.demo_units()
    assert {u.family for u in units} == declared
    assert {"fpraker", "fast", "equinox", "gecko", "baseline", "common"} <= declared
    for unit in units:
        unit.make_config(**unit.showcase.demo)  # a FlowError if the family's values are invalid


def test_demo_compares_fpraker_and_fast_with_their_baselines():
    """The baselines are in the demo at the sizes their families' units are, so the papers'
    ratios against them appear, each as the unit over its baseline."""
    units = report.demo_units()
    results = {u.name: _fake_area(u, u.make_config(**u.showcase.demo)) for u in units}
    aliases = {part: u.name for u in units
               for part in report.demo_run._same_as_unit(u, u.make_config(**u.showcase.demo))}
    ratios = {(r["unit"], r["other"]): r for r in report.demo_ratios(results, aliases)}
    fp = ratios[("fpraker.pe", "baseline.bf16_pe")]
    assert fp["baseline"] and fp["paper"] == pytest.approx((4752 + 12950 / 8) / 22212)
    assert registry.get("fpraker.pe").showcase.demo["lanes"] == \
        registry.get("baseline.bf16_pe").showcase.demo["lanes"]
    fmac = ratios[("fast.fmac", "baseline.mac16")]  # FAST states 16 bf16 MACs / fMAC = 9.6
    assert fmac["baseline"] and fmac["paper"] == pytest.approx(1 / 9.6)
    assert fmac["ours"] == pytest.approx(results["fast.fmac"]["area_um2"]
                                         / results["baseline.mac16"]["area_um2"])
    assert registry.get("fast.fmac").showcase.demo["group"] == \
        registry.get("baseline.mac16").showcase.demo["lanes"]
    assert not ratios[("gecko.decompressor", "gecko.compressor")]["baseline"]


def test_demo_writes_table_json_and_plot(build, fakes, capsys):
    assert report.demo() == 0
    out = capsys.readouterr().out
    folder = build / "demo"
    md = (folder / "summary.md").read_text()
    doc = json.loads((folder / "summary.json").read_text())
    assert (folder / "demo.png").read_bytes().startswith(PNG)
    for unit in report.demo_units():
        row = next(line for line in md.splitlines() if line.startswith(f"| {unit.name} |"))
        assert "pass 3/3" in row
        s = doc["units"][unit.name]
        assert s["family"] == unit.family and s["passed"]
        assert s["area_um2"] > 0 and s["fmax_mhz"] > 0 and s["area_ge"] > 0
        assert s["configuration"] == registry.config_label(unit.showcase.demo)
    fp_row = next(line for line in md.splitlines() if line.startswith("| fpraker.pe |"))
    assert "× baseline.bf16_pe (paper: 0.29 ×)" in fp_row
    assert "## Area ratios beside the papers'" in md and "](demo.png)" in md
    # the designs beside their baselines at each one's own clock
    assert "## At each design's own clock" in md
    own = {(r["unit"], r["baseline"], r["operands"]) for r in doc["own_clock"]}
    assert ("fast.fmac", "baseline.mac16", "2-bit mantissas") in own
    assert any(u == "fpraker.pe" and b == "baseline.bf16_pe" for u, b, _ in own)
    assert {(r["unit"], r["other"]) for r in doc["ratios"]} >= {
        ("fpraker.pe", "baseline.bf16_pe"), ("fast.fmac", "baseline.mac16")}
    # the table and the closing paragraph are printed, with the commands to go further
    assert "## Where to go next" in out and "make paper" in out
    assert "trainfab area UNIT" in out and "trainfab train" in out
    assert out.rstrip().splitlines()[-1].startswith("written: ")


def test_demo_failing_regression_is_exit_1_and_shown(build, fakes, capsys):
    fakes.add("gecko.compressor")
    assert report.demo() == 1
    md = (build / "demo" / "summary.md").read_text()
    assert "| gecko.compressor | lanes=2,fmt=bf16 | FAIL 2/3 |" in md
    assert "details" in capsys.readouterr().out


# --------------------------------------------------------------------------------------------
# each design at its own clock


def test_own_clock_rows_divide_work_per_area_at_each_fmax():
    """MACs per cycle × fmax ÷ area for the design and its baseline; the own-clock ratio is the
    one-clock ratio times the ratio of the clocks."""
    pe = {"config": {"lanes": 8, "group": 16, "m_max": 4}, "area_um2": 2.0e5, "fmax_mhz": 80.0}
    base = {"config": {"lanes": 16, "fmt": "bf16"}, "area_um2": 1.0e6, "fmax_mhz": 50.0}
    rows = [r for r in report.own_clock_rows({"fast.fmac": pe, "baseline.mac16": base},
                                             aliases={"fast.fmac/m4": "fast.fmac"})
            if r["baseline"] == "baseline.mac16"]
    assert [(r["operands"], r["macs_per_cycle"]) for r in rows] == [("2-bit mantissas", 16.0),
                                                                     ("4-bit mantissas", 4.0)]
    two = rows[0]
    assert two["density"] == pytest.approx(16 * 80 / 0.2)         # M MAC/s per mm²
    assert two["baseline_density"] == pytest.approx(16 * 50 / 1.0)
    assert two["same"] == pytest.approx(1.0e6 / 2.0e5)
    assert two["own"] == pytest.approx(two["same"] * 80 / 50)
    assert rows[1]["own"] == pytest.approx(two["own"] / 4)
    # extra measured work (a study's real operands) adds rows; no fmax, no row
    extra = report.own_clock_rows({"fast.fmac/m4": pe, "baseline.mac16": base},
                                  work={"fast.fmac/m4": [("study", 2.0)]})
    assert ("study", 2.0) in {(r["operands"], r["macs_per_cycle"]) for r in extra}
    assert not report.own_clock_rows({"fast.fmac/m4": pe,
                                      "baseline.mac16": {**base, "fmax_mhz": None}})


def test_energy_per_mac_is_retimed_by_its_leakage_only():
    power = {"clock_ns": 10.0, "internal_mw": 3.0, "switching_mw": 1.0, "leakage_mw": 0.5,
             "total_mw": 4.5, "activity_source": {"cycles": 100, "operands": {"groups": 20}}}
    # 20 groups of 8 MACs over 100 cycles of 10 ns: 4.5 mW x 1 µs = 4.5 nJ
    assert report.energy_at(power, 10.0, 8) == pytest.approx(4.5e-3 * 1e-6 / 160 * 1e12)
    # at 20 ns only the leakage energy doubles
    assert report.energy_at(power, 20.0, 8) == pytest.approx(5.0e-3 * 1e-6 / 160 * 1e12)
    section = report.own_clock_section(
        [{"label": "t", "unit": "a", "baseline": "b", "operands": "x", "macs_per_cycle": 1.0,
          "fmax_mhz": 20.0, "area_um2": 1e6, "density": 20.0, "baseline_fmax_mhz": 40.0,
          "baseline_density": 40.0, "baseline_macs_per_cycle": 1, "baseline_area_um2": 1e6,
          "own": 0.5, "same": 1.0, "source": ""}],
        {name: {**power, "config": {"rows": 2, "cols": 2, "lanes": 2},
                "timing": {"fmax_mhz": 50.0}} for name in ("a", "b")})
    assert "| t | a (1,000,000 µm²) | 20.0 | x | 1 | 20 | b: 40.0, 40 | 0.500× | 1.000× |" \
        in section
    assert "**1.00×**" in section and "at 10 ns" in section


def _power(name, config, mantissa_bits=None):
    """A power report of ``name`` at ``config``: 1 mW of dynamic power over 64 cycles of 10 ns
    for 16 groups, no leakage."""
    facts = {"mantissa_bits": mantissa_bits} if mantissa_bits else {}
    return {"unit": name.split("/")[0], "config": config, "clock_ns": 10.0, "total_mw": 1.0,
            "internal_mw": 0.75, "switching_mw": 0.25, "leakage_mw": 0.0,
            "energy_per_group_pj": 40.0, "timing": {"fmax_mhz": 50.0},
            "activity_source": {"cycles": 64, "operands": {"groups": 16},
                                "testbench_facts": facts}}


def test_energy_per_mac_counts_the_fmacs_group_and_names_its_mantissas():
    """The fMAC's power run has no lanes: a group pair is ``group`` MACs."""
    fmac = _power("fast.fmac/m4", {"group": 16, "m_max": 4}, mantissa_bits=4)
    mac16 = _power("baseline.mac16/int8", {"lanes": 16, "fmt": "int8"})
    # 1 mW x 640 ns = 640 pJ over 16 groups of 16 MACs
    assert report.energy_at(fmac, 10.0, report.tables._macs_per_group(fmac)) == pytest.approx(2.5)
    rows = report.own_clock_rows(
        {"fast.fmac/m4": {"config": fmac["config"], "area_um2": 1e5, "fmax_mhz": 50.0},
         "baseline.mac16/int8": {"config": mac16["config"], "area_um2": 6e5, "fmax_mhz": 180.0}})
    section = report.own_clock_section(rows, {"fast.fmac/m4": fmac,
                                              "baseline.mac16/int8": mac16})
    assert ("| fast.fmac/m4 groups of 16, 4-bit mantissas / baseline.mac16/int8 16 lanes | "
            "2.50 pJ at 50.0 MHz / 2.50 pJ at 50.0 MHz = **1.00×** |") in section


def test_named_config_applies_a_parts_overrides():
    unit, cfg = report.named_config("baseline.mac16/int8")
    assert unit.name == "baseline.mac16" and cfg.fmt == "int8"
    unit, cfg = report.named_config("fast.fmac/m4")
    assert unit.name == "fast.fmac" and cfg.m_max == 4
    unit, cfg = report.named_config("baseline.mac16")
    assert cfg == flows.config.load_config(unit)
    subs = [p.name for p in families.parts() if p.component]
    with pytest.raises(flows.FlowError, match="sub-block"):
        report.named_config(subs[0])


def test_paper_measures_the_energy_of_every_pair_declared_with_power(build, monkeypatch):
    """``_own_clock_power`` runs ``trainfab power`` once per design or baseline of the pairs
    declared with ``power`` (FAST's fMAC and its three MAC baselines), each at its
    configuration, into a folder of its own."""
    import flows.eda.power as power

    ran = []

    def fake_power(unit, cfg, outdir=None, **kw):
        ran.append((unit.name, unit.hardware_config(cfg), outdir.name))
        bits = 4 if unit.name == "fast.fmac" else None
        return _power(unit.name, unit.hardware_config(cfg), bits)

    monkeypatch.setattr(power, "power", fake_power)
    text, runs = report.paper_run._own_clock_power(build / "paper")
    declared = {n for c in families.own_clocks() if c.power for n in (c.unit, c.baseline)}
    assert set(runs) == declared == {"fast.fmac/m4", "baseline.mac16/int8", "baseline.mac16",
                                     "baseline.mac16/fp16"}
    assert len(ran) == len(declared)
    by_folder = {folder: (name, cfg) for name, cfg, folder in ran}
    assert by_folder["fast.fmac-m4"][1]["m_max"] == 4
    assert by_folder["baseline.mac16-int8"][1]["fmt"] == "int8"
    assert "- `fast.fmac/m4`: 1.00 mW at 10 ns, 40.0 pJ per group of 16 MACs, 4-bit mantissas" \
        in text
    assert "- `baseline.mac16/fp16`: 1.00 mW at 10 ns, 40.0 pJ per group of 16 MACs (" in text


# --------------------------------------------------------------------------------------------
# make paper


@pytest.mark.parametrize("seconds, text", [(20, "under a minute"), (12 * 60 + 10, "12 min"),
                                           (43 * 60, "45 min"), (7260, "2 h"),
                                           (2 * 3600 + 33 * 60, "2 h 35 min")])
def test_estimates_are_rounded(seconds, text):
    assert report.tables._about(seconds) == text


def test_paper_steps_end_with_the_paper_size_tiles():
    steps = report.paper_steps()
    assert steps[:len(registry.UNITS)] == [f"unit:{n}" for n in registry.UNITS]
    assert steps[len(registry.UNITS):] == ["studies", "sweep", "paper-size:fpraker.tile",
                                           "paper-size:baseline.bf16_tile"]


def test_paper_estimate_without_a_recorded_run_is_the_documented_default(build):
    seconds, line = report.paper_estimate(build / "paper" / "times.json")
    assert seconds == pytest.approx(60 * sum(report.paper_run.PAPER_DEFAULT_MINUTES.values()))
    assert "about 1 h 40 min, from no recorded run" in line
    # the two 8 x 8 syntheses at once: the longer one counts
    seconds, line = report.paper_estimate(build / "paper" / "times.json", workers=2)
    minutes = report.paper_run.PAPER_DEFAULT_MINUTES
    assert seconds == pytest.approx(60 * (sum(minutes.values()) - minutes[
        "paper-size:fpraker.tile"]))
    assert "about 1 h 20 min, from no recorded run" in line and "2 at a time here" in line


def test_paper_estimate_uses_recorded_times_and_fills_the_rest(build):
    times = build / "paper" / "times.json"
    times.parent.mkdir(parents=True)
    steps = report.paper_steps()
    times.write_text(json.dumps({"steps": {s: 60.0 for s in steps}}))
    seconds, line = report.paper_estimate(times)
    assert seconds == 60.0 * len(steps) and f"from the last run's times in {times}." in line
    # an interrupted run recorded only its first steps: the rest at the defaults
    times.write_text(json.dumps({"steps": {steps[0]: 60.0}}))
    seconds, line = report.paper_estimate(times)
    assert f"with 1 of {len(steps)} steps as earlier runs took them ({times}) and" in line
    assert seconds == pytest.approx(60 * sum(report.paper_run.PAPER_DEFAULT_MINUTES.values())
                                    - report.paper_run._default_seconds(steps[0], len(registry.UNITS))
                                    + 60)
    # a damaged record is no record
    times.write_text("{")
    assert "from no recorded run" in report.paper_estimate(times)[1]


def test_paper_estimate_uses_an_area_run_of_a_tile_at_its_paper_configuration(build):
    from flows.config import load_config

    unit = registry.get("fpraker.tile")
    folder = build / "area" / unit.name
    folder.mkdir(parents=True)
    r = {"config": unit.hardware_config(load_config(unit)), "breakdown": [],
         "seconds": {"synthesis": 600.0, "timing": 10.0, "hierarchical_synthesis": 590.0}}
    (folder / "area.json").write_text(json.dumps(r))
    seconds, line = report.paper_estimate(build / "paper" / "times.json")
    assert seconds == pytest.approx(60 * sum(report.paper_run.PAPER_DEFAULT_MINUTES.values())
                                    - 60 * report.paper_run.PAPER_DEFAULT_MINUTES[
                                        "paper-size:fpraker.tile"] + 1200)
    assert f"with 1 of {len(report.paper_steps())} steps as earlier runs took them " \
        f"({folder / 'area.json'}) and" in line
    # another configuration (a 4 x 4 run) does not count
    (folder / "area.json").write_text(json.dumps({**r, "config": {**r["config"], "rows": 4}}))
    assert "from no recorded run" in report.paper_estimate(build / "paper" / "times.json")[1]


def test_paper_prints_its_estimate_first_and_records_every_step(build, fakes, capsys,
                                                                 monkeypatch):
    def studies(out, results):
        assert {"fpraker.tile", "baseline.bf16_tile"} <= set(results)
        return "\n## FPRaker tile power (real MiniLM operands)\n", {}, {}

    swept = []

    def sweep(out, jobs):
        swept.append(jobs)
        out.mkdir(parents=True, exist_ok=True)
        (out / "sweep.md").write_text("# Sweep of fpraker.encoder\n\n| lanes |\n\n"
                                      "![area_um2_vs_lanes](area_um2_vs_lanes.png)\n")
        return 0

    monkeypatch.setattr(report.paper_run, "_fpraker_studies", studies)
    monkeypatch.setattr(report.paper_run, "_own_clock_power", lambda out: ("\n## Energy\n", {}))
    monkeypatch.setattr(report.paper_run, "_paper_sweep", sweep)
    assert report.paper(jobs=2) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("make paper: estimated time about 1 h 20 min, from no recorded "
                             "run")
    assert "fpraker.tile, baseline.bf16_tile at their paper configuration (with breakdown), " \
        "2 at a time" in "\n".join(out)
    assert swept == [2]
    folder = build / "paper"
    recorded = json.loads((folder / "times.json").read_text())["steps"]
    assert list(recorded) == report.paper_steps()
    md = (folder / "summary.md").read_text()
    # every unit, its parts and the tiles at 4 x 4, then the studies, the sweep and the 8 x 8
    assert "| fast.fmac/m4 |" in md and "| baseline.mac16/int8 |" in md
    assert md.index("FPRaker tile power") < md.index("## Energy") \
        < md.index("## Sweep of fpraker.encoder") \
        < md.index("# Units at their paper configuration")
    assert "![area_um2_vs_lanes](sweep/area_um2_vs_lanes.png)" in md  # links from build/paper
    own = md[md.index("# Units at their paper configuration"):]
    assert "## At each design's own clock" in own
    assert "| FPRaker Table III tile | fpraker.tile (" in own
    doc = json.loads((folder / "summary.json").read_text())
    assert doc["fpraker.tile"]["area"]["fpraker.tile"]["config"]["rows"] == 4
    assert doc["paper_size"]["fpraker.tile"]["config"]["rows"] == 8
    assert doc["paper_size"]["baseline.bf16_tile"]["config"]["rows"] == 8
    # the next run's estimate comes from this one's times
    report.paper(jobs=2)
    first = capsys.readouterr().out.splitlines()[0]
    assert f"from the last run's times in {folder / 'times.json'}." in first


# --------------------------------------------------------------------------------------------
# the generated results page (docs/results.md)


def test_results_page_is_stamped_and_stands_outside_the_build_folder(monkeypatch):
    import flows.host as tools

    monkeypatch.setattr(tools, "commit", lambda: "abcdef123456")
    monkeypatch.setattr(tools, "machine", lambda: "Test CPU, 2 cores, Python 3.11")
    summary = ("# trainfab paper: every unit at its paper configuration\n\n## Area\n\n"
               "| unit | µm² |\n|---|---|\n| fast.fmac | 1 |\n\n"
               "![area](sweep/area.png)\nsee [the sweep](sweep/sweep.md), "
               "[papers](https://example.org/p) and [above](#area)\n")
    page = report.results_page(summary, "make paper", "build/paper")
    lines = page.splitlines()
    assert lines[0] == "# Results" and "<!-- generated by `make paper`; do not edit -->" in page
    stamp = next(line for line in lines if line.startswith("Generated by"))
    assert "commit abcdef123456" in stamp and "Test CPU, 2 cores" in stamp
    for tool in ("yosys", "opensta", "iverilog", "amaranth", "cocotb", "numpy"):
        assert f"{tool} " in stamp
    assert "## trainfab paper: every unit" in page and "### Area" in page
    assert "| fast.fmac | 1 |" in page
    assert "![" not in page  # plots stay in the build folder
    assert "the sweep (`build/paper/sweep/sweep.md`)" in page
    assert "[papers](https://example.org/p)" in page and "[above](#area)" in page


def test_results_page_leaves_out_headings_left_empty_by_the_plots():
    summary = ("# Run\n\n## Sweep\n\n| a |\n\n### Plots\n\n![p](p.png)\n\n## Next\n\ntext\n"
               "\n### Plots\n\n![q](q.png)\n")
    page = report.results_page(summary, "make paper", "build/paper")
    assert "Plots" not in page
    assert "### Sweep" in page and "### Next" in page and "| a |" in page


def test_paper_writes_the_results_page_only_when_every_step_passed(build, fakes, capsys,
                                                                   monkeypatch, tmp_path):
    monkeypatch.setattr(report.paper_run, "_fpraker_studies",
                        lambda out, results: ("\n## Studies\n\n- a study\n", {}, {}))
    monkeypatch.setattr(report.paper_run, "_own_clock_power", lambda out: ("", {}))

    def sweep(out, jobs):
        out.mkdir(parents=True, exist_ok=True)
        (out / "sweep.md").write_text("# Sweep\n")
        return 0

    monkeypatch.setattr(report.paper_run, "_paper_sweep", sweep)
    page = tmp_path / "results.md"
    assert report.paper(markdown=page) == 0
    text = page.read_text()
    assert text.startswith("# Results\n") and "| fast.fmac/m4 |" in text and "## Studies" in text
    page.write_text("kept\n")
    fakes.add("fast.fmac")
    assert report.paper(markdown=page) == 1
    assert page.read_text() == "kept\n"
    assert f"not written: {page}" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["report", "paper"])
def test_a_results_page_that_cannot_be_written_is_refused_before_the_run(
        command, tmp_path, capsys, monkeypatch):
    from flows.cli import main

    def no_run(*args, **kwargs):
        raise AssertionError("the run started")

    monkeypatch.setattr(report.paper_run, "_measure", no_run)
    monkeypatch.setattr(report.paper_run, "_paper", no_run)
    for target, says in ((tmp_path, "is a folder"),
                         (tmp_path / "missing" / "r.md", "does not exist")):
        assert main([command, "--markdown", str(target)]) == 2
        err = capsys.readouterr().err
        assert says in err and len(err.strip().splitlines()) == 1, err

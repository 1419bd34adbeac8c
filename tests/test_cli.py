"""The trainfab CLI: listing, generation, configuration errors, regressions, area reports."""

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from flows import registry
from flows.cli import build_parser, main

TRAINFAB = [sys.executable, "-m", "flows.cli"]


def run(args, capsys):
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_list_names_every_unit_and_preset(capsys):
    code, out, _ = run(["list"], capsys)
    assert code == 0
    for name in registry.UNITS:
        assert name in out
    assert "fpraker-paper" in out


def test_generate_writes_verilog_and_manifest(tmp_path, capsys):
    code, out, _ = run(["generate", "fpraker.encoder", "-o", str(tmp_path), "--set", "lanes=3"],
                       capsys)
    assert code == 0, out
    verilog = (tmp_path / "fpraker_encoder.v").read_text()
    man = json.loads((tmp_path / "fpraker_encoder.json").read_text())
    assert "module fpraker_encoder(" in verilog
    assert man["unit"] == "fpraker.encoder"
    assert man["config"] == {"lanes": 3, "encoding": "csd"}
    import hashlib
    assert man["verilog_sha256"] == hashlib.sha256(verilog.encode()).hexdigest()
    ports = {p["name"]: p for p in man["ports"]}
    assert ports["sig__2"] == {"name": "sig__2", "direction": "input", "width": 8}
    assert ports["terms__tp__0"]["direction"] == "output" and ports["terms__tp__0"]["width"] == 4
    assert ports["terms__valid"]["width"] == 3 and "clk" in ports and "rst" in ports
    for tool in ("amaranth", "yosys", "cocotb"):
        assert tool in man["tools"]


def test_generate_is_byte_identical(tmp_path, capsys):
    a, b = tmp_path / "a", tmp_path / "b"
    assert run(["generate", "fpraker.encoder", "-o", str(a)], capsys)[0] == 0
    assert run(["generate", "fpraker.encoder", "-o", str(b)], capsys)[0] == 0
    assert (a / "fpraker_encoder.v").read_bytes() == (b / "fpraker_encoder.v").read_bytes()


def test_preset_file_and_overrides(tmp_path, capsys):
    cfg = tmp_path / "mine.toml"
    cfg.write_text('[fpraker.encoder]\nlanes = 5\nencoding = "binary"\n')
    code, _, _ = run(["generate", "fpraker.encoder", "-c", str(cfg), "-s", "lanes=2",
                      "-o", str(tmp_path)], capsys)
    assert code == 0
    man = json.loads((tmp_path / "fpraker_encoder.json").read_text())
    assert man["config"] == {"lanes": 2, "encoding": "binary"}


@pytest.mark.parametrize("args, needles", [
    (["generate", "no.such.unit"], ["unknown unit 'no.such.unit'", "fpraker.encoder"]),
    (["generate", "fpraker.encoder", "--set", "lanes=0"], ["lanes", "0", "1..64"]),
    (["generate", "fpraker.encoder", "--set", "lanes=abc"], ["lanes", "'abc'", "integer"]),
    (["generate", "fpraker.encoder", "--set", "lanes=2.5"], ["lanes", "2.5", "integer"]),
    (["generate", "fpraker.encoder", "--set", "encoding=booth"], ["encoding", "booth", "csd"]),
    (["generate", "fpraker.encoder", "--set", "colour=red"], ["unknown field", "colour", "lanes"]),
    (["generate", "fpraker.encoder", "--set", "lanes"], ["field=value"]),
    (["generate", "fpraker.encoder", "--config", "nope"], ["no configuration file or preset"]),
    (["area", "fpraker.encoder", "--liberty", "/no/such.lib"], ["liberty", "/no/such.lib"]),
    (["area", "fpraker.encoder", "--clock-ns", "0"], ["clock-ns"]),
    (["regress", "fpraker.encoder", "--sim", "xcelium"], ["invalid choice", "xcelium"]),
    (["frobnicate"], ["invalid choice"]),
])
def test_usage_and_config_errors_exit_2_with_one_line(args, needles, capsys):
    code, out, err = run(args, capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("trainfab: error:")
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    assert "Traceback" not in out + err


@pytest.mark.parametrize("body, needles", [
    ("[fpraker.encoder\nlanes = 3\n", ["malformed TOML"]),
    ("[fpraker.encoder]\nlanes = 3\nwidth = 9\n", ["unknown field 'width'"]),
    ("[fpraker.encoder]\nlanes = \"eight\"\n", ["lanes", "'eight'", "integer"]),
    ("[fpraker.encoder]\nlanes = 0\n", ["lanes", "1..64"]),
    ("[gecko.something]\nlanes = 3\n", ["no [fpraker.encoder] table"]),
])
def test_bad_config_files(tmp_path, body, needles, capsys):
    cfg = tmp_path / "bad.toml"
    cfg.write_text(body)
    code, _, err = run(["generate", "fpraker.encoder", "-c", str(cfg)], capsys)
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    for needle in needles:
        assert needle in err


def test_missing_tool_is_named_with_its_package(tmp_path):
    """With yosys/sta off PATH the area command names the Debian package; no traceback."""
    env = {**os.environ, "PATH": str(Path(sys.executable).parent), "TRAINFAB_BUILD": str(tmp_path)}
    proc = subprocess.run(TRAINFAB + ["area", "fpraker.encoder"], capture_output=True, text=True,
                          env=env, cwd=Path(__file__).parent.parent)
    assert proc.returncode == 2
    assert "yosys not found" in proc.stderr and "apt-get install yosys" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_console_script_no_traceback_on_unknown_unit():
    exe = Path(sys.executable).parent / "trainfab"
    cmd = [str(exe)] if exe.exists() else TRAINFAB
    proc = subprocess.run(cmd + ["generate", "no.such.unit"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "known units" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("sim", ["icarus", "verilator"])
def test_regress_command(sim, capsys, tmp_path, monkeypatch):
    code, out, _ = run(["regress", "fpraker.encoder", "--sim", sim, "--effort", "quick",
                        "--set", "lanes=2"], capsys)
    assert code == 0, out
    assert f"PASS fpraker.encoder [lanes=2, encoding=csd] sim={sim}" in out
    assert "1 passed, 0 failed" in out


def test_area_report(tmp_path, capsys):
    code, out, _ = run(["area", "fpraker.encoder", "-o", str(tmp_path), "--clock-ns", "5"], capsys)
    assert code == 0, out
    report = json.loads((tmp_path / "area.json").read_text())
    assert report["area_um2"] > 0 and report["cells"] > 0
    assert report["flip_flops"] > 0 and report["transistors_estimate"] > 0
    assert 0 < report["critical_path_ns"] < 5 and report["fmax_mhz"] > 200
    assert report["liberty"].endswith("osu018_stdcells.lib")
    assert "Yosys 0.23" in report["tools"]["yosys"] or report["tools"]["yosys"].startswith("Yosys")
    assert "abc -D 5000 -liberty" in report["yosys_script"]
    md = (tmp_path / "area.md").read_text()
    assert "µm²" in md and "fmax" in md


def test_area_with_explicit_liberty_path(tmp_path, capsys):
    from flows.eda.tools import OSU018
    code, out, _ = run(["area", "fpraker.encoder", "--liberty", str(OSU018), "-s", "lanes=1",
                        "-o", str(tmp_path)], capsys)
    assert code == 0, out
    assert json.loads((tmp_path / "area.json").read_text())["area_um2"] > 0


def test_bench_quick_prints_every_table(capsys, tmp_path, monkeypatch):
    import flows
    import flows.bench.gecko as gecko

    monkeypatch.setattr(flows, "BUILD", tmp_path)
    real = gecko.bench_gecko
    monkeypatch.setattr(gecko, "bench_gecko", lambda n, seed: real(n=8000, seed=seed))
    code, out, _ = run(["bench", "--quick"], capsys)
    assert code == 0
    assert "| fpraker.pe |" in out and "| baseline.bf16_pe |" in out
    assert "| N(0,1) |" in out and "| 50% zeros |" in out and "million values/min" in out
    assert (tmp_path / "bench" / "normal_8000.npy").exists()
    assert "| bfp_gemm 25x1024 . 1024x256, paper mode, mx = my = 4 |" in out
    # the training GEMMs: every format beside float32, one thread and two, at the quick shape
    assert "Training GEMMs, layer M = 25, K = 57, N = 64" in out
    for name in ("float32", "bf16", "fpraker", "hbfp8", "hbfp12", "fast", "fast-low",
                 "fast-high", "schrodinger", "bitwave"):
        assert f"| {name} | 1 |" in out and f"| {name} | 2 |" in out, name
    assert "≥ 0.02: met" in out or "≥ 0.02: missed" in out


def test_manifest_describes_struct_port_fields(tmp_path, capsys):
    """A payload port's bit fields are in the manifest: the group of a 2-lane PE is a[0..1],
    b[0..1] (16-bit bf16 words: man 7, exp 8, sign 1) and clear, LSB first."""
    code, out, _ = run(["generate", "fpraker.pe", "--set", "lanes=2", "-o", str(tmp_path)], capsys)
    assert code == 0, out
    man = json.loads((tmp_path / "fpraker_pe.json").read_text())
    ports = {p["name"]: p for p in man["ports"]}
    grp = ports["grp__payload"]
    assert grp["width"] == 2 * 2 * 16 + 1
    f = grp["fields"]
    assert (f["a"]["offset"], f["a"]["width"]) == (0, 32)
    assert (f["b"]["offset"], f["b"]["width"]) == (32, 32)
    assert (f["clear"]["offset"], f["clear"]["width"]) == (64, 1)
    assert f["b"]["fields"]["1"]["fields"]["exp"] == {"offset": 7, "width": 8}
    assert ports["acc__exp"].get("fields") is None and ports["acc__out"]["fields"]["sign"] == \
        {"offset": 15, "width": 1}


def test_area_with_a_relative_output_folder(tmp_path, capsys, monkeypatch):
    """yosys and OpenSTA run inside the output folder: a relative -o must still work."""
    monkeypatch.chdir(tmp_path)
    code, out, err = run(["area", "fpraker.encoder", "--set", "lanes=1", "-o", "rel/out"], capsys)
    assert code == 0, err
    assert (tmp_path / "rel" / "out" / "area.json").exists()


# --- numeric options: bounded before anything runs, the error names the option and its range

SEEDS = "0 to 4,294,967,295"


@pytest.mark.parametrize("args, needles", [
    (["power", "fpraker.pe", "--groups", "10000000000"], ["--groups", "1 to 100,000"]),
    (["power", "fpraker.pe", "--seed", "-1"], ["--seed", SEEDS]),
    (["study", "dispatch", "--cycles", "100000000000000"], ["--cycles", "1,000 to 10,000,000"]),
    (["study", "dispatch", "--seed", "-1"], ["--seed", SEEDS]),
    (["study", "hbfp", "--seed", "4294967296"], ["--seed", SEEDS]),
    (["regress", "fpraker.encoder", "--seed", "-1"], ["--seed", SEEDS]),
    (["demo", "--seed", "one"], ["--seed", "'one'", SEEDS]),
    (["sweep", "fpraker.encoder", "--grid", "lanes=1,2", "-j", "0"], ["--jobs", "1 to 4,096"]),
    (["sweep", "fpraker.encoder", "--grid", "lanes=1,2", "--seed", "-1"], ["--seed", SEEDS]),
    (["train", "--epochs", "0"], ["--epochs", "1 to 1,000"]),
    (["train", "--batch-size", "1e9"], ["--batch-size", "'1e9'"]),
    (["train", "-j", "1000"], ["--jobs", "1 to 64"]),
    (["train", "--limit", "5"], ["--limit", "10 to"]),
    (["train", "--seed", "-1"], ["--seed", SEEDS]),
    (["tensor-stats", "x.npy", "--lanes", "0"], ["--lanes", "1 to 64"]),
    (["tensor-stats", "x.npy", "--man-width", "100000000000000"], ["--man-width", "0 to 23"]),
    (["study", "dispatch", "--loads", "0.1:1:1e-9"], ["--loads", "at most 1,000"]),
    (["study", "dispatch", "--loads", "1:0:0.1"], ["--loads", "the start 1 is after the stop 0"]),
    (["study", "dispatch", "--loads", "0.1:nan:0.1"], ["--loads", "finite"]),
])
def test_numeric_options_are_bounded(args, needles, capsys, tmp_path):
    code, out, err = run(args + ["-o", str(tmp_path / "out")], capsys)
    assert code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("trainfab: error:"), err
    assert "internal error" not in err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    assert not (tmp_path / "out").exists()


def test_every_unit_argument_and_seed_option_has_help():
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    checked = set()
    for name, p in sub.choices.items():
        for action in p._actions:
            if action.dest in ("unit", "units", "seed") or (name == "report"
                                                          and action.dest == "liberty"):
                assert action.help, (name, action.dest)
                checked.add((name, action.dest))
    assert {("regress", "units"), ("regress", "seed"), ("area", "unit"), ("report", "liberty"),
            ("list", "unit"), ("sweep", "unit"), ("power", "unit")} <= checked


# --- trainfab list UNIT


def test_list_shows_a_units_fields(capsys):
    code, out, err = run(["list", "fpraker.encoder"], capsys)
    assert code == 0, err
    assert "lanes (int, default 8): an integer in 1..64" in out
    assert "number of independent encoder lanes" in out             # the field's #: comment
    assert "encoding (str, default csd): one of 'csd', 'binary'" in out
    assert "preset fpraker-paper" in out
    code, out, _ = run(["list", "gecko.compressor"], capsys)
    assert code == 0 and "sign_en (bool, default true): true or false [run-time input" in out
    code, _, err = run(["list", "no.such"], capsys)
    assert code == 2 and "unknown unit 'no.such'" in err


# --- regress: a unit or --all


def test_regress_needs_a_unit_or_all(capsys, passing_testbenches):
    seen = passing_testbenches
    code, _, err = run(["regress"], capsys)
    assert code == 2 and "--all" in err and len(err.strip().splitlines()) == 1 and not seen
    code, _, err = run(["regress", "fpraker.encoder", "--all"], capsys)
    assert code == 2 and "not both" in err and not seen
    code, out, err = run(["regress", "--all", "--effort", "quick"], capsys)
    assert code == 0, err
    assert sorted(unit.name for unit, _ in seen) == sorted(registry.UNITS)


# --- --set and configuration files


def test_a_field_set_twice_is_refused(capsys):
    code, _, err = run(["generate", "fpraker.encoder", "--set", "lanes=1", "--set", "lanes=2"],
                       capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "--set lanes: given twice (lanes=1 and lanes=2)" in err


@pytest.mark.parametrize("body, key", [("fpraker.encoder = 3\n", "fpraker.encoder"),
                                       ("fpraker = \"x\"\n", "fpraker")])
def test_a_unit_key_that_is_not_a_table(body, key, tmp_path, capsys):
    cfg = tmp_path / "c.toml"
    cfg.write_text(body)
    code, _, err = run(["generate", "fpraker.encoder", "-c", str(cfg)], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"{cfg}: {key} is a key with the value" in err and "not a table" in err
    assert "has no [fpraker.encoder] table" not in err


# --- area's default folder


def test_area_says_when_its_default_folder_held_another_configuration(
        tmp_path, capsys, monkeypatch):
    import flows

    monkeypatch.setattr(flows, "BUILD", tmp_path)
    code, out, err = run(["area", "fpraker.encoder", "--set", "lanes=1"], capsys)
    assert code == 0 and "note:" not in out, err
    code, out, err = run(["area", "fpraker.encoder", "--set", "lanes=1"], capsys)
    assert code == 0 and "note:" not in out, err                  # the same run again
    code, out, err = run(["area", "fpraker.encoder", "--set", "lanes=2"], capsys)
    assert code == 0, err
    assert (f"note: this replaced the report of another run of fpraker.encoder in "
            f"{tmp_path / 'area' / 'fpraker.encoder'} (lanes=1)") in out
    assert json.loads((tmp_path / "area" / "fpraker.encoder" / "area.json").read_text()
                      )["config"]["lanes"] == 2


def test_an_interrupted_elaboration_ends_with_one_line():
    """Ctrl-C while a design is being built leaves elaboratables it never used; Amaranth's
    warning about each of them (thousands for a large tile) is not printed after the line."""
    script = "\n".join([
        "import sys",
        "import flows.cli",
        "from amaranth.hdl import Elaboratable, Module, UnusedElaboratable",
        "UnusedElaboratable._MustUse__silence = False  # as after a first elaboration",
        "class Block(Elaboratable):",
        "    def elaborate(self, platform):",
        "        return Module()",
        "def interrupted_generate(args):",
        "    blocks = [Block() for _ in range(3)]  # built, never used: the run stops here",
        "    raise KeyboardInterrupt",
        "import flows.commands.generate",
        "flows.commands.generate.run = interrupted_generate",
        "sys.argv = ['trainfab', 'generate', 'fpraker.encoder']",
        "sys.exit(flows.cli.main())",
    ])
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=Path(__file__).parent.parent, timeout=300)
    assert proc.returncode == 130 and proc.stderr.strip() == "trainfab: interrupted", proc.stderr

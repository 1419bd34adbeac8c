"""The trainfab CLI: listing, generation, configuration errors, regressions, area reports."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from flows import registry
from flows.cli import main

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
    import flows.families.gecko as gecko

    monkeypatch.setattr(flows, "BUILD", tmp_path)
    real = gecko.bench_gecko
    monkeypatch.setattr(gecko, "bench_gecko", lambda n, seed: real(n=8000, seed=seed))
    code, out, _ = run(["bench", "--quick"], capsys)
    assert code == 0
    assert "| fpraker.pe |" in out and "| baseline.bf16_pe |" in out
    assert "| N(0,1) |" in out and "| 50% zeros |" in out and "million values/min" in out
    assert (tmp_path / "bench" / "normal_8000.npy").exists()
    assert "| bfp_gemm 25x1024 . 1024x256, paper mode, mx = my = 4 |" in out


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

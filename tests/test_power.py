"""``trainfab power``: cell models from liberty functions, VCD toggle counting, one real
end-to-end run (yosys → gate-level cocotb run on Icarus → OpenSTA) on a small PE, and the
one-line errors."""

import itertools
import json
import re

import numpy as np
import pytest

from flows import FlowError
from flows.cli import main
from flows.eda.power_cells import expression, parse_cells
from flows.eda.power_vcd import activity
from flows.eda.tools import OSU018

needs_tools = pytest.mark.skipif(not OSU018.is_file(), reason="OSU018 liberty not installed")


def _eval(verilog_expr: str, env: dict) -> int:
    py = verilog_expr.replace("1'b0", "0").replace("1'b1", "1").replace("~", "1^")
    return eval(py, {}, dict(env)) & 1


@pytest.mark.parametrize("func, truth", [
    ("(!((S A) + (!S B)))", lambda A, B, S: 1 - (A if S else B)),      # OSU018 MUX2X1
    ("(!((A B)+C))", lambda A, B, C: 1 - ((A & B) | C)),               # AOI21X1
    ("(!((A+B) (C+D)))", lambda A, B, C, D: 1 - ((A | B) & (C | D))),  # OAI22X1
    ("A' ^ B * C | 0", lambda A, B, C: ((1 - A) ^ B) & C),             # ' and ^ bind tighter
    ("(((A B)+(B C))+(C A))", lambda A, B, C: int(A + B + C >= 2)),    # FAX1 carry
])
def test_liberty_functions_become_verilog(func, truth):
    names = re.findall(r"[A-Z]", func)
    pins = sorted(set(names))
    v = expression(func, set(pins))
    for bits in itertools.product((0, 1), repeat=len(pins)):
        env = dict(zip(pins, bits))
        assert _eval(v, env) == truth(**env), (func, v, env)


def test_liberty_function_errors():
    with pytest.raises(ValueError):
        expression("(A B", {"A", "B"})
    with pytest.raises(ValueError):
        expression("A Q", {"A", "B"})


@needs_tools
def test_osu018_cells_parse():
    cells = parse_cells(OSU018, {"DFFPOSX1", "DFFSR", "NAND2X1", "TBUFX1", "LATCH"})
    assert cells["DFFPOSX1"]["storage"][0]["clocked_on"] == "CLK"
    assert cells["DFFSR"]["storage"][0]["clear"] == "(!R)"
    assert cells["NAND2X1"]["pins"]["Y"]["function"] == "(!(A B))"
    assert cells["TBUFX1"]["pins"]["Y"]["three_state"] == "(!EN)"
    assert cells["LATCH"]["storage"][0]["kind"] == "latch"
    with pytest.raises(FlowError, match="no cell NOPE"):
        parse_cells(OSU018, {"NOPE"})


VCD = """$timescale 1ps $end
$scope module top $end
$var wire 1 ! clk $end
$scope module u1 $end
$var wire 1 " A $end
$var wire 1 # Y $end
$upscope $end
$upscope $end
$enddefinitions $end
#0
0!
x"
x#
#5
1!
0"
1#
#10
0!
1"
0"
#15
1!
1"
0#
#20
0!
#25
1!
0"
"""


def test_vcd_activity_counts_net_changes_per_step(tmp_path):
    path = tmp_path / "t.vcd"
    path.write_text(VCD)
    got = activity(path, 0, 20, lambda scope, name: True)
    # clk: rises at 5 and 15, falls at 10 and 20 → 4 transitions; high 10 of 20 ps
    assert got[(("top",), "clk")] == (4, 10, 20)
    # A: x→0 at 5 (not a transition), 1 then back to 0 within #10 (no net change), 0→1 at 15
    assert got[(("top", "u1"), "A")] == (1, 5, 15)
    # Y: x→1 at 5, 1→0 at 15 → 1 transition, high 10 ps of 15 known
    assert got[(("top", "u1"), "Y")] == (1, 10, 15)
    # a window starting at 5 leaves out the transitions at 5 and counts the one at 25
    late = activity(path, 5, 30, lambda scope, name: name == "A")
    assert late == {(("top", "u1"), "A"): (2, 10, 25)}


@needs_tools
def test_power_end_to_end_small_pe(tmp_path, capsys):
    out = tmp_path / "power"
    code = main(["power", "baseline.bf16_pe", "--set", "lanes=1", "--groups", "16",
                 "--seed", "3", "-o", str(out)])
    printed = capsys.readouterr().out
    assert code == 0, printed
    r = json.loads((out / "power.json").read_text())
    assert (out / "power.md").read_text().startswith("# Power: baseline.bf16_pe")
    for key in ("total_mw", "internal_mw", "switching_mw", "leakage_mw", "energy_per_group_pj",
                "clock_ns", "activity_source", "annotation", "propagated_estimate_mw"):
        assert key in r, key
    assert r["clock_ns"] == 10.0
    assert r["internal_mw"] > 0 and r["switching_mw"] > 0 and r["leakage_mw"] > 0
    assert r["total_mw"] == pytest.approx(r["internal_mw"] + r["switching_mw"] + r["leakage_mw"],
                                          abs=2e-6)
    assert r["total_mw"] == pytest.approx(r["sequential_mw"] + r["combinational_mw"], abs=2e-6)
    src = r["activity_source"]
    # one group per cycle: the window is exactly the 16 groups, each checked by the testbench
    assert src["cycles"] == 16 and src["testbench_facts"]["groups"] == 16
    assert src["operands"]["kind"] == "synthetic" and src["operands"]["seed"] == 3
    assert src["operands"]["a_zero_fraction"] > 0      # ReLU zeros on the A side
    # real data moves: the mean activity is well between nothing and every pin every cycle
    assert 0.02 < src["mean_activity"] < 1.0
    # every cell pin is in the dump and the baseline resets or writes every flip-flop in the
    # window, so only pins stuck at x for the whole window could lack activity: allow a handful
    assert r["annotation"]["pin_fraction"] >= 0.99 and r["annotation"]["net_fraction"] >= 0.99
    # the simulated power lies below OpenSTA's every-pin-toggles-every-cycle figure
    assert r["total_mw"] < r["opensta_global_activity_mw"]["1.0"]
    energy = r["total_mw"] * 1e-3 * src["cycles"] * r["clock_ns"] * 1e-9 / 16 * 1e12
    assert r["energy_per_group_pj"] == pytest.approx(energy, rel=1e-3)
    assert "mW at 10 ns" in printed and "synthetic operands" in printed


def test_operand_shapes_take_lanes_or_group():
    from dataclasses import dataclass

    from flows.eda.power import group_width, operand_shapes, synthetic_operands
    from golden.baseline import BaselineTileConfig, MAC16Config
    from golden.fast.fmac import FMACConfig

    assert operand_shapes(MAC16Config(fmt="int8", lanes=3), 5) == {"a": (5, 3), "b": (5, 3)}
    # fast.fmac has no lanes: its BFP group width is the group's
    assert group_width(FMACConfig(group=4)) == 4
    assert operand_shapes(FMACConfig(group=4, m_max=4), 7) == {"a": (7, 4), "b": (7, 4)}
    assert operand_shapes(BaselineTileConfig(rows=2, cols=3, lanes=4), 5) == \
        {"a": (3, 5, 4), "b": (2, 5, 4)}
    ops = synthetic_operands(FMACConfig(group=4), 16, 1)
    assert ops["a"].shape == ops["b"].shape == (16, 4) and ops["dot_groups"] == 8

    @dataclass(frozen=True)
    class NoGroups:
        width: int = 4

    with pytest.raises(FlowError, match="neither a 'lanes' nor a 'group'"):
        operand_shapes(NoGroups(), 4)


def _small_run(tmp_path, capsys, argv) -> dict:
    out = tmp_path / "power"
    code = main(["power", *argv, "-o", str(out)])
    printed = capsys.readouterr().out
    assert code == 0, printed
    return json.loads((out / "power.json").read_text())


@needs_tools
def test_power_small_mac16_int8(tmp_path, capsys):
    """Two int8 MAC lanes: bf16 operands scaled per group into int8 (golden.baseline.
    mac16_operands), one group per cycle, every accumulator checked on the netlist."""
    r = _small_run(tmp_path, capsys, ["baseline.mac16", "--set", "fmt=int8", "--set", "lanes=2",
                                      "--groups", "8"])
    src = r["activity_source"]
    assert r["config"]["fmt"] == "int8"
    assert src["cycles"] == 8 and src["operands"]["a_shape"] == [8, 2]
    assert src["testbench_facts"] == {"groups": 8, "busy_cycles": 8, "dot_products": 1,
                                      "fmt": "int8"}
    assert r["total_mw"] > 0 and r["annotation"]["pin_fraction"] >= 0.99
    assert 0.02 < src["mean_activity"] < 1.0


@needs_tools
def test_power_small_fmac(tmp_path, capsys):
    """An fMAC of 4-element groups: bf16 operands converted to 4-bit BFP, pairs back to back
    (four rounds each), every cycle checked on the netlist against the cycle model."""
    r = _small_run(tmp_path, capsys, ["fast.fmac", "--set", "group=4", "--set", "m_max=4",
                                      "--groups", "8"])
    src = r["activity_source"]
    facts = src["testbench_facts"]
    assert src["operands"]["a_shape"] == [8, 4] and src["operands"]["b_shape"] == [8, 4]
    assert facts == {"groups": 8, "busy_cycles": 32, "mantissa_bits": 4, "dot_products": 1}
    # the pairs' 32 rounds, the cycle the first pair is offered and the one in which the
    # accumulator shows the last result
    assert src["cycles"] == 34
    assert r["total_mw"] > 0 and r["annotation"]["pin_fraction"] >= 0.99


def _error_line(capsys, argv) -> str:
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and err.startswith("trainfab: error: "), err
    return err


def test_power_errors_are_one_line(tmp_path, capsys):
    assert "nosuch.unit" in _error_line(capsys, ["power", "nosuch.unit"])
    for bad in ("0", "-1", "abc", "nan"):
        assert "--clock-ns" in _error_line(capsys, ["power", "baseline.bf16_pe",
                                                    "--clock-ns", bad])
    text = tmp_path / "ops.npz"
    text.write_text("not an archive")
    assert "cannot read" in _error_line(capsys, ["power", "baseline.bf16_pe",
                                                 "--operands", str(text)])
    assert "no such file" in _error_line(capsys, ["power", "baseline.bf16_pe", "--operands",
                                                  str(tmp_path / "missing.npz")])
    shaped = tmp_path / "shape.npz"
    np.savez(shaped, a=np.zeros((16, 3), np.uint16), b=np.zeros((16, 3), np.uint16))
    err = _error_line(capsys, ["power", "baseline.bf16_pe", "--operands", str(shaped)])
    assert "(16, 3)" in err and "(groups, 8)" in err
    nan = tmp_path / "nan.npz"
    np.savez(nan, a=np.full((8, 8), 0x7FC0, np.uint16), b=np.zeros((8, 8), np.uint16))
    assert "Inf/NaN" in _error_line(capsys, ["power", "baseline.bf16_pe", "--operands", str(nan)])
    missing = tmp_path / "missing_b.npz"
    np.savez(missing, a=np.zeros((8, 8), np.uint16))
    assert "no array 'b'" in _error_line(capsys, ["power", "baseline.bf16_pe",
                                                  "--operands", str(missing)])
    # a unit whose testbench does not implement the contract
    assert "power_run" in _error_line(capsys, ["power", "fpraker.encoder"])

"""``trainfab paths``: the worst path between register groups of a synthesized unit, read back
from an area run's netlist with OpenSTA (a real synthesis of a one-lane int8 MAC, about a
second)."""

import json

import pytest

from flows import FlowError, registry
from flows.cli import main
from flows.eda import paths
from flows.eda.synth import area


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A one-lane int8 MAC with one stage in front of its accumulator: registers
    ``product0_p_d1`` (the registered product) and ``acc__0`` (the accumulator loop)."""
    unit = registry.get("baseline.mac16")
    folder = tmp_path_factory.mktemp("mac") / "area"
    report = area(unit, unit.make_config(fmt="int8", lanes=1, pipeline=1), outdir=folder,
                  progress=False)
    return folder, report


def test_paths_name_the_loop_and_the_stage_in_front_of_it(run):
    folder, report = run
    assert paths.registers((folder / "baseline_mac16.mapped.v").read_text()) == [
        "acc__0", "product0_clear_d1", "product0_p_d1", "product0_valid_d1"]
    loop, stage, back = paths.paths(folder, [("acc__0*", "acc__0*"),
                                             ("product0_p_d1*", "acc__0*"),
                                             ("acc__0*", "product0_p_d1*")])
    assert loop["start"].startswith("acc__0[") and loop["end"].startswith("acc__0[")
    assert stage["start"].startswith("product0_p_d1[") and stage["end"].startswith("acc__0[")
    # no path from the accumulator back into the stage register
    assert back["ns"] is None and back["start"] is None
    # each path is at most the unit's critical path, which is one of the pairs' or another
    for r in (loop, stage):
        assert 0 < r["ns"] <= report["critical_path_ns"] + 1e-3
        assert r["mhz"] == pytest.approx(1000 / r["ns"], rel=1e-3)
    text = paths.table([loop, stage, back])
    assert "| `acc__0*` | `product0_p_d1*` | no path | | |" in text


def test_paths_cli_prints_json_and_refuses_bad_input(run, tmp_path, capsys):
    folder, _ = run
    assert main(["paths", str(folder), "--between", "acc__0*", "acc__0*", "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert row["from"] == "acc__0*" and row["ns"] > 0
    assert main(["paths", str(folder), "--between", "nothing*", "acc__0*"]) == 2
    err = capsys.readouterr().err
    assert "no cell of baseline_mac16.mapped.v matches 'nothing*'" in err and "acc__0" in err
    assert main(["paths", str(tmp_path), "--between", "a", "b"]) == 2
    assert "no area.json" in capsys.readouterr().err
    with pytest.raises(FlowError, match="braces"):
        paths.script({"top": "t", "liberty": "l", "clock_ns": 1.0, "has_clock": True}, "n",
                     [("a{", "b")])


# --------------------------------------------------------------------------------------------
# --max-fanout: buffer trees on the nets flip-flops drive


def _netlist(loads: int) -> str:
    """A flip-flop driving ``loads`` inverters (and the clock, which stays unbuffered)."""
    cells = ["  DFFPOSX1 \\q_reg  (\n    .CLK(clk),\n    .D(d),\n    .Q(\\q$1[0] )\n  );"]
    cells += [f"  INVX1 _{k}_ (\n    .A(\\q$1[0] ),\n    .Y(y[{k}])\n  );" for k in range(loads)]
    return (f"module t(clk, d, y);\n  input clk;\n  input d;\n  output [{loads - 1}:0] y;\n"
            "  wire \\q$1[0] ;\n" + "\n".join(cells) + "\nendmodule\n")


def _drivers(text: str) -> dict:
    """Each net's driving instance and every instance's input net, from a mapped netlist."""
    import re

    driver, source = {}, {}
    for name, body in re.findall(r"^\s*\w+\s+(\S+)\s*\(\n(.*?)\n\s*\);", text, re.M | re.S):
        for pin, net in re.findall(r"\.(\w+)\(([^\n]*?)\s*\)", body):
            if pin in ("Y", "Q"):
                driver[net] = name
            elif pin in ("A", "D"):
                source[name] = net
    return driver, source


# 300 loads: 19 buffers of 16 (the last 12), then 2 driving those 19
@pytest.mark.parametrize("loads, fanout, buffers, levels", [(40, 16, 3, 1), (300, 16, 21, 2),
                                                            (16, 16, 0, 0)])
def test_buffer_trees_drive_every_load_from_its_net_within_the_fanout(loads, fanout, buffers,
                                                                      levels):
    from flows.eda.fanout import buffer_fanout
    from flows.eda.tools import liberty as find_liberty

    text, added = buffer_fanout(_netlist(loads), find_liberty("osu018"), fanout)
    assert (added["buffers"], added["levels"], added["largest_fanout"]) == (buffers, levels,
                                                                            loads)
    assert added["buffer"] == "BUFX4" and added["area_um2"] == 32.0 * buffers
    driver, source = _drivers(text)
    # every inverter reaches the flip-flop's net through buffers only, at most `levels` deep
    for k in range(loads):
        net, depth = source[f"_{k}_"], 0
        while net != "\\q$1[0]":
            assert driver[net].startswith("_fanout_buf")
            net, depth = source[driver[net]], depth + 1
        assert depth == levels
    # no net drives more than `fanout` pins, the clock and the input are untouched
    count = {}
    for name, net in source.items():
        count[net] = count.get(net, 0) + 1
    assert max(count.values()) <= fanout
    assert "    .CLK(clk)," in text and "    .D(d)," in text


def test_buffer_trees_refuse_a_buffered_netlist_and_a_fanout_below_two():
    from flows.eda.fanout import buffer_fanout
    from flows.eda.tools import liberty as find_liberty

    lib = find_liberty("osu018")
    text, _ = buffer_fanout(_netlist(40), lib, 16)
    with pytest.raises(FlowError, match="already has fanout buffer trees"):
        buffer_fanout(text, lib, 16)
    with pytest.raises(FlowError, match="must be an integer from 2 to 10,000"):
        buffer_fanout(_netlist(4), lib, 1)


def test_paths_with_max_fanout_time_both_netlists(run, capsys):
    folder, report = run
    rows, summary = paths.paths(folder, [("acc__0*", "acc__0*")], max_fanout=2)
    [row] = rows
    assert summary["buffering"]["buffers"] > 0 and summary["buffering"]["max_fanout"] == 2
    assert summary["design"]["critical_path_ns"] == pytest.approx(report["critical_path_ns"],
                                                                  abs=1e-3)
    assert row["buffered"]["ns"] > 0 and summary["design_buffered"]["critical_path_ns"] > 0
    assert main(["paths", str(folder), "--between", "acc__0*", "acc__0*",
                 "--max-fanout", "2"]) == 0
    out = capsys.readouterr().out
    assert "| with fanout ≤ 2 |" in out and "| `(whole design)` |" in out
    assert "BUFX4 cells" in out
    assert main(["paths", str(folder), "--between", "acc__0*", "acc__0*",
                 "--max-fanout", "1"]) == 2
    assert "--max-fanout 1: must be an integer from 2 to 10,000" in capsys.readouterr().err


def test_area_with_max_fanout_times_the_buffered_netlist(tmp_path, capsys):
    """``area --max-fanout``: the area adds the buffers, the netlist as mapped stays beside the
    buffered one, and ``paths`` reads the buffered netlist (and will not buffer it again)."""
    unit = registry.get("baseline.mac16")
    cfg = unit.make_config(fmt="int8", lanes=1, pipeline=1)
    folder = tmp_path / "buffered"
    r = area(unit, cfg, outdir=folder, progress=False, max_fanout=4)
    b = r["fanout_buffers"]
    assert b["max_fanout"] == 4 and b["buffers"] > 0 and b["nets"] > 0
    assert r["area_um2"] == pytest.approx(r["area_um2_as_mapped"] + b["area_um2"])
    assert r["cells_by_type"]["BUFX4"] >= b["buffers"]
    mapped = (folder / "baseline_mac16.mapped.v").read_text()
    assert "_fanout_buf1_" in mapped
    assert "_fanout_buf" not in (folder / "baseline_mac16.unbuffered.mapped.v").read_text()
    assert "fanout buffer trees (`--max-fanout 4`)" in (folder / "area.md").read_text()
    [row] = paths.paths(folder, [("acc__0*", "acc__0*")])
    assert row["ns"] > 0
    with pytest.raises(FlowError, match="already has fanout buffer trees"):
        paths.paths(folder, [("acc__0*", "acc__0*")], max_fanout=4)


def test_max_fanout_out_of_range_is_refused_before_synthesis(tmp_path, capsys):
    for argv in (["area", "baseline.mac16", "--max-fanout", "1", "-o", str(tmp_path / "a")],
                 ["close", "baseline.mac16", "--clock-ns", "5", "--max-fanout", "20000",
                  "-o", str(tmp_path / "c")]):
        assert main(argv) == 2
        out, err = capsys.readouterr()
        assert "must be an integer from 2 to 10,000" in err and "synthesizing" not in out
        assert not (tmp_path / argv[-1]).exists()

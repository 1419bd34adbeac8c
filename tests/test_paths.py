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

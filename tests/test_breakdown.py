"""``trainfab area --breakdown``: area per block of a hierarchical synthesis.

The blocks must sum to the hierarchical total, name the requested instances (their descendants
included) and a ``(rest)`` entry for every ancestor, and leave the flattened figures unchanged.
Small designs only: the term encoder at two lanes and a toy three-level component.
"""

import dataclasses
import json

import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from flows import FlowError, registry
from flows.cli import main
from flows.declare import SynthPlan, Unit
from flows.eda.breakdown import breakdown_blocks
from flows.eda.synth import area


class Leaf(wiring.Component):
    """A register of ``width`` bits loading ``d + 1``."""

    def __init__(self, width):
        super().__init__({"d": In(width), "q": Out(width)})

    def elaborate(self, platform):
        m = Module()
        m.d.sync += self.q.eq(self.d + 1)
        return m


class Mid(wiring.Component):
    """Two leaves ``x`` and ``y`` on separate input bits and an XOR of their outputs (own
    cells)."""

    def __init__(self):
        super().__init__({"d": In(10), "q": Out(6)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.x = x = Leaf(4)
        m.submodules.y = y = Leaf(6)
        m.d.comb += [x.d.eq(self.d[:4]), y.d.eq(self.d[4:]), self.q.eq(x.q ^ y.q)]
        return m


class Toy(wiring.Component):
    """``a`` (a :class:`Mid`) and ``b`` (an 8-bit leaf), their outputs added at the top."""

    def __init__(self, cfg=None):
        super().__init__({"d": In(18), "q": Out(9)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.a = a = Mid()
        m.submodules.b = b = Leaf(8)
        m.d.comb += [a.d.eq(self.d[:10]), b.d.eq(self.d[10:]), self.q.eq(a.q + b.q)]
        return m


@dataclasses.dataclass(frozen=True)
class ToyConfig:
    pass


TOY = Unit(name="toy.nest", summary="a toy hierarchy", config="test_breakdown:ToyConfig",
           component="tests:Toy", testbench="", preset="")


def _check_sums(r):
    blocks = r["breakdown"]
    assert sum(b["area_um2"] for b in blocks) == pytest.approx(r["hierarchical_area_um2"], abs=1e-3)
    assert all(b["area_um2"] >= 0 for b in blocks)


def test_toy_hierarchy_blocks_and_rests(tmp_path):
    unit = dataclasses.replace(TOY, synth=SynthPlan(breakdown=("a.x", "b")))
    r = area(unit, ToyConfig(), outdir=tmp_path, factory=Toy, breakdown=True)
    blocks = {b["block"]: b for b in r["breakdown"]}
    assert [b["block"] for b in r["breakdown"]] == ["a.x", "b", "a (rest)", "(top)"]
    _check_sums(r)
    # x holds 4 flip-flops, b 8; a's rest holds y's 6; the top has none
    assert [blocks[n]["flip_flops"] for n in ("a.x", "b", "a (rest)", "(top)")] == [4, 8, 6, 0]
    assert all(blocks[n]["area_um2"] > 0 for n in blocks)
    md = (tmp_path / "area.md").read_text()
    assert "| a (rest) |" in md and "Area by block" in md


def test_toy_default_blocks_are_the_top_children(tmp_path):
    r = area(TOY, ToyConfig(), outdir=tmp_path, factory=Toy, breakdown=True)
    assert [b["block"] for b in r["breakdown"]] == ["a", "b", "(top)"]
    assert [b["flip_flops"] for b in r["breakdown"]] == [10, 8, 0]
    _check_sums(r)


def test_encoder_breakdown_through_the_cli(tmp_path, capsys):
    code = main(["area", "fpraker.encoder", "--set", "lanes=2", "--breakdown", "-o",
                 str(tmp_path / "b")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "| lane0 |" in out and "| lane1 |" in out and "| (top) |" in out
    r = json.loads((tmp_path / "b" / "area.json").read_text())
    assert [b["block"] for b in r["breakdown"]] == ["lane0", "lane1", "(top)"]
    assert [b["flip_flops"] for b in r["breakdown"]] == [17, 17, 0]
    assert r["flip_flops"] == 34
    _check_sums(r)
    for b in r["breakdown"]:
        assert b["area_ge"] == pytest.approx(b["area_um2"] / r["ge_um2"], abs=0.05)
    # the flattened figures are those of a run without --breakdown
    unit = registry.get("fpraker.encoder")
    flat = area(unit, unit.make_config(lanes=2), outdir=tmp_path / "f")
    assert "breakdown" not in flat and "hierarchical_area_um2" not in flat
    for key in ("area_um2", "cells", "flip_flops", "transistors_estimate", "critical_path_ns"):
        assert r[key] == flat[key], key
    assert (r["yosys_script"].replace(str(tmp_path / "b"), "")
            == flat["yosys_script"].replace(str(tmp_path / "f"), ""))


@pytest.mark.parametrize("paths, needles", [
    (("lane0", "lane7"), ["breakdown block 'lane7'", "not an instance", "lane0, lane1"]),
    (("core",), ["breakdown block 'core'"]),
])
def test_missing_breakdown_path_is_a_flow_error(paths, needles, tmp_path):
    unit = dataclasses.replace(registry.get("fpraker.encoder"), synth=SynthPlan(breakdown=paths))
    with pytest.raises(FlowError) as e:
        area(unit, unit.make_config(lanes=2), outdir=tmp_path, breakdown=True)
    for needle in needles:
        assert needle in str(e.value)
    assert not (tmp_path / "yosys.log").exists()  # checked before any synthesis


def test_nested_breakdown_paths_are_a_flow_error(tmp_path):
    unit = dataclasses.replace(TOY, synth=SynthPlan(breakdown=("a", "a.x")))
    with pytest.raises(FlowError, match="'a' and 'a.x' are nested"):
        area(unit, ToyConfig(), outdir=tmp_path, factory=Toy, breakdown=True)


def test_breakdown_blocks_of_a_given_hierarchy():
    """Instance counts multiply; a listed block that synthesis removed gets zeros."""
    def mod(area_um2, cells, flops, **children):
        return {"area_um2": area_um2, "cells": cells, "flip_flops": flops,
                "children": {f"t.{k.replace('_', '.')}": n for k, n in children.items()}}

    modules = {"t": mod(1.0, 1, 0, p=1, q=1), "t.p": mod(10.0, 5, 2, p_r=2, p_s=1),
               "t.p.r": mod(3.0, 2, 1), "t.p.s": mod(4.0, 3, 0), "t.q": mod(7.0, 4, 3)}
    blocks = breakdown_blocks(modules, "t", ("p.s", "gone"))
    assert blocks == [
        {"block": "p.s", "area_um2": 4.0, "cells": 3, "flip_flops": 0},
        {"block": "gone", "area_um2": 0.0, "cells": 0, "flip_flops": 0},
        {"block": "p (rest)", "area_um2": 16.0, "cells": 9, "flip_flops": 4},
        {"block": "(top)", "area_um2": 8.0, "cells": 5, "flip_flops": 3},
    ]
    assert sum(b["area_um2"] for b in breakdown_blocks(modules, "t")) == 1 + 10 + 6 + 4 + 7


def test_pattern_blocks_are_summed_per_label():
    """Breakdown patterns (the tiles' ``pe*.lanes``) expand to every instance, and the entries
    are summed under labels with the instance indices replaced by ``*``."""
    from flows.eda.breakdown import block_label, group_blocks

    assert [block_label(b) for b in ("pe3_1.lanes", "col12 (rest)", "xb0_3", "(top)",
                                     "core.lanes")] == [
        "pe*.lanes", "col* (rest)", "xb*", "(top)", "core.lanes"]
    blocks = [{"block": "pe0_0.lanes", "area_um2": 1.5, "cells": 2, "flip_flops": 0},
              {"block": "pe0_1.lanes", "area_um2": 2.5, "cells": 3, "flip_flops": 0},
              {"block": "pe0_0 (rest)", "area_um2": 4.0, "cells": 5, "flip_flops": 7},
              {"block": "(top)", "area_um2": 1.0, "cells": 1, "flip_flops": 1}]
    assert group_blocks(blocks) == [
        {"block": "pe*.lanes", "area_um2": 4.0, "cells": 5, "flip_flops": 0, "instances": 2},
        {"block": "pe* (rest)", "area_um2": 4.0, "cells": 5, "flip_flops": 7, "instances": 1},
        {"block": "(top)", "area_um2": 1.0, "cells": 1, "flip_flops": 1, "instances": 1}]


@pytest.mark.parametrize("pipeline, blocks", [
    (0, ("encoder", "core.operands", "core.exponent", "core.lanes", "core.accumulator")),
    (3, ("lanes", "accumulator")),
])
def test_the_fpraker_pe_blocks_follow_its_configuration(pipeline, blocks):
    """The one-context PE reports its encoder and its core's blocks, the interleaved PE (no
    core: its encoder lanes and control are rings at its top) its lanes and accumulator; each
    path is an instance of that configuration's design."""
    from flows.eda.generate import convert
    from flows.eda.breakdown import check_breakdown_paths

    unit = registry.get("fpraker.pe")
    cfg = unit.make_config(None, lanes=2, int_bits=4, pipeline=pipeline)
    assert unit.breakdown_paths(cfg) == blocks
    text, _ = convert(unit, cfg)
    assert check_breakdown_paths(unit, text, cfg) == blocks

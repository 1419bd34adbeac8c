"""Families declared in one file each (flows/families/) and what the flows take from them: units
and their test configurations, reports' parts and ratios, benches, tensor analyses, and the
testbench run parameters (effort sizes, simulator, manifest)."""

import json
import textwrap
import types

import numpy as np
import pytest

from flows import FlowError, families, registry, report
from flows.eda import simulate
from flows.cli import main
from flows.declare import EFFORTS, Comparison, Unit


def test_families_are_discovered_in_a_fixed_order():
    names = [families.family_name(m) for m in families.modules()]
    assert names[:3] == ["fpraker", "baseline", "gecko"]
    assert sorted(names) == sorted(families.FAMILIES)
    assert list(registry.UNITS)[:7] == ["fpraker.encoder", "fpraker.pe", "fpraker.tile",
                                        "fpraker.bdc_encoder", "fpraker.bdc_decoder",
                                        "fpraker.bdc_loopback", "baseline.bf16_pe"]
    for unit in registry.UNITS.values():
        assert unit.family in names


def test_declarations_reach_the_flows():
    assert {p.name for p in families.parts()} >= {"fpraker.pe/core"}
    numerators = {c.numerator for c in families.comparisons()}
    assert {"fpraker.pe/core", "fpraker.pe", "gecko.decompressor"} <= numerators
    known = set(registry.UNITS) | {p.name for p in families.parts()}
    for c in families.comparisons():
        assert c.numerator in known and c.denominator in known, c.label
    papers = report.paper_figures()
    assert papers["fpraker.pe/core"].startswith("4,752") and "gecko.compressor" in papers
    assert [b.name for b in families.benches()][:4] == ["fpraker.pe", "fpraker.tile",
                                                       "fpraker.exp_modes", "gecko"]
    assert [a.name for a in families.tensor_analyses()] == ["bdc", "gecko", "hbfp"]
    assert [a.name for a in families.tensor_analyses() if a.default] == ["gecko"]


def test_comparison_ratios_counts_and_shares():
    areas = {"a": 30.0, "b": 10.0}
    ratio = Comparison(label="r", numerator="a", denominator="b", paper_ratio=1, source="")
    assert ratio.ours(areas) == 3.0
    many = Comparison(label="m", numerator="a", denominator="b", paper_ratio=1, source="",
                             denominator_count=6)
    assert many.ours(areas) == 0.5
    share = Comparison(label="s", numerator="a", denominator="b", paper_ratio=1,
                              source="", denominator_count=7, share=True)
    assert share.ours(areas) == 0.3
    text = report.tables._ratio_section({"fast.converter": 30.0, "fast.array/cell": 10.0})
    assert "| converter share of converter + 16 x 16 fMAC array (256 cells) | 0.012 | 0.046 |" \
        in text


@pytest.mark.parametrize("unit_name", sorted(registry.UNITS))
def test_unit_declarations_are_valid(unit_name):
    unit = registry.get(unit_name)
    configs = unit.test_configs()
    assert configs[0] == ("default", unit.config_class()())
    assert len(configs) == 1 + len(unit.tests.configs)
    assert len({repr(cfg) for _, cfg in configs}) == len(configs)
    # the full effort adds its own configurations after those, each a new one
    full = unit.test_configs(effort="full")
    assert full[:len(configs)] == configs
    assert len(full) == len(configs) + len(unit.tests.full_configs)
    unit.make_config(**unit.synth.small)
    assert set(unit.tests.sizes) == set(EFFORTS)
    sizes = [unit.tests.sizes[e] for e in EFFORTS]
    assert sizes == sorted(sizes) and sizes[0] > 0
    assert unit.tests.sim in simulate.SIMULATORS


def test_units_follow_the_layout():
    """Every unit's classes resolve through the layout ``golden|hdl|tb/<family>/<unit>.py``:
    the configuration class and the component live in their family's packages, the testbench
    is ``tb/<family>/<unit>.py``; only the shared library (``common``), whose modules are named
    by what they hold, spells module paths."""
    import importlib.util
    from pathlib import Path

    root = Path(registry.__file__).resolve().parents[1]
    for unit in registry.UNITS.values():
        explicit = [f for f in (unit.config, unit.component, unit.testbench)
                    if ":" in f or (f and f == unit.testbench)]
        assert not explicit or unit.family == "common", (unit.name, explicit)
        assert unit.config_class().__module__.startswith(f"golden.{unit.family}."), unit.name
        assert unit.component_factory().__module__.startswith(f"hdl.{unit.family}."), unit.name
        spec = importlib.util.find_spec(unit.testbench_module)
        assert spec is not None, unit.name
        assert Path(spec.origin).resolve().parent == root / "tb" / unit.family, unit.name
    for part in families.parts():
        if part.component:
            assert ":" not in part.component, part.name
            assert part.component_factory().__module__.startswith(
                f"hdl.{part.unit.split('.')[0]}."), part.name


def test_test_configs_labels_base_and_duplicates():
    unit = registry.get("fpraker.encoder")
    base = unit.make_config(lanes=3)
    assert [(label, cfg.lanes, cfg.encoding) for label, cfg in unit.test_configs(base)] == [
        ("default", 3, "csd"), ("lanes=3,encoding=binary", 3, "binary")]
    # a base equal to an extra configuration runs once
    same = unit.make_config(lanes=3, encoding="binary")
    assert [label for label, _ in unit.test_configs(same)] == ["default"]
    with pytest.raises(FlowError, match="fpraker.encoder: configuration lanes=0"):
        unit.make_config(lanes=0)


def test_regress_all_configs_dedupes_with_set(monkeypatch, capsys):
    runs = []

    class Result:
        passed, tests, failed = True, 1, 0

        def summary(self):
            return "PASS"

    def fake_run(unit, cfg, **kwargs):
        runs.append((unit.name, cfg, kwargs))
        return Result()

    monkeypatch.setattr(simulate, "run_testbench", fake_run)
    code = main(["regress", "fpraker.encoder", "--all-configs", "--set", "lanes=3",
                 "--set", "encoding=binary"])
    assert code == 0, capsys.readouterr().out
    assert len(runs) == 1
    assert runs[0][2]["effort"] == "standard" and runs[0][2]["sim"] is None
    runs.clear()
    assert main(["regress", "gecko.compressor", "--all-configs", "--effort", "full"]) == 0
    unit = registry.get("gecko.compressor")
    assert len(runs) == len(unit.test_configs(effort="full")) > 1
    assert all(kw["effort"] == "full" for *_, kw in runs)


class _FakeRunner:
    """Stands in for cocotb_tools' runner: records what the testbench would get."""

    calls = []

    def __init__(self):
        import logging

        self.log = logging.getLogger("fake-runner")

    def build(self, **kwargs):
        (kwargs["build_dir"] / "sim.vvp").write_text("a simulator executable")

    def test(self, **kwargs):
        self.calls.append(kwargs)


def test_runner_passes_sizes_simulator_and_manifest(monkeypatch, tmp_path):
    import cocotb_tools.runner

    monkeypatch.setattr(cocotb_tools.runner, "get_runner", lambda sim: _FakeRunner())
    _FakeRunner.calls.clear()
    unit = registry.get("fpraker.encoder")
    cfg = unit.make_config(lanes=2)
    for effort in EFFORTS:
        result = simulate.run_testbench(unit, cfg, effort=effort, build_root=tmp_path)
        assert result.sim == unit.tests.sim
    envs = [call["extra_env"] for call in _FakeRunner.calls]
    assert [e["TRAINFAB_TEST_SIZE"] for e in envs] == [str(unit.tests.sizes[e]) for e in EFFORTS]
    assert [e["TRAINFAB_EFFORT"] for e in envs] == list(EFFORTS)
    man_path = envs[0]["TRAINFAB_MANIFEST"]
    assert man_path.endswith("fpraker_encoder.json")
    from pathlib import Path

    from flows.eda.generate import manifest, port_fields
    source = Path(man_path).with_suffix(".v")
    man = json.loads(Path(man_path).read_text())
    assert man == manifest(unit, cfg, source.read_text(), port_fields(unit, cfg))
    assert {p["name"] for p in man["ports"]} >= {"clk", "rst", "sig__0", "sig__1", "terms__tp__1"}
    with pytest.raises(FlowError, match="unknown effort 'huge'"):
        simulate.run_testbench(unit, cfg, effort="huge", build_root=tmp_path)


def test_a_new_family_is_one_file(tmp_path, monkeypatch, capsys):
    """A family module of declarations (named in families.FAMILIES, here patched in) brings its
    unit, paper figure and tensor analysis into the flows without touching them."""
    (tmp_path / "toy.py").write_text(textwrap.dedent('''
        from flows.declare import Showcase, TensorAnalysis, Unit

        UNITS = (Unit(name="toy.adder", summary="a toy unit",
                      config="golden.fpraker:EncoderConfig", component="hdl.fpraker:TermEncoder",
                      testbench="tb.fpraker.encoder",
                      showcase=Showcase(paper="1 µm² somewhere")),)
        TENSOR_ANALYSES = (TensorAnalysis(
            name="count", summary="values per file", run="toy:count", markdown="toy:markdown",
            options=((("--scale",), {"dest": "scale", "range": (1, 9), "default": 1}),)),)


        def count(path, progress=None, scale=1):
            return {"file": str(path), "scaled": scale}


        def markdown(r):
            return f"counted {r['scaled']}\\n"
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    toy = importlib.import_module("toy")
    original = families.modules()
    monkeypatch.setattr(families, "modules", lambda: (*original, toy))
    assert registry.get("toy.adder").top == "toy_adder"
    assert report.paper_figures()["toy.adder"] == "1 µm² somewhere"
    assert main(["list"]) == 0 and "toy.adder" in capsys.readouterr().out
    data = tmp_path / "x.npy"
    np.save(data, np.ones(4, dtype=np.float32))
    assert main(["tensor-stats", str(data), "--analysis", "count", "--scale", "3",
                 "-o", str(tmp_path / "out")]) == 0
    assert "counted 3" in capsys.readouterr().out
    assert json.loads((tmp_path / "out" / "x.json").read_text())["scaled"] == 3


def test_misnamed_or_repeated_units_are_errors(monkeypatch):
    fake = types.ModuleType("flows.families.fake")
    fake.UNITS = (Unit(name="other.x", summary="", config="", component="", testbench="",
                       preset=""),)
    monkeypatch.setattr(families, "modules", lambda: (fake,))
    with pytest.raises(FlowError, match="not named fake.<unit>"):
        families.units()
    fake.__name__ = "flows.families.other"
    monkeypatch.setattr(families, "modules", lambda: (fake, fake))
    with pytest.raises(FlowError, match="declared twice"):
        families.units()

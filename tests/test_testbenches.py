"""Every registered unit's cocotb testbench, at the paper configuration and at each non-default
configuration its family declares (:meth:`flows.declare.Unit.test_configs`), at the ``--effort``
level of the run."""

import pytest
from flows import registry
from flows.eda.simulate import failure_details, run_testbench


def _cases():
    for unit in registry.UNITS.values():
        full = {label for label, _ in unit.test_configs(effort="full")} - \
            {label for label, _ in unit.test_configs()}
        for label, cfg in unit.test_configs(effort="full"):
            yield pytest.param(unit.name, cfg, label == "default", label in full,
                               id=f"{unit.name}-{label}")


@pytest.mark.parametrize("unit_name, cfg, paper, full_only", list(_cases()))
def test_testbench(unit_name, cfg, paper, full_only, tb_options, effort):
    unit = registry.get(unit_name)
    options = dict(tb_options)
    if full_only and effort != "full":
        pytest.skip(f"{unit_name}: this configuration runs under --effort full")
    if paper:
        # large paper configurations (8x8 tiles) run only under full effort, on their simulator
        if registry.EFFORTS.index(effort) < registry.EFFORTS.index(unit.tests.paper_effort):
            pytest.skip(f"{unit_name}'s paper configuration runs under --effort "
                        f"{unit.tests.paper_effort}")
        if unit.tests.paper_sim and options.get("sim") is None:
            options["sim"] = unit.tests.paper_sim
    result = run_testbench(unit_name, cfg, effort=effort, **options)
    assert result.tests > 0, f"no cocotb test ran; log {result.log}"
    assert result.passed, f"{result.summary()}\n{failure_details(result)}"

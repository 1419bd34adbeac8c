"""Every registered unit's cocotb testbench, at the paper configuration and at each non-default
configuration its family declares (:meth:`flows.registry.Unit.test_configs`), at the ``--effort``
level of the run."""

import pytest
from flows import registry
from flows.simulate import failure_details, run_testbench


def _cases():
    for unit in registry.UNITS.values():
        for label, cfg in unit.test_configs():
            yield pytest.param(unit.name, cfg, id=f"{unit.name}-{label}")


@pytest.mark.parametrize("unit_name, cfg", list(_cases()))
def test_testbench(unit_name, cfg, tb_options, effort):
    result = run_testbench(unit_name, cfg, effort=effort, **tb_options)
    assert result.tests > 0, f"no cocotb test ran; log {result.log}"
    assert result.passed, f"{result.summary()}\n{failure_details(result)}"

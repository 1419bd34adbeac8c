"""Every registered unit's cocotb testbench, at the paper configuration and at each non-default
configuration its registry entry lists."""

import pytest
from flows import registry
from flows.simulate import failure_details, run_testbench
from golden import config_dict


def _cases():
    for unit in registry.UNITS.values():
        yield pytest.param(unit.name, None, id=f"{unit.name}-default")
        for k, overrides in enumerate(unit.test_configs):
            label = ",".join(f"{key}={value}" for key, value in overrides.items())
            yield pytest.param(unit.name, overrides, id=f"{unit.name}-{label}")


@pytest.mark.parametrize("unit_name, overrides", list(_cases()))
def test_testbench(unit_name, overrides, tb_options):
    unit = registry.get(unit_name)
    base = unit.config_class()()
    cfg = type(base)(**{**config_dict(base), **(overrides or {})})
    result = run_testbench(unit, cfg, **tb_options)
    assert result.tests > 0, f"no cocotb test ran; log {result.log}"
    assert result.passed, f"{result.summary()}\n{failure_details(result)}"

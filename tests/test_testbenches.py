"""Every registered unit's cocotb testbench, at the paper configuration and at each non-default
configuration its registry entry lists; plus checks that the testbenches catch broken designs."""

import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring

from flows import registry
from flows.simulate import failed_tests, failure_details, run_testbench
from golden import config_dict
from golden.fpraker import EncoderConfig
from hdl.fpraker import TermEncoder


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


class SwappedSignEncoder(wiring.Component):
    """The term encoder with lane 0's term sign inverted: a deliberately broken design."""

    def __init__(self, cfg):
        self.inner = TermEncoder(cfg)
        super().__init__(self.inner.signature)

    def elaborate(self, platform):
        m = Module()
        m.submodules.inner = inner = self.inner
        for name in ("load", "zero", "advance", "drop"):
            m.d.comb += getattr(inner, name).eq(getattr(self, name))
        for i in range(inner.cfg.lanes):
            m.d.comb += [inner.sig[i].eq(self.sig[i]), self.tp[i].eq(inner.tp[i])]
        m.d.comb += [self.valid.eq(inner.valid), self.error.eq(inner.error),
                     self.neg.eq(inner.neg ^ 1)]
        return m


def test_encoder_testbench_catches_a_swapped_term_sign(tb_options):
    result = run_testbench("fpraker.encoder", EncoderConfig(), factory=SwappedSignEncoder,
                           **tb_options)
    assert result.tests == 4
    # every test that pops terms sees the wrong sign; zero loads and the error flag have none
    assert failed_tests(result) == ["exhaustive_significands", "random_stalls_drops_reloads"]

"""Helpers of the mutation checks (``tests/test_mutants*.py``): run a unit's testbench against a
deliberately broken design and name the cocotb tests that failed."""

import dataclasses

from amaranth.hdl import Module
from amaranth.lib import wiring

from flows.eda.simulate import failed_tests, run_testbench


def run_failed(unit, cfg, factory, tb_options, effort: str = "quick") -> list:
    """The failing cocotb tests of a testbench run against ``factory(cfg)``'s Verilog
    (``factory=None``: the registered component, e.g. with a block monkeypatched)."""
    result = run_testbench(unit, cfg, factory=factory, effort=effort, **tb_options)
    assert result.tests > 0, f"no cocotb test ran; log {result.log}"
    return failed_tests(result)


def built_with(cls, **changes):
    """A factory that builds ``cls`` from the configuration with ``changes`` applied (the
    testbench checks against the unchanged configuration)."""
    return lambda cfg: cls(dataclasses.replace(cfg, **changes))


class Patched(wiring.Component):
    """A block (``real``, built with the same arguments) with some of its ports rewired: every
    port passes through, then ``patch(m, inner)`` may add logic to ``m`` and returns statements
    that override the pass-through."""

    real = None

    def __init__(self, *args, **kwargs):
        self.inner = self.real(*args, **kwargs)
        super().__init__(self.inner.signature)

    def elaborate(self, platform):
        m = Module()
        m.submodules.inner = inner = self.inner
        # flatten: array members (``In(4).array(lanes)``) and nested signatures pass through
        # port by port
        for (_, member, outer), (_, _, value) in zip(self.signature.flatten(self),
                                                     self.inner.signature.flatten(inner)):
            if member.flow == wiring.In:
                m.d.comb += value.eq(outer)
            else:
                m.d.comb += outer.eq(value)
        m.d.comb += self.patch(m, inner)
        return m

    def patch(self, m, inner):
        raise NotImplementedError


__all__ = ["run_failed", "built_with", "Patched"]

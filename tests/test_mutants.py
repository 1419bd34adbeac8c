"""The testbenches catch deliberately broken designs.

Each case builds a unit's Verilog from a broken variant (a flipped bit, a wrong constant, an RTL
configuration that differs from the one the testbench checks against) and runs the unit's
testbench: at least the named cocotb tests must fail.  A testbench that passes here checks
nothing.
"""

import dataclasses

import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring

import hdl.gecko.blocks
from flows.simulate import failed_tests, run_testbench
from golden.baseline import BaselineConfig
from golden.fpraker import EncoderConfig, PEConfig
from golden.gecko import GeckoConfig
from hdl.baseline import BF16PE
from hdl.fpraker import PE, TermEncoder
from hdl.gecko import GeckoLoopback


class SwappedSignEncoder(wiring.Component):
    """The term encoder with lane 0's term sign inverted."""

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


class ShallowMetaFifoLoopback(GeckoLoopback):
    """The Gecko loopback with a one-entry metadata FIFO (too shallow for narrow fields)."""

    META_FIFO_DEPTH = 1


def _built_with(cls, **changes):
    """A factory that builds ``cls`` from the configuration with ``changes`` applied."""
    return lambda cfg: cls(dataclasses.replace(cfg, **changes))


def _run(unit, cfg, factory, tb_options):
    result = run_testbench(unit, cfg, factory=factory, effort="quick", **tb_options)
    assert result.tests > 0, f"no cocotb test ran; log {result.log}"
    return failed_tests(result)


def test_encoder_with_a_swapped_term_sign(tb_options):
    failed = _run("fpraker.encoder", EncoderConfig(), SwappedSignEncoder, tb_options)
    # every test that pops terms sees the wrong sign; zero loads and the error flag have none
    assert failed == ["exhaustive_significands", "random_stalls_drops_reloads"]


@pytest.mark.parametrize("changes", [{"dmax": 2}, {"kmax": 11}, {"out_round": "rne"}],
                         ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()))
def test_fpraker_pe_built_for_another_configuration(changes, tb_options):
    failed = _run("fpraker.pe", PEConfig(), _built_with(PE, **changes), tb_options)
    assert {"per_cycle_random_masks", "random_regression"} <= set(failed), failed


@pytest.mark.parametrize("changes", [{"keep_bits": 8}, {"out_round": "rne"}],
                         ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()))
def test_baseline_pe_built_for_another_configuration(changes, tb_options):
    failed = _run("baseline.bf16_pe", BaselineConfig(), _built_with(BF16PE, **changes), tb_options)
    assert "random_regression" in failed, failed


def test_gecko_compressor_with_a_wrong_bias(tb_options, monkeypatch):
    monkeypatch.setattr(hdl.gecko.blocks, "BIAS", 126)
    failed = _run("gecko.compressor", GeckoConfig(), None, tb_options)
    assert {"spec_vector_two_rows", "random_tensors"} <= set(failed), failed


def test_gecko_loopback_with_a_too_shallow_metadata_fifo(tb_options):
    failed = _run("gecko.loopback", GeckoConfig(), ShallowMetaFifoLoopback, tb_options)
    assert "narrowest_fields" in failed, failed

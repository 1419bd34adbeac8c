"""The testbenches of the units with register stages catch a wrong latency.

Each case builds the unit with one stage more or one stage fewer than the configuration the
testbench checks against (the same numerics, only the latency differs): the testbench must
fail, because it checks every output exactly ``pipeline`` cycles after its input with new
inputs every cycle.  The last case keeps the latency but lets a MAC lane's ``valid`` and
``clear`` skip the product register, so they reach the accumulator one cycle ahead of their
product.  With interleaved sums (``contexts``), a MAC whose FP32 adder has one stage too few
(a loop one sum short) and one whose ``acc_slot`` ignores the product stages must fail too, and
so must an fMAC, a bit-parallel PE and an FPRaker PE with interleaved dot products whose loop
is one short, and an FPRaker PE whose ``acc_slot`` ignores the stages before its control.
"""

import pytest

import hdl.baseline.mac16
import hdl.common.fp_add
from golden.baseline import MAC16Config
from golden.fast.fmac import FMACConfig
from golden.common.fp_add import FPAddConfig
from golden.common.rounding import RoundConfig
from hdl.baseline import MAC16
from hdl.common.fp_add import FPAdder
from hdl.common.rounding import Round
from mutantutil import built_with, run_failed


@pytest.mark.parametrize("cfg, built", [
    (FPAddConfig(fmt="bf16", pipeline=1), 2),
    (FPAddConfig(fmt="bf16", pipeline=3), 2),
], ids=lambda v: str(v.pipeline) if hasattr(v, "pipeline") else f"built-{v}")
def test_fp_adder_with_a_wrong_latency(cfg, built, tb_options):
    failed = run_failed("common.fp_add", cfg, built_with(FPAdder, pipeline=built), tb_options)
    assert {"random_and_corner_sums", "commutes_and_handles_zeros"} <= set(failed), failed


@pytest.mark.parametrize("cfg, built", [
    (RoundConfig(pipeline=1), 2),
    (RoundConfig(fmt="int8", in_width=20, signed=True, frac=10, exp_width=6, mode="rdn",
                 overflow="saturate", pipeline=3), 2),
], ids=lambda v: str(v.pipeline) if hasattr(v, "pipeline") else f"built-{v}")
def test_rounding_block_with_a_wrong_latency(cfg, built, tb_options):
    failed = run_failed("common.round", cfg, built_with(Round, pipeline=built), tb_options)
    assert {"random_and_boundary_vectors", "exhaustive_small_inputs",
            "representable_values_are_exact"} <= set(failed), failed


@pytest.mark.parametrize("cfg, built", [
    (MAC16Config(fmt="bf16", lanes=2, pipeline=1), 0),
    (MAC16Config(fmt="bf16", lanes=2, pipeline=1), 2),
    (MAC16Config(fmt="int8", lanes=2, pipeline=2), 1),
], ids=["bf16-1-built-0", "bf16-1-built-2", "int8-2-built-1"])
def test_mac16_with_a_wrong_latency(cfg, built, tb_options):
    failed = run_failed("baseline.mac16", cfg, built_with(MAC16, pipeline=built), tb_options)
    assert {"directed", "random_accumulations"} <= set(failed), failed


@pytest.mark.parametrize("fmt", ["bf16", "int8"])
def test_mac16_whose_valid_and_clear_skip_the_product_register(fmt, tb_options, monkeypatch):
    real = hdl.baseline.mac16.stage

    def stage(m, values, enable=True, **kw):
        if kw.get("name", "").startswith("product"):
            # register the product only; valid/clear pass straight to the accumulator
            return {**values, "p": real(m, {"p": values["p"]}, enable, **kw)["p"]}
        return real(m, values, enable, **kw)

    monkeypatch.setattr(hdl.baseline.mac16, "stage", stage)
    failed = run_failed("baseline.mac16", MAC16Config(fmt=fmt, lanes=2, pipeline=1), None,
                        tb_options)
    assert {"directed", "random_accumulations"} <= set(failed), failed


def test_mac16_whose_accumulation_loop_is_a_sum_short(tb_options, monkeypatch):
    real = hdl.common.fp_add.FPAddConfig
    monkeypatch.setattr(hdl.common.fp_add, "FPAddConfig",
                        lambda fmt, pipeline=0: real(fmt, pipeline=max(pipeline - 1, 0)))
    failed = run_failed("baseline.mac16", MAC16Config(fmt="bf16", lanes=2, contexts=3), None,
                        tb_options)
    assert {"directed", "random_accumulations"} <= set(failed), failed


def test_mac16_whose_acc_slot_ignores_the_product_stages(tb_options):
    cfg = MAC16Config(fmt="bf16", lanes=2, contexts=3, pipeline=1)

    class Mutant(MAC16):
        def elaborate(self, platform):
            m = super().elaborate(platform)
            m.d.comb += self.acc_slot.eq(self.slot)     # the last assignment wins
            return m

    failed = run_failed("baseline.mac16", cfg, lambda c: Mutant(c), tb_options)
    assert {"directed", "random_accumulations"} <= set(failed), failed


def test_fmac_whose_accumulation_loop_is_a_sum_short(tb_options, monkeypatch):
    real = hdl.common.fp_add.FPAddConfig
    monkeypatch.setattr(hdl.common.fp_add, "FPAddConfig",
                        lambda fmt, pipeline=0: real(fmt, pipeline=max(pipeline - 1, 0)))
    failed = run_failed("fast.fmac", FMACConfig(group=3, m_max=4, contexts=3), None,
                        tb_options)
    assert {"spec_vectors", "random_dot_products"} <= set(failed), failed


def test_bf16_pe_whose_accumulation_loop_is_a_dot_product_short(tb_options, monkeypatch):
    import hdl.baseline.bf16_pe
    from golden.baseline import BaselineConfig

    monkeypatch.setitem(hdl.baseline.bf16_pe.INTERLEAVED_CUTS, 3, ("add",))
    failed = run_failed("baseline.bf16_pe",
                        BaselineConfig(lanes=2, int_bits=4, pipeline=1, contexts=3), None,
                        tb_options)
    assert {"directed_vectors", "random_regression"} <= set(failed), failed


def test_bf16_tile_whose_pes_hold_an_output_tile_too_few(tb_options, monkeypatch):
    import hdl.baseline.bf16_pe
    from golden.baseline import BaselineTileConfig

    monkeypatch.setitem(hdl.baseline.bf16_pe.INTERLEAVED_CUTS, 3, ("add",))
    cfg = BaselineTileConfig(rows=2, cols=2, lanes=2, int_bits=4, pipeline=1, contexts=3)
    failed = run_failed("baseline.bf16_tile", cfg, None, tb_options)
    assert {"directed_reductions", "pipeline_timing"} <= set(failed), failed


def test_fpraker_pe_whose_step_is_a_dot_product_short(tb_options, monkeypatch):
    import golden.fpraker.pe
    import hdl.fpraker.pe
    from golden.fpraker import PEConfig

    # the PE's loop loses its add cut while the rings and the model keep four contexts
    short = ("exponent", "control")
    monkeypatch.setattr(hdl.fpraker.pe, "STEP_CUTS", {**golden.fpraker.pe.STEP_CUTS, 3: short})
    assert golden.fpraker.pe.STEP_CUTS[3] != short
    failed = run_failed("fpraker.pe", PEConfig(lanes=2, int_bits=4, pipeline=3), None,
                        tb_options)
    assert {"directed_vectors", "random_regression"} <= set(failed), failed


def test_fpraker_pe_whose_acc_slot_ignores_the_control_lag(tb_options):
    from golden.fpraker import PEConfig
    from hdl.fpraker import PE

    class Mutant(PE):
        def elaborate(self, platform):
            m = super().elaborate(platform)
            m.d.comb += self.acc_slot.eq(self.slot)     # the last assignment wins
            return m

    failed = run_failed("fpraker.pe", PEConfig(lanes=2, int_bits=4, pipeline=5),
                        lambda c: Mutant(c), tb_options)
    assert {"directed_vectors", "random_regression"} <= set(failed), failed

"""The testbenches catch deliberately broken designs.

Each case builds a unit's Verilog from a broken variant (a flipped bit, a wrong constant, a
wrong mode or buffering, an RTL configuration that differs from the one the testbench checks
against) and runs the unit's
testbench: at least the named cocotb tests must fail.  A testbench that passes here checks
nothing.
"""

import dataclasses

import pytest
from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFOBuffered

import hdl.baseline.mac16
import hdl.common.bfp
import hdl.common.fp_add
import hdl.equinox.quantizer
import hdl.fast.array
import hdl.fast.converter
import hdl.fast.fmac
import hdl.gecko.blocks
from mutantutil import Patched, built_with, run_failed
from golden.baseline import BaselineConfig, MAC16Config
from golden.fpraker import EncoderConfig, PEConfig
from golden.common.fp_add import FPAddConfig
from golden.common.rounding import RoundConfig
from golden.equinox import QuantizerConfig
from golden.fast.converter import ConverterConfig
from golden.fast.fmac import FMACConfig
from golden.fast.array import FMACArrayConfig
from golden.gecko.codec import GeckoConfig
from hdl.baseline import BF16PE
from hdl.common.rounding import Round
from hdl.equinox import Quantizer
from hdl.fpraker import PE, TermEncoder
from hdl.gecko import GeckoCompressor, GeckoDecompressor, GeckoLoopback


class SwappedSignEncoder(wiring.Component):
    """The term encoder with lane 0's term sign inverted."""

    def __init__(self, cfg):
        self.inner = TermEncoder(cfg)
        super().__init__(self.inner.signature)

    def elaborate(self, platform):
        m = Module()
        m.submodules.inner = inner = self.inner
        m.d.comb += [inner.load.eq(self.load), inner.zero.eq(self.zero),
                     inner.terms.advance.eq(self.terms.advance),
                     inner.terms.drop.eq(self.terms.drop),
                     self.terms.valid.eq(inner.terms.valid), self.error.eq(inner.error),
                     self.terms.neg.eq(inner.terms.neg ^ 1)]
        for i in range(inner.cfg.lanes):
            m.d.comb += [inner.sig[i].eq(self.sig[i]), self.terms.tp[i].eq(inner.terms.tp[i])]
        return m


class StickyFixedCompressor(wiring.Component):
    """The Gecko compressor that stays in fixed-width mode once a fixed-width row was accepted."""

    def __init__(self, cfg):
        self.inner = GeckoCompressor(cfg)
        super().__init__(self.inner.signature)

    def elaborate(self, platform):
        m = Module()
        m.submodules.inner = c = self.inner
        seen, width = Signal(), Signal(3)
        ctl = self.ctl
        with m.If(self.i.valid & self.i.ready & ctl.fixed_en):
            m.d.sync += [seen.eq(1), width.eq(ctl.fixed_w)]
        wiring.connect(m, wiring.flipped(self.i), c.i)
        wiring.connect(m, c.o, wiring.flipped(self.o))
        wiring.connect(m, c.meta, wiring.flipped(self.meta))
        m.d.comb += [c.ctl.man_width.eq(ctl.man_width), c.ctl.sign_en.eq(ctl.sign_en),
                     c.ctl.fixed_en.eq(ctl.fixed_en | seen),
                     c.ctl.fixed_w.eq(ctl.fixed_w | (width & ~ctl.fixed_en.replicate(3)))]
        for flag in ("err_exp", "err_mag", "err_sign", "err_cfg"):
            m.d.comb += getattr(self, flag).eq(getattr(c, flag))
        return m


class EagerInputDecompressor(wiring.Component):
    """The Gecko decompressor behind a 2-entry input FIFO: it takes words ahead of its rows."""

    def __init__(self, cfg):
        self.inner = GeckoDecompressor(cfg)
        super().__init__(self.inner.signature)

    def elaborate(self, platform):
        m = Module()
        m.submodules.inner = d = self.inner
        m.submodules.fifo = f = SyncFIFOBuffered(width=len(self.i.payload.as_value()), depth=2)
        wiring.connect(m, wiring.flipped(self.cmd), d.cmd)
        wiring.connect(m, wiring.flipped(self.meta), d.meta)
        wiring.connect(m, d.o, wiring.flipped(self.o))
        m.d.comb += [f.w_data.eq(self.i.payload), f.w_en.eq(self.i.valid), self.i.ready.eq(f.w_rdy),
                     d.i.payload.eq(f.r_data), d.i.valid.eq(f.r_rdy), f.r_en.eq(d.i.ready),
                     self.err_cfg.eq(d.err_cfg)]
        return m


class ShallowMetaFifoLoopback(GeckoLoopback):
    """The Gecko loopback with a one-entry metadata FIFO (too shallow for narrow fields)."""

    META_FIFO_DEPTH = 1


_built_with = built_with
_run = run_failed


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


@pytest.mark.parametrize("cfg, changes", [
    (RoundConfig(), {"mode": "rna"}),
    (RoundConfig(), {"overflow": "saturate"}),
    (RoundConfig(fmt="int8", in_width=20, signed=True, frac=10, exp_width=6, mode="rdn",
                 overflow="saturate"), {"mode": "rtz"}),
    (RoundConfig(fmt="uint4", in_width=24, frac=23, exp_width=9, mode="sr", overflow="saturate"),
     {"fmt": "uint5"}),
], ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()) if isinstance(c, dict) else c.fmt)
def test_rounding_block_built_for_another_configuration(cfg, changes, tb_options):
    failed = _run("common.round", cfg, _built_with(Round, **changes), tb_options)
    assert {"exhaustive_small_inputs", "random_and_boundary_vectors"} <= set(failed), failed


def test_fp_adder_without_a_sticky_bit(tb_options, monkeypatch):
    """The alignment shifter drops the shifted-out bits instead of OR-ing them into the
    sticky: only near-ties round wrongly."""
    def plain_right(m, x, amount, name):
        out = Signal(x.shape(), name=name)
        m.d.comb += out.eq(x >> amount)
        return out

    monkeypatch.setattr(hdl.common.fp_add, "jam_right", plain_right)
    failed = _run("common.fp_add", FPAddConfig(), None, tb_options)
    assert "random_and_corner_sums" in failed, failed


def test_fast_converter_with_other_lfsr_seeds(tb_options, monkeypatch):
    monkeypatch.setattr(hdl.fast.converter, "lane_seeds",
                        lambda lanes: tuple(0x1F35 + i for i in range(lanes)))
    failed = _run("fast.converter", ConverterConfig(), None, tb_options)
    assert {"random_groups", "lfsr_draws_over_a_thousand_conversions"} <= set(failed), failed


def test_fast_converter_with_another_lfsr_polynomial(tb_options, monkeypatch):
    """x^16 + x^15 + x^13 + x^4 + 1, also maximal: same period, other sequence."""
    def other_taps(m, state, steps, name):
        s = state
        for k in range(steps):
            nxt = Signal(16, name=f"{name}_s{k + 1}")
            m.d.comb += nxt.eq(Cat(s[1:], s[0] ^ s[1] ^ s[3] ^ s[12]))
            s = nxt
        return s

    monkeypatch.setattr(hdl.common.bfp, "lfsr_steps", other_taps)
    failed = _run("fast.converter", ConverterConfig(), None, tb_options)
    assert "lfsr_draws_over_a_thousand_conversions" in failed, failed


def test_fast_fmac_with_an_fp_generator_one_binade_off(tb_options, monkeypatch):
    real = hdl.fast.fmac.fp_gen_config
    monkeypatch.setattr(hdl.fast.fmac, "fp_gen_config",
                        lambda cfg: dataclasses.replace(real(cfg), frac=1))
    failed = _run("fast.fmac", FMACConfig(), None, tb_options)
    assert {"spec_vectors", "random_dot_products"} <= set(failed), failed


class _PatchedCell(Patched):
    """An fMAC array cell with some of its inputs rewired."""

    real = hdl.fast.array.ArrayCell


class CellWithoutFirst(_PatchedCell):
    """WGRAD starts from whatever the cell's register holds (the ``first`` tag is lost)."""

    def patch(self, m, inner):
        return [inner.h_in.first.eq(0)]


class CellWithSumsFromTheLeft(_PatchedCell):
    """BWD-DATA partial sums come from the left neighbour instead of the one below."""

    def patch(self, m, inner):
        return [inner.a_below.eq(self.a_left)]


@pytest.mark.parametrize("cell, fails", [
    (CellWithoutFirst, {"random_gemms"}),
    (CellWithSumsFromTheLeft, {"t20_every_dataflow_and_width", "random_gemms"}),
])
def test_fast_array_with_a_broken_cell(cell, fails, tb_options, monkeypatch):
    monkeypatch.setattr(hdl.fast.array, "ArrayCell", cell)
    failed = _run("fast.array", FMACArrayConfig(rows=2, cols=2, group=4), None, tb_options)
    assert fails <= set(failed), failed


@pytest.mark.parametrize("fmt", ["bf16", "int8"])
def test_mac16_that_forgets_clear(fmt, tb_options, monkeypatch):
    """The MAC lanes keep accumulating across ``clear`` (``Mux(clear, 0, acc)`` becomes
    ``acc``)."""
    real = hdl.baseline.mac16.Mux

    def mux_ignoring_clear(sel, a, b):
        return b if isinstance(a, int) and a == 0 else real(sel, a, b)

    monkeypatch.setattr(hdl.baseline.mac16, "Mux", mux_ignoring_clear)
    failed = _run("baseline.mac16", MAC16Config(fmt), None, tb_options)
    assert {"directed", "random_accumulations"} <= set(failed), failed


def test_gecko_compressor_with_a_wrong_bias(tb_options, monkeypatch):
    monkeypatch.setattr(hdl.gecko.blocks, "BIAS", 126)
    failed = _run("gecko.compressor", GeckoConfig(), None, tb_options)
    assert {"spec_vector_two_rows", "random_tensors"} <= set(failed), failed


def test_gecko_compressor_stuck_in_fixed_width_mode(tb_options):
    failed = _run("gecko.compressor", GeckoConfig(), StickyFixedCompressor, tb_options)
    assert {"mixed_modes_back_to_back", "random_tensors"} <= set(failed), failed


def test_gecko_decompressor_taking_words_ahead_of_rows(tb_options):
    failed = _run("gecko.decompressor", GeckoConfig(), EagerInputDecompressor, tb_options)
    assert "throughput_one_row_per_cycle" in failed, failed


def test_gecko_loopback_with_a_too_shallow_metadata_fifo(tb_options):
    failed = _run("gecko.loopback", GeckoConfig(), ShallowMetaFifoLoopback, tb_options)
    assert "narrowest_fields" in failed, failed


@pytest.mark.parametrize("cfg, changes", [
    (QuantizerConfig(), {"rounding": "rtz"}),
    (QuantizerConfig(rounding="rne"), {"rounding": "floor"}),
    (QuantizerConfig(rounding="stoch"), {"rbits": 15}),
], ids=["floor-as-rtz", "rne-as-floor", "stoch-rbits15"])
def test_equinox_quantizer_built_for_another_configuration(cfg, changes, tb_options):
    failed = _run("equinox.quantizer", cfg, _built_with(Quantizer, **changes), tb_options)
    assert "random_blocks_under_backpressure" in failed, failed


def test_equinox_quantizer_with_other_lfsr_seeds(tb_options, monkeypatch):
    monkeypatch.setattr(hdl.equinox.quantizer, "lane_seeds",
                        lambda lanes: tuple(0x1F35 + i for i in range(lanes)))
    failed = _run("equinox.quantizer", QuantizerConfig(rounding="stoch"), None, tb_options)
    assert "random_blocks_under_backpressure" in failed, failed

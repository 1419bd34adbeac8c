"""The BDC testbenches catch deliberately broken encoders and decoders (a wrong bit, a wrong
delta width, a wrong header, a lost value, a missing error)."""

from amaranth.hdl import Signal

import hdl.fpraker.bdc
from golden.fpraker import BDCConfig
from hdl.fpraker import BDCDecoder, BDCEncoder
from mutantutil import Patched, built_with, run_failed

CFG = BDCConfig()


class EncoderFlippingABit(Patched):
    """Bit 13 of every fourth output word is inverted."""

    real = BDCEncoder

    def patch(self, m, inner):
        n = Signal(2)
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += n.eq(n + 1)
        return [self.o.payload.data.eq(inner.o.payload.data ^ ((n == 3) << 13))]


class EncoderLosingAValue(Patched):
    """The fifth value accepted is acknowledged but never reaches the encoder."""

    real = BDCEncoder

    def patch(self, m, inner):
        n = Signal(8)
        drop = n == 4
        with m.If(self.i.valid & self.i.ready & (n != 255)):
            m.d.sync += n.eq(n + 1)
        return [inner.i.valid.eq(self.i.valid & ~drop), self.i.ready.eq(inner.i.ready | drop)]


class DecoderLosingAValue(Patched):
    """The third value decoded is dropped from the output."""

    real = BDCDecoder

    def patch(self, m, inner):
        n = Signal(8)
        drop = n == 2
        with m.If(inner.o.valid & inner.o.ready & (n != 255)):
            m.d.sync += n.eq(n + 1)
        return [self.o.valid.eq(inner.o.valid & ~drop), inner.o.ready.eq(self.o.ready | drop)]


class DecoderFlippingABit(Patched):
    """The sign of every fifth value decoded is inverted."""

    real = BDCDecoder

    def patch(self, m, inner):
        n = Signal(range(5))
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += n.eq((n + 1) % 5)
        return [self.o.payload.value.sign.eq(inner.o.payload.value.sign ^ (n == 4))]


class DecoderWithoutError(Patched):
    """The sticky error output is tied to 0."""

    real = BDCDecoder

    def patch(self, m, inner):
        return [self.error.eq(0)]


def loose_delta_code(m, d, name="wcode"):
    """``w(d)`` that lets ``+2**(w-1)`` fit in ``w`` bits (a one-sided range error)."""
    code = Signal(3, name=name)
    m.d.comb += code.eq(7)
    for w in range(6, 0, -1):
        with m.If((d >= -(1 << (w - 1))) & (d <= (1 << (w - 1)))):
            m.d.comb += code.eq(w)
    with m.If(d == 0):
        m.d.comb += code.eq(0)
    return code


def test_encoder_flipping_a_bit(tb_options):
    failed = run_failed("fpraker.bdc_encoder", CFG, EncoderFlippingABit, tb_options)
    assert {"tv17_groups", "every_header", "random_tensors"} <= set(failed), failed


def test_encoder_with_a_wrong_delta_width(tb_options, monkeypatch):
    monkeypatch.setattr(hdl.fpraker.bdc, "delta_code", loose_delta_code)
    failed = run_failed("fpraker.bdc_encoder", CFG, None, tb_options)
    assert {"tv17_groups", "every_header"} <= set(failed), failed


def test_encoder_escaping_at_delta_6(tb_options, monkeypatch):
    """Header 6 is never used: groups needing 6-bit deltas escape (a wrong header)."""
    monkeypatch.setattr(hdl.fpraker.bdc, "MAX_DELTA", 5)
    failed = run_failed("fpraker.bdc_encoder", CFG, None, tb_options)
    assert "every_header" in failed, failed


def test_encoder_losing_a_value(tb_options):
    failed = run_failed("fpraker.bdc_encoder", CFG, EncoderLosingAValue, tb_options)
    assert "tv17_groups" in failed, failed


def test_decoder_reading_headers_at_the_wrong_place(tb_options):
    failed = run_failed("fpraker.bdc_decoder", CFG, built_with(BDCDecoder, group=31), tb_options)
    assert {"tv17_groups", "every_header", "random_tensors"} <= set(failed), failed


def test_decoder_reading_delta_6_as_raw_exponents(tb_options, monkeypatch):
    monkeypatch.setattr(hdl.fpraker.bdc, "MAX_DELTA", 5)
    failed = run_failed("fpraker.bdc_decoder", CFG, None, tb_options)
    assert {"every_header", "non_minimal_header_is_legal"} <= set(failed), failed


def test_decoder_flipping_a_bit(tb_options):
    failed = run_failed("fpraker.bdc_decoder", CFG, DecoderFlippingABit, tb_options)
    assert {"tv17_groups", "every_header", "random_tensors"} <= set(failed), failed


def test_decoder_losing_a_value(tb_options):
    failed = run_failed("fpraker.bdc_decoder", CFG, DecoderLosingAValue, tb_options)
    assert {"tv17_groups", "random_tensors"} <= set(failed), failed


def test_decoder_without_error(tb_options):
    failed = run_failed("fpraker.bdc_decoder", CFG, DecoderWithoutError, tb_options)
    assert failed == ["sticky_errors"], failed


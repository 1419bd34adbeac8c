"""Gecko's register stages: the ``pipeline`` field, the compressor's and decompressor's cycle
models, and the testbenches catching a unit whose stages are out of step.

``pipeline`` changes when words and rows leave the units, never what they are: the cycle models
(:func:`golden.gecko.codec.compressor_cycles`, :func:`~golden.gecko.codec.decompressor_cycles`)
deliver the golden streams in order under any stall pattern, one row per cycle when nothing
stalls, and a row sent into an empty unit leaves ``pipeline`` cycles later than at depth 0.  The
testbenches compare every handshake output with those models in every cycle, so a unit built
with one stage more or fewer, or whose ``last`` or error flags skip or add a stage, fails them.
"""

import numpy as np
import pytest
from amaranth.hdl import Signal

import hdl.gecko.compressor
import hdl.gecko.decompressor
from golden.gecko.codec import (
    COMPRESSOR_ERROR_LAG, GECKO_MAX_PIPELINE, GeckoConfig, compress, compressor_cycles,
    compressor_latency, decompress, decompressor_cycles, decompressor_latency,
)
from hdl.gecko import GeckoCompressor, GeckoDecompressor
from mutantutil import Patched, built_with, run_failed

DEPTHS = range(GECKO_MAX_PIPELINE + 1)


# --------------------------------------------------------------------------------------------
# the configuration field


def test_latencies():
    assert [compressor_latency(GeckoConfig(pipeline=d)) for d in DEPTHS] == [3, 4, 5]
    assert [decompressor_latency(GeckoConfig(pipeline=d)) for d in DEPTHS] == [1, 2, 3]
    assert COMPRESSOR_ERROR_LAG == 2


# --------------------------------------------------------------------------------------------
# stimulus


def _tensors(gen, lanes, fmt, count):
    """Random legal tensors of 1..30 rows: Gecko mode and fixed widths, every sign mode,
    narrow and full mantissas (so words hold one to many rows and flushes happen)."""
    base = GeckoConfig(lanes=lanes, fmt=fmt)
    m = base.format.man_bits
    out = []
    for k in range(count):
        fixed = int(gen.integers(0, 8)) if k % 3 == 2 else None
        sign_en = bool(k % 2)
        cfg = GeckoConfig(lanes=lanes, fmt=fmt, man_width=int(gen.integers(0, m + 1)),
                          sign_en=sign_en, fixed_width=fixed)
        n = int(gen.integers(1, 30 * lanes + 1))
        e = 127 + gen.integers(-3, 3, n) if k % 4 else gen.integers(0, 255, n)
        if fixed is not None:
            e = 127 + gen.integers(-(1 << fixed) + 1, 1 << fixed, n) if fixed else np.full(n, 127)
        s = gen.integers(0, 2, n) if sign_en else np.zeros(n, dtype=np.int64)
        x = (s << (base.format.width - 1)) | (e << m) | gen.integers(0, 1 << m, n)
        out.append((x.astype(base.format.dtype), cfg))
    return out


def _pattern(gen, n, p):
    """``n`` random booleans, each true with probability ``p``."""
    return [bool(v) for v in gen.random(n) < p]


def _golden_words(tensors):
    words, metas = [], []
    for bits, cfg in tensors:
        s = compress(bits, cfg)
        words += [(tuple(int(v) for v in s.data[q]), q == s.data.shape[0] - 1)
                  for q in range(s.data.shape[0])]
        metas += [(int(v), q == s.meta.size - 1) for q, v in enumerate(s.meta)]
    return words, metas


def _golden_rows(tensors, lanes):
    rows = []
    for bits, cfg in tensors:
        v = [int(x) for x in decompress(compress(bits, cfg))]
        v += [0] * (-len(v) % lanes)
        n = len(v) // lanes
        rows += [(tuple(v[r * lanes:(r + 1) * lanes]), r == n - 1) for r in range(n)]
    return rows


def _received(model, name, ready):
    """The items a consumer reading ``name`` with the ready pattern ``ready`` takes, in order."""
    return [getattr(c, name) for c, r in zip(model, ready) if r and getattr(c, name) is not None]


# --------------------------------------------------------------------------------------------
# the compressor's cycle model


@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("lanes, fmt, p_valid, p_ready", [
    (3, "fp32", 1.0, 1.0), (3, "fp32", 0.7, 0.6), (2, "bf16", 0.5, 0.9), (1, "bf16", 0.9, 0.4),
])
def test_compressor_cycles_deliver_the_golden_streams(depth, lanes, fmt, p_valid, p_ready):
    gen = np.random.default_rng([depth, lanes, int(10 * p_ready)])
    tensors = _tensors(gen, lanes, fmt, 12)
    n = 40 * sum(-(-x.size // lanes) for x, _ in tensors) + 100
    valid, o_ready, m_ready = (_pattern(gen, n, p_valid), _pattern(gen, n, p_ready),
                               _pattern(gen, n, p_ready))
    model = compressor_cycles(GeckoConfig(lanes=lanes, fmt=fmt, pipeline=depth), tensors,
                              list(zip(valid, o_ready, m_ready)))
    words, metas = _golden_words(tensors)
    assert _received(model, "o", o_ready) == words
    assert _received(model, "meta", m_ready) == metas
    rows = sum(-(-x.size // lanes) for x, _ in tensors)
    assert sum(v and c.i_ready for v, c in zip(valid, model)) >= rows
    # an output is held until it is read
    for a, b, r in zip(model, model[1:], o_ready):
        if a.o is not None and not r:
            assert b.o == a.o


def _completing_rows(bits, cfg):
    """For each word row of ``compress(bits, cfg)``, the row that completes it (golden prefix
    streams; the final word belongs to the last row)."""
    rows = -(-bits.size // cfg.lanes)
    n_words = compress(bits, cfg).data.shape[0]
    out = []
    for r in range(rows):
        whole = (n_words if r == rows - 1 else
                 compress(bits[:(r + 1) * cfg.lanes], cfg).footprint().field_bits
                 // cfg.lane_width)
        out += [r] * (whole - len(out))
    return out


@pytest.mark.parametrize("depth", DEPTHS)
def test_compressor_cycles_latency_and_throughput(depth):
    """A tensor's rows back to back, outputs always ready: every row is taken in the cycle it
    is offered, and each word leaves exactly ``compressor_latency`` cycles after the row that
    completes it was taken (the final word one cycle later when it is flushed)."""
    gen = np.random.default_rng(depth)
    cfg = GeckoConfig(lanes=3, pipeline=depth)
    for bits, tcfg in _tensors(gen, 3, "fp32", 10):
        rows = -(-bits.size // 3)
        model = compressor_cycles(cfg, [(bits, tcfg)], [(True, True, True)] * (rows + 10))
        taken = [t for t, c in enumerate(model) if c.i_ready][:rows]
        assert taken == list(range(rows))
        emitted = [t for t, c in enumerate(model) if c.o is not None]
        lat = [e - taken[r] for e, r in zip(emitted, _completing_rows(bits, tcfg))]
        assert len(emitted) == compress(bits, tcfg).data.shape[0]
        assert lat[:-1] == [compressor_latency(cfg)] * (len(lat) - 1), lat
        assert lat[-1] - compressor_latency(cfg) in (0, 1), lat


def test_compressor_cycles_stall_at_most_once_per_tensor():
    """Tensors back to back, outputs always ready: only the flushes stall the input."""
    gen = np.random.default_rng(3)
    tensors = _tensors(gen, 3, "fp32", 10)
    rows = sum(-(-x.size // 3) for x, _ in tensors)
    for depth in DEPTHS:
        model = compressor_cycles(GeckoConfig(lanes=3, pipeline=depth), tensors,
                                  [(True, True, True)] * (rows + 40))
        taken = [t for t, c in enumerate(model) if c.i_ready][:rows]
        assert taken[-1] - taken[0] + 1 - rows <= len(tensors)


def test_compressor_cycles_are_depth_zero_delayed_for_isolated_rows():
    """A row offered to an empty unit leaves ``pipeline`` cycles later than at depth 0."""
    x = np.full(2 * 8, 0x3F800000, dtype=np.uint32)
    tcfg = GeckoConfig(man_width=23)                      # W = 25: a word, then a flush
    cycles = [(t % 12 == 0, True, True) for t in range(40)]
    base = compressor_cycles(GeckoConfig(), [(x, tcfg)], cycles)
    for depth in DEPTHS:
        got = compressor_cycles(GeckoConfig(pipeline=depth), [(x, tcfg)], cycles)
        assert [t for t, c in enumerate(got) if c.o] == [t + depth for t, c in enumerate(base)
                                                          if c.o]
        assert [t for t, c in enumerate(got) if c.meta] == [t + depth for t, c in enumerate(base)
                                                             if c.meta]


def test_compressor_cycles_reject_other_lanes():
    with pytest.raises(ValueError, match="lanes=2"):
        compressor_cycles(GeckoConfig(), [(np.zeros(4, np.uint32), GeckoConfig(lanes=2))], [])


# --------------------------------------------------------------------------------------------
# the decompressor's cycle model


@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("lanes, fmt, p_valid, p_ready", [
    (3, "fp32", 1.0, 1.0), (3, "fp32", 0.6, 0.7), (2, "bf16", 0.8, 0.4), (1, "bf16", 0.4, 0.9),
])
def test_decompressor_cycles_deliver_the_golden_rows(depth, lanes, fmt, p_valid, p_ready):
    gen = np.random.default_rng([depth, lanes, int(10 * p_ready), 1])
    tensors = _tensors(gen, lanes, fmt, 12)
    rows = sum(-(-x.size // lanes) for x, _ in tensors)
    n = 40 * rows + 100
    stim = [_pattern(gen, n, p_valid) for _ in range(3)] + [_pattern(gen, n, p_ready)]
    model = decompressor_cycles(GeckoConfig(lanes=lanes, fmt=fmt, pipeline=depth), tensors,
                                list(zip(*stim)))
    assert _received(model, "o", stim[3]) == _golden_rows(tensors, lanes)
    streams = [compress(bits, cfg) for bits, cfg in tensors]
    assert sum(v and c.cmd_ready for v, c in zip(stim[0], model)) >= len(tensors)
    assert sum(c.i_ready for c in model) == sum(s.data.shape[0] for s in streams)
    assert sum(c.meta_ready for c in model) == sum(s.meta.size for s in streams)
    assert all(v for v, c in zip(stim[1], model) if c.i_ready)
    assert all(v for v, c in zip(stim[2], model) if c.meta_ready)


@pytest.mark.parametrize("depth", DEPTHS)
def test_decompressor_cycles_latency_and_throughput(depth):
    """Inputs always offered, ``o`` always ready: a tensor's rows leave back to back, the first
    ``1 + decompressor_latency`` cycles after its command is taken, and every cycle that takes
    a word row is followed by an output row ``decompressor_latency`` cycles later."""
    gen = np.random.default_rng(depth + 7)
    cfg = GeckoConfig(lanes=3, pipeline=depth)
    tensors = _tensors(gen, 3, "fp32", 8)
    lat = decompressor_latency(cfg)
    n = sum(-(-x.size // 3) + 2 for x, _ in tensors) + 20
    model = decompressor_cycles(cfg, tensors, [(True, True, True, True)] * n)
    out = [t for t, c in enumerate(model) if c.o is not None]
    taken = [t for t, c in enumerate(model) if c.cmd_ready][:len(tensors)]
    k = 0
    for t0, (bits, _) in zip(taken, tensors):
        rows = -(-bits.size // 3)
        assert out[k:k + rows] == list(range(t0 + 1 + lat, t0 + 1 + lat + rows))
        k += rows
    assert k == len(out)
    assert all(t + lat in out for t, c in enumerate(model) if c.i_ready)


def test_decompressor_cycles_hold_the_output_and_stall_the_rows():
    """``o`` never ready: the first row stays on ``o``, each row stage fills with one row, and
    the unit takes no further input."""
    x = np.full(10 * 8, 0x3F800000, dtype=np.uint32)
    tcfg = GeckoConfig(man_width=23)                      # W = 25: every row takes a word
    for depth in DEPTHS:
        model = decompressor_cycles(GeckoConfig(pipeline=depth), [(x, tcfg)],
                                    [(True, True, True, False)] * 20)
        first = _golden_rows([(x, tcfg)], 8)[0]
        assert [c.o for c in model] == [None] * (2 + depth) + [first] * (18 - depth)
        assert sum(c.i_ready for c in model) == 1 + depth
        assert sum(c.meta_ready for c in model) == 1


# --------------------------------------------------------------------------------------------
# mutation checks: the testbenches catch stages out of step

#: small configurations the mutation checks run at
_SMALL = dict(lanes=2, fmt="bf16")


def _one(tb_options, testcase):
    return {**tb_options, "testcase": testcase}


@pytest.mark.parametrize("depth, built", [(1, 2), (2, 1)], ids=["1-built-2", "2-built-1"])
def test_compressor_with_a_wrong_latency(depth, built, tb_options):
    failed = run_failed("gecko.compressor", GeckoConfig(**_SMALL, pipeline=depth),
                        built_with(GeckoCompressor, pipeline=built),
                        _one(tb_options, "configured_tensor"))
    assert failed == ["configured_tensor"], failed


@pytest.mark.parametrize("depth, built", [(1, 2), (2, 1)], ids=["1-built-2", "2-built-1"])
def test_decompressor_with_a_wrong_latency(depth, built, tb_options):
    failed = run_failed("gecko.decompressor", GeckoConfig(**_SMALL, pipeline=depth),
                        built_with(GeckoDecompressor, pipeline=built),
                        _one(tb_options, "configured_tensor"))
    assert failed == ["configured_tensor"], failed


def _skipping(module, stage_name, key, monkeypatch):
    """Let ``key`` pass the named stage of ``module`` unregistered (the rest is registered)."""
    real = module.stage

    def stage(m, values, enable=True, **kw):
        if kw.get("name") == stage_name:
            return {**real(m, values, enable, **kw), key: values[key]}
        return real(m, values, enable, **kw)

    monkeypatch.setattr(module, "stage", stage)


def test_compressor_whose_last_skips_the_place_stage(tb_options, monkeypatch):
    _skipping(hdl.gecko.compressor, "place", "last", monkeypatch)
    failed = run_failed("gecko.compressor", GeckoConfig(**_SMALL, pipeline=1), None,
                        _one(tb_options, "configured_tensor"))
    assert failed == ["configured_tensor"], failed


def test_decompressor_whose_last_skips_the_field_stage(tb_options, monkeypatch):
    _skipping(hdl.gecko.decompressor, "field", "last", monkeypatch)
    failed = run_failed("gecko.decompressor", GeckoConfig(**_SMALL, pipeline=1), None,
                        _one(tb_options, "configured_tensor"))
    assert failed == ["configured_tensor"], failed


class LateErrorsCompressor(Patched):
    """The Gecko compressor whose sticky error flags pass one more register."""

    real = GeckoCompressor

    def patch(self, m, inner):
        out = []
        for flag in ("err_exp", "err_mag", "err_sign", "err_cfg"):
            late = Signal(name=f"{flag}_late")
            m.d.sync += late.eq(getattr(inner, flag))
            out.append(getattr(self, flag).eq(late))
        return out


def test_compressor_whose_errors_come_a_stage_late(tb_options):
    failed = run_failed("gecko.compressor", GeckoConfig(**_SMALL, pipeline=2),
                        LateErrorsCompressor, _one(tb_options, "sticky_errors"))
    assert failed == ["sticky_errors"], failed

"""Testbench of the Gecko compressor (``gecko.compressor``) against ``golden.gecko.codec.compress``.

Every output word row and metadata word is compared with the golden stream of the tensor it
belongs to; tensors follow each other back to back (the control inputs travel with each row).
Covers the spec vectors (§8.13), random tensors over every man_width/sign_en pair in Gecko and
fixed-width mode with input gaps and output back-pressure (§8.17), fixed-width mode (§4.7),
Gecko-mode and fixed-width tensors interleaved back to back, throughput and the W = 12 fill
sequence (§8.18) and each sticky error.  Every stream run is also compared, cycle by cycle, with
the cycle model ``golden.gecko.codec.compressor_cycles`` at the configuration's ``pipeline``
(``i.ready``, ``o`` and ``meta`` in every cycle), so a word a cycle early or late fails; each
sticky error must rise a fixed number of cycles after the row that causes it.
"""

import cocotb
import numpy as np
from cocotb.triggers import FallingEdge, ReadOnly

from golden.gecko.codec import (
    COMPRESSOR_ERROR_LAG, GeckoConfig, compress, compressor_latency,
)

from ..common import config_from_env, reset, test_size, uint
from ..common.streams import Sink, Source, cross, quiet, run
from .harness import (
    COMPRESSOR_PORTS, ERRS, PortTrace, cfg_control, completion_rows, control, ctl_ports,
    expect_compressor_cycles, fit_fixed_width, man_widths, no_errors, own_tensor, pack_row,
    plan_rows, random_plan, random_tensor, rows_of, setup, spec_rows_ab, stream_payloads,
)


def tensor_items(bits, cfg: GeckoConfig):
    """Input items of one tensor: its rows (padded) with ``last`` on the final one."""
    rows = rows_of(bits, cfg)
    ctrl = ctl_ports(cfg_control(cfg))
    return [(pack_row(r, q == len(rows) - 1, cfg), ctrl) for q, r in enumerate(rows)]


def expected(bits, cfg: GeckoConfig):
    """Golden output rows and metadata words of one tensor, as payload ints with ``last``."""
    return stream_payloads(compress(bits, cfg))


async def compress_tensors(dut, tensors, gap=0.0, p_ready=1.0, p_meta=1.0, rnd=None):
    """Stream ``(bits, cfg)`` tensors through the unit; check outputs against golden."""
    ucfg = config_from_env(GeckoConfig)
    items, want_data, want_meta = [], [], []
    for bits, cfg in tensors:
        items += tensor_items(bits, cfg)
        d, m = expected(bits, cfg)
        want_data += d
        want_meta += m
    src = Source(dut, "i", items, rnd, gap)
    out = Sink(dut, "o", rnd, p_ready)
    meta = Sink(dut, "meta", rnd, p_meta)
    limit = 50 + int(4 * len(items) / min(1 - gap, p_ready, p_meta))

    def done():
        return src.done and len(out.got) >= len(want_data) and len(meta.got) >= len(want_meta)

    trace = PortTrace(dut, COMPRESSOR_PORTS)
    await run(dut, [src], [out, meta], done, limit, check=trace)
    await quiet(dut, [out, meta], 4)
    out.expect(want_data, f"lanes={ucfg.lanes}, fmt={ucfg.fmt}: ")
    meta.expect(want_meta, f"lanes={ucfg.lanes}, fmt={ucfg.fmt}: ")
    expect_compressor_cycles(trace, ucfg, tensors)
    return src, out, meta



@cocotb.test()
async def spec_vector_two_rows(dut):
    """§8.13: rows A then B, man_width = 2, sign_en = 1 (FP32: the printed words, 0x50000000)."""
    cfg, r, _ = await setup(dut, "spec_vector_two_rows")
    vcfg = GeckoConfig(lanes=cfg.lanes, fmt=cfg.fmt, man_width=2, sign_en=True)
    x = spec_rows_ab(cfg)
    if cfg.lanes == 8 and cfg.fmt == "fp32":
        s = compress(x, vcfg)
        assert [int(v) for v in s.data[0]] == [0x03480000, 0x51380000, 0x63200000, 0x19280000,
                                               0x70300000, 0x5A140000, 0x09400000, 0x41A00000]
        assert [int(v) for v in s.meta] == [0x50000000]
    _, out, _ = await compress_tensors(dut, [(x, vcfg)], rnd=r)
    if cfg.lanes == 8 and cfg.fmt == "bf16":
        assert out.got[0] & 0xFFFF == 0x0348
    no_errors(dut)


@cocotb.test()
async def configured_tensor(dut):
    """A random tensor at the configuration's own man_width / sign_en / fixed_width."""
    cfg, r, gen = await setup(dut, "configured_tensor")
    x = own_tensor(gen, 40 * cfg.lanes + 3, cfg)
    await compress_tensors(dut, [(x, cfg)], gap=0.2, p_ready=0.7, p_meta=0.7, rnd=r)
    no_errors(dut)


@cocotb.test()
async def random_tensors(dut):
    """Random tensors, gaps and back-pressure (§8.17): every (man_width, sign_en) pair gets a
    Gecko-mode and a fixed-width tensor, shuffled among further random tensors of both modes."""
    cfg, r, gen = await setup(dut, "random_tensors")
    size = test_size()
    tensors = random_plan(gen, cfg, size, max_rows=60, pair_rows=min(40, max(8, size // 250)))
    rows = plan_rows(tensors, cfg.lanes)
    # light and heavy gaps crossed with light and heavy back-pressure on (o, meta)
    for part, gap, (p_ready, p_meta) in cross(tensors, (0.05, 0.4), ((0.9, 0.9), (0.5, 0.6))):
        await compress_tensors(dut, part, gap=gap, p_ready=p_ready, p_meta=p_meta, rnd=r)
    cocotb.log.info("random_tensors: %d tensors, %d rows", len(tensors), rows)
    no_errors(dut)


@cocotb.test()
async def narrowest_and_widest_fields(dut):
    """W = 1 (no sign, w = 0, no mantissa: 32 or 16 rows per word) and W = lane width."""
    cfg, r, gen = await setup(dut, "narrowest_and_widest_fields")
    fmt = cfg.format
    n = 100 * cfg.lanes + 1
    ones = np.where(gen.random(n) < 0.2, 0, 127 << fmt.man_bits).astype(fmt.dtype)
    full = random_tensor(gen, 30 * cfg.lanes, fmt, True)
    full[::cfg.lanes] = (254 << fmt.man_bits) | 1
    base = dict(lanes=cfg.lanes, fmt=cfg.fmt)
    await compress_tensors(dut, [(ones, GeckoConfig(**base, man_width=0, sign_en=False)),
                                 (full, GeckoConfig(**base))], gap=0.1, p_ready=0.6, rnd=r)
    no_errors(dut)


@cocotb.test()
async def fixed_width_mode(dut):
    """§4.7: external width, no metadata; widths 0..7 with fitting magnitudes."""
    cfg, r, gen = await setup(dut, "fixed_width_mode")
    tensors = []
    for fw in range(8):
        n = int(gen.integers(1, 20 * cfg.lanes))
        x = fit_fixed_width(random_tensor(gen, n, cfg.format, True), fw, cfg.format)
        mw = int(gen.choice(man_widths(cfg)))
        tensors.append((x, GeckoConfig(lanes=cfg.lanes, fmt=cfg.fmt, man_width=mw, fixed_width=fw)))
    await compress_tensors(dut, tensors, gap=0.2, p_ready=0.7, rnd=r)
    no_errors(dut)


@cocotb.test()
async def mixed_modes_back_to_back(dut):
    """Gecko-mode and fixed-width tensors alternating back to back (the control inputs change
    between consecutive rows): partial and exactly full metadata words, one-value tensors,
    fixed widths 0 and 7, flushes at tensor ends.  Streamed without gaps, then under gaps and
    back-pressure on both outputs."""
    cfg, r, gen = await setup(dut, "mixed_modes_back_to_back")
    fmt, lanes = cfg.format, cfg.lanes
    # (rows, fixed width or None); Gecko and fixed tensors alternate
    shapes = [(3, None), (5, 2), (10, None), (1, 0), (11, None), (7, 7), (1, None), (2, 3),
              (20, None), (4, 5), (9, None), (1, 1), (13, None), (6, 4)]
    tensors = []
    for k, (rows, fw) in enumerate(shapes):
        n = rows * lanes - (min(k % 3, lanes - 1) if rows > 1 else lanes - 1)  # ragged ends
        sign_en = bool(k % 4 < 2)
        x = random_tensor(gen, n, fmt, sign_en)
        if fw is not None:
            x = fit_fixed_width(x, fw, fmt)
        mw = man_widths(cfg)[k % len(man_widths(cfg))]
        tensors.append((x, GeckoConfig(lanes=lanes, fmt=cfg.fmt, man_width=mw, sign_en=sign_en,
                                       fixed_width=fw)))
    assert all(c.fixed_width is None for _, c in tensors[::2])
    assert all(c.fixed_width is not None for _, c in tensors[1::2])
    src, out, meta = await compress_tensors(dut, tensors, rnd=r)
    # rows go in back to back (a flush costs at most one cycle per tensor)
    acc = src.accepted_cycles
    stalls = sum(b - a - 1 for a, b in zip(acc, acc[1:]))
    assert stalls <= len(tensors), f"{stalls} stall cycles for {len(tensors)} tensors: {acc}"
    cocotb.log.info("mixed_modes_back_to_back: %d tensors, %d rows, %d stall cycles",
                    len(tensors), len(acc), stalls)
    await compress_tensors(dut, tensors[::-1], gap=0.3, p_ready=0.5, p_meta=0.4, rnd=r)
    no_errors(dut)


@cocotb.test()
async def throughput_and_fill_sequence(dut):
    """§8.18: one row per cycle while ready; with W = 12 words complete after rows 2, 5, 7, ..."""
    cfg, r, _ = await setup(dut, "throughput_and_fill_sequence")
    # W = sign + DS + w + man_width = 12 with w = 2 (|E - 127| = 2, value 4.0)
    mw = 12 - 1 - 1 - 2 if cfg.fmt == "fp32" else 7          # bf16: W = 11
    four = 0x40800000 if cfg.fmt == "fp32" else 0x4080
    n_rows = 40
    x = np.full(n_rows * cfg.lanes, four, dtype=cfg.format.dtype)
    tcfg = GeckoConfig(lanes=cfg.lanes, fmt=cfg.fmt, man_width=mw)
    src, out, _ = await compress_tensors(dut, [(x, tcfg)], rnd=r)
    acc = src.accepted_cycles
    assert acc == list(range(acc[0], acc[0] + n_rows)), f"input stalled: accepted at {acc}"
    completing = completion_rows(x, tcfg)                   # from golden prefix streams
    if cfg.fmt == "fp32":
        assert completing[:3] == [2, 5, 7], f"golden completion rows {completing}"
    lat = [c - acc[row] for c, row in zip(out.cycles, completing)]
    assert len(out.cycles) == len(completing)
    want = compressor_latency(cfg)
    assert lat[:-1] == [want] * (len(lat) - 1), f"latencies {lat}, expected {want}"
    no_errors(dut)


async def provoke(dut, bits, ctrl, flag, culprit, rnd, cfg, equivalent=None):
    """Reset, send one tensor that raises ``flag`` and check that exactly that flag is set,
    that it rises :data:`~golden.gecko.codec.COMPRESSOR_ERROR_LAG` cycles after row
    ``culprit`` (the first offending row) was accepted, and that it stays set.  ``equivalent``
    (bits, cfg) is the legal tensor the output must then equal."""
    await reset(dut)
    no_errors(dut)
    rows = rows_of(bits, cfg)
    items = [(pack_row(row, q == len(rows) - 1, cfg), ctl_ports(ctrl))
             for q, row in enumerate(rows)]
    src = Source(dut, "i", items, rnd)
    out = Sink(dut, "o", rnd)
    meta = Sink(dut, "meta", rnd)
    raised = []

    def check(cycle):
        raised.append(uint(getattr(dut, flag)))

    cycle = await run(dut, [src], [out, meta], lambda: src.done, 100, check=check)
    for _ in range(4 + compressor_latency(cfg)):
        out.drive()
        meta.drive()
        await ReadOnly()
        out.sample(cycle)
        meta.sample(cycle)
        check(cycle)
        cycle += 1
        await FallingEdge(dut.clk)
    for e in ERRS:
        assert uint(getattr(dut, e)) == (1 if e == flag else 0), f"{e} wrong after provoking {flag}"
    rise = raised.index(1)
    accepted = src.accepted_cycles[culprit]
    assert rise == accepted + COMPRESSOR_ERROR_LAG, (
        f"{flag} rose in cycle {rise}; row {culprit}, which raises it, was accepted in cycle "
        f"{accepted}")
    if equivalent is not None:
        want_data, want_meta = expected(*equivalent)
        assert out.got == want_data and meta.got == want_meta, (
            f"{flag}: output {[hex(v) for v in out.got]} {[hex(v) for v in meta.got]} differs from "
            f"golden {[hex(v) for v in want_data]} {[hex(v) for v in want_meta]}")
    await FallingEdge(dut.clk)
    assert uint(getattr(dut, flag)) == 1, f"{flag} is not sticky"


@cocotb.test()
async def sticky_errors(dut):
    """Each sticky error: E = 255 (coded as E = 254, A3), MAG overflow in fixed mode, a sign
    with sign_en = 0 (dropped), man_width above the mantissa (treated as the full mantissa);
    each rises a fixed number of cycles after the row that causes it, at every depth."""
    cfg, r, _ = await setup(dut, "sticky_errors")
    fmt = cfg.format
    one = 127 << fmt.man_bits
    eight = 130 << fmt.man_bits                                 # |E - 127| = 3
    neg = 1 << (fmt.width - 1)
    row = np.full(cfg.lanes, one | 5, dtype=fmt.dtype)
    base = dict(lanes=cfg.lanes, fmt=cfg.fmt)

    def tensor(last):
        return np.concatenate([row, np.array([last], dtype=fmt.dtype)])

    full = GeckoConfig(**base)
    await provoke(dut, tensor((255 << fmt.man_bits) | 3), control(fmt.man_bits, True, None),
                  "err_exp", 1, r, cfg, (tensor((254 << fmt.man_bits) | 3), full))
    await provoke(dut, tensor(eight), control(3, True, 1), "err_mag", 1, r, cfg)
    await provoke(dut, tensor(one | neg | 9), control(3, False, None), "err_sign", 1, r, cfg,
                  (tensor(one | 9), GeckoConfig(**base, man_width=3, sign_en=False)))
    await provoke(dut, row, control(fmt.man_bits + 1, True, None), "err_cfg", 0, r, cfg,
                  (row, full))

"""Testbench of the Gecko decompressor (``gecko.decompressor``) against ``golden.gecko.codec``.

The compressed streams come from ``golden.gecko.codec.compress``; every output row must equal
``golden.gecko.codec.decompress`` of that stream (rows padded with the +0.0 the tail padding decodes
to).  Covers the spec vector (§8.13), random tensors over every man_width/sign_en pair in Gecko
and fixed-width mode with input gaps and output back-pressure, throughput (one row per cycle,
at most one input word row per output row, §8.18) and the sticky ``err_cfg``.  Every stream run
is also compared, cycle by cycle, with the cycle model ``golden.gecko.codec.decompressor_cycles``
at the configuration's ``pipeline`` (the three ready outputs and ``o`` in every cycle).
"""

import cocotb
from cocotb.triggers import FallingEdge

from golden.gecko.codec import GeckoConfig, compress, decompress, decompressor_latency

from ..common import config_from_env, reset, test_size, uint
from ..common.streams import Sink, Source, cross, quiet, run
from .harness import (
    DECOMPRESSOR_PORTS, PortTrace, cfg_control, control, expect_decompressor_cycles, own_tensor,
    pack_cmd, pack_row, plan_rows, random_plan, random_tensor, row_words, rows_of, setup,
    spec_rows_ab, stream_payloads,
)


def stream_items(bits, cfg: GeckoConfig):
    """Command, data rows, metadata words and expected output rows of one tensor."""
    s = compress(bits, cfg)
    cmd = pack_cmd(-(-bits.size // cfg.lanes), cfg_control(cfg))
    data, meta = stream_payloads(s)
    want = rows_of(decompress(s), cfg)
    out = [pack_row(r, q == len(want) - 1, cfg) for q, r in enumerate(want)]
    return cmd, data, meta, out


async def decompress_tensors(dut, tensors, rnd, gap=0.0, p_ready=1.0):
    """Feed golden streams of ``(bits, cfg)`` tensors back to back; check every output row."""
    cmds, data, meta, want = [], [], [], []
    for bits, cfg in tensors:
        c, d, m, o = stream_items(bits, cfg)
        cmds.append((c, {}))
        data += [(v, {}) for v in d]
        meta += [(v, {}) for v in m]
        want += o
    srcs = [Source(dut, "cmd", cmds, rnd, gap), Source(dut, "i", data, rnd, gap),
            Source(dut, "meta", meta, rnd, gap)]
    out = Sink(dut, "o", rnd, p_ready)
    limit = 50 + int(4 * (len(want) + len(tensors)) / min(1 - gap, p_ready))
    trace = PortTrace(dut, DECOMPRESSOR_PORTS)
    await run(dut, srcs, [out], lambda: len(out.got) >= len(want), limit, check=trace)
    await quiet(dut, [out])
    for s in srcs:
        assert s.done, "the unit did not consume its whole input stream"
    out.expect(want)
    expect_decompressor_cycles(trace, config_from_env(GeckoConfig), tensors)
    return srcs, out



@cocotb.test()
async def spec_vector_two_rows(dut):
    """§8.13: the two packed rows decode to P(x, 2) (FP32: the printed 16 words)."""
    cfg, r, _ = await setup(dut, "spec_vector_two_rows")
    vcfg = GeckoConfig(lanes=cfg.lanes, fmt=cfg.fmt, man_width=2, sign_en=True)
    x = spec_rows_ab(cfg)
    _, out = await decompress_tensors(dut, [(x, vcfg)], r)
    if cfg.lanes == 8 and cfg.fmt == "fp32":
        printed = [0x3F800000, 0x3F000000, 0x3E800000, 0x40400000, 0x3E000000, 0x3F400000,
                   0x3FC00000, 0x00000000, 0xBDC00000, 0x3E400000, 0xBE800000, 0x3EC00000,
                   0x41000000, 0xC0200000, 0x3D800000, 0x3A800000]
        got = [w for p in out.got for w in row_words(p, cfg)]
        assert got == printed
    assert uint(dut.err_cfg) == 0


@cocotb.test()
async def configured_tensor(dut):
    """A random tensor at the configuration's own man_width / sign_en / fixed_width."""
    cfg, r, gen = await setup(dut, "configured_tensor")
    x = own_tensor(gen, 40 * cfg.lanes + 5, cfg)
    await decompress_tensors(dut, [(x, cfg)], r, gap=0.2, p_ready=0.7)
    assert uint(dut.err_cfg) == 0


@cocotb.test()
async def random_tensors(dut):
    """Random tensors with gaps and back-pressure: every (man_width, sign_en) pair gets a
    Gecko-mode and a fixed-width tensor (fixed widths 0..7), shuffled among further random
    tensors of both modes."""
    cfg, r, gen = await setup(dut, "random_tensors")
    size = test_size()
    tensors = random_plan(gen, cfg, size, max_rows=60, pair_rows=min(40, max(8, size // 250)))
    rows = plan_rows(tensors, cfg.lanes)
    for part, gap, p_ready in cross(tensors, (0.05, 0.4), (0.9, 0.5)):
        await decompress_tensors(dut, part, r, gap=gap, p_ready=p_ready)
    cocotb.log.info("random_tensors: %d tensors, %d rows", len(tensors), rows)
    assert uint(dut.err_cfg) == 0


@cocotb.test()
async def throughput_one_row_per_cycle(dut):
    """§8.18: with inputs always offered and ``o`` ready, one row per cycle, at most one input
    word row per output row, for narrow and full-width fields."""
    cfg, r, gen = await setup(dut, "throughput_one_row_per_cycle")
    for mw in (0, cfg.format.man_bits):
        x = random_tensor(gen, 64 * cfg.lanes, cfg.format, True)
        tcfg = GeckoConfig(lanes=cfg.lanes, fmt=cfg.fmt, man_width=mw)
        srcs, out = await decompress_tensors(dut, [(x, tcfg)], r)
        c = out.cycles
        assert c == list(range(c[0], c[0] + 64)), f"output rows not back to back: {c}"
        # an output row is on o decompressor_latency cycles after the one that consumes its
        # inputs, so every cycle that accepts an input word row must be followed by an output
        # row that many cycles later
        lag = decompressor_latency(cfg)
        words, rows_out = srcs[1].accepted_cycles, set(c)
        lone = [a for a in words if a + lag not in rows_out]
        assert not lone, (f"input word rows accepted in cycles {lone} produced no output row "
                          f"{lag} cycles later (outputs at {c})")
        assert c[0] - srcs[0].accepted_cycles[0] <= 2 + lag, "slow start after the command"


@cocotb.test()
async def sticky_err_cfg(dut):
    """A command with man_width above the mantissa sets the sticky ``err_cfg``."""
    cfg, r, gen = await setup(dut, "sticky_err_cfg")
    await reset(dut)
    assert uint(dut.err_cfg) == 0
    bad = pack_cmd(0, control(cfg.format.man_bits + 1, True, None))
    src = Source(dut, "cmd", [(bad, {})], r)
    await run(dut, [src], [], lambda: src.done, 20)
    for _ in range(3):
        await FallingEdge(dut.clk)
        assert uint(dut.err_cfg) == 1, "err_cfg not set or not sticky"
    await reset(dut)
    assert uint(dut.err_cfg) == 0, "reset does not clear err_cfg"

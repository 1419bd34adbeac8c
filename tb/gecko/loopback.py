"""Testbench of the compressor → decompressor chain (``gecko.loopback``, spec §8.17).

Tensors go in as rows; what comes out must be ``golden.gecko.schrodinger.truncate_mantissa(x,
man_width)`` bit for bit (the identity at the full mantissa with the sign stored), under random
input gaps and output back-pressure.  The random test covers every (man_width, sign_en) pair in
Gecko and fixed-width mode, the two modes interleaved back to back.
"""

import cocotb
import numpy as np

from golden.gecko.codec import GeckoConfig
from golden.gecko.schrodinger import truncate_mantissa

from ..common import config_from_env, test_size
from ..common.streams import Sink, Source, cross, quiet, run
from .harness import (
    cfg_control, ctl_ports, no_errors, own_tensor, pack_cmd, pack_row, plan_rows, random_plan,
    random_tensor, rows_of, setup,
)


async def loop_tensors(dut, tensors, rnd, gap=0.0, p_ready=1.0):
    """Send ``(bits, cfg)`` tensors through the chain and compare with truncation."""
    ucfg = config_from_env(GeckoConfig)
    rows_in, cmds, want = [], [], []
    for bits, cfg in tensors:
        ctrl = cfg_control(cfg)
        rows = rows_of(bits, cfg)
        rows_in += [(pack_row(r, q == len(rows) - 1, cfg), ctl_ports(ctrl))
                    for q, r in enumerate(rows)]
        cmds.append((pack_cmd(len(rows), ctrl), {}))
        exp = rows_of(truncate_mantissa(bits, cfg.man_width, cfg.fmt), cfg)
        want += [pack_row(r, q == len(exp) - 1, cfg) for q, r in enumerate(exp)]
    srcs = [Source(dut, "i", rows_in, rnd, gap), Source(dut, "cmd", cmds, rnd, gap)]
    out = Sink(dut, "o", rnd, p_ready)
    limit = 100 + int(6 * len(want) / min(1 - gap, p_ready))
    await run(dut, srcs, [out], lambda: len(out.got) >= len(want), limit)
    await quiet(dut, [out])
    out.expect(want, f"lanes={ucfg.lanes}, fmt={ucfg.fmt}: ")
    no_errors(dut)
    return srcs, out



@cocotb.test()
async def configured_tensor(dut):
    """A random tensor at the configuration's own side-band values."""
    cfg, r, gen = await setup(dut, "configured_tensor")
    x = own_tensor(gen, 50 * cfg.lanes + 1, cfg)
    await loop_tensors(dut, [(x, cfg)], r, gap=0.2, p_ready=0.7)


@cocotb.test()
async def identity_at_full_mantissa(dut):
    """§8.17: man_width = m with the sign stored is the identity (every exponent code)."""
    cfg, r, gen = await setup(dut, "identity_at_full_mantissa")
    fmt = cfg.format
    # every exponent 0..254 with both signs (zeros and subnormals included), then random values
    e = np.repeat(np.arange(255, dtype=np.int64), 2)
    s = np.tile(np.array([0, 1], dtype=np.int64), 255)
    man = gen.integers(0, 1 << fmt.man_bits, e.size)
    every = ((s << (fmt.width - 1)) | (e << fmt.man_bits) | man).astype(fmt.dtype)
    x = np.concatenate([every, random_tensor(gen, 30 * cfg.lanes + 7, fmt, True)])
    tcfg = GeckoConfig(lanes=cfg.lanes, fmt=cfg.fmt)
    assert np.array_equal(truncate_mantissa(x, tcfg.man_width, cfg.fmt), x)
    await loop_tensors(dut, [(x, tcfg)], r, gap=0.1, p_ready=0.8)


@cocotb.test()
async def random_roundtrip(dut):
    """Random tensors under random gaps and back-pressure: every (man_width, sign_en) pair gets
    a Gecko-mode and a fixed-width tensor (fixed widths 0..7), shuffled among further random
    tensors of both modes; at least the unit's test size in rows (``TRAINFAB_TEST_SIZE``)."""
    cfg, r, gen = await setup(dut, "random_roundtrip")
    size = test_size()
    tensors = random_plan(gen, cfg, size, max_rows=50, pair_rows=min(40, max(6, size // 250)))
    rows = plan_rows(tensors, cfg.lanes)
    assert any(c.fixed_width is not None for _, c in tensors)
    assert rows >= size
    for part, gap, p_ready in cross(tensors, (0.05, 0.3), (0.95, 0.4)):
        await loop_tensors(dut, part, r, gap=gap, p_ready=p_ready)
    cocotb.log.info("random_roundtrip: %d tensors, %d rows", len(tensors), rows)


@cocotb.test()
async def narrowest_fields(dut):
    """W = 1 and W = 2 (a word spans 32 or 16 rows, i.e. several metadata words) and W = 32."""
    cfg, r, gen = await setup(dut, "narrowest_fields")
    fmt = cfg.format
    one = 127 << fmt.man_bits                      # |E - 127| = 0: w = 0
    n = 200 * cfg.lanes
    ones = np.full(n, one, dtype=fmt.dtype)
    ones[gen.random(n) < 0.2] = 0                  # zeros keep w = 0
    signed = ones | (gen.integers(0, 2, n) << (fmt.width - 1)).astype(fmt.dtype)
    full = random_tensor(gen, 40 * cfg.lanes, fmt, True)
    full[::cfg.lanes] = (254 << fmt.man_bits) | 1  # w = 7 in every row: W = lane width
    base = dict(lanes=cfg.lanes, fmt=cfg.fmt)
    await loop_tensors(dut, [(ones, GeckoConfig(**base, man_width=0, sign_en=False)),
                             (signed, GeckoConfig(**base, man_width=0, sign_en=True)),
                             (full, GeckoConfig(**base))], r, gap=0.1, p_ready=0.6)

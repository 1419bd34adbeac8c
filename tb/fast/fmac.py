"""Testbench of FAST's fMAC (``fast.fmac``) against ``golden.fast.numerics.fmac_run``.

Group pairs stream in as fast as the fMAC takes them; the next pair must be accepted exactly in
the cycle the golden model says the current one ends (``rounds(mx, my)`` cycles, T16), and the
FP32 accumulator must equal the golden accumulator after every pair.  Dot products chain pairs
without ``clear``.
"""

import functools

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly

from golden.fast.numerics import FMAC_WIDTHS, FMACConfig, fmac_run, rounds
from hdl.fast import pair_layout

from ..common import config_from_env, rng, start, test_size, uint
from ..common.layouts import pack


@functools.cache
def _layout(cfg):
    return pair_layout(cfg)


def operand_value(grp) -> dict:
    """A BFP group ``(Es, signs, q)`` as the value of :func:`hdl.fast.operand_layout`."""
    Es, signs, q = grp
    return {"es": int(Es), "sign": sum(int(s) << j for j, s in enumerate(signs)),
            "q": [int(v) for v in q]}


def payload(cfg, x, mx, y, my, clear) -> int:
    return pack(_layout(cfg), {"x": operand_value(x), "y": operand_value(y), "mx": mx // 2 - 1,
                               "my": my // 2 - 1, "clear": int(clear)})


async def stream(dut, cfg, pairs, where: str):
    """Feed ``pairs`` back to back; check acceptance timing and every accumulator."""
    accs, cycles = fmac_run(cfg, pairs)
    pending = None
    for k, (x, mx, y, my, clear) in enumerate(pairs):
        dut.grp__payload.value = payload(cfg, x, mx, y, my, clear)
        dut.grp__valid.value = 1
        await ReadOnly()
        assert uint(dut.grp__ready) == 1, f"{where}: pair {k} not accepted when golden says"
        if k:
            assert uint(dut.busy) == 1 and uint(dut.last) == 1, \
                f"{where}: pair {k - 1} did not end after {cycles[k - 1]} cycles"
        await FallingEdge(dut.clk)
        if pending is not None:
            j, want = pending
            got = uint(dut.acc)
            assert got == int(want.view(np.uint32)), (
                f"{where}: pair {j}: acc {got:#010x}, golden {int(want.view(np.uint32)):#010x} "
                f"({pairs[j]})")
        dut.grp__valid.value = 0
        if cycles[k] > 1:
            await ClockCycles(dut.clk, cycles[k] - 1, rising=False)
        pending = (k, accs[k])
    await ReadOnly()
    assert uint(dut.busy) == 1 and uint(dut.last) == 1, f"{where}: last pair did not end"
    await FallingEdge(dut.clk)
    j, want = pending
    assert uint(dut.acc) == int(want.view(np.uint32)), f"{where}: pair {j}"
    await ReadOnly()
    assert uint(dut.busy) == 0
    await FallingEdge(dut.clk)
    return accs, cycles


def _group(cfg, Es, q, signs=None):
    q = list(q) + [0] * (cfg.group - len(q))
    return (Es, list(signs or [0] * cfg.group), q)


def random_pair(cfg, gen, mx, my, clear):
    def operand(m):
        kind = gen.integers(0, 4)
        Es = int(gen.choice([0, 1, 2, 60, 127, 128, 200, 253, 254]) if kind == 0
                 else gen.integers(100, 150))
        q = gen.integers(0, 1 << m, cfg.group)
        if kind == 1:
            q[gen.random(cfg.group) < 0.5] = 0
        if kind == 2:
            q[:] = (1 << m) - 1
        return (Es, gen.integers(0, 2, cfg.group).tolist(), q.tolist())

    return (operand(mx), mx, operand(my), my, clear)


def widths(cfg):
    return [m for m in FMAC_WIDTHS if m <= cfg.m_max]


@cocotb.test()
async def spec_vectors(dut):
    """T11 (2x2: 16 x 3 x 3 at Es 127 = 36.0, one cycle), T14 (4x4: 16 x 15 x 15 -> 56.25,
    four cycles), T15 (a P = 0 round leaves the accumulator; FTZ; overflow to +Inf) and T16
    (every width pair takes (mx/2)(my/2) cycles)."""
    cfg = config_from_env(FMACConfig)
    await start(dut)
    ones = [0] * cfg.group
    pairs = [(_group(cfg, 127, [3] * cfg.group), 2, _group(cfg, 127, [3] * cfg.group), 2, 1)]
    if cfg.m_max >= 4:
        pairs.append((_group(cfg, 127, [15] * cfg.group), 4, _group(cfg, 127, [15] * cfg.group),
                      4, 1))
    pairs += [
        (_group(cfg, 127, ones), 2, _group(cfg, 127, [3] * cfg.group), 2, 0),     # P = 0
        (_group(cfg, 60, [1]), 2, _group(cfg, 60, [1]), 2, 1),                   # FTZ
        (_group(cfg, 254, [3] * cfg.group), 2, _group(cfg, 254, [3] * cfg.group), 2, 1),  # Inf
    ]
    accs, cycles = await stream(dut, cfg, pairs, "spec vectors")
    if cfg.group == 16:
        assert accs[0].view(np.uint32) == 0x42100000 and cycles[0] == 1
        if cfg.m_max >= 4:
            assert accs[1] == np.float32(56.25) and cycles[1] == 4
    assert accs[-2].view(np.uint32) == 0 and np.isinf(accs[-1])
    for mx in widths(cfg):
        for my in widths(cfg):
            pair = random_pair(cfg, np.random.default_rng(mx * 10 + my), mx, my, 1)
            _, c = await stream(dut, cfg, [pair], f"T16 ({mx}, {my})")
            assert c == [rounds(mx, my)]


@cocotb.test()
async def random_dot_products(dut):
    """The unit's test size in random group pairs *per (mx, my) combination* the configuration
    allows (60 in ``make test``, 10,000 at full effort), in random order, chained into dot
    products of 1-6 pairs."""
    cfg = config_from_env(FMACConfig)
    await start(dut)
    r = rng("random_dot_products")
    gen = np.random.default_rng(r.getrandbits(64))
    ws = widths(cfg)
    combos = [(a, b) for a in ws for b in ws] * test_size()
    order = gen.permutation(len(combos))
    pairs = []
    left = 0
    for k in order:
        clear = left == 0
        if clear:
            left = int(gen.integers(1, 7))
        left -= 1
        pairs.append(random_pair(cfg, gen, *combos[k], clear))
    counts = {}
    for p in pairs:
        counts[(p[1], p[3])] = counts.get((p[1], p[3]), 0) + 1
    assert counts == {c: test_size() for c in set(combos)}, counts
    await stream(dut, cfg, pairs, "random")


@cocotb.test()
async def width_above_m_max_sets_error(dut):
    """A pair asking for more bits than the operand registers hold sets the sticky error."""
    cfg = config_from_env(FMACConfig)
    await start(dut)
    assert uint(dut.error) == 0
    if cfg.m_max == 8:
        return
    g = _group(cfg, 127, [1])
    dut.grp__payload.value = pack(_layout(cfg), {"x": {"es": 127, "q": g[2]}, "mx": 3,
                                                  "y": {"es": 127, "q": g[2]}, "my": 0,
                                                  "clear": 1})
    dut.grp__valid.value = 1
    await FallingEdge(dut.clk)
    dut.grp__valid.value = 0
    await ReadOnly()
    assert uint(dut.error) == 1

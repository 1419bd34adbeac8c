"""Testbench of FAST's Table IV baselines (``baseline.mac16``) against
``golden.baseline.mac16_cycles``: one operand group per cycle (with random idle cycles), every
lane's accumulator checked after every edge against the cycle model, so a group that reaches
the accumulators a cycle early or late (``pipeline`` stages) fails.  With ``contexts > 1`` the
cycle model also names the interleaved sum each group joins and the one ``acc`` shows; the
``slot`` and ``acc_slot`` outputs are checked in every cycle, and every sum is read back (one per
cycle over ``contexts`` idle cycles) before each run.

``power_run`` (``trainfab power``, registered only in power runs) drives the power flow's bf16
operand groups converted to the unit's format by :func:`golden.baseline.mac16_operands`.

Operands mix values near 1 (long accumulations stay meaningful) with every bit pattern of the
format and its corners: ±0, subnormals (read as zero), the smallest and largest normals, ±Inf
and NaN for float formats; the most negative and positive values for integers.
"""

import functools

import cocotb
import numpy as np
from cocotb.triggers import FallingEdge

from golden.baseline import (MAC16Config, mac16_acc_slot, mac16_cycles, mac16_operands,
                             mac16_products, mac16_run)
from golden.common.fp_add import fp32_add_bits
from hdl.common.formats import group_layout
from tb.common.power import PowerWindow, group_operands, power_test

from ..common import config_from_env, port, rng, start, test_size, uint
from ..common.layouts import pack


@functools.cache
def _layout(cfg):
    return group_layout(cfg.fmt, cfg.lanes)


def corners(cfg) -> np.ndarray:
    fmt = cfg.format
    if not cfg.is_float:
        return np.array([0, 1, (1 << fmt.bits) - 1, 1 << (fmt.bits - 1),
                         (1 << (fmt.bits - 1)) - 1], dtype=np.int64)
    neg = 1 << (fmt.width - 1)
    one = fmt.bias << fmt.man_bits
    return np.array([0, neg, 1, (1 << fmt.man_bits) - 1, 1 << fmt.man_bits, fmt.max_finite,
                     fmt.max_finite | neg, fmt.inf, fmt.inf | neg, fmt.inf | 1, one, one | neg,
                     one | ((1 << fmt.man_bits) - 1)], dtype=np.int64)


def operands(cfg, gen: np.random.Generator, n: int) -> np.ndarray:
    """``(n, lanes)`` operand bit patterns."""
    fmt = cfg.format
    x = gen.integers(0, 1 << fmt.width, (n, cfg.lanes))
    if cfg.is_float:
        # mostly values within a few binades of 1, so accumulations neither overflow at once
        # nor vanish
        near = (gen.integers(0, 2, x.shape) << (fmt.width - 1)) \
            | ((fmt.bias + gen.integers(-3, 3, x.shape)) << fmt.man_bits) \
            | gen.integers(0, 1 << fmt.man_bits, x.shape)
        x = np.where(gen.random(x.shape) < 0.8, near, x)
    x = np.where(gen.random(x.shape) < 0.04, gen.choice(corners(cfg), x.shape), x)
    return x


def _drain(cfg) -> int:
    """Idle cycles after a group until its sum is on ``acc``: ``pipeline`` (one context), or
    ``pipeline + contexts - 1`` (the adder's stages)."""
    return cfg.pipeline + cfg.contexts - 1


async def warm_up(dut, cfg):
    """After reset, ``pipeline`` cycles of all-ones operands without ``valid``: every stage
    register leaves its initial value before any check (Icarus evaluates a combinational block
    only when one of its inputs changes), and nothing may be accumulated.

    With interleaved sums an idle cycle feeds the loop the same constants (``-0`` and the
    accumulator's ``+0``), so Icarus leaves the adder's logic unknown until a nonzero group
    arrives: one group of ones (1 x 1) with ``clear`` per sum follows, then idle cycles until
    the last one is on ``acc`` and ``contexts`` more, in which every sum must show ``1 x 1``."""
    lay = _layout(cfg)
    idle = (1 << lay.size) - 1

    async def idle_cycles(n, want=None):
        dut.grp__valid.value = 0
        dut.grp__payload.value = idle
        for _ in range(n):
            await FallingEdge(dut.clk)
            for i in range(0 if want is None else cfg.lanes):
                assert uint(port(dut, "acc", i)) == int(want[i]), \
                    f"lane {i} accumulated a group without valid"

    zero = np.zeros(cfg.lanes, dtype=np.int64)
    if cfg.contexts == 1:
        await idle_cycles(cfg.pipeline, zero)
        return
    await idle_cycles(max(cfg.pipeline, 1))
    one = np.full(cfg.lanes, cfg.format.bias << cfg.format.man_bits)
    dut.grp__valid.value = 1
    dut.grp__payload.value = pack(lay, {"a": list(one), "b": list(one), "clear": 1})
    for _ in range(cfg.contexts):
        await FallingEdge(dut.clk)
    await idle_cycles(_drain(cfg))
    await idle_cycles(cfg.contexts,
                      fp32_add_bits(zero.astype(np.uint32),
                                    mac16_products(cfg, one, one).astype(np.uint32)))


async def read_sums(dut, cfg):
    """With nothing in flight: ``(contexts, lanes)``, every interleaved sum, read over
    ``contexts`` idle cycles (one per cycle, the one ``acc_slot`` names), and the ``slot`` of
    the cycle after them."""
    C = cfg.contexts
    dut.grp__valid.value = 0
    sums = np.zeros((C, cfg.lanes), dtype=np.int64)
    seen = set()
    for _ in range(C):
        c = uint(dut.acc_slot)
        seen.add(c)
        sums[c] = [uint(port(dut, "acc", i)) for i in range(cfg.lanes)]
        await FallingEdge(dut.clk)
    assert seen == set(range(C)), f"acc_slot named {sorted(seen)} over {C} cycles"
    return sums, uint(dut.slot)


async def run_groups(dut, cfg, groups, r, gap=0.0):
    """Drive ``(a, b, clear)`` groups (idling with probability ``gap`` before each), then the
    idle cycles until the last one is on ``acc``; check every lane after every edge against
    :func:`golden.baseline.mac16_cycles` (and the slots, with ``contexts > 1``).  Returns the
    accumulators after each group, one context (:func:`golden.baseline.mac16_run`), or the
    model's sums after the run, ``(contexts, lanes)``."""
    bits = cfg.format.width

    def value(v):
        # integer operands are two's complement bit patterns; the port field is signed
        v = int(v)
        return v - (1 << bits) if not cfg.is_float and v >> (bits - 1) else v

    cycles = []
    for group in groups:
        while r.random() < gap:
            cycles.append(None)
        cycles.append(group)
    cycles += [None] * _drain(cfg)
    # the accumulators as the previous run left them (checked there), nothing in flight
    slot = 0
    if cfg.contexts == 1:
        before = [uint(port(dut, "acc", i)) for i in range(cfg.lanes)]
    else:
        before, slot = await read_sums(dut, cfg)
    want = mac16_cycles(cfg, cycles, before, slot)
    last = None
    for t, item in enumerate(cycles):
        if cfg.contexts > 1:
            assert uint(dut.slot) == (slot + t) % cfg.contexts, \
                f"cycle {t}: slot {uint(dut.slot)}, expected {(slot + t) % cfg.contexts}"
        if item is None:
            dut.grp__valid.value = 0
        else:
            a, b, clear = item
            last = item
            dut.grp__payload.value = pack(_layout(cfg), {"a": [value(v) for v in a],
                                                         "b": [value(v) for v in b],
                                                         "clear": int(clear)})
            dut.grp__valid.value = 1
        await FallingEdge(dut.clk)
        if cfg.contexts > 1:
            want_slot = mac16_acc_slot(cfg, t + 1, slot)
            assert uint(dut.acc_slot) == want_slot, \
                f"cycle {t + 1}: acc_slot {uint(dut.acc_slot)}, expected {want_slot}"
        for i in range(cfg.lanes):
            got = uint(port(dut, "acc", i))
            assert got == int(want[t][i]), (
                f"{cfg.fmt} pipeline {cfg.pipeline} cycle {t} lane {i}: acc {got:#x}, golden "
                f"{int(want[t][i]):#x} (last group offered: a={int(last[0][i]):#x}, "
                f"b={int(last[1][i]):#x}, clear={last[2]})" if last is not None else
                f"{cfg.fmt} cycle {t} lane {i}: acc {got:#x}, golden {int(want[t][i]):#x}")
    dut.grp__valid.value = 0
    if cfg.contexts > 1:
        after, _ = await read_sums(dut, cfg)
        # every sum, and not only the ones shown in the run's last cycles
        n = len(cycles)
        model = mac16_cycles(cfg, cycles + [None] * cfg.contexts, before, slot)
        for v in range(n, n + cfg.contexts):       # the cycles read_sums read
            c = mac16_acc_slot(cfg, v, slot)
            assert (after[c] == model[v - 1]).all(), f"sum {c}: {after[c]}, golden {model[v - 1]}"
        return after
    return mac16_run(cfg, groups)


@cocotb.test()
async def directed(dut):
    """1 x 2 accumulated twice (bit patterns derived from the format), then the corners of the
    format against each other: every lane gets one corner pair per group."""
    cfg = config_from_env(MAC16Config)
    await start(dut)
    await warm_up(dut, cfg)
    r = rng("directed")
    fmt = cfg.format
    L = cfg.lanes
    if cfg.is_float:
        one, two = fmt.bias << fmt.man_bits, (fmt.bias + 1) << fmt.man_bits
    else:
        one, two = 1, 2
    # with interleaved sums, each group is offered once per sum, in consecutive cycles
    C = cfg.contexts
    want = await run_groups(dut, cfg, [(np.full(L, one), np.full(L, two), 1)] * C
                            + [(np.full(L, one), np.full(L, two), 0)] * C, r)
    expect4 = 0x40800000 if cfg.is_float else 4
    assert all(int(v) == expect4 for v in np.ravel(want[-1] if C == 1 else want)), want
    c = corners(cfg)
    pairs = [(x, y) for x in c for y in c]
    groups = []
    for k in range(0, len(pairs), L):
        chunk = pairs[k:k + L] + [(0, 0)] * (L - len(pairs[k:k + L]))
        groups.append((np.array([p[0] for p in chunk]), np.array([p[1] for p in chunk]), 1))
    await run_groups(dut, cfg, groups, r)


@cocotb.test()
async def random_accumulations(dut):
    """The unit's test size in random groups (``TRAINFAB_TEST_SIZE``), accumulated in runs of
    1-40 groups, with random idle cycles."""
    cfg = config_from_env(MAC16Config)
    await start(dut)
    await warm_up(dut, cfg)
    r = rng("random_accumulations")
    gen = np.random.default_rng(r.getrandbits(64))
    n = test_size()
    A, B = operands(cfg, gen, n), operands(cfg, gen, n)
    groups, left = [], 0
    for k in range(n):
        clear = left == 0
        if clear:
            left = int(gen.integers(1, 41))
        left -= 1
        groups.append((A[k], B[k], clear))
    await run_groups(dut, cfg, groups, r, gap=0.1)


@power_test
async def power_run(dut):
    """``trainfab power``: the bf16 operand groups ``a``/``b`` (groups, lanes) converted to
    ``cfg.fmt`` by :func:`golden.baseline.mac16_operands` (float formats: each value rounded
    to the format, RNE, saturating; integer formats: each group and side scaled by
    ``s = max|x| / (2**(bits-1) - 1)``, ``q = RNE(x / s)``), driven one per cycle with no idle
    cycle, every lane's accumulator cleared at the first group of every ``dot_groups`` and
    checked after every edge against the golden model; the measured window covers exactly those
    cycles and the ``pipeline`` cycles in which the last group reaches the accumulators."""
    cfg = config_from_env(MAC16Config)
    await start(dut)
    await warm_up(dut, cfg)
    A, B, dot = group_operands(cfg.lanes)
    groups = A.shape[0]
    A, B = mac16_operands(cfg, A), mac16_operands(cfg, B)
    window = PowerWindow(dut)
    accs = await run_groups(dut, cfg, [(A[g], B[g], g % dot == 0) for g in range(groups)],
                            rng("power_run"))
    assert len(accs) == (groups if cfg.contexts == 1 else cfg.contexts)
    window.close(groups=groups, busy_cycles=groups, dot_products=groups // dot, fmt=cfg.fmt)

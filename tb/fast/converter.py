"""Testbench of FAST's FP32 → BFP converter (``fast.converter``) against
``golden.fast.converter.convert_groups`` and ``golden.fast.numerics.LaneRNG``.

Groups stream through the valid/ready ports under random gaps and back-pressure; every output
group (shared exponent, signs, magnitudes, chunk exponents, improvement sums) is compared with
the golden model, which also draws the built-in LFSRs' noise in the same order.  The LFSR
states themselves are compared with ``LaneRNG`` after every gradient conversion, and
``i.ready``, ``o.valid`` and the sticky ``error`` in every cycle with the cycle model
``golden.fast.converter.ConverterSim``, so every ``pipeline`` depth is checked to the cycle
(:mod:`tb.common.bfp`).
"""

import cocotb
import numpy as np

from golden.fast.numerics import SR_BITS
from golden.fast.converter import ConverterConfig, ConverterSim, convert_groups
from hdl.fast import input_layout, output_layout

from ..common import setup
from ..common.bfp import Bench, Golden, one_per_cycle, pad, random_block, random_streams, \
    sticky_error, stream_blocks

#: spec T1 (§11) and T7's group
T1 = [3.0, 1.0, -1.5, 0.75, 0.5, -0.25, 0.2, 0.1, 2.5, -2.75, 1.875, 0.0, -0.0, 3.75, 0.0625, 1e-3]
T7 = [1.0, 0.15625, -0.15625, 2.0 ** -11, 2.0 ** -12]


def item(cfg, x, is_grad=0, rand=None, exp_floor=0) -> dict:
    """One input payload: ``rand`` given = injected noise."""
    return {"x": [int(b) for b in np.asarray(x, np.float32).view(np.uint32)],
            "is_grad": int(is_grad), "rand_en": int(rand is not None),
            "rand": [int(r) for r in (rand if rand is not None else [0] * cfg.group)],
            "exp_floor": int(exp_floor)}


def golden(cfg) -> Golden:
    """The golden models of a run from reset."""
    return Golden(cfg.group, SR_BITS, ConverterSim(cfg))


def expected(cfg, items, gold: Golden) -> list:
    """Golden outputs of a list of input payloads (``None`` for a group with Inf or NaN, which
    converts as zeros: it still draws from the LFSRs)."""
    x = np.array([it["x"] for it in items], dtype=np.uint32).reshape(-1, cfg.group)
    bad = ((x >> 23) & 0xFF == 0xFF).any(axis=1)
    x = np.where(bad[:, None], np.uint32(0), x).view(np.float32)
    outs = convert_groups(cfg, x, [it["is_grad"] for it in items],
                          [it["rand"] if it["rand_en"] else None for it in items],
                          [it["exp_floor"] for it in items], gold.outputs)
    return [None if b else
            {"es": o.Es, "sign": sum(s << j for j, s in enumerate(o.signs)), "q": list(o.q),
             "chunk_exp": list(o.chunk_exp), "num": o.num, "den": o.den}
            for b, o in zip(bad, outs)]


async def convert(dut, cfg, items, r, gold: Golden, gap=0.0, p_ready=1.0):
    """Stream ``items`` through the converter; compare every output with the golden model, the
    handshakes and ``error`` in every cycle with the cycle model and, in the cycle after each
    accepted gradient group without injected noise, the LFSR states with LaneRNG's
    (:func:`tb.common.bfp.stream_blocks`)."""
    return await stream_blocks(dut, (input_layout(cfg), output_layout(cfg)), items,
                               expected(cfg, items, gold), r, gold,
                               lambda it: it["is_grad"] and not it["rand_en"], gap, p_ready,
                               what="group")


@cocotb.test()
async def spec_vectors(dut):
    """T1 (truncation; the printed Es, signs and magnitudes at m = 4), T7 (injected noise 0, 191,
    192, 255), T17 (exp_floor 130) and an all-zero group."""
    cfg, r, _ = await setup(dut, ConverterConfig, "spec_vectors")
    items = [item(cfg, pad(T1, cfg.group))]
    items += [item(cfg, pad(T7, cfg.group), 1, [R] * cfg.group) for R in (0, 191, 192, 255)]
    items += [item(cfg, pad([1.0, 0.5], cfg.group), 0, None, 130), item(cfg, pad([], cfg.group))]
    got, _, _ = await convert(dut, cfg, items, r, golden(cfg))
    if (cfg.group, cfg.m) == (16, 4):
        assert got[0]["es"] == 128 and got[0]["q"] == [12, 4, 6, 3, 2, 1, 0, 0, 10, 11, 7, 0, 0,
                                                       15, 0, 0]
        assert got[0]["chunk_exp"] == [128, 126] and (got[0]["num"], got[0]["den"]) == (19, 13)
        assert [g["q"][:5] for g in got[1:5]] == [[8, 1, 1, 0, 0], [8, 1, 1, 0, 0],
                                                  [8, 2, 2, 0, 0], [8, 2, 2, 1, 0]]
        assert got[5]["es"] == 130 and got[5]["q"][:2] == [1, 0]
    assert got[6]["es"] == 0 and got[6]["q"] == [0] * cfg.group


def random_items(cfg, gen: np.random.Generator, n: int) -> list:
    """Groups mixing N(0,1), wide exponent spreads, zeros, -0.0 and subnormals
    (:func:`tb.common.bfp.random_block`); truncation, SR with injected noise and SR from the
    LFSRs; sometimes an exponent floor."""
    items = []
    for _ in range(n):
        x = random_block(gen, cfg.group, 40)
        mode = gen.integers(0, 3)
        rand = gen.integers(0, 256, cfg.group) if mode == 1 else None
        floor = int(gen.integers(100, 140)) if gen.random() < 0.1 else 0
        items.append(item(cfg, x, mode > 0, rand, floor))
    return items


#: this testbench for the shared tests of :mod:`tb.common.bfp`
BENCH = Bench(ConverterConfig, golden, random_items, convert)


@cocotb.test()
async def random_groups(dut):
    """The unit's test size in random groups (``TRAINFAB_TEST_SIZE``), streamed under every
    combination of idle gaps and back-pressure (:func:`tb.common.streams.cross`); LFSR states
    checked throughout."""
    await random_streams(dut, BENCH, "random_groups")


@cocotb.test()
async def lfsr_draws_over_a_thousand_conversions(dut):
    """1,000 gradient conversions from the built-in LFSRs: the lane states equal LaneRNG's after
    every one, and the outputs equal the golden model's."""
    cfg, r, gen = await setup(dut, ConverterConfig, "lfsr_draws_over_a_thousand_conversions")
    items = [item(cfg, gen.standard_normal(cfg.group).astype(np.float32), 1)
             for _ in range(1000)]
    await convert(dut, cfg, items, r, golden(cfg), gap=0.2)


@cocotb.test()
async def one_group_per_cycle(dut):
    """With input always offered and output always ready, a group is accepted and one leaves
    every cycle, ``3 + pipeline`` cycles after its acceptance."""
    await one_per_cycle(dut, BENCH, "one_group_per_cycle")


@cocotb.test()
async def sticky_error_on_inf_and_nan(dut):
    """An Inf or NaN value sets ``error`` ``pipeline`` advances after the cycle after its group
    is taken (the cycle model's cycle), which stays set (and later groups still convert) until
    reset."""
    cfg, r, _ = await setup(dut, ConverterConfig, "sticky_error_on_inf_and_nan")
    bad = []
    for v in (np.inf, -np.inf, np.nan):
        x = pad([1.0], cfg.group)
        x[-1] = v                        # the last lane (the only one of a group of 1)
        bad.append(item(cfg, x))
    await sticky_error(dut, bad, [item(cfg, pad(T1, cfg.group))],
                       lambda items: convert(dut, cfg, items, r, golden(cfg)))

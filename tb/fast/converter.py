"""Testbench of FAST's FP32 → BFP converter (``fast.converter``) against
``golden.fast.numerics.convert_groups`` and ``golden.fast.numerics.LaneRNG``.

Groups stream through the valid/ready ports under random gaps and back-pressure; every output
group (shared exponent, signs, magnitudes, chunk exponents, improvement sums) is compared with
the golden model, which also draws the built-in LFSRs' noise in the same order.  The LFSR
states themselves are compared with ``LaneRNG`` after every gradient conversion.
"""

import cocotb
import numpy as np
from cocotb.triggers import FallingEdge, ReadOnly

from golden.fast.numerics import ConverterConfig, LaneRNG, convert_groups
from hdl.fast import input_layout, output_layout

from ..common import config_from_env, reset, rng, start, test_size, uint
from ..common.layouts import pack, unpack
from ..common.streams import Sink, Source, quiet, run

#: spec T1 (§11) and T7's group
T1 = [3.0, 1.0, -1.5, 0.75, 0.5, -0.25, 0.2, 0.1, 2.5, -2.75, 1.875, 0.0, -0.0, 3.75, 0.0625, 1e-3]
T7 = [1.0, 0.15625, -0.15625, 2.0 ** -11, 2.0 ** -12]


def _group(cfg, values):
    x = np.zeros(cfg.group, dtype=np.float32)
    v = np.asarray(values, dtype=np.float32)[:cfg.group]
    x[:v.size] = v
    return x


def item(cfg, x, is_grad=0, rand=None, exp_floor=0) -> dict:
    """One input payload: ``rand`` given = injected noise."""
    return {"x": [int(b) for b in np.asarray(x, np.float32).view(np.uint32)],
            "is_grad": int(is_grad), "rand_en": int(rand is not None),
            "rand": [int(r) for r in (rand if rand is not None else [0] * cfg.group)],
            "exp_floor": int(exp_floor)}


class Lanes:
    """The golden LFSR bank of one reset-to-reset run: one copy draws the expected outputs'
    noise, the other follows the DUT's lane states cycle by cycle."""

    def __init__(self, cfg):
        self.outputs = LaneRNG(lanes=cfg.group)
        self.states = LaneRNG(lanes=cfg.group)


def expected(cfg, items, lanes: Lanes) -> list:
    """Golden outputs of a list of input payloads."""
    x = np.array([it["x"] for it in items], dtype=np.uint32).view(np.float32)
    outs = convert_groups(cfg, x, [it["is_grad"] for it in items],
                          [it["rand"] if it["rand_en"] else None for it in items],
                          [it["exp_floor"] for it in items], lanes.outputs)
    return [{"es": o.Es, "sign": sum(s << j for j, s in enumerate(o.signs)), "q": list(o.q),
             "chunk_exp": list(o.chunk_exp), "num": o.num, "den": o.den} for o in outs]


async def convert(dut, cfg, items, r, lanes: Lanes, gap=0.0, p_ready=1.0):
    """Stream ``items`` through the converter; compare every output with the golden model and,
    in the cycle after each accepted gradient group without injected noise, the LFSR states
    with LaneRNG's."""
    want = expected(cfg, items, lanes)
    lay_in, lay_out = input_layout(cfg), output_layout(cfg)
    src = Source(dut, "i", [(it, {}) for it in items], r, gap, layout=lay_in)
    out = Sink(dut, "o", r, p_ready)
    accepted = 0
    pending = False            # an LFSR step happened at the last edge

    def check(cycle):
        nonlocal accepted, pending
        if pending:
            want_state = lanes.states.state.tolist()
            got = [uint(getattr(dut, f"lfsr{j}")) for j in range(cfg.group)]
            assert got == want_state, f"LFSR states {got} differ from LaneRNG {want_state}"
            pending = False
        if len(src.accepted_cycles) > accepted:          # an item was taken this cycle
            it = items[accepted]
            accepted += 1
            if it["is_grad"] and not it["rand_en"]:
                lanes.states.draw()
                pending = True

    limit = 20 + int(3 * len(items) / min(1 - gap, p_ready))
    await run(dut, [src], [out], lambda: len(out.got) >= len(want) and not pending, limit,
              check=check)
    await quiet(dut, [out])
    got = [unpack(lay_out, v) for v in out.got]
    assert len(got) == len(want), f"{len(got)} groups out, expected {len(want)}"
    for k, (g, w) in enumerate(zip(got, want)):
        assert g == w, f"group {k} ({items[k]}): got {g}, golden {w}"
    return got, src, out


@cocotb.test()
async def spec_vectors(dut):
    """T1 (truncation; the printed Es, signs and magnitudes at m = 4), T7 (injected noise 0, 191,
    192, 255), T17 (exp_floor 130) and an all-zero group."""
    cfg = config_from_env(ConverterConfig)
    await start(dut)
    r = rng("spec_vectors")
    items = [item(cfg, _group(cfg, T1))]
    items += [item(cfg, _group(cfg, T7), 1, [R] * cfg.group) for R in (0, 191, 192, 255)]
    items += [item(cfg, _group(cfg, [1.0, 0.5]), 0, None, 130), item(cfg, _group(cfg, []))]
    got, _, _ = await convert(dut, cfg, items, r, Lanes(cfg))
    if (cfg.group, cfg.m) == (16, 4):
        assert got[0]["es"] == 128 and got[0]["q"] == [12, 4, 6, 3, 2, 1, 0, 0, 10, 11, 7, 0, 0,
                                                       15, 0, 0]
        assert got[0]["chunk_exp"] == [128, 126] and (got[0]["num"], got[0]["den"]) == (19, 13)
        assert [g["q"][:5] for g in got[1:5]] == [[8, 1, 1, 0, 0], [8, 1, 1, 0, 0],
                                                  [8, 2, 2, 0, 0], [8, 2, 2, 1, 0]]
        assert got[5]["es"] == 130 and got[5]["q"][:2] == [1, 0]
    assert got[6]["es"] == 0 and got[6]["q"] == [0] * cfg.group


def random_items(cfg, gen: np.random.Generator, n: int) -> list:
    """Groups mixing N(0,1), wide exponent spreads, zeros, -0.0 and subnormals; truncation,
    SR with injected noise and SR from the LFSRs; sometimes an exponent floor."""
    items = []
    for _ in range(n):
        kind = gen.integers(0, 4)
        if kind == 0:
            x = gen.standard_normal(cfg.group)
        elif kind == 1:
            x = gen.choice([-1, 1], cfg.group) * np.exp2(gen.uniform(-40, 40, cfg.group))
        elif kind == 2:
            x = gen.standard_normal(cfg.group) * (gen.random(cfg.group) < 0.3)
            x = np.where(gen.random(cfg.group) < 0.3, -0.0, x)
        else:
            bits = gen.integers(0, 1 << 32, cfg.group, dtype=np.uint64).astype(np.uint32)
            bits = np.where((bits >> 23) & 0xFF == 255, bits & 0xBFFFFFFF, bits)
            bits = np.where(gen.random(cfg.group) < 0.3, bits & 0x807FFFFF, bits)  # subnormals
            x = bits.view(np.float32)
        x = np.asarray(x, dtype=np.float32)
        mode = gen.integers(0, 3)
        rand = gen.integers(0, 256, cfg.group) if mode == 1 else None
        floor = int(gen.integers(100, 140)) if gen.random() < 0.1 else 0
        items.append(item(cfg, x, mode > 0, rand, floor))
    return items


@cocotb.test()
async def random_groups(dut):
    """The unit's test size in random groups (2,000 in ``make test``), half of them streamed
    back to back, half under random gaps and back-pressure; LFSR states checked throughout."""
    cfg = config_from_env(ConverterConfig)
    await start(dut)
    r = rng("random_groups")
    gen = np.random.default_rng(r.getrandbits(64))
    n = test_size()
    items = random_items(cfg, gen, n)
    lanes = Lanes(cfg)
    await convert(dut, cfg, items[:n // 2], r, lanes)
    await convert(dut, cfg, items[n // 2:], r, lanes, gap=0.3, p_ready=0.6)


@cocotb.test()
async def lfsr_draws_over_a_thousand_conversions(dut):
    """1,000 gradient conversions from the built-in LFSRs: the lane states equal LaneRNG's after
    every one, and the outputs equal the golden model's."""
    cfg = config_from_env(ConverterConfig)
    await start(dut)
    r = rng("lfsr_draws_over_a_thousand_conversions")
    gen = np.random.default_rng(r.getrandbits(64))
    items = [item(cfg, gen.standard_normal(cfg.group).astype(np.float32), 1)
             for _ in range(1000)]
    await convert(dut, cfg, items, r, Lanes(cfg), gap=0.2)


@cocotb.test()
async def one_group_per_cycle(dut):
    """With input always offered and output always ready, a group is accepted and one leaves
    every cycle, three cycles after its acceptance."""
    cfg = config_from_env(ConverterConfig)
    await start(dut)
    r = rng("one_group_per_cycle")
    gen = np.random.default_rng(r.getrandbits(64))
    items = random_items(cfg, gen, 40)
    _, src, out = await convert(dut, cfg, items, r, Lanes(cfg))
    acc = src.accepted_cycles
    assert acc == list(range(acc[0], acc[0] + len(items))), f"input not every cycle: {acc}"
    assert out.cycles == [c + 3 for c in acc], f"outputs {out.cycles}, accepted {acc}"


@cocotb.test()
async def sticky_error_on_inf_and_nan(dut):
    """An Inf or NaN value sets ``error``, which stays set (and later groups still convert)
    until reset."""
    cfg = config_from_env(ConverterConfig)
    r = rng("sticky_error_on_inf_and_nan")
    await start(dut)
    for bad in (np.inf, -np.inf, np.nan):
        await reset(dut)
        assert uint(dut.error) == 0
        x = _group(cfg, [1.0, bad])
        dut.i__payload.value = pack(input_layout(cfg), item(cfg, x))
        dut.i__valid.value = 1
        dut.o__ready.value = 1
        await FallingEdge(dut.clk)
        dut.i__valid.value = 0
        await ReadOnly()
        assert uint(dut.error) == 1, f"{bad} did not set error"
        for _ in range(4):                       # let the group leave the pipeline
            await FallingEdge(dut.clk)
        await convert(dut, cfg, [item(cfg, _group(cfg, T1))], r, Lanes(cfg))
        assert uint(dut.error) == 1, "error is not sticky"
    await reset(dut)
    assert uint(dut.error) == 0, "reset does not clear error"

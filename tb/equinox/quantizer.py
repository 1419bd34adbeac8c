"""Testbench of Equinox's BFP quantizer (``equinox.quantizer``) against
``golden.equinox.quantize_stream`` (``golden.equinox.hbfp.bfp_quantize``) and ``golden.common.lfsr``.

Blocks stream through the valid/ready ports under random gaps and back-pressure; every output
block (shared exponent and mantissas) is compared with the golden model, which also draws the
lanes' LFSR noise in the same order; the LFSR states are compared with ``LaneRNG`` after every
block that stepped them.
"""

import cocotb
import numpy as np
from cocotb.triggers import FallingEdge, ReadOnly

from golden.common.lfsr import LaneRNG
from golden.equinox import QuantizerConfig, quantize_stream
from golden.equinox.hbfp import f32_to_bf16
from hdl.equinox.quantizer import input_layout, output_layout

from ..common import config_from_env, reset, rng, start, test_size, uint
from ..common.layouts import pack, unpack
from ..common.streams import Sink, Source, quiet, run

#: the spec's §7 quantization vectors TV1-TV7 (values; TV7's random bits below)
TVS = ([1.0, 0.5, -0.25, 0.125], [1.9921875, 1.0], [-1.9921875, 0.5], [1.0, 0.5],
       [8.0, 0.01, -0.07], [1.0, 3 / 128, 5 / 128, -3 / 128], [0.0, 0.0, 0.0, 0.0],
       [1e-39, 0.5], [3.0, 0.1, -0.3, 2.5], [1.0, 3 / 128])


def to_bits(cfg, values) -> list:
    """``values`` padded with zeros to one block, as the input format's bit patterns (bf16
    inputs are the RNE conversion of the FP32 values)."""
    x = np.zeros(cfg.w, dtype=np.float32)
    v = np.asarray(values, dtype=np.float32)[:cfg.w]
    x[:v.size] = v
    if cfg.in_fmt == "bf16":
        return [int(b) for b in f32_to_bf16(x)]
    return [int(b) for b in x.view(np.uint32)]


def item(cfg, bits, rand=None) -> dict:
    it = {"x": list(bits)}
    if cfg.rounding == "stoch":
        it["rand_en"] = int(rand is not None)
        it["rand"] = [int(v) for v in (rand if rand is not None else [0] * cfg.w)]
    return it


def injected(cfg, it):
    return it["rand"] if cfg.rounding == "stoch" and it["rand_en"] else None


async def quantize(dut, cfg, items, r, lanes: LaneRNG, states: LaneRNG, gap=0.0, p_ready=1.0):
    """Stream ``items``; compare every output with the golden model and, in the cycle after each
    accepted block that draws from the LFSRs, the lane states with ``states``."""
    want = quantize_stream(cfg, [it["x"] for it in items], [injected(cfg, it) for it in items],
                           lanes)
    lay_in, lay_out = input_layout(cfg), output_layout(cfg)
    src = Source(dut, "i", [(it, {}) for it in items], r, gap, layout=lay_in)
    out = Sink(dut, "o", r, p_ready)
    accepted = 0
    pending = False

    def check(cycle):
        nonlocal accepted, pending
        if pending:
            got = [uint(getattr(dut, f"lfsr{j}")) for j in range(cfg.w)]
            assert got == states.state.tolist(), f"LFSR states {got} != {states.state.tolist()}"
            pending = False
        if len(src.accepted_cycles) > accepted:
            it = items[accepted]
            accepted += 1
            if cfg.rounding == "stoch" and not it["rand_en"]:
                states.draw()
                pending = True

    limit = 20 + int(3 * len(items) / min(1 - gap, p_ready))
    await run(dut, [src], [out], lambda: len(out.got) >= len(want) and not pending, limit,
              check=check)
    await quiet(dut, [out])
    got = [unpack(lay_out, v) for v in out.got]
    assert len(got) == len(want), f"{len(got)} blocks out, expected {len(want)}"
    for k, (g, w) in enumerate(zip(got, want)):
        if w is None:
            continue                          # an Inf/NaN block: the output is unspecified
        assert (g["exp"], tuple(g["man"])) == w, f"block {k} ({items[k]}): got {g}, golden {w}"
    return got, src, out


def banks(cfg):
    return (LaneRNG(lanes=cfg.w, bits=cfg.rbits), LaneRNG(lanes=cfg.w, bits=cfg.rbits))


@cocotb.test()
async def spec_vectors(dut):
    """TV1-TV6 and TV7 (random bits 0x8000 and 0x7FFF, scaled to ``rbits``): the outputs equal
    the golden model's, and at hbfp8 from FP32 the spec's printed exponents and mantissas."""
    cfg = config_from_env(QuantizerConfig)
    await start(dut)
    r = rng("spec_vectors")
    items = [item(cfg, to_bits(cfg, v)) for v in TVS]
    sr = [(0, 1 << (cfg.rbits - 1)), (0, (1 << (cfg.rbits - 1)) - 1)]
    items += [item(cfg, to_bits(cfg, TVS[-1]), list(R) + [0] * (cfg.w - 2))
              for R in sr] if cfg.rounding == "stoch" and cfg.w >= 2 else []
    got, _, _ = await quantize(dut, cfg, items, r, *banks(cfg))
    if cfg.m == 8 and cfg.w >= 4 and cfg.in_fmt == "fp32":
        printed = {"floor": [64, 32, -16, 8], "rne": [64, 32, -16, 8], "rtz": [64, 32, -16, 8]}
        if cfg.rounding in printed:
            assert (got[0]["exp"], got[0]["man"][:4]) == (127, printed[cfg.rounding])
            ties = {"floor": [64, 1, 2, -2], "rne": [64, 2, 2, -2], "rtz": [64, 1, 2, -1]}
            assert (got[5]["exp"], got[5]["man"][:4]) == (127, ties[cfg.rounding])
            assert got[6]["exp"] == 0 and got[6]["man"] == [0] * cfg.w
            assert (got[7]["exp"], got[7]["man"][:2]) == (126, [0, 64])
        if cfg.rounding == "stoch" and cfg.rbits == 16:
            assert [g["man"][:2] for g in got[-2:]] == [[64, 2], [64, 1]]


def random_blocks(cfg, gen: np.random.Generator, n: int) -> list:
    """Blocks mixing N(0, 1), wide exponent spreads, zeros, -0.0, subnormals, random bit
    patterns, exact ties and the most negative mantissa; stochastic blocks take the LFSR noise
    or (one in three) injected bits."""
    items = []
    w = cfg.w
    for _ in range(n):
        kind = gen.integers(0, 5)
        if kind == 0:
            x = gen.standard_normal(w)
        elif kind == 1:
            x = gen.choice([-1, 1], w) * np.exp2(gen.uniform(-60, 60, w))
        elif kind == 2:
            x = gen.standard_normal(w) * (gen.random(w) < 0.3)
            x = np.where(gen.random(w) < 0.3, -0.0, x)
        elif kind == 3:      # ties and extremes on the block's grid
            x = gen.integers(-512, 512, w) / 4.0 * 2.0 ** int(gen.integers(-8, 8))
        else:
            bits = gen.integers(0, 1 << 32, w, dtype=np.uint64).astype(np.uint32)
            bits = np.where((bits >> 23) & 0xFF == 255, bits & 0xBFFFFFFF, bits)
            bits = np.where(gen.random(w) < 0.3, bits & 0x807FFFFF, bits)     # subnormals
            x = bits.view(np.float32)
        x = np.asarray(x, dtype=np.float32)
        if cfg.in_fmt == "bf16":
            x = np.where(np.abs(x) > 3e38, np.sign(x) * 3e38, x).astype(np.float32)
        rand = (gen.integers(0, 1 << cfg.rbits, w) if cfg.rounding == "stoch"
                and gen.random() < 1 / 3 else None)
        items.append(item(cfg, to_bits(cfg, x), rand))
    return items


@cocotb.test()
async def random_blocks_under_backpressure(dut):
    """The unit's test size in random blocks (10,000 in ``make test``), half streamed back to
    back, half under random gaps and back-pressure; LFSR states checked throughout."""
    cfg = config_from_env(QuantizerConfig)
    await start(dut)
    r = rng("random_blocks_under_backpressure")
    gen = np.random.default_rng(r.getrandbits(64))
    n = test_size()
    items = random_blocks(cfg, gen, n)
    lanes, states = banks(cfg)
    await quantize(dut, cfg, items[:n // 2], r, lanes, states)
    await quantize(dut, cfg, items[n // 2:], r, lanes, states, gap=0.3, p_ready=0.6)


@cocotb.test()
async def one_block_per_cycle(dut):
    """With input always offered and output always ready, a block is accepted and one leaves
    every cycle, two cycles after its acceptance."""
    cfg = config_from_env(QuantizerConfig)
    await start(dut)
    r = rng("one_block_per_cycle")
    gen = np.random.default_rng(r.getrandbits(64))
    items = random_blocks(cfg, gen, 40)
    _, src, out = await quantize(dut, cfg, items, r, *banks(cfg))
    acc = src.accepted_cycles
    assert acc == list(range(acc[0], acc[0] + len(items))), f"input not every cycle: {acc}"
    assert out.cycles == [c + 2 for c in acc], f"outputs {out.cycles}, accepted {acc}"


@cocotb.test()
async def sticky_error_on_inf_and_nan(dut):
    """An Inf or NaN value sets ``error``, which stays set (and later blocks still convert,
    the LFSRs in step with the golden bank) until reset."""
    cfg = config_from_env(QuantizerConfig)
    r = rng("sticky_error_on_inf_and_nan")
    await start(dut)
    f = cfg.in_format
    for bad in (f.exp_max << f.man_bits, (f.exp_max << f.man_bits) | 1,
                (1 << (f.width - 1)) | (f.exp_max << f.man_bits)):
        await reset(dut)
        lanes, states = banks(cfg)
        assert uint(dut.error) == 0
        bits = to_bits(cfg, [1.0])
        bits[-1] = bad
        await quantize(dut, cfg, [item(cfg, bits)], r, lanes, states)
        await ReadOnly()
        assert uint(dut.error) == 1, f"{bad:#x} did not set error"
        await FallingEdge(dut.clk)
        await quantize(dut, cfg, [item(cfg, to_bits(cfg, TVS[0]))], r, lanes, states)
        assert uint(dut.error) == 1, "error is not sticky"
    await reset(dut)
    assert uint(dut.error) == 0, "reset does not clear error"

"""Testbench of Equinox's BFP quantizer (``equinox.quantizer``) against
``golden.equinox.quantize_stream`` (``golden.equinox.hbfp.bfp_quantize``) and ``golden.common.lfsr``.

Blocks stream through the valid/ready ports under random gaps and back-pressure; every output
block (shared exponent and mantissas) is compared with the golden model, which also draws the
lanes' LFSR noise in the same order; the LFSR states are compared with ``LaneRNG`` after every
block that stepped them, and ``i.ready``, ``o.valid`` and the sticky ``error`` in every cycle
with the cycle model ``golden.equinox.QuantizerSim``, so every ``pipeline`` depth is checked
to the cycle (:mod:`tb.common.bfp`).
"""

import cocotb
import numpy as np

from golden.equinox import QuantizerConfig, QuantizerSim, quantize_stream
from golden.equinox.hbfp import f32_to_bf16
from hdl.equinox.quantizer import input_layout, output_layout

from ..common import setup
from ..common.bfp import Bench, Golden, one_per_cycle, pad, random_block, random_streams, \
    sticky_error, stream_blocks

#: the spec's §7 quantization vectors TV1-TV7 (values; TV7's random bits below)
TVS = ([1.0, 0.5, -0.25, 0.125], [1.9921875, 1.0], [-1.9921875, 0.5], [1.0, 0.5],
       [8.0, 0.01, -0.07], [1.0, 3 / 128, 5 / 128, -3 / 128], [0.0, 0.0, 0.0, 0.0],
       [1e-39, 0.5], [3.0, 0.1, -0.3, 2.5], [1.0, 3 / 128])


def to_bits(cfg, values) -> list:
    """``values`` padded with zeros to one block, as the input format's bit patterns (bf16
    inputs are the RNE conversion of the FP32 values)."""
    x = pad(values, cfg.w)
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


def draws(cfg, it) -> bool:
    """The block steps the LFSRs: stochastic rounding without injected bits."""
    return cfg.rounding == "stoch" and not it["rand_en"]


async def quantize(dut, cfg, items, r, gold: Golden, gap=0.0, p_ready=1.0):
    """Stream ``items``; compare every output with the golden model, the handshakes and
    ``error`` in every cycle with the cycle model and, in the cycle after each accepted block
    that draws from the LFSRs, the lane states with the golden bank's
    (:func:`tb.common.bfp.stream_blocks`)."""
    want = quantize_stream(cfg, [it["x"] for it in items], [injected(cfg, it) for it in items],
                           gold.outputs)
    want = [None if w is None else {"exp": w[0], "man": list(w[1])} for w in want]
    return await stream_blocks(dut, (input_layout(cfg), output_layout(cfg)), items, want, r,
                               gold, lambda it: draws(cfg, it), gap, p_ready)


def golden(cfg) -> Golden:
    """The golden models of a run from reset."""
    return Golden(cfg.w, cfg.rbits, QuantizerSim(cfg))


@cocotb.test()
async def spec_vectors(dut):
    """TV1-TV6 and TV7 (random bits 0x8000 and 0x7FFF, scaled to ``rbits``): the outputs equal
    the golden model's, and at hbfp8 from FP32 the spec's printed exponents and mantissas."""
    cfg, r, _ = await setup(dut, QuantizerConfig, "spec_vectors")
    items = [item(cfg, to_bits(cfg, v)) for v in TVS]
    sr = [(0, 1 << (cfg.rbits - 1)), (0, (1 << (cfg.rbits - 1)) - 1)]
    items += [item(cfg, to_bits(cfg, TVS[-1]), list(R) + [0] * (cfg.w - 2))
              for R in sr] if cfg.rounding == "stoch" and cfg.w >= 2 else []
    got, _, _ = await quantize(dut, cfg, items, r, golden(cfg))
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
    patterns, exact ties and the most negative mantissa (:func:`tb.common.bfp.random_block`);
    stochastic blocks take the LFSR noise or (one in three) injected bits."""
    items = []
    for _ in range(n):
        x = random_block(gen, cfg.w, 60, grid=True)
        if cfg.in_fmt == "bf16":
            x = np.where(np.abs(x) > 3e38, np.sign(x) * 3e38, x).astype(np.float32)
        rand = (gen.integers(0, 1 << cfg.rbits, cfg.w) if cfg.rounding == "stoch"
                and gen.random() < 1 / 3 else None)
        items.append(item(cfg, to_bits(cfg, x), rand))
    return items


#: this testbench for the shared tests of :mod:`tb.common.bfp`
BENCH = Bench(QuantizerConfig, golden, random_blocks, quantize)


@cocotb.test()
async def random_blocks_under_backpressure(dut):
    """The unit's test size in random blocks (``TRAINFAB_TEST_SIZE``), streamed under every
    combination of idle gaps and back-pressure (:func:`tb.common.streams.cross`); LFSR states
    checked throughout."""
    await random_streams(dut, BENCH, "random_blocks_under_backpressure")


@cocotb.test()
async def one_block_per_cycle(dut):
    """With input always offered and output always ready, a block is accepted and one leaves
    every cycle, ``2 + pipeline`` cycles after its acceptance."""
    await one_per_cycle(dut, BENCH, "one_block_per_cycle")


@cocotb.test()
async def sticky_error_on_inf_and_nan(dut):
    """An Inf or NaN value sets ``error`` ``pipeline`` advances after the cycle after its block
    is taken (the cycle model's cycle), which stays set (and later blocks still convert, the
    LFSRs in step with the golden bank) until reset."""
    cfg, r, _ = await setup(dut, QuantizerConfig, "sticky_error_on_inf_and_nan")
    f = cfg.in_format
    bad = []
    for v in (f.exp_max << f.man_bits, (f.exp_max << f.man_bits) | 1,
              (1 << (f.width - 1)) | (f.exp_max << f.man_bits)):
        bits = to_bits(cfg, [1.0])
        bits[-1] = v
        bad.append(item(cfg, bits))
    await sticky_error(dut, bad, [item(cfg, to_bits(cfg, TVS[0]))],
                       lambda items: quantize(dut, cfg, items, r, golden(cfg)))

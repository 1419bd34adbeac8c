"""Testbench of the BDC encoder → decoder chain (``fpraker.bdc_loopback``).

Tensors go in as values with a command per tensor; what comes out must be the same values bit
for bit (spec TV17: compress then decompress is the identity), ``last`` on each tensor's final
value, under every combination of input gaps and output back-pressure, and with the sticky
``error`` clear.  Covers every 16-bit pattern once and random tensors of every kind and length;
the random part is ``TRAINFAB_TEST_SIZE`` groups.
"""

import cocotb
import numpy as np

from ..common import effort, uint
from ..common.streams import Sink, Source, quiet, run
from .bdc_harness import cmd_payload, setup, stream_random_plan, tv17_tensors, value_payloads


async def loop_tensors(dut, cfg, tensors, rnd, gap=0.0, p_ready=1.0):
    """Send ``tensors`` through the chain and compare with the input."""
    items, cmds, want = [], [], []
    for x in tensors:
        items += [(p, {}) for p in value_payloads(x)]
        cmds.append((cmd_payload(x.size), {}))
        want += value_payloads(x)
    srcs = [Source(dut, "i", items, rnd, gap), Source(dut, "cmd", cmds, rnd, gap)]
    out = Sink(dut, "o", rnd, p_ready)
    limit = 100 + int(3 * (len(want) + cfg.group * len(tensors)) / min(1 - gap, p_ready))
    await run(dut, srcs, [out], lambda: len(out.got) >= len(want), limit)
    await quiet(dut, [out])
    out.expect(want, f"group={cfg.group}, word={cfg.word}: ")
    assert uint(dut.error) == 0, "error set in the loopback"


@cocotb.test()
async def identity_on_tv17_and_every_pattern(dut):
    """TV17's groups, then every exponent field with both signs and every mantissa (zeros,
    subnormals, Inf, NaN) in a random order as one tensor; at the full effort all 65,536 bf16
    patterns."""
    cfg, r, gen = await setup(dut, "identity_on_tv17_and_every_pattern")
    await loop_tensors(dut, cfg, [x for x, _ in tv17_tensors(gen, cfg)], r)
    k = np.arange(512)
    every = (((k & 1) << 15) | ((k >> 1) << 7) | (k % 128)).astype(np.uint16)
    if effort() == "full":
        every = np.arange(1 << 16).astype(np.uint16)
    await loop_tensors(dut, cfg, [gen.permutation(every)], r)


@cocotb.test()
async def random_roundtrip(dut):
    """Random tensors of every kind and length under input gaps and output back-pressure."""
    await stream_random_plan(dut, "random_roundtrip", loop_tensors)

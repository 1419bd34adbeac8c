"""Testbench of the FPRaker BDC encoder (``fpraker.bdc_encoder``) against
``golden.fpraker.bdc``.

Tensors go in back to back as values (``last`` on each tensor's final value); every output
word must equal the golden stream's words of the tensor it belongs to (``last`` on each
tensor's final word).  Covers spec TV17, every header 0..7 at its extreme deltas, random
tensors of every kind and length (partial final groups, single values) under every
combination of input gaps and output back-pressure (:func:`tb.common.streams.cross`), and the
throughput the double buffer promises: one value per cycle across group boundaries, at most
one stall per tensor.  The random part is ``TRAINFAB_TEST_SIZE`` groups.
"""

import cocotb
import numpy as np

from golden.fpraker.bdc import footprint, group_bits, group_header

from ..common.streams import Sink, Source, quiet, run
from .bdc_harness import (
    golden_words, group_with_header, random_tensor, setup, stream_random_plan, tv17_tensors,
    value_payloads, word_payloads,
)


async def encode_tensors(dut, cfg, tensors, rnd, gap=0.0, p_ready=1.0):
    """Stream ``tensors`` through the unit; check every word against golden."""
    items, want = [], []
    for x in tensors:
        items += [(p, {}) for p in value_payloads(x)]
        want += word_payloads(golden_words(x, cfg), cfg)
    src = Source(dut, "i", items, rnd, gap)
    out = Sink(dut, "o", rnd, p_ready)
    limit = 60 + int(3 * (len(items) + len(tensors)) / min(1 - gap, p_ready))
    await run(dut, [src], [out], lambda: src.done and len(out.got) >= len(want), limit)
    await quiet(dut, [out], 4)
    out.expect(want, f"group={cfg.group}, word={cfg.word}: ")
    return src, out


@cocotb.test()
async def tv17_groups(dut):
    """TV17: one exponent (header 0, 267 bits at 32), {e, e-1} (1), a +1 delta (2), a zero
    among exponents near 127 (escape), one tensor each and all four as one tensor."""
    cfg, r, gen = await setup(dut, "tv17_groups")
    tensors = tv17_tensors(gen, cfg)
    for x, header in tensors:
        assert group_header(x) == header
    if cfg.group == 32:
        assert group_bits(tensors[0][0]) == 267
        assert footprint(tensors[3][0]).exp_bits == 259
    await encode_tensors(dut, cfg, [x for x, _ in tensors], r)
    await encode_tensors(dut, cfg, [np.concatenate([x for x, _ in tensors])], r, 0.2, 0.7)


@cocotb.test()
async def every_header(dut):
    """Each header 0..6 and the escape, with a delta at the extreme of its range, as whole
    groups of one tensor and as single-group tensors (partial ones included)."""
    cfg, r, gen = await setup(dut, "every_header")
    groups = [group_with_header(gen, cfg.group, h) for h in range(8) for _ in range(2)]
    singles = [group_with_header(gen, int(gen.integers(2, cfg.group + 1)), h) for h in range(8)]
    await encode_tensors(dut, cfg, [np.concatenate(groups)] + singles, r, 0.1, 0.8)


@cocotb.test()
async def random_tensors(dut):
    """Random tensors of every kind and length, crossed with light and heavy input gaps and
    output back-pressure."""
    await stream_random_plan(dut, "random_tensors", encode_tensors)


@cocotb.test()
async def one_value_per_cycle(dut):
    """With input always offered and ``o`` always ready, the double buffer takes one value per
    cycle across group boundaries (any headers); tensors of whole groups back to back cost at
    most one cycle each (the final flush): the last word leaves within values + group (the first
    group's fill) + tensors + 3 cycles of the first value.  (A partial final group is written out in as many cycles as it
    has values, so shorter groups than the previous one can stall the input.)"""
    cfg, r, gen = await setup(dut, "one_value_per_cycle")
    long = np.concatenate([random_tensor(gen, 6 * cfg.group, cfg) for _ in range(3)])
    src, out = await encode_tensors(dut, cfg, [long], r)
    acc = src.accepted_cycles
    assert acc == list(range(acc[0], acc[0] + long.size)), f"input stalled: accepted at {acc}"
    tensors = [random_tensor(gen, int(gen.integers(1, 4)) * cfg.group, cfg) for _ in range(12)]
    src, out = await encode_tensors(dut, cfg, tensors, r)
    values = sum(x.size for x in tensors)
    span = out.cycles[-1] - src.accepted_cycles[0]
    assert span <= values + cfg.group + len(tensors) + 3, (
        f"{values} values of {len(tensors)} tensors took {span} cycles")
    cocotb.log.info("one_value_per_cycle: %d values of %d tensors in %d cycles", values,
                    len(tensors), span)

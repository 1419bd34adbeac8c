"""Testbench of the FPRaker BDC decoder (``fpraker.bdc_decoder``) against
``golden.fpraker.bdc``.

The packed words come from ``golden.fpraker.bdc.encode``; a command gives each tensor's value
count, and every output value must equal ``golden.fpraker.bdc.decode`` of the stream (the
input), ``last`` on each tensor's final value.  Covers spec TV17, every header 0..7 at its
extreme deltas, a non-minimal header (legal), random tensors of every kind and length under
every combination of input gaps and output back-pressure (:func:`tb.common.streams.cross`),
throughput (one value per cycle, at most one word per value), and the sticky ``error``: a
truncated stream, a stream longer than its count, a delta taking the exponent out of range.
The random part is ``TRAINFAB_TEST_SIZE`` groups.
"""

import cocotb
import numpy as np
from cocotb.triggers import FallingEdge

from golden.fpraker.bdc import decode, encode, from_words

from ..common import reset, uint
from ..common.streams import Sink, Source, quiet, run
from .bdc_harness import (
    bf16, bits_to_words, cmd_payload, golden_words, group_with_header, random_tensor, setup,
    stream_random_plan, tv17_tensors, value_ends, value_payloads, word_payloads,
)


def expected(words, count, bits, cfg):
    """Golden values of a (well-formed) word stream."""
    return decode(from_words(words, bits, cfg), count, cfg)


async def decode_tensors(dut, cfg, tensors, rnd, gap=0.0, p_ready=1.0):
    """Feed golden streams of ``tensors`` back to back; check every output value."""
    cmds, words, want = [], [], []
    for x in tensors:
        s = encode(x, cfg)
        w = golden_words(x, cfg)
        cmds.append((cmd_payload(x.size), {}))
        words += [(p, {}) for p in word_payloads(w, cfg)]
        want += value_payloads(expected(w, x.size, s.bits, cfg))
    srcs = [Source(dut, "cmd", cmds, rnd, gap), Source(dut, "i", words, rnd, gap)]
    out = Sink(dut, "o", rnd, p_ready)
    limit = 60 + int(3 * (len(want) + len(words) + len(tensors)) / min(1 - gap, p_ready))
    await run(dut, srcs, [out], lambda: len(out.got) >= len(want), limit)
    await quiet(dut, [out])
    for s in srcs:
        assert s.done, "the unit did not consume its whole input stream"
    out.expect(want, f"group={cfg.group}, word={cfg.word}: ")
    assert uint(dut.error) == 0, "error set on a well-formed stream"
    return srcs, out


@cocotb.test()
async def tv17_groups(dut):
    """TV17's groups (headers 0, 1, 2 and the escape) decode bit for bit, one tensor each and
    as one tensor."""
    cfg, r, gen = await setup(dut, "tv17_groups")
    tensors = [x for x, _ in tv17_tensors(gen, cfg)]
    _, out = await decode_tensors(dut, cfg, tensors, r)
    got = [p & 0xFFFF for p in out.got]
    assert got == [int(v) for v in np.concatenate(tensors)], "compress then decompress differs"
    await decode_tensors(dut, cfg, [np.concatenate(tensors)], r, 0.2, 0.7)


@cocotb.test()
async def every_header(dut):
    """Each header 0..6 and the escape at its extreme deltas, as whole groups and as
    single-group (partial) tensors; an empty tensor (count 0) between them."""
    cfg, r, gen = await setup(dut, "every_header")
    groups = [group_with_header(gen, cfg.group, h) for h in range(8) for _ in range(2)]
    singles = [group_with_header(gen, int(gen.integers(2, cfg.group + 1)), h) for h in range(8)]
    empty = np.zeros(0, np.uint16)
    await decode_tensors(dut, cfg, [np.concatenate(groups), empty] + singles, r, 0.1, 0.8)


@cocotb.test()
async def random_tensors(dut):
    """Random tensors of every kind and length, crossed with light and heavy input gaps and
    output back-pressure."""
    await stream_random_plan(dut, "random_tensors", decode_tensors)


@cocotb.test()
async def one_value_per_cycle(dut):
    """With inputs always offered and ``o`` ready: one value per cycle within a tensor, a word
    taken only in a cycle that produces a value (never ahead of need), one idle cycle between
    tensors."""
    cfg, r, gen = await setup(dut, "one_value_per_cycle")
    tensors = [random_tensor(gen, int(gen.integers(1, 5 * cfg.group)), cfg) for _ in range(6)]
    srcs, out = await decode_tensors(dut, cfg, tensors, r)
    c = out.cycles
    assert c[-1] - c[0] + 1 <= sum(x.size for x in tensors) + 2 * len(tensors), (
        f"{sum(x.size for x in tensors)} values of {len(tensors)} tensors took "
        f"{c[-1] - c[0] + 1} cycles")
    outs = set(c)
    lone = [a for a in srcs[1].accepted_cycles if a + 1 not in outs]
    assert not lone, f"words accepted in cycles {lone} produced no value the next cycle"


@cocotb.test()
async def non_minimal_header_is_legal(dut):
    """Headers wider than the encoder would write decode as written, without an error: header
    6 for a group whose only delta is +3, header 5 for a group whose only delta is 0."""
    cfg, r, _ = await setup(dut, "non_minimal_header_is_legal")
    groups = [([(6, 3), (200, 8), (0x05, 8), (0x81, 8), (3, 6)],
               [(200 << 7) | 5, 0x8000 | (203 << 7) | 1]),
              ([(5, 3), (100, 8), (0x7F, 8), (0x00, 8), (0, 5)], [(100 << 7) | 0x7F, 100 << 7])]
    cmds, words, want = [], [], []
    for fields, values in groups:
        w, bits = bits_to_words(fields, cfg)
        got = expected(w, 2, bits, cfg)
        assert [int(v) for v in got] == values
        cmds.append((cmd_payload(2), {}))
        words += [(p, {}) for p in word_payloads(w, cfg)]
        want += value_payloads(got)
    src = [Source(dut, "cmd", cmds, r), Source(dut, "i", words, r)]
    out = Sink(dut, "o", r)
    await run(dut, src, [out], lambda: len(out.got) >= len(want), 40)
    await quiet(dut, [out])
    out.expect(want)
    assert uint(dut.error) == 0


async def provoke(dut, r, count, words, want_values, why):
    """Reset, send one command and ``words`` (payloads), and check that exactly
    ``want_values`` come out, then that ``error`` is set, sticky, and cleared by reset."""
    await reset(dut)
    assert uint(dut.error) == 0
    srcs = [Source(dut, "cmd", [(cmd_payload(count), {})], r),
            Source(dut, "i", [(p, {}) for p in words], r)]
    out = Sink(dut, "o", r)
    await run(dut, srcs, [out], lambda: all(s.done for s in srcs) and
              len(out.got) >= len(want_values), 60 + 3 * len(words))
    await quiet(dut, [out], 5)
    got = [p & 0xFFFF for p in out.got]
    assert got == [int(v) for v in want_values], (
        f"{why}: values {[hex(v) for v in got]}, expected {[hex(int(v)) for v in want_values]}")
    assert uint(dut.error) == 1, f"{why}: error not set"
    await FallingEdge(dut.clk)
    assert uint(dut.error) == 1, f"{why}: error not sticky"
    await reset(dut)
    assert uint(dut.error) == 0, f"{why}: reset does not clear error"


@cocotb.test()
async def sticky_errors(dut):
    """A truncated stream (the word marked ``last`` comes before the tensor's end: the values
    whose bits arrived come out, then nothing), a stream longer than its count (the word
    holding the count's final bit is not marked ``last``: every counted value comes out), and
    a delta taking the exponent past 255 (the low 8 bits come out)."""
    cfg, r, gen = await setup(dut, "sticky_errors")
    x = np.concatenate([random_tensor(gen, 3 * cfg.group + 5, cfg) for _ in range(2)])
    words = golden_words(x, cfg)
    ends = value_ends(x, cfg)
    assert len(words) >= 4
    # truncated: keep all but the final two words, the last kept one marked last
    kept = len(words) - 2
    arrived = sum(e <= kept * cfg.word for e in ends)
    await provoke(dut, r, x.size, word_payloads(words[:kept], cfg), x[:arrived], "truncated")
    # longer than its count: count only the values ending before the final word
    count = sum(e <= (len(words) - 1) * cfg.word for e in ends)
    await provoke(dut, r, count, word_payloads(words, cfg)[:-1], x[:count], "over-long")
    # a non-minimal header whose delta leaves 0..255: base 225 + 31 = 256 → exponent 0
    fields = [(6, 3), (225, 8), (0x05, 8), (0x81, 8), (31, 6)]
    bad, _ = bits_to_words(fields, cfg)
    await provoke(dut, r, 2, word_payloads(bad, cfg), bf16([0, 1], [225, 0], [5, 1]),
                  "exponent out of range")

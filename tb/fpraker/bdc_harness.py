"""Test start-up, payload packing, golden streams, random tensors and the random test's body
shared by the BDC testbenches (``fpraker.bdc_encoder``, ``fpraker.bdc_decoder``,
``fpraker.bdc_loopback``; the stream drivers are :mod:`tb.common.streams`).

A testbench's random part is sized in groups of the unit's ``group`` (``TRAINFAB_TEST_SIZE``).
"""

import cocotb
import numpy as np

from golden.fpraker.bdc import BDCConfig, encode, group_header, to_words
from hdl.fpraker.bdc import CMD_LAYOUT, VALUE_LAYOUT, word_layout

from ..common import setup as common_setup, test_size
from ..common.layouts import pack
from ..common.streams import cross

#: bits of a group's first chunk (header, base, sign + mantissa) and of a later value's sign
#: + mantissa
HEAD_CHUNK, SM_BITS = 19, 8


async def setup(dut, name: str):
    """Start a BDC test (:func:`tb.common.setup`): returns the unit's :class:`BDCConfig`, the
    test's random generator and a NumPy generator seeded from it."""
    return await common_setup(dut, BDCConfig, name)


async def stream_random_plan(dut, name: str, stream) -> None:
    """The body of the random test ``name``: a :func:`random_plan` of the test size
    (``TRAINFAB_TEST_SIZE`` groups), crossed with light and heavy input gaps and output
    back-pressure (:func:`tb.common.streams.cross`), each part checked by
    ``stream(dut, cfg, tensors, rnd, gap, p_ready)``."""
    cfg, r, gen = await setup(dut, name)
    plan = random_plan(gen, cfg, test_size())
    for part, gap, p_ready in cross(plan, (0.0, 0.3), (1.0, 0.6)):
        await stream(dut, cfg, part, r, gap, p_ready)
    cocotb.log.info("%s: %d tensors, %d values", name, len(plan), sum(x.size for x in plan))


def value_payloads(x: np.ndarray) -> list[int]:
    """Value payloads of one tensor, ``last`` on the final one."""
    return [pack(VALUE_LAYOUT, {"value": int(v), "last": int(q == x.size - 1)})
            for q, v in enumerate(x)]


def word_payloads(words: list[int], cfg: BDCConfig, last: bool = True) -> list[int]:
    """Word payloads, ``last`` on the final one (unless ``last`` is False)."""
    return [pack(word_layout(cfg), {"data": w, "last": int(last and q == len(words) - 1)})
            for q, w in enumerate(words)]


def golden_words(x: np.ndarray, cfg: BDCConfig) -> list[int]:
    """``golden.fpraker.bdc`` words of one tensor."""
    return to_words(encode(x, cfg), cfg)


def cmd_payload(count: int) -> int:
    return pack(CMD_LAYOUT, {"count": count})


def value_ends(x: np.ndarray, cfg: BDCConfig) -> list[int]:
    """For each value, the stream bit after its last one (its chunk's end), from the golden
    group headers and the §7 layout."""
    ends, pos = [], 0
    for g in range(0, x.size, cfg.group):
        grp = x[g:g + cfg.group]
        h = group_header(grp)
        eff = 8 if h == 7 else h
        pos += HEAD_CHUNK
        ends.append(pos)
        for _ in range(grp.size - 1):
            pos += SM_BITS + eff
            ends.append(pos)
    return ends


def bits_to_words(fields, cfg: BDCConfig) -> tuple[list[int], int]:
    """A hand-made stream: ``(value, width)`` fields LSB first, cut into words; returns the
    words and the bit length."""
    value, pos = 0, 0
    for v, w in fields:
        value |= (v & ((1 << w) - 1)) << pos
        pos += w
    n = -(-pos // cfg.word)
    return [(value >> (q * cfg.word)) & ((1 << cfg.word) - 1) for q in range(n)], pos


def bf16(sign, exp, man) -> np.ndarray:
    return ((np.asarray(sign, np.int64) << 15) | (np.asarray(exp, np.int64) << 7)
            | np.asarray(man, np.int64)).astype(np.uint16)


def group_with_header(gen: np.random.Generator, n: int, header: int) -> np.ndarray:
    """``n`` values whose group header is exactly ``header`` (0..6 or the escape 7).  When
    ``n > 1`` one delta sits on an edge of the header's width: the most negative or most
    positive delta it holds, or the delta of least magnitude that needs it (``-2**(h-2) - 1``,
    ``2**(h-2)``; for the escape -33, 32 or the exponent range's ends); half of the groups
    keep every other delta one bit narrower, so that the edge alone sets the header."""
    base = int(gen.integers(70, 186))
    h = 7 if header == 7 else header
    if header == 0 or n == 1:
        d = np.zeros(n - 1, np.int64)
    else:
        if h == 7:
            lo, hi, edges = -base, 255 - base, [-base, 255 - base, -33, 32]
        elif h == 1:
            lo, hi, edges = -1, 0, [-1]
        else:
            lo, hi = -(1 << (h - 1)), (1 << (h - 1)) - 1
            edges = [lo, -(1 << (h - 2)) - 1, 1 << (h - 2), hi]
        if h >= 2 and gen.random() < 0.5:
            lo, hi = -(1 << (h - 2)), (1 << (h - 2)) - 1
        d = gen.integers(lo, hi + 1, n - 1)
        d[int(gen.integers(0, n - 1))] = int(gen.choice(edges))
    e = np.concatenate([[base], base + d])
    x = bf16(gen.integers(0, 2, n), e, gen.integers(0, 128, n))
    assert group_header(x) == (header if n > 1 else 0)
    return x


def random_tensor(gen: np.random.Generator, n: int, cfg: BDCConfig) -> np.ndarray:
    """``n`` values of one of four kinds: every group with a random header 0..7 (each delta
    width at its extremes), training-like N(0, σ) values with zeros (mostly narrow deltas, zeros
    forcing escapes), any 16-bit pattern (NaN, Inf and subnormals included), or all zeros."""
    kind = gen.integers(0, 8)
    if kind < 4:
        parts = [group_with_header(gen, min(cfg.group, n - g), int(gen.integers(0, 8)))
                 for g in range(0, n, cfg.group)]
        return np.concatenate(parts) if parts else np.zeros(0, np.uint16)
    if kind < 6:
        v = (gen.standard_normal(n) * 10.0 ** gen.uniform(-3, 1)).astype(np.float32)
        v[gen.random(n) < 0.1] = 0
        return (v.view(np.uint32) >> 16).astype(np.uint16)
    if kind < 7:
        return gen.integers(0, 1 << 16, n).astype(np.uint16)
    return np.zeros(n, np.uint16)


def random_plan(gen: np.random.Generator, cfg: BDCConfig, groups: int) -> list[np.ndarray]:
    """Random tensors of at least ``groups`` groups in all: one value, one group minus one,
    exactly one group, then random lengths (most with a partial final group)."""
    plan = [random_tensor(gen, n, cfg) for n in (1, cfg.group - 1, cfg.group)]
    while sum(-(-x.size // cfg.group) for x in plan) < groups:
        plan.append(random_tensor(gen, int(gen.integers(1, 6 * cfg.group)), cfg))
    return [plan[i] for i in gen.permutation(len(plan))]


def tv17_tensors(gen: np.random.Generator, cfg: BDCConfig) -> list[tuple[np.ndarray, int]]:
    """Spec TV17's groups (at the unit's group size) with their expected headers: one exponent
    (0); the first at e, the rest in {e, e - 1} (1); one +1 delta (2); one zero among exponents
    near 127 (escape)."""
    G = cfg.group
    man = gen.integers(0, 128, G)
    sign = gen.integers(0, 2, G)
    one = bf16(sign, [130] * G, man)
    down = bf16(sign, [120] + [120 - (k % 2) for k in range(1, G - 1)] + [119], man)
    up = bf16(sign, [120] * (G - 1) + [121], man)
    near = bf16(sign, [127] + list(127 + gen.integers(-1, 2, G - 1)), man)
    near[G // 2] = 0
    return [(one, 0), (down, 1), (up, 2), (near, 7)]

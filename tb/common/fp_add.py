"""Testbench of the floating-point adder (``common.fp_add``) against
``golden.common.fp_add.fp_add_bits``.

At ``pipeline = 0`` (combinational) every vector is driven, settles, and ``sum`` is compared
with the golden sum; at ``pipeline = d > 0`` the vectors go in back to back, one per cycle, and
each sum is checked exactly ``d`` cycles after its operands (:mod:`tb.common.latency`).
Vectors aim at what adders get wrong: exact and near cancellation (equal and adjacent
exponents), ties and near-ties of the alignment (the guard/round/sticky bits), carries into
the next binade, overflow to ±Inf, results below the smallest normal (FTZ), subnormal and zero
operands of both signs (DAZ), and Inf/NaN operands.
"""

import cocotb
import numpy as np

from golden.common.fp_add import FPAddConfig, fp_add_bits

from . import config_from_env, rng, test_size, uint
from .latency import apply_vectors, begin


def _vectors(fmt, gen: np.random.Generator, n: int):
    P, W = fmt.man_bits, fmt.width
    ones = (1 << W) - 1
    a = gen.integers(0, 1 << W, n, dtype=np.int64)
    kind = gen.integers(0, 8, n)
    ea = (a >> P) & fmt.exp_max
    # b: the same exponent (cancellation), a nearby one (alignment by a few bits), anything
    delta = np.where(kind < 3, 0, np.where(kind < 6, gen.integers(-P - 4, P + 5, n), 0))
    eb = np.clip(ea + delta, 0, fmt.exp_max)
    man_b = gen.integers(0, 1 << P, n, dtype=np.int64)
    # near ties: mantissas ending in ...1000 or ...0111 at the alignment boundary
    tie = (kind == 6)
    man_b = np.where(tie, (man_b | 1) & ~((1 << max(P // 2, 1)) - 2), man_b)
    b = (gen.integers(0, 2, n) << (W - 1)) | (eb << P) | man_b
    b = np.where(kind == 1, a ^ (1 << (W - 1)), b)                 # x + (-x)
    b = np.where(kind == 7, gen.integers(0, 1 << W, n), b)
    # specials and subnormals, sprinkled
    special = np.array([0, 1 << (W - 1), 1, (1 << P) - 1, fmt.inf, fmt.inf | (1 << (W - 1)),
                        fmt.inf | 1, fmt.max_finite, fmt.max_finite | (1 << (W - 1)),
                        1 << P, (1 << P) | (1 << (W - 1))], dtype=np.int64)
    pick = gen.random(n) < 0.05
    a = np.where(pick, gen.choice(special, n), a)
    pick = gen.random(n) < 0.05
    b = np.where(pick, gen.choice(special, n), b)
    return a & ones, b & ones


async def _sums(dut, cfg, a, b, want, what=""):
    """Drive the pairs ``a[k], b[k]`` and check ``sum`` against ``want[k]`` (through the
    pipeline's latency)."""
    fmt = cfg.format

    def drive(k):
        dut.a.value = int(a[k])
        dut.b.value = int(b[k])

    def check(k):
        got = uint(dut.sum)
        assert got == int(want[k]), (f"{fmt.name}: {int(a[k]):#x} + {int(b[k]):#x} = {got:#x}, "
                                     f"{what or 'golden'} {int(want[k]):#x}")

    await apply_vectors(dut, cfg.pipeline, len(a), drive, check)


@cocotb.test()
async def random_and_corner_sums(dut):
    """The unit's test size in random and corner operand pairs (``TRAINFAB_TEST_SIZE``)."""
    cfg = config_from_env(FPAddConfig)
    fmt = cfg.format
    await begin(dut, cfg.pipeline)
    gen = np.random.default_rng(rng("random_and_corner_sums").getrandbits(64))
    a, b = _vectors(fmt, gen, test_size())
    await _sums(dut, cfg, a, b, fp_add_bits(a, b, fmt))


@cocotb.test()
async def commutes_and_handles_zeros(dut):
    """a + b == b + a on random pairs, and the signed-zero rules: +0 + -0 = +0, -0 + -0 = -0,
    x + -x = +0 (each checked against the rule itself, not only the golden model)."""
    cfg = config_from_env(FPAddConfig)
    fmt = cfg.format
    await begin(dut, cfg.pipeline)
    gen = np.random.default_rng(rng("commutes_and_handles_zeros").getrandbits(64))
    neg = 1 << (fmt.width - 1)
    cases = [(0, neg, 0), (neg, neg, neg), (neg, 0, 0), (0, 0, 0)]
    for x in gen.integers(1 << fmt.man_bits, fmt.inf, 50):
        cases.append((int(x), int(x) ^ neg, 0))
    xs, ys, rule = zip(*cases)
    await _sums(dut, cfg, xs, ys, rule, "want")
    a, b = _vectors(fmt, gen, 300)
    # each pair, then the same pair swapped: both sums must be equal
    pairs = [(x, y) for x, y in zip(a.tolist(), b.tolist())]
    seq_a = [p for x, y in pairs for p in (x, y)]
    seq_b = [p for x, y in pairs for p in (y, x)]
    got = []

    def drive(k):
        dut.a.value, dut.b.value = seq_a[k], seq_b[k]

    def check(k):
        got.append(uint(dut.sum))
        if k % 2:
            x, y = pairs[k // 2]
            assert got[k] == got[k - 1], f"{x:#x} + {y:#x} does not commute"

    await apply_vectors(dut, cfg.pipeline, len(seq_a), drive, check)
    assert len(got) == 2 * len(pairs)

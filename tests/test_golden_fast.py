"""FAST golden model (``golden.fast.numerics``) and the shared FP32 adder (``golden.common.fp_add``): the
spec's §11 vectors, exact-rational bounds, a scalar re-statement of §2.3 in Python ints, the
LFSR against its scalar step, and the vectorized GEMM against the scalar fMAC."""

import math
import random
from fractions import Fraction

import numpy as np
import pytest

from golden import ConfigError
from golden.common.fp_add import QNAN, fp32_add, fp32_add_bits
from golden.fast.numerics import (
    LANE_SEEDS, LaneRNG, Quantized, bfp_gemm, bfp_quantize, bfp_quantize_groups, choose_m,
    chunks, dequant, epsilon, fmac_group, fmac_round, fp_gen, gemm_quantized, lfsr16_step,
    quantize_rows, rel_improvement, rounds, to_m2,
)

T1 = [3.0, 1.0, -1.5, 0.75, 0.5, -0.25, 0.2, 0.1, 2.5, -2.75, 1.875, 0.0, -0.0, 3.75, 0.0625,
      1e-3]
T7 = [1.0, 0.15625, -0.15625, 2.0 ** -11, 2.0 ** -12]


def f32(bits):
    return np.uint32(bits).view(np.float32)


def value(x) -> Fraction:
    return Fraction(float(np.float32(x)))


# ---------------------------------------------------------------------------------------------
# §11 vectors

def test_t1_t2_truncation():
    Es, s, q = bfp_quantize(T1, 4)
    assert Es == 128
    assert s.tolist() == [0, 0, 1, 0, 0, 1, 0, 0, 0, 1, 0, 0, 1, 0, 0, 0]
    assert q.tolist() == [12, 4, 6, 3, 2, 1, 0, 0, 10, 11, 7, 0, 0, 15, 0, 0]
    assert dequant(Es, s, q, 4).tolist() == [3, 1, -1.5, 0.75, 0.5, -0.25, 0, 0, 2.5, -2.75,
                                             1.75, 0, 0, 3.75, 0, 0]
    assert np.signbit(dequant(Es, s, q, 4)[12])                   # -0.0 keeps its sign
    q2 = bfp_quantize(T1, 2)[2]
    assert q2.tolist() == [3, 1, 1, 0, 0, 0, 0, 0, 2, 2, 1, 0, 0, 3, 0, 0]
    assert q2.tolist() == to_m2(Es, s, q)[2].tolist()


def test_t3_rne_option():
    assert bfp_quantize(T1, 4, "rne")[2].tolist() == [12, 4, 6, 3, 2, 1, 1, 0, 10, 11, 8, 0, 0,
                                                      15, 0, 0]
    rne2 = bfp_quantize(T1, 2, "rne")[2]
    assert rne2.tolist() == [3, 1, 2, 1, 0, 0, 0, 0, 2, 3, 2, 0, 0, 3, 0, 0]
    assert rne2.tolist() != (bfp_quantize(T1, 4, "rne")[2] >> 2).tolist()


def test_t4_chunks_and_reconstruction():
    Es, s, q = bfp_quantize(T1, 4)
    (e0, _, c0), (e1, _, c1) = chunks(Es, s, q, 4)
    assert (int(e0), c0.tolist()) == (128, [3, 1, 1, 0, 0, 0, 0, 0, 2, 2, 1, 0, 0, 3, 0, 0])
    assert (int(e1), c1.tolist()) == (126, [0, 0, 2, 3, 2, 1, 0, 0, 2, 3, 3, 0, 0, 3, 0, 0])
    for k in range(16):
        lhs = sum(Fraction(int(c[k])) * Fraction(2) ** (int(e) - 128)
                  for e, _, c in chunks(Es, s, q, 4))
        assert lhs == Fraction(int(q[k])) * Fraction(2) ** (Es - 130)


def test_t5_t6_improvement_and_schedule():
    Es, s, q = bfp_quantize(T1, 4)
    r = rel_improvement([Es], [q])
    assert r == pytest.approx(19 / 4 / 13, rel=1e-15)
    eps = epsilon(1, 1, 20, 120000)
    assert eps == pytest.approx(0.5849975, abs=1e-12)
    assert choose_m(r, eps) == 2 and choose_m(r, epsilon(20, 120000, 20, 120000)) == 4
    ones = bfp_quantize([1.0] * 16, 4)
    assert ones[2].tolist() == [8] * 16
    r1 = rel_improvement([ones[0]], [ones[2]])
    assert r1 == 0 and choose_m(r1, 0.0) == 4 and choose_m(r1, 0.3) == 2
    assert rel_improvement([0], [np.zeros(16, int)]) == 0.0
    assert rel_improvement([127], [[3] + [0] * 15]) == math.inf
    assert epsilon(10, 60000, 20, 120000) == pytest.approx(0.3)


def test_t7_stochastic_rounding_with_injected_noise():
    want = {0: [8, 1, 1, 0, 0], 191: [8, 1, 1, 0, 0], 192: [8, 2, 2, 0, 0],
            255: [8, 2, 2, 1, 0]}
    for R, q in want.items():
        Es, s, got = bfp_quantize(T7, 4, "sr", [R] * 16)
        assert Es == 127 and got[:5].tolist() == q, R
        assert s[:5].tolist() == [0, 0, 1, 0, 0]


def test_t8_stochastic_rounding_statistics():
    """Means of 4096 LaneRNG conversions within 4 sigma of A/256 for several A."""
    for frac, A in ((0.15625, 1.25), (0.1875 + 2 ** -9, 1.5 + 2 ** -6), (0.125 + 2 ** -7, 1.0625)):
        rng = LaneRNG()
        x = np.zeros((4096, 16), dtype=np.float32)
        x[:, 0], x[:, 1] = 1.0, frac
        _, _, q = bfp_quantize_groups(x, 4, "sr", rng.draws(4096))
        p = A - math.floor(A)
        sigma = math.sqrt(p * (1 - p) / 4096)
        assert abs(q[:, 1].mean() - A) < 4 * sigma, (frac, q[:, 1].mean(), A)


def test_t11_t14_fmac():
    X = (127, np.zeros(16, int), np.full(16, 3))
    assert fmac_group(np.float32(0), X, 2, X, 2).view(np.uint32) == 0x42100000
    X4 = (127, np.zeros(16, int), np.full(16, 15))
    assert fmac_group(0, X4, 4, X4, 4) == np.float32(56.25)
    assert fmac_group(0, X4, 4, X4, 4, mode="exact") == np.float32(56.25)


def test_paper_mode_round_order_and_exact_mode_differ_where_rounding_shows():
    """Hand-worked (RNE at 2**22, ulp 0.5): x = q4 [13, 13], y = q4 [14, 4], Es 127, acc 2**22.
    Rounds with x's chunks outer, MS first: +3.0, +0.375 (-> ...307.5), +0.25 (tie -> 308.0),
    +0.03125 -> 4194308.0.  With y's chunks outer: +3.0, +0.25 (tie -> 307.0), +0.375 (-> 307.5),
    +0.03125 -> 4194307.5.  Exact mode, acc 2**24 (ulp 2), x = y = [15]: one add of
    225 * 2**-6 = 3.515625 -> 16777220; paper mode adds 2.25, 0.5625, 0.5625, 0.140625 one at
    a time, each rounding back to 16777218."""
    z = [0] * 14
    x = (127, np.zeros(16, int), np.array([13, 13] + z))
    y = (127, np.zeros(16, int), np.array([14, 4] + z))
    assert fmac_group(np.float32(2 ** 22), x, 4, y, 4) == np.float32(4194308.0)
    assert fmac_group(np.float32(2 ** 22), y, 4, x, 4) == np.float32(4194307.5)
    w = (127, np.zeros(16, int), np.array([15] + z + [0]))
    assert fmac_group(np.float32(2 ** 24), w, 4, w, 4) == np.float32(16777218.0)
    assert fmac_group(np.float32(2 ** 24), w, 4, w, 4, "exact") == np.float32(16777220.0)
    # the vectorized GEMM keeps the same order (X outer)
    X = np.zeros((1, 16), np.float32)
    X[0, :2] = [13 / 8 * 2, 13 / 8 * 2]                # q4 = 13 at Es = 128
    Y = np.zeros((16, 1), np.float32)
    Y[:2, 0] = [14 / 8 * 2, 4 / 8 * 2]                 # q4 = 14, 4 at Es = 128
    xq, yq = quantize_rows(X, 4), quantize_rows(Y.T.copy(), 4)
    assert xq.q[0, 0, :2].tolist() == [13, 13] and yq.q[0, 0, :2].tolist() == [14, 4]
    got = gemm_quantized(xq, yq).view(np.float32)[0, 0]
    assert got == fmac_group(0, (128, xq.signs[0, 0], xq.q[0, 0]), 4,
                             (128, yq.signs[0, 0], yq.q[0, 0]), 4)


def test_lfsr_known_values():
    """lfsr16_step(0xACE1) = 0x5670 (the textbook x^16+x^14+x^13+x^11+1 Fibonacci LFSR), and
    spec T8's figure: 4096 conversions of 0.15625 average 1.2581 with the default seeds."""
    assert lfsr16_step(0xACE1) == 0x5670
    x = np.zeros((4096, 16), dtype=np.float32)
    x[:, 0], x[:, 1] = 1.0, 0.15625
    _, _, q = bfp_quantize_groups(x, 4, "sr", LaneRNG().draws(4096))
    assert round(float(q[:, 1].mean()), 4) == 1.2581


def test_gemm_signed_zeros():
    """A product of -0.0 rows is +0.0 (the accumulator starts at +0, P = 0 rounds add +0);
    a result below 2**-126 flushes to -0.0 inside the tile, and the external +0 + (-0) = +0."""
    X = np.full((1, 16), -0.0, np.float32)
    Y = np.full((16, 1), 1.0, np.float32)
    assert bfp_gemm(X, Y, 4, 4)[0, 0] == 0
    X = np.full((1, 16), np.float32(-2.0 ** -70), np.float32)
    Y = np.full((16, 1), np.float32(2.0 ** -70), np.float32)
    assert bfp_gemm(X, Y, 2, 2)[0, 0] == 0           # -16 * 2**-140 flushed, then +0 + -0


def test_t15_fp_generator_corners():
    assert fp_gen(1, 60, 60).view(np.uint32) == 0                       # FTZ, +0
    assert fp_gen(-3, 60, 70) == np.float32(-3 * 2.0 ** -126)
    assert fp_gen(-1, 60, 60).view(np.uint32) == 0x80000000            # signed zero
    assert fp_gen(0, 127, 127).view(np.uint32) == 0
    assert fp_gen(144, 255, 255) == np.float32(np.inf)
    assert fp_gen(-2, 200, 200) == np.float32(-np.inf)
    # a P = 0 round leaves the accumulator (a -0.0 accumulator becomes +0.0)
    zero = (127, np.zeros(16, int), np.zeros(16, int))
    assert fmac_round(np.float32(1.5), chunks(*zero, 2)[0], chunks(*zero, 2)[0]) == 1.5
    assert fmac_round(np.float32(-0.0), chunks(*zero, 2)[0],
                      chunks(*zero, 2)[0]).view(np.uint32) == 0


def test_t16_rounds():
    assert [rounds(2, 2), rounds(2, 4), rounds(4, 2), rounds(4, 4), rounds(6, 6),
            rounds(8, 8)] == [1, 2, 2, 4, 9, 16]


def test_t17_exp_floor():
    assert bfp_quantize([1.0, 0.5], 4, exp_floor=130)[0] == 130
    assert bfp_quantize([1.0, 0.5], 4, exp_floor=130)[2][:2].tolist() == [1, 0]
    Es, _, q = bfp_quantize([1.0, 0.5], 4)
    assert Es == 127 and q[:2].tolist() == [8, 4]


# ---------------------------------------------------------------------------------------------
# the quantizer: a scalar re-statement of §2.3 and exact-rational bounds (T19)

def ref_quantize(bits, m, rounding, rand, exp_floor=0):
    """§2.3 verbatim in Python ints."""
    dec = [((b >> 31) & 1, (b >> 23) & 0xFF, b & 0x7FFFFF) for b in bits]
    M = [0 if e == 0 else (1 << 23) | f for _, e, f in dec]
    Es = max([e for _, e, _ in dec] + [exp_floor])
    out = []
    for (s, e, _), Mi, R in zip(dec, M, rand):
        d = Es - e
        sh = d + 24 - m
        if rounding == "trunc":
            q = Mi >> sh
        elif rounding == "sr":
            sh8 = sh - 8
            A = Mi >> sh8 if sh8 >= 0 else Mi << -sh8
            q = (A + R) >> 8
        else:
            q, r = Mi >> sh, Mi & ((1 << sh) - 1)
            half = 1 << (sh - 1)
            q += r > half or (r == half and q & 1)
        out.append(min(q, (1 << m) - 1))
    return Es, [s for s, _, _ in dec], out


def random_groups(rnd: random.Random, n: int):
    groups = []
    for _ in range(n):
        kind = rnd.randrange(4)
        g = []
        for _ in range(16):
            if kind == 0:
                v = np.float32(rnd.gauss(0, 1))
            elif kind == 1:      # wide exponent spread
                v = np.float32(rnd.choice([-1, 1]) * 2.0 ** rnd.uniform(-40, 40))
            elif kind == 2:      # zeros, -0.0, subnormals
                v = rnd.choice([np.float32(0), np.float32(-0.0), f32(rnd.randrange(1, 1 << 23)),
                                np.float32(rnd.gauss(0, 1e-3))])
            else:                # any finite bit pattern
                b = rnd.randrange(1 << 32)
                v = f32(b if (b >> 23) & 0xFF != 255 else b & 0xBFFFFFFF)
            g.append(np.float32(v).view(np.uint32))
        groups.append(g)
    # FP32 values whose bit patterns are the ones drawn
    return np.array(groups, dtype=np.uint32).view(np.float32)


@pytest.mark.parametrize("rounding", ["trunc", "sr", "rne"])
@pytest.mark.parametrize("m", [1, 2, 3, 4, 8, 17, 23])
def test_quantizer_matches_the_scalar_spec(m, rounding):
    rnd = random.Random(f"q{m}{rounding}")
    groups = random_groups(rnd, 150)
    rand = np.array([[rnd.randrange(256) for _ in range(16)] for _ in groups])
    floors = np.array([rnd.choice([0, 0, 0, rnd.randrange(255)]) for _ in groups])
    Es, s, q = bfp_quantize_groups(groups, m, rounding, rand if rounding == "sr" else None,
                                   floors)
    for k, g in enumerate(groups.view(np.uint32)):
        ref = ref_quantize([int(b) for b in g], m, rounding, rand[k].tolist(), int(floors[k]))
        assert (int(Es[k]), s[k].tolist(), q[k].tolist()) == ref, (m, rounding, g)


@pytest.mark.parametrize("m", [2, 4, 5, 8])
def test_t19_error_bounds(m):
    rnd = random.Random(f"t19-{m}")
    groups = random_groups(rnd, 200)
    rand = np.array([[rnd.randrange(256) for _ in range(16)] for _ in groups])
    for rounding in ("trunc", "sr", "rne"):
        Es, s, q = bfp_quantize_groups(groups, m, rounding, rand if rounding == "sr" else None)
        for k, g in enumerate(groups.view(np.uint32)):
            ulp = Fraction(2) ** (int(Es[k]) - 127 - m + 1)
            for j, b in enumerate(g):
                e = (int(b) >> 23) & 0xFF
                x = Fraction(0) if e == 0 else value(f32(b))          # DAZ
                deq = (-1) ** int(s[k, j]) * q[k, j] * ulp
                sat = q[k, j] == (1 << m) - 1
                if rounding == "trunc":
                    assert 0 <= abs(x) - abs(deq) < ulp
                elif rounding == "sr" and not sat:
                    assert abs(x - deq) < ulp
                elif rounding == "rne" and not sat:
                    assert abs(x - deq) <= ulp / 2
                assert int(s[k, j]) == int(b) >> 31                   # sign preserved
            if rounding == "trunc" and Es[k] > 0:
                assert q[k].max() >= 1 << (m - 1)


def test_truncation_composes():
    groups = random_groups(random.Random(3), 300)
    q4 = bfp_quantize_groups(groups, 4)[2]
    assert (bfp_quantize_groups(groups, 2)[2] == q4 >> 2).all()


def test_dequant_ftz_and_exactness():
    s, q = np.array([[0, 1]]), np.array([[8, 15]])
    # Es = 0: 8 * 2**-130 = 2**-127 is below 2**-126 and flushed; Es = 1 gives 2**-126 exactly
    assert dequant(np.array([0]), s, q, 4).tolist() == [[0.0, -0.0]]
    assert np.signbit(dequant(np.array([0]), s, q, 4)[0, 1])
    assert dequant(np.array([1]), s, q, 4).tolist() == [[2.0 ** -126, -1.875 * 2.0 ** -126]]
    Es, s, q = bfp_quantize(T1, 4)
    for k in range(16):
        assert value(dequant(Es, s, q, 4)[k]) == (-1) ** int(s[k]) * int(q[k]) * \
            Fraction(2) ** (Es - 130)


@pytest.mark.parametrize("bad, needle", [
    (dict(x=[1.0, np.inf]), r"x\[1\] = inf"), (dict(x=[np.nan]), "finite"),
    (dict(x=[1e39]), "finite"),                       # overflows to Inf in the float32 cast
    (dict(x=[1.0], rounding="sr", rand=[191.9] * 16), "rand"),
    (dict(x=[1.0], m=0), "m = 0"), (dict(x=[1.0], m=24), "1..23"),
    (dict(x=[1.0], rounding="floor"), "rounding"), (dict(x=[1.0], rounding="sr"), "rand"),
    (dict(x=[1.0], rounding="sr", rand=[300] * 16), "rand"),
    (dict(x=[1.0], exp_floor=255), "exp_floor"), (dict(x=[1.0] * 17), "at most 16"),
])
def test_bad_quantizer_inputs(bad, needle):
    with pytest.raises(ConfigError, match=needle):
        bfp_quantize(**bad)


def test_values_not_bit_patterns():
    """Integer inputs are values (converted with np.float32), whatever their dtype."""
    for dtype in (np.uint32, np.int32, np.int64):
        Es, _, q = bfp_quantize(np.array([3, 1], dtype=dtype))
        assert Es == 128 and q[:2].tolist() == [12, 4]
    assert bfp_gemm(np.ones((1, 16), np.uint32), np.ones((16, 1), np.uint32), 4, 4)[0, 0] == \
        np.float32(16).view(np.uint32)


def test_bad_fmac_and_schedule_inputs():
    with pytest.raises(ValueError, match="2, 4, 6, 8"):
        rounds(3, 4)
    with pytest.raises(ValueError, match="mode"):
        fmac_group(0, (127, [0] * 16, [1] * 16), 2, (127, [0] * 16, [1] * 16), 2, mode="fast")
    with pytest.raises(ValueError, match="dataflow"):
        bfp_gemm(np.ones((1, 16)), np.ones((16, 1)), 2, 2, dataflow="sideways")
    with pytest.raises(ValueError, match="array"):
        bfp_gemm(np.ones((1, 16)), np.ones((16, 1)), 2, 2, array=(0, 4))
    with pytest.raises(ValueError, match="array"):
        bfp_gemm(np.ones((1, 16)), np.ones((16, 1)), 2, 2, "wgrad", array=(4, 0))
    assert bfp_gemm(np.ones((1, 16)), np.ones((16, 1)), 2, 2, array=(np.int64(2), 2)).size == 1
    with pytest.raises(ValueError, match="0..3 for m = 2"):
        fmac_group(0, (127, [0] * 16, [15] * 16), 2, (127, [0] * 16, [1] * 16), 2)
    with pytest.raises(ValueError, match="0..15 for m = 4"):
        chunks(127, [0] * 16, [16] * 16, 4)
    with pytest.raises(ValueError, match="Es"):
        dequant(255, [0], [1], 4)
    assert rel_improvement([], []) == 0.0
    with pytest.raises(ValueError, match="l = 0"):
        epsilon(0, 1, 20, 100)


# ---------------------------------------------------------------------------------------------
# LFSR bank

def test_lfsr_lanes_follow_the_scalar_step():
    rng = LaneRNG()
    states = list(LANE_SEEDS)
    for _ in range(300):
        got = rng.draw()
        for lane in range(16):
            for _ in range(8):
                states[lane] = lfsr16_step(states[lane])
        assert got.tolist() == [s >> 8 for s in states]


def test_lfsr_period_is_maximal():
    s, n = 0xACE1, 0
    while True:
        s = lfsr16_step(s)
        n += 1
        if s == 0xACE1:
            break
    assert n == 65535
    assert all(s != 0 for s in LANE_SEEDS) and len(set(LANE_SEEDS)) == 16


# ---------------------------------------------------------------------------------------------
# the shared FP32 adder

def test_fp32_add_matches_numpy_on_a_million_normal_pairs():
    rng = np.random.default_rng(0)
    a = rng.standard_normal(1_000_000).astype(np.float32)
    b = (rng.standard_normal(1_000_000) * np.exp2(rng.integers(-30, 30, 1_000_000))).astype(
        np.float32)
    assert (fp32_add(a, b).view(np.uint32) == (a + b).view(np.uint32)).all()


def test_fp32_add_on_random_bit_patterns_outside_the_subnormal_range():
    """Any finite patterns; NumPy (IEEE, gradual underflow) agrees wherever neither an input nor
    its result is subnormal."""
    rng = np.random.default_rng(1)
    a = rng.integers(0, 1 << 32, 400_000, dtype=np.uint64).astype(np.uint32)
    b = a ^ (rng.integers(0, 1 << 32, 400_000, dtype=np.uint64).astype(np.uint32) & 0x80FFFFFF)
    a, b = a[((a >> 23) & 0xFF) != 255], b[((a >> 23) & 0xFF) != 255]
    keep = ((b >> 23) & 0xFF) != 255
    a, b = a[keep], b[keep]
    with np.errstate(over="ignore"):
        ref = (a.view(np.float32) + b.view(np.float32)).view(np.uint32)
    normal = lambda x: ((x >> 23) & 0xFF) != 0  # noqa: E731
    ok = normal(a) & normal(b) & (normal(ref) | ((ref & 0x7FFFFFFF) == 0))
    assert ok.mean() > 0.9
    assert (fp32_add_bits(a[ok], b[ok]) == ref[ok]).all()


def test_fp32_add_daz_ftz_and_specials():
    tiny = np.float32(2.0 ** -126)
    sub = f32(0x00400000)                           # 2**-127, subnormal
    assert fp32_add(sub, np.float32(1.0)) == 1.0     # DAZ
    assert fp32_add(sub, sub).view(np.uint32) == 0
    assert fp32_add(-sub, -sub).view(np.uint32) == 0x80000000
    # 1.5 * 2**-126 - 2**-126 = 2**-127 is subnormal: flushed to +0; negated to -0
    assert fp32_add(np.float32(1.5) * tiny, -tiny).view(np.uint32) == 0
    assert fp32_add(-np.float32(1.5) * tiny, tiny).view(np.uint32) == 0x80000000
    assert fp32_add(np.float32(1.0), np.float32(-1.0)).view(np.uint32) == 0     # +0
    assert fp32_add(np.float32(-0.0), np.float32(-0.0)).view(np.uint32) == 0x80000000
    assert fp32_add(np.float32(-0.0), np.float32(0.0)).view(np.uint32) == 0
    big = f32(0x7F7FFFFF)
    assert fp32_add(big, big) == np.inf and fp32_add(-big, -big) == -np.inf
    assert fp32_add(np.float32(np.inf), np.float32(-1e30)) == np.inf
    assert fp32_add(np.float32(np.inf), np.float32(-np.inf)).view(np.uint32) == QNAN
    assert fp32_add(f32(0x7FC00001), np.float32(1)).view(np.uint32) == QNAN
    # ties: 1 + 2**-24 rounds to even (1.0); 1 + 3 * 2**-24 rounds up
    assert fp32_add(np.float32(1), np.float32(2.0 ** -24)) == 1.0
    assert fp32_add(np.float32(1), np.float32(3 * 2.0 ** -24)) == np.float32(1 + 2.0 ** -22)


# ---------------------------------------------------------------------------------------------
# GEMM

def _scalar_gemm(xq: Quantized, yq: Quantized, tile, mode):
    """The GEMM from the scalar fMAC, element by element, group by group (§4.5, §5.3)."""
    M, N, ng = xq.q.shape[0], yq.q.shape[0], xq.q.shape[1]
    tile = tile or ng
    out = np.zeros((M, N), dtype=np.uint32)
    for i in range(M):
        for j in range(N):
            total = np.float32(0)
            acc = np.float32(0)
            for b in range(ng):
                if b % tile == 0:
                    acc = np.float32(0)
                acc = fmac_group(acc, (xq.Es[i, b], xq.signs[i, b], xq.q[i, b]), xq.m,
                                 (yq.Es[j, b], yq.signs[j, b], yq.q[j, b]), yq.m, mode)
                if (b + 1) % tile == 0 or b + 1 == ng:
                    total = fp32_add(total, acc)
            out[i, j] = np.float32(total).view(np.uint32)
    return out


@pytest.mark.parametrize("dataflow, array", [("fwd", (2, 3)), ("bwd_data", (2, 3)),
                                             ("wgrad", (2, 2)), ("fwd", None)])
@pytest.mark.parametrize("mx, my", [(2, 2), (2, 4), (4, 2), (4, 4), (6, 8)])
def test_vectorized_gemm_equals_the_scalar_fmac(dataflow, array, mx, my):
    rng = np.random.default_rng(mx * 10 + my)
    X = (rng.standard_normal((3, 90)) * np.exp2(rng.integers(-8, 8, (3, 90)))).astype(np.float32)
    Y = rng.standard_normal((90, 4)).astype(np.float32)
    X[0, :20] = 0
    xq, yq = quantize_rows(X, mx), quantize_rows(Y.T.copy(), my)
    tile = {"fwd": array and array[1], "bwd_data": array and array[0], "wgrad": None}[dataflow]
    for mode in ("paper", "exact"):
        got = gemm_quantized(xq, yq, dataflow, mode, array)
        assert (got == _scalar_gemm(xq, yq, tile, mode)).all(), (dataflow, mode)
    assert (bfp_gemm(X, Y, mx, my, dataflow, "paper", array, "trunc", "trunc") ==
            gemm_quantized(xq, yq, dataflow, "paper", array)).all()


def test_gemm_against_float64_on_the_dequantized_operands():
    """T20's second check: within (FP32 adds) x 2**-24 x sum of |round values|."""
    rng = np.random.default_rng(5)
    X = rng.standard_normal((6, 160)).astype(np.float32)
    Y = rng.standard_normal((160, 5)).astype(np.float32)
    for mx, my in ((2, 2), (2, 4), (4, 2), (4, 4)):
        xq, yq = quantize_rows(X, mx), quantize_rows(Y.T.copy(), my)
        got = gemm_quantized(xq, yq, "fwd", "paper", (4, 4)).view(np.float32).astype(np.float64)
        dx = dequant(xq.Es, xq.signs, xq.q, mx).astype(np.float64).reshape(6, -1)
        dy = dequant(yq.Es, yq.signs, yq.q, my).astype(np.float64).reshape(5, -1)
        exact = dx @ dy.T
        adds = xq.q.shape[1] * rounds(mx, my) + 3
        bound = adds * 2.0 ** -24 * (np.abs(dx) @ np.abs(dy).T)
        assert (np.abs(got - exact) <= bound).all()


def test_gemm_with_stochastic_gradients_draws_in_group_order():
    rng = np.random.default_rng(9)
    G_ = rng.standard_normal((2, 40)).astype(np.float32)
    W = rng.standard_normal((40, 3)).astype(np.float32)
    a = bfp_gemm(G_, W, 4, 4, "bwd_data", rng=LaneRNG())          # ∇O: SR by default (A14)
    assert (a == bfp_gemm(G_, W, 4, 4, "bwd_data", x_rounding="sr", rng=LaneRNG())).all()
    assert (a != bfp_gemm(G_, W, 4, 4, "bwd_data", x_rounding="trunc")).any()
    xq = quantize_rows(G_, 4, "sr", LaneRNG())      # the same draws, X's groups row-major
    assert (a == gemm_quantized(xq, quantize_rows(W.T.copy(), 4), "bwd_data")).all()
    b = bfp_gemm(G_, W, 4, 4, "bwd_data", x_rounding="sr", rng=LaneRNG(seeds=range(1, 17)))
    assert (a != b).any()                          # other seeds, other rounding
    # m = 2 gradients: SR to 4 bits, low chunk discarded (A4)
    q2 = quantize_rows(G_, 2, "sr", LaneRNG()).q
    assert (q2 == quantize_rows(G_, 4, "sr", LaneRNG()).q >> 2).all()

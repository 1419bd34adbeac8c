"""golden.equinox.hbfp: the spec's §7 vectors (TV1-TV10, TV13-TV15), exact-rational properties, the
bf16 conversion against an independent implementation (ml_dtypes), the vectorized GEMM against
a per-element reference, and input errors."""

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from golden.equinox.hbfp import (HBFPInputError, acc_to_bf16, bf16_add, bf16_to_f32, bfp_dequantize,
                         bfp_dot, bfp_quantize, exp_offset, f32_to_bf16, hbfp_matmul,
                         quantize_activations, quantize_weights, weight_narrow, weight_store,
                         weight_update)

MODES = ("floor", "rne", "rtz")


def q(x, m=8, rounding="floor"):
    e, M = bfp_quantize(x, m, rounding)
    return e, [int(v) for v in M]


# ---------------------------------------------------------------- TV1-TV7: quantization

def test_tv1_exact_block():
    for mode in MODES:
        assert q([1.0, 0.5, -0.25, 0.125], rounding=mode) == (127, [64, 32, -16, 8])
    e, M = bfp_quantize([1.0, 0.5, -0.25, 0.125])
    assert list(bfp_dequantize(e, M)) == [1.0, 0.5, -0.25, 0.125]


def test_tv2_max_element_extremes():
    for mode in MODES:
        assert q([1.9921875, 1.0], rounding=mode) == (127, [127, 64])
    assert q([-1.9921875, 0.5], rounding="floor") == (127, [-128, 32])
    assert q([-1.9921875, 0.5], rounding="rne") == (127, [-128, 32])
    assert q([-1.9921875, 0.5], rounding="rtz") == (127, [-127, 32])
    # TV2b: an exact power of two keeps its value (no emulator clamp)
    e, M = bfp_quantize([1.0, 0.5])
    assert (e, list(M)) == (127, [64, 32]) and bfp_dequantize(e, M)[0] == 1.0


def test_tv3_shift_out():
    assert q([8.0, 0.01, -0.07], rounding="floor") == (130, [64, 0, -1])
    assert q([8.0, 0.01, -0.07], rounding="rne") == (130, [64, 0, -1])
    assert q([8.0, 0.01, -0.07], rounding="rtz") == (130, [64, 0, 0])


def test_tv4_ties():
    x = [1.0, 3 / 128, 5 / 128, -3 / 128]
    assert q(x, rounding="floor") == (127, [64, 1, 2, -2])
    assert q(x, rounding="rne") == (127, [64, 2, 2, -2])
    assert q(x, rounding="rtz") == (127, [64, 1, 2, -1])


def test_tv5_zero_and_subnormal():
    for mode in MODES:
        assert q([0.0, 0.0, 0.0, 0.0], rounding=mode) == (0, [0, 0, 0, 0])
        assert q([-0.0, 1e-40], rounding=mode) == (0, [0, 0])
        assert q([1e-39, 0.5], rounding=mode) == (126, [0, 64])


def test_tv6_typical_block():
    x = [3.0, 0.1, -0.3, 2.5]
    assert q(x, rounding="floor") == (128, [96, 3, -10, 80])
    assert q(x, rounding="rne") == (128, [96, 3, -10, 80])
    assert q(x, rounding="rtz") == (128, [96, 3, -9, 80])
    assert q(x, 12, "floor") == (128, [1536, 51, -154, 1280])
    assert q(x, 12, "rne") == (128, [1536, 51, -154, 1280])


def test_tv7_stochastic():
    def sr(R):
        e, M = bfp_quantize([1.0, 3 / 128], 8, "stoch", np.array(R), 16)
        return e, list(M)
    assert sr([0, 0x8000]) == (127, [64, 2])
    assert sr([0, 0x7FFF]) == (127, [64, 1])


def _exact_scaled(x, e, m):
    """x * 2**-(e - 127 - (m - 2)) as an exact rational (x read as FP32; subnormals flushed)."""
    v = Fraction(float(np.float32(x)))
    if v != 0 and abs(v) < Fraction(2) ** -126:
        v = Fraction(0)
    return v * Fraction(2) ** -(e - 127 - (m - 2))


def _floor(f):
    return f.numerator // f.denominator


@pytest.mark.parametrize("m", [4, 8, 12, 16])
def test_modes_against_exact_rationals(m):
    gen = np.random.default_rng(m)
    lo, hi = -(1 << (m - 1)), (1 << (m - 1)) - 1
    for _ in range(60):
        x = (gen.standard_normal(8) * np.exp2(gen.integers(-12, 12, 8))).astype(np.float32)
        x[gen.random(8) < 0.1] = 0
        R = gen.integers(0, 1 << 10, 8)
        e = max(int((v.view(np.uint32) >> 23) & 0xFF) for v in x)
        exp = [_exact_scaled(v, e, m) for v in x]
        fl = [_floor(s) for s in exp]
        rne = [min(hi, int(round(s))) for s in exp]          # Python rounds Fractions half-even
        rtz = [int(s) for s in exp]
        st = [min(hi, _floor(s + Fraction(int(r), 1 << 10))) for s, r in zip(exp, R)]
        assert q(x, m, "floor") == (e, fl)
        assert q(x, m, "rne") == (e, rne)
        assert q(x, m, "rtz") == (e, rtz)
        eS, MS = bfp_quantize(x, m, "stoch", R, 10)
        assert (eS, list(MS)) == (e, st)
        assert all(lo <= v <= hi for v in fl + rne + rtz + st)


def test_stochastic_is_unbiased_on_the_grid():
    """E[M] over all 2**r random values equals the scaled value exactly (values on the grid)."""
    x = np.array([1.0, 3 / 128 + 1 / 1024, -5 / 128 - 3 / 512], dtype=np.float32)
    r = 6
    R = np.arange(1 << r)
    Ms = np.array([bfp_quantize(x, 8, "stoch", np.full(3, v), r)[1] for v in R])
    e = 127
    for i in range(3):
        assert Fraction(int(Ms[:, i].sum()), 1 << r) == _exact_scaled(x[i], e, 8)


# ---------------------------------------------------------------- TV8-TV10: dot and normalizer

def test_tv8_dot_product():
    ea, Ma = bfp_quantize([1, 0.5, -0.25, 0.125])
    eb, Mb = bfp_quantize([1, 2, 1, -2])
    assert (ea, list(Ma), eb, list(Mb)) == (127, [64, 32, -16, 8], 128, [32, 64, 32, -64])
    acc, esum, wrapped = bfp_dot(ea, Ma, eb, Mb)
    assert (acc, esum, wrapped) == (3072, 255, False)
    assert Fraction(acc) * Fraction(2) ** (esum - 266) == Fraction(3, 2)
    assert acc_to_bf16(acc, esum) == 0x3FC0


TV9 = [(255, 0x437F), (257, 0x4380), (259, 0x4382), (511, 0x4400), (-259, 0xC382),
       (1, 0x3F80), (8388607, 0x4B00), (-8388608, 0xCB00)]


@pytest.mark.parametrize("acc, bits", TV9)
def test_tv9_normalizer_rounding(acc, bits):
    assert acc_to_bf16(acc, 266) == bits


def test_tv10_exponent_range():
    assert acc_to_bf16(1, 2) == 0x0000
    assert acc_to_bf16(100, 508) == 0x7F7F
    assert acc_to_bf16(-100, 508) == 0xFF7F
    for esum in (0, 1, 266, 400, 508):
        assert acc_to_bf16(0, esum) == 0x0000
    assert acc_to_bf16(-1, 3) == 0x8000          # the flush keeps the sign (§2.5 step 5)


def test_normalizer_against_exact_rounding():
    """acc_to_bf16 = the exact value rounded to 8 significant bits (ties to even), flushed
    below 2**-126 after rounding, saturated above the largest finite bf16."""
    gen = np.random.default_rng(3)
    acc = gen.integers(-(1 << 23), 1 << 23, 4000)
    acc[:50] = gen.integers(-300, 300, 50)
    esum = gen.integers(0, 509, 4000)
    got = acc_to_bf16(acc, esum)
    for a, s, g in zip(acc, esum, got):
        a, s = int(a), int(s)
        v = Fraction(a) * Fraction(2) ** (s - 266)
        if a == 0:
            assert g == 0
            continue
        mag = abs(v)
        p = mag.numerator.bit_length() - mag.denominator.bit_length()
        if Fraction(2) ** p > mag:
            p -= 1
        ulp = Fraction(2) ** (p - 7)
        r = round(mag / ulp) * ulp                    # half-even on exact rationals
        sign = 0x8000 if a < 0 else 0
        if r >= Fraction(2) ** 128:
            assert g == sign | 0x7F7F
        elif r < Fraction(2) ** -126:
            assert g == sign
        else:
            assert Fraction(float(bf16_to_f32(int(g)))) == (-r if a < 0 else r)
            assert int(g) & 0x8000 == sign


def test_normalizer_flush_boundary():
    """The largest value below 2**-126 rounds up to 2**-126 and is kept (the rounding block
    decides the flush after rounding; see golden.equinox.hbfp's docstring)."""
    # 0x1FF * 2**(esum - 266) with 9 significant bits, exponent just below -126
    esum = 266 - 126 - 9
    assert acc_to_bf16(0x1FF, esum) == 0x0080
    assert acc_to_bf16(0x1FE, esum) == 0x0000


def test_exp_offset():
    assert exp_offset(8) == 266 and exp_offset(12) == 274


# ---------------------------------------------------------------- TV13: tiled GEMM

#: TV13's operands.  TV12 (which defines Wt) is not in the visible spec; this Wt is the only
#: matrix of quarter-integers in [-4, 4] that reproduces TV13's FP32 reference
#: [[1.4375, 0.0625], [4.575, -6.525]] and its T = 2 weight exponents (128 for both tiles).
TV13_X = np.array([[1.0, 0.5, -0.25, 0.125], [3.0, 0.1, -0.3, 2.5]], dtype=np.float32)
TV13_WT = np.array([[1.0, -0.5], [0.25, 2.0], [-1.0, 0.75], [0.5, -2.0]], dtype=np.float32)


def test_tv13_tiled_matmul():
    ref = TV13_X.astype(np.float64) @ TV13_WT.astype(np.float64)
    assert np.allclose(ref, [[1.4375, 0.0625], [4.575, -6.525]], atol=1e-6)
    for T in (4, 2):
        assert hbfp_matmul(TV13_X, TV13_WT, T).tolist() == [[0x3FB8, 0x3D80], [0x4093, 0xC0D2]]
    ex, Mx = quantize_activations(TV13_X, 2)
    assert (int(ex[0, 0]), list(Mx[0, 0])) == (127, [64, 32])
    assert (int(ex[0, 1]), list(Mx[0, 1])) == (125, [-64, 32])
    ew, _ = quantize_weights(TV13_WT, 2)
    assert ew.tolist() == [[128], [128]]


def _matmul_reference(X, Wt, T, m, A):
    """hbfp_matmul element by element: bfp_quantize per block, bfp_dot, acc_to_bf16, and a
    running bf16_add over the K-tiles."""
    B, K = X.shape
    N = Wt.shape[1]
    kt, nt = -(-K // T), -(-N // T)
    Xp = np.zeros((B, kt * T), np.float32)
    Xp[:, :K] = X
    Wp = np.zeros((kt * T, nt * T), np.float32)
    Wp[:K, :N] = Wt
    out = np.zeros((B, N), np.uint16)
    wq = {(k, j): bfp_quantize(Wp[k * T:(k + 1) * T, j * T:(j + 1) * T].ravel(), m)
          for k in range(kt) for j in range(nt)}
    for b in range(B):
        for n in range(N):
            s = None
            for k in range(kt):
                ea, Ma = bfp_quantize(Xp[b, k * T:(k + 1) * T], m)
                eb, Mw = wq[k, n // T]
                col = Mw.reshape(T, T)[:, n % T]
                acc, esum, _ = bfp_dot(ea, Ma, eb, col, A, m)
                p = acc_to_bf16(acc, esum, m, A)
                s = p if s is None else int(bf16_add(s, p))
            out[b, n] = s
    return out


@pytest.mark.parametrize("shape, T, m, A", [((3, 10, 5), 4, 8, 24), ((2, 7, 9), 3, 8, 24),
                                            ((4, 16, 4), 8, 6, 16), ((2, 12, 6), 4, 12, 32)])
def test_matmul_matches_element_reference(shape, T, m, A):
    B, K, N = shape
    gen = np.random.default_rng(B * K * N)
    X = (gen.standard_normal((B, K)) * np.exp2(gen.integers(-3, 4, (B, K)))).astype(np.float32)
    W = gen.standard_normal((K, N)).astype(np.float32)
    X[0, :min(T, K)] = 0                       # an all-zero activation block
    assert (hbfp_matmul(X, W, T, m, A) == _matmul_reference(X, W, T, m, A)).all()


def test_bf16_add_is_the_rounded_exact_sum():
    gen = np.random.default_rng(5)
    a = f32_to_bf16(gen.standard_normal(3000) * np.exp2(gen.integers(-30, 30, 3000)))
    b = f32_to_bf16(gen.standard_normal(3000) * np.exp2(gen.integers(-30, 30, 3000)))
    s = bf16_add(a, b)
    exact = bf16_to_f32(a).astype(np.float64) + bf16_to_f32(b).astype(np.float64)
    # float64 holds the exact sum when the exponents differ by < 45; ml_dtypes rounds it RNE
    assert (s == exact.astype(ml_dtypes.bfloat16).view(np.uint16)).all()
    big = f32_to_bf16(np.float32(3e38))
    assert int(bf16_add(big, big)) == 0x7F7F and int(bf16_add(big ^ 0x8000, big ^ 0x8000)) == 0xFF7F


# ---------------------------------------------------------------- TV14: wide weights

def test_tv14_wide_weight_storage():
    w = [1.5, -0.3, 0.001]
    e, M16 = weight_store(w)
    assert (e, list(M16)) == (127, [24576, -4916, 16])
    e_r, M16_r = weight_store(w, 16, "rne")
    assert (e_r, list(M16_r)) == (127, [24576, -4915, 16])
    assert list(weight_narrow(M16)) == [96, -20, 0] == list(weight_narrow(M16_r))
    assert q(w, 8, "floor") == (127, [96, -20, 0])
    assert q(w, 8, "rne") == (127, [96, -19, 0])
    e2, M2 = weight_update(e, M16, [2.0 ** -10, 0, 0])
    assert e2 == 127 and int(M2[0]) == 24592 and int(weight_narrow(M2)[0]) == 96


def test_tv14_floor_narrow_equals_direct_quantization():
    gen = np.random.default_rng(14)
    for _ in range(500):
        x = (gen.standard_normal(16) * np.exp2(gen.integers(-10, 10))).astype(np.float32)
        e16, M16 = weight_store(x)
        e8, M8 = bfp_quantize(x, 8)
        assert e16 == e8 and (weight_narrow(M16) == M8).all()


# ---------------------------------------------------------------- TV15: properties

def test_tv15a_dot_is_exact_without_wrap():
    gen = np.random.default_rng(15)
    for mode in ("floor", "rne"):
        for _ in range(300):
            a = (gen.standard_normal(64) * np.exp2(gen.integers(-20, 20))).astype(np.float32)
            b = (gen.standard_normal(64) * np.exp2(gen.integers(-20, 20))).astype(np.float32)
            ea, Ma = bfp_quantize(a, 8, mode)
            eb, Mb = bfp_quantize(b, 8, mode)
            acc, esum, wrapped = bfp_dot(ea, Ma, eb, Mb)
            assert not wrapped
            exact = sum(Fraction(float(x)) * Fraction(float(y)) for x, y in
                        zip(bfp_dequantize(ea, Ma), bfp_dequantize(eb, Mb)))
            assert Fraction(acc) * Fraction(2) ** (esum - 266) == exact


def test_tv15b_requantization():
    e, M = bfp_quantize([-1.999, 0.5, 0.3])
    assert (e, list(M)) == (127, [-128, 32, 19])
    e2, M2 = bfp_quantize(bfp_dequantize(e, M))
    assert (e2, list(M2)) == (128, [-64, 16, 9])
    gen = np.random.default_rng(16)
    for _ in range(1000):
        x = (gen.standard_normal(8) * np.exp2(gen.integers(-20, 20))).astype(np.float32)
        e, M = bfp_quantize(x)
        e2, M2 = bfp_quantize(bfp_dequantize(e, M))
        if (M == -128).any():
            assert e2 == e + 1
        else:
            assert e2 == e and (M2 == M).all()


def test_tv15cd_error_bound_and_range():
    gen = np.random.default_rng(17)
    x = (gen.standard_normal((5000, 16)) * np.exp2(gen.integers(-30, 30, (5000, 1)))
         ).astype(np.float32)
    e, M = bfp_quantize(x)
    err = x.astype(np.float64) - bfp_dequantize(e, M)
    assert (err >= 0).all()                                 # floor never rounds up
    assert (err < np.exp2(e - 127 - 6.0)[:, None]).all()   # under one ulp of the block scale
    big = np.abs(M).max(axis=1)
    assert ((big >= 64) & (big <= 128)).all()


def test_wrap_flag_tv11():
    """The no-overflow rule A >= 2X + ceil(log2 L): 32 products of (-128)**2 need 21 bits."""
    Ma = np.full(32, -128)
    acc, esum, wrapped = bfp_dot(127, Ma, 127, Ma, A=21)
    assert (acc, wrapped) == (1 << 19, False)
    acc, _, wrapped = bfp_dot(127, Ma, 127, Ma, A=20)
    assert wrapped and acc == -(1 << 19)
    acc, _, wrapped = bfp_dot(127, np.full(512, -128), 127, np.full(512, -128))
    assert wrapped and acc == -(1 << 23)
    assert bfp_dot(127, np.full(511, -128), 127, np.full(511, -128))[2] is False


# ---------------------------------------------------------------- bf16 conversion

def test_f32_to_bf16_against_ml_dtypes():
    """>= 1 M FP32 values: random bit patterns, ties, subnormals and values near overflow.
    ml_dtypes rounds subnormals into bf16 subnormals and overflows to Inf; the model flushes
    subnormal inputs to a signed zero and saturates; both are handled explicitly below."""
    gen = np.random.default_rng(2026)
    n = 1 << 20
    bits = gen.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    ties = (gen.integers(0, 1 << 16, n // 8, dtype=np.uint64).astype(np.uint32) << 16) | 0x8000
    near = (gen.integers(0, 2, n // 16).astype(np.uint32) << 31) | 0x7F7F0000 | \
        gen.integers(0, 1 << 16, n // 16).astype(np.uint32)
    sub = gen.integers(0, 1 << 23, n // 16).astype(np.uint32) | \
        (gen.integers(0, 2, n // 16).astype(np.uint32) << 31)
    allbits = np.concatenate([bits, ties, near, sub])
    finite = ((allbits >> 23) & 0xFF) != 0xFF
    allbits = allbits[finite]
    assert allbits.size >= 1_000_000
    x = allbits.view(np.float32)
    got = f32_to_bf16(x).astype(np.uint32)
    ref = x.astype(ml_dtypes.bfloat16).view(np.uint16).astype(np.uint32)
    sign = (allbits >> 31) << 15
    subnormal = ((allbits >> 23) & 0xFF) == 0
    overflow = ((ref & 0x7FFF) == 0x7F80)
    assert (got[subnormal] == sign[subnormal]).all()
    assert (got[overflow] == (sign[overflow] | 0x7F7F)).all()
    rest = ~subnormal & ~overflow
    assert (got[rest] == ref[rest]).all()
    assert overflow.sum() > 1000 and subnormal.sum() > 1000


def test_bf16_round_trip():
    h = np.arange(0, 1 << 16, dtype=np.uint32)
    h = h[((h >> 7) & 0xFF) != 0xFF].astype(np.uint16)        # finite values
    normal = ((h >> 7) & 0xFF) != 0
    assert (f32_to_bf16(bf16_to_f32(h))[normal] == h[normal]).all()


# ---------------------------------------------------------------- bad input

@pytest.mark.parametrize("call, match", [
    (lambda: bfp_quantize([1.0, np.inf]), "non-finite"),
    (lambda: bfp_quantize([np.nan]), "non-finite"),
    (lambda: f32_to_bf16(np.float32(-np.inf)), "non-finite"),
    (lambda: bfp_quantize([1.0], m=1), "m = 1"),
    (lambda: bfp_quantize([1.0], m=17), "m = 17"),
    (lambda: bfp_quantize([1.0], rounding="nearest"), "rounding"),
    (lambda: bfp_quantize([1.0], rounding="stoch"), "needs rand"),
    (lambda: bfp_quantize([1.0, 2.0], rounding="stoch", rand=[1, 1 << 16]), "rand values"),
    (lambda: bfp_quantize(1.0), "scalar"),
    (lambda: bfp_dot(127, [1], 127, [1], A=1), "A = 1"),
    (lambda: bfp_dot(127, [200], 127, [1]), "outside"),
    (lambda: bfp_dot(127, [1, 2], 127, [1]), "different lengths"),
    (lambda: acc_to_bf16(1, 600), "esum"),
    (lambda: acc_to_bf16(1 << 30, 300, A=24), "outside"),
    (lambda: hbfp_matmul(np.ones(4), np.ones((4, 2)), 4), "2-D"),
    (lambda: hbfp_matmul(np.ones((2, 4)), np.ones((4, 2)), 0), "T = 0"),
    (lambda: hbfp_matmul(np.ones((2, 4)), np.ones((4, 2)), 4, A=99), "A = 99"),
])
def test_bad_input(call, match):
    with pytest.raises(HBFPInputError, match=match):
        call()

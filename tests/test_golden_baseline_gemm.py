"""The training GEMMs on FAST's Table IV MAC lanes (golden.baseline.gemm): the compiled and BLAS
paths give the reference's bits on random bit patterns of every lane format (zeros, subnormals
read as zero, the largest mantissas, exponent extremes, Inf/NaN operands, mixed formats), the
integer accumulators wrap as a 32-bit register does, and the quantizers give convert_float's
bits and the documented scales."""

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from kernelutil import examples

from golden.baseline.gemm import (GemmInputError, fast_path, float_gemm, float_gemm_reference,
                                  float_quantize, int_gemm, int_gemm_reference, int_quantize)
from golden.common import wrap
from golden.common.formats import format_named
from golden.common.jit import numba
from golden.common.rounding import convert_float

FLOATS = ("hfp8", "e4m3", "e5m2", "fp16")


def float_patterns(rng, shape, f, regime):
    """Random bit patterns of ``f``: anywhere, only finite, or biased to zeros, subnormals
    and the largest mantissas and exponents."""
    b = rng.integers(0, 1 << f.width, shape)
    if regime == "any":
        return b
    e = (b >> f.man_bits) & f.exp_max
    b = np.where(e == f.exp_max, b ^ (1 << f.man_bits), b)        # finite
    if regime == "edges":
        pick = rng.integers(0, 4, shape)
        sign = b & (1 << (f.width - 1))
        top = ((f.exp_max - 1) << f.man_bits) | ((1 << f.man_bits) - 1)
        sub = rng.integers(0, 1 << f.man_bits, shape)
        b = np.choose(pick, [b, sign, sign | sub, sign | top])
    return b


@st.composite
def float_case(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    fx, fy = (format_named(draw(st.sampled_from(FLOATS))) for _ in range(2))
    M, K, N = draw(st.integers(1, 9)), draw(st.integers(1, 40)), draw(st.integers(1, 9))
    regime = draw(st.sampled_from(["finite", "edges", "any"]))
    return (float_patterns(rng, (M, K), fx, regime), fx,
            float_patterns(rng, (K, N), fy, regime), fy)


def test_the_float_gemm_gives_the_reference_bits(effort):
    @examples(effort)
    @given(case=float_case())
    def check(case):
        x, fx, y, fy = case
        ref = float_gemm_reference(x, fx, y, fy)
        out = float_gemm(x, fx, y, fy)
        assert out.dtype == np.uint32 and out.shape == ref.shape
        assert np.array_equal(out, ref), (np.argwhere(out != ref)[:3], fx.name, fy.name)

    check()


@pytest.mark.skipif(numba is None, reason="numba is not installed")
def test_the_lane_formats_take_the_compiled_loop():
    """The fast path's conditions hold for every training format pair (so the property test
    above exercises the compiled loop), and fail where a product could leave FP32's normal
    range (bf16) or the sums could overflow."""
    for fx in FLOATS:
        for fy in FLOATS:
            assert fast_path(fx, fy, 4608)
    assert not fast_path("bf16", "bf16", 16)
    assert not fast_path("fp16", "fp16", 1 << 100)


def test_the_float_gemm_rounds_once_per_mac():
    """fp16 products 2**28, 2**-10 and -2**28, whose exact sum is 2**-10: in K order the lane
    rounds 2**28 + 2**-10 to 2**28 (the small product is below half an ulp), then cancels to
    +0."""
    f = format_named("fp16")
    two14, one, tiny = (29 << 10), (15 << 10), (5 << 10)        # 2**14, 1.0, 2**-10
    x = np.array([[two14, tiny, two14]])
    y = np.array([[two14], [one], [two14 | 0x8000]])
    for gemm in (float_gemm, float_gemm_reference):
        out = gemm(x, f, y, f).view(np.float32)[0, 0]
        assert out == 0.0 and not np.signbit(out)
    # cancelling first keeps it: 2**28 - 2**28 = +0, then + 2**-10
    out = float_gemm(x[:, [0, 2, 1]], f, y[[0, 2, 1]], f).view(np.float32)[0, 0]
    assert out == np.float32(2.0**-10)


@st.composite
def int_case(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    f = format_named(draw(st.sampled_from(["int8", "int12"])))
    M, K, N = draw(st.integers(1, 8)), draw(st.integers(1, 700)), draw(st.integers(1, 8))
    extreme = draw(st.booleans())
    lo = 1 << (f.bits - 1)
    if extreme:       # the most negative value everywhere: products 2**(2 bits - 2), wraps
        x = np.full((M, K), lo)
        y = np.full((K, N), lo)
        y[rng.random((K, N)) < 0.1] = (1 << f.bits) - 1            # a few -1s
    else:
        x, y = rng.integers(0, 1 << f.bits, (M, K)), rng.integers(0, 1 << f.bits, (K, N))
    return x, y, f


def test_the_int_gemm_gives_the_reference_bits_and_counts_wraps(effort):
    @examples(effort)
    @given(case=int_case())
    def check(case):
        x, y, f = case
        out, wrapped = int_gemm(x, y, f)
        assert np.array_equal(out, int_gemm_reference(x, y, f))
        # the exact sums from Python integers
        def signed(v):
            return int(v) - (1 << f.bits) if int(v) >> (f.bits - 1) else int(v)
        exact = [[sum(signed(x[m, k]) * signed(y[k, n]) for k in range(x.shape[1]))
                  for n in range(y.shape[1])] for m in range(x.shape[0])]
        exact = np.array(exact, dtype=object)
        assert np.array_equal(out, np.array([[((v + 2**31) % 2**32) - 2**31 for v in row]
                                             for row in exact], dtype=np.int64))
        assert wrapped == sum(1 for v in exact.flat if not -2**31 <= v < 2**31)

    check()


def test_an_int12_gemm_that_wraps():
    """K = 600 products of -2048 x -2048 = 2**22 sum to 600 * 2**22 > 2**31: the 32-bit
    accumulator wraps, and the count says so."""
    x = np.full((1, 600), 0x800)
    y = np.full((600, 1), 0x800)
    out, wrapped = int_gemm(x, y, "int12")
    assert wrapped == 1
    assert out[0, 0] == 600 * 2**22 - 2**32 == wrap(600 * 2**22, 32)[()]


def test_float_quantize_scales_by_a_power_of_two_into_the_top_binade():
    rng = np.random.default_rng(3)
    for name in FLOATS:
        f = format_named(name)
        for scale in (2.0**-30, 1e-3, 1.0, 3e4):
            x = (rng.standard_normal((7, 13)) * scale).astype(np.float32)
            bits, shift = float_quantize(x, f)
            top = f.exp_max - 1 - f.bias
            big = float(np.abs(x).max()) * 2.0**shift
            assert 2.0**top <= big < 2.0**(top + 1)
            ref = convert_float((x.astype(np.float64) * 2.0**shift).astype(np.float32)
                                .view(np.uint32).astype(np.int64), "fp32", f,
                                overflow="saturate")
            assert np.array_equal(bits, ref)
    bits, shift = float_quantize(np.zeros((2, 2), np.float32), "fp16")
    assert shift == 0 and not bits.any()
    with pytest.raises(GemmInputError, match="non-finite"):
        float_quantize(np.float32([1.0, np.inf]), "e4m3")


def test_int_quantize_maps_the_largest_magnitude_to_the_top_code():
    x = np.float32([[0.5, -1.25, 0.0], [0.3, 0.1, -0.2]])
    bits, s = int_quantize(x, "int8")
    q = np.where(bits >> 7, bits - 256, bits)
    assert s == 1.25 / 127
    assert q[0, 1] == -127
    # each value within half a step of q * s (exact rationals)
    for v, k in zip(x.flat, q.flat):
        assert abs(Fraction(float(v)) - k * Fraction(s)) <= Fraction(s) / 2
    bits, s = int_quantize(np.zeros(3, np.float32), "int12")
    assert s == 1.0 and not bits.any()


def test_bad_operands_are_refused_in_one_line():
    with pytest.raises(GemmInputError, match=r"shapes \(2, 3\) and \(2, 3\)"):
        int_gemm(np.zeros((2, 3), np.int64), np.zeros((2, 3), np.int64), "int8")
    with pytest.raises(GemmInputError, match="outside 0..255"):
        int_gemm(np.full((1, 1), 256), np.zeros((1, 1), np.int64), "int8")
    with pytest.raises(GemmInputError, match="not a float format"):
        float_gemm(np.zeros((1, 1), np.int64), "int8", np.zeros((1, 1), np.int64), "fp16")
    with pytest.raises(GemmInputError, match="int8 or int12"):
        int_gemm_reference(np.zeros((1, 1), np.int64), np.zeros((1, 1), np.int64), "int16")

"""The compiled HBFP GEMM (golden.equinox.hbfp_kernel) equals the reference hbfp_matmul bit for
bit: random shapes (K not a multiple of T), random FP32 bit patterns (zeros, subnormals, the
largest and smallest exponents, the largest mantissas), sums near 2**-126 and near the largest
bfloat16, every deterministic rounding, accumulators that wrap, and the three training phases
of the hbfp8 and hbfp12 formats."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from kernelutil import examples

from golden.equinox import hbfp_kernel
from golden.equinox.hbfp import HBFPInputError, bfp_quantize, hbfp_matmul
from golden.equinox.hbfp_kernel import bfp_quantize_fast, hbfp_matmul_fast

pytestmark = pytest.mark.skipif(not hbfp_kernel.available(), reason="numba is not installed")


@st.composite
def fp32_matrix(draw, shape):
    """float32 values of ``shape`` from one of several exponent regimes: random finite bit
    patterns, a narrow or wide spread around a random scale, the largest mantissas at one
    exponent, or values at the bottom of the normal range; some entries zero."""
    regime = draw(st.sampled_from(["bits", "spread", "wide", "max-mantissa", "tiny", "huge"]))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    if regime == "bits":
        bits = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
        bits[((bits >> 23) & 0xFF) == 0xFF] &= 0xBFFFFFFF       # no Inf or NaN
        x = bits.view(np.float32)
    else:
        base = {"spread": rng.integers(-20, 20), "wide": rng.integers(-60, 60),
                "max-mantissa": rng.integers(-100, 100), "tiny": -125, "huge": 126}[regime]
        width = {"spread": 3, "wide": 40, "max-mantissa": 0, "tiny": 4, "huge": 1}[regime]
        e = np.clip(base + rng.integers(-width, width + 1, n), -149, 127)
        if regime == "max-mantissa":
            mant = np.full(n, 2.0 - 2.0**-23)
        else:
            mant = 1 + rng.random(n)
        x = (mant * np.ldexp(1.0, e) * rng.choice([-1, 1], n))
        x = np.clip(x, -3.4028235e38, 3.4028235e38).astype(np.float32)
    zeros = draw(st.floats(0, 0.6))
    x[rng.random(n) < zeros] = 0
    return x.reshape(shape)


@st.composite
def gemm_case(draw):
    B, K, N = (draw(st.integers(1, 24)) for _ in range(3))
    T = draw(st.sampled_from([1, 2, 3, 4, 5, 8, 16]))
    m = draw(st.integers(2, 13))
    need = (T << (2 * m - 2)).bit_length() + 1
    A = draw(st.one_of(st.just(max(24, need)), st.integers(2, 40)))
    rounding = draw(st.sampled_from(["floor", "rne", "rtz"]))
    return draw(fp32_matrix((B, K))), draw(fp32_matrix((K, N))), T, m, A, rounding


def test_the_kernel_gives_the_reference_bits(effort):
    @examples(effort)
    @given(case=gemm_case())
    def check(case):
        X, W, T, m, A, rounding = case
        ref = hbfp_matmul(X, W, T, m, A, rounding)
        fast = hbfp_matmul_fast(X, W, T, m, A, rounding)
        assert fast.dtype == ref.dtype and fast.shape == ref.shape
        assert np.array_equal(fast, ref), (np.argwhere(fast != ref)[:3], T, m, A, rounding)

    check()


def test_the_quantizer_gives_the_reference_blocks(effort):
    @examples(effort)
    @given(x=fp32_matrix((7, 13)), m=st.integers(2, 16),
           rounding=st.sampled_from(["floor", "rne", "rtz"]))
    def check(x, m, rounding):
        e, M = bfp_quantize(x, m, rounding)
        ef, Mf = bfp_quantize_fast(x, m, rounding)
        assert np.array_equal(e, ef) and np.array_equal(M, Mf) and Mf.dtype == np.int64

    check()


def _bf16_values(bits):
    return (np.asarray(bits, np.uint32) << 16).view(np.float32)


def test_partials_summing_near_the_bottom_and_the_top_of_the_range():
    """K-tiles of one element each (T = 1), whose partials sum to just below, at and just
    above 2**-126, and to the largest bfloat16 and past it: the flush and the saturation."""
    rng = np.random.default_rng(5)
    cases = []
    for hi, lo in [(0x0081, 0x8080), (0x0080, 0x8000), (0x0100, 0x8081), (0x00FF, 0x807F),
                   (0x7F7F, 0x7F7F), (0x7F7F, 0x7B00), (0xFF7F, 0x7F00), (0x0080, 0x0080),
                   (0x8080, 0x0080), (0x8000, 0x8000)]:
        a = _bf16_values([hi, lo, *rng.integers(0x0080, 0x0200, 4)])
        cases.append(a)
    for vals in cases:
        X = vals[None, :].astype(np.float32)
        W = np.ones((len(vals), 3), np.float32)
        for rounding in ("floor", "rne", "rtz"):
            ref = hbfp_matmul(X, W, 1, 8, 24, rounding)
            assert np.array_equal(hbfp_matmul_fast(X, W, 1, 8, 24, rounding), ref)


def test_errors_are_the_references():
    X = np.ones((2, 4), np.float32)
    for bad in (np.inf, np.nan):
        Y = X.copy()
        Y[1, 2] = bad
        with pytest.raises(HBFPInputError, match="non-finite value"):
            hbfp_matmul_fast(Y, X.T, 2)
    with pytest.raises(HBFPInputError, match="needs random bits"):
        hbfp_matmul_fast(X, X.T, 2, rounding="stoch")
    with pytest.raises(HBFPInputError, match="rounding"):
        hbfp_matmul_fast(X, X.T, 2, rounding="up")
    with pytest.raises(HBFPInputError, match="2-D"):
        hbfp_matmul_fast(X[0], X.T, 2)


@pytest.mark.parametrize("name", ["hbfp8", "hbfp12"])
def test_the_formats_three_phases_use_the_reference_bits(name):
    """HBFP.matmul (now the kernel) in fwd, bwd_data and wgrad on a layer's real shapes equals
    the reference function on the same operands."""
    from golden.common import bf16_to_float
    from flows.studies.train.formats import hbfp
    from flows.studies.train.formats.base import LayerInfo, RunInfo

    cls = hbfp.FORMATS[name]
    fmt = cls(RunInfo(layers=(LayerInfo("conv", "conv", (72, 24)),), epochs=1, iterations=1,
                      seed=0))
    rng = np.random.default_rng(1)
    A = np.maximum(rng.standard_normal((50, 72)), 0).astype(np.float32)
    W = (0.1 * rng.standard_normal((72, 24))).astype(np.float32)
    G = (1e-3 * rng.standard_normal((50, 24))).astype(np.float32)
    for x, y, phase in ((A, W, "fwd"), (G, np.ascontiguousarray(W.T), "bwd_data"),
                        (np.ascontiguousarray(A.T), G, "wgrad")):
        got = fmt.matmul(x, y, phase, "conv")
        want = np.asarray(bf16_to_float(hbfp_matmul(x, y, fmt.T, fmt.m, fmt.A)))
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), phase


def test_operands_of_different_k_are_refused_by_both():
    """A K mismatch or an empty reduction is an error in the reference and the kernel alike
    (the zero padding would otherwise hide it)."""
    X = np.ones((2, 4), np.float32)
    for W in (np.ones((3, 3), np.float32), np.ones((8, 3), np.float32)):
        for f in (hbfp_matmul, hbfp_matmul_fast):
            with pytest.raises(HBFPInputError, match="same K"):
                f(X, W, 4)
    for f in (hbfp_matmul, hbfp_matmul_fast):
        with pytest.raises(HBFPInputError, match="same K >= 1"):
            f(np.ones((2, 0), np.float32), np.ones((0, 3), np.float32), 4)

"""FAST's compiled GEMM and quantizer (golden.fast.gemm_kernel) equal the reference bit for bit:
the GEMM on random quantized operands (every fMAC width, both fMAC modes, every dataflow and
array tiling, shared exponents from 0 to 254, so that rounds flush to zero, overflow to infinity
and cancel to NaN), the quantizer on random FP32 bit patterns with every rounding and width,
and the operands of the three phases with their stochastic rounding's LFSR draws."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from kernelutil import examples

from golden.fast import gemm_kernel
from golden.fast.gemm_kernel import (gemm_quantized_fast, quantize_groups_fast,
                                     quantize_operands_fast)
from golden.fast.numerics import (FastInputError, LaneRNG, Quantized, bfp_quantize_groups,
                                  gemm_quantized, quantize_operands)

pytestmark = pytest.mark.skipif(not gemm_kernel.available(), reason="numba is not installed")


def quantized(rng, rows, groups, m, regime):
    """Random groups of ``m``-bit magnitudes; ``regime`` picks the shared exponents: around
    the middle of the range, anywhere in 0..254, or at either end."""
    lo, hi = {"middle": (110, 140), "any": (0, 254), "low": (0, 12), "high": (242, 254)}[regime]
    Es = rng.integers(lo, hi + 1, (rows, groups))
    signs = rng.integers(0, 2, (rows, groups, 16))
    q = rng.integers(0, 1 << m, (rows, groups, 16))
    q[rng.random(q.shape) < rng.random()] = 0
    return Quantized(Es, signs, q, m)


@st.composite
def gemm_case(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    M, N, groups = draw(st.integers(1, 20)), draw(st.integers(1, 20)), draw(st.integers(1, 9))
    mx, my = draw(st.sampled_from([2, 4, 6, 8])), draw(st.sampled_from([2, 4, 6, 8]))
    rx, ry = (draw(st.sampled_from(["middle", "any", "low", "high"])) for _ in range(2))
    array = draw(st.one_of(st.none(), st.tuples(st.integers(1, 4), st.integers(1, 4))))
    return (quantized(rng, M, groups, mx, rx), quantized(rng, N, groups, my, ry),
            draw(st.sampled_from(["fwd", "bwd_data", "wgrad"])),
            draw(st.sampled_from(["paper", "exact"])), array)


def test_the_gemm_kernel_gives_the_reference_bits(effort):
    @examples(effort)
    @given(case=gemm_case())
    def check(case):
        xq, yq, dataflow, mode, array = case
        ref = gemm_quantized(xq, yq, dataflow, mode, array)
        fast = gemm_quantized_fast(xq, yq, dataflow, mode, array)
        assert fast.dtype == ref.dtype and fast.shape == ref.shape
        assert np.array_equal(fast, ref), (np.argwhere(fast != ref)[:3], dataflow, mode, array)

    check()


def test_the_gemm_kernel_across_blocks_of_groups(monkeypatch):
    """Groups taken a few at a time (a tiny block budget) give the same bits, tiles that
    straddle blocks included."""
    rng = np.random.default_rng(3)
    xq, yq = quantized(rng, 7, 11, 4, "middle"), quantized(rng, 5, 11, 4, "middle")
    ref = gemm_quantized(xq, yq, "fwd", "paper", (2, 3))
    monkeypatch.setattr(gemm_kernel, "BLOCK_BYTES", 7 * 5 * 4 * 4 * 2)
    assert np.array_equal(gemm_quantized_fast(xq, yq, "fwd", "paper", (2, 3)), ref)


def test_the_quantizer_gives_the_reference_groups(effort):
    @examples(effort)
    @given(seed=st.integers(0, 2**32 - 1), m=st.integers(1, 23),
           rounding=st.sampled_from(["trunc", "sr", "rne"]), narrow=st.booleans())
    def check(seed, m, rounding, narrow):
        rng = np.random.default_rng(seed)
        bits = rng.integers(0, 2**32, (9, 16), dtype=np.uint64).astype(np.uint32)
        bits[((bits >> 23) & 0xFF) == 0xFF] &= 0xBFFFFFFF                  # finite
        if narrow:                                                       # close exponents
            e = np.clip(rng.integers(-4, 5, bits.shape) + rng.integers(1, 254), 0, 254)
            bits = (bits & 0x807FFFFF) | (e.astype(np.uint32) << 23)
        bits[rng.random(bits.shape) < 0.2] = 0
        rand = rng.integers(0, 256, bits.shape) if rounding == "sr" else None
        ref = bfp_quantize_groups(bits.view(np.float32), m, rounding, rand)
        fast = quantize_groups_fast(bits, m, rounding, rand)
        for a, b in zip(ref, fast):
            assert np.array_equal(a, b)

    check()


@pytest.mark.parametrize("dataflow", ["fwd", "bwd_data", "wgrad"])
def test_the_operands_and_their_draws_are_the_references(dataflow):
    rng = np.random.default_rng(5)
    X = (rng.standard_normal((21, 37)) * np.exp(rng.normal(0, 4, (21, 37)))).astype(np.float32)
    Y = rng.standard_normal((37, 6)).astype(np.float32)
    X[3, :5] = 0
    X[4, 7] = 1e-41                                                      # subnormal
    for mx, my in ((4, 4), (2, 4), (4, 2)):
        r_ref, r_fast = LaneRNG(), LaneRNG()
        ref = quantize_operands(X, Y, mx, my, dataflow, rng=r_ref)
        fast = quantize_operands_fast(X, Y, mx, my, dataflow, rng=r_fast)
        for a, b in zip(ref, fast):
            assert a.m == b.m
            for field in ("Es", "signs", "q"):
                assert np.array_equal(getattr(a, field), getattr(b, field)), field
        assert np.array_equal(r_ref.draws(2), r_fast.draws(2))        # the same LFSR position


def test_errors_are_the_references():
    X = np.ones((3, 20), np.float32)
    Y = np.ones((20, 2), np.float32)
    bad = X.copy()
    bad[1, 4] = np.inf
    with pytest.raises(FastInputError, match="finite FP32"):
        quantize_operands_fast(bad, Y, 4, 4)
    with pytest.raises(FastInputError, match="shapes"):
        quantize_operands_fast(X, Y[:5], 4, 4)
    xq, yq = quantize_operands_fast(X, Y, 4, 4)
    with pytest.raises(FastInputError, match="mode"):
        gemm_quantized_fast(xq, yq, mode="fast")
    with pytest.raises(FastInputError, match="dataflow"):
        gemm_quantized_fast(xq, yq, dataflow="back")


def test_inputs_the_reference_refuses_or_handles_apart():
    """Non-finite groups, bad random values, magnitudes wider than m, empty reductions and
    narrow unsigned exponents: the kernel gives the reference's error or result."""
    ok = np.ones((2, 16), np.float32).view(np.uint32).copy()
    inf = ok.copy()
    inf[0, 3] = 0x7F800000
    with pytest.raises(FastInputError):
        quantize_groups_fast(inf, 4, "trunc")
    for rand in (np.full((2, 16), 256), np.full((2, 16), -1), np.full((2, 16), 3.0),
                 np.zeros((2, 8), np.int64), None):
        with pytest.raises(FastInputError):
            quantize_groups_fast(ok, 4, "sr", rand)
    wide = Quantized(np.array([[120]]), np.zeros((1, 1, 16), np.int64),
                     np.full((1, 1, 16), 4000), 8)
    with pytest.raises(ValueError):
        gemm_quantized_fast(wide, wide, "fwd", "exact")
    empty = Quantized(np.zeros((2, 0), np.int64), np.zeros((2, 0, 16), np.int64),
                      np.zeros((2, 0, 16), np.int64), 4)
    assert np.array_equal(gemm_quantized_fast(empty, empty), gemm_quantized(empty, empty))
    # uint8 exponents: the exponent arithmetic is done in int64 in both
    xq = Quantized(np.array([[1]], np.uint8), np.zeros((1, 1, 16), np.int64),
                   np.full((1, 1, 16), 3), 8)
    yq = Quantized(np.array([[200]], np.uint8), np.zeros((1, 1, 16), np.int64),
                   np.full((1, 1, 16), 3), 8)
    for mode in ("paper", "exact"):
        ref = gemm_quantized(xq, yq, "fwd", mode)
        assert ref[0, 0] == 0x21900000       # 16 * 3 * 3 * 2**((1 - 6 - 128) + (200 - 6 - 128))
        assert np.array_equal(gemm_quantized_fast(xq, yq, "fwd", mode), ref)


@pytest.mark.parametrize("group", [8, 32, 5])
def test_other_group_sizes_give_the_reference_bits(group):
    """The software study's group sizes: the quantized rows (with the SR draws of
    group_draws: ceil(g / 16) draws per group, the first g values) and the GEMM in both fMAC
    modes equal the reference; group 16 draws exactly one LFSR row per group."""
    from golden.fast.gemm_kernel import quantize_rows_fast
    from golden.fast.numerics import group_draws, quantize_rows

    rng = np.random.default_rng(group)
    X = (rng.standard_normal((7, 45)) * np.exp(rng.normal(0, 3, (7, 45)))).astype(np.float32)
    Y = rng.standard_normal((9, 45)).astype(np.float32)
    for rounding in ("trunc", "sr", "rne"):
        r_ref, r_fast = LaneRNG(), LaneRNG()
        ref = quantize_rows(X, 3, rounding, r_ref, group=group)
        fast = quantize_rows_fast(X, 3, rounding, r_fast, group=group)
        assert ref.q.shape == (7, -(-45 // group), group)
        for field in ("Es", "signs", "q"):
            assert np.array_equal(getattr(ref, field), getattr(fast, field)), (rounding, field)
        assert np.array_equal(r_ref.draws(1), r_fast.draws(1))
    xq = quantize_rows(X, 4, "trunc", group=group)
    yq = quantize_rows(Y, 4, "trunc", group=group)
    for mode in ("paper", "exact"):
        assert np.array_equal(gemm_quantized_fast(xq, yq, "wgrad", mode),
                              gemm_quantized(xq, yq, "wgrad", mode))
    a, b = LaneRNG(), LaneRNG()
    assert np.array_equal(group_draws(a, 3, 16), b.draws(3))
    two = group_draws(a, 2, 20)
    assert two.shape == (2, 20) and np.array_equal(two[1, :16], b.draws(3)[2])


def test_a_group_size_out_of_range_is_refused():
    from golden.fast.numerics import quantize_rows

    with pytest.raises(FastInputError, match="group size in 1..256"):
        quantize_rows(np.ones((2, 4), np.float32), 4, group=0)

"""Golden QM, QE and BitWave transforms (spec docs/specs/gecko.md §1–§3, vectors §8.1–§8.9)."""

import math
from fractions import Fraction

import numpy as np
import pytest

from golden import ConfigError
from golden.common import BF16, FP32, fields, float_to_fp32, fp32_to_float
from golden.gecko.schrodinger import (
    BitWave, BitWaveConfig, bitwave_quantize, bwe_clamp, bwe_exp_bits, bwe_range, qe_bounds,
    qe_chain, qe_clamp, qe_grad, qe_indicators, qm_delta, qm_grad, select_bits,
    tensor_weights, truncate_mantissa,
)


def b32(v):
    return int(float_to_fp32(np.float32(v)))


def exact(bits, fmt=FP32):
    """Exact rational value of a finite bit pattern (independent of NumPy floats)."""
    s, e, m = fields(int(bits), fmt)
    if e == 0:
        v = Fraction(m, 1 << fmt.man_bits) * Fraction(2) ** (1 - fmt.bias)
    else:
        v = (1 + Fraction(m, 1 << fmt.man_bits)) * Fraction(2) ** (e - fmt.bias)
    return -v if s else v


# ---------------------------------------------------------------- §8.1 fields


@pytest.mark.parametrize("x, bits, S, E, M", [
    (1.0, 0x3F800000, 0, 127, 0), (-0.15625, 0xBE200000, 1, 124, 0x200000),
    (1.7, 0x3FD9999A, 0, 127, 0x59999A), (8.0, 0x41000000, 0, 130, 0),
    (-0.0, 0x80000000, 1, 0, 0),
])
def test_field_extraction(x, bits, S, E, M):
    assert b32(x) == bits
    assert tuple(int(v) for v in fields(bits, FP32)) == (S, E, M)


# ---------------------------------------------------------------- §8.2 truncation (eq. 5)


@pytest.mark.parametrize("n, out", [(0, 0x3F800000), (1, 0x3FC00000), (2, 0x3FC00000),
                                    (3, 0x3FD00000), (23, 0x3FD9999A)])
def test_truncate_17(n, out):
    assert truncate_mantissa(0x3FD9999A, n) == out


def test_truncate_negative_toward_zero():
    r = truncate_mantissa(0xBDCCCCCD, 4)
    assert r == 0xBDC80000 and exact(r) == Fraction(-0.09765625)
    assert abs(exact(r)) <= abs(exact(0xBDCCCCCD))


def test_truncate_vectorized_against_rational_floor():
    rng = np.random.default_rng(0)
    for fmt, name in ((FP32, "fp32"), (BF16, "bf16")):
        x = rng.integers(0, 1 << fmt.width, 400, dtype=np.uint64).astype(fmt.dtype)
        x = x[(x.astype(np.int64) >> fmt.man_bits & 0xFF) != 0xFF]
        for n in (0, 1, 3, fmt.man_bits):
            out = truncate_mantissa(x, n, name)
            assert out.dtype == fmt.dtype
            for xi, oi in zip(x[:60], out[:60]):
                s, e, _ = fields(int(xi), fmt)
                ulp = Fraction(2) ** (max(e, 1) - fmt.bias - n)
                v = abs(exact(xi, fmt))
                kept = (v // ulp) * ulp if e else v - v % ulp
                assert abs(exact(oi, fmt)) == kept


def test_truncate_errors():
    with pytest.raises(ValueError, match="24"):
        truncate_mantissa(0x3F800000, 24)
    with pytest.raises(ValueError, match="8"):
        truncate_mantissa(np.zeros(2, np.uint16), 8, "bf16")
    with pytest.raises(ValueError, match="0x7f800000"):
        truncate_mantissa(0x7F800000, 3)
    with pytest.raises(ValueError, match="uint16"):
        truncate_mantissa(np.zeros(2, np.uint16), 3, "fp32")


# ---------------------------------------------------------------- §8.3 stochastic bitlength


@pytest.mark.parametrize("n, u, out", [(2.3, 0.25, 3), (2.3, 0.2999, 3), (2.3, 0.5, 2),
                                       (2.0, 0.0, 2), (0.7, 0.69, 1)])
def test_select_bits_vectors(n, u, out):
    assert select_bits(n, u) == out


def test_select_bits_mean():
    u = np.random.default_rng(42).random(100_000)
    for n in (2.3, 0.7, 5.5):
        assert abs(select_bits(n, u).mean() - n) < 0.01


def test_select_bits_errors():
    with pytest.raises(ValueError):
        select_bits(-0.5, 0.1)
    with pytest.raises(ValueError):
        select_bits(1.5, 1.0)


# ---------------------------------------------------------------- §8.4 QE bounds


def test_qe_bounds():
    vmin, vmax = qe_bounds(3)
    assert vmin == 0.0625 and b32(vmax) == 0x41FFFFFF and np.float32(vmax) == vmax
    vmin, vmax = qe_bounds(1)
    assert vmin == 0.5 and vmax == float(np.float32(3.9999998))
    vmin, vmax = qe_bounds(7)
    assert vmin == 2.0 ** -64 and abs(vmax - 3.689e19) < 1e16


# ---------------------------------------------------------------- §8.5, §8.6 R and indicators

R_IN = [0.03125, 0.03, 0.05, 0.0625, 0.07, -0.04, -0.03125, -0.02, 31.9, 32.0, 100, -100, 0]
R_OUT = [b32(0.0625), 0, b32(0.0625), b32(0.0625), 0x3D8F5C29, b32(-0.0625), b32(-0.0625), 0,
         b32(31.9), 0x41FFFFFF, 0x41FFFFFF, 0xC1FFFFFF, 0]


def test_qe_clamp_vectors():
    x = np.array([b32(v) for v in R_IN], dtype=np.uint32)
    assert [int(v) for v in qe_clamp(x, 3)] == R_OUT
    for xi, oi in zip(x, R_OUT):
        assert qe_clamp(int(xi), 3) == oi


def test_qe_indicator_vectors():
    x = np.array([b32(v) for v in R_IN], dtype=np.uint32)
    dv, dmax, dmin = qe_indicators(x, 3)
    assert dv.tolist() == [1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 1]
    assert dmax.tolist() == [0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, -1, 0]
    assert dmin.tolist() == [1, -1, 1, 0, 0, -1, -1, 1, 0, 0, 0, 0, 0]


def r_oracle(v: Fraction, vmin: Fraction, vmax: Fraction, out_min: int, out_max: int) -> Fraction:
    """Eq. 7 written interval by interval on exact rationals."""
    if v < -vmax:
        return -exact(out_max)
    if v <= -vmin:
        return v
    if v <= -vmin / 2:
        return -exact(out_min)
    if v < vmin / 2:
        return Fraction(0)
    if v < vmin:
        return exact(out_min)
    if v <= vmax:
        return v
    return exact(out_max)


@pytest.mark.parametrize("n_e", range(0, 9))
def test_qe_clamp_against_rational_oracle(n_e):
    rng = np.random.default_rng(n_e)
    vmin, vmax = (Fraction(v) for v in qe_bounds(n_e))
    out_min = b32(float(vmin))
    out_max = b32(min(float(vmax), 3.4028234663852886e38)) if n_e < 8 else 0x7F7FFFFF
    # boundary values (each threshold and its neighbours) plus random exponents near the range
    edges = []
    for t in (vmin / 2, vmin, vmax):
        if t < Fraction(2) ** 128:
            c = b32(float(t))
            edges += [c - 1, c, c + 1]
    E = np.clip(127 + rng.integers(-140, 140, 300), 0, 254)
    rnd = ((E << 23) | rng.integers(0, 1 << 23, 300)).tolist()
    mags = [m for m in edges + rnd if 0 <= m < 0x7F800000]
    x = np.array(mags + [m | 0x80000000 for m in mags], dtype=np.uint32)
    out = qe_clamp(x, n_e)
    for xi, oi in zip(x, out):
        want = r_oracle(exact(xi), vmin, vmax, out_min, out_max)
        assert exact(oi) == want, (n_e, hex(int(xi)))
        if want == 0:
            assert oi == 0                  # flushed values are +0.0 (A26)


def test_qe_clamp_bf16_and_errors():
    x = (np.array([b32(v) for v in R_IN], dtype=np.uint32) >> 16).astype(np.uint16)
    out = qe_clamp(x, 3, "bf16")
    assert out.dtype == np.uint16
    assert int(out[9]) == 0x41FF and int(out[1]) == 0 and int(out[0]) == b32(0.0625) >> 16
    with pytest.raises(ValueError, match="9"):
        qe_clamp(0, 9)
    with pytest.raises(ValueError, match="0x7fc00000"):
        qe_clamp(0x7FC00000, 3)


# ---------------------------------------------------------------- §8.7, §8.8 gradients


@pytest.mark.parametrize("x, k, d", [(0x3FD9999A, 2, 0.125), (0xBDCCCCCD, 4, -0.001953125),
                                     (b32(0.1), 0, 0.03125)])
def test_qm_delta_vectors(x, k, d):
    assert qm_delta(x, k) == d
    diff = exact(truncate_mantissa(x, k + 1)) - exact(truncate_mantissa(x, k))
    assert Fraction(qm_delta(x, k)) == diff


def test_qm_delta_matches_truncation_difference():
    rng = np.random.default_rng(1)
    sign = rng.integers(0, 2, 200, dtype=np.uint32) << 31
    x = rng.integers(0, 0x7F800000, 200, dtype=np.uint32) | sign
    x[:10] &= 0x807FFFFF                                   # subnormals
    for k in (0, 5, 22, 23):
        d = qm_delta(x, k)
        if k == 23:
            assert not d.any()
            continue
        diff = fp32_to_float(truncate_mantissa(x, k + 1)).astype(np.float64) - \
            fp32_to_float(truncate_mantissa(x, k)).astype(np.float64)
        assert np.array_equal(d, diff)


def test_qm_grad():
    x = np.array([0x3FD9999A, 0xBDCCCCCD], dtype=np.uint32)
    g = np.array([2.0, -1.0])
    # k = floor(2.6) = 2: deltas 0.125 and bit 3 of -0.1's mantissa (0x4CCCCD -> bit = 0)
    want = 0.1 * 0.5 + 2.0 * qm_delta(0x3FD9999A, 2) - 1.0 * qm_delta(0xBDCCCCCD, 2)
    assert qm_grad(x, g, 2.6, gamma=0.1, lam=0.5) == want


def test_qe_chain_vectors():
    cmax, cmin = qe_chain(3)
    assert math.isclose(cmax, 61.497982, rel_tol=1e-7)
    assert math.isclose(cmin, -0.1201133, rel_tol=1e-6)
    cmax, cmin = qe_chain(4)
    assert math.isclose(cmax, 1967.9354, rel_tol=1e-7)
    assert math.isclose(cmin, -0.0150142, rel_tol=1e-5)


def test_qe_grad():
    x = np.array([b32(v) for v in R_IN], dtype=np.uint32)
    g = np.linspace(-1, 1, x.size)
    dn, dx = qe_grad(x, g, 3, gamma=0.1, lam=0.25)
    dv, dmax, dmin = qe_indicators(x, 3)
    cmax, cmin = qe_chain(3)
    assert math.isclose(dn, 0.025 + (g * dmax).sum() * cmax + (g * dmin).sum() * cmin)
    assert np.array_equal(dx, g * dv)


def test_tensor_weights():
    lam = tensor_weights([100, 300])
    assert lam.tolist() == [0.25, 0.75]
    with pytest.raises(ValueError):
        tensor_weights([])


# ---------------------------------------------------------------- §8.9 BitWave


def feed(bw, losses):
    for v in losses:
        bw.step(v)
    return bw.n_m, bw.k


def test_bitwave_slope_decisions():
    bw = BitWave(BitWaveConfig(history=4, threshold=0.1))
    assert feed(bw, [4, 3, 2]) == (23, 0)          # warm-up: no change
    assert feed(bw, [1]) == (22, 1)                # slope -1 < -T: shorten, shrink
    bw = BitWave(BitWaveConfig(history=4, threshold=0.1))
    assert feed(bw, [1, 1, 1, 1]) == (23, 0)       # slope 0: hold
    from golden.gecko.schrodinger import ols_slope
    assert ols_slope([4, 3, 2, 1]) == -1.0 and ols_slope([1, 1, 1, 1]) == 0.0
    assert ols_slope([2.0, 2.5, 1.5, 2.0, 1.0]) == -0.25


def test_bitwave_bounds_and_widen():
    bw = BitWave(BitWaveConfig(fmt="bf16"))
    feed(bw, list(range(400, 0, -1)))             # falling loss for a long time
    assert bw.n_m == 0 and bw.k == 126
    assert bw.exp_range == (0, 1) and bw.exp_bits == 2
    feed(bw, list(range(0, 400)))                 # rising loss
    assert bw.n_m == 7 and bw.k == 0


def test_bwe_exp_bits():
    for k, bits in ((0, 8), (64, 7), (96, 6), (112, 5), (120, 4), (124, 3), (126, 2)):
        lo, hi = bwe_range(k)
        assert bwe_exp_bits(k) == bits == math.ceil(math.log2(hi - lo + 2))


def test_bitwave_fix_averages():
    bw = BitWave(BitWaveConfig(history=2, threshold=0.1, fix_epoch=2))
    feed(bw, [5, 4, 3])                           # used n_m: 23, 23, 22 ; k: 0, 0, 1
    bw.end_epoch()
    assert not bw.fixed
    bw.end_epoch()
    assert bw.fixed and bw.n_m == math.ceil((23 + 23 + 22) / 3) and bw.k == (0 + 0 + 1) // 3
    assert feed(bw, [9, 1, 9]) == (bw.n_m, bw.k)


def test_bwe_clamp_and_quantize():
    lo, hi = bwe_range(124)                       # [-2, 3]
    x = np.array([b32(v) for v in (1.0, 0.25, 0.2, 8.0, 15.9, 16.0, -100.0, 0.0, -0.0, 1e-40)],
                 dtype=np.uint32)
    out = bwe_clamp(x, 124)
    sat = exact(0x417FFFFF)                       # (2 - 2^-23) * 2^3
    assert sat == (2 - Fraction(1, 1 << 23)) * 2 ** hi
    want = [Fraction(1), Fraction(1, 4), Fraction(0), Fraction(8), exact(b32(15.9)), sat, -sat,
            Fraction(0), Fraction(0), Fraction(0)]
    assert [exact(v) for v in out] == want
    assert int(out[8]) == 0 and int(out[2]) == 0  # flushed to +0.0
    q = bitwave_quantize(x, 1, 124)
    assert np.array_equal(q, truncate_mantissa(out, 1))


def test_bitwave_config_errors():
    with pytest.raises(ConfigError) as e:
        BitWaveConfig(history=1)
    assert e.value.field == "history"
    with pytest.raises(ConfigError) as e:
        BitWaveConfig(threshold=-1.0)
    assert e.value.field == "threshold"

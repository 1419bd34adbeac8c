"""FAST Table II's other formats (``int8``, ``int12``, ``hfp8``, ``fp16``, ``mid-bfp``, ``msfp12``
and the ``hfp8-e4m2`` ablation): every GEMM of the three phases equals the golden reference
composed here (the quantizer, the lanes' or the fMAC's reference GEMM, the scales undone), on
shapes whose reduction is not a multiple of 16, with zeros and values spread over decades;
the records count what they say they count."""

import zlib

import numpy as np
import pytest

from flows.studies.train.formats import ABLATIONS, FORMATS
from flows.studies.train.formats.base import PHASES, LayerInfo, RunInfo
from flows.studies.train.formats.fast import ARRAY, MSFP12, MSFP12SR, MidBFP, lane_states_for
from flows.studies.train.formats.lanes import FP16, HFP8, INT8, INT12, HFP8E4M2, LaneFormat
from golden.baseline.gemm import (float_gemm_reference, float_quantize, int_gemm_reference,
                                  int_quantize)
from golden.fast.numerics import (DEFAULT_ROUNDING, LaneRNG, Quantized, dequant,
                                  gemm_quantized, quantize_rows)

LAYERS = (LayerInfo("l1", "linear", (37, 21)),)
RUN = RunInfo(layers=LAYERS, epochs=1, iterations=2, seed=4)


def operands(rng, phase, n=19, K=37, M=21):
    """X and Y of ``phase`` for one layer: activations ReLU'd and spread over decades, weights
    N(0, 1), gradients around 1e-4 with a few exact zeros."""
    a = np.maximum(rng.standard_normal((n, K)) * np.exp2(rng.integers(-6, 5, (n, K))), 0)
    w = rng.standard_normal((K, M))
    g = 1e-4 * rng.standard_normal((n, M)) * np.exp2(rng.integers(-8, 3, (n, M)))
    g[rng.random(g.shape) < 0.1] = 0
    x, y = {"fwd": (a, w), "bwd_data": (g, w.T), "wgrad": (a.T, g)}[phase]
    return np.ascontiguousarray(x, np.float32), np.ascontiguousarray(y, np.float32)


def lane_reference(fmt: LaneFormat, x, y, phase):
    fx, fy = fmt.formats(phase)
    if fx.startswith("int"):
        xb, sx = int_quantize(x, fx)
        yb, sy = int_quantize(y, fy)
        acc = int_gemm_reference(xb, yb, fx)
        return (acc.astype(np.float64) * (sx * sy)).astype(np.float32)
    xb, ex = float_quantize(x, fx)
    yb, ey = float_quantize(y, fy)
    bits = float_gemm_reference(xb, fx, yb, fy)
    return (bits.view(np.float32).astype(np.float64) * 2.0 ** -(ex + ey)).astype(np.float32)


@pytest.mark.parametrize("cls", [INT8, INT12, HFP8, FP16, HFP8E4M2])
@pytest.mark.parametrize("phase", PHASES)
def test_lane_formats_equal_the_lanes_reference(cls, phase):
    fmt = cls(RUN)
    rng = np.random.default_rng(zlib.crc32(f"{cls.name}/{phase}".encode()))
    for _ in range(3):
        x, y = operands(rng, phase)
        out = fmt.matmul(x, y, phase, "l1")
        ref = lane_reference(fmt, x, y, phase)
        assert np.array_equal(out.view(np.uint32), ref.view(np.uint32)), (cls.name, phase)
        # the quantized GEMM is close to the float one (the formats are not degenerate)
        exact = x.astype(np.float64) @ y.astype(np.float64)
        scale = np.abs(exact).max()
        assert np.abs(out - exact).max() <= 0.25 * scale


def test_hfp8_takes_e5m2_for_gradients_and_e4m3_otherwise():
    fmt = HFP8(RUN)
    assert fmt.formats("fwd") == ("e4m3", "e4m3")
    assert fmt.formats("bwd_data") == ("e5m2", "e4m3")
    assert fmt.formats("wgrad") == ("e4m3", "e5m2")
    assert HFP8E4M2(RUN).formats("wgrad") == ("hfp8", "hfp8")
    with pytest.raises(ValueError, match="unknown GEMM phase 'bwd'"):
        fmt.formats("bwd")


def test_lane_records_count_flushed_values_and_wrapped_outputs():
    """int8 on a tensor with one huge value: every other value rounds to zero (its share is
    counted); an int12 GEMM that wraps is counted as wrapped; evaluation GEMMs are not."""
    fmt = INT8(RUN)
    fmt.begin_step(1, 0)
    x = np.float32([[1000.0, 1.0, 2.0, 0.0]])
    y = np.ones((4, 1), np.float32)
    fmt.matmul(x, y, "fwd", "l1")
    rec = fmt.end_epoch(1)
    assert rec["flushed"]["fwd"] == pytest.approx(2 / 7)       # 1.0 and 2.0 of 3 + 4 non-zeros
    assert rec["flushed"]["bwd_data"] is None and rec["wrapped"]["fwd"] == 0
    fmt.matmul(x, y, "fwd", "l1")                             # outside a step: not recorded
    assert fmt.end_epoch(1)["flushed"]["fwd"] is None
    big = INT12(RUN)
    big.begin_step(1, 0)
    out = big.matmul(np.full((1, 600), -1.0, np.float32), np.full((600, 1), -1.0, np.float32),
                     "fwd", "l1")
    assert big.end_epoch(1)["wrapped"]["fwd"] == 1.0
    # 600 * 2047**2 > 2**31 wraps: the result is the wrapped sum, scaled back
    assert out[0, 0] == np.float32((600 * 2047**2 - 2**32) / 2047**2)


def test_non_finite_operands_give_nan():
    out = FP16(RUN).matmul(np.float32([[np.inf, 1.0]]), np.ones((2, 2), np.float32), "fwd", "l1")
    assert np.isnan(out).all() and out.shape == (1, 2)


def bfp_reference(fmt, x, y, phase, rng):
    """The golden composition for MidBFP / MSFP-12: the reference quantizer at 3 bits with the
    format's roundings (X's groups first), padded to 4 bits, the reference fMAC GEMM."""
    rx, ry = (fmt.roundings or DEFAULT_ROUNDING)[phase]
    xq = quantize_rows(x, 3, rx, rng)
    yq = quantize_rows(np.ascontiguousarray(y.T), 3, ry, rng)
    # padding keeps every value
    for q in (xq, yq):
        assert np.array_equal(dequant(q.Es, q.signs, q.q, 3), dequant(q.Es, q.signs, 2 * q.q, 4))
    wide = [Quantized(q.Es, q.signs, q.q << 1, 4) for q in (xq, yq)]
    return gemm_quantized(*wide, phase, fmt.fmac_mode, fmt.array).view(np.float32)


@pytest.mark.parametrize("cls", [MidBFP, MSFP12, MSFP12SR])
def test_bfp_formats_equal_the_fmac_reference(cls):
    """One training iteration (fwd, bwd_data, wgrad) twice: each GEMM equals the reference with
    the LFSR draws taken in the same order; mid-bfp on FAST's array tiling with SR gradients,
    msfp12 untiled, round to nearest, one FP32 addition per group pair."""
    fmt = cls(RUN)
    ref_rng = LaneRNG(lane_states_for(RUN.seed))
    rng = np.random.default_rng(7)
    for it in range(2):
        fmt.begin_step(1, it)
        for phase in PHASES:
            x, y = operands(rng, phase)
            out = fmt.matmul(x, y, phase, "l1")
            ref = bfp_reference(fmt, x, y, phase, ref_rng)
            assert np.array_equal(out.view(np.uint32), ref.view(np.uint32)), (cls.name, phase)
        fmt.end_step(1.0)
    rec = fmt.end_epoch(1)
    assert rec["mean_widths"]["l1"] == {"w": 3, "a": 3, "g": 3}
    assert rec["share_4bit"] is None and rec["mean_r"]["l1"]["w"] is None
    rounds = 1 if issubclass(cls, MSFP12) else 4
    assert rec["fmac_rounds"] == {p: rounds * n for p, n in rec["group_pairs"].items()}
    expect = (None, "exact") if issubclass(cls, MSFP12) else (ARRAY, "paper")
    assert (cls.array, cls.fmac_mode) == expect


def test_msfp12_rounds_to_nearest_and_mid_bfp_truncates():
    """A group whose largest value is 1 and another element 0.4: 3-bit magnitudes in quarters
    (LSB 0.25): round to nearest gives 0.5, truncation 0.25."""
    x = np.float32([[1.0, 0.4]])
    y = np.float32([[0.0], [1.0]])
    assert MSFP12(RUN).matmul(x, y, "fwd", "l1")[0, 0] == np.float32(0.5)
    assert MidBFP(RUN).matmul(x, y, "fwd", "l1")[0, 0] == np.float32(0.25)


def test_the_table_ii_formats_are_registered_in_report_order():
    names = list(FORMATS)
    for name in ("int8", "int12", "hfp8", "fp16", "mid-bfp", "msfp12"):
        assert name in names
    assert names.index("fast-low") < names.index("mid-bfp") < names.index("fast-high")
    assert "hfp8-e4m2" in ABLATIONS and "hfp8-e4m2" not in FORMATS

"""The parametric formats of ``trainfab train`` (the sweeps' ``hbfp<m>-t<T>[-w<W>]`` and
``fast-a<alpha>-b<beta>``): names parse into classes with those parameters, out-of-range
parameters are one-line errors, the variants compute what their parameters say."""

import numpy as np
import pytest

from flows import FlowError
from flows.studies.train.formats import Known, known, variant
from flows.studies.train.formats.base import LayerInfo, RunInfo
from flows.studies.train.formats.fast import FAST
from flows.studies.train.formats.hbfp import HBFP, WIDE, acc_bits, store_tiles
from flows.studies.train.run import parse_formats, parse_stop_after
from golden.equinox.hbfp_kernel import hbfp_matmul_fast
from golden.common import bf16_to_float
from golden.fast.numerics import choose_m, epsilon

RUN = RunInfo(layers=(LayerInfo("l1", "linear", (40, 24)), LayerInfo("l2", "linear", (24, 5))),
              epochs=2, iterations=3, seed=1)


def test_hbfp_variants_carry_their_parameters():
    cls = variant("hbfp6-t64")
    assert issubclass(cls, HBFP) and (cls.m, cls.block, cls.wide) == (6, 64, WIDE)
    narrow = variant("hbfp6-t64-w6")
    assert (narrow.m, narrow.block, narrow.wide) == (6, 64, 6)
    fmt = narrow(RUN)
    assert (fmt.T, fmt.A) == (64, acc_bits(6, 64))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((7, 40)).astype(np.float32)
    w = rng.standard_normal((40, 24)).astype(np.float32)
    ref = bf16_to_float(hbfp_matmul_fast(x, w, 64, 6, acc_bits(6, 64), "floor"))
    assert np.array_equal(fmt.matmul(x, w, "fwd", "l1"), np.asarray(ref))
    # the weights stored at 6 bits, not 16: coarser than the wide storage
    assert np.array_equal(fmt.store_weight(w, "l1"), store_tiles(w, 64, 6))
    assert not np.array_equal(store_tiles(w, 64, 6), store_tiles(w, 64, WIDE))
    assert fmt.summary_record() == {"m": 6, "T": 64, "A": acc_bits(6, 64), "wide": 6}


def test_fast_variants_use_their_alpha_and_beta():
    cls = variant("fast-a0.4-b0.15")
    assert issubclass(cls, FAST) and (cls.alpha, cls.beta) == (0.4, 0.15)
    fmt = cls(RUN)
    for r in (0.05, 0.2, 0.3):
        for l, i in ((1, 1), (2, 6)):
            assert fmt.choose(r, l, i) == choose_m(r, epsilon(l, i, 2, 6, 0.4, 0.15))
    assert fmt.summary_record()["algorithm"]["alpha"] == 0.4
    # the paper's constants differ from the variant's somewhere
    paper = FAST(RUN)
    assert any(paper.choose(r, 1, 1) != fmt.choose(r, 1, 1) for r in (0.3, 0.45, 0.55))


@pytest.mark.parametrize("name, match", [
    ("hbfp3-t16", "m 3 .4..16."), ("hbfp8-t0", "T 0"), ("hbfp8-t16-w4", "weight storage 4"),
    ("fast-a2.5-b0.3", "alpha 2.5 or beta 0.3 outside 0..2"),
])
def test_out_of_range_variants_are_one_line_errors(name, match):
    with pytest.raises(ValueError, match=match):
        variant(name)
    with pytest.raises(FlowError, match=match) as e:
        parse_formats(f"fp32,{name}")
    assert "\n" not in str(e.value)


def test_known_lists_the_named_formats_and_accepts_variants():
    k = known()
    assert isinstance(k, Known)
    assert "hbfp6-t64" in k and "fast-a0.5-b0.3" in k and "hbfp3-t16" not in k
    assert "hbfp6-t64" not in list(k)                  # listing gives the named formats
    assert k.get("hbfp6-t64").m == 6 and k.get("nothing") is None and k.get("hbfp3-t16") is None
    assert parse_formats("fp32,hbfp6-t64") == ("fp32", "hbfp6-t64")
    assert parse_stop_after("hbfp6-t64=1") == (("hbfp6-t64", 1),)
    with pytest.raises(FlowError, match="variants: hbfp<m>-t<T>"):
        parse_formats("hbfp8-floor")
    assert variant("bf16") is None and variant("fast-low") is None


def test_bfp_variants_at_the_hardware_group_are_the_fixed_fast_formats():
    """bfp-m2-g16 and bfp-m4-g16 give fast-low's and fast-high's bits (the same converter, the
    same LFSR draws); bfp-m3-g8 equals the golden composition with groups of 8 (SR draws per
    group_draws); bfp-m5-g32 runs on the 6-bit datapath (9 rounds per group pair)."""
    from flows.studies.train.formats.fast import FASTHigh, FASTLow, lane_states_for
    from golden.fast.numerics import (DEFAULT_ROUNDING, LaneRNG, Quantized, gemm_quantized,
                                      quantize_rows)

    rng = np.random.default_rng(5)
    a = np.maximum(rng.standard_normal((9, 40)), 0).astype(np.float32)
    w = rng.standard_normal((40, 24)).astype(np.float32)
    g = (1e-3 * rng.standard_normal((9, 24))).astype(np.float32)
    ops = {"fwd": (a, w), "bwd_data": (g, np.ascontiguousarray(w.T)),
           "wgrad": (np.ascontiguousarray(a.T), g)}
    for name, ref_cls in (("bfp-m2-g16", FASTLow), ("bfp-m4-g16", FASTHigh)):
        fmt, ref = variant(name)(RUN), ref_cls(RUN)
        fmt.begin_step(1, 0)
        ref.begin_step(1, 0)
        for phase, (x, y) in ops.items():
            assert np.array_equal(fmt.matmul(x, y, phase, "l1").view(np.uint32),
                                  ref.matmul(x, y, phase, "l1").view(np.uint32)), (name, phase)
    fmt = variant("bfp-m3-g8")(RUN)
    assert (fmt.group, fmt.fixed_m, fmt.quant_m) == (8, 3, 3)
    fmt.begin_step(1, 0)
    lanes = LaneRNG(lane_states_for(RUN.seed))
    for phase, (x, y) in ops.items():
        rx, ry = DEFAULT_ROUNDING[phase]
        xq = quantize_rows(x, 3, rx, lanes, group=8)
        yq = quantize_rows(np.ascontiguousarray(y.T), 3, ry, lanes, group=8)
        wide = [Quantized(q.Es, q.signs, q.q << 1, 4) for q in (xq, yq)]
        ref = gemm_quantized(*wide, phase, "paper", fmt.array)
        assert np.array_equal(fmt.matmul(x, y, phase, "l1").view(np.uint32), ref), phase
    five = variant("bfp-m5-g32")(RUN)
    five.begin_step(1, 0)
    five.matmul(a, w, "fwd", "l1")
    five.matmul(*ops["bwd_data"], "bwd_data", "l1")
    five.matmul(*ops["wgrad"], "wgrad", "l1")
    five.end_step(1.0)
    rec = five.end_epoch(1)
    assert rec["fmac_rounds"]["fwd"] == 9 * rec["group_pairs"]["fwd"]
    assert rec["group_pairs"]["fwd"] == 9 * 24 * 2          # K = 40 in groups of 32
    with pytest.raises(ValueError, match="group 65"):
        variant("bfp-m4-g65")


def test_a_block_larger_than_the_matrices_gives_the_same_bits_with_less_padding():
    """hbfp6-t576 on 40 x 24 weights: block_for gives 40, and the GEMM and the stored weights
    equal the golden model's at T = 576 (the real block), bit for bit."""
    fmt = variant("hbfp6-t576-w6")(RUN)
    assert fmt.block_for(40, 24) == 40 and fmt.block_for(600, 3) == 576
    rng = np.random.default_rng(8)
    x = (rng.standard_normal((5, 40)) * np.exp2(rng.integers(-5, 5, (5, 40)))).astype(np.float32)
    w = rng.standard_normal((40, 24)).astype(np.float32)
    A = acc_bits(6, 576)
    for phase, (a, b) in {"fwd": (x, w), "bwd_data": (x[:, :24], np.ascontiguousarray(w.T))
                          }.items():
        ref = bf16_to_float(hbfp_matmul_fast(a, b, 576, 6, A, "floor"))
        assert np.array_equal(fmt.matmul(a, b, phase, "l1"), np.asarray(ref)), phase
    assert np.array_equal(fmt.store_weight(w, "l1"), store_tiles(w, 576, 6))


def test_the_rne_suffix_rounds_every_gemm_to_nearest():
    cls = variant("hbfp8-t16-w8-rne")
    assert cls.rounding == {"fwd": "rne", "bwd_data": "rne", "wgrad": "rne"}
    assert variant("hbfp8-t16").rounding == HBFP.rounding
    fmt = cls(RUN)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 40)).astype(np.float32)
    w = rng.standard_normal((40, 24)).astype(np.float32)
    ref = bf16_to_float(hbfp_matmul_fast(x, w, 16, 8, acc_bits(8, 16), "rne"))
    assert np.array_equal(fmt.matmul(x, w, "fwd", "l1"), np.asarray(ref))
    assert fmt.summary_record()["rounding"]["wgrad"] == "rne"

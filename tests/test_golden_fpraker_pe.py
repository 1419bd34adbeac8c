"""Golden FPRaker PE (spec docs/specs/fpraker.md §1.2, §1.3, §3, §13) against exact rationals and
the independent scalar oracle of :mod:`bf16util`."""

import dataclasses
import random
from fractions import Fraction

import numpy as np
import pytest

from golden import ConfigError
from golden.common import bf16_to_float, float_to_bf16
from golden.fpraker import encode_terms
from golden.fpraker.pe import (Acc, PEConfig, pe_dot, pe_dot_batch, pe_dot_batch_acc, pe_group,
                               random_operands, read_out, required_int_bits)

from bf16util import bf16_value, config_label, random_bf16, ref_pe_group, ref_read_out

DEFAULT = PEConfig()
NO_OB = PEConfig(kmax=1023)


def exact_dot(a, b) -> Fraction:
    return sum((bf16_value(int(x)) * bf16_value(int(y)) for x, y in zip(a, b)), Fraction(0))


def sig_of(x: int) -> int:
    return 128 + (x & 0x7F)


def n_terms(x: int, cfg) -> int:
    return 0 if (x >> 7) & 0xFF == 0 else len(encode_terms(sig_of(x), cfg.encoding))


def acc_of(cfg, sign, exp, sig):
    return Acc(False, sign, exp, sig)


# ---------------------------------------------------------------------------------------------
# configuration

@pytest.mark.parametrize("field,value", [
    ("lanes", 0), ("keep_bits", 10), ("keep_bits", 0), ("frac_bits", 8), ("kmax", -1),
    ("kmax", 2000), ("dmax", 13), ("dmax", -1), ("int_bits", 4), ("encoding", "booth"),
    ("out_round", "rtz"), ("lanes", True),
])
def test_config_rejects(field, value):
    with pytest.raises(ConfigError) as info:
        PEConfig(**{field: value})
    assert info.value.field == field and info.value.value == value


def test_config_int_bits_follow_lanes():
    # spec §1.2/TV7: 8 lanes need 5 integer bits; 4 lanes fit in 4
    assert required_int_bits(8, 12, 9, 3) == 5
    assert required_int_bits(4, 12, 9, 3) == 4
    assert PEConfig(lanes=4, int_bits=4).int_bits == 4
    assert PEConfig(dmax=12).dmax == 12       # Fig. 3 PE


# ---------------------------------------------------------------------------------------------
# spec §13 vectors

def test_tv3_section_3a():
    acc, cycles, trace = pe_group(Acc.ZERO, [0x4081], [0x4153], DEFAULT)
    assert cycles == 2
    assert (trace[0].E, trace[0].k[0], trace[0].base) == (5, 0, 0)
    assert (trace[1].k[0], trace[1].base) == (7, 7)
    assert acc == acc_of(DEFAULT, 0, 5, 0x353)
    exact = bf16_value(0x4081) * bf16_value(0x4153)
    assert exact == Fraction(53162109375, 10 ** 9)
    assert acc.to_fraction(9) == Fraction(531875, 10 ** 4)
    # correct RNE of the exact product to 10 significant bits
    assert abs(acc.to_fraction(9) - exact) <= Fraction(2) ** (5 - 9) / 2
    assert read_out(acc, DEFAULT) == 0x4254
    assert read_out(acc, PEConfig(out_round="rne")) == 0x4255


FIG5_A = [0x40E8, 0x4058]
FIG5_B = [0x4118, 0x4050]


def test_tv4_fig5_binary_no_ob():
    cfg = PEConfig(encoding="binary", kmax=1023)
    acc, cycles, tr = pe_group(Acc.ZERO, FIG5_A, FIG5_B, cfg)
    assert cycles == 5
    assert [t.k[:2] for t in tr] == [(0, 3), (1, 4), (3, 7), (5, 7), (None, 8)]
    assert [t.E for t in tr[:3]] == [5, 5, 6]
    assert [t.processed for t in tr] == [(0, 1), (0, 1), (0,), (0, 1), (1,)]
    assert tr[3].k[1] - tr[3].base == 2 and tr[4].base == 8
    assert acc == acc_of(cfg, 0, 6, 0x27F) and acc.to_fraction(9) == Fraction(79875, 1000)
    assert exact_dot(FIG5_A, FIG5_B) == Fraction(7984375, 100000)
    assert read_out(acc, cfg) == 0x429F
    assert read_out(acc, PEConfig(encoding="binary", out_round="rne")) == 0x42A0


def test_tv4_fig5_binary_kmax6_finishes_in_4():
    # spec §3.6: with a 6-bit accumulator threshold the reference drops lane 1 in c3
    cfg = PEConfig(encoding="binary", kmax=6, keep_bits=3, frac_bits=6, int_bits=5)
    acc, cycles, tr = pe_group(Acc.ZERO, FIG5_A, FIG5_B, cfg)
    assert cycles == 4
    assert tr[2].dropped_a == (1,) and tr[2].k[1] == 7


def test_tv6_fig5_csd():
    acc, cycles, tr = pe_group(Acc.ZERO, FIG5_A, FIG5_B, DEFAULT)
    assert cycles == 3
    assert tr[0].E == 6 and [t.k[:2] for t in tr] == [(0, 3), (3, 6), (5, 8)]
    assert tr[1].T == -1424
    assert acc.to_fraction(9) == Fraction(79875, 1000)


def test_tv11_zeros_and_denormals():
    acc, cycles, tr = pe_group(Acc.ZERO, [0x0000, 0x3F80, 0x0005], [0x3F80, 0x0000, 0x3F80],
                               DEFAULT)
    assert cycles == 1 and acc == Acc.ZERO and read_out(acc, DEFAULT) == 0x0000
    assert tr[0].processed == () and tr[0].E is None
    acc, cycles, _ = pe_group(Acc.ZERO, [], [], DEFAULT)
    assert cycles == 1 and acc == Acc.ZERO
    # a zero accumulator must not enter E
    acc, cycles, _ = pe_group(Acc.ZERO, [0x3E00], [0x3F80], DEFAULT)
    assert read_out(acc, DEFAULT) == 0x3E00 and cycles == 1


def test_tv12_signs():
    acc, cycles, _ = pe_group(Acc.ZERO, [0xBFC0, 0x3F80], [0x4040, 0x4040], DEFAULT)
    assert acc == acc_of(DEFAULT, 1, 0, 0x300) and cycles == 2
    assert read_out(acc, DEFAULT) == 0xBFC0
    acc, cycles, tr = pe_group(Acc.ZERO, [0x3FC0], [0x3FC0], DEFAULT)
    assert encode_terms(0xC0) == [(-1, 1), (1, -1)]
    assert cycles == 2 and read_out(acc, DEFAULT) == 0x4010


def test_tv13_shift_window():
    acc, cycles, tr = pe_group(Acc.ZERO, [0x3F80, 0x3E00], [0x3F80, 0x3F80], DEFAULT)
    assert cycles == 1 and tr[0].k[:2] == (0, 3) and acc.to_fraction(9) == Fraction(9, 8)
    acc, cycles, tr = pe_group(Acc.ZERO, [0x3F80, 0x3D80], [0x3F80, 0x3F80], DEFAULT)
    assert cycles == 2 and tr[0].k[:2] == (0, 4) and tr[0].processed == (0,)
    assert tr[1].base == 4 and acc.to_fraction(9) == Fraction(17, 16)


def test_tv16_read_out():
    assert read_out(Acc(False, 0, 0, 0x3FF), DEFAULT) == 0x3FFF
    assert read_out(Acc(False, 0, 0, 0x3FF), PEConfig(out_round="rne")) == 0x4000
    assert read_out(Acc(False, 0, 128, 0x200), DEFAULT) == 0x7F80
    assert read_out(Acc(False, 1, 128, 0x200), DEFAULT) == 0xFF80
    assert read_out(Acc(False, 0, -127, 0x3FF), DEFAULT) == 0x0000
    assert read_out(Acc(False, 1, -127, 0x3FF), DEFAULT) == 0x8000
    assert read_out(Acc(False, 0, -126, 0x200), DEFAULT) == 0x0080
    # RNE carry into an overflowing exponent
    assert read_out(Acc(False, 0, 127, 0x3FF), PEConfig(out_round="rne")) == 0x7F80
    # P < 7: the kept fraction is widened with zeros
    cfg6 = PEConfig(keep_bits=6, kmax=9)
    assert read_out(Acc(False, 0, 0, 0x7F), cfg6) == 0x3F80 | (0x3F << 1)


def test_tv7_worst_step_needs_five_integer_bits():
    # acc = 1.998 (the largest 1.9 significand at E) plus 8 lanes of 1.992 at k = 0: 17.93,
    # beyond the paper's 4 integer bits (spec §1.2)
    acc, _, _ = pe_group(Acc.ZERO, [0x3FB0], [0x3FBA], DEFAULT)
    assert acc == Acc(False, 0, 0, 0x3FF)
    acc, cycles, tr = pe_group(acc, [0x3F80] * 8, [0x3FFF] * 8, DEFAULT)
    assert cycles == 1 and tr[0].E == 0 and tr[0].processed == tuple(range(8))
    assert tr[0].X == (0x3FF << 3) + 8 * 255 * 32
    assert 16 * 2 ** 12 <= tr[0].X < 2 ** (12 + DEFAULT.int_bits)
    exact = Fraction(0x3FF, 512) + 8 * Fraction(255, 128)
    assert acc.exp == 4 and abs(acc.to_fraction(9) - exact) <= Fraction(2) ** (4 - 9) / 2


def test_tv10_ob_a_only_cycle_counts():
    # an accumulator at 2**20 puts a 2**0 product 20 positions out: the lane is dropped at
    # presentation (OB-a); the cycle still counts and the accumulator is unchanged
    acc, _, _ = pe_group(Acc.ZERO, [0x4980], [0x3F80], DEFAULT)
    acc2, cycles, tr = pe_group(acc, [0x3F80, 0x3FC0], [0x3F80, 0x3F80], DEFAULT)
    assert cycles == 1 and tr[0].dropped_a == (0, 1) and tr[0].processed == ()
    assert acc2 == acc and tr[0].k[:2] == (20, 19)      # 1.1b = +2**1 - 2**-1: lead t = -1
    # with OB disabled the terms are processed: (k=20, k=19) together, then k=21
    acc3, cycles, tr = pe_group(acc, [0x3F80, 0x3FC0], [0x3F80, 0x3F80], NO_OB)
    assert cycles == 2 and [t.processed for t in tr] == [(0, 1), (1,)]
    assert acc3.to_fraction(9) == acc.to_fraction(9)    # far below the kept precision


def test_ob_b_predictive_drop():
    # worked by hand from spec §3.3: [0x4580]x[0x3F80] = 2**12 leaves acc = (0, 12, 512).
    # Then A = 0x3F81 (Sig 129 = 1.0000001b: terms t = 0 and t = 7), B = 1.0, ABe = 0:
    # cycle 1: E = max(0 - 0, eacc = 12) = 12, k = 12 <= KMAX: processed with base 12;
    #   T = 128 << 3, sh = 12 - 7 - 3 - 12 = -10, Tg = RTO(1024, 10) = 1, Ag = 512 << 3 = 4096,
    #   X = 4097 rounds back to sig 512 (remainder 1 of 8 is below half);
    #   OB-b: k = 12 >= KMAX, so the lane is done and its t = 7 term is dropped: 1 cycle.
    # Without OB-b the t = 7 term would take a second (OB-a only) cycle at k = 19.
    acc, _, _ = pe_group(Acc.ZERO, [0x4580], [0x3F80], DEFAULT)
    assert acc == Acc(False, 0, 12, 512)
    acc2, cycles, tr = pe_group(acc, [0x3F81], [0x3F80], DEFAULT)
    assert cycles == 1
    assert (tr[0].E, tr[0].k[0], tr[0].base, tr[0].processed) == (12, 12, 12, (0,))
    assert (tr[0].Tg, tr[0].Ag, tr[0].X) == (1, 4096, 4097)
    assert tr[0].dropped_b == (0,) and tr[0].dropped_a == () and tr[0].done[0]
    assert acc2 == Acc(False, 0, 12, 512)
    # one position further (k = 13 > KMAX) the first term is dropped at presentation (OB-a)
    acc, _, _ = pe_group(Acc.ZERO, [0x4600], [0x3F80], DEFAULT)
    _, cycles, tr = pe_group(acc, [0x3F81], [0x3F80], DEFAULT)
    assert cycles == 1 and tr[0].dropped_a == (0,) and tr[0].processed == ()
    # with OB off both terms are processed, one cycle each
    _, cycles, tr = pe_group(Acc(False, 0, 12, 512), [0x3F81], [0x3F80], NO_OB)
    assert cycles == 2 and [t.k[0] for t in tr] == [12, 19]


def test_tv19_precision_lowers_mean_cycles():
    rng = np.random.default_rng(19)
    A, B = random_operands(rng, 4000, 8, "normal")
    means = [pe_dot_batch(A, B, PEConfig(keep_bits=p, kmax=p + 3, frac_bits=max(p + 3, 12)))[1]
             .mean() for p in (9, 6, 3)]
    assert means[0] > means[1] > means[2]
    # 4 significant mantissa bits: at most 3 CSD terms, so at most 3 cycles for one lane
    for m in range(0, 128, 8):
        assert len(encode_terms(128 + m)) <= 3
        assert pe_group(Acc.ZERO, [0x3F80 | m], [0x3F80], DEFAULT)[1] <= 3


# ---------------------------------------------------------------------------------------------
# operand checks

def test_exponent_255_rejected():
    for bad in (0x7F80, 0xFFC0, 0x7F81):
        with pytest.raises(ValueError, match="255"):
            pe_group(Acc.ZERO, [bad], [0x3F80], DEFAULT)
        with pytest.raises(ValueError, match="255"):
            pe_dot([0x3F80], [bad], DEFAULT)


def test_bad_shapes_rejected():
    with pytest.raises(ValueError):
        pe_group(Acc.ZERO, [0x3F80] * 9, [0x3F80] * 9, DEFAULT)
    with pytest.raises(ValueError):
        pe_dot_batch(np.zeros((2, 8), np.uint16), np.zeros((2, 7), np.uint16), DEFAULT)
    with pytest.raises(ValueError):
        pe_group(Acc.ZERO, [0x3F80], [0x3F80], DEFAULT, eligible=[0x1FF])


def test_dot_rejects_non_integer_and_non_1d_operands():
    # a float near a valid pattern must not be truncated to it, nor a 2-D array flattened
    with pytest.raises(ValueError, match="integer"):
        pe_dot([16256.7], [0x3F80], DEFAULT)
    with pytest.raises(ValueError, match="integer"):
        pe_dot([0x3F80], np.array([16256.0]), DEFAULT)
    with pytest.raises(ValueError, match="1-D"):
        pe_dot([[0x3F80, 0x3F80]], [[0x3F80, 0x3F80]], DEFAULT)
    with pytest.raises(ValueError, match="1-D"):
        pe_dot(np.full((2, 8), 0x3F80), np.full((2, 8), 0x3F80), DEFAULT)
    with pytest.raises(ValueError, match="same length"):
        pe_dot([0x3F80] * 3, [0x3F80] * 2, DEFAULT)
    with pytest.raises(ValueError, match="integer"):
        pe_group(Acc.ZERO, [16256.7], [0x3F80], DEFAULT)
    with pytest.raises(ValueError, match="1-D"):
        pe_group(Acc.ZERO, [[0x3F80]], [[0x3F80]], DEFAULT)
    # integer arrays of any integer dtype are accepted
    assert pe_dot(np.array([0x3F80], np.uint16), np.array([0x4000], np.int32), DEFAULT) \
        == (0x4000, 1)


@pytest.mark.parametrize("acc,what", [
    (Acc(False, 0, 0, 0x1FF), "sig 511"),          # below 2**9: not normalized
    (Acc(False, 0, 0, 0x400), "sig 1024"),         # 2**10: beyond 1.9
    (Acc(False, 0, 0, 0), "sig 0"),
    (Acc(False, 2, 0, 0x200), "sign 2"),
    (Acc(False, -1, 0, 0x200), "sign -1"),
    (Acc(False, 0, 512, 0x200), "exp 512"),        # outside the RTL's 10-bit signed exponent
    (Acc(False, 0, -513, 0x200), "exp -513"),
    ((False, 0, 0), "Acc"),
])
def test_invalid_accumulator_rejected(acc, what):
    with pytest.raises(ValueError, match=what):
        pe_group(acc, [0x3F80], [0x3F80], DEFAULT)
    with pytest.raises(ValueError, match=what):
        pe_dot_batch(np.full((1, 8), 0x3F80), np.full((1, 8), 0x3F80), DEFAULT, acc=acc)


def test_accumulator_range_edges_accepted():
    for acc in (Acc(False, 1, 511, 0x3FF), Acc(False, 0, -512, 0x200)):
        assert pe_group(acc, [], [], DEFAULT)[0] == acc
    # keep_bits = 6: the 1.6 format
    cfg6 = PEConfig(keep_bits=6, kmax=9)
    assert pe_group(Acc(False, 0, 0, 0x7F), [], [], cfg6)[0] == Acc(False, 0, 0, 0x7F)
    with pytest.raises(ValueError, match="sig 128"):
        pe_group(Acc(False, 0, 0, 0x80), [], [], cfg6)


@pytest.mark.parametrize("eligible", [True, 5, [True], [3.5], ["ab"], [[True] * 7],
                                      [[2] * 8], [None]])
def test_malformed_eligible_masks_rejected(eligible):
    with pytest.raises(ValueError, match="eligible"):
        pe_group(Acc.ZERO, [0x3F80], [0x3F80], DEFAULT, eligible=eligible)


def test_eligible_mask_forms_agree():
    a, b = [0x3FAB, 0x3E55, 0x4000], [0x3F80, 0x3F80, 0xBF80]
    as_int = pe_group(Acc.ZERO, a, b, DEFAULT, eligible=[0b101, 0, 0b010])
    as_bools = pe_group(Acc.ZERO, a, b, DEFAULT,
                        eligible=[[True, False, True] + [False] * 5, [False] * 8,
                                  np.array([0, 1, 0, 0, 0, 0, 0, 0], bool)])
    assert as_int == as_bools


# ---------------------------------------------------------------------------------------------
# per-cycle behaviour against exact arithmetic

def lane_terms(a, b, cfg):
    """Exact term values of a lane: sigma * SigB * 2**(ABe - t - 7) in encoder order."""
    if (a >> 7) & 0xFF == 0 or (b >> 7) & 0xFF == 0:
        return []
    abe = ((a >> 7) & 0xFF) + ((b >> 7) & 0xFF) - 254
    ps = (a >> 15) ^ (b >> 15)
    return [(t, (-1) ** ps * s * Fraction(sig_of(b)) * Fraction(2) ** (abe - t - 7))
            for t, s in encode_terms(sig_of(a), cfg.encoding)]


def check_group_trace(acc0, a, b, cfg, eligible=None):
    """Replay a group's trace against exact rationals and the §3.3 rules; return cycles."""
    acc1, cycles, trace = pe_group(acc0, a, b, cfg, eligible)
    P, F = cfg.keep_bits, cfg.frac_bits
    queues = [lane_terms(x, y, cfg) for x, y in zip(a, b)]
    queues += [[] for _ in range(cfg.lanes - len(queues))]
    done = [(y >> 7) & 0xFF == 0 for y in list(b) + [0] * (cfg.lanes - len(b))]
    masks = list(eligible or [])
    prev = acc0
    for c, tr in enumerate(trace):
        # eligible = has a pending term, not done, and in this cycle's mask (all lanes past the
        # end of the mask list): every in-mask lane with a pending term is eligible, no other
        mask = masks[c] if c < len(masks) else (1 << cfg.lanes) - 1
        assert tr.eligible == tuple(bool(queues[i]) and not done[i] and bool(mask >> i & 1)
                                    for i in range(cfg.lanes))
        for i in tr.processed:
            assert tr.eligible[i] and tr.k[i] - tr.base <= cfg.dmax and tr.k[i] <= cfg.kmax
        for i in tr.dropped_a:
            assert tr.k[i] > cfg.kmax and i not in tr.processed
        eligible_k = [k for k in tr.k if k is not None]
        assert all(k >= 0 for k in eligible_k)
        if eligible_k and tr.base is not None:
            run = [i for i in range(cfg.lanes) if tr.k[i] is not None and tr.k[i] <= cfg.kmax]
            assert tr.base == min(tr.k[i] for i in run)
            # every in-window lane is processed, every other stalls
            assert set(tr.processed) == {i for i in run if tr.k[i] - tr.base <= cfg.dmax}
        added = Fraction(0)
        for i in tr.processed:
            t, v = queues[i].pop(0)
            assert tr.tp[i] == t + 1
            added += v
        for i in tr.dropped_a + tr.dropped_b:
            queues[i] = []
            done[i] = True
        exact = prev.to_fraction(P) + added
        got = tr.acc.to_fraction(P)
        if tr.E is not None:
            # two jams below 2**(E-F) plus half an ulp of the 1.P result
            ulp = Fraction(2) ** (tr.acc.exp - P) if not tr.acc.zero else Fraction(0)
            assert abs(got - exact) <= 2 * Fraction(2) ** (tr.E - F) + ulp / 2
        if not tr.processed:
            assert tr.acc == prev
        if not tr.acc.zero:
            assert 2 ** P <= tr.acc.sig < 2 ** (P + 1)
        assert tr.done == tuple(done)
        prev = tr.acc
        finished = all(d or not q for d, q in zip(done, queues))
        assert finished == (c == cycles - 1)
    assert acc1 == prev
    return cycles, queues


def test_trace_against_exact_random():
    rng = np.random.default_rng(33)
    for cfg in (DEFAULT, NO_OB, PEConfig(encoding="binary"), PEConfig(dmax=12),
                PEConfig(keep_bits=6, kmax=9), PEConfig(lanes=4, int_bits=4)):
        A, B = random_operands(rng, 150, cfg.lanes, "mix")
        for a, b in zip(A.tolist(), B.tolist()):
            acc0 = Acc.ZERO
            if rng.random() < 0.5:
                acc0 = Acc(False, int(rng.integers(0, 2)), int(rng.integers(-6, 6)),
                           int(rng.integers(1 << cfg.keep_bits, 2 << cfg.keep_bits)))
            cycles, queues = check_group_trace(acc0, a, b, cfg)
            nterms = [n_terms(x, cfg) if (y >> 7) & 0xFF else 0 for x, y in zip(a, b)]
            assert cycles >= 1
            if cfg.kmax == 1023:
                # §3.5 without OB: every term processed; max n_i <= cycles <= sum n_i
                assert all(not q for q in queues)
                assert max(max(nterms), 1) <= cycles <= max(sum(nterms), 1)
            else:
                # with OB every cycle processes a term or drops a lane with unprocessed terms
                assert cycles <= max(sum(nterms), 1)
            if cfg.dmax >= cfg.kmax and acc0.zero:
                # Fig. 3 PE: no shift-window stalls, one cycle per term position
                assert cycles <= max(max(nterms), 1)


def test_eligible_masks():
    rng = np.random.default_rng(20)
    A, B = random_operands(rng, 200, 8, "mix")
    for a, b in zip(A.tolist(), B.tolist()):
        masks = [int(m) for m in rng.integers(0, 256, size=int(rng.integers(0, 12)))]
        cycles, _ = check_group_trace(Acc.ZERO, a, b, DEFAULT, masks)
        trace = pe_group(Acc.ZERO, a, b, DEFAULT, masks)[2]
        for c, tr in enumerate(trace[:len(masks)]):
            assert all(masks[c] >> i & 1 for i in range(8) if tr.eligible[i])
    # a fully masked cycle is an idle cycle that still counts
    acc, cycles, tr = pe_group(Acc.ZERO, [0x3F80], [0x3F80], DEFAULT, eligible=[0, 0])
    assert cycles == 3 and tr[0].processed == () and tr[0].acc == Acc.ZERO
    assert read_out(acc, DEFAULT) == 0x3F80


def test_single_term_products_are_exact():
    # A a power of two has one term; the product fits the 1.9 accumulator, so nothing rounds
    rng = np.random.default_rng(5)
    for _ in range(400):
        a = int(rng.integers(1, 255)) << 7 | int(rng.integers(0, 2)) << 15
        b = int(rng.integers(1, 1 << 16)) & ~0x4000 | 0x0080
        acc, cycles, _ = pe_group(Acc.ZERO, [a], [b], DEFAULT)
        assert cycles == 1
        assert acc.to_fraction(9) == bf16_value(a) * bf16_value(b)


# ---------------------------------------------------------------------------------------------
# statistics and error bounds (TV18), batch == scalar

def test_tv18_error_bound_and_cycle_order():
    rng = np.random.default_rng(18)
    A, B = random_operands(rng, 300, 64, "normal")
    worst = 0.0
    for cfg in (DEFAULT, NO_OB):
        out, _ = pe_dot_batch(A, B, cfg)
        for a, b, y in zip(A.tolist(), B.tolist(), out.tolist()):
            exact = exact_dot(a, b)
            scale = sum(abs(bf16_value(x) * bf16_value(z)) for x, z in zip(a, b))
            err = abs(Fraction(float(bf16_to_float(y))) - exact)
            assert err <= Fraction(1, 128) * scale
            worst = max(worst, float(err / scale))
    assert worst > 0
    A, B = random_operands(rng, 3000, 8, "normal")
    mean = {}
    for name, cfg in (("csd_ob", DEFAULT), ("csd", NO_OB),
                      ("bin_ob", PEConfig(encoding="binary")),
                      ("bin", PEConfig(encoding="binary", kmax=1023))):
        mean[name] = pe_dot_batch(A, B, cfg)[1].mean()
    assert mean["csd_ob"] < mean["csd"] < mean["bin_ob"] < mean["bin"]


def test_batch_equals_scalar_groups():
    rng = np.random.default_rng(7)
    for cfg in (DEFAULT, PEConfig(encoding="binary", kmax=9, keep_bits=6),
                PEConfig(dmax=12), PEConfig(lanes=4, int_bits=4)):
        A, B = random_operands(rng, 120, 3 * cfg.lanes + 3, "mix")
        accs, group_cycles = pe_dot_batch_acc(A, B, cfg)
        out, cycles = pe_dot_batch(A, B, cfg)
        assert group_cycles.shape == (120, 4) and (group_cycles.sum(axis=1) == cycles).all()
        for r, (a, b) in enumerate(zip(A.tolist(), B.tolist())):
            acc, total = Acc.ZERO, 0
            for g in range(0, len(a), cfg.lanes):
                acc, c, _ = pe_group(acc, a[g:g + cfg.lanes], b[g:g + cfg.lanes], cfg)
                assert c == group_cycles[r, g // cfg.lanes]
                total += c
            assert acc == accs[r] and total == cycles[r]
            assert read_out(acc, cfg) == out[r]
            assert pe_dot(a, b, cfg) == (int(out[r]), total)


def test_dot_empty_and_float_inputs():
    assert pe_dot([], [], DEFAULT) == (0, 1)
    x = float_to_bf16(np.float32(1.5))
    assert pe_dot([int(x)], [0x3F80], DEFAULT)[0] == int(x)
    with pytest.raises(ValueError):
        pe_dot_batch(np.ones((1, 8)), np.ones((1, 8)), DEFAULT)


def test_last_term_is_trailing_zero_test():
    # the RTL detects a lane's final term from the significand alone: no recoded digit lies
    # below position j exactly when the significand has j trailing zeros (binary and NAF)
    for enc in ("csd", "binary"):
        for sig in range(128, 256):
            terms = encode_terms(sig, enc)
            for idx, (t, _) in enumerate(terms):
                j = 7 - t
                assert (idx == len(terms) - 1) == (sig & ((1 << j) - 1) == 0)


# ---------------------------------------------------------------------------------------------
# bit-exact comparison with the independent scalar oracle (tests/bf16util.py, spec §3.3)

def _pe(**fields):
    """A configuration with the smallest valid int_bits (the tightest adder)."""
    probe = {k: v for k, v in fields.items() if k in ("lanes", "frac_bits", "keep_bits", "dmax")}
    probe = {"lanes": 8, "frac_bits": 12, "keep_bits": 9, "dmax": 3, **probe}
    return PEConfig(int_bits=required_int_bits(**probe), **fields)


ORACLE_CONFIGS = [
    DEFAULT, NO_OB, PEConfig(out_round="rne"), PEConfig(encoding="binary"),
    PEConfig(encoding="binary", kmax=1023), PEConfig(dmax=12), _pe(dmax=0), _pe(lanes=1),
    _pe(lanes=3, kmax=5, dmax=2), PEConfig(keep_bits=6, kmax=9), PEConfig(keep_bits=8, kmax=11),
    _pe(keep_bits=1, frac_bits=4, kmax=4, dmax=1), _pe(frac_bits=20, kmax=23, dmax=5),
    _pe(keep_bits=3, frac_bits=6, kmax=0, dmax=0),
]


def _random_acc(r, P):
    if r.random() < 0.3:
        return Acc.ZERO
    exp = r.choice([r.randrange(-8, 9), r.randrange(-300, 301), r.choice([-512, 500, -260, 255])])
    sig = r.choice([r.randrange(1 << P, 2 << P), 1 << P, (2 << P) - 1])
    return Acc(False, r.randrange(2), exp, sig)


def _random_group(r, nprng, L):
    pick = r.random()
    if pick < 0.4:
        A, B = random_operands(nprng, 1, L, "mix")
        return A[0].tolist()[:r.randint(0, L)] or [], B[0].tolist()
    mode = r.choice(["ext", "near", "any"])
    return [random_bf16(r, mode) for _ in range(L)], [random_bf16(r, mode) for _ in range(L)]


@pytest.mark.parametrize("cfg", ORACLE_CONFIGS, ids=config_label)
def test_matches_scalar_oracle(cfg):
    r = random.Random(f"oracle:{cfg}")
    nprng = np.random.default_rng(r.randrange(1 << 30))
    L = cfg.lanes
    for _ in range(300):
        a, b = _random_group(r, nprng, L)
        b = b[:len(a)]
        acc0 = _random_acc(r, cfg.keep_bits)
        masks = ([r.randrange(1 << L) for _ in range(r.randrange(8))] if r.random() < 0.3
                 else [])
        acc, cycles, trace = pe_group(acc0, a, b, cfg, masks)
        ref_acc, ref_cycles, ref_trace = ref_pe_group(tuple(acc0), a, b, cfg, masks)
        where = f"{cfg} acc0={acc0} a={[hex(x) for x in a]} b={[hex(x) for x in b]} {masks}"
        assert tuple(acc) == ref_acc and cycles == ref_cycles, where
        for c, (tr, (E, base, proc, ob_a, ob_b, k, racc)) in enumerate(zip(trace, ref_trace)):
            assert (tr.E, tr.base, tr.processed, tr.dropped_a, tr.dropped_b) \
                == (E, base, proc, ob_a, ob_b), f"cycle {c}: {where}"
            assert tr.k == tuple(k.get(i) for i in range(L)), f"cycle {c}: {where}"
            assert tuple(tr.acc) == racc, f"cycle {c}: {where}"
        for rnd in ("trunc", "rne"):
            ro = dataclasses.replace(cfg, out_round=rnd)
            assert read_out(acc, ro) == ref_read_out(ref_acc, cfg.keep_bits, rnd), where
    # batch model on 3-group dot products: the oracle chained group after group
    A = np.array([[random_bf16(r, "near") for _ in range(3 * L)] for _ in range(40)])
    B = np.array([[random_bf16(r, r.choice(["near", "any"])) for _ in range(3 * L)]
                  for _ in range(40)])
    accs, group_cycles = pe_dot_batch_acc(A, B, cfg)
    for row in range(40):
        ref = tuple(Acc.ZERO)
        for g in range(3):
            ref, c, _ = ref_pe_group(ref, A[row, g * L:(g + 1) * L].tolist(),
                                     B[row, g * L:(g + 1) * L].tolist(), cfg)
            assert group_cycles[row, g] == c
        assert tuple(accs[row]) == ref

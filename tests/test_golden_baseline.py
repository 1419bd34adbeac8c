"""Golden bit-parallel bfloat16 baseline PE (spec docs/specs/fpraker.md §11.6, §14) against exact
rationals and the independent scalar oracle of :mod:`bf16util`."""

import dataclasses
import random
from fractions import Fraction

import numpy as np
import pytest

from golden import ConfigError
from golden.baseline import (Acc, BaselineConfig, baseline_dot, baseline_dot_batch,
                             baseline_dot_batch_acc, baseline_group, read_out,
                             required_int_bits)
from golden.common import bf16_to_float
from golden.fpraker.pe import PEConfig, pe_dot_batch, random_operands

from bf16util import bf16_value, config_label, random_bf16, ref_baseline_group, ref_read_out

DEFAULT = BaselineConfig()


@pytest.mark.parametrize("field,value", [
    ("lanes", 0), ("keep_bits", 10), ("frac_bits", 5), ("int_bits", 4), ("out_round", "x"),
])
def test_config_rejects(field, value):
    with pytest.raises(ConfigError) as info:
        BaselineConfig(**{field: value})
    assert info.value.field == field


def test_int_bits():
    assert required_int_bits(8, 12, 9) == 5
    assert BaselineConfig(lanes=4, int_bits=4).lanes == 4


def test_single_product_is_correctly_rounded():
    # RTO to 2**(E-12) keeps 3 bits beyond 1.9, so the final RNE is the correct rounding
    rng = np.random.default_rng(1)
    for _ in range(500):
        a = int(rng.integers(1, 1 << 16)) & ~0x4000 | 0x0080
        b = int(rng.integers(1, 1 << 16)) & ~0x4000 | 0x0080
        acc, cycles = baseline_group(Acc.ZERO, [a], [b], DEFAULT)
        exact = bf16_value(a) * bf16_value(b)
        assert cycles == 1 and not acc.zero
        ulp = Fraction(2) ** (acc.exp - 9)
        err = acc.to_fraction(9) - exact
        assert abs(err) <= ulp / 2
        if abs(err) == ulp / 2:
            assert acc.sig % 2 == 0


def test_group_against_exact():
    rng = np.random.default_rng(2)
    A, B = random_operands(rng, 400, 8, "mix")
    for a, b in zip(A.tolist(), B.tolist()):
        acc0 = Acc(False, 0, int(rng.integers(-4, 4)), int(rng.integers(512, 1024)))
        for start in (Acc.ZERO, acc0):
            acc, _ = baseline_group(start, a, b, DEFAULT)
            exact = start.to_fraction(9) + sum(bf16_value(x) * bf16_value(y)
                                               for x, y in zip(a, b))
            E = max(([start.exp] if not start.zero else [])
                    + [((x >> 7) & 0xFF) + ((y >> 7) & 0xFF) - 254 + 1
                       for x, y in zip(a, b) if (x >> 7) & 0xFF and (y >> 7) & 0xFF],
                    default=0)
            # nine jams below 2**(E-12) at most, plus half an ulp of the result
            ulp = Fraction(2) ** (acc.exp - 9) if not acc.zero else 0
            assert abs(acc.to_fraction(9) - exact) <= 9 * Fraction(2) ** (E - 12) + ulp / 2


def test_tv_signs_zeros_and_exponent_255():
    acc, _ = baseline_group(Acc.ZERO, [0xBFC0, 0x3F80], [0x4040, 0x4040], DEFAULT)
    assert acc == Acc(False, 1, 0, 0x300) and read_out(acc, DEFAULT) == 0xBFC0
    acc, c = baseline_group(Acc.ZERO, [0x0000, 0x3F80, 0x0005], [0x3F80, 0x0000, 0x3F80],
                            DEFAULT)
    assert acc == Acc.ZERO and c == 1
    assert baseline_dot([0x3E00], [0x3F80], DEFAULT) == (0x3E00, 1)
    with pytest.raises(ValueError, match="255"):
        baseline_dot([0x7F80], [0x3F80], DEFAULT)


def test_batch_equals_groups_and_cycles():
    rng = np.random.default_rng(3)
    A, B = random_operands(rng, 200, 21, "mix")
    accs, cycles = baseline_dot_batch_acc(A, B, DEFAULT)
    out, _ = baseline_dot_batch(A, B, DEFAULT)
    assert (cycles == 3).all()
    for r, (a, b) in enumerate(zip(A.tolist(), B.tolist())):
        acc = Acc.ZERO
        for g in range(0, 21, 8):
            acc, _ = baseline_group(acc, a[g:g + 8], b[g:g + 8], DEFAULT)
        assert acc == accs[r] and read_out(acc, DEFAULT) == out[r]
        assert baseline_dot(a, b, DEFAULT) == (int(out[r]), 3)


def test_tv18_error_bound_and_agreement_with_fpraker():
    rng = np.random.default_rng(18)
    A, B = random_operands(rng, 300, 64, "normal")
    out, _ = baseline_dot_batch(A, B, DEFAULT)
    fpr, _ = pe_dot_batch(A, B, PEConfig())
    close = 0
    for a, b, y, z in zip(A.tolist(), B.tolist(), out.tolist(), fpr.tolist()):
        exact = sum(bf16_value(x) * bf16_value(w) for x, w in zip(a, b))
        scale = sum(abs(bf16_value(x) * bf16_value(w)) for x, w in zip(a, b))
        assert abs(Fraction(float(bf16_to_float(y))) - exact) <= Fraction(1, 128) * scale
        close += abs(int(y) - int(z)) <= 1
    # both accumulate in the same 1.9 format: results mostly agree to one bf16 ulp
    assert close >= 0.9 * len(out)


def test_dot_rejects_non_integer_and_non_1d_operands():
    with pytest.raises(ValueError, match="integer"):
        baseline_dot([16256.7], [0x3F80], DEFAULT)
    with pytest.raises(ValueError, match="1-D"):
        baseline_dot([[0x3F80] * 8, [0x3F80] * 8], [[0x3F80] * 8, [0x3F80] * 8], DEFAULT)
    with pytest.raises(ValueError, match="same length"):
        baseline_dot([0x3F80] * 3, [0x3F80] * 2, DEFAULT)
    with pytest.raises(ValueError, match="integer"):
        baseline_group(Acc.ZERO, [16256.7], [0x3F80], DEFAULT)
    with pytest.raises(ValueError, match="at most 8"):
        baseline_group(Acc.ZERO, [0x3F80] * 9, [0x3F80] * 9, DEFAULT)
    with pytest.raises(ValueError, match="integer"):
        baseline_dot_batch(np.ones((1, 8)), np.ones((1, 8)), DEFAULT)
    assert baseline_dot([], [], DEFAULT) == (0, 1)
    assert baseline_dot(np.array([0x3F80], np.uint16), [0x4000], DEFAULT) == (0x4000, 1)


@pytest.mark.parametrize("acc,what", [
    (Acc(False, 0, 0, 0x1FF), "sig 511"), (Acc(False, 0, 0, 0x400), "sig 1024"),
    (Acc(False, 3, 0, 0x200), "sign 3"), (Acc(False, 0, 600, 0x200), "exp 600"),
    (Acc(False, 0, -513, 0x200), "exp -513"),
])
def test_invalid_accumulator_rejected(acc, what):
    with pytest.raises(ValueError, match=what):
        baseline_group(acc, [0x3F80], [0x3F80], DEFAULT)
    with pytest.raises(ValueError, match=what):
        baseline_dot_batch(np.full((1, 8), 0x3F80), np.full((1, 8), 0x3F80), DEFAULT, acc=acc)
    with pytest.raises(ValueError, match=what):
        read_out(acc, DEFAULT)


def test_step_sum_beyond_four_integer_bits():
    # acc = 1.998046875 (TV16), then 8 products 0x3FB5^2 = 32761/16384 (< 2**15: aligned at
    # E = 0, RTO(32761, 2) = 8191): X = 8184 + 8 * 8191 = 73712 >= 2**16, which needs the fifth
    # integer bit; NORM_RNE: n = 16, e = 4, 73712 / 2**7 = 575.875 -> 576
    for s in (0, 1):
        acc, _ = baseline_group(Acc.ZERO, [0x3FB0 | s << 15], [0x3FBA], DEFAULT)
        assert acc == Acc(False, s, 0, 0x3FF)
        acc, _ = baseline_group(acc, [0x3FB5 | s << 15] * 8, [0x3FB5] * 8, DEFAULT)
        assert acc == Acc(False, s, 4, 576)
        assert ref_baseline_group((False, s, 0, 0x3FF), [0x3FB5 | s << 15] * 8, [0x3FB5] * 8,
                                  DEFAULT) == (False, s, 4, 576)


# ---------------------------------------------------------------------------------------------
# bit-exact comparison with the independent scalar oracle (tests/bf16util.py, spec §11.6)

def _cfg(**fields):
    probe = {"lanes": 8, "frac_bits": 12, "keep_bits": 9,
             **{k: v for k, v in fields.items() if k in ("lanes", "frac_bits", "keep_bits")}}
    return BaselineConfig(int_bits=required_int_bits(**probe), **fields)


ORACLE_CONFIGS = [DEFAULT, BaselineConfig(out_round="rne"), _cfg(lanes=1), _cfg(lanes=3),
                  _cfg(keep_bits=1, frac_bits=1), _cfg(keep_bits=6), _cfg(frac_bits=14),
                  _cfg(frac_bits=15), _cfg(frac_bits=20)]


@pytest.mark.parametrize("cfg", ORACLE_CONFIGS, ids=config_label)
def test_matches_scalar_oracle(cfg):
    r = random.Random(f"oracle:{cfg}")
    nprng = np.random.default_rng(r.randrange(1 << 30))
    L, P = cfg.lanes, cfg.keep_bits
    for _ in range(500):
        if r.random() < 0.3:
            A, B = random_operands(nprng, 1, L, "mix")
            a, b = A[0].tolist(), B[0].tolist()
        else:
            mode = r.choice(["ext", "near", "any"])
            a = [random_bf16(r, mode) for _ in range(L)]
            b = [random_bf16(r, mode) for _ in range(L)]
        n = r.randint(0, L)
        a, b = a[:n], b[:n]
        acc0 = Acc.ZERO
        if r.random() < 0.7:
            acc0 = Acc(False, r.randrange(2),
                       r.choice([r.randrange(-8, 9), r.randrange(-300, 301), -512, 500]),
                       r.choice([r.randrange(1 << P, 2 << P), (2 << P) - 1]))
        acc, cycles = baseline_group(acc0, a, b, cfg)
        ref = ref_baseline_group(tuple(acc0), a, b, cfg)
        assert tuple(acc) == ref and cycles == 1, f"{cfg} {acc0} {a} {b}"
        for rnd in ("trunc", "rne"):
            assert read_out(acc, dataclasses.replace(cfg, out_round=rnd)) \
                == ref_read_out(ref, P, rnd)
    # batch model on 3-group dot products
    A = np.array([[random_bf16(r, "near") for _ in range(3 * L)] for _ in range(60)])
    B = np.array([[random_bf16(r, r.choice(["near", "any"])) for _ in range(3 * L)]
                  for _ in range(60)])
    accs, cycles = baseline_dot_batch_acc(A, B, cfg)
    assert (cycles == 3).all()
    for row in range(60):
        ref = tuple(Acc.ZERO)
        for g in range(3):
            ref = ref_baseline_group(ref, A[row, g * L:(g + 1) * L].tolist(),
                                     B[row, g * L:(g + 1) * L].tolist(), cfg)
        assert tuple(accs[row]) == ref


# ---------------------------------------------------------------------------------------------
# FAST's Table IV baselines (golden.baseline.mac16_*)

from golden.baseline import MAC16_FORMATS, MAC16Config, mac16_products, mac16_run  # noqa: E402
from golden.common import format_named as _fmt  # noqa: E402


def _value(bits: int, fmt) -> Fraction | None:
    """Exact value of a float pattern (subnormals as zero), None for Inf/NaN."""
    e = (bits >> fmt.man_bits) & fmt.exp_max
    if e == fmt.exp_max:
        return None
    if e == 0:
        return Fraction(0)
    mag = (1 + Fraction(bits & ((1 << fmt.man_bits) - 1), 1 << fmt.man_bits)) * \
        Fraction(2) ** (e - fmt.bias)
    return -mag if bits >> (fmt.width - 1) else mag


@pytest.mark.parametrize("name", ["hfp8", "bf16", "fp16"])
def test_mac16_float_products_are_exact_in_fp32(name):
    """Every product of finite operands equals the exact rational product, or overflows to
    ±Inf / flushes to a signed zero exactly where FP32's range ends (bf16's range exceeds it)."""
    cfg = MAC16Config(name)
    fmt = cfg.format
    rng = np.random.default_rng(3)
    a = rng.integers(0, 1 << fmt.width, 20000)
    b = rng.integers(0, 1 << fmt.width, 20000)
    p = mac16_products(cfg, a, b)
    fp32 = _fmt("fp32")
    for x, y, z in zip(a.tolist(), b.tolist(), p.tolist()):
        vx, vy = _value(x, fmt), _value(y, fmt)
        if vx is None or vy is None:
            continue
        exact = vx * vy
        sign = (x ^ y) >> (fmt.width - 1) & 1
        if exact == 0 or abs(exact) < Fraction(2) ** -126:
            assert z == sign << 31, (x, y, hex(z))
        elif abs(exact) >= Fraction(2) ** 128:
            assert z == (sign << 31) | 0x7F800000, (x, y, hex(z))
        else:
            assert _value(z, fp32) == exact, (x, y, hex(z))


def test_mac16_float_specials():
    cfg = MAC16Config("fp16")
    inf, nan, one, zero = 0x7C00, 0x7C01, 0x3C00, 0x0000
    p = mac16_products(cfg, [inf, inf, nan, 0x8000 | inf, zero], [one, zero, one, one, 0x8000])
    assert p.tolist() == [0x7F800000, 0x7FC00000, 0x7FC00000, 0xFF800000, 0x80000000]


def test_mac16_integers_wrap_in_the_accumulator():
    cfg = MAC16Config("int8", lanes=2)
    big = (0x80, 0x80)                                  # -128 * -128 = 16384
    accs = mac16_run(cfg, [(big, big, True)] + [(big, big, False)] * 131071)
    assert accs[0].tolist() == [16384, 16384]
    assert accs[-1].tolist() == [(131072 * 16384) % (1 << 32)] * 2      # wrapped to 0
    assert mac16_run(MAC16Config("int12", lanes=1), [([0x800], [0x7FF], True)])[0][0] == \
        (-2048 * 2047) % (1 << 32)


def test_mac16_accumulates_with_one_rounding_per_mac():
    """bf16: 1.0 + 2**-24 * (1 + 2**-7) rounds up (above the tie), + 2**-24 rounds to even."""
    cfg = MAC16Config("bf16", lanes=1)
    one = 0x3F80
    tiny = 0x33808000 >> 16                             # 2**-24 * 1.0078125 (bf16 0x3381)
    accs = mac16_run(cfg, [([one], [one], True), ([tiny + 1], [one], False)])
    assert accs[-1][0] == 0x3F800001
    accs = mac16_run(cfg, [([one], [one], True), ([0x3380], [one], False)])
    assert accs[-1][0] == 0x3F800000


def test_mac16_config_errors():
    with pytest.raises(ValueError, match="fmt"):
        MAC16Config("fp8")
    assert set(MAC16_FORMATS) == {"int8", "int12", "hfp8", "bf16", "fp16"}


def test_mac16_operands_float_formats_round_each_value():
    from golden.baseline import mac16_operands
    from golden.common.rounding import convert_float

    x = np.array([[0x3F80, 0xBFC0, 0x4370, 0x0001], [0x8000, 0x3FB0, 0x7F7F, 0x3C80]])
    assert mac16_operands(MAC16Config("hfp8", lanes=4), x).tolist() == [
        [0x1C, 0x5E, 0x3B, 0x00], [0x40, 0x1E, 0x3B, 0x04]]        # 240 and 2**127 saturate
    # bf16 passes unchanged but for subnormals (read as zero by the MACs anyway)
    assert mac16_operands(MAC16Config("bf16", lanes=4), x).tolist() == [
        [0x3F80, 0xBFC0, 0x4370, 0x0000], [0x8000, 0x3FB0, 0x7F7F, 0x3C80]]
    assert np.array_equal(mac16_operands(MAC16Config("fp16", lanes=4), x),
                          convert_float(x, "bf16", "fp16", overflow="saturate"))
    with pytest.raises(ValueError, match="Inf/NaN"):
        mac16_operands(MAC16Config("fp16", lanes=1), [[0x7F80]])


def test_mac16_operands_integers_scale_each_group():
    from golden.baseline import mac16_operands
    from golden.common import float_to_bf16

    cfg = MAC16Config("int8", lanes=5)
    # max 254 → s = 2: 1 → 0.5 → 0, 3 → 1.5 → 2, 5 → 2.5 → 2 (ties to even), -254 → -127
    x = float_to_bf16(np.array([[254, 1, 3, 5, -3], [1, -254, 0, 0, 0], [0, -0.0, 0, 0, 0]],
                               dtype=np.float32)).astype(np.int64)
    q = mac16_operands(cfg, x)
    signed = np.where(q >= 128, q - 256, q)
    assert signed.tolist() == [[127, 0, 2, 2, -2], [0, -127, 0, 0, 0], [0, 0, 0, 0, 0]]
    # against exact rationals on random groups, int8 and int12
    rng = np.random.default_rng(5)
    for name, top in (("int8", 127), ("int12", 2047)):
        cfg = MAC16Config(name, lanes=16)
        v = rng.standard_normal((200, 16)) * np.exp2(rng.integers(-20, 20, (200, 1)))
        v[rng.random(v.shape) < 0.2] = 0
        b = float_to_bf16(v.astype(np.float32)).astype(np.int64)
        got = mac16_operands(cfg, b)
        got = np.where(got >> (cfg.format.bits - 1), got - (1 << cfg.format.bits), got)
        for row, qrow in zip(b.tolist(), got.tolist()):
            vals = [_value(p, _fmt("bf16")) for p in row]
            big = max(abs(t) for t in vals)
            for t, qv in zip(vals, qrow):
                exact = t * top / big
                assert qv == round(exact), (row, t, qv)      # Fraction round(): ties to even

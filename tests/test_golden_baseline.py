"""Golden bit-parallel bfloat16 baseline PE (spec seed-fpraker.md §11.6, §14)."""

from fractions import Fraction

import numpy as np
import pytest

from golden import ConfigError
from golden.baseline import (Acc, BaselineConfig, baseline_dot, baseline_dot_batch,
                             baseline_dot_batch_acc, baseline_group, read_out,
                             required_int_bits)
from golden.common import bf16_to_float
from golden.fpraker.pe import PEConfig, pe_dot_batch, random_operands

DEFAULT = BaselineConfig()


def bf16_value(x: int) -> Fraction:
    e = (x >> 7) & 0xFF
    if e == 0:
        return Fraction(0)
    return (-1) ** (x >> 15) * Fraction(128 + (x & 0x7F), 128) * Fraction(2) ** (e - 127)


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

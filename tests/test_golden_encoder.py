"""FPRaker term encoding (spec §2.2, vectors TV1/TV2) against exact rationals."""

from collections import Counter
from fractions import Fraction

import numpy as np
import pytest

from golden import ConfigError
from golden.fpraker import EncoderConfig, encode_terms, term_counts

SIGS = range(128, 256)


def value(terms) -> Fraction:
    return sum(Fraction(sign) * Fraction(2) ** (-t) for t, sign in terms)


def spec(*weights):
    """``(sign, e)`` pairs meaning ``sign·2^e`` (the spec's notation) → ``(t, sign)``, t = −e."""
    return [(-e, s) for s, e in weights]


# TV1 (spec §13): significand → CSD terms, written as (sign, exponent of 2)
TV1_CSD = {
    0x80: [(+1, 0)],
    0x81: [(+1, 0), (+1, -7)],
    0xF0: [(+1, 1), (-1, -3)],
    0xF8: [(+1, 1), (-1, -4)],
    0xFF: [(+1, 1), (-1, -7)],
    0xAB: [(+1, 1), (-1, -1), (-1, -3), (-1, -5), (-1, -7)],
    0xAA: [(+1, 0), (+1, -2), (+1, -4), (+1, -6)],
    0xE8: [(+1, 1), (-1, -2), (+1, -4)],
    0xD8: [(+1, 1), (-1, -2), (-1, -4)],
    0xD3: [(+1, 1), (-1, -1), (+1, -3), (+1, -5), (-1, -7)],
    0xC0: [(+1, 1), (-1, -1)],
    0xA0: [(+1, 0), (+1, -2)],
}
TV1_BINARY = {
    0x81: [(+1, 0), (+1, -7)],
    0xE8: [(+1, 0), (+1, -1), (+1, -2), (+1, -4)],
    0xD8: [(+1, 0), (+1, -1), (+1, -3), (+1, -4)],
}
TV1_BINARY_COUNTS = {0xF0: 4, 0xF8: 5, 0xFF: 8, 0xAB: 5, 0xD3: 5, 0xC0: 2, 0xAA: 4, 0xA0: 2}


@pytest.mark.parametrize("sig", sorted(TV1_CSD))
def test_tv1_csd_table(sig):
    assert encode_terms(sig, "csd") == spec(*TV1_CSD[sig])


@pytest.mark.parametrize("sig", sorted(TV1_BINARY))
def test_tv1_binary_table(sig):
    assert encode_terms(sig, "binary") == spec(*TV1_BINARY[sig])


def test_tv1_binary_counts():
    for sig, n in TV1_BINARY_COUNTS.items():
        assert len(encode_terms(sig, "binary")) == n


@pytest.mark.parametrize("encoding", ["csd", "binary"])
def test_tv2_sum_is_exact_and_order_msb_first(encoding):
    for sig in SIGS:
        terms = encode_terms(sig, encoding)
        assert value(terms) == Fraction(sig, 128)
        ts = [t for t, _ in terms]
        assert ts == sorted(ts) and len(set(ts)) == len(ts)
        assert terms[0][1] == +1, "leading term must be positive"
        lo = -1 if encoding == "csd" else 0
        assert all(lo <= t <= 7 for t in ts)


def test_tv2_csd_properties():
    counts = Counter()
    lead_carry = 0
    for sig in SIGS:
        terms = encode_terms(sig)
        ts = [t for t, _ in terms]
        assert all(b - a >= 2 for a, b in zip(ts, ts[1:])), f"adjacent digits in {sig:#x}"
        assert terms[0][0] in (-1, 0)
        counts[len(terms)] += 1
        lead_carry += ts[0] == -1
    assert dict(counts) == {1: 1, 2: 13, 3: 50, 4: 56, 5: 8}
    assert Fraction(sum(k * v for k, v in counts.items()), 128) == Fraction(441, 128)  # 3.4453
    assert lead_carry == 85
    five = sorted(s for s in SIGS if len(encode_terms(s)) == 5)
    assert five == [0b10101011, 0b10101101, 0b10110011, 0b10110101,
                    0b11001011, 0b11001101, 0b11010011, 0b11010101]


def test_tv2_binary_histogram():
    counts = Counter(len(encode_terms(s, "binary")) for s in SIGS)
    assert dict(counts) == {1: 1, 2: 7, 3: 21, 4: 35, 5: 35, 6: 21, 7: 7, 8: 1}


@pytest.mark.parametrize("encoding", ["csd", "binary"])
def test_term_counts_vectorized_matches_scalar(encoding):
    sigs = np.array([0] + list(SIGS))
    expect = [0] + [len(encode_terms(s, encoding)) for s in SIGS]
    assert term_counts(sigs, encoding).tolist() == expect


def test_zero_suffix_mantissas_need_at_most_three_terms():
    """TV19: with 4 significant mantissa bits (m & 7 == 0) CSD needs at most 3 terms."""
    assert max(len(encode_terms(s)) for s in SIGS if s & 7 == 0) == 3


@pytest.mark.parametrize("bad", [0, 127, 256, -1, 1.5, "128", True])
def test_bad_significand_raises(bad):
    with pytest.raises(ValueError, match="significand"):
        encode_terms(bad)


def test_bad_encoding_raises():
    with pytest.raises(ValueError, match="unknown encoding 'booth'"):
        encode_terms(200, "booth")
    with pytest.raises(ValueError):
        term_counts([200], "booth")
    with pytest.raises(ValueError, match="outside"):
        term_counts([100])


@pytest.mark.parametrize("kwargs, field", [({"lanes": 0}, "lanes"), ({"lanes": 65}, "lanes"),
                                           ({"lanes": "8"}, "lanes"), ({"lanes": True}, "lanes"),
                                           ({"encoding": "booth"}, "encoding")])
def test_config_validation(kwargs, field):
    with pytest.raises(ConfigError) as e:
        EncoderConfig(**kwargs)
    assert e.value.field == field
    assert f"EncoderConfig.{field}" in str(e.value) and "allowed" in str(e.value)


def test_config_defaults_are_the_papers():
    assert EncoderConfig() == EncoderConfig(lanes=8, encoding="csd")

"""Golden model of FPRaker's base-delta compression (spec docs/specs/fpraker.md §7, TV17)."""

import numpy as np
import pytest

from golden import ConfigError
from golden.fpraker import BDCConfig
from golden.fpraker.bdc import (
    BDCStream, decode, delta_width, encode, footprint, from_words, group_bits, group_header,
    to_words,
)


def bf16(sign, exp, man):
    return np.array([(s << 15) | (e << 7) | m for s, e, m in zip(sign, exp, man)], np.uint16)


def with_exps(exps, rng=None):
    """Values with the given exponent fields and random signs and mantissas."""
    rng = rng or np.random.default_rng(7)
    n = len(exps)
    return bf16(rng.integers(0, 2, n), exps, rng.integers(0, 128, n))


# ---------------------------------------------------------------- independent oracle (bit strings)


def oracle_width(d):
    if d == 0:
        return 0
    w = 1
    while not -(1 << (w - 1)) <= d <= (1 << (w - 1)) - 1:
        w += 1
    return w


def oracle_encode(values, group=32):
    """§7 written from its definition: fields as LSB-first '0'/'1' text, groups concatenated."""
    def field(v, w):
        return "".join(str((v >> j) & 1) for j in range(w))

    out = ""
    vals = [int(v) for v in values]
    for g in range(0, len(vals), group):
        grp = vals[g:g + group]
        exps = [(v >> 7) & 0xFF for v in grp]
        sms = [((v >> 8) & 0x80) | (v & 0x7F) for v in grp]
        delta = max([oracle_width(e - exps[0]) for e in exps[1:]], default=0)
        header = delta if delta <= 6 else 7
        out += field(header, 3) + field(exps[0], 8) + field(sms[0], 8)
        for e, sm in zip(exps[1:], sms[1:]):
            out += field(sm, 8)
            out += field(e, 8) if header == 7 else field((e - exps[0]) % (1 << header), header)
    return out


def stream_text(s: BDCStream) -> str:
    return "".join(str(b) for b in np.unpackbits(s.data, bitorder="little")[:s.bits])


# ---------------------------------------------------------------- TV17


def test_tv17_one_exponent_is_delta_0_and_267_bits():
    x = with_exps([130] * 32)
    assert group_header(x) == 0
    assert group_bits(x) == 267 and round(100 * 267 / 512, 1) == 52.1
    assert footprint(x).exp_bits == 3 + 8


def test_tv17_rest_at_e_or_e_minus_1_is_delta_1():
    exps = [120] + [120, 119] * 15 + [119]
    x = with_exps(exps)
    assert group_header(x) == 1
    assert footprint(x).exp_bits == 42 == 3 + 8 + 31
    assert group_bits(x) == 42 + 32 * 8


def test_tv17_any_plus_1_delta_is_delta_2():
    x = with_exps([120] * 31 + [121])
    assert group_header(x) == 2
    assert group_bits(x) == 3 + 8 + 32 * 8 + 31 * 2


def test_tv17_one_zero_among_exponents_near_127_escapes():
    exps = [127, 126, 128, 127] * 8
    exps[13] = 0
    x = with_exps(exps)
    x[13] = 0                                            # +0.0
    assert group_header(x) == 7
    assert footprint(x).exp_bits == 259 == 3 + 8 + 31 * 8
    assert footprint(x).header_hist.tolist() == [0] * 7 + [1]


def test_tv17_compress_then_decompress_is_the_identity():
    rng = np.random.default_rng(1)
    x = rng.integers(0, 1 << 16, 32 * 50 + 17).astype(np.uint16)
    assert np.array_equal(decode(encode(x), x.size), x)


# ---------------------------------------------------------------- the definition


def test_delta_width_matches_the_definition_everywhere():
    d = np.arange(-255, 256)
    assert delta_width(d).tolist() == [oracle_width(int(v)) for v in d]
    assert [delta_width(v) for v in (0, -1, 1, -2, 2, -32, 31, 32, -33)] == [0, 1, 2, 2, 3, 6, 6,
                                                                              7, 7]
    with pytest.raises(ValueError, match="outside -255..255"):
        delta_width(256)


@pytest.mark.parametrize("delta", range(8))
def test_each_header_round_trips_bit_exactly(delta):
    """Exponent spreads hitting each delta 0..6 and the escape exactly (both extremes)."""
    rng = np.random.default_rng(delta)
    base = 128
    lo, hi = (-(1 << (delta - 1)), (1 << (delta - 1)) - 1) if delta else (0, 0)
    if delta == 7:
        lo, hi = -64, 63
    for _ in range(20):
        d = rng.integers(lo, hi + 1, 31)
        d[rng.integers(0, 31)] = lo if rng.random() < 0.5 else hi
        x = with_exps([base] + list(base + d), rng)
        assert group_header(x) == delta
        s = encode(x)
        assert stream_text(s) == oracle_encode(x)
        assert s.bits == 3 + 8 + 32 * 8 + 31 * (8 if delta == 7 else delta) == group_bits(x)
        assert np.array_equal(decode(s, 32), x)


@pytest.mark.parametrize("group", [2, 3, 7, 32, 64])
def test_random_tensors_match_the_oracle_and_round_trip(group):
    rng = np.random.default_rng(group)
    cfg = BDCConfig(group=group)
    for n in (1, group - 1, group, group + 1, 5 * group + 3, 1000):
        for kind in ("uniform", "clustered"):
            if kind == "uniform":
                x = rng.integers(0, 1 << 16, n).astype(np.uint16)
            else:
                x = with_exps(np.clip(127 + rng.integers(-3, 3, n), 0, 255), rng)
            s = encode(x, cfg)
            assert stream_text(s) == oracle_encode(x, group)
            assert s.bits == footprint(x, cfg).bits
            assert np.array_equal(decode(s, n, cfg), x)


def test_adversarial_patterns_round_trip():
    every = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    special = np.array([0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0xFFFF, 0x0001, 0x807F], np.uint16)
    for x in (every, every[::-1].copy(), np.zeros(100, np.uint16), np.tile(special, 9)):
        assert np.array_equal(decode(encode(x), x.size), x)
    assert footprint(np.zeros(64, np.uint16)).bits == 2 * 267


def test_footprint_counts_the_formula_and_adds_by_chunks():
    rng = np.random.default_rng(3)
    x = with_exps(np.clip(120 + rng.integers(-20, 20, 32 * 40 + 9), 0, 255), rng)
    fp = footprint(x)
    want = sum(group_bits(x[g:g + 32]) for g in range(0, x.size, 32))
    assert fp.bits == want and fp.groups == 41 and fp.count == x.size
    assert fp.header_hist.sum() == 41
    assert fp.exp_bits == fp.bits - 8 * x.size
    assert fp.ratio == fp.bits / (16 * x.size) and fp.bits_per_value == fp.bits / x.size
    assert footprint(x[:320]) + footprint(x[320:]) == fp
    with pytest.raises(ValueError, match="not a whole number of groups"):
        footprint(x[:321]) + footprint(x[321:])
    assert footprint(np.zeros(0, np.uint16)).bits == 0


def test_partial_final_group_has_the_same_layout_with_fewer_values():
    x = with_exps([100, 101, 99, 100, 100])
    cfg = BDCConfig(group=4)
    s = encode(x, cfg)
    # group 0: 4 values, delta 2; group 1: one value, header 0, no deltas
    assert s.bits == (3 + 8 + 32 + 3 * 2) + (3 + 8 + 8)
    assert stream_text(s)[-19:-16] == "000"
    assert np.array_equal(decode(s, 5, cfg), x)


def test_words_are_the_little_endian_image_of_the_stream():
    rng = np.random.default_rng(4)
    x = rng.integers(0, 1 << 16, 77).astype(np.uint16)
    for word in (19, 32, 64):
        cfg = BDCConfig(word=word)
        s = encode(x, cfg)
        words = to_words(s, cfg)
        assert len(words) == -(-s.bits // word)
        text = stream_text(s)
        for q, w in enumerate(words):
            chunk = text[q * word:(q + 1) * word]
            assert w == sum(int(b) << j for j, b in enumerate(chunk))
        assert from_words(words, s.bits, cfg) == s


# ---------------------------------------------------------------- errors


def test_configuration_is_validated():
    for kw in ({"group": 1}, {"group": 65}, {"group": 32.0}, {"word": 18}, {"word": 129}):
        with pytest.raises(ConfigError):
            BDCConfig(**kw)


@pytest.mark.parametrize("bad, match", [
    ([1, 2, 3], "NumPy array"), (np.zeros(4, np.uint32), "dtype uint32"),
    (np.zeros((2, 2), np.uint16), "1-D"), (np.zeros(4, np.float32), "dtype float32")])
def test_bad_values_are_refused(bad, match):
    with pytest.raises(ValueError, match=match):
        encode(bad)
    with pytest.raises(ValueError, match=match):
        footprint(bad)


def test_truncated_or_overlong_streams_are_refused():
    rng = np.random.default_rng(5)
    x = rng.integers(0, 1 << 16, 70).astype(np.uint16)
    s = encode(x)
    text = stream_text(s)

    def cut(bits):
        return BDCStream(np.packbits(np.array([int(c) for c in text[:bits]], np.uint8),
                                     bitorder="little"), bits)

    with pytest.raises(ValueError, match=r"inside group 2 \(values 64..69 of 70\)"):
        decode(cut(s.bits - 1), 70)
    with pytest.raises(ValueError, match="inside the header of group 1"):
        decode(cut(515 + 10), 70)          # group 0 escapes: 3 + 8 + 32 * 8 + 31 * 8 bits
    with pytest.raises(ValueError, match="values end at bit"):
        decode(s, 69)
    with pytest.raises(ValueError, match="inside group"):
        decode(s, 71)
    padded = BDCStream(np.concatenate([s.data, [0]]).astype(np.uint8), s.bits + 8)
    with pytest.raises(ValueError, match="values end at bit"):
        decode(padded, 70)
    dirty = s.data.copy()
    dirty[-1] |= 0x80
    if s.bits % 8:
        with pytest.raises(ValueError, match="padding"):
            decode(BDCStream(dirty, s.bits), 70)
    with pytest.raises(ValueError, match="count"):
        decode(s, -1)
    with pytest.raises(ValueError, match="bytes"):
        decode(BDCStream(s.data[:-1], s.bits), 70)
    with pytest.raises(ValueError, match="padding"):
        from_words([1 << 20], 20, BDCConfig())


def test_a_non_minimal_header_decodes_and_an_out_of_range_delta_is_refused():
    # one group of 2 values written by hand with header 6: base 200, delta +31 -> 231
    def group(header, base, delta):
        fields = [(header, 3), (base, 8), (0x05, 8), (0x81, 8), (delta % 64, 6)]
        text = "".join("".join(str((v >> j) & 1) for j in range(w)) for v, w in fields)
        return BDCStream(np.packbits(np.array([int(c) for c in text], np.uint8),
                                     bitorder="little"), len(text))

    cfg = BDCConfig(group=2)
    assert decode(group(6, 200, 31), 2, cfg).tolist() == [(200 << 7) | 5,
                                                           0x8000 | (231 << 7) | 1]
    with pytest.raises(ValueError, match="exponent 256, outside 0..255"):
        decode(group(6, 225, 31), 2, cfg)
    with pytest.raises(ValueError, match="exponent -2"):
        decode(group(6, 30, -32), 2, cfg)


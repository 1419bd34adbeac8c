"""Golden model of Gecko (spec docs/specs/gecko.md §4, test vectors §8.10–§8.18)."""

import numpy as np
import pytest

from golden import ConfigError
from golden.common import BF16, FP32, fields, float_to_fp32
from golden.gecko.codec import (
    GeckoConfig, compress, decompress, exp_code, exp_decode, footprint, pack_meta, unpack_meta,
)
from golden.gecko.schrodinger import truncate_mantissa

ROW_A = [1.0, 0.5, 0.25, 3.0, 0.125, 0.75, 1.5, 0.0]
ROW_B = [-0.1, 0.2, -0.3, 0.4, 8.0, -2.5, 0.0625, 0.001]


def f32(values):
    return float_to_fp32(np.array(values, dtype=np.float32))


# ---------------------------------------------------------------- independent oracle (bit strings)


def oracle_code(E):
    """§4.3 written from its table, on Python ints."""
    if E == 0:
        return 1, 0
    if E <= 126:
        return 1, 127 - E
    return 0, E - 127


def oracle_compress(values, fmt, man_width, sign_en, fixed_width=None, lanes=8):
    """Bit-string model of §4.4/§4.5: lane bitstreams as '0'/'1' text, cut into words."""
    lw, m = fmt.width, fmt.man_bits
    vals = [int(v) for v in values] + [0] * (-len(values) % lanes)
    rows = [vals[i:i + lanes] for i in range(0, len(vals), lanes)]
    streams = [""] * lanes
    widths = []
    for row in rows:
        codes = [oracle_code((v >> m) & 0xFF) for v in row]
        orr = 0
        for _, mag in codes:
            orr |= mag
        w = orr.bit_length() if fixed_width is None else fixed_width
        widths.append(w)
        for j, v in enumerate(row):
            ds, mag = codes[j]
            s = v >> (lw - 1)
            txt = (str(s) if sign_en else "") + str(ds)
            txt += format(mag, f"0{w}b") if w else ""
            txt += format(v & ((1 << m) - 1), f"0{m}b")[:man_width]
            streams[j] += txt
    n_words = -(-len(streams[0]) // lw)
    data = [[int(streams[j].ljust(n_words * lw, "0")[q * lw:(q + 1) * lw], 2)
             for j in range(lanes)] for q in range(n_words)]
    meta_txt = "".join(format(w, "03b") for w in widths)
    meta = []
    for i in range(0, len(widths), 10):
        meta.append(int(meta_txt[3 * i:3 * i + 30].ljust(32, "0"), 2))
    return data, meta, widths


# ---------------------------------------------------------------- config


def test_config_defaults_and_resolution():
    cfg = GeckoConfig()
    got = (cfg.lanes, cfg.fmt, cfg.man_width, cfg.sign_en, cfg.fixed_width, cfg.pipeline)
    assert got == (8, "fp32", 23, True, None, 0)
    assert GeckoConfig(fmt="bf16").man_width == 7
    assert GeckoConfig(fmt="bf16") == GeckoConfig(fmt="bf16", man_width=7)


@pytest.mark.parametrize("kw, field", [
    ({"lanes": 0}, "lanes"), ({"fmt": "fp16"}, "fmt"), ({"man_width": 24}, "man_width"),
    ({"fmt": "bf16", "man_width": 8}, "man_width"), ({"man_width": -1}, "man_width"),
    ({"sign_en": 1}, "sign_en"), ({"fixed_width": 8}, "fixed_width"),
    ({"man_width": 2.0}, "man_width"), ({"pipeline": 3}, "pipeline"),
    ({"pipeline": -1}, "pipeline"),
])
def test_config_errors_name_field(kw, field):
    with pytest.raises(ConfigError) as exc:
        GeckoConfig(**kw)
    assert exc.value.field == field
    assert repr(kw[field]) in str(exc.value)


# ---------------------------------------------------------------- exponent code (§4.3, §8.10)


def test_exp_code_all_exponents_against_table():
    E = np.arange(255)
    ds, mag = exp_code(E)
    for e in range(255):
        assert (int(ds[e]), int(mag[e])) == oracle_code(e)
        assert exp_code(e) == oracle_code(e)
        assert exp_decode(*oracle_code(e)) == e
    assert np.array_equal(exp_decode(ds, mag), E)


def test_exp_code_paper_example_value_3():
    # §8.10: x = 8.0, E = 130: E - 127 = 3 is stored in 2 bits ("2 bits for the value 3")
    _, E, _ = fields(int(f32([8.0])[0]), FP32)
    assert E == 130
    ds, mag = exp_code(E)
    assert (ds, mag) == (0, 0b11) and mag.bit_length() == 2


def test_exp_code_rejects_255_and_range():
    with pytest.raises(ValueError, match="255"):
        exp_code(255)
    with pytest.raises(ValueError, match="255"):
        exp_code(np.array([3, 255]))
    with pytest.raises(ValueError, match="-1"):
        exp_code(-1)
    with pytest.raises(ValueError, match="128"):
        exp_decode(0, 128)
    with pytest.raises(ValueError, match="DS 2"):
        exp_decode(2, 0)


# ---------------------------------------------------------------- spec rows (§8.11–§8.13)


def test_row_a_codes_width_and_costs():
    E = fields(f32(ROW_A).astype(np.int64), FP32)[1]
    assert list(E) == [127, 126, 125, 128, 124, 126, 127, 0]
    ds, mag = exp_code(E)
    assert list(zip(ds.tolist(), mag.tolist())) == [
        (0, 0), (1, 1), (1, 2), (0, 1), (1, 3), (1, 1), (0, 0), (1, 0)]
    fp = footprint(f32(ROW_A), GeckoConfig())
    assert list(fp.width_hist) == [0, 0, 1, 0, 0, 0, 0, 0]
    assert fp.exp_bits_exact == 3 + 8 * 3 == 27
    assert fp.exp_bits_lit == 3 + 8 * 2 == 19
    # a literal count that let the zero contribute |0 - 127| = 127 would need 7 bits: 59
    naive = 0
    for e in E.tolist():
        naive |= abs(e - 127)
    assert 3 + 8 * naive.bit_length() == 59 != fp.exp_bits_lit


def test_row_b_codes_width_and_costs():
    E = fields(f32(ROW_B).astype(np.int64), FP32)[1]
    assert list(E) == [123, 124, 125, 125, 130, 128, 123, 117]
    ds, mag = exp_code(E)
    assert list(zip(ds.tolist(), mag.tolist())) == [
        (1, 4), (1, 3), (1, 2), (1, 2), (0, 3), (0, 1), (1, 4), (1, 10)]
    fp = footprint(f32(ROW_B), GeckoConfig())
    assert list(fp.width_hist) == [0, 0, 0, 0, 1, 0, 0, 0]
    assert (fp.exp_bits_exact, fp.exp_bits_lit) == (43, 35)


def literal_cost(bits, fmt, lanes=8):
    """§4.6 from its definition: 3 + lanes * bit_length(OR over E != 0 of |E - 127|)."""
    total = 0
    vals = [int(v) for v in bits] + [0] * (-len(bits) % lanes)
    for i in range(0, len(vals), lanes):
        orr = 0
        for v in vals[i:i + lanes]:
            E = (v >> fmt.man_bits) & 0xFF
            if E:
                orr |= abs(E - 127)
        total += 3 + lanes * orr.bit_length()
    return total


def test_literal_cost_matches_definition_on_random_data():
    rng = np.random.default_rng(7)
    bits = rng.integers(0, 1 << 32, 800, dtype=np.uint64).astype(np.uint32)
    bits = bits[(bits >> 23 & 0xFF) != 0xFF]
    bits[::5] = 0
    assert footprint(bits, GeckoConfig()).exp_bits_lit == literal_cost(bits, FP32)


def test_two_row_packing_spec_vector():
    x = f32(ROW_A + ROW_B)
    s = compress(x, GeckoConfig(man_width=2))
    assert list(s.widths) == [2, 4]
    assert s.data.dtype == np.uint32 and s.data.shape == (1, 8)
    assert [int(v) for v in s.data[0]] == [0x03480000, 0x51380000, 0x63200000, 0x19280000,
                                           0x70300000, 0x5A140000, 0x09400000, 0x41A00000]
    assert [int(v) for v in s.meta] == [0x50000000]
    # field texts of §8.13: W_A = 6, W_B = 8, lane j's word starts with field A then field B
    fa = "000000 010100 011000 000110 011100 010110 000010 010000".split()
    fb = "11010010 01001110 11001000 01001010 00001100 10000101 01010000 01101000".split()
    for j in range(8):
        assert int(s.data[0, j]) == int((fa[j] + fb[j]).ljust(32, "0"), 2)
    out = decompress(s)
    assert [int(v) for v in out] == [
        0x3F800000, 0x3F000000, 0x3E800000, 0x40400000, 0x3E000000, 0x3F400000, 0x3FC00000,
        0x00000000, 0xBDC00000, 0x3E400000, 0xBE800000, 0x3EC00000, 0x41000000, 0xC0200000,
        0x3D800000, 0x3A800000]
    assert np.array_equal(out, truncate_mantissa(x, 2))


def test_two_row_packing_bf16():
    xb = (f32(ROW_A + ROW_B) >> 16).astype(np.uint16)
    s = compress(xb, GeckoConfig(fmt="bf16", man_width=2))
    assert s.data.dtype == np.uint16 and s.data.shape == (1, 8)
    assert int(s.data[0, 0]) == 0x0348
    assert np.array_equal(decompress(s), truncate_mantissa(xb, 2, "bf16"))


def test_words_per_lane_identity_mode():
    # §8.17: man_width = 23, sign on: identity, words per lane = ceil(sum W / 32)
    rng = np.random.default_rng(3)
    x = rng.integers(0, 0x7F000000, 83, dtype=np.uint32)
    s = compress(x, GeckoConfig())
    assert np.array_equal(decompress(s), x)
    assert s.data.shape[0] == -(-int((1 + 1 + s.widths + 23).sum()) // 32)


def test_timing_fill_sequence_w12():
    # §8.18: W = 12 per row; words are complete after rows 2, 5, 7, ...
    # sign + DS + w + man = 12 with w = 2, man_width = 8; every row holds a value with |E-127| = 2
    cfg = GeckoConfig(man_width=8)
    rows = 8
    x = np.tile(f32([4.0] * 8), rows)
    s = compress(x, cfg)
    assert set(s.widths.tolist()) == {2}
    # the rows that complete a lane word, from golden's streams of the tensor's prefixes: after
    # row r the prefix holds field_bits // 32 whole words, which must already be the full
    # stream's words (a complete word never changes again)
    done = []
    for r in range(rows):
        p = compress(x[:8 * (r + 1)], cfg)
        whole = p.footprint().field_bits // 32
        assert p.data.shape[0] == -(-p.footprint().field_bits // 32)
        assert np.array_equal(p.data[:whole], s.data[:whole]), f"word changed after row {r}"
        done += [r] * (whole - len(done))
    assert done[:3] == [2, 5, 7]
    assert done == [2, 5, 7]                  # 8 rows x 12 bits = 96 bits = exactly 3 words
    assert s.data.shape[0] == 3


# ---------------------------------------------------------------- metadata


def test_meta_packing_ten_per_word():
    w = list(range(8)) + [7, 1, 5, 3]
    meta = pack_meta(w)
    assert meta.dtype == np.uint32 and meta.size == 2
    txt = "".join(format(v, "03b") for v in w[:10]) + "00"
    assert int(meta[0]) == int(txt, 2)
    assert int(meta[1]) == int(("101011").ljust(32, "0"), 2)
    assert list(unpack_meta(meta, len(w))) == w


# ---------------------------------------------------------------- oracle and property tests


def random_finite(rng, n, fmt, sign=True):
    """Random bit patterns covering every exponent 0..254 (zeros, subnormals, extremes)."""
    m = fmt.man_bits
    E = rng.integers(0, 255, n)
    E[rng.random(n) < 0.1] = 0
    man = rng.integers(0, 1 << m, n)
    man[rng.random(n) < 0.05] = 0
    s = rng.integers(0, 2, n) if sign else np.zeros(n, dtype=np.int64)
    return ((s << (fmt.width - 1)) | (E << m) | man).astype(fmt.dtype)


def clustered(rng, n, fmt, sign=True):
    """Exponents clustered near the bias, as in training tensors (so small widths occur)."""
    m = fmt.man_bits
    E = np.clip(127 + rng.integers(-6, 4, n) * (rng.random(n) < 0.8), 1, 254)
    E[rng.random(n) < 0.2] = 0
    man = rng.integers(0, 1 << m, n)
    s = rng.integers(0, 2, n) if sign else np.zeros(n, dtype=np.int64)
    return ((s << (fmt.width - 1)) | (E << m) | man).astype(fmt.dtype)


CASES = [("fp32", mw) for mw in (0, 1, 2, 3, 7, 12, 23)] + [("bf16", mw) for mw in range(8)]


@pytest.mark.parametrize("fmt_name, man_width", CASES)
@pytest.mark.parametrize("sign_en", [True, False])
def test_compress_matches_bit_string_oracle(fmt_name, man_width, sign_en):
    fmt = {"fp32": FP32, "bf16": BF16}[fmt_name]
    rng = np.random.default_rng(man_width * 2 + sign_en)
    for n, gen in ((1, clustered), (37, clustered), (61, random_finite)):
        x = gen(rng, n, fmt, sign=sign_en)
        cfg = GeckoConfig(fmt=fmt_name, man_width=man_width, sign_en=sign_en)
        s = compress(x, cfg)
        data, meta, widths = oracle_compress(x, fmt, man_width, sign_en)
        assert s.data.tolist() == data
        assert s.meta.tolist() == meta
        assert s.widths.tolist() == widths
        assert s.count == n


@pytest.mark.parametrize("fmt_name, man_width", CASES)
@pytest.mark.parametrize("sign_en", [True, False])
@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 333])
def test_roundtrip_is_truncation(fmt_name, man_width, sign_en, n):
    fmt = {"fp32": FP32, "bf16": BF16}[fmt_name]
    rng = np.random.default_rng(1000 + n + man_width)
    x = (random_finite if n % 2 else clustered)(rng, n, fmt, sign=sign_en)
    cfg = GeckoConfig(fmt=fmt_name, man_width=man_width, sign_en=sign_en)
    s = compress(x, cfg)
    out = decompress(s)
    assert out.dtype == fmt.dtype and out.shape == x.shape
    assert np.array_equal(out, truncate_mantissa(x, man_width, fmt_name))
    assert footprint(x, cfg) == s.footprint()


def test_roundtrip_all_exponents_and_zeros():
    # every biased exponent 0..254 with both signs, including +-0 and subnormals
    E = np.repeat(np.arange(255, dtype=np.uint32), 2)
    s = np.tile(np.array([0, 1], dtype=np.uint32), 255)
    x = (s << 31) | (E << 23) | np.where(E == 0, np.uint32(1), np.uint32(0x2AAAAA))
    x = np.concatenate([x, np.array([0, 0x80000000, 0x7F7FFFFF, 0x00000001], np.uint32)])
    for mw in (0, 1, 23):
        assert np.array_equal(decompress(compress(x, GeckoConfig(man_width=mw))),
                              truncate_mantissa(x, mw))


def test_lanes_parameter():
    rng = np.random.default_rng(5)
    x = random_finite(rng, 50, FP32)
    for lanes in (1, 3, 16):
        cfg = GeckoConfig(lanes=lanes, man_width=5)
        s = compress(x, cfg)
        assert s.data.shape[1] == lanes
        data, meta, widths = oracle_compress(x, FP32, 5, True, lanes=lanes)
        assert s.data.tolist() == data and s.meta.tolist() == meta
        assert np.array_equal(decompress(s), truncate_mantissa(x, 5))


# ---------------------------------------------------------------- fixed-width mode (§4.7)


def test_fixed_width_mode():
    rng = np.random.default_rng(11)
    x = clustered(rng, 45, FP32)
    E = fields(x.astype(np.int64), FP32)[1]
    x = x[(E == 0) | (np.abs(E - 127) < 8)]
    cfg = GeckoConfig(man_width=4, fixed_width=3)
    s = compress(x, cfg)
    assert s.meta.size == 0 and set(s.widths.tolist()) <= {3}
    data, _, _ = oracle_compress(x, FP32, 4, True, fixed_width=3)
    assert s.data.tolist() == data
    assert np.array_equal(decompress(s), truncate_mantissa(x, 4))
    fp = footprint(x, cfg)
    assert fp == s.footprint() and fp.meta_bits == 0
    assert fp.exp_bits_exact == fp.rows * 8 * (1 + 3) and fp.exp_bits_lit == fp.rows * 8 * 3


@pytest.mark.parametrize("fmt_name, man_width", [("fp32", 0), ("fp32", 7), ("fp32", 23),
                                                  ("bf16", 0), ("bf16", 3), ("bf16", 7)])
@pytest.mark.parametrize("sign_en", [True, False])
def test_fixed_width_zero_roundtrip(fmt_name, man_width, sign_en):
    # §4.7 with fixed_width = 0: only E = 127 (MAG 0) and zeros/subnormals (E = 0) fit; the
    # field is S? + DS + mantissa bits, with no MAG bits at all
    fmt = {"fp32": FP32, "bf16": BF16}[fmt_name]
    rng = np.random.default_rng(40 + man_width + 100 * sign_en)
    n = 203
    E = np.where(rng.random(n) < 0.3, 0, 127)
    man = rng.integers(0, 1 << fmt.man_bits, n)
    s = rng.integers(0, 2, n) if sign_en else np.zeros(n, dtype=np.int64)
    x = ((s << (fmt.width - 1)) | (E << fmt.man_bits) | man).astype(fmt.dtype)
    cfg = GeckoConfig(fmt=fmt_name, man_width=man_width, sign_en=sign_en, fixed_width=0)
    st = compress(x, cfg)
    assert st.meta.size == 0 and set(st.widths.tolist()) == {0}
    data, _, _ = oracle_compress(x, fmt, man_width, sign_en, fixed_width=0)
    assert st.data.tolist() == data
    rows = -(-n // 8)
    assert st.data.shape[0] == -(-rows * (sign_en + 1 + man_width) // fmt.width)
    assert np.array_equal(decompress(st), truncate_mantissa(x, man_width, fmt_name))
    fp = footprint(x, cfg)
    assert fp == st.footprint() and fp.meta_bits == 0 and fp.exp_bits_lit == 0
    assert fp.exp_bits_exact == rows * 8
    # the narrowest exponent that does not fit: |E - 127| = 1
    with pytest.raises(ValueError, match="fixed_width=0"):
        compress(np.concatenate([x, np.array([128 << fmt.man_bits], fmt.dtype)]), cfg)


def test_fixed_width_overflow_raises():
    x = f32([1.0, 8.0, 1.0])            # |E - 127| = 3 needs 2 bits
    compress(x, GeckoConfig(fixed_width=2))
    with pytest.raises(ValueError, match="magnitude 3"):
        compress(x, GeckoConfig(fixed_width=1))
    with pytest.raises(ValueError, match="magnitude 3"):
        footprint(x, GeckoConfig(fixed_width=1))


# ---------------------------------------------------------------- bad input


def test_bad_inputs():
    cfg = GeckoConfig()
    with pytest.raises(ValueError, match="0x7fc00000"):
        compress(np.array([0, 0x7FC00000], np.uint32), cfg)
    with pytest.raises(ValueError, match="0xff800000"):
        footprint(np.array([0xFF800000], np.uint32), cfg)
    with pytest.raises(ValueError, match="uint16"):
        compress(np.zeros(4, np.uint16), cfg)
    with pytest.raises(ValueError, match="uint16"):
        compress(np.zeros(4, np.uint32), GeckoConfig(fmt="bf16"))
    with pytest.raises(ValueError, match="shape"):
        compress(np.zeros((2, 8), np.uint32), cfg)
    with pytest.raises(ValueError, match="list"):
        compress([1, 2], cfg)
    with pytest.raises(ValueError, match="0x80000000"):
        compress(np.array([0x80000000], np.uint32), GeckoConfig(sign_en=False))


def test_decompress_rejects_short_stream():
    s = compress(f32(ROW_A + ROW_B), GeckoConfig(man_width=2))
    from dataclasses import replace
    with pytest.raises(ValueError, match="words"):
        decompress(replace(s, data=s.data[:0]))


# ---------------------------------------------------------------- footprint aggregation and speed


def test_footprint_adds_and_ratio():
    rng = np.random.default_rng(9)
    cfg = GeckoConfig(man_width=3)
    a, b = clustered(rng, 80, FP32), clustered(rng, 160, FP32)
    fa, fb = footprint(a, cfg), footprint(b, cfg)
    tot = fa + fb
    assert tot.count == 240 and tot.rows == 30
    assert tot == footprint(np.concatenate([a, b]), cfg)
    assert tot.data_bits <= fa.data_bits + fb.data_bits
    assert tot.ratio == (tot.data_bits + tot.meta_bits) / (30 * 8 * 32)
    assert 0 < fa.ratio < 1


def test_bf16_ratio_is_against_16_bit_words():
    # deliberate choice (golden.gecko.codec docstring): raw_bits uses the lane width, not §4.5's 32
    rng = np.random.default_rng(13)
    x = clustered(rng, 83, BF16)
    fp = footprint(x, GeckoConfig(fmt="bf16", man_width=2))
    assert fp.raw_bits == fp.rows * 8 * 16
    assert fp.ratio == fp.total_bits / (fp.rows * 8 * 16)


@pytest.mark.parametrize("cfg", [GeckoConfig(man_width=1), GeckoConfig(fmt="bf16", lanes=3),
                                 GeckoConfig(man_width=0, fixed_width=7)])
def test_footprint_chunks_add_up(cfg):
    rng = np.random.default_rng(21)
    x = random_finite(rng, 1000 * cfg.lanes + 5, cfg.format)
    chunks = [x[i:i + 37 * cfg.lanes] for i in range(0, x.size, 37 * cfg.lanes)]
    total = footprint(chunks[0], cfg)
    for c in chunks[1:]:
        total = total + footprint(c, cfg)
    assert total == footprint(x, cfg) == compress(x, cfg).footprint()
    other = GeckoConfig(fmt="bf16" if cfg.fmt == "fp32" else "fp32", lanes=cfg.lanes)
    alien = footprint(np.zeros(8, dtype=other.format.dtype), other)
    with pytest.raises(ValueError, match="cannot add"):
        total + alien

"""The rounding block's golden model (``golden.common.rounding``) against exact rationals.

The oracle below rounds ``Fraction`` values with ``math.floor`` per the definitions in the
module docstring; it shares no code with the model.
"""

import itertools
import math
import random
from fractions import Fraction

import numpy as np
import pytest

from golden import ConfigError
from golden.common import format_named
from golden.common.rounding import MODES, RoundConfig, round_raw


def _round_int(t: Fraction, mode: str, neg: bool, R: int, r: int) -> int:
    """A non-negative rational rounded to an integer by ``mode`` (sign for directed modes)."""
    lo = math.floor(t)
    frac = t - lo
    if mode == "rne":
        return lo + (frac > Fraction(1, 2) or (frac == Fraction(1, 2) and lo % 2 == 1))
    if mode == "rna":
        return lo + (frac >= Fraction(1, 2))
    if mode == "rtz":
        return lo
    if mode == "rdn":
        return lo + (neg and frac != 0)
    if mode == "rup":
        return lo + (not neg and frac != 0)
    if mode == "rto":
        return lo | (frac != 0)
    assert mode == "sr"
    return (math.floor(t * 2**r) + R) >> r


def oracle(cfg: RoundConfig, sig: int, exp: int, sign: int, R: int):
    """(zero, sign, exp, sig, bits, inexact, overflow, underflow) of one input, from exact
    rationals."""
    fmt = cfg.format
    if cfg.signed:
        sign = int(sig < 0)
    a = Fraction(abs(sig)) * Fraction(2) ** (exp - cfg.frac)
    neg = sign == 1
    if fmt.kind == "int":
        q = _round_int(a, cfg.mode, neg, R, cfg.rand_bits)
        inexact = q != a if cfg.mode != "rto" else a != math.floor(a)
        limit = (-fmt.min if neg else fmt.max) if fmt.signed else fmt.max
        over = q > limit
        q = min(q, limit)
        if fmt.signed and q == 0:
            sign = 0
        bits = ((-q if neg else q) % (1 << fmt.bits)) if fmt.signed else q
        return (q == 0, sign, 0, q, bits, inexact, over, False)
    P = fmt.man_bits
    if a == 0:
        return (True, sign, 0, 0, sign << (fmt.width - 1), False, False, False)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    assert Fraction(2) ** e <= a < Fraction(2) ** (e + 1)
    t = a / Fraction(2) ** (e - P)
    q = _round_int(t, cfg.mode, neg, R, cfg.rand_bits)
    inexact = t != math.floor(t)
    if q == 1 << (P + 1):
        q, e = 1 << P, e + 1
    if cfg.overflow == "wrap":
        half = 1 << (fmt.exp_bits - 1)
        e = (e + half) % (1 << fmt.exp_bits) - half
        bits = sign << (fmt.width - 1) | (e % (1 << fmt.exp_bits)) << P | q - (1 << P)
        return (False, sign, e, q, bits, inexact, False, False)
    biased = e + fmt.bias
    if biased >= fmt.exp_max:
        if cfg.overflow == "saturate":
            return (False, sign, fmt.emax, (2 << P) - 1, sign << (fmt.width - 1) | fmt.max_finite,
                    inexact, True, False)
        return (False, sign, fmt.emax + 1, 1 << P, sign << (fmt.width - 1) | fmt.inf, inexact,
                True, False)
    if biased <= 0:
        return (True, sign, 0, 0, sign << (fmt.width - 1), inexact, False, True)
    return (False, sign, e, q, sign << (fmt.width - 1) | biased << P | q - (1 << P), inexact,
            False, False)


def check(cfg, sigs, exps, signs, rands):
    got = round_raw(cfg, sigs, exps, signs, rands)
    for k, (s, e, sg, R) in enumerate(zip(sigs, exps, signs, rands)):
        want = oracle(cfg, int(s), int(e), int(sg), int(R))
        have = tuple(int(getattr(got, f)[k]) for f in got._fields)
        assert have == tuple(int(x) for x in want), (cfg, s, e, sg, R, have, want)


def _inputs(cfg, r: random.Random, n: int):
    W, X = cfg.in_width, cfg.exp_width
    sigs, exps = [], []
    for _ in range(n):
        if cfg.signed:
            s = r.randrange(-(1 << (W - 1)), 1 << (W - 1))
        elif cfg.normalized:
            s = r.choice([0, r.randrange(1 << (W - 1), 1 << W)])
        else:
            s = r.randrange(0, 1 << W) >> r.randrange(W)
        sigs.append(s)
        exps.append(r.randrange(-(1 << (X - 1)), 1 << (X - 1)))
    return sigs, exps, [r.randrange(2) for _ in range(n)], [r.randrange(1 << cfg.rand_bits)
                                                          for _ in range(n)]


CONFIGS = [
    RoundConfig(),
    RoundConfig(fmt="fp32", in_width=48, frac=46, exp_width=10),
    RoundConfig(fmt="fp16", in_width=20, signed=True, frac=12, exp_width=7),
    RoundConfig(fmt="e10m9", in_width=18, signed=True, frac=12, exp_width=12, overflow="wrap"),
    RoundConfig(fmt="bf16", in_width=10, frac=9, exp_width=10, normalized=True),
    RoundConfig(fmt="bf16", in_width=7, frac=6, exp_width=10, normalized=True),
    RoundConfig(fmt="e4m3", in_width=9, exp_width=5, frac=4, overflow="saturate"),
    RoundConfig(fmt="hfp8", in_width=6, exp_width=4, frac=0),
    RoundConfig(fmt="int8", in_width=24, frac=23, exp_width=8, overflow="saturate"),
    RoundConfig(fmt="uint4", in_width=24, frac=23, exp_width=8, rand_bits=8, overflow="saturate"),
    RoundConfig(fmt="int12", in_width=16, signed=True, frac=4, exp_width=6, rand_bits=5,
                overflow="saturate"),
    # narrow exponent inputs into wide exponent formats (the bias exceeds the input's range)
    RoundConfig(fmt="e10m9", in_width=16, frac=15, exp_width=6),
    RoundConfig(fmt="e10m9", in_width=6, signed=True, frac=0, exp_width=3, overflow="wrap"),
    RoundConfig(fmt="bf16", in_width=1, frac=0, exp_width=2),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("base", CONFIGS, ids=lambda c: f"{c.fmt}-w{c.in_width}"
                         f"{'-s' if c.signed else ''}{'-n' if c.normalized else ''}-{c.overflow}")
def test_random_inputs_match_exact_rationals(base, mode):
    cfg = RoundConfig(**{**base.__dict__, "mode": mode})
    r = random.Random(f"{cfg}")
    check(cfg, *_inputs(cfg, r, 400))


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2", "hfp8", "uint3", "int4"])
@pytest.mark.parametrize("mode", MODES)
def test_exhaustive_small_inputs(fmt, mode):
    """Every 7-bit significand (and sign), every exponent, every 3-bit random value."""
    cfg = RoundConfig(fmt=fmt, in_width=7, frac=3, exp_width=5, mode=mode, rand_bits=3,
                      overflow="saturate" if "int" in fmt else "inf")
    grid = list(itertools.product(range(128), range(-16, 16), (0, 1),
                                  range(8) if mode == "sr" else (0,)))
    sigs, exps, signs, rands = map(list, zip(*grid))
    check(cfg, sigs, exps, signs, rands)


def test_modes_on_known_values():
    """Hand-worked: 1.0000000|1 (a tie), 1.0000001|1 (tie, odd), 1.0000000|01 (below half)."""
    cfg = RoundConfig(fmt="bf16", in_width=9, frac=8, exp_width=6)
    want = {  # (sig, sign) -> {mode: bf16 bits}
        (0b100000001, 0): dict(rne=0x3F80, rna=0x3F81, rtz=0x3F80, rdn=0x3F80, rup=0x3F81,
                               rto=0x3F81),
        (0b100000011, 0): dict(rne=0x3F82, rna=0x3F82, rtz=0x3F81, rdn=0x3F81, rup=0x3F82,
                               rto=0x3F81),
        (0b100000001, 1): dict(rne=0xBF80, rna=0xBF81, rtz=0xBF80, rdn=0xBF81, rup=0xBF80,
                               rto=0xBF81),
        (0b111111111, 0): dict(rne=0x4000, rna=0x4000, rtz=0x3FFF, rdn=0x3FFF, rup=0x4000,
                               rto=0x3FFF),
    }
    for (sig, sign), modes in want.items():
        for mode, bits in modes.items():
            c = RoundConfig(**{**cfg.__dict__, "mode": mode})
            assert int(round_raw(c, sig, 0, sign).bits) == bits, (sig, sign, mode)


def test_range_edges_bf16():
    cfg = RoundConfig(fmt="bf16", in_width=8, frac=7, exp_width=10, normalized=True)
    # 2**127 * 1.9921875 is the largest finite bf16; 2**128 overflows; 2**-126 is the
    # smallest normal, 2**-127 flushes to a signed zero
    assert int(round_raw(cfg, 0xFF, 127).bits) == 0x7F7F
    assert int(round_raw(cfg, 0x80, 128).bits) == 0x7F80
    assert int(round_raw(cfg, 0x80, 128, 1).bits) == 0xFF80
    sat = RoundConfig(**{**cfg.__dict__, "overflow": "saturate"})
    assert int(round_raw(sat, 0x80, 128, 1).bits) == 0xFF7F
    assert int(round_raw(cfg, 0x80, -126).bits) == 0x0080
    r = round_raw(cfg, 0x80, -127, 1)
    assert int(r.bits) == 0x8000 and bool(r.zero) and bool(r.underflow)
    # rounding up into the next binade decides overflow after rounding
    up = RoundConfig(fmt="bf16", in_width=9, frac=8, exp_width=10, normalized=True)
    assert int(round_raw(up, 0x1FF, 127).bits) == 0x7F80
    assert int(round_raw(up, 0x1FF, -127).bits) == 0x0080     # 2**-127 * 1.998 -> 2**-126


def test_integer_targets_clamp_and_keep_signs():
    u4 = RoundConfig(fmt="uint4", in_width=24, frac=23, exp_width=8, mode="rtz",
                     overflow="saturate")
    # FAST-style: M = 1.5 * 2**23 at exp 3 -> 12; at exp 4 -> 24 clamps to 15
    r = round_raw(u4, [0xC00000, 0xC00000, 0xC00000, 0], [3, 4, -30, 0], [1, 0, 1, 1])
    assert r.sig.tolist() == [12, 15, 0, 0] and r.sign.tolist() == [1, 0, 1, 1]
    assert r.overflow.tolist() == [False, True, False, False]
    i8 = RoundConfig(fmt="int8", in_width=16, signed=True, frac=0, exp_width=6, mode="rne",
                     overflow="saturate")
    r = round_raw(i8, [127, 128, -128, -129, -300, 300], 0)
    assert r.bits.tolist() == [127, 127, 0x80, 0x80, 0x80, 127]
    assert r.overflow.tolist() == [False, True, False, True, True, True]


def test_stochastic_rounding_is_unbiased_on_its_grid():
    """Averaged over every random value, SR returns the exact value (within its r-bit grid)."""
    cfg = RoundConfig(fmt="uint6", in_width=16, frac=8, exp_width=6, mode="sr", rand_bits=4,
                      overflow="saturate")
    r = random.Random(7)
    for _ in range(50):
        sig = r.randrange(1 << 12) << 4        # 4 bits below the LSB: exactly on the grid
        out = round_raw(cfg, np.full(16, sig), 0, 0, np.arange(16))
        mean = Fraction(int(out.sig.sum()), 16)
        exact = Fraction(sig, 1 << 8)
        assert mean == exact or out.overflow.any(), (sig, mean, exact)


def test_wrap_keeps_the_exponent_modulo():
    cfg = RoundConfig(fmt="e4m3", in_width=4, frac=0, exp_width=8, overflow="wrap")
    r = round_raw(cfg, [8, 8], [4, 5])    # 8 * 2**5 = 2**8: exp 8 wraps to -8 in 4 bits
    assert r.exp.tolist() == [7, -8]


@pytest.mark.parametrize("changes, needle", [
    ({"fmt": "bf17"}, "fmt"), ({"fmt": "e4m3", "normalized": True, "signed": True}, "normalized"),
    ({"fmt": "int8", "overflow": "wrap"}, "overflow"), ({"fmt": "int8"}, "overflow"),
    ({"mode": "rnd"}, "mode"), ({"in_width": 57}, "in_width"), ({"rand_bits": 0}, "rand_bits"),
    ({"fmt": "int8", "normalized": True, "overflow": "saturate"}, "normalized"),
    ({"signed": 1}, "signed"), ({"fmt": "e11m52"}, "62 bits"), ({"fmt": "e1m3"}, "exponent bits"),
    ({"fmt": format_named("bf16")}, "a string"),
])
def test_bad_configurations(changes, needle):
    with pytest.raises(ConfigError, match=needle):
        RoundConfig(**changes)


def test_bad_inputs_are_errors():
    cfg = RoundConfig(fmt="bf16", in_width=8, frac=7, exp_width=6, normalized=True)
    with pytest.raises(ValueError, match="sig 256"):
        round_raw(cfg, 256, 0)
    with pytest.raises(ValueError, match="exp 32"):
        round_raw(cfg, 128, 32)
    with pytest.raises(ValueError, match="bit 7 clear"):
        round_raw(cfg, 0x7F, 0)


def test_format_names():
    assert format_named("e8m7").width == 16 and format_named("bf16").man_bits == 7
    assert format_named("hfp8").width == 7
    assert format_named("uint4").max == 15 and format_named("int12").min == -2048
    with pytest.raises(ValueError, match="unknown number format"):
        format_named("float8")


# ---------------------------------------------------------------------------------------------
# convert_float: one float format rounded into another


def _convert_oracle(bits: np.ndarray, src, dst, overflow: str) -> np.ndarray:
    """Finite ``src`` patterns rounded into ``dst`` through float64 (every value involved is
    exact in it): RNE at ``dst``'s precision with an unbounded exponent (``np.frexp``,
    ``np.rint``), then the range (FTZ below the smallest normal, Inf or saturation above)."""
    sign = (bits >> (src.width - 1)) & 1
    e = (bits >> src.man_bits) & src.exp_max
    man = bits & ((1 << src.man_bits) - 1)
    v = np.where(e == 0, 0.0, np.ldexp(1.0 + man / 2.0 ** src.man_bits, e - src.bias))
    _, ex = np.frexp(np.where(v == 0, 1.0, v))                   # v = f * 2**ex, f in [0.5, 1)
    ulp = np.ldexp(1.0, ex - 1 - dst.man_bits)
    r = np.rint(v / ulp) * ulp                                     # ties to even
    _, rex = np.frexp(np.where(r == 0, 1.0, r))
    E = rex - 1                                                    # r = 1.m * 2**E
    field = np.clip(E + dst.bias, 1, dst.exp_max - 1)
    mant = np.rint(np.ldexp(r, dst.man_bits - E)).astype(np.int64) - (1 << dst.man_bits)
    out = (field.astype(np.int64) << dst.man_bits) | mant
    over = (r != 0) & (E > dst.emax)
    out = np.where(over, dst.inf if overflow == "inf" else dst.max_finite, out)
    out = np.where((v == 0) | (E < dst.emin), 0, out)
    return out | (sign << (dst.width - 1))


@pytest.mark.parametrize("dst", ["fp16", "hfp8", "e4m3", "e5m2", "bf16", "fp32"])
@pytest.mark.parametrize("overflow", ["inf", "saturate"])
def test_convert_float_every_bf16_pattern(dst, overflow):
    from golden.common.rounding import convert_float

    src, fmt = format_named("bf16"), format_named(dst)
    bits = np.arange(1 << 16, dtype=np.int64)
    got = convert_float(bits, "bf16", dst, overflow=overflow)
    finite = ((bits >> 7) & 0xFF) != 0xFF
    assert np.array_equal(got[finite], _convert_oracle(bits[finite], src, fmt, overflow))
    # Inf stays Inf, NaN becomes the quiet NaN, each with its sign
    assert convert_float(np.array([0x7F80, 0xFF80, 0x7FC1, 0xFF81]), "bf16", dst).tolist() == [
        fmt.inf, fmt.inf | 1 << (fmt.width - 1), fmt.inf | 1 << (fmt.man_bits - 1),
        fmt.inf | 1 << (fmt.man_bits - 1) | 1 << (fmt.width - 1)]


def test_convert_float_fp16_agrees_with_numpy_in_the_normal_range():
    from golden.common.rounding import convert_float

    bits = np.arange(1 << 16, dtype=np.int64)
    bits = bits[((bits >> 7) & 0xFF) != 0xFF]
    with np.errstate(over="ignore"):
        ref = (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float16)
    normal = (np.abs(ref) >= np.float16(2.0 ** -14)) | (ref == 0)
    got = convert_float(bits, "bf16", "fp16")
    assert np.array_equal(got[normal], ref[normal].view(np.uint16).astype(np.int64))
    # below fp16's normal range: a signed zero (FTZ) where IEEE keeps a subnormal
    assert np.array_equal(got[~normal], (bits[~normal] >> 15) << 15)


def test_convert_float_hand_values():
    from golden.common.rounding import convert_float

    # hfp8 (e4m2, bias 7): 1.0, -1.5, 224 (largest), 240 (the tie above 224: to even, 256, which
    # overflows), 2**-6 (smallest normal), 1.125 (the tie between 1.0 and 1.25: to even, 1.0),
    # 1.375 (to even, 1.5)
    x = np.array([0x3F80, 0xBFC0, 0x4360, 0x4370, 0x3C80, 0x3F90, 0x3FB0])
    assert convert_float(x, "bf16", "hfp8").tolist() == [0x1C, 0x5E, 0x3B, 0x3C, 0x04, 0x1C, 0x1E]
    assert convert_float(x, "bf16", "hfp8", overflow="saturate")[3] == 0x3B
    with pytest.raises(ValueError, match="not a named float"):
        convert_float(x, "bf16", "int8")
    with pytest.raises(ValueError, match="outside"):
        convert_float(np.array([1 << 16]), "bf16", "fp16")

"""Testbench of the rounding block (``common.round``) against ``golden.common.rounding``.

At ``pipeline = 0`` the block is combinational: each vector is driven, settles, and every
output field (``zero``,
``sign``, ``exp``, ``sig``, the packed ``bits``, ``inexact``, ``overflow``, ``underflow``) is
compared with :func:`golden.common.rounding.round_raw`.  Vectors aim at what rounding gets
wrong: ties and near-ties, all-ones significands (a carry into the next binade), exponents at
the format's overflow and underflow edges, the largest negative two's complement input, zero.
Exactly representable values are also checked against their packed fields computed from the
format directly (no rounding model involved), in every mode.  At ``pipeline = d > 0`` the
same vectors go in back to back, one per cycle, and each vector's outputs are checked exactly
``d`` cycles later (:mod:`tb.common.latency`): a block a cycle early or late fails.
"""

import cocotb
import numpy as np
from golden.common.rounding import RoundConfig, round_raw

from . import config_from_env, rng, sint, test_size, uint
from .latency import apply_vectors, begin

FIELDS = ("zero", "sign", "exp", "sig", "bits", "inexact", "overflow", "underflow")


def _ports(dut, cfg: RoundConfig):
    fields = [f for f in FIELDS if f != "exp" or cfg.format.kind == "float"]
    return {f: getattr(dut, f"o__{f}") for f in fields}


async def apply(dut, cfg: RoundConfig, sig, exp, sign, rand, where: str) -> None:
    """Drive every vector and compare every output with the golden model."""
    want = round_raw(cfg, sig, exp, sign, rand)
    outs = _ports(dut, cfg)

    def drive(k):
        dut.i__sig.value = int(sig[k])
        dut.i__exp.value = int(exp[k])
        if not cfg.signed:
            dut.i__sign.value = int(sign[k])
        if cfg.mode == "sr":
            dut.i__rand.value = int(rand[k])

    def check(k):
        for name, handle in outs.items():
            got = sint(handle) if name == "exp" else uint(handle)
            ref = int(getattr(want, name)[k])
            inputs = (f"sig={int(sig[k])} exp={int(exp[k])}"
                      + ("" if cfg.signed else f" sign={int(sign[k])}")
                      + (f" rand={int(rand[k])}" if cfg.mode == "sr" else ""))
            assert got == ref, f"{where} vector {k}: {inputs}: {name} = {got}, golden {ref} ({cfg})"

    await apply_vectors(dut, cfg.pipeline, len(sig), drive, check)


def vectors(cfg: RoundConfig, gen: np.random.Generator, n: int):
    """Random inputs biased toward rounding boundaries and the format's range edges."""
    W, X, fmt = cfg.in_width, cfg.exp_width, cfg.format
    lead = gen.integers(0, W, n)                        # position of the leading one
    if cfg.normalized:
        lead[:] = W - 1
    mag = (np.int64(1) << lead) | (gen.integers(0, 1 << 62, n) & ((np.int64(1) << lead) - 1))
    kind = gen.integers(0, 6, n)
    P = fmt.man_bits if fmt.kind == "float" else 0
    cut = np.clip(lead - P, 0, 62)                      # bits under the kept LSB (floats)
    half = np.where(cut > 0, np.int64(1) << np.clip(cut - 1, 0, 62), 0)
    keep = (mag >> cut) << cut
    mag = np.where(kind == 1, keep | half, mag)                       # a tie
    mag = np.where(kind == 2, (np.int64(1) << (lead + 1)) - 1, mag)  # all ones: carry
    mag = np.where(kind == 3, keep | np.maximum(half - 1, 0), mag)    # just under a tie
    mag = np.where(kind == 4, 0, mag)
    mag = np.where(gen.random(n) < 0.02, (np.int64(1) << W) - 1, mag)
    sign = gen.integers(0, 2, n)
    if cfg.signed:
        mag = np.minimum(mag, (np.int64(1) << (W - 1)) - 1)
        sig = np.where(sign == 1, -mag, mag)
        sig = np.where(gen.random(n) < 0.02, -(np.int64(1) << (W - 1)), sig)
    else:
        sig = mag
    lo, hi = -(1 << (X - 1)), (1 << (X - 1)) - 1
    exp = gen.integers(lo, hi + 1, n)
    # exponents that put the result at the range edges: value = mag * 2**(exp - frac)
    if fmt.kind == "float":
        edges = np.array([fmt.emin - 1, fmt.emin, fmt.emax, fmt.emax + 1])
    else:
        edges = np.array([0, -1, fmt.bits - 1, fmt.bits])
    target = gen.choice(edges, n) + gen.integers(-1, 2, n)
    near = np.clip(target - lead + cfg.frac, lo, hi)
    exp = np.where(gen.random(n) < 0.5, near, exp)
    rand = gen.integers(0, 1 << cfg.rand_bits, n)
    return sig, exp, sign, rand


@cocotb.test()
async def random_and_boundary_vectors(dut):
    """The unit's test size in vectors (``TRAINFAB_TEST_SIZE``), half at the range edges."""
    cfg = config_from_env(RoundConfig)
    await begin(dut, cfg.pipeline)
    gen = np.random.default_rng(rng("random_and_boundary_vectors").getrandbits(64))
    await apply(dut, cfg, *vectors(cfg, gen, test_size()), "random")


@cocotb.test()
async def exhaustive_small_inputs(dut):
    """Narrow inputs (up to 10 bits): every significand and sign at edge and random exponents;
    in mode sr every significand with random values."""
    cfg = config_from_env(RoundConfig)
    await begin(dut, cfg.pipeline)
    r = rng("exhaustive_small_inputs")
    W = cfg.in_width
    if W > 10:
        W = 10   # the low 10 bits only: the block's wide paths are the random test's
    sigs = np.arange(-(1 << (W - 1)) if cfg.signed else 0,
                     (1 << (W - 1)) if cfg.signed else 1 << W, dtype=np.int64)
    if cfg.normalized:
        sigs = np.concatenate([[0], sigs[sigs >= (1 << (W - 1))]]) << (cfg.in_width - W)
    gen = np.random.default_rng(r.getrandbits(64))
    lo, hi = -(1 << (cfg.exp_width - 1)), (1 << (cfg.exp_width - 1)) - 1
    for rep in range(3):
        exp = gen.integers(lo, hi + 1, sigs.size)
        sign = np.full(sigs.size, rep % 2)
        rand = gen.integers(0, 1 << cfg.rand_bits, sigs.size)
        await apply(dut, cfg, sigs, exp, sign, rand, f"exhaustive pass {rep}")


def _exact_float(cfg: RoundConfig, r):
    """A value the float target holds exactly: ``(sig, exp, sign, expected fields)`` or None."""
    fmt, W = cfg.format, cfg.in_width
    P = fmt.man_bits
    room = W - 1 if cfg.signed else W               # magnitude bits the input can carry
    top = min(room, P + 1) if cfg.normalized else r.randint(1, min(room, P + 1))
    man = r.randrange(1 << (top - 1), 1 << top)     # ``top`` significant bits
    smax = room - top
    if cfg.overflow == "wrap":
        elo, ehi = -(1 << (fmt.exp_bits - 1)), (1 << (fmt.exp_bits - 1)) - 1
    else:
        elo, ehi = fmt.emin, fmt.emax
    # value = man * 2**(e - top + 1) = sig * 2**(exp - frac), sig = man << shift
    elo = max(elo, cfg.exp_min + top - 1 - cfg.frac)
    ehi = min(ehi, cfg.exp_max + top - 1 - cfg.frac + smax)
    if elo > ehi:
        return None
    e = r.randint(elo, ehi)
    slo = max(0, e - top + 1 + cfg.frac - cfg.exp_max)
    shi = min(smax, e - top + 1 + cfg.frac - cfg.exp_min)
    shift = cfg.in_width - top if cfg.normalized else r.randint(slo, shi)
    if not slo <= shift <= shi:
        return None
    sign = r.randrange(2)
    field = e % (1 << fmt.exp_bits) if cfg.overflow == "wrap" else e + fmt.bias
    sig = man << (P + 1 - top)
    bits = (sign << (fmt.width - 1)) | (field << P) | (sig & ((1 << P) - 1))
    want = dict(zero=0, sign=sign, exp=e, sig=sig, bits=bits, inexact=0, overflow=0, underflow=0)
    return man << shift, e - top + 1 + cfg.frac - shift, sign, want


def _exact_int(cfg: RoundConfig, r):
    """An integer the integer target holds exactly, placed anywhere the input can carry it
    (left shifts included): ``(sig, exp, sign, expected fields)`` or None."""
    fmt, W = cfg.format, cfg.in_width
    room = W - 1 if cfg.signed else W
    sign = r.randrange(2)
    limit = (-fmt.min if sign else fmt.max) if fmt.signed else fmt.max
    q = r.randint(1, min(limit, (1 << room) - 1) << r.randrange(0, 8))
    if q > limit:
        q = limit
    tz = (q & -q).bit_length() - 1
    # sig = q * 2**-t with exp = frac + t: t <= trailing zeros, sig within the input
    tlo = max(q.bit_length() - room, cfg.exp_min - cfg.frac)
    thi = min(tz, cfg.exp_max - cfg.frac)
    if tlo > thi:
        return None
    t = r.randint(tlo, thi)
    sig = q >> t if t >= 0 else q << -t
    out_sign = sign if not fmt.signed else sign
    bits = ((-q if sign else q) % (1 << fmt.bits)) if fmt.signed else q
    want = dict(zero=0, sign=out_sign, sig=q, bits=bits, inexact=0, overflow=0, underflow=0)
    return sig, cfg.frac + t, sign, want


@cocotb.test()
async def representable_values_are_exact(dut):
    """Values the target holds exactly come out unchanged, every output field, in every mode:
    the expected fields are built here from the format, not by the rounding model."""
    cfg = config_from_env(RoundConfig)
    await begin(dut, cfg.pipeline)
    r = rng("representable_values_are_exact")
    make = _exact_float if cfg.format.kind == "float" else _exact_int
    outs = _ports(dut, cfg)
    vectors = []
    tries = 0
    while len(vectors) < 300:
        tries += 1
        assert tries < 3000, f"found only {len(vectors)} exactly representable inputs ({cfg})"
        v = make(cfg, r)
        if v is not None:
            vectors.append((*v, r.randrange(1 << cfg.rand_bits) if cfg.mode == "sr" else 0))

    def drive(k):
        sig, exp, sign, _, rand = vectors[k]
        dut.i__sig.value = -sig if cfg.signed and sign else sig
        if not cfg.signed:
            dut.i__sign.value = sign
        dut.i__exp.value = exp
        if cfg.mode == "sr":
            dut.i__rand.value = rand

    def check(k):
        sig, exp, sign, want, _ = vectors[k]
        for name, handle in outs.items():
            got = sint(handle) if name == "exp" else uint(handle)
            assert got == want[name], (f"sig={'-' if cfg.signed and sign else ''}{sig} "
                                       f"exp={exp} sign={sign}: {name} = {got}, expected "
                                       f"{want[name]} ({cfg})")

    await apply_vectors(dut, cfg.pipeline, len(vectors), drive, check)

"""Independent test oracles for the PE golden models (spec ``docs/specs/fpraker.md`` §1, §2.2, §3.3,
§11.6), written from the spec text in scalar Python ints.

Nothing here imports ``golden``: these functions are the reference the vectorized golden models
are compared against bit for bit, so they must not share code with them.  The term encoder is the
textbook NAF digit loop (not the spec's ``3n`` recoder that ``golden`` uses).
"""

import dataclasses
from fractions import Fraction


def bf16_value(x: int) -> Fraction:
    """Exact value of a bf16 bit pattern, denormals flushed (spec §1.3)."""
    e = (x >> 7) & 0xFF
    if e == 0:
        return Fraction(0)
    return (-1) ** (x >> 15) * Fraction(128 + (x & 0x7F), 128) * Fraction(2) ** (e - 127)


def ref_terms(sig: int, encoding: str):
    """Terms ``(t, sign)`` of an 8-bit significand, MSB first (spec §2.2: t = 7 - j)."""
    if encoding == "binary":
        return [(7 - j, 1) for j in range(7, -1, -1) if sig >> j & 1]
    digits, j, x = {}, 0, sig
    while x:
        if x & 1:
            d = 2 - (x & 3)        # +1 when x = 1 mod 4, -1 when x = 3 mod 4
            x -= d
            digits[j] = d
        x >>= 1
        j += 1
    return [(7 - j, digits[j]) for j in sorted(digits, reverse=True)]


def rto(x: int, s: int) -> int:
    """RTO(x, s) of spec §3.3: |x| >> s with the sticky OR-ed into the LSB, sign restored."""
    q = abs(x) >> s
    if abs(x) & ((1 << s) - 1):
        q |= 1
    return -q if x < 0 else q


def rto_or_shl(x: int, s: int) -> int:
    return x << -s if s <= 0 else rto(x, s)


def ref_norm_rne(X: int, E: int, P: int, F: int):
    """NORM_RNE(X, E) of spec §3.3 → (zero, sign, exp, sig)."""
    if X == 0:
        return (True, 0, 0, 0)
    m = abs(X)
    n = m.bit_length() - 1
    e = E + n - F
    s = n - P
    if s > 0:
        q, r, half = m >> s, m & ((1 << s) - 1), 1 << (s - 1)
        if r > half or (r == half and q & 1):
            q += 1
        if q >> (P + 1):
            q >>= 1
            e += 1
    else:
        q = m << -s
    return (False, int(X < 0), e, q)


def ref_read_out(acc, P: int, out_round: str) -> int:
    """Read-out of spec §1.2/§1.3: 7-bit fraction (truncated or RNE), ±Inf at a biased
    exponent >= 255, ±0 at <= 0."""
    zero, sign, exp, sig = acc
    if zero:
        return 0
    if P >= 7:
        q = sig >> (P - 7)
        r = sig & ((1 << (P - 7)) - 1)
        half = 1 << (P - 8) if P > 7 else 0
        if out_round == "rne" and P > 7 and (r > half or (r == half and q & 1)):
            q += 1
    else:
        q = sig << (7 - P)
    if q >> 8:
        q >>= 1
        exp += 1
    biased = exp + 127
    if biased >= 255:
        return sign << 15 | 0x7F80
    if biased <= 0:
        return sign << 15
    return sign << 15 | biased << 7 | (q & 0x7F)


def _lanes_of(a, b, L, encoding):
    a = list(a) + [0] * (L - len(a))
    b = list(b) + [0] * (L - len(b))
    lanes = []
    for x, y in zip(a, b):
        ea, eb = (x >> 7) & 0xFF, (y >> 7) & 0xFF
        assert ea != 255 and eb != 255
        active = ea != 0 and eb != 0
        lanes.append(dict(abe=(ea - 127) + (eb - 127), ps=(x >> 15) ^ (y >> 15),
                          sigb=128 + (y & 0x7F),
                          terms=ref_terms(128 + (x & 0x7F), encoding) if active else [],
                          done=eb == 0))
    return lanes


def ref_pe_group(acc, a, b, cfg, masks=()):
    """Spec §3.3 for one group: returns (acc, cycles, per-cycle trace).

    ``acc`` is ``(zero, sign, exp, sig)``; ``masks`` per-cycle int lane masks (later cycles: all
    lanes).  Each trace entry is ``(E, base, processed, dropped_a, dropped_b, k, acc)`` with
    ``E``/``base`` ``None`` when undefined and ``k`` a dict lane → k of the eligible lanes.
    """
    L, F, P, KMAX, DMAX = cfg.lanes, cfg.frac_bits, cfg.keep_bits, cfg.kmax, cfg.dmax
    lanes = _lanes_of(a, b, L, cfg.encoding)
    zero, sign, eacc, sig = acc
    trace = []
    while True:
        # complete at the start of a cycle, but every group takes at least one cycle
        if trace and all(ln["done"] or not ln["terms"] for ln in lanes):
            break
        c = len(trace)
        mask = masks[c] if c < len(masks) else (1 << L) - 1
        elig = [i for i, ln in enumerate(lanes)
                if ln["terms"] and not ln["done"] and mask >> i & 1]
        cands = [lanes[i]["abe"] - lanes[i]["terms"][0][0] for i in elig]
        if not zero:
            cands.append(eacc)
        if not cands:
            trace.append((None, None, (), (), (), {}, (zero, sign, eacc, sig)))
            continue
        E = max(cands)
        k = {i: E - lanes[i]["abe"] + lanes[i]["terms"][0][0] for i in elig}
        assert all(v >= 0 for v in k.values())
        ob_a = tuple(i for i in elig if k[i] > KMAX)
        for i in ob_a:
            lanes[i]["done"] = True
        run = [i for i in elig if k[i] <= KMAX]
        if not run:
            trace.append((E, None, (), ob_a, (), k, (zero, sign, eacc, sig)))
            continue
        base = min(k[i] for i in run)
        proc = [i for i in run if k[i] - base <= DMAX]
        T = 0
        for i in proc:
            ln = lanes[i]
            neg = ln["ps"] ^ (ln["terms"][0][1] < 0)
            v = ln["sigb"] << (DMAX - (k[i] - base))
            T += -v if neg else v
        sh = F - 7 - DMAX - base
        Tg = T << sh if sh >= 0 else rto(T, -sh)
        Ag = 0
        if not zero:
            mag = rto_or_shl(sig, (E - eacc) - (F - P))
            Ag = -mag if sign else mag
        X = Ag + Tg
        assert abs(X) < 1 << (F + cfg.int_bits), f"step sum {X} overflows int_bits"
        zero, sign, eacc, sig = ref_norm_rne(X, E, P, F)
        ob_b = []
        for i in proc:
            lanes[i]["terms"].pop(0)
            if k[i] >= KMAX:
                lanes[i]["done"] = True
                ob_b.append(i)
        trace.append((E, base, tuple(proc), ob_a, tuple(ob_b), k, (zero, sign, eacc, sig)))
    return (zero, sign, eacc, sig), len(trace), trace


def ref_baseline_group(acc, a, b, cfg):
    """Spec §11.6 for one group of the bit-parallel baseline: returns the new accumulator."""
    L, F, P = cfg.lanes, cfg.frac_bits, cfg.keep_bits
    a = list(a) + [0] * (L - len(a))
    b = list(b) + [0] * (L - len(b))
    zero, sign, eacc, sig = acc
    prods = []
    for x, y in zip(a, b):
        ea, eb = (x >> 7) & 0xFF, (y >> 7) & 0xFF
        assert ea != 255 and eb != 255
        if ea and eb:
            prods.append((ea + eb - 254, (128 + (x & 0x7F)) * (128 + (y & 0x7F)),
                          (x >> 15) ^ (y >> 15)))
    cands = [abe + (p >= 1 << 15) for abe, p, _ in prods] + ([] if zero else [eacc])
    if not cands:
        return tuple(acc)
    E = max(cands)
    X = 0
    for abe, p, s in prods:
        # the product is p * 2**(abe - 14); on the 2**(E - F) grid that is p * 2**(abe-14-E+F)
        v = rto_or_shl(p, E - abe + 14 - F)
        X += -v if s else v
    if not zero:
        mag = rto_or_shl(sig, (E - eacc) - (F - P))
        X += -mag if sign else mag
    assert abs(X) < 1 << (F + cfg.int_bits), f"step sum {X} overflows int_bits"
    return ref_norm_rne(X, E, P, F)


def random_bf16(r, mode: str) -> int:
    """A random finite bf16 pattern: ``ext`` extreme exponents, ``near`` 1 +- 2**14, ``any``."""
    s = r.randrange(2) << 15
    if mode == "ext":
        e = r.choice([0, 1, 2, 3, 126, 127, 128, 252, 253, 254])
    elif mode == "near":
        e = 127 + r.randrange(-14, 15)
    else:
        e = r.randrange(0, 255)
    m = r.randrange(128)
    if r.random() < 0.25:
        m = r.choice([0, 0x7F, 0x2B, 0x55, 0x7E, 0x35, 0x01, 0x40])
    return s | e << 7 | m


def config_label(cfg) -> str:
    """A test id naming the fields of a configuration dataclass that differ from its defaults."""
    default = type(cfg)()
    return ",".join(f"{f.name}={getattr(cfg, f.name)}" for f in dataclasses.fields(cfg)
                    if getattr(cfg, f.name) != getattr(default, f.name)) or "default"

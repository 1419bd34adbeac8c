"""FAST ("Fast First, Accurate Second Training"): BFP numerics, the fMAC and the GEMM model.

Spec ``docs/specs/fast.md`` (§2 format and quantization, §3 converter and its LFSRs, §4 fMAC, §5.3
GEMM mapping, §6 precision schedule).  Everything is bit-level integer arithmetic on FP32 bit
patterns; the rounding steps are instances of the shared rounding block
(:mod:`golden.common.rounding`) and FP32 accumulation is :func:`golden.common.fp_add.fp32_add`.

Format (§2.3 [choice]): a group of ``g = 16`` FP32 values becomes a shared exponent ``Es`` (the
biased FP32 exponent of the largest element, or ``exp_floor`` if larger) and per element a sign
bit and an ``m``-bit magnitude ``q`` whose value is ``(-1)**s * q * 2**(Es - 127 - (m - 1))``.
Subnormal inputs read as zero (DAZ), −0.0 keeps its sign, Inf/NaN are errors.  Rounding:
``"trunc"`` (weights and activations), ``"sr"`` (gradients: the magnitude truncated to ``m + 8``
bits, plus an 8-bit random value, truncated to ``m``) or ``"rne"`` (an option the paper never
uses); a magnitude that rounds up to ``2**m`` saturates to ``2**m - 1``.

fMAC (§4): operands are cut into 2-bit chunks (chunk ``c`` of an ``m``-bit magnitude has the
exponent ``Es - 2c``); one *round* multiplies one chunk of each operand (16 2b×2b products and a
sign each), sums them to ``P`` in [-144, 144], turns ``P`` into FP32 exactly (:func:`fp_gen`:
``P * 2**((Ex - 128) + (Ey - 128))``, FTZ, ±Inf) and adds it to the FP32 accumulator.  Paper mode
does one accumulator add per round, the streamed operand's chunks in the outer loop, most
significant first (§4.4 canonical order); exact mode combines the rounds in integer form and adds
once per group pair.

Choices beyond the spec are marked in the docstrings; the GEMM's group and tile order is the
array's (§5.3): operands grouped along the reduction dimension, the partial sum of each K-tile
started from +0 and added to the output in tile order.
"""

from dataclasses import dataclass

import numpy as np

from .. import ConfigError
from ..common import int_matmul_t
from ..common.lfsr import LaneRNG as _LaneRNG
from ..common.lfsr import lane_seeds as _lane_seeds
from ..common.lfsr import lfsr16_step
from ..common.fp_add import fp32_add, fp32_add_bits
from ..common.rounding import RoundConfig, round_raw

#: elements per BFP group (the hardware's g)
G = 16
#: the fMAC's operand widths (2-bit chunks)
FMAC_WIDTHS = (2, 4, 6, 8)
#: rounding modes of the quantizer
ROUNDINGS = ("trunc", "sr", "rne")
#: noise bits of stochastic rounding (§3: "8 bits provides sufficiently precise randomness")
SR_BITS = 8
#: the three training GEMMs (§5.2)
DATAFLOWS = ("fwd", "bwd_data", "wgrad")
#: fMAC round combination modes (§4.4)
FMAC_MODES = ("paper", "exact")
#: LFSR lanes of the converter and their seeds (§3 [choice])
LANES = 16
LANE_SEEDS = _lane_seeds(LANES)


class FastInputError(ConfigError):
    """A FAST input outside the format's contract (an Inf/NaN element, a width out of range)."""

    def __init__(self, what: str, value, allowed: str):
        ValueError.__init__(self, f"{what} = {value!r} is invalid: allowed {allowed}")
        self.cls_name, self.field, self.value, self.allowed = "fast", what, value, allowed


def _check_m(m) -> int:
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or not 1 <= m <= 23:
        raise FastInputError("m", m, "an integer quantizer width in 1..23")
    return int(m)


def _check_q(q, m: int) -> np.ndarray:
    q = np.asarray(q)
    if q.dtype.kind not in "iu" or ((q < 0) | (q >= (1 << m))).any():
        raise FastInputError("q", q.tolist() if q.size <= 16 else f"array {q.shape}",
                             f"integer magnitudes in 0..{(1 << m) - 1} for m = {m}")
    return q.astype(np.int64)


def _check_es(Es) -> np.ndarray:
    Es = np.asarray(Es)
    if Es.dtype.kind not in "iu" or ((Es < 0) | (Es > 254)).any():
        raise FastInputError("Es", Es.tolist() if Es.size <= 16 else f"array {Es.shape}",
                             "biased shared exponents in 0..254")
    return Es.astype(np.int64)


def _check_fmac_width(name: str, m) -> int:
    if isinstance(m, bool) or m not in FMAC_WIDTHS:
        raise FastInputError(name, m, "an fMAC operand width, one of 2, 4, 6, 8")
    return int(m)


# ----------------------------------------------------------------------------------------------
# quantization (§2.3)

def _quant_config(m: int, rounding: str) -> RoundConfig:
    """The rounding block as the converter's per-element quantizer: the 24-bit significand
    ``M`` with exponent ``m - 1 - d`` relative to the output LSB, to an ``m``-bit magnitude."""
    mode = {"trunc": "rtz", "sr": "sr", "rne": "rne"}[rounding]
    return RoundConfig(fmt=f"uint{m}", in_width=24, frac=23, exp_width=10, mode=mode,
                       rand_bits=SR_BITS, overflow="saturate")


def _fp32_bits(x) -> np.ndarray:
    """FP32 bit patterns of values converted with ``np.float32`` (a float32 array's bits,
    NaN payloads included, pass unchanged; feed bit patterns as ``bits.view(np.float32)``).
    A value beyond FP32's range becomes Inf here and is rejected by the quantizer."""
    with np.errstate(over="ignore"):
        return np.asarray(x, dtype=np.float32).view(np.uint32)


def bfp_quantize_groups(x, m: int = 4, rounding: str = "trunc", rand=None, exp_floor=0):
    """Quantize groups (rows of ``x``, shape ``(n, g)``) into BFP; vectorized over rows.

    ``x`` holds FP32 values (converted with ``np.float32``; pass bit patterns as
    ``bits.view(np.float32)``).  ``rand`` (mode ``"sr"``) has the shape of ``x`` with 8-bit
    integers; ``exp_floor`` is a scalar or one value per row (bounded-exponent mode, §2.8).

    Returns
    -------
    Es : ndarray of int64, shape (n,)
    signs, q : ndarray of int64, shape (n, g)

    Raises
    ------
    FastInputError
        Inf/NaN elements (naming the first), ``m`` outside 1..23, an unknown rounding, a missing
        or out-of-range ``rand``, ``exp_floor`` outside 0..254.
    """
    m = _check_m(m)
    if rounding not in ROUNDINGS:
        raise FastInputError("rounding", rounding, "one of " + ", ".join(ROUNDINGS))
    bits = _fp32_bits(x).astype(np.int64)
    if bits.ndim != 2:
        raise FastInputError("x", f"shape {bits.shape}", "a 2-D (groups, g) array")
    s, e, frac = (bits >> 31) & 1, (bits >> 23) & 0xFF, bits & 0x7FFFFF
    bad = e == 255
    if bad.any():
        row, col = (int(v[0]) for v in np.nonzero(bad))
        where = f"x[{col}]" if bits.shape[0] == 1 else f"x[{row}][{col}]"
        raise FastInputError(where, float(bits[row, col].astype(np.uint32).view(np.float32)),
                             "a finite FP32 value (Inf and NaN are unsupported, spec §2.7)")
    floor = np.asarray(exp_floor)
    if floor.dtype.kind not in "iu" or ((floor < 0) | (floor > 254)).any():
        raise FastInputError("exp_floor", exp_floor, "integers in 0..254")
    M = np.where(e == 0, 0, frac | (1 << 23))                          # DAZ
    Es = np.maximum(e.max(axis=1), floor.astype(np.int64))
    d = Es[:, None] - e
    if rounding == "sr":
        if rand is None:
            raise FastInputError("rand", None, "one 8-bit random value per element for 'sr'")
        rand = np.asarray(rand)
        if rand.dtype.kind not in "iu":
            raise FastInputError("rand", f"dtype {rand.dtype}", "integers 0..255")
        rand = rand.astype(np.int64)
        if rand.shape != bits.shape or ((rand < 0) | (rand > 255)).any():
            raise FastInputError("rand", f"shape {rand.shape}", f"shape {bits.shape}, 0..255")
    else:
        rand = np.zeros(bits.shape, dtype=np.int64)
    # value / LSB = M * 2**(E - Es + m - 1 - 23): clamp very large d (the result is 0 anyway)
    exp = np.maximum(m - 1 - d, -400)
    r = round_raw(_quant_config(m, rounding), M, exp, s, rand)
    return Es, s, r.sig


def bfp_quantize(x, m: int = 4, rounding: str = "trunc", rand=None, exp_floor: int = 0):
    """Quantize one group of at most ``g = 16`` FP32 values (spec §2.3).

    A short group is padded with +0.0.  For ``"sr"``, ``rand`` holds one 8-bit value per element
    of the padded group (length 16).

    Returns
    -------
    Es : int
        Shared exponent (biased FP32 exponent).
    signs, q : ndarray of int64, length 16
        Sign bits and ``m``-bit magnitudes.
    """
    bits = _fp32_bits(x).reshape(-1)
    if bits.size > G:
        raise FastInputError("x", f"{bits.size} values", f"a group of at most {G}")
    padded = np.zeros((1, G), dtype=np.uint32)
    padded[0, :bits.size] = bits
    if rand is not None:
        rand = np.asarray(rand).reshape(1, -1)
    Es, s, q = bfp_quantize_groups(padded.view(np.float32), m, rounding, rand, exp_floor)
    return int(Es[0]), s[0], q[0]


def to_m2(Es, signs, q):
    """A 4-bit group as the converter's 2-bit one: the low chunk discarded (§2.5, §V-D)."""
    return Es, signs, np.asarray(q) >> 2


def dequant(Es, signs, q, m: int):
    """Element values ``(-1)**s * q * 2**(Es - 127 - (m - 1))`` as ``np.float32``, exact, with
    values below the FP32 normal range flushed to zero (FTZ, §2.4)."""
    m = _check_m(m)
    q = _check_q(q, m)
    Es = _check_es(Es)
    if Es.ndim < q.ndim:
        Es = Es.reshape(Es.shape + (1,) * (q.ndim - Es.ndim))
    cfg = RoundConfig(fmt="fp32", in_width=23, frac=0, exp_width=12, mode="rne")
    r = round_raw(cfg, q, np.broadcast_to(Es - 127 - (m - 1), q.shape), signs)
    return r.bits.astype(np.uint32).view(np.float32)


def chunks(Es, signs, q, m: int):
    """The 2-bit chunks of an ``m``-bit group, most significant first (§2.5): a list of
    ``(exp, signs, mags)`` with chunk ``c`` at exponent ``Es - 2c``, so that
    ``sum_c mags_c * 2**(Es - 2c - 128) == q * 2**(Es - 127 - (m - 1))``."""
    m = _check_fmac_width("m", m)
    k = m // 2
    q = _check_q(q, m)
    return [(np.asarray(Es) - 2 * c, signs, (q >> (2 * (k - 1 - c))) & 3) for c in range(k)]


def rounds(mx: int, my: int) -> int:
    """fMAC cycles per group pair: ``(mx / 2) * (my / 2)`` (§4.1, T16)."""
    return (_check_fmac_width("mx", mx) // 2) * (_check_fmac_width("my", my) // 2)


# ----------------------------------------------------------------------------------------------
# fMAC (§4)

def _fp_gen_config() -> RoundConfig:
    # |P| <= 144 per round; exact mode combines up to 16 * 255 * 255 (8-bit operands): 24 bits
    # of two's complement hold it, and it still has at most 21 significant bits (exact in FP32)
    return RoundConfig(fmt="fp32", in_width=24, signed=True, frac=0, exp_width=12, mode="rne")


def fp_gen_bits(P, Ex, Ey) -> np.ndarray:
    """FP32 bits of ``P * 2**((Ex - 128) + (Ey - 128))`` (§4.3): exact (|P| has few significant
    bits), +0.0 for ``P = 0``, a signed zero below 2**-126 (FTZ), ±Inf above the FP32 range."""
    P = np.asarray(P, dtype=np.int64)
    e = np.asarray(Ex, dtype=np.int64) + np.asarray(Ey, dtype=np.int64) - 256
    P, e = np.broadcast_arrays(P, e)
    # exponents far outside FP32's range only matter as "over" or "under": clamp them into the
    # rounding block's input range
    return round_raw(_fp_gen_config(), P, np.clip(e, -600, 600), 0, 0).bits.astype(np.uint32)


def fp_gen(P, Ex, Ey):
    """:func:`fp_gen_bits` as ``np.float32``."""
    out = fp_gen_bits(P, Ex, Ey).view(np.float32)
    return out if out.ndim else out[()]


def _signed(signs, mags):
    return np.where(np.asarray(signs) == 1, -np.asarray(mags, dtype=np.int64), mags)


def fmac_round(acc, xc, yc):
    """One fMAC round: chunk ``xc = (Ex, signs, mags)`` times chunk ``yc`` of the same group
    pair, summed to ``P``, converted by :func:`fp_gen` and added to the FP32 ``acc``."""
    (ex, sx, mx), (ey, sy, my) = xc, yc
    P = int(np.sum(_signed(sx, mx) * _signed(sy, my)))
    return fp32_add(np.float32(acc), fp_gen(P, int(ex), int(ey)))


def fmac_group(acc, x, mx: int, y, my: int, mode: str = "paper"):
    """The dot product of one BFP group pair added to ``acc`` (§4.4, §4.5).

    ``x`` and ``y`` are ``(Es, signs, q)`` tuples of ``mx``- and ``my``-bit groups; ``x`` is the
    streamed operand (the outer loop of the paper mode's canonical order).  ``mode="paper"``: one
    :func:`fmac_round` per chunk pair, ``x``'s chunks outer, most significant first.
    ``mode="exact"``: the rounds combined in integer form (``sum P * 4**...``) and added once.
    Returns ``np.float32``.
    """
    if mode not in FMAC_MODES:
        raise FastInputError("mode", mode, "one of " + ", ".join(FMAC_MODES))
    acc = np.float32(acc)
    if mode == "paper":
        for xc in chunks(*x, mx):
            for yc in chunks(*y, my):
                acc = fmac_round(acc, xc, yc)
        return acc
    qx, qy = _check_q(x[2], _check_fmac_width("mx", mx)), _check_q(y[2], _check_fmac_width("my", my))
    P = int(np.sum(_signed(x[1], qx) * _signed(y[1], qy)))
    # sum qx*qy * 2**(Esx - 127 - (mx-1)) * 2**(Esy - 127 - (my-1)) = P * 2**((Ex'-128)+(Ey'-128))
    return fp32_add(acc, fp_gen(P, int(x[0]) - (mx - 2), int(y[0]) - (my - 2)))


# ----------------------------------------------------------------------------------------------
# LFSR bank (§3 [choice]): the shared bank, drawing SR_BITS bits per lane

def lane_seeds(lanes: int = LANES) -> tuple:
    """The converter's lane seeds (:func:`golden.common.lfsr.lane_seeds`)."""
    return _lane_seeds(lanes)


class LaneRNG(_LaneRNG):
    """The converter's per-lane LFSRs (:class:`golden.common.lfsr.LaneRNG`): one draw steps
    every lane 8 times and returns the 8 freshly generated bits of each, ``R = s >> 8`` (§3).
    The hardware steps only on conversions with ``is_grad = 1``; each :meth:`draw` is one such
    conversion.  ``lanes`` defaults to the paper's 16."""

    def __init__(self, seeds=None, lanes: int = LANES):
        super().__init__(seeds, lanes, SR_BITS)


# ----------------------------------------------------------------------------------------------
# precision schedule (§6)

def rel_improvement(Es, q4) -> float:
    """r(X) of Eq. 2 over 4-bit groups (``Es`` shape (n,), ``q4`` shape (n, g)):
    ``sum (q4 & 3) * 2**(Es-130) / sum (q4 >> 2) * 2**(Es-128)`` in float64; a zero denominator
    gives 0 when the numerator is 0, else +inf (§6.2 [choice])."""
    Es = np.asarray(Es, dtype=np.float64).reshape(-1)
    if Es.size == 0:
        return 0.0
    q4 = np.asarray(q4, dtype=np.int64).reshape(Es.size, -1)
    num = float(np.sum((q4 & 3).sum(axis=1) * np.exp2(Es - 130)))
    den = float(np.sum((q4 >> 2).sum(axis=1) * np.exp2(Es - 128)))
    if den == 0:
        return 0.0 if num == 0 else float("inf")
    return num / den


def epsilon(l: int, i: int, L: int, I: int, alpha: float = 0.6, beta: float = 0.3) -> float:  # noqa: E741
    """Eq. 1: ``alpha - beta * i / I - beta * l / L`` (layer ``l`` of ``L``, iteration ``i`` of
    ``I``, both 1-based)."""
    for name, v, hi in (("l", l, L), ("i", i, I)):
        if not 1 <= v <= hi:
            raise FastInputError(name, v, f"1..{hi}")
    return alpha - beta * i / I - beta * l / L


def choose_m(r: float, eps: float) -> int:
    """Algorithm 1: 2-bit mantissas when ``r < eps``, else 4."""
    return 2 if r < eps else 4


# ----------------------------------------------------------------------------------------------
# GEMM (§5.3)

@dataclass(frozen=True)
class Quantized:
    """A matrix quantized in groups of 16 along its reduction dimension: ``Es`` (rows, groups),
    ``signs``/``q`` (rows, groups, 16), ``m`` bits."""

    Es: np.ndarray
    signs: np.ndarray
    q: np.ndarray
    m: int


#: group sizes of the software sensitivity study (the hardware's is :data:`G`)
GROUP_RANGE = (1, 256)


def check_group(group) -> int:
    """A group size: an integer in :data:`GROUP_RANGE` (the hardware's is :data:`G`)."""
    if isinstance(group, bool) or not isinstance(group, (int, np.integer)) \
            or not GROUP_RANGE[0] <= group <= GROUP_RANGE[1]:
        raise FastInputError("group", group, f"an integer group size in {GROUP_RANGE[0]}.."
                                             f"{GROUP_RANGE[1]}")
    return int(group)


def group_draws(rng: LaneRNG, n: int, group: int) -> np.ndarray:
    """SR random values for ``n`` groups of ``group`` values: one :meth:`LaneRNG.draws` row per
    group as wide as the lanes (the hardware's 16); a group of another size (the software study,
    [choice]) takes ``ceil(group / lanes)`` consecutive draws and the first ``group`` of their
    values, in lane order."""
    if group == rng.lanes:
        return rng.draws(n)
    k = -(-group // rng.lanes)
    return rng.draws(n * k).reshape(n, k * rng.lanes)[:, :group]


def quantize_rows(X, m: int = 4, rounding: str = "trunc", rng: LaneRNG | None = None,
                  exp_floor: int = 0, group: int = G) -> Quantized:
    """Quantize each row of ``X`` (shape (rows, K)) in groups of ``group`` (the hardware's 16)
    along K, padded with +0.0.

    Groups are converted in row-major order (row by row, groups along K within a row); with
    ``"sr"`` each conversion takes one :meth:`LaneRNG.draw` in that order (:func:`group_draws`
    for other group sizes).  ``m = 2`` is what the hardware converter makes: 4 bits, the low
    chunk discarded (for truncation this equals direct 2-bit quantization, T2; under SR it is
    A4's biased variant; under RNE it differs from direct 2-bit RNE, T3).
    """
    groups, rand, shape = row_groups(X, rounding, rng, group)
    qm = 4 if m == 2 else m
    Es, s, q = bfp_quantize_groups(groups.view(np.float32), qm, rounding, rand, exp_floor)
    return rows_quantized(Es, s, q, shape, m)


def row_groups(X, rounding: str, rng: LaneRNG | None, group: int = G):
    """The groups :func:`quantize_rows` converts: ``X``'s rows (FP32 bit patterns) cut into
    groups of ``group`` along K and padded with +0.0, as a ``(rows * groups, group)`` uint32
    array in row-major order; their SR random values (``"sr"``: :func:`group_draws` from
    ``rng``, a fresh :class:`LaneRNG` without one; else None); and ``(rows, groups, group)``."""
    group = check_group(group)
    bits = _fp32_bits(X)
    if bits.ndim != 2:
        raise FastInputError("X", f"shape {bits.shape}", "a 2-D matrix")
    rows, K = bits.shape
    ng = max(1, -(-K // group))
    padded = np.zeros((rows, ng * group), dtype=np.uint32)
    padded[:, :K] = bits
    rand = None
    if rounding == "sr":
        rand = group_draws(rng or LaneRNG(), rows * ng, group)
    return padded.reshape(rows * ng, group), rand, (rows, ng, group)


def rows_quantized(Es, s, q, shape, m: int) -> Quantized:
    """Converted groups (``Es``, ``s``, ``q`` in row-major group order, quantized at 4 bits for
    ``m = 2``) as the :class:`Quantized` matrix of ``shape = (rows, groups, group)``: a 2-bit
    one keeps each 4-bit magnitude's high chunk, as the converter makes it."""
    if m == 2:
        q = q >> 2
    rows, ng, group = shape
    return Quantized(Es.reshape(rows, ng), s.reshape(shape), q.reshape(shape), m)


def _tile_groups(dataflow: str, array) -> int | None:
    """Groups of the reduction per partial sum started from +0 (§5.3): the array's columns in
    FWD (sums flow right), its rows in BWD-DATA (sums flow up), all of them in WGRAD (output
    stationary); None without an array (one tile)."""
    if dataflow not in DATAFLOWS:
        raise FastInputError("dataflow", dataflow, "one of " + ", ".join(DATAFLOWS))
    if array is None:
        return None
    try:
        rows, cols = (int(v) for v in array)
        ok = all(float(v) == int(v) for v in array) and rows >= 1 and cols >= 1
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise FastInputError("array", array, "(rows, cols), integers of at least 1")
    return None if dataflow == "wgrad" else cols if dataflow == "fwd" else rows


def _check_exact_range(xq: Quantized, yq: Quantized, mode: str) -> None:
    """A group pair's whole dot product (exact mode) must fit the FP generator's 24-bit signed
    input: ``g (2**mx - 1) (2**my - 1) < 2**23`` (every hardware width at g = 16 does)."""
    g = xq.q.shape[-1]
    if xq.q.shape[2:] != yq.q.shape[2:]:
        raise FastInputError("group", (xq.q.shape[2:], yq.q.shape[2:]), "equal on both sides")
    if mode == "exact" and g * ((1 << xq.m) - 1) * ((1 << yq.m) - 1) >= 1 << 23:
        raise FastInputError("group", g, f"a group whose exact {xq.m} x {yq.m}-bit dot product "
                                         "stays below 2**23")


def gemm_quantized(xq: Quantized, yq: Quantized, dataflow: str = "fwd", mode: str = "paper",
                   array=None) -> np.ndarray:
    """``C = X · Y`` from quantized operands: ``xq`` holds X's rows and ``yq`` Y's columns, both
    grouped along K.  Returns FP32 bits (uint32, shape (rows of X, columns of Y)).

    Per output element: for each K-tile (:func:`_tile_groups`), the tile's groups are chained
    through :func:`fmac_group` from +0 (X the streamed, outer operand), then ``out =
    fp32_add(out, tile)`` in tile order from +0.  Vectorized over output elements: each round is
    one integer matrix product of chunk matrices.
    """
    if mode not in FMAC_MODES:
        raise FastInputError("mode", mode, "one of " + ", ".join(FMAC_MODES))
    mx, my = _check_fmac_width("mx", xq.m), _check_fmac_width("my", yq.m)
    if xq.q.shape[1] != yq.q.shape[1]:
        raise FastInputError("K groups", (xq.q.shape[1], yq.q.shape[1]), "equal on both sides")
    tile = _tile_groups(dataflow, array)
    n_groups = xq.q.shape[1]
    tile = tile or n_groups
    _check_exact_range(xq, yq, mode)
    sx = np.where(xq.signs == 1, -1, 1)
    sy = np.where(yq.signs == 1, -1, 1)
    shape = (xq.q.shape[0], yq.q.shape[0])
    out = np.zeros(shape, dtype=np.uint32)
    acc = out
    kx, ky = mx // 2, my // 2
    for b in range(n_groups):
        if b % tile == 0:
            acc = np.zeros(shape, dtype=np.uint32)
        qx, qy = xq.q[:, b, :], yq.q[:, b, :]
        # int64: exponent arithmetic below must not wrap in a narrow unsigned dtype
        ex = xq.Es[:, b].astype(np.int64)[:, None]
        ey = yq.Es[:, b].astype(np.int64)[None, :]
        if mode == "exact":
            P = int_matmul_t(sx[:, b, :] * qx, sy[:, b, :] * qy)
            acc = fp32_add_bits(acc, fp_gen_bits(P, ex - (mx - 2), ey - (my - 2)))
        else:
            for cx in range(kx):
                chx = sx[:, b, :] * ((qx >> (2 * (kx - 1 - cx))) & 3)
                for cy in range(ky):
                    chy = sy[:, b, :] * ((qy >> (2 * (ky - 1 - cy))) & 3)
                    acc = fp32_add_bits(acc, fp_gen_bits(int_matmul_t(chx, chy), ex - 2 * cx,
                                                         ey - 2 * cy))
        if (b + 1) % tile == 0 or b + 1 == n_groups:
            out = fp32_add_bits(out, acc)
    return out


#: per dataflow, the operands' default rounding (A14: SR for data gradients, ∇O, only)
DEFAULT_ROUNDING = {"fwd": ("trunc", "trunc"), "bwd_data": ("sr", "trunc"),
                    "wgrad": ("trunc", "sr")}


def bfp_gemm(X, Y, mx: int, my: int, dataflow: str = "fwd", mode: str = "paper", array=None,
             x_rounding: str | None = None, y_rounding: str | None = None,
             rng: LaneRNG | None = None, x_exp_floor=0, y_exp_floor=0) -> np.ndarray:
    """``C = X · Y`` on FAST's BFP datapath (§5.3): FP32 bits (uint32, shape (M, N)).

    ``X`` (M×K) and ``Y`` (K×N) are FP32 values (converted with ``np.float32``).  Both are
    grouped in 16s along K (padded with +0.0), X's groups along its rows and Y's along its
    columns, and quantized to ``mx`` / ``my`` bits (:func:`quantize_rows`) with
    ``x_rounding``/``y_rounding`` — by default truncation for weights and activations and SR for
    the data gradient ∇O (X in BWD-DATA, Y in WGRAD; :data:`DEFAULT_ROUNDING`) — drawing from
    ``rng`` (X's groups first, then Y's, each in row-major order of its group grid) and clamped
    by ``x_exp_floor``/``y_exp_floor``.  ``dataflow`` selects the array mapping, which
    decides how the reduction is cut into tiles when ``array = (rows, cols)`` is given (FWD:
    ``cols`` groups per tile, BWD-DATA: ``rows``, WGRAD: one tile).  ``mode`` is the fMAC's
    round combination.  Bit-exact with the fMAC array.
    """
    _tile_groups(dataflow, array)
    xq, yq = quantize_operands(X, Y, mx, my, dataflow, x_rounding, y_rounding, rng,
                               x_exp_floor, y_exp_floor)
    return gemm_quantized(xq, yq, dataflow, mode, array)


def quantize_operands(X, Y, mx: int, my: int, dataflow: str = "fwd",
                      x_rounding: str | None = None, y_rounding: str | None = None,
                      rng: LaneRNG | None = None, x_exp_floor=0, y_exp_floor=0):
    """The operands of :func:`bfp_gemm` as it quantizes them: ``(xq, yq)``, X's rows and Y's
    columns as :class:`Quantized` groups along K (the arguments are :func:`bfp_gemm`'s)."""
    X = _fp32_bits(X)
    Y = _fp32_bits(Y)
    if X.ndim != 2 or Y.ndim != 2 or X.shape[1] != Y.shape[0]:
        raise FastInputError("shapes", (X.shape, Y.shape), "(M, K) and (K, N)")
    _check_fmac_width("mx", mx), _check_fmac_width("my", my)
    _tile_groups(dataflow, None)
    x_rounding = x_rounding or DEFAULT_ROUNDING[dataflow][0]
    y_rounding = y_rounding or DEFAULT_ROUNDING[dataflow][1]
    if "sr" in (x_rounding, y_rounding):
        rng = rng or LaneRNG()
    xq = quantize_rows(X.view(np.float32), mx, x_rounding, rng, x_exp_floor)
    yq = quantize_rows(np.ascontiguousarray(Y.T).view(np.float32), my, y_rounding, rng,
                       y_exp_floor)
    return xq, yq


__all__ = [
    "G", "GROUP_RANGE", "check_group", "group_draws", "row_groups", "rows_quantized",
    "FMAC_WIDTHS", "ROUNDINGS", "SR_BITS", "DATAFLOWS", "FMAC_MODES", "LANES", "LANE_SEEDS",
    "FastInputError", "lane_seeds", "bfp_quantize", "bfp_quantize_groups", "to_m2", "dequant",
    "chunks", "rounds", "fp_gen", "fp_gen_bits", "fmac_round", "fmac_group", "lfsr16_step",
    "LaneRNG", "rel_improvement", "epsilon", "choose_m", "Quantized", "quantize_rows",
    "gemm_quantized", "DEFAULT_ROUNDING", "bfp_gemm", "quantize_operands", "fp32_add",
]

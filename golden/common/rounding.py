"""The rounding block: one normalize/round/convert step that every unit instantiates.

A raw number — a significand ``sig`` (two's complement, or an unsigned magnitude with a
separate ``sign``) and a signed exponent ``exp`` — has the exact value::

    value = sig * 2**(exp - frac)          (times (-1)**sign for a magnitude input)

:func:`round_raw` rounds it into a target format (the golden twin of
:class:`hdl.common.rounding.Round`, registry unit ``common.round``):

* a **float** target (:class:`~golden.common.formats.FloatFormat`, e.g. ``bf16`` or
  ``e10m9``) normalizes: the leading one becomes the hidden bit, ``man_bits`` fraction bits are
  kept and the rest rounded; a carry out of the rounding renormalizes.  Then the exponent range:

  - ``overflow="inf"`` / ``"saturate"``: an IEEE layout and range.  A biased exponent
    ``>= exp_max`` gives ±Inf (or ±the largest finite number) in every mode — IEEE 754 would
    give the largest finite number for directed modes rounding toward zero, use ``saturate``
    for that — and a biased exponent ``<= 0`` flushes to a signed zero (FTZ: no subnormal
    results).  Both are decided on the exponent *after* rounding.
  - ``overflow="wrap"``: no range, as an exponent register: the unbiased exponent is kept
    modulo ``2**exp_bits`` (two's complement).  The PE accumulators use this.  The packed
    word then holds the two's complement exponent, so zero and ``1.0 * 2**0`` pack alike: only
    the ``zero`` output tells them apart.

* an **integer** target (:class:`~golden.common.formats.IntFormat`, e.g. ``int8``, ``uint4``)
  does not normalize: ``value`` itself is rounded to an integer (the caller places the binary
  point through ``exp``), then clamped to the format's range (``overflow="saturate"``).  An unsigned target is the magnitude of a
  sign-magnitude element; the sign passes through.

Rounding modes act on the value (sign-magnitude), whatever the input representation:

``rne``  nearest, ties to even        ``rna``  nearest, ties away from zero
``rtz``  toward zero (truncation)     ``rdn``  toward -inf (floor)   ``rup``  toward +inf
``rto``  round to odd (jamming: truncate, then OR "inexact" into the LSB)
``sr``   stochastic: the magnitude truncated to ``rand_bits`` bits below the kept LSB, plus
         the ``rand_bits``-bit random input ``rand``, truncated (bits below that window are
         dropped first, as FAST's converter does; spec ``docs/specs/fast.md`` §2.3).  Unbiased
         ``E[result] = value`` for values on that grid.

A zero significand gives a zero result with the input's sign (magnitude input) or ``+0``
(two's complement input); an FTZ flush keeps the sign.  Subnormal *inputs* are the caller's
business (DAZ happens where a format is decoded); subnormal outputs are not produced.

Everything is vectorized over NumPy ``int64`` arrays (significands up to 56 bits).
"""

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .. import ConfigError, check_bool, check_choice, check_int
from .formats import FloatFormat, IntFormat, format_named

#: rounding modes (see the module docstring)
MODES = ("rne", "rna", "rtz", "rdn", "rup", "rto", "sr")
#: exponent range handling
OVERFLOWS = ("inf", "saturate", "wrap")
#: widest significand input the golden model (int64) and the block accept
MAX_IN_WIDTH = 56
#: most register stages the rounding block places (:class:`hdl.common.rounding.Round`)
MAX_PIPELINE = 3


@dataclass(frozen=True)
class RoundConfig:
    """Configuration of the rounding block (registry unit ``common.round``).

    The defaults round an FP32-style 24-bit significand to bfloat16 with RNE.
    """

    #: target format: a float (bf16, fp32, fp16, hfp8, e4m3, e5m2, e<E>m<M>) or an integer
    #: (int8, int12, int<N>, uint<N>) format name
    fmt: str = "bf16"
    #: width of the significand input (two's complement width when ``signed``), 1..56
    in_width: int = 24
    #: the significand is two's complement; otherwise an unsigned magnitude plus a sign input
    signed: bool = False
    #: binary point of the input: value = sig * 2**(exp - frac)
    frac: int = 23
    #: width of the signed exponent input, 2..16
    exp_width: int = 10
    #: the input's leading one is its top bit (or it is zero): no leading-one detector
    #: (float targets with a magnitude input only)
    normalized: bool = False
    #: rounding mode, one of MODES
    mode: str = "rne"
    #: width of the random input for mode "sr", 1..16
    rand_bits: int = 8
    #: exponent range: "inf" or "saturate" (IEEE range, FTZ), or "wrap" (no range); integer
    #: targets: "saturate"
    overflow: str = "inf"
    #: register stages, 0..3 (the result appears this many cycles after its input; 0: a
    #: combinational block, as every unit instantiates it): 1 cuts after the normalize step
    #: (leading-one detector and shift; the right shift of integer targets), 2 also after the
    #: rounding increment, 3 also after the input's absolute value.  Numerics are unchanged
    pipeline: int = 0

    def __post_init__(self):
        if not isinstance(self.fmt, str):
            raise ConfigError(type(self).__name__, "fmt", self.fmt, "a format name (a string)")
        try:
            fmt = format_named(self.fmt)
        except ValueError as e:
            raise ConfigError(type(self).__name__, "fmt", self.fmt,
                              "a float or integer format name (" + str(e).split(": ", 1)[1]
                              + ")") from None
        if not isinstance(fmt, (FloatFormat, IntFormat)):
            raise ConfigError(type(self).__name__, "fmt", self.fmt, "a float or integer format")
        check_int(self, "in_width", 1, MAX_IN_WIDTH)
        check_bool(self, "signed")
        check_int(self, "frac", -64, 64)
        check_int(self, "exp_width", 2, 16)
        check_bool(self, "normalized")
        check_choice(self, "mode", MODES)
        check_int(self, "rand_bits", 1, 16)
        check_choice(self, "overflow", OVERFLOWS)
        check_int(self, "pipeline", 0, MAX_PIPELINE)
        if self.normalized and (self.signed or fmt.kind != "float"):
            raise ConfigError(type(self).__name__, "normalized", True,
                              "false with a two's complement input or an integer target")
        if fmt.kind == "int" and self.overflow != "saturate":
            raise ConfigError(type(self).__name__, "overflow", self.overflow,
                              f"'saturate' for the integer target {self.fmt} (it clamps)")
        if fmt.kind == "float" and fmt.width > 62:
            raise ConfigError(type(self).__name__, "fmt", self.fmt,
                              "a float format at most 62 bits wide")
        if fmt.kind == "float" and self.overflow != "wrap" and fmt.exp_bits < 2:
            raise ConfigError(type(self).__name__, "fmt", self.fmt,
                              "at least 2 exponent bits with an IEEE range (overflow 'inf' or "
                              "'saturate'); a 1-bit exponent has no normal numbers")
        if self.signed and self.in_width < 2:
            raise ConfigError(type(self).__name__, "in_width", self.in_width,
                              "at least 2 for a two's complement input")

    @property
    def format(self):
        """The target :class:`FloatFormat` or :class:`IntFormat`."""
        return format_named(self.fmt)

    @property
    def exp_min(self) -> int:
        """Smallest value of the signed exponent input."""
        return -(1 << (self.exp_width - 1))

    @property
    def exp_max(self) -> int:
        """Largest value of the signed exponent input."""
        return (1 << (self.exp_width - 1)) - 1

    @property
    def out_exp_width(self) -> int:
        """Width of the signed unbiased exponent output (float targets)."""
        fmt = self.format
        return fmt.exp_bits if self.overflow == "wrap" else fmt.exp_bits + 2

    @property
    def out_sig_width(self) -> int:
        """Width of the significand output: hidden bit + mantissa, or the integer magnitude."""
        fmt = self.format
        return fmt.man_bits + 1 if fmt.kind == "float" else fmt.bits


class Rounded(NamedTuple):
    """Result arrays of :func:`round_raw`.

    Float targets: ``(-1)**sign * sig * 2**(exp - man_bits)`` unless ``zero``; an overflow to
    Inf reads ``exp = emax + 1, sig = 2**man_bits``.  Integer targets: ``sig`` is the magnitude,
    ``exp`` is 0.  ``bits`` is the word in the target format (two's complement for signed
    integers; for ``wrap`` floats the exponent field holds the two's complement exponent).
    """

    zero: np.ndarray
    sign: np.ndarray
    exp: np.ndarray
    sig: np.ndarray
    bits: np.ndarray
    #: the result differs from the exact value (before any range handling)
    inexact: np.ndarray
    #: the exponent (float) or the integer was out of range and was replaced
    overflow: np.ndarray
    #: a non-zero float result was flushed to zero
    underflow: np.ndarray


def bit_length(m):
    """Bit length of non-negative int64 arrays (values below 2**62): a binary search, 6 steps."""
    n = np.zeros(m.shape, dtype=np.int64)
    for step in (32, 16, 8, 4, 2, 1):
        hi = (m >> (n + step)) != 0
        n += np.where(hi, step, 0)
    return n + (m != 0)


def _shift_right(mag, s, cfg, sign, rand):
    """``mag * 2**-s`` rounded per ``cfg.mode`` (``s`` may be negative: exact left shift).

    Returns ``(q, inexact)``; ``q`` may need one more bit than ``mag >> s`` (a carry).
    """
    s = np.asarray(s, dtype=np.int64)
    if s.size and s.min() >= 0:
        # right shifts only (quantizers, normalizers of wide sums): no left-shift branch
        sr = np.minimum(s, 62)
        q = mag >> sr
        rem = mag - (q << sr)
    else:
        sr = np.clip(s, 0, 62)
        q = np.where(s > 0, mag >> sr, mag << np.clip(-s, 0, 62))
        rem = np.where(s > 0, mag - (q << sr), 0)
    inexact = rem != 0
    mode = cfg.mode
    if mode == "rtz":
        return q, inexact
    if mode == "rto":
        return q | inexact, inexact
    if mode == "rdn":
        return q + (inexact & (sign == 1)), inexact
    if mode == "rup":
        return q + (inexact & (sign == 0)), inexact
    if mode == "sr":  # the rand_bits under the LSB, plus rand, carry into the LSB
        r = cfg.rand_bits
        window = np.where(s >= r, rem >> np.clip(s - r, 0, 62), rem << np.clip(r - s, 0, 62))
        return q + ((window + rand) >> r), inexact
    half = np.where(sr > 0, np.int64(1) << np.maximum(sr - 1, 0), 0)
    if mode == "rna":
        return q + (inexact & (rem >= half)), inexact
    # rne
    return q + ((rem > half) | ((rem == half) & inexact & ((q & 1) == 1))), inexact


def round_raw(cfg: RoundConfig, sig, exp, sign=0, rand=0) -> Rounded:
    """Round raw numbers into ``cfg``'s target format (see the module docstring).

    Parameters
    ----------
    cfg : RoundConfig
    sig : array_like of int
        Significands: two's complement values in ``in_width`` bits when ``cfg.signed``, else
        magnitudes below ``2**in_width`` (normalized ones have bit ``in_width - 1`` set).
    exp : array_like of int
        Signed exponents in ``exp_width`` bits.
    sign : array_like of int, optional
        Signs of magnitude inputs (ignored for two's complement inputs).
    rand : array_like of int, optional
        ``rand_bits``-bit random values (mode ``"sr"``).

    Raises
    ------
    ValueError
        An input outside its width (or a normalized input whose top bit is clear).
    """
    W = cfg.in_width
    sig = np.asarray(sig, dtype=np.int64)
    exp = np.asarray(exp, dtype=np.int64)
    sign = np.asarray(sign, dtype=np.int64)
    rand = np.asarray(rand, dtype=np.int64)
    sig, exp, sign, rand = np.broadcast_arrays(sig, exp, sign, rand)
    lo, hi = (-(1 << (W - 1)), (1 << (W - 1)) - 1) if cfg.signed else (0, (1 << W) - 1)
    for name, v, a, b in (("sig", sig, lo, hi),
                          ("exp", exp, -(1 << (cfg.exp_width - 1)), (1 << (cfg.exp_width - 1)) - 1),
                          ("sign", sign, 0, 1), ("rand", rand, 0, (1 << cfg.rand_bits) - 1)):
        bad = (v < a) | (v > b)
        if bad.any():
            raise ValueError(f"round_raw: {name} {int(v[bad].flat[0])} is outside {a}..{b} "
                             f"({cfg})")
    if cfg.normalized:
        mag = np.abs(sig)
        bad = (mag != 0) & ((mag >> (W - 1)) == 0)
        if bad.any():
            raise ValueError(f"round_raw: normalized significand {int(mag[bad].flat[0])} has "
                             f"bit {W - 1} clear")
    return round_checked(cfg, sig, exp, sign, rand)


def round_checked(cfg: RoundConfig, sig, exp, sign, rand) -> Rounded:
    """:func:`round_raw` on int64 arrays of one shape already known to be in range (the
    accumulator models call it every step, where the inputs are their own results)."""
    fmt = cfg.format
    if cfg.signed:
        sign = (sig < 0).astype(np.int64)
        mag = np.abs(sig)
    else:
        mag = sig
    zero_in = mag == 0
    no = np.zeros(mag.shape, dtype=bool)
    if fmt.kind == "int":
        return _to_int(cfg, fmt, mag, exp, sign, rand, no)
    P = fmt.man_bits
    n = bit_length(mag) - 1
    q, inexact = _shift_right(mag, n - P, cfg, sign, rand)
    carry = (q >> (P + 1)) != 0
    q = np.where(carry, q >> 1, q)
    e = exp + n - cfg.frac + carry
    if cfg.overflow == "wrap":
        half = 1 << (fmt.exp_bits - 1)
        e = ((e + half) & ((1 << fmt.exp_bits) - 1)) - half
        zero = zero_in
        over = under = no
        field = e & fmt.exp_max
    else:
        biased = e + fmt.bias
        over = ~zero_in & (biased >= fmt.exp_max)
        under = ~zero_in & (biased <= 0)
        zero = zero_in | under
        sat = cfg.overflow == "saturate"
        e = np.where(over, fmt.emax if sat else fmt.emax + 1, e)
        q = np.where(over, (2 << P) - 1 if sat else 1 << P, q)
        field = np.where(over, fmt.exp_max - 1 if sat else fmt.exp_max, np.clip(biased, 0, None))
    e = np.where(zero, 0, e)
    q = np.where(zero, 0, q)
    field = np.where(zero, 0, field)
    bits = (sign << (fmt.width - 1)) | (field << P) | (q & ((1 << P) - 1))
    return Rounded(zero, sign, e, q, bits, inexact, over, under)


def _to_int(cfg, fmt, mag, exp, sign, rand, no):
    """Integer targets: round ``mag * 2**(exp - frac)`` to an integer, then clamp."""
    lsh = exp - cfg.frac
    # a left shift that moves the leading one past the format's width overflows; this also
    # keeps the int64 arithmetic below from overflowing
    if lsh.size and lsh.max() > 0:
        big = (lsh > 0) & (mag != 0) & (bit_length(mag) + lsh > fmt.bits)
        lsh = np.where(big, 0, lsh)
    else:
        big = np.zeros(mag.shape, dtype=bool)
    q, inexact = _shift_right(mag, -lsh, cfg, sign, rand)
    limit = np.where(sign == 1, -fmt.min, fmt.max) if fmt.signed else np.full(mag.shape, fmt.max)
    over = big | (q > limit)
    q = np.where(over, limit, q)
    if fmt.signed:
        sign = np.where(q == 0, 0, sign)
        bits = np.where(sign == 1, -q, q) & ((1 << fmt.bits) - 1)
    else:
        bits = q
    return Rounded(q == 0, sign, np.zeros(q.shape, dtype=np.int64), q, bits, inexact, over, no)


def convert_float(bits, src, dst, mode: str = "rne", overflow: str = "inf") -> np.ndarray:
    """Bit patterns of the float format ``src`` rounded into the float format ``dst`` (names or
    :class:`~golden.common.formats.FloatFormat` objects), through the rounding block.

    Each finite value is rounded once by ``mode`` (default RNE) to ``dst``'s precision;
    ``overflow`` handles a result past ``dst``'s largest finite value (``"inf"``: ±Inf, as
    IEEE RNE; ``"saturate"``: ±the largest finite value).  Subnormal inputs read as signed zero
    (DAZ) and results below ``dst``'s smallest normal become signed zeros (FTZ), as every unit
    in this repository reads them.  ±Inf stays ±Inf; NaN becomes ``dst``'s quiet NaN (the top
    mantissa bit set) with the input's sign (``dst`` needs a mantissa bit for it).  Returns
    ``int64`` bit patterns in ``bits``' shape.
    """
    src, dst = format_named(src), format_named(dst)
    for f in (src, dst):
        if not isinstance(f, FloatFormat) or format_named(f.name) != f:
            raise ValueError(f"convert_float: {f} is not a named float format (bf16, fp16, "
                             f"hfp8, e<E>m<M>, ...)")
    b = np.asarray(bits, dtype=np.int64)
    if b.size and (b.min() < 0 or b.max() >> src.width):
        raise ValueError(f"convert_float: bit patterns outside 0..{(1 << src.width) - 1} "
                         f"({src.name})")
    P = src.man_bits
    sign = (b >> (src.width - 1)) & 1
    e = (b >> P) & src.exp_max
    man = b & ((1 << P) - 1)
    finite = e != src.exp_max
    sig = np.where(finite & (e != 0), man | (1 << P), 0)                 # DAZ
    nan = ~finite & (man != 0)
    if dst.man_bits == 0 and nan.any():
        raise ValueError(f"convert_float: {dst.name} has no mantissa bit for a NaN")
    cfg = RoundConfig(fmt=dst.name, in_width=P + 1, frac=P, exp_width=src.exp_bits + 2,
                      mode=mode, overflow=overflow)
    out = round_checked(cfg, sig, np.where(sig == 0, 0, e - src.bias), sign,
                        np.zeros_like(sig)).bits
    special = np.where(nan, dst.inf | (1 << max(dst.man_bits - 1, 0)), dst.inf)
    out = np.where(finite, out, (sign << (dst.width - 1)) | special)
    return out.astype(np.int64)


__all__ = ["MODES", "OVERFLOWS", "MAX_IN_WIDTH", "MAX_PIPELINE", "RoundConfig", "Rounded", "round_raw",
           "round_checked",
           "bit_length", "convert_float"]

"""Schrödinger's FP value transforms: QM, QE and BitWave (spec ``docs/specs/gecko.md`` §1–§3).

Every function takes bit patterns (``uint32`` FP32 or ``uint16`` bf16 NumPy arrays, or a Python
int) and works on the integer fields.  Floating point appears only for the *learned* real-valued
quantities (bitlengths, gradients, losses), never for the value being quantized.

* :func:`truncate_mantissa` — QM's P (eq. 5): keep the top ``n`` mantissa bits (A30: truncation).
* :func:`select_bits` — eq. 6 / 15 with the uniform draw ``u`` as an explicit input (A20).
* :func:`qe_bounds`, :func:`qe_clamp`, :func:`qe_indicators` — QE's R (eq. 7) and its partial
  derivatives (eqs. 8–10, A15, A26).
* :func:`qm_delta`, :func:`qm_grad`, :func:`qe_chain`, :func:`qe_grad`, :func:`tensor_weights`
  — bitlength gradients (§2.7, A13, A14, A16, A17).
* :class:`BitWave` — the per-batch controller (§3.2, A22), :func:`bwe_clamp`,
  :func:`bitwave_quantize`.

Choices the paper leaves open
-----------------------------
* E = 255 (Inf/NaN) inputs raise ``ValueError`` everywhere: truncating a NaN's mantissa would
  silently turn it into Inf.
* QE thresholds for ``n_e = 0`` (where ``2**-0.5`` is irrational) follow A12: the literal
  formula is evaluated in float64; R compares the *exact* float64 thresholds against the input
  (done in integers with directed rounding of the thresholds) and returns ``Vmin``/``Vmax``
  rounded to the format with RNE.  For ``n_e >= 1`` every threshold is exact.
* BWE: E = 0 values (zeros, subnormals) lie below every range (lo >= -126) and become +0.0;
  the averages used when BitWave fixes its values are taken over the values in effect for each
  batch that was stepped (before that batch's update).
"""

import math
from collections import deque
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from .. import ConfigError, check_choice, check_int
from ..common import FORMATS, FloatFormat, fields, pack
from .codec import SOURCE_FORMATS

#: γ_m = γ_e = 0.1 "proved sufficient" (§2.6)
GAMMA = 0.1
#: largest integer exponent bitlength (A19)
NE_MAX = 8


def _format(fmt) -> FloatFormat:
    if isinstance(fmt, FloatFormat):
        return fmt
    if fmt not in SOURCE_FORMATS:
        raise ValueError(f"unknown format {fmt!r}: expected one of {', '.join(SOURCE_FORMATS)}")
    return FORMATS[fmt]


def _bits(bits, fmt: FloatFormat):
    """Checked bit patterns as int64 plus a function restoring the caller's type."""
    if isinstance(bits, (int, np.integer)) and not isinstance(bits, bool):
        v = int(bits)
        if not 0 <= v < (1 << fmt.width):
            raise ValueError(f"bit pattern {v:#x} does not fit {fmt.name} ({fmt.width} bits)")
        a = np.array(v, dtype=np.int64)
        restore = int
    elif isinstance(bits, np.ndarray):
        if bits.dtype != fmt.dtype:
            raise ValueError(f"bits dtype {bits.dtype} does not match {fmt.name} "
                             f"(expected {np.dtype(fmt.dtype).name})")
        a = bits.astype(np.int64)

        def restore(x):
            return np.asarray(x).astype(fmt.dtype)
    else:
        raise ValueError(f"bits must be an int or a NumPy array, got {type(bits).__name__}")
    e = (a >> fmt.man_bits) & fmt.exp_max
    if (e == fmt.exp_max).any():
        v = int(a[e == fmt.exp_max].flat[0]) if a.ndim else int(a)
        raise ValueError(f"bit pattern {v:#x} is Inf/NaN (exponent {fmt.exp_max}), "
                         f"which is not supported")
    return a, restore


def _check_n(n, lo: int, hi: int, what: str) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise ValueError(f"{what} must be an integer, got {n!r}")
    if not lo <= int(n) <= hi:
        raise ValueError(f"{what} = {n} is outside {lo}..{hi}")
    return int(n)


# --------------------------------------------------------------------------------------------
# QM


def truncate_mantissa(bits, n: int, fmt="fp32"):
    """P(x, n) of eq. 5: keep the top ``n`` mantissa bits, clear the rest (round toward zero).

    Parameters
    ----------
    bits : int or numpy.ndarray
        Bit patterns of ``fmt`` (``uint32`` FP32 / ``uint16`` bf16 arrays).
    n : int
        Mantissa bits kept, 0..m (23 FP32, 7 bf16; A19).  Sign and exponent are unchanged.
    fmt : {"fp32", "bf16"} or FloatFormat
    """
    f = _format(fmt)
    n = _check_n(n, 0, f.man_bits, "mantissa bitlength n")
    a, restore = _bits(bits, f)
    keep = ((1 << n) - 1) << (f.man_bits - n)
    return restore(a & ~((1 << f.man_bits) - 1 - keep))


def select_bits(n_real, u):
    """Integer bitlength of eq. 6 / 15 (A20): ``floor(n) + (u < frac(n))``.

    ``n_real >= 0`` and the uniform draw ``u`` in [0, 1) may be scalars or arrays (broadcast).
    Returns an int for scalar inputs, an int64 array otherwise.
    """
    n = np.asarray(n_real, dtype=np.float64)
    uu = np.asarray(u, dtype=np.float64)
    if not np.isfinite(n).all() or (n < 0).any():
        raise ValueError(f"bitlength {n_real!r} must be finite and >= 0")
    if not ((uu >= 0) & (uu < 1)).all():
        raise ValueError(f"uniform draw {u!r} must lie in [0, 1)")
    fl = np.floor(n)
    out = (fl + (uu < n - fl)).astype(np.int64)
    return int(out) if out.ndim == 0 else out


# --------------------------------------------------------------------------------------------
# QE


def qe_range(n_e: int) -> tuple[float, float]:
    """(Emin, Emax) = (-2**(n_e-1), 2**(n_e-1)) of eqs. 13–14 for an integer n_e in 0..8."""
    n_e = _check_n(n_e, 0, NE_MAX, "exponent bitlength n_e")
    h = 2.0 ** (n_e - 1)
    return -h, h


def qe_bounds(n_e: int, fmt="fp32") -> tuple[float, float]:
    """(Vmin, Vmax) of eqs. 11–12 in float64, with Mmax = 1 - 2**-m (A12)."""
    f = _format(fmt)
    emin, emax = qe_range(n_e)
    return 2.0 ** emin, (2.0 - 2.0 ** -f.man_bits) * 2.0 ** emax


def _round_pos(q: Fraction, f: FloatFormat, mode: str) -> int:
    """Bit pattern of the positive rational ``q`` rounded to ``f`` ("down", "up" or "rne").

    Overflow gives the largest finite value (down) or Inf (up, rne).
    """
    m = f.man_bits
    emin = 1 - f.bias
    e = q.numerator.bit_length() - q.denominator.bit_length()
    if Fraction(2) ** e > q:
        e -= 1
    e = max(e, emin)
    scaled = q / Fraction(2) ** (e - m)          # significand in units of the last place
    fl = scaled.numerator // scaled.denominator
    rem = scaled - fl
    if mode == "down" or rem == 0:
        sig = fl
    elif mode == "up":
        sig = fl + 1
    else:
        sig = fl + (rem > Fraction(1, 2) or (rem == Fraction(1, 2) and fl & 1))
    if sig == 1 << (m + 1):
        sig, e = 1 << m, e + 1
    if e > f.bias:
        if mode == "down":
            return pack(0, f.exp_max - 1, (1 << m) - 1, f)
        return pack(0, f.exp_max, 0, f)
    if sig < (1 << m):
        return int(sig)                           # subnormal (e == emin)
    return pack(0, e + f.bias, sig - (1 << m), f)


def _qe_thresholds(n_e: int, f: FloatFormat):
    vmin, vmax = qe_bounds(n_e, f)
    qmin, qmax = Fraction(vmin), Fraction(vmax)
    return {
        "half_up": _round_pos(qmin / 2, f, "up"),    # |x| >= Vmin/2
        "min_up": _round_pos(qmin, f, "up"),          # |x| >= Vmin
        "max_up": _round_pos(qmax, f, "up"),          # |x| >= Vmax
        "max_down": _round_pos(qmax, f, "down"),      # |x| >  Vmax
        "min_out": _round_pos(qmin, f, "rne"),
        "max_out": _round_pos(qmax, f, "rne"),
    }


def qe_clamp(bits, n_e: int, fmt="fp32"):
    """R(x, Vmax, Vmin) of eq. 7 for an integer exponent bitlength ``n_e`` in 0..8 (§2.3/§2.4).

    Saturate above Vmax, round ``|x|`` in [Vmin/2, Vmin) up to Vmin (the tie Vmin/2 goes away
    from zero), flush smaller magnitudes to +0.0 (A26), leave the rest unchanged.
    """
    f = _format(fmt)
    t = _qe_thresholds(_check_n(n_e, 0, NE_MAX, "exponent bitlength n_e"), f)
    a, restore = _bits(bits, f)
    sgn = a & (1 << (f.width - 1))
    mag = a ^ sgn
    out = np.where(mag > t["max_down"], sgn | t["max_out"],
                   np.where(mag >= t["min_up"], a,
                            np.where(mag >= t["half_up"], sgn | t["min_out"], 0)))
    return restore(out)


def qe_indicators(bits, n_e: int, fmt="fp32"):
    """(∂R/∂V, ∂R/∂Vmax, ∂R/∂Vmin) of eqs. 8–10 as int8 arrays of -1/0/+1 (A15).

    ∂R/∂V is 1 on (-Vmax, Vmax) (straight-through in the underflow and round-up regions);
    ∂R/∂Vmin is 0 at V = 0 and at |V| >= Vmin.
    """
    f = _format(fmt)
    t = _qe_thresholds(_check_n(n_e, 0, NE_MAX, "exponent bitlength n_e"), f)
    a, _ = _bits(bits, f)
    neg = (a >> (f.width - 1)) & 1
    mag = a & ((1 << (f.width - 1)) - 1)
    sgn = 1 - 2 * neg
    inside = mag < t["max_up"]
    d_v = inside.astype(np.int8)
    d_vmax = np.where(inside, 0, sgn).astype(np.int8)
    low = (mag > 0) & (mag < t["min_up"])
    d_vmin = np.where(low, np.where(mag >= t["half_up"], sgn, -sgn), 0).astype(np.int8)
    return d_v, d_vmax, d_vmin


def qe_chain(n_e: int, fmt="fp32") -> tuple[float, float]:
    """(dVmax/dn, dVmin/dn) at the sampled integer n_e (§2.7, A13)."""
    vmin, vmax = qe_bounds(n_e, fmt)
    c = math.log(2) ** 2 * 2.0 ** (n_e - 1)
    return vmax * c, -vmin * c


def qe_grad(bits, g, n_e: int, gamma: float = GAMMA, lam: float = 1.0, fmt="fp32"):
    """QE backward pass (§2.7): ``(∂L/∂n_e, ∂L/∂V)``.

    ``∂L/∂n_e = γλ + Σ g·∂R/∂Vmax · dVmax/dn + Σ g·∂R/∂Vmin · dVmin/dn`` and
    ``∂L/∂V = g·∂R/∂V``
    (P is straight-through, A15).  ``g`` is the upstream gradient, float64 array like ``bits``.
    """
    d_v, d_vmax, d_vmin = qe_indicators(bits, n_e, fmt)
    gg = np.asarray(g, dtype=np.float64)
    cmax, cmin = qe_chain(n_e, fmt)
    dn = gamma * lam + float((gg * d_vmax).sum()) * cmax + float((gg * d_vmin).sum()) * cmin
    return dn, gg * d_v


def qm_delta(bits, k: int, fmt="fp32"):
    """P(x, k+1) - P(x, k) in float64 (exact): ``(-1)^S · 2^E · b_{k+1} · 2^-(k+1)`` (§2.7).

    ``b_{k+1}`` is mantissa bit k+1 counted from the MSB; 0 for ``k = m`` (A19).  Subnormals use
    their effective exponent 1 - bias.
    """
    f = _format(fmt)
    k = _check_n(k, 0, f.man_bits, "mantissa bitlength k")
    a, _ = _bits(bits, f)
    s, e, man = fields(a, f)
    if k == f.man_bits:
        bit = np.zeros_like(man)
    else:
        bit = (man >> (f.man_bits - k - 1)) & 1
    e_eff = np.maximum(e, 1) - f.bias
    out = np.where(bit == 1, np.ldexp(1.0 - 2.0 * s, (e_eff - (k + 1)).astype(np.int32)), 0.0)
    return float(out) if out.ndim == 0 else out


def qm_grad(bits, g, n_real: float, gamma: float = GAMMA, lam: float = 1.0, fmt="fp32"):
    """∂L/∂n_m = γλ + Σ g·(P(x, k+1) - P(x, k)) with k = floor(n_m) (§2.7, A14, A17)."""
    f = _format(fmt)
    if not 0 <= n_real <= f.man_bits:
        raise ValueError(f"mantissa bitlength {n_real!r} is outside [0, {f.man_bits}]")
    delta = qm_delta(bits, int(math.floor(n_real)), f)
    return gamma * lam + float((np.asarray(g, dtype=np.float64) * delta).sum())


def reg_grad(gamma: float = GAMMA, lam: float = 1.0) -> float:
    """Gradient of the regularizer term γ·λ_i·n_i with respect to the real-valued n_i (A17)."""
    return gamma * lam


def tensor_weights(numels) -> np.ndarray:
    """λ_i = numel_i / Σ numel (A16)."""
    n = np.asarray(numels, dtype=np.float64)
    if n.ndim != 1 or n.size == 0 or (n <= 0).any():
        raise ValueError(f"tensor sizes must be a non-empty list of positive counts, "
                         f"got {numels!r}")
    return n / n.sum()


def clip_bitlength(n: float, hi: int) -> float:
    """Clip a learned bitlength to [0, hi] after an optimizer step (A19)."""
    return float(min(max(n, 0.0), hi))


def freeze_bitlength(n: float) -> int:
    """Round a learned bitlength *up* when freezing it (§2.8)."""
    return int(math.ceil(n))


# --------------------------------------------------------------------------------------------
# BitWave


def ols_slope(y) -> float:
    """Least-squares slope of ``y`` against 0..N-1 (float64; §3.2)."""
    yy = np.asarray(y, dtype=np.float64)
    if yy.ndim != 1 or yy.size < 2:
        raise ValueError(f"slope needs at least 2 losses, got {y!r}")
    x = np.arange(yy.size, dtype=np.float64)
    xc = x - x.mean()
    return float((xc * (yy - yy.mean())).sum() / (xc * xc).sum())


def bwe_range(k: int) -> tuple[int, int]:
    """Unbiased exponent range (lo, hi) = (-126 + k, 127 - k) for a shrink count k in 0..126."""
    k = _check_n(k, 0, 126, "BitWave range shrink k")
    return -126 + k, 127 - k


def bwe_exp_bits(k: int) -> int:
    """Accounting exponent bitlength ceil(log2((hi - lo + 1) + 1)) (one code for zero)."""
    lo, hi = bwe_range(k)
    return (hi - lo + 1).bit_length()  # == ceil(log2(count + 1)) for count >= 1


def bwe_clamp(bits, k: int, fmt="fp32"):
    """BWE clamp (A22): exponent below lo -> +0.0, above hi -> ±(2 - 2^-m)·2^hi, else as is."""
    f = _format(fmt)
    lo, hi = bwe_range(k)
    a, restore = _bits(bits, f)
    s, e, _ = fields(a, f)
    eu = e - f.bias
    sat = pack(s, hi + f.bias, (1 << f.man_bits) - 1, f)
    out = np.where((e == 0) | (eu < lo), 0, np.where(eu > hi, sat, a))
    return restore(out)


def bitwave_quantize(bits, n_m: int, k: int, fmt="fp32"):
    """BitWave's stored value: P(BWE(x), n_m) — clamp first, then truncate (§1.4)."""
    return truncate_mantissa(bwe_clamp(bits, k, fmt), n_m, fmt)


@dataclass(frozen=True)
class BitWaveConfig:
    """Parameters of the BitWave controller (§3.2, A22).  The paper gives none of the values."""

    #: loss-history length N used for the least-squares slope
    history: int = 4
    #: dead-zone threshold T on |slope|
    threshold: float = 0.1
    #: source format ("fp32": m = 23, "bf16": m = 7)
    fmt: str = "fp32"
    #: mantissa bits removed/added per batch
    step_m: int = 1
    #: exponent values removed/added per range limit per batch
    step_k: int = 1
    #: epoch at whose end the averages are fixed (the paper: "a few epochs")
    fix_epoch: int = 5

    def __post_init__(self):
        check_int(self, "history", 2, 1 << 20)
        if isinstance(self.threshold, bool) or not isinstance(self.threshold, (int, float)) \
                or not self.threshold >= 0:
            raise ConfigError(type(self).__name__, "threshold", self.threshold, "a number >= 0")
        check_choice(self, "fmt", SOURCE_FORMATS)
        check_int(self, "step_m", 1, 23)
        check_int(self, "step_k", 1, 126)
        check_int(self, "fix_epoch", 0, 1 << 20)


class BitWave:
    """Network-wide BitWave controller (§3.2).

    One slope of the loss history drives both the mantissa bitlength ``n_m`` (init m) and the
    exponent range shrink ``k`` (init 0; range [-126 + k, 127 - k]).  ``step(loss)`` is called
    once per batch; ``end_epoch()`` once per epoch fixes the averages at ``fix_epoch``.
    """

    K_MAX = 126

    def __init__(self, cfg: BitWaveConfig = BitWaveConfig()):
        self.cfg = cfg
        self.m = FORMATS[cfg.fmt].man_bits
        self.hist = deque(maxlen=cfg.history)
        self.n_m = self.m
        self.k = 0
        self.epoch = 0
        self.fixed = False
        self._sum_m = 0
        self._sum_k = 0
        self._batches = 0

    def step(self, loss: float) -> tuple[int, int]:
        """Record one batch's loss and update ``(n_m, k)``; returns the new values."""
        if not math.isfinite(loss):
            raise ValueError(f"loss {loss!r} is not finite")
        if self.fixed:
            return self.n_m, self.k
        self._sum_m += self.n_m
        self._sum_k += self.k
        self._batches += 1
        self.hist.append(float(loss))
        if len(self.hist) < self.cfg.history:
            return self.n_m, self.k
        slope = ols_slope(list(self.hist))
        if slope < -self.cfg.threshold:
            self.n_m = max(self.n_m - self.cfg.step_m, 0)
            self.k = min(self.k + self.cfg.step_k, self.K_MAX)
        elif slope > self.cfg.threshold:
            self.n_m = min(self.n_m + self.cfg.step_m, self.m)
            self.k = max(self.k - self.cfg.step_k, 0)
        return self.n_m, self.k

    def end_epoch(self) -> None:
        """Count an epoch; at ``fix_epoch`` fix n_m = ceil(mean) and k = floor(mean) for good."""
        self.epoch += 1
        if not self.fixed and self.epoch >= self.cfg.fix_epoch and self._batches:
            self.n_m = -(-self._sum_m // self._batches)
            self.k = self._sum_k // self._batches
            self.fixed = True

    @property
    def exp_range(self) -> tuple[int, int]:
        """Current unbiased exponent range (lo, hi)."""
        return bwe_range(self.k)

    @property
    def exp_bits(self) -> int:
        """Current accounting exponent bitlength."""
        return bwe_exp_bits(self.k)

    def quantize(self, bits):
        """Quantize bit patterns with the current values: P(BWE(x), n_m)."""
        return bitwave_quantize(bits, self.n_m, self.k, self.cfg.fmt)


__all__ = [
    "GAMMA", "truncate_mantissa", "select_bits", "qe_range", "qe_bounds", "qe_clamp",
    "qe_indicators", "qe_chain", "qe_grad", "qm_delta", "qm_grad", "reg_grad",
    "tensor_weights", "clip_bitlength", "freeze_bitlength", "ols_slope", "bwe_range",
    "bwe_exp_bits", "bwe_clamp", "bitwave_quantize", "BitWaveConfig", "BitWave",
]

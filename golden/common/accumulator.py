"""The extended-precision accumulator shared by the FPRaker PE and the bit-parallel bf16 PE.

Spec ``docs/specs/fpraker.md`` §1.2/§1.3/§3.3 and §11.6: both PEs add their partial sums into the same
``1.P`` floating-point accumulator (``P = keep_bits``) through an adder on the ``2**(E - F)`` grid
(``F = frac_bits``) with round-to-odd jamming below it, normalize with round-to-nearest-even every
step, and read out bfloat16.  Everything here is vectorized over NumPy arrays of independent PEs.

Accumulator state ``(zero, sign, exp, sig)``: when not zero the value is
``(-1)**sign * sig * 2**(exp - P)`` with ``2**P <= sig < 2**(P+1)``.
"""

import functools
from fractions import Fraction
from typing import NamedTuple

import numpy as np

from .. import check_choice, check_int
from .rounding import RoundConfig, round_checked, round_raw

#: the RTL's accumulator exponent register is 10-bit signed (spec §1.2 [C], §3.4)
EXP_W = 10
#: internal signed exponent width of the PE datapaths: unbiased product exponents are
#: -252..254, term weights -259..255, and k = E - w stays below 800
XW = 12

#: bfloat16 read-out modes: truncation of the kept fraction (the paper's) or RNE
OUT_ROUNDS = ("trunc", "rne")


def min_int_bits(frac_bits: int, keep_bits: int, sum_max: int) -> int:
    """Integer bits (above the ``frac_bits`` fraction) holding ``acc + sum`` at full scale."""
    acc_max = ((1 << (keep_bits + 1)) - 1) << (frac_bits - keep_bits)
    return max(1, (acc_max + sum_max).bit_length() - frac_bits)



def check_accumulator_fields(cfg) -> None:
    """Validate ``lanes``, ``keep_bits`` and ``frac_bits`` (shared with the baseline PE)."""
    check_int(cfg, "lanes", 1, 64)
    check_int(cfg, "keep_bits", 1, 9)
    check_int(cfg, "frac_bits", cfg.keep_bits, 20)


def check_adder_fields(cfg, need: int) -> None:
    """Validate ``int_bits`` against the worst-case step (``need``) and ``out_round``."""
    check_int(cfg, "int_bits", need, 16)
    check_choice(cfg, "out_round", OUT_ROUNDS)



class Acc(NamedTuple):
    """Accumulator state (spec §1.2).

    When ``zero`` is false the value is ``(-1)**sign * sig * 2**(exp - keep_bits)`` with
    ``2**keep_bits <= sig < 2**(keep_bits + 1)``; a zero accumulator is ``Acc.ZERO``.
    """

    zero: bool
    sign: int
    exp: int
    sig: int

    def to_fraction(self, keep_bits: int) -> Fraction:
        """The exact value (for tests and tolerance checks)."""
        if self.zero:
            return Fraction(0)
        return (-1) ** self.sign * Fraction(self.sig) * Fraction(2) ** (self.exp - keep_bits)


Acc.ZERO = Acc(True, 0, 0, 0)
ACC_ZERO = Acc.ZERO



def decode_bf16(bits):
    """Split bfloat16 bit patterns into ``(active, sign, unbiased exponent, 8-bit significand)``.

    ``active`` is false for zeros and denormals (exponent field 0, flushed to zero, spec §1.3).

    Raises
    ------
    ValueError
        An exponent field of 255 (Inf/NaN, outside the PE's contract, spec §1.3).
    """
    x = np.asarray(bits)
    if x.dtype.kind not in "ui":
        raise ValueError(f"bfloat16 operands must be integer bit patterns, got dtype {x.dtype}")
    x = x.astype(np.int64)
    if ((x < 0) | (x > 0xFFFF)).any():
        bad = x[(x < 0) | (x > 0xFFFF)].flat[0]
        raise ValueError(f"bfloat16 bit pattern {int(bad)} is outside 0..0xFFFF")
    e = (x >> 7) & 0xFF
    if (e == 255).any():
        bad = x[e == 255].flat[0]
        raise ValueError(f"bfloat16 0x{int(bad):04X} has exponent field 255 (Inf/NaN), "
                         "which the PE does not accept")
    return e != 0, (x >> 15) & 1, e - 127, 128 + (x & 0x7F)


def shift_jam(x, s):
    """``x * 2**-s`` on integers: exact left shift for ``s <= 0``, RTO (jam) for ``s > 0``.

    Round-to-odd is two's-complement floor with the sticky OR-ed into the LSB, which equals
    sign-magnitude jamming (spec §3.3).  Shifts beyond 62 give the same result as 62 for the
    operand widths used here.
    """
    s = np.asarray(s, dtype=np.int64)
    sr = np.clip(s, 0, 62)
    left = x << np.clip(-s, 0, 62)
    right = (x >> sr) | ((x & ((np.int64(1) << sr) - 1)) != 0)
    return np.where(s > 0, right, left)


def align_acc(zero, sign, exp, sig, E, cfg):
    """Accumulator as a signed integer on the ``2**(E - F)`` grid (the "acc shift")."""
    mag = shift_jam(sig, E - exp - (cfg.frac_bits - cfg.keep_bits))
    return np.where(zero, 0, np.where(sign == 1, -mag, mag))


@functools.lru_cache(maxsize=64)
def norm_config(cfg) -> RoundConfig:
    """The rounding block that normalizes a step sum (spec §3.3 NORM_RNE): the signed
    ``frac_bits + int_bits + 1``-bit sum on the ``2**(E - F)`` grid, RNE to ``1.P`` with a
    10-bit exponent register (no range: it wraps like the register)."""
    return RoundConfig(fmt=f"e{EXP_W}m{cfg.keep_bits}", signed=True,
                       in_width=cfg.frac_bits + cfg.int_bits + 1, frac=cfg.frac_bits,
                       exp_width=XW, mode="rne", overflow="wrap")


@functools.lru_cache(maxsize=64)
def read_out_config(cfg) -> RoundConfig:
    """The rounding block that reads an accumulator out to bfloat16 (spec §1.2/§1.3):
    ``1.P`` significand, RNE or truncation (``out_round``), ±Inf above, FTZ below."""
    return RoundConfig(fmt="bf16", in_width=cfg.keep_bits + 1, frac=cfg.keep_bits,
                       exp_width=EXP_W, normalized=True,
                       mode="rne" if cfg.out_round == "rne" else "rtz", overflow="inf")


def norm_rne(X, E, cfg):
    """NORM_RNE of spec §3.3: ``X * 2**(E - F)`` rounded to ``1.P`` → ``(zero, sign, exp, sig)``."""
    # X and E come from the model's own step (in range by construction of int_bits and the
    # exponent widths), so the range checks of round_raw are skipped
    X = np.asarray(X, dtype=np.int64)
    r = round_checked(norm_config(cfg), X, np.broadcast_to(np.asarray(E, dtype=np.int64), X.shape),
                      0, 0)
    return r.zero, r.sign, r.exp, r.sig


def read_out_bits(zero, sign, exp, sig, cfg):
    """bfloat16 bits of accumulators (§1.2 read-out, §1.3 overflow to ±Inf, underflow to ±0)."""
    r = round_raw(read_out_config(cfg), np.where(zero, 0, sig), exp, np.where(zero, 0, sign))
    return r.bits.astype(np.uint16)


ACC_EXP_MIN, ACC_EXP_MAX = -(1 << (EXP_W - 1)), (1 << (EXP_W - 1)) - 1


def check_acc(acc, keep_bits: int) -> Acc:
    """An :class:`Acc` (or 4-tuple) validated against the ``1.P`` format (``P = keep_bits``).

    Raises
    ------
    ValueError
        A non-zero accumulator whose ``sig`` is outside ``[2**P, 2**(P+1))``, whose ``sign`` is
        not 0 or 1, or whose ``exp`` is outside the RTL's 10-bit signed range.
    """
    try:
        acc = Acc(*acc)
    except TypeError:
        raise ValueError(f"accumulator {acc!r} must be an Acc(zero, sign, exp, sig)") from None
    if acc.zero:
        return Acc.ZERO
    for name in ("sign", "exp", "sig"):
        v = getattr(acc, name)
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise ValueError(f"accumulator {acc!r}: {name} must be an int, got {v!r}")
    if acc.sign not in (0, 1):
        raise ValueError(f"accumulator {acc!r}: sign {acc.sign} is not 0 or 1")
    if not (1 << keep_bits) <= acc.sig < (2 << keep_bits):
        raise ValueError(f"accumulator {acc!r}: sig {acc.sig} is outside "
                         f"[2**{keep_bits}, 2**{keep_bits + 1}) of the 1.{keep_bits} format")
    if not ACC_EXP_MIN <= acc.exp <= ACC_EXP_MAX:
        raise ValueError(f"accumulator {acc!r}: exp {acc.exp} is outside the 10-bit signed "
                         f"range {ACC_EXP_MIN}..{ACC_EXP_MAX}")
    return acc


def acc_arrays(acc, n, keep_bits: int):
    """``n`` copies of a validated accumulator as the ``(zero, sign, exp, sig)`` arrays."""
    acc = check_acc(acc, keep_bits)
    return (np.full(n, bool(acc.zero)), np.full(n, int(acc.sign), dtype=np.int64),
            np.full(n, int(acc.exp), dtype=np.int64), np.full(n, int(acc.sig), dtype=np.int64))


def acc_from_arrays(arrays, row: int = 0) -> Acc:
    """Row ``row`` of ``(zero, sign, exp, sig)`` arrays as an :class:`Acc`."""
    z, s, e, m = arrays
    return Acc(bool(z[row]), int(s[row]), int(e[row]), int(m[row]))


def read_out(acc, cfg) -> int:
    """Convert an accumulator to bfloat16 bits (spec §1.2/§1.3).

    ``cfg.out_round`` selects truncation of the kept fraction to 7 bits (the paper's
    "extracting only 7b") or RNE; a biased exponent >= 255 gives ±Inf, <= 0 gives ±0.
    """
    return int(read_out_bits(*acc_arrays(acc, 1, cfg.keep_bits), cfg)[0])


def group_operands(A, B, lanes):
    """Validate and pad operand arrays to shape (n, groups * lanes); an empty row is one group."""
    A = np.asarray(A)
    B = np.asarray(B)
    if A.shape != B.shape:
        raise ValueError(f"A and B must have the same shape, got {A.shape} and {B.shape}")
    if A.ndim != 2:
        raise ValueError(f"A and B must be 2-D (n, K) arrays of bf16 bits, got shape {A.shape}")
    if A.size == 0:
        # an empty array has no element to carry a dtype: give it the integer one
        A, B = A.astype(np.int64), B.astype(np.int64)
    K = A.shape[1]
    pad = (-K) % lanes if K else lanes
    if pad:
        A = np.pad(A, ((0, 0), (0, pad)))
        B = np.pad(B, ((0, 0), (0, pad)))
    return A, B


def group_row(a, b, lanes):
    """One group of at most ``lanes`` (A, B) bf16 pairs as zero-padded (1, lanes) arrays."""
    A, B = _vector(a, "a"), _vector(b, "b")
    if len(A) != len(B) or len(A) > lanes:
        raise ValueError(f"a and b need equal lengths of at most {lanes}, "
                         f"got {len(A)} and {len(B)}")
    return group_operands(A[None, :], B[None, :], lanes)


def dot_row(a, b):
    """One dot product's operand vectors as (1, K) arrays for the batch models."""
    A, B = _vector(a, "a"), _vector(b, "b")
    if A.shape != B.shape:
        raise ValueError(f"a and b must have the same length, got {A.shape} and {B.shape}")
    return A[None, :], B[None, :]


def _vector(x, name):
    """A 1-D operand array; the dtype is kept so that :func:`decode_bf16` rejects floats."""
    v = np.asarray(x)
    if v.ndim != 1:
        raise ValueError(f"{name} must be a 1-D sequence of bf16 bit patterns, "
                         f"got shape {v.shape}")
    return v


def run_groups(A, B, cfg, acc, step):
    """Row-wise dot products group after group.

    ``step(A_g, B_g, acc_arrays)`` runs one group of ``cfg.lanes`` pairs on every row and
    returns ``(acc_arrays, cycles per row)``.  Returns the final accumulator arrays and the
    cycles of every (row, group).
    """
    A, B = group_operands(A, B, cfg.lanes)
    n, K = A.shape
    acc_arr = acc_arrays(acc if acc is not None else Acc.ZERO, n, cfg.keep_bits)
    cycles = np.zeros((n, K // cfg.lanes), dtype=np.int64)
    for g in range(0, K, cfg.lanes):
        acc_arr, cycles[:, g // cfg.lanes] = step(A[:, g:g + cfg.lanes], B[:, g:g + cfg.lanes],
                                                  acc_arr)
    return acc_arr, cycles


__all__ = ["OUT_ROUNDS", "min_int_bits", "check_accumulator_fields", "check_adder_fields", "Acc",
           "ACC_ZERO", "EXP_W", "XW", "decode_bf16", "shift_jam", "align_acc",
           "norm_config", "read_out_config", "norm_rne", "read_out_bits", "ACC_EXP_MIN", "ACC_EXP_MAX", "check_acc", "acc_arrays",
           "acc_from_arrays", "read_out", "group_operands", "group_row", "dot_row", "run_groups"]

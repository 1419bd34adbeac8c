"""Bit-parallel bfloat16 baseline PE (spec ``seed-fpraker.md`` §11.6 and §14).

The comparison point of the FPRaker paper: ``lanes`` bit-parallel bfloat16 multipliers whose
exact products are aligned, summed and added to the same extended-precision accumulator as the
FPRaker PE (:mod:`golden.fpraker.pe`), one group per cycle.  Per group::

    P_i   = SigA_i * SigB_i              # exact 16-bit product, value P_i * 2**(ABe_i - 14)
    E     = max(eacc if acc is not zero, ABe_i + [P_i >= 2**15] over active lanes)
    X     = jam(acc, grid 2**(E-F)) + sum_i sigma_i * jam(P_i, grid 2**(E-F))   # RTO each
    acc   = NORM_RNE(X, E)

Zero and denormal operands (exponent field 0) make a lane inactive; exponent field 255 is
rejected (spec §1.3).  The accumulator and read-out are the FPRaker PE's (:mod:`golden.common.accumulator`).

The baseline tile (:class:`BaselineTileConfig`, :func:`bf16_tile_run`) is ``rows`` x ``cols`` of
these PEs in lock-step, one group per cycle (spec §5.1, §14), with the FPRaker tile's operand
arrays and result record (:mod:`golden.common.tile`).
"""

import functools
from dataclasses import dataclass

import numpy as np

from . import check_choice, check_int
from .common.formats import format_named
from .common.fp32 import QNAN, fp32_add_bits
from .common.rounding import RoundConfig, round_raw
from .common.tile import TileResult, check_tile_operands

from .common.accumulator import (Acc, acc_arrays, acc_from_arrays, align_acc,
                                check_accumulator_fields, check_adder_fields, decode_bf16,
                                dot_row, group_row, min_int_bits, norm_rne, read_out,
                                read_out_bits, run_groups, shift_jam)


def required_int_bits(lanes: int, frac_bits: int, keep_bits: int) -> int:
    """Smallest ``int_bits`` for which the baseline's adder cannot overflow.

    Every aligned product is below ``2**(frac_bits + 1)`` (a product in ``[2, 4)`` is aligned at
    least one position lower); the accumulator adds its largest significand.
    """
    return min_int_bits(frac_bits, keep_bits, lanes * (1 << (frac_bits + 1)))


@dataclass(frozen=True)
class BaselineConfig:
    """Configuration of the bit-parallel bfloat16 PE; defaults match :class:`PEConfig`'s.

    The accumulator fields are declared again here rather than inherited from a common base:
    each unit's configuration stays one flat dataclass whose field order is the one its preset
    and manifest show.  Their validation is shared (``check_accumulator_fields``,
    ``check_adder_fields``).
    """

    #: MAC lanes (bfloat16 multipliers) per PE (paper: 8)
    lanes: int = 8
    #: F, alignment grid below the accumulator's hidden bit (paper: 12 = 9 + G/R/S)
    frac_bits: int = 12
    #: P, fraction bits kept after each group's RNE, 1..9 (paper: 9)
    keep_bits: int = 9
    #: integer bits of the adder above the hidden bit (5 for 8 lanes)
    int_bits: int = 5
    #: bfloat16 read-out: "trunc" or "rne"
    out_round: str = "trunc"

    def __post_init__(self):
        check_accumulator_fields(self)
        check_adder_fields(self, required_int_bits(self.lanes, self.frac_bits, self.keep_bits))


def _group_step(a, b, acc, cfg):
    """One baseline cycle for every row: arrays (n, lanes) of bf16 bits → new acc arrays."""
    F = cfg.frac_bits
    zero, sign, exp, sig = acc
    act_a, sa, ea, ma = decode_bf16(a)
    act_b, sb, eb, mb = decode_bf16(b)
    act = act_a & act_b
    abe = ea + eb
    prod = ma * mb
    pexp = abe + (prod >= (1 << 15))
    E = np.where(act, pexp, np.iinfo(np.int64).min).max(axis=1)
    E = np.where(zero, E, np.maximum(E, exp))
    E = np.where(act.any(axis=1) | ~zero, E, 0)
    # product value prod * 2**(abe - 14) on the grid 2**(E - F)
    aligned = shift_jam(prod, E[:, None] - abe + 14 - F)
    terms = np.where(act, np.where((sa ^ sb) == 1, -aligned, aligned), 0)
    X = align_acc(zero, sign, exp, sig, E, cfg) + terms.sum(axis=1)
    return norm_rne(X, E, cfg)


def _dot(A, B, cfg, acc):
    """Accumulator arrays and cycles per row (one per group) of the row-wise dot products."""
    acc_arr, cycles = run_groups(A, B, cfg, acc, lambda a, b, acc_arr: (
        _group_step(a, b, acc_arr, cfg), np.ones(len(a), dtype=np.int64)))
    return acc_arr, cycles.sum(axis=1)


def baseline_group(acc, a, b, cfg: BaselineConfig = BaselineConfig()):
    """One group of up to ``cfg.lanes`` (A, B) bf16 pairs (zero-padded) in one cycle.

    Returns
    -------
    acc : Acc
        Accumulator after the group.
    cycles : int
        Always 1.

    Raises
    ------
    ValueError
        Operands that are not integer bf16 bit patterns (or have exponent field 255), more than
        ``cfg.lanes`` pairs, or an ``acc`` outside the ``1.P`` format.
    """
    A, B = group_row(a, b, cfg.lanes)
    return acc_from_arrays(_group_step(A, B, acc_arrays(acc, 1, cfg.keep_bits), cfg)), 1


def baseline_dot_batch(A, B, cfg: BaselineConfig = BaselineConfig(), acc=None):
    """Row-wise dot products of (n, K) bf16 arrays; returns (bf16 results, cycles per row)."""
    acc_arr, cycles = _dot(A, B, cfg, acc)
    return read_out_bits(*acc_arr, cfg), cycles


def baseline_dot_batch_acc(A, B, cfg: BaselineConfig = BaselineConfig(), acc=None):
    """Like :func:`baseline_dot_batch` but returns the accumulators (list of :class:`Acc`)."""
    acc_arr, cycles = _dot(A, B, cfg, acc)
    return [acc_from_arrays(acc_arr, r) for r in range(len(acc_arr[0]))], cycles


def baseline_dot(a, b, cfg: BaselineConfig = BaselineConfig()):
    """One dot product: the batch model with a single row; returns (bf16 bits, cycles)."""
    out, cycles = baseline_dot_batch(*dot_row(a, b), cfg)
    return int(out[0]), int(cycles[0])


# ----------------------------------------------------------------------------------------------
# The baseline tile: rows x cols bit-parallel PEs (spec seed-fpraker.md §5.1, §14)

@dataclass(frozen=True)
class BaselineTileConfig:
    """Configuration of the bit-parallel bfloat16 baseline tile (registry unit
    ``baseline.bf16_tile``): ``rows`` x ``cols`` :class:`BaselineConfig` PEs, the FPRaker
    paper's comparison tile (spec ``seed-fpraker.md`` §5.1: "The baseline tile has the same
    8×8×8 shape"; Table III).  The PE fields are :class:`BaselineConfig`'s, with its defaults
    and validation; :attr:`pe` is that PE configuration.
    """

    #: PE rows; row ``r``'s B stream is shared along the row (paper: 8)
    rows: int = 8
    #: PE columns; column ``c``'s A stream is shared down the column (paper: 8)
    cols: int = 8
    #: MAC lanes (bfloat16 multipliers) per PE (paper: 8)
    lanes: int = 8
    #: F, alignment grid below the accumulator's hidden bit (paper: 12 = 9 + G/R/S)
    frac_bits: int = 12
    #: P, fraction bits kept after each group's RNE, 1..9 (paper: 9)
    keep_bits: int = 9
    #: integer bits of the adder above the hidden bit (5 for 8 lanes)
    int_bits: int = 5
    #: bfloat16 read-out: "trunc" or "rne"
    out_round: str = "trunc"

    def __post_init__(self):
        check_int(self, "rows", 1, 64)
        check_int(self, "cols", 1, 64)
        check_accumulator_fields(self)
        check_adder_fields(self, required_int_bits(self.lanes, self.frac_bits, self.keep_bits))

    @property
    def pe(self) -> BaselineConfig:
        """The configuration of every PE of the tile."""
        return BaselineConfig(lanes=self.lanes, frac_bits=self.frac_bits,
                              keep_bits=self.keep_bits, int_bits=self.int_bits,
                              out_round=self.out_round)


def bf16_tile_run(A, B, cfg: BaselineTileConfig = BaselineTileConfig()) -> TileResult:
    """The baseline tile's reduction: every PE ``(r, c)`` accumulates
    ``sum_s A[c, s] . B[r, s]`` from a zero accumulator, one group per cycle.

    A bit-parallel PE takes every group in one cycle whatever its values, so all PEs advance in
    lock-step and the tile has no stalls: ``cycles`` is the number of groups, every
    ``group_cycles`` entry is 1 and every lane-cycle counts as useful (a zero operand's lane
    still spends its multiplier's cycle).  The arithmetic is :func:`baseline_dot_batch`'s.

    Parameters
    ----------
    A : array (cols, groups, lanes) of bf16 bit patterns
        Column ``c``'s operand stream (the one FPRaker processes term-serially).
    B : array (rows, groups, lanes) of bf16 bit patterns
        Row ``r``'s operand stream.
    cfg : BaselineTileConfig

    Returns
    -------
    TileResult
        ``out[r, c]`` the bf16 read-out of PE ``(r, c)`` (uint16, shape (rows, cols)).

    Raises
    ------
    ValueError
        Shapes that do not match the tile or each other, no group, non-integer arrays, values
        outside 0..0xFFFF or an exponent field of 255 (spec §1.3).
    """
    A, B = check_tile_operands(A, B, cfg.rows, cfg.cols, cfg.lanes)
    G = A.shape[1]
    K = G * cfg.lanes
    # one dot product per PE, in row-major (r, c) order
    rows = np.broadcast_to(B.reshape(cfg.rows, 1, K), (cfg.rows, cfg.cols, K)).reshape(-1, K)
    cols = np.broadcast_to(A.reshape(1, cfg.cols, K), (cfg.rows, cfg.cols, K)).reshape(-1, K)
    out, _ = baseline_dot_batch(cols, rows, cfg.pe)
    lane_cycles = G * cfg.rows * cfg.cols * cfg.lanes
    return TileResult(out=out.reshape(cfg.rows, cfg.cols).astype(np.uint16), cycles=G, stalls={},
                      group_cycles=np.ones((cfg.cols, G), dtype=np.int64), useful=lane_cycles,
                      lane_cycles=lane_cycles)


# ----------------------------------------------------------------------------------------------
# FAST's Table IV baselines: 16 independent MACs (spec seed-fast.md §7 Table IV, A19)

#: operand formats of FAST's Table IV MAC baselines (hfp8 is the paper's e4m2)
MAC16_FORMATS = ("int8", "int12", "hfp8", "bf16", "fp16")


@dataclass(frozen=True)
class MAC16Config:
    """Configuration of a Table IV baseline: ``lanes`` independent multiply-accumulate lanes
    (registry unit ``baseline.mac16``, spec ``seed-fast.md`` §7 Table IV, A19).

    Integer formats multiply two's complement operands exactly and accumulate in an
    ``acc_bits``-bit two's complement register (wrapping).  Float formats (IEEE-style: exponent
    field 0 is zero/subnormal and reads as zero, all ones is Inf/NaN) multiply exactly into
    FP32 (the products of every listed format fit FP32's significand; a product outside FP32's
    exponent range becomes ±Inf or a signed zero), then accumulate with the FP32 adder (RNE,
    DAZ/FTZ): one rounding per MAC.  NaN operands and Inf × 0 give NaN, Inf × x gives ±Inf.
    """

    #: operand format: int8, int12, hfp8 (e4m2), bf16, fp16
    fmt: str = "bf16"
    #: MAC lanes (Table IV: 16, one per element of FAST's 16-element groups)
    lanes: int = 16
    #: integer accumulator width (A19: 32)
    acc_bits: int = 32

    def __post_init__(self):
        check_choice(self, "fmt", MAC16_FORMATS)
        check_int(self, "lanes", 1, 64)
        check_int(self, "acc_bits", 16, 48)

    @property
    def format(self):
        return format_named(self.fmt)

    @property
    def is_float(self) -> bool:
        return self.format.kind == "float"


@functools.cache
def product_config(fmt) -> RoundConfig:
    """The exact product of two ``fmt`` significands (``2 * (man_bits + 1)`` bits) into FP32:
    the rounding block only places it (and handles FP32's exponent range)."""
    P = fmt.man_bits
    return RoundConfig(fmt="fp32", in_width=2 * (P + 1), frac=2 * P,
                       exp_width=fmt.exp_bits + 3, mode="rne")


def mac16_products(cfg: MAC16Config, a, b) -> np.ndarray:
    """The lanes' products: FP32 bit patterns (float formats) or exact integers."""
    fmt = cfg.format
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    if not cfg.is_float:
        def signed(v):
            return np.where(v >> (fmt.bits - 1) == 1, v - (1 << fmt.bits), v)
        return signed(a) * signed(b)
    P, emax = fmt.man_bits, fmt.exp_max
    sa, ea, ma = (a >> (fmt.width - 1)) & 1, (a >> P) & emax, a & ((1 << P) - 1)
    sb, eb, mb = (b >> (fmt.width - 1)) & 1, (b >> P) & emax, b & ((1 << P) - 1)
    sig = np.where((ea == 0) | (eb == 0), 0, ((1 << P) | ma) * ((1 << P) | mb))    # DAZ
    exp = np.where(sig == 0, 0, (ea - fmt.bias) + (eb - fmt.bias))
    sign = sa ^ sb
    out = round_raw(product_config(fmt), sig, exp, sign).bits
    inf_a, inf_b = (ea == emax) & (ma == 0), (eb == emax) & (mb == 0)
    zero_a, zero_b = ea == 0, eb == 0
    nan = ((ea == emax) & (ma != 0)) | ((eb == emax) & (mb != 0)) | (inf_a & zero_b) \
        | (inf_b & zero_a)
    out = np.where(inf_a | inf_b, (sign << 31) | 0x7F800000, out)
    return np.where(nan, QNAN, out).astype(np.int64)


def mac16_run(cfg: MAC16Config, groups) -> list:
    """The accumulators after each group ``(a, b, clear)`` (``a``/``b``: ``lanes`` bit patterns of
    the format): uint32 FP32 bit patterns, or the ``acc_bits``-bit two's complement integers as
    unsigned values; ``clear`` restarts from 0 (+0.0)."""
    acc = np.zeros(cfg.lanes, dtype=np.int64)
    out = []
    mask = (1 << cfg.acc_bits) - 1
    for a, b, clear in groups:
        if clear:
            acc = np.zeros(cfg.lanes, dtype=np.int64)
        prod = mac16_products(cfg, a, b)
        if cfg.is_float:
            acc = fp32_add_bits(acc.astype(np.uint32), prod.astype(np.uint32)).astype(np.int64)
        else:
            acc = (acc + prod) & mask
        out.append(acc.copy())
    return out


__all__ = ["BaselineConfig", "Acc", "required_int_bits", "baseline_group", "baseline_dot",
           "baseline_dot_batch", "baseline_dot_batch_acc", "read_out", "BaselineTileConfig",
           "bf16_tile_run", "MAC16_FORMATS",
           "MAC16Config", "product_config", "mac16_products", "mac16_run"]

"""FAST's Table IV baselines: ``lanes`` independent multiply-accumulate lanes in int8/int12
(32-bit integer accumulators) or hfp8/bf16/fp16 (FP32 accumulation)."""

import functools
from dataclasses import dataclass

import numpy as np

from .. import ConfigError, check_choice, check_int
from ..common.formats import format_named
from ..common.fp_add import QNAN, fp32_add_bits
from ..common.rounding import RoundConfig, convert_float, round_raw
from ..common.stream import delayed_steps, interleaved_shown, interleaved_steps


#: operand formats of FAST's Table IV MAC baselines (hfp8 is the paper's e4m2)
MAC16_FORMATS = ("int8", "int12", "hfp8", "bf16", "fp16")
#: most register stages before the accumulators (:class:`MAC16Config`.pipeline)
MAC16_MAX_PIPELINE = 2
#: most interleaved accumulations per lane (:class:`MAC16Config`.contexts)
MAC16_MAX_CONTEXTS = 6


@dataclass(frozen=True)
class MAC16Config:
    """Configuration of a Table IV baseline: ``lanes`` independent multiply-accumulate lanes
    (registry unit ``baseline.mac16``, spec ``docs/specs/fast.md`` §7 Table IV, A19).

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
    #: register stages before the accumulators, 0..2 (0: the paper's single-cycle MAC): 1
    #: registers the finished product (FP32 bits, or the exact integer product) with its valid
    #: and clear; 2 also registers the significand product and the product's exponent and
    #: special flags before the product's rounding (floats), or the operands before the
    #: multiplier (integers).  The accumulation itself stays one cycle, so results are
    #: unchanged; each group reaches the accumulators ``pipeline`` cycles later
    pipeline: int = 0
    #: interleaved accumulations per lane, 1..6 (float formats; 1: the paper's MAC): the FP32
    #: adder gets ``contexts - 1`` register stages inside the accumulation loop, so the loop
    #: holds ``contexts`` independent sums that take the cycles in rotation (C-slow): the
    #: group offered in a cycle joins the sum of that cycle's slot, ``t mod contexts``.  Each
    #: sum is rounded exactly as with one context; only the groups are spread over the sums
    contexts: int = 1

    def __post_init__(self):
        check_choice(self, "fmt", MAC16_FORMATS)
        check_int(self, "lanes", 1, 64)
        check_int(self, "acc_bits", 16, 48)
        check_int(self, "pipeline", 0, MAC16_MAX_PIPELINE)
        check_int(self, "contexts", 1, MAC16_MAX_CONTEXTS)
        if self.contexts > 1 and not self.is_float:
            raise ConfigError(type(self).__name__, "contexts", self.contexts,
                              f"1 with the integer format {self.fmt!r} (interleaved sums "
                              f"cut the FP32 accumulation loop; an integer accumulator is "
                              f"one short adder)")

    @property
    def format(self):
        return format_named(self.fmt)

    @property
    def is_float(self) -> bool:
        return self.format.kind == "float"


@functools.cache
def product_config(fmt, other=None) -> RoundConfig:
    """The exact product of a ``fmt`` significand and an ``other`` one (default ``fmt``;
    ``man_bits + 1`` bits each) into FP32: the rounding block only places it (and handles
    FP32's exponent range)."""
    other = other or fmt
    Pa, Pb = fmt.man_bits, other.man_bits
    return RoundConfig(fmt="fp32", in_width=Pa + Pb + 2, frac=Pa + Pb,
                       exp_width=max(fmt.exp_bits, other.exp_bits) + 3, mode="rne")


def float_products(a, fa, b, fb) -> np.ndarray:
    """Products of ``fa`` bit patterns ``a`` and ``fb`` bit patterns ``b`` (float formats,
    broadcast against each other) as FP32 bit patterns (int64), as a MAC lane makes them: exact
    significand product placed in FP32 (RNE, FTZ; a product outside FP32's exponent range
    becomes ±Inf or a signed zero), subnormal operands read as zero (DAZ), NaN operands and
    Inf × 0 give the quiet NaN, Inf × x gives ±Inf."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    Pa, Pb = fa.man_bits, fb.man_bits
    sa, ea, ma = (a >> (fa.width - 1)) & 1, (a >> Pa) & fa.exp_max, a & ((1 << Pa) - 1)
    sb, eb, mb = (b >> (fb.width - 1)) & 1, (b >> Pb) & fb.exp_max, b & ((1 << Pb) - 1)
    sig = np.where((ea == 0) | (eb == 0), 0, ((1 << Pa) | ma) * ((1 << Pb) | mb))    # DAZ
    exp = np.where(sig == 0, 0, (ea - fa.bias) + (eb - fb.bias))
    sign = sa ^ sb
    out = round_raw(product_config(fa, fb), sig, exp, sign).bits
    inf_a, inf_b = (ea == fa.exp_max) & (ma == 0), (eb == fb.exp_max) & (mb == 0)
    zero_a, zero_b = ea == 0, eb == 0
    nan = ((ea == fa.exp_max) & (ma != 0)) | ((eb == fb.exp_max) & (mb != 0)) \
        | (inf_a & zero_b) | (inf_b & zero_a)
    out = np.where(inf_a | inf_b, (sign << 31) | 0x7F800000, out)
    return np.where(nan, QNAN, out).astype(np.int64)


def signed_int(bits, fmt) -> np.ndarray:
    """Two's complement ``fmt`` bit patterns as signed int64 values."""
    v = np.asarray(bits, dtype=np.int64)
    return np.where(v >> (fmt.bits - 1) == 1, v - (1 << fmt.bits), v)


def mac16_products(cfg: MAC16Config, a, b) -> np.ndarray:
    """The lanes' products: FP32 bit patterns (float formats, :func:`float_products`) or exact
    integers."""
    fmt = cfg.format
    if not cfg.is_float:
        return signed_int(a, fmt) * signed_int(b, fmt)
    return float_products(a, fmt, b, fmt)


def mac16_operands(cfg: MAC16Config, bf16) -> np.ndarray:
    """bfloat16 bit patterns ``bf16`` (shape ``(..., lanes)``, one group per row: the operands
    of one side) as bit patterns of ``cfg.fmt``, the way ``trainfab power`` feeds real-valued
    operands to the unit:

    * float formats: each value rounded to the format, RNE
      (:func:`golden.common.rounding.convert_float`): subnormal inputs and results read as
      signed zeros (DAZ/FTZ, as the MACs read them), a value past the largest finite one
      saturates to it (no Inf operands; bf16 itself passes unchanged but for its subnormals);
    * integer formats: each group scaled by its own ``s = max|x| / (2**(bits - 1) - 1)`` and
      rounded, ``q = RNE(x / s)``, so the group's largest magnitude becomes ``±(2**(bits-1) -
      1)``; an all-zero group stays zero.  Returned as two's complement bit patterns.

    Inf/NaN inputs are refused (``ValueError``).
    """
    x = np.asarray(bf16, dtype=np.int64)
    if x.ndim < 1 or (x.size and (x.min() < 0 or x.max() > 0xFFFF)):
        raise ValueError("mac16_operands: bf16 bit patterns (0..0xFFFF) in rows of lanes")
    if x.size and ((x >> 7) & 0xFF == 0xFF).any():
        raise ValueError("mac16_operands: Inf/NaN operands (exponent field 255)")
    if cfg.is_float:
        return convert_float(x, "bf16", cfg.fmt, overflow="saturate")
    fmt = cfg.format
    top = (1 << (fmt.bits - 1)) - 1
    v = (x.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    big = np.abs(v).max(axis=-1, keepdims=True)
    # exact: v * top has at most 8 + 11 significant bits, and the float64 quotient is correctly
    # rounded, so it lands on k + 1/2 only when the exact quotient does (a bf16 quotient of
    # magnitude >= 1/2 is at least 2**-22 from any other half-integer)
    with np.errstate(invalid="ignore", divide="ignore"):
        q = np.where(big == 0, 0.0, np.rint(v * top / np.where(big == 0, 1.0, big)))
    return q.astype(np.int64) & ((1 << fmt.bits) - 1)


def mac16_run(cfg: MAC16Config, groups) -> list:
    """The accumulators after each group ``(a, b, clear)`` (``a``/``b``: ``lanes`` bit patterns of
    the format): uint32 FP32 bit patterns, or the ``acc_bits``-bit two's complement integers as
    unsigned values; ``clear`` restarts from 0 (+0.0)."""
    acc = np.zeros(cfg.lanes, dtype=np.int64)
    out = []
    for group in groups:
        acc = _mac_step(cfg, acc, group)
        out.append(acc.copy())
    return out


def _mac_step(cfg: MAC16Config, acc, group):
    a, b, clear = group
    if clear:
        acc = np.zeros(cfg.lanes, dtype=np.int64)
    prod = mac16_products(cfg, a, b)
    if cfg.is_float:
        return fp32_add_bits(acc.astype(np.uint32), prod.astype(np.uint32)).astype(np.int64)
    return (acc + prod) & ((1 << cfg.acc_bits) - 1)


def mac16_cycles(cfg: MAC16Config, cycles, acc=None, slot: int = 0) -> list:
    """Cycle model (the timing contract of :class:`hdl.baseline.MAC16`): ``cycles`` holds, per
    clock cycle, ``None`` (no group offered) or a group ``(a, b, clear)`` offered with
    ``valid`` (always accepted).  Returns the accumulators seen in the cycle after each edge.

    One context (``cfg.contexts = 1``): a group accepted at edge ``t`` is added into the
    accumulators at edge ``t + cfg.pipeline``, so ``acc`` shows it from the cycle after that
    edge (``pipeline = 0``: the next cycle); groups follow each other every cycle, each one
    accumulated exactly once, in order, and the idle cycles between them leave the
    accumulators as they are.  ``acc``: the accumulators before the first cycle, with no group
    in flight (default zeros).

    ``C = cfg.contexts > 1`` interleaved sums per lane: the group offered in cycle ``t`` joins
    sum ``(slot + t) mod C`` (``slot``: the unit's ``slot`` output in the first cycle), and is
    added into it ``C - 1 + pipeline`` edges after the edge that takes it, ``clear``
    restarting that sum alone.  In cycle ``t`` the unit shows sum
    ``(slot + t - pipeline) mod C`` (its ``acc_slot`` output, :func:`mac16_acc_slot`), with
    every group of that sum offered up to cycle ``t - C - pipeline``; as with one context, the
    list's entry ``t`` is what the cycle after edge ``t`` (cycle ``t + 1``) shows.  ``acc``:
    ``(C, lanes)``, the sums before the first cycle, indexed by slot, with nothing in flight
    (default zeros).
    """
    C = cfg.contexts
    if C == 1:
        acc = (np.zeros(cfg.lanes, dtype=np.int64) if acc is None
               else np.asarray(acc, dtype=np.int64).copy())
        return delayed_steps(cycles, cfg.pipeline, acc,
                             lambda acc, group: _mac_step(cfg, acc, group),
                             lambda acc: acc.copy())
    sums = (np.zeros((C, cfg.lanes), dtype=np.int64) if acc is None
            else np.asarray(acc, dtype=np.int64).copy())
    if sums.shape != (C, cfg.lanes):
        raise ValueError(f"mac16_cycles: acc of shape {sums.shape}; {C} contexts need "
                         f"(contexts, lanes) = {(C, cfg.lanes)}")
    return interleaved_steps(cycles, cfg.pipeline, C, list(sums),
                             lambda acc, group: _mac_step(cfg, acc, group), slot,
                             lambda acc: acc.copy())


def mac16_acc_slot(cfg: MAC16Config, t: int, slot: int = 0) -> int:
    """The sum :class:`hdl.baseline.MAC16` shows on ``acc`` in cycle ``t`` of a run whose first
    cycle's ``slot`` is ``slot``: ``(slot + t - pipeline) mod contexts``."""
    return interleaved_shown(t, cfg.pipeline, cfg.contexts, slot)


__all__ = ["MAC16_FORMATS", "MAC16_MAX_PIPELINE", "MAC16_MAX_CONTEXTS", "MAC16Config",
           "product_config", "float_products", "signed_int", "mac16_products", "mac16_operands",
           "mac16_run", "mac16_cycles", "mac16_acc_slot"]

"""Bit-parallel bfloat16 baseline PE (spec ``docs/specs/fpraker.md`` §11.6 and §14).

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

Register stages (``pipeline``) change only when a group reaches the accumulator, never what it
computes: :func:`bf16_pe_cycles` is the cycle model.
"""

from dataclasses import dataclass

import numpy as np

from .. import ConfigError, check_int
from ..common.accumulator import (Acc, acc_arrays, acc_from_arrays, align_acc, check_acc,
                                check_accumulator_fields, check_adder_fields, decode_bf16,
                                dot_row, group_row, min_int_bits, norm_rne, read_out,
                                read_out_bits, run_groups, shift_jam)
from ..common.stream import delayed_steps, interleaved_shown, interleaved_steps


#: most register stages before the accumulator (:class:`BaselineConfig`.pipeline)
BF16_PE_MAX_PIPELINE = 3
#: most interleaved dot products (:class:`BaselineConfig`.contexts)
BF16_PE_MAX_CONTEXTS = 6


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
    #: register stages before the accumulator, 0..3 (0: the paper's single-cycle PE): 1
    #: registers the products aligned onto the grid of their own largest exponent (the
    #: accumulator's exponent is not known before the step); 2 also registers the products,
    #: their exponents and that largest exponent after the max tree; 3 also the products and
    #: their exponents after the multipliers.  The accumulation step itself stays one cycle,
    #: so results are unchanged; each group reaches the accumulator ``pipeline`` cycles later
    pipeline: int = 0
    #: interleaved dot products, 1..6 (1: the paper's PE; more need ``pipeline >= 1``): the
    #: accumulation step gets ``contexts - 1`` register stages inside its loop (C-slow), so
    #: the loop holds ``contexts`` independent accumulators that take the cycles in rotation:
    #: the group offered in a cycle joins the dot product of that cycle's slot,
    #: ``t mod contexts``.  Each is accumulated exactly as with one context
    contexts: int = 1

    def __post_init__(self):
        check_accumulator_fields(self)
        check_adder_fields(self, required_int_bits(self.lanes, self.frac_bits, self.keep_bits))
        check_int(self, "pipeline", 0, BF16_PE_MAX_PIPELINE)
        check_int(self, "contexts", 1, BF16_PE_MAX_CONTEXTS)
        if self.contexts > 1 and self.pipeline == 0:
            raise ConfigError(type(self).__name__, "contexts", self.contexts,
                              "1 with pipeline = 0 (interleaved dot products use the "
                              "pipelined PE's split alignment: set pipeline >= 1)")


def group_step(a, b, acc, cfg):
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
        group_step(a, b, acc_arr, cfg), np.ones(len(a), dtype=np.int64)))
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
    return acc_from_arrays(group_step(A, B, acc_arrays(acc, 1, cfg.keep_bits), cfg)), 1


def bf16_pe_cycles(cfg: BaselineConfig, cycles, acc=None, slot: int = 0) -> list:
    """Cycle model (the timing contract of :class:`hdl.baseline.BF16PE`): ``cycles`` holds, per
    clock cycle, ``None`` (no group offered) or a group ``(a, b, clear)`` offered with
    ``valid`` (always accepted; ``a``/``b`` up to ``cfg.lanes`` bf16 bit patterns, zero-padded).
    Returns the accumulator (:class:`Acc`) seen in the cycle after each edge.

    A group accepted at edge ``t`` is accumulated at edge ``t + cfg.pipeline``, so ``acc``
    shows it from the cycle after that edge (``pipeline = 0``: the next cycle); groups follow
    each other every cycle, each one accumulated exactly once, in order, with
    :func:`baseline_group`'s arithmetic, and idle cycles leave the accumulator as it is.
    ``acc``: the accumulator before the first cycle, with no group in flight (default
    :attr:`Acc.ZERO`).

    With ``C = cfg.contexts > 1`` (:func:`golden.common.stream.interleaved_steps`): the group
    offered in cycle ``t`` joins accumulator ``(slot + t) mod C`` (``slot``: the PE's ``slot``
    output in the first cycle) ``C - 1 + pipeline`` edges after the edge that takes it, and
    ``clear`` restarts that one alone; cycle ``t`` shows accumulator
    ``(slot + t - pipeline) mod C`` (``acc_slot``, :func:`bf16_pe_acc_slot`).  ``acc``: the
    ``C`` accumulators before the first cycle, by slot (default all :attr:`Acc.ZERO`).

    Raises
    ------
    ValueError
        As :func:`baseline_group`, for the first offending group.
    """
    def step(acc, group):
        a, b, clear = group
        return baseline_group(Acc.ZERO if clear else acc, a, b, cfg)[0]

    C = cfg.contexts
    if C == 1:
        acc = check_acc(acc if acc is not None else Acc.ZERO, cfg.keep_bits)
        return delayed_steps(cycles, cfg.pipeline, acc, step)
    accs = [Acc.ZERO] * C if acc is None else [check_acc(a, cfg.keep_bits) for a in acc]
    return interleaved_steps(cycles, cfg.pipeline, C, accs, step, slot)


def bf16_pe_acc_slot(cfg: BaselineConfig, t: int, slot: int = 0) -> int:
    """The accumulator :class:`hdl.baseline.BF16PE` shows in cycle ``t`` of a run whose first
    cycle's ``slot`` is ``slot``: ``(slot + t - pipeline) mod contexts``."""
    return interleaved_shown(t, cfg.pipeline, cfg.contexts, slot)


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


__all__ = ["BF16_PE_MAX_PIPELINE", "BF16_PE_MAX_CONTEXTS", "bf16_pe_acc_slot", "BaselineConfig",
           "Acc", "required_int_bits", "baseline_group", "group_step", "bf16_pe_cycles",
           "baseline_dot", "baseline_dot_batch",
           "baseline_dot_batch_acc", "read_out"]

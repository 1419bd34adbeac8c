"""FPRaker processing element: 8 term-serial bfloat16 MAC lanes into one accumulator.

Spec ``docs/specs/fpraker.md`` §1.2, §1.3 and §3.  For each group of ``lanes`` (A, B) pairs the PE
computes ``acc += sum_i A_i * B_i`` over one or more cycles.  A significands are recoded into
signed powers of two (terms, :mod:`golden.fpraker.encoder`) that the lanes take one per cycle,
most significant first; B significands are used whole (8 bits, hidden bit included).

Accumulator (§1.2 [P]/[C])
--------------------------
``(zero, sign, exp, sig)``; when not zero the value is ``(-1)**sign * sig * 2**(exp - P)`` with
``2**P <= sig < 2**(P+1)`` (``P = keep_bits``, the paper's 1.9 format by default).  Every cycle
the partial sum and the accumulator are aligned to the grid ``2**(E - F)`` (``F = frac_bits``,
the 3 extra G/R/S bits being the jam position), added exactly in ``F + int_bits + 1`` bits and
normalized back to ``1.P`` with round-to-nearest-even.

Per-cycle semantics (§3.3, implemented verbatim by :func:`step_lanes`)
---------------------------------------------------------------
``elig`` are the lanes with a term, not done and allowed by the eligible mask::

    E     = max(ABe_i - t_i over elig, eacc if acc is not zero)        # step E [C]
    k_i   = E - ABe_i + t_i
    OB-a  : lanes with k_i > kmax are done (their remaining terms dropped)
    base  = min k_i over the rest; proc = {k_i - base <= dmax}; the others stall
    T     = sum_proc sigma_i * (SigB_i << (dmax - (k_i - base)))
    X     = jam(T, grid 2**(E-F)) + jam(acc, grid 2**(E-F))            # RTO = sticky LSB
    acc   = NORM_RNE(X, E)
    OB-b  : processed lanes with k_i >= kmax are done

A group takes at least one cycle; it is complete at the start of a cycle when every lane is
exhausted or done.

Group exponent mode (``exp_mode = "group"``, the paper's Block 1; spec §3.1, §4)
-------------------------------------------------------------------------------
The paper computes the exponents "only once per new set of value pairs, before any terms are
generated", in an exponent block two PEs share (§4).  In group mode the PE does exactly that:

* **Group start** (the PE's first cycle of the group; in a tile the cycle its shared exponent
  block serves it)::

      E_g = max(ABe_i - t_i over lanes presenting their first term and not done,
                eacc if acc is not zero)                  # 0 if neither
      X   = jam(acc, grid 2**(E_g - F))                   # the acc shift, once per group

  ``ABe_i - t_i`` of a lane's first term is ``ABe_i + 1`` when its CSD lead is ``2**+1``, so
  ``E_g`` is the paper's emax including the CSD carry (§3.3), and the per-lane offsets
  ``delta_i = E_g - ABe_i`` are the only exponent information the cycles below need.
* **Every cycle** runs the step-mode rules with ``E`` fixed at ``E_g``: ``k_i = delta_i + t_i``
  (narrow: ``0..kmax + 1``, the paper's 4-bit K), OB-a, base/window, the adder tree, and
  ``X += jam(T, grid 2**(E_g - F))``.  The accumulator is **not** normalized per cycle: ``X``
  is a fixed-point register on the group's grid.
* **Group end**: ``acc = NORM_RNE(X, E_g)`` (one RNE to ``1.P`` per group).

Numeric consequences:

* The accumulator may grow past ``2**(E_g + 1)`` during the group (eight products near
  ``2**E_g`` add up to almost ``2**(E_g + 5)``).  The grid does not move, so ``X`` must hold
  the whole group's sum: the integer bits above the hidden bit must cover
  ``|acc| + sum_i |partial sum of lane i| + 1 ulp of jam per cycle``, where a lane's partial sum
  is ``SigB_i`` times a prefix of its A terms, at most ``2**(ABe_i - E_g) * max|prefix|``.
  :func:`required_int_bits` computes this bound exactly over all 128 significands: CSD prefixes
  never exceed ``(4/3) * 2**lead``, so 8 lanes need **5** integer bits (the same as step mode),
  while plain binary terms (whose lead never carries) need **6** for 8 lanes.  A configuration
  with fewer is rejected.
* Rounding: each cycle's tree sum is jammed to ``2**(E_g - F)`` as in step mode, but there is
  one RNE per group instead of one per cycle, so the result never depends on per-cycle
  renormalization; the schedule still matters through the per-cycle jam when ``base > 2``.
  A falling accumulator (cancellation) keeps the group's coarser grid until the group ends,
  where step mode would lower ``E`` and gain precision mid-group.  Both modes stay inside the
  ``2**-7 * sum|a*b|`` tolerance of spec TV18 on the operand mixes the tests use
  (``tests/test_golden_fpraker_tile.py`` measures both).
* OB decisions use ``k = E_g - ABe_i + t_i``, so a lane's out-of-bounds terms are those below
  ``2**(E_g - kmax)``; ``E_g`` never falls within a group, so a dropped lane would stay dropped.

Interleaved dot products (``pipeline``, the PE's timing closure)
----------------------------------------------------------------
The step is a loop: the next step's ``E`` needs this step's normalized accumulator exponent,
and its terms need this step's pops.  A register inside the loop would make control see a stale
``eacc`` (the spec's ``EACC_LAG > 1``, whose numerics the paper does not define).  Instead,
``pipeline = p`` cuts the step into ``C = p + 1`` stages and the PE holds ``C`` independent dot
products (C-slow retiming), each with its own accumulator, encoder lanes, operands and flags:
every context takes one step every ``C`` cycles, exactly the step above, so each dot product
gets the one-context numerics and cycle count (in its own turns), and the PE still takes one
step per cycle.  :class:`PESlots` is the cycle model (the timing contract of
:class:`hdl.fpraker.PE` at ``pipeline >= 1``); the speedup study's cycles per group apply to
every context alike.

Choices beyond the spec
-----------------------
* ``dmax`` may equal ``frac_bits``: with the defaults, ``dmax = 12`` is the paper's Fig. 3 PE
  whose per-lane shifters cover the whole 12-bit fraction (spec §3.1); only ``dmax > frac_bits``
  is rejected.
* ``int_bits`` must hold the worst case of one step (all lanes at ``k = 0`` with ``SigB = 255`` on
  a full accumulator); :func:`required_int_bits` computes it (5 for the defaults, spec TV7).
* ``kmax`` up to 1023: any value above the largest reachable ``k`` (< 800 for bfloat16 inputs)
  disables out-of-bounds skipping.
* A starting accumulator must be in the ``1.P`` format with an exponent in the RTL's 10-bit
  signed range (:func:`golden.common.accumulator.check_acc`, ``ValueError`` otherwise).  Inside
  a dot product the model keeps exponents as unbounded integers; the RTL's 10-bit signed
  exponent holds every exponent reachable by dot products shorter than ``2**250`` terms.
* ``eligible`` (per-cycle lane masks, spec §11) models neighbour stalls in a tile: a lane
  outside the mask neither presents its term nor is checked for OB-a that cycle.
"""

import functools
from collections import deque
from dataclasses import dataclass
from fractions import Fraction
from typing import NamedTuple

import numpy as np

from .. import check_choice, check_int
from ..common.accumulator import (ACC_ZERO, OUT_ROUNDS, Acc, acc_arrays, acc_from_arrays,
                                  align_acc, check_accumulator_fields, check_adder_fields,
                                  decode_bf16, dot_row, group_row, min_int_bits, norm_rne,
                                  read_out, read_out_bits, run_groups, shift_jam)
from .encoder import ENCODINGS, encode_terms, recode

#: most register cuts inside the standalone PE's step (``PEConfig.pipeline``)
MAX_PIPELINE = 8
#: the interleaved PE's register cuts inside the step for each ``pipeline`` (module docstring),
#: in loop order: ``exponent`` after the step exponent E, ``offsets`` after the lanes' ``k``
#: and the base, ``control`` after the window and the lanes' shifters (the state is written
#: back before it), ``reduce`` after the adder tree, ``align`` after the base shifter, then
#: the accumulator's ``add``, ``normalize`` and ``increment``
STEP_CUTS = {
    0: (),
    1: ("exponent",),
    2: ("exponent", "add"),
    3: ("exponent", "control", "add"),
    4: ("exponent", "control", "add", "normalize"),
    5: ("exponent", "offsets", "control", "add", "normalize"),
    6: ("exponent", "offsets", "control", "reduce", "add", "normalize"),
    7: ("exponent", "offsets", "control", "reduce", "align", "add", "normalize"),
    8: ("exponent", "offsets", "control", "reduce", "align", "add", "normalize", "increment"),
}


def control_lag(cfg) -> int:
    """Stages of the interleaved PE's step before its control completes (the cuts before
    the window's end): the cycles between reading a step's state and writing it back."""
    return sum(c in STEP_CUTS[cfg.pipeline] for c in ("exponent", "offsets"))


#: largest accepted kmax; above every k reachable with bfloat16 operands (OB disabled)
KMAX_LIMIT = 1023


#: exponent modes: per-cycle step E (spec §3.3 [C]) or once per group (the paper's Block 1)
EXP_MODES = ("step", "group")


@functools.lru_cache(maxsize=8)
def _prefix_bound(encoding: str) -> Fraction:
    """``max |prefix of a significand's terms| * 2**(t of its first term)`` over all 128
    significands, in units of 1: the largest partial A value a group-mode lane reaches,
    relative to the group exponent's share of its own lead (``2**(ABe - E_g) <= 2**t_first``)."""
    best = Fraction(0)
    for sig in range(128, 256):
        terms = encode_terms(sig, encoding)
        t_first = terms[0][0]
        acc = Fraction(0)
        for t, neg in terms:
            acc += neg * Fraction(2) ** -t
            best = max(best, abs(acc) * Fraction(2) ** t_first)
    return best


def required_int_bits(lanes: int, frac_bits: int, keep_bits: int, dmax: int,
                      exp_mode: str = "step", encoding: str = "csd") -> int:
    """Smallest ``int_bits`` for which the PE's adder cannot overflow (spec §1.2, TV7).

    Step mode: the worst step has every lane at ``k = 0`` with ``SigB = 255`` while the
    accumulator is at its largest significand aligned to the same exponent.  Group mode: the
    whole group's sum stays on the group grid (see the module docstring), so the bound is the
    accumulator plus every lane's largest partial sum plus one ulp of jam per cycle.
    """
    if exp_mode == "group":
        lane = _prefix_bound(encoding) * Fraction(255, 128) * (1 << frac_bits)
        max_cycles = lanes * 9 + 2
        return min_int_bits(frac_bits, keep_bits, lanes * -(-lane.numerator // lane.denominator)
                            + max_cycles)
    tree = (lanes * 255) << dmax
    sh = frac_bits - 7 - dmax
    tg = tree << sh if sh >= 0 else (tree >> -sh) + 1
    return min_int_bits(frac_bits, keep_bits, tg)


@dataclass(frozen=True)
class PEConfig:
    """Configuration of the FPRaker PE (spec §9.1); defaults are the paper's Fig. 4 PE."""

    #: MAC lanes per PE: (A, B) pairs per group (paper: 8)
    lanes: int = 8
    #: F, datapath fraction bits below the accumulator's hidden bit (paper: 12 = 9 + G/R/S)
    frac_bits: int = 12
    #: P, fraction bits kept after each step's RNE, 1..9 (paper: 9, the 1.9 accumulator)
    keep_bits: int = 9
    #: KMAX, out-of-bounds threshold on k (paper: "emax-12"); up to 1023, large values disable
    #: OB.  Spec §3.3 defines the default as ``keep_bits + 3``: 12 is that value for the paper's
    #: keep_bits = 9, so set kmax = keep_bits + 3 explicitly when changing keep_bits
    kmax: int = 12
    #: largest k difference processed in one cycle, 0..frac_bits (Fig. 4: 3; Fig. 3: 12)
    dmax: int = 3
    #: integer bits of the step adder above the hidden bit (spec [C]: 5; paper's 4 overflows)
    int_bits: int = 5
    #: term encoding of the A significands: "csd" (canonical, the paper's) or "binary" (Fig. 5)
    encoding: str = "csd"
    #: bfloat16 read-out: "trunc" (paper: "extracting only 7b") or "rne"
    out_round: str = "trunc"
    #: exponent computation: "step" (per-cycle E, spec §3.3 [C]) or "group" (once per group,
    #: the paper's Block 1; see the module docstring)
    exp_mode: str = "step"
    #: register cuts inside the term-serial step, 0..8 (0: the paper's one-cycle step); the
    #: PE then interleaves ``pipeline + 1`` dot products (:class:`PESlots`, module docstring)
    pipeline: int = 0

    def __post_init__(self):
        check_accumulator_fields(self)
        check_int(self, "pipeline", 0, MAX_PIPELINE)
        check_int(self, "kmax", 0, KMAX_LIMIT)
        check_int(self, "dmax", 0, self.frac_bits)
        check_choice(self, "encoding", ENCODINGS)
        check_choice(self, "exp_mode", EXP_MODES)
        need = required_int_bits(self.lanes, self.frac_bits, self.keep_bits, self.dmax,
                                 self.exp_mode, self.encoding)
        check_adder_fields(self, need)


class CycleTrace(NamedTuple):
    """What the PE did in one cycle of a group (spec §11, ``pe_cycle`` trace fields).

    ``E`` is ``None`` when no lane was eligible and the accumulator was zero; ``k``/``tp`` hold
    ``None`` for lanes that were not eligible this cycle (no term, done, or masked out);
    ``base`` is ``None`` when no lane ran.
    """

    #: alignment exponent of the step (step E)
    E: int | None
    #: per lane: k = E - ABe + t of the presented eligible term, else None
    k: tuple
    #: per lane: t + 1 of the presented eligible term (encoder's tp), else None
    tp: tuple
    #: per lane: the lane was eligible this cycle
    eligible: tuple
    #: min k over the lanes that ran (None if none ran)
    base: int | None
    #: lanes whose term was added this cycle (consumed)
    processed: tuple
    #: lanes dropped before processing (OB-a: k > kmax at presentation)
    dropped_a: tuple
    #: lanes done after processing their term (OB-b: k >= kmax)
    dropped_b: tuple
    #: per lane: done flag after the cycle
    done: tuple
    #: exact adder-tree sum (grid 2**(E - F + sh))
    T: int
    #: tree sum jammed to the 2**(E - F) grid
    Tg: int
    #: accumulator aligned to the 2**(E - F) grid
    Ag: int
    #: step sum Ag + Tg
    X: int
    #: accumulator after the cycle
    acc: Acc

    @property
    def dropped(self) -> tuple:
        """All lanes marked done this cycle (OB-a and OB-b)."""
        return tuple(sorted(self.dropped_a + self.dropped_b))


# ----------------------------------------------------------------------------------------------
# term tables

#: per significand 0..255: recoded digit masks (rem, negm) of spec §2.3; zero for non-significands
RECODE = {
    enc: np.array([recode(s, enc) if s >= 128 else (0, 0) for s in range(256)], dtype=np.int64)
    for enc in ENCODINGS
}
#: msb index of a 9-bit digit mask (0 for 0; callers mask by rem != 0)
MSB9 = np.array([max(0, int(r).bit_length() - 1) for r in range(512)], dtype=np.int64)


# ----------------------------------------------------------------------------------------------
# the per-cycle kernel, vectorized over independent PEs (rows)

class LaneState:
    """Per-lane state of one group for ``n`` independent PEs (arrays of shape (n, lanes)),
    plus the group-mode registers ``eg`` (E_g, has_eg) and ``x`` (the fixed-point sum), shape
    (n,)."""

    __slots__ = ("abe", "sigb", "ps", "rem", "negm", "done", "eg", "has_eg", "x")

    def __init__(self, a, b, cfg):
        act_a, sa, ea, ma = decode_bf16(a)
        act_b, sb, eb, mb = decode_bf16(b)
        self.abe = ea + eb
        self.sigb = mb
        self.ps = sa ^ sb
        rec = RECODE[cfg.encoding][np.where(act_a, ma, 0)]
        # a zero B marks the lane done from the start (spec §1.3); a zero A has no terms
        self.rem = np.where(act_b, rec[..., 0], 0)
        self.negm = rec[..., 1]
        self.done = ~act_b
        n = self.rem.shape[0]
        self.eg = np.zeros(n, dtype=np.int64)
        self.has_eg = np.zeros(n, dtype=bool)
        self.x = np.zeros(n, dtype=np.int64)

    def take(self, keep):
        for name in self.__slots__:
            setattr(self, name, getattr(self, name)[keep])

    def complete(self):
        return ((self.rem == 0) | self.done).all(axis=1)


def _presented(ln):
    """Per lane: ``(j, t, ts, has)`` of the presented term (digit index, position, sign)."""
    j = MSB9[ln.rem]
    return j, 7 - j, (ln.negm >> j) & 1, (ln.rem != 0) & ~ln.done


def start_group(ln, acc, cfg, rows=None):
    """Group mode: the exponent block's work for the PEs in ``rows`` (all when None), once per
    group: ``E_g`` over the lanes' first terms and the accumulator, and ``X`` = the accumulator
    on the ``2**(E_g - F)`` grid (see the module docstring)."""
    zero, sign, exp, sig = acc
    _, t, _, has = _presented(ln)
    w = ln.abe - t
    E = np.where(has, w, np.iinfo(np.int64).min).max(axis=1)
    E = np.where(zero, E, np.maximum(E, exp))
    has_E = has.any(axis=1) | ~zero
    E = np.where(has_E, E, 0)
    x = align_acc(zero, sign, exp, sig, E, cfg)
    if rows is None:
        rows = np.ones(E.shape, dtype=bool)
    ln.eg = np.where(rows, E, ln.eg)
    ln.has_eg = np.where(rows, has_E, ln.has_eg)
    ln.x = np.where(rows, x, ln.x)


def step_lanes(ln, acc, cfg, mask=None):
    """One PE cycle (spec §3.3) for every row; updates ``ln`` in place, returns the details."""
    zero, sign, exp, sig = acc
    F, dmax, kmax = cfg.frac_bits, cfg.dmax, cfg.kmax
    group = cfg.exp_mode == "group"
    j, t, ts, elig = _presented(ln)
    if mask is not None:
        elig &= mask
    w = ln.abe - t                                     # weight exponent of the presented term
    if group:
        E, has_E = ln.eg, ln.has_eg
    else:
        E = np.where(elig, w, np.iinfo(np.int64).min).max(axis=1)
        E = np.where(zero, E, np.maximum(E, exp))
        has_E = elig.any(axis=1) | ~zero
        E = np.where(has_E, E, 0)
    k = E[:, None] - w
    ob_a = elig & (k > kmax)
    run = elig & ~ob_a
    any_run = run.any(axis=1)
    base = np.where(any_run, np.where(run, k, np.iinfo(np.int64).max).min(axis=1), 0)
    d = k - base[:, None]
    proc = run & (d <= dmax)
    v = np.where(proc, ln.sigb << np.clip(dmax - d, 0, dmax), 0)
    T = np.where((ln.ps ^ ts) == 1, -v, v).sum(axis=1)
    Tg = shift_jam(T, base - (F - 7 - dmax))
    Ag = ln.x if group else align_acc(zero, sign, exp, sig, E, cfg)
    X = Ag + Tg
    if group:
        ln.x = X
    # group mode: the accumulator the group would leave if it ended with this cycle
    new_acc = norm_rne(X, E, cfg)
    ob_b = proc & (k >= kmax)
    ln.rem = np.where(proc, ln.rem & ~(np.int64(1) << j), ln.rem)
    ln.done = ln.done | ob_a | ob_b
    ln.rem = np.where(ln.done, 0, ln.rem)              # drop: the encoder discards the rest
    return new_acc, dict(E=E, has_E=has_E, k=k, t=t, elig=elig, base=base, any_run=any_run,
                         proc=proc, ob_a=ob_a, ob_b=ob_b, T=T, Tg=Tg, Ag=Ag, X=X)


def _run_group(ln, acc, cfg):
    """Run one group on every row to completion; returns (acc arrays, cycles per row).

    Rows drop out of the working set as they complete, so the cost is proportional to the
    total number of cycles, not to the slowest row times the row count.
    """
    n = ln.rem.shape[0]
    out = [a.copy() for a in acc]
    cycles = np.zeros(n, dtype=np.int64)
    idx = np.arange(n)
    cur = acc
    if cfg.exp_mode == "group":
        start_group(ln, acc, cfg)
    while idx.size:
        cur, _ = step_lanes(ln, cur, cfg)
        cycles[idx] += 1
        fin = ln.complete()
        if fin.any():
            rows = idx[fin]
            for o, c in zip(out, cur):
                o[rows] = c[fin]
            keep = ~fin
            idx = idx[keep]
            ln.take(keep)
            cur = tuple(c[keep] for c in cur)
    return tuple(out), cycles


# ----------------------------------------------------------------------------------------------
# public API

def _mask_row(m, lanes):
    """One cycle's eligible mask (int bit mask or ``lanes`` bools) as a (1, lanes) bool array."""
    if isinstance(m, (int, np.integer)) and not isinstance(m, (bool, np.bool_)):
        if not 0 <= int(m) < (1 << lanes):
            raise ValueError(f"eligible mask {m!r} does not fit {lanes} lanes")
        return np.array([[(int(m) >> i) & 1 == 1 for i in range(lanes)]])
    if isinstance(m, (str, bytes)) or not hasattr(m, "__len__"):
        raise ValueError(f"eligible mask {m!r}: expected an int bit mask (bit i = lane i) or a "
                         f"sequence of {lanes} bools")
    row = list(m)
    if len(row) != lanes or not all(isinstance(x, (bool, np.bool_)) or x in (0, 1)
                                    for x in row):
        raise ValueError(f"eligible mask {m!r}: a sequence mask must have {lanes} bools")
    return np.array([[bool(x) for x in row]])


def _mask_rows(eligible, lanes):
    """The per-cycle masks of :func:`pe_group`'s ``eligible`` argument."""
    if eligible is None:
        return []
    if isinstance(eligible, (str, bytes)) or not hasattr(eligible, "__len__"):
        raise ValueError(f"eligible={eligible!r}: expected a sequence of per-cycle masks "
                         "(one int bit mask or bool sequence per cycle)")
    return [_mask_row(m, lanes) for m in eligible]


def pe_group(acc, a, b, cfg: PEConfig = PEConfig(), eligible=None):
    """Run one group of up to ``cfg.lanes`` (A, B) pairs through the PE (spec §3.3).

    Latency: ``cycles`` clock cycles, at least 1; one accumulation step per cycle.

    Parameters
    ----------
    acc : Acc
        Accumulator before the group (``Acc.ZERO`` to start a dot product).
    a, b : sequence of int
        bfloat16 bit patterns, at most ``cfg.lanes`` each, same length; shorter groups are padded
        with zeros (inactive lanes).
    cfg : PEConfig
    eligible : sequence, optional
        Per cycle, the lanes allowed to take their presented term: an int bit mask (bit i =
        lane i) or a sequence of ``lanes`` bools.  Cycles past the end of the sequence have every
        lane eligible.  Models the tile's neighbour stalls (spec §5.3, TV20).

    Returns
    -------
    acc : Acc
        Accumulator after the group.
    cycles : int
    trace : list of CycleTrace
        One entry per cycle.

    Raises
    ------
    ValueError
        Operands that are not integer bf16 bit patterns (or have exponent field 255), more than
        ``cfg.lanes`` pairs, a malformed eligible mask, or an ``acc`` outside the ``1.P`` format
        (:func:`golden.common.accumulator.check_acc`).
    """
    A, B = group_row(a, b, cfg.lanes)
    ln = LaneState(A, B, cfg)
    cur = acc_arrays(acc, 1, cfg.keep_bits)
    masks = _mask_rows(eligible, cfg.lanes)
    if cfg.exp_mode == "group":
        start_group(ln, cur, cfg)
    trace = []
    while True:
        c = len(trace)
        cur, d = step_lanes(ln, cur, cfg, masks[c] if c < len(masks) else None)
        new = acc_from_arrays(cur)
        el = d["elig"][0]
        trace.append(CycleTrace(
            E=int(d["E"][0]) if d["has_E"][0] else None,
            k=tuple(int(d["k"][0, i]) if el[i] else None for i in range(cfg.lanes)),
            tp=tuple(int(d["t"][0, i]) + 1 if el[i] else None for i in range(cfg.lanes)),
            eligible=tuple(bool(x) for x in el),
            base=int(d["base"][0]) if d["any_run"][0] else None,
            processed=tuple(int(i) for i in np.flatnonzero(d["proc"][0])),
            dropped_a=tuple(int(i) for i in np.flatnonzero(d["ob_a"][0])),
            dropped_b=tuple(int(i) for i in np.flatnonzero(d["ob_b"][0])),
            done=tuple(bool(x) for x in ln.done[0]),
            T=int(d["T"][0]), Tg=int(d["Tg"][0]), Ag=int(d["Ag"][0]), X=int(d["X"][0]),
            acc=new))
        if ln.complete()[0]:
            return new, len(trace), trace


class PESlot(NamedTuple):
    """What a :class:`PESlots` PE shows in one cycle (the ports of :class:`hdl.fpraker.PE` at
    ``pipeline >= 1``)."""

    #: the context whose step this cycle completes its control for (a group offered joins it)
    slot: int
    #: that context takes a group offered in this cycle
    ready: bool
    #: that context is running a group (this cycle is one of its steps)
    busy: bool
    #: the step is the group's last
    last: bool
    #: the step's trace (:class:`CycleTrace`), None when not busy
    trace: CycleTrace | None
    #: per lane: the done flags the step read (before its own OB decisions)
    done_before: tuple
    #: the context whose accumulator ``acc`` shows
    acc_slot: int
    #: that accumulator, after the steps that have left the loop
    acc: Acc


class PESlots:
    """Cycle model of the FPRaker PE with ``C = cfg.pipeline + 1 >= 2`` interleaved dot
    products (module docstring; the contract of :class:`hdl.fpraker.PE`).

    Cycle ``t`` completes the control of a step of context ``c = (slot + t) mod C`` (``slot``:
    the unit's ``slot`` output in the first cycle): ``ready``, ``busy``, ``last`` and the
    trace are that context's, a group offered in the cycle is taken by it when ready, and its
    first step is the context's next turn, ``C`` cycles later.  Every context runs
    :func:`pe_group` exactly, one step per turn.  A step reads its state and its eligible mask
    ``u = control_lag(cfg)`` cycles before its turn (:meth:`next_mask`).  ``acc`` shows the
    context of that read, ``(c + u) mod C`` (``acc_slot``), with every step whose turn was at
    cycle ``t + u - C`` or earlier."""

    def __init__(self, cfg: PEConfig, slot: int = 0):
        C = cfg.pipeline + 1
        if C < 2:
            raise ValueError(f"PESlots: cfg.pipeline = {cfg.pipeline}; one context is "
                             "pe_group's own timing")
        if isinstance(slot, bool) or not isinstance(slot, int) or not 0 <= slot < C:
            raise ValueError(f"slot {slot!r}; {C} contexts have slots 0..{C - 1}")
        self.cfg, self.C, self.slot0, self.t = cfg, C, slot, 0
        self.u = control_lag(cfg)
        #: per context: the steps to come ([CycleTrace]), the masks they use, the done flags
        #: before the next step, and the accumulator after the steps taken so far
        self.steps = [[] for _ in range(C)]
        self.masks = [[] for _ in range(C)]
        self.done = [(False,) * cfg.lanes for _ in range(C)]
        self.final = [ACC_ZERO] * C
        #: per context: the accumulator shown, and (turn cycle, accumulator after it) of the
        #: steps taken that have not reached it yet
        self.visible = [ACC_ZERO] * C
        self.pending = [deque() for _ in range(C)]

    def served(self, t: int | None = None) -> int:
        """The context whose step's control completes in cycle ``t`` (default: now)."""
        return (self.slot0 + (self.t if t is None else t)) % self.C

    def next_mask(self) -> int:
        """The eligible mask the PE reads in the current cycle: that of the step whose turn is
        ``u`` cycles later (every lane when that context is idle)."""
        c = self.served(self.t + self.u)
        full = (1 << self.cfg.lanes) - 1
        return self.masks[c][0] if self.steps[c] and self.masks[c] else full

    def _shown(self) -> tuple:
        c = (self.served() + self.u) % self.C
        pending = self.pending[c]
        while pending and pending[0][0] <= self.t + self.u - self.C:
            self.visible[c] = pending.popleft()[1]
        return c, self.visible[c]

    def outputs(self) -> PESlot:
        c = self.served()
        steps = self.steps[c]
        busy = bool(steps)
        last = len(steps) == 1
        shown, acc = self._shown()
        return PESlot(slot=c, ready=not busy or last, busy=busy, last=last,
                      trace=steps[0] if busy else None, done_before=self.done[c],
                      acc_slot=shown, acc=acc)

    def cycle(self, group=None) -> PESlot:
        """Outputs of the current cycle, then its clock edge.  ``group``: ``(a, b, clear,
        masks)`` offered in the cycle (``masks``: the per-step eligible masks, as
        :func:`pe_group` takes them; None for all lanes) or None; it is taken when the
        returned outputs' ``ready`` is set."""
        out = self.outputs()
        c = out.slot
        if out.busy:
            tr = self.steps[c].pop(0)
            if self.masks[c]:
                self.masks[c].pop(0)
            self.done[c] = tr.done
            self.pending[c].append((self.t, tr.acc))
        if group is not None and out.ready:
            a, b, clear, masks = group
            start = ACC_ZERO if clear else self.final[c]
            acc, _, trace = pe_group(start, a, b, self.cfg, masks)
            self.steps[c] = list(trace)
            self.masks[c] = list(masks or [])
            A, B = group_row(a, b, self.cfg.lanes)
            self.done[c] = tuple(bool(x) for x in ~decode_bf16(B)[0][0])
            self.final[c] = acc
        self.t += 1
        return out

    @property
    def idle(self) -> bool:
        """No context has a step to come, and every step taken has left the loop."""
        return (not any(self.steps)
                and all(turn <= self.t + self.u - self.C for p in self.pending for turn, _ in p))


def _dot(A, B, cfg, acc):
    """Accumulator arrays and cycles per (row, group) of the row-wise dot products."""
    return run_groups(A, B, cfg, acc, lambda a, b, acc_arr: _run_group(LaneState(a, b, cfg),
                                                                         acc_arr, cfg))


def pe_dot_batch(A, B, cfg: PEConfig = PEConfig(), acc=None):
    """Dot products of the rows of ``A`` and ``B`` on independent PEs, vectorized over rows.

    Each row is split into groups of ``cfg.lanes`` consecutive pairs (the last one zero-padded)
    and accumulated from zero (or ``acc``) group after group; the result is read out to bfloat16.
    Throughput of the model: about 3 million MAC/s on one core for n >= 1e5 (``flows/bench.py``).

    Parameters
    ----------
    A, B : array_like of int, shape (n, K)
        bfloat16 bit patterns.
    cfg : PEConfig
    acc : Acc, optional
        Starting accumulator of every row (default zero).

    Returns
    -------
    out : ndarray of uint16, shape (n,)
        bfloat16 results.
    cycles : ndarray of int64, shape (n,)
        Total PE cycles per row (sum over groups; at least one per group).
    """
    acc_arr, cycles = _dot(A, B, cfg, acc)
    return read_out_bits(*acc_arr, cfg), cycles.sum(axis=1)


def pe_dot_batch_acc(A, B, cfg: PEConfig = PEConfig(), acc=None):
    """Like :func:`pe_dot_batch` but returns the accumulators and the cycles of every group.

    Returns
    -------
    accs : list of Acc
        Final accumulator of each row.
    group_cycles : ndarray of int64, shape (n, groups)
        Cycles of each group of ``cfg.lanes`` pairs (row sums are :func:`pe_dot_batch`'s).
    """
    acc_arr, cycles = _dot(A, B, cfg, acc)
    return [acc_from_arrays(acc_arr, r) for r in range(len(acc_arr[0]))], cycles


def pe_dot(a, b, cfg: PEConfig = PEConfig()):
    """One dot product on one PE: the batch model with a single row.

    Returns
    -------
    bits : int
        bfloat16 result.
    cycles : int
        PE cycles (sum over the groups of ``cfg.lanes`` pairs).
    """
    out, cycles = pe_dot_batch(*dot_row(a, b), cfg)
    return int(out[0]), int(cycles[0])


# ----------------------------------------------------------------------------------------------
# operand generators for tests, testbenches and benchmarks

DATA_KINDS = ("normal", "relu", "narrow", "wide", "cancel", "uniform")


def random_operands(rng: np.random.Generator, n: int, K: int, kind: str = "mix"):
    """Random bfloat16 operand rows ``(A, B)``, uint16 arrays of shape (n, K).

    Kinds: ``"normal"`` N(0,1) both; ``"relu"`` A = max(0, N(0,1)) (about half zeros);
    ``"narrow"`` N(0,1) with 3-bit mantissas (zero suffixes, few terms, spec §1.1); ``"wide"``
    random exponents 127 +- 40 (wide spreads inside a group, many OB terms); ``"cancel"`` every
    odd lane repeats the even lane's product with the sign flipped and, half of the time, the
    last B mantissa bit toggled (catastrophic cancellation: the accumulator exponent falls); ``"uniform"`` random
    bit patterns over every exponent field 0..254 (read-out overflow/underflow, denormal flush);
    ``"mix"`` picks one kind per row.  Conversion from float is RNE via FP32.
    """
    from ..common import float_to_bf16
    if kind == "mix":
        kinds = rng.integers(0, len(DATA_KINDS), size=n)
        A = np.zeros((n, K), dtype=np.uint16)
        B = np.zeros((n, K), dtype=np.uint16)
        for i, kd in enumerate(DATA_KINDS):
            rows = np.flatnonzero(kinds == i)
            if rows.size:
                A[rows], B[rows] = random_operands(rng, rows.size, K, kd)
        return A, B
    if kind not in DATA_KINDS:
        raise ValueError(f"unknown operand kind {kind!r}: expected 'mix' or one of {DATA_KINDS}")

    def normal():
        return float_to_bf16(rng.standard_normal((n, K)).astype(np.float32)).astype(np.uint16)

    if kind == "normal":
        return normal(), normal()
    if kind == "relu":
        a = normal()
        return np.where(a >> 15 == 1, 0, a).astype(np.uint16), normal()
    if kind == "narrow":
        return (normal() & 0xFFF0), (normal() & 0xFFF0)
    if kind == "wide":
        def wide():
            e = rng.integers(87, 168, size=(n, K))
            return ((rng.integers(0, 2, size=(n, K)) << 15) | (e << 7)
                    | rng.integers(0, 128, size=(n, K))).astype(np.uint16)
        return wide(), wide()
    if kind == "cancel":
        a, b = normal(), normal()
        a[:, 1::2] = a[:, 0::2][:, :a[:, 1::2].shape[1]]
        b[:, 1::2] = (b[:, 0::2][:, :b[:, 1::2].shape[1]] ^ 0x8000) ^ rng.integers(
            0, 2, size=b[:, 1::2].shape)
        return a, b.astype(np.uint16)

    def uniform():
        x = rng.integers(0, 1 << 16, size=(n, K))
        return np.where(((x >> 7) & 0xFF) == 255, x & ~0x4000, x).astype(np.uint16)
    return uniform(), uniform()


__all__ = ["PEConfig", "PESlot", "PESlots", "MAX_PIPELINE", "STEP_CUTS", "control_lag", "Acc",
           "ACC_ZERO", "CycleTrace", "OUT_ROUNDS", "KMAX_LIMIT", "EXP_MODES",
           "required_int_bits", "decode_bf16", "pe_group", "pe_dot", "pe_dot_batch",
           "pe_dot_batch_acc", "read_out", "DATA_KINDS", "random_operands",
           # the term tables and the vectorized per-cycle kernel, shared with the tile model
           "RECODE", "MSB9", "LaneState", "start_group", "step_lanes"]

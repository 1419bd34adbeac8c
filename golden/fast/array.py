"""FAST's fMAC systolic array (registry unit ``fast.array``; spec ``docs/specs/fast.md`` §5): the golden
cycle model and a GEMM driver.

The array is ``rows × cols`` fMAC cells.  Row 0 is the bottom row (operands enter there from
below), column 0 the left column.  Each cell holds

* ``S``: a stationary BFP group (weights; written through the load port, one cell per cycle),
* ``H``: the operand moving right along its row (with ``valid`` and ``first`` tags),
* ``V``: the operand moving up its column,
* ``A``: an FP32 register, the cell's partial sum / accumulator.

Time is counted in *beats* of ``rounds(mx, my)`` cycles (§4.2).  In every cycle of a beat each
cell does one fMAC round (chunk ``cx`` of its X operand and ``cy`` of its Y operand, X's chunks
outer, most significant first) and writes ``A ← fp32_add(a, fp_gen(P, …))``; ``a`` is ``A``
except in a beat's first cycle, where it is the partial sum coming in:

=========  ==========  ==========  =====================================================
dataflow   X operand   Y operand   partial sum in (first cycle of a beat)
=========  ==========  ==========  =====================================================
fwd        V (bottom)  S           the left neighbour's ``A`` (+0 in column 0): sums flow right
bwd_data   H (left)    S           the lower neighbour's ``A`` (+0 in row 0): sums flow up
wgrad      H (left)    V (bottom)  the cell's own ``A`` (+0 if ``H.first``): output stationary
=========  ==========  ==========  =====================================================

In ``wgrad`` a cell whose ``H`` is a bubble (``valid = 0``) keeps its ``A``.

At the end of each beat (the *boundary*, the last cycle of a beat) the operands move one cell:
``H`` right, ``V`` up, and a new input vector is taken when ``in_valid``: ``left`` (``rows``
groups, row ``r`` delayed by ``r`` beats in the input skew) and ``bottom`` (``cols`` groups,
column ``c`` delayed by ``c`` beats).  ``in_ready`` is high in a boundary cycle unless a
``wgrad`` drain is pending.  A vector taken at the end of beat ``t`` reaches cell ``(r, c)`` in
beat ``t + 1 + r + c``.

Outputs: ``right`` (``rows`` FP32 values, FWD) takes ``A`` of the last column at each boundary
and delays row ``r`` by ``rows - 1 - r`` more beats; ``top`` (``cols`` values, BWD-DATA) does the
same with the top row.  The output of the vector taken at the end of beat ``t`` is therefore
aligned in beat ``t + rows + cols``, and ``out_valid`` is high in that beat's first cycle.  In
``wgrad`` the vector flagged ``last`` starts a countdown of ``rows + cols - 1`` boundaries (the
last cell's final beat), then a *drain* of ``cols`` cycles shifts every ``A`` one cell right per
cycle (``A`` of column 0 ← +0) and presents ``A`` of the last column on ``right`` with
``out_valid``: column ``cols - 1`` first.  No input is taken from ``last`` until the drain ends.

Register stages (``pipeline``, 0..3, :data:`FMAC_ARRAY_MAX_PIPELINE`): each cell's round side
(multipliers, adder tree, FP generator; the operands ``S``, ``H``, ``V``, the round counters,
the skew and the controller) runs as at depth 0, and its values reach the partial-sum side (the
partial-sum multiplexer, the FP32 adder, ``A``) ``pipeline`` cycles later, together with the
round's controls (first cycle of a beat, drain, dataflow, ``H``'s ``valid`` and ``first``).
The partial-sum side, the output deskew and the valid line run in that delayed time, so
``out_valid``, ``right`` and ``top`` are exactly those of depth 0 delayed by ``pipeline``
cycles (their values before: ``out_valid`` low, ``right`` and ``top`` +0), while ``in_ready``
and ``error`` keep their depth-0 timing: throughput is unchanged and every result is the same.

Interleaved GEMMs (``contexts``, 1..6, :data:`FMAC_ARRAY_MAX_CONTEXTS`): with ``C = contexts > 1``
the array is C-slowed.  Every state register (``S``, ``H``, ``V``, the skew, the round counters,
the WGRAD countdown and drain, the deskew and the valid line) is held ``C`` times, and each
cell's FP32 adder takes ``C - 1`` register stages inside its accumulation loop.  ``C``
independent GEMMs share the array: cycle ``t`` serves context ``t mod C`` (its inputs, its
``in_ready``, its load), and every context runs exactly as the one-context array at depth 0 does
in its own cycles (:class:`ArraySlots`).  The outputs (``out_valid``, ``right``, ``top``) in
cycle ``t`` are those of context ``(t - L) mod C`` from ``L = pipeline + C - 1`` cycles
earlier (its depth-0 outputs of that step).  ``error`` stays one sticky flag for the array.

Run-time inputs ``mx``, ``my`` (2, 4, 6, 8 bits) and ``dataflow`` must stay constant while data
is in flight (``pipeline`` cycles longer than at depth 0).  ``error`` (sticky) flags a width above ``m_max`` (processed at ``m_max``), a
``dataflow`` code 3 (processed as ``fwd``) and a load outside the array (ignored).

Partial sums start at +0 per tile (§5.3); the tiles' sums are added by the accumulator outside
the array (§5.1), which :func:`array_gemm` models with :func:`fp32_add` in tile order, as
:func:`golden.fast.numerics.gemm_quantized` does.
"""

from collections import deque
from dataclasses import dataclass, field

import numpy as np

from .. import ConfigError, check_int
from ..common.fp_add import fp32_add_bits
from .numerics import (
    DATAFLOWS,
    FMAC_WIDTHS,
    FastInputError,
    Quantized,
    _check_fmac_width,
    fp_gen_bits,
)

#: run-time ``dataflow`` codes of the array
DATAFLOW_CODES = {name: code for code, name in enumerate(DATAFLOWS)}
#: most register stages between the cells' round side and their partial sums
#: (:class:`FMACArrayConfig`.pipeline)
FMAC_ARRAY_MAX_PIPELINE = 3
#: most interleaved GEMMs (:class:`FMACArrayConfig`.contexts)
FMAC_ARRAY_MAX_CONTEXTS = 6


@dataclass(frozen=True)
class FMACArrayConfig:
    """Configuration of the fMAC array (registry unit ``fast.array``, spec §5).

    The paper's array is 256 × 64 cells (§VII); orientation and size are parameters here.
    """

    #: cell rows (FWD: output columns of a tile; BWD-DATA: reduction groups of a tile)
    rows: int = 4
    #: cell columns (FWD: reduction groups of a tile; BWD-DATA: output columns of a tile)
    cols: int = 4
    #: elements per BFP group = 2b x 2b multipliers per cell (paper: 16)
    group: int = 16
    #: widest run-time operand width the cells hold: 2, 4, 6 or 8 (FAST uses 2 and 4)
    m_max: int = 4
    #: register stages in every cell between the round side and the partial sum, 0..3 (0: the
    #: paper's one-cycle round), at the fMAC's cuts (:class:`golden.fast.fmac.FMACConfig`);
    #: outputs appear ``pipeline`` cycles later, results and throughput are unchanged
    pipeline: int = 0
    #: interleaved GEMMs, 1..6 (1: the paper's array): every state register is held
    #: ``contexts`` times and each cell's FP32 adder gets ``contexts - 1`` register stages
    #: inside its accumulation loop (C-slow); cycle ``t`` serves GEMM ``t mod contexts``
    contexts: int = 1

    def __post_init__(self):
        check_int(self, "rows", 1, 256)
        check_int(self, "cols", 1, 256)
        check_int(self, "group", 1, 64)
        if isinstance(self.m_max, bool) or self.m_max not in FMAC_WIDTHS:
            raise ConfigError(type(self).__name__, "m_max", self.m_max, "one of 2, 4, 6, 8")
        check_int(self, "pipeline", 0, FMAC_ARRAY_MAX_PIPELINE)
        check_int(self, "contexts", 1, FMAC_ARRAY_MAX_CONTEXTS)

    @property
    def out_lag(self) -> int:
        """Cycles from a context's step on the round side to its outputs: ``pipeline`` stages,
        then the FP32 adder's ``contexts - 1``."""
        return self.pipeline + self.contexts - 1

    def one_context(self) -> "FMACArrayConfig":
        """The array one context of this one behaves as: the same cells at depth 0."""
        return FMACArrayConfig(rows=self.rows, cols=self.cols, group=self.group,
                               m_max=self.m_max)


@dataclass
class ArrayIn:
    """The array's inputs in one cycle.  Groups are ``(Es, signs, q)``; ``left`` has ``rows``
    of them, ``bottom`` ``cols`` (``None``: all zero).  ``ld`` is ``(row, col, group)`` or
    ``None``; ``dataflow`` is a name or its code (0..3)."""

    valid: bool = False
    left: list | None = None
    bottom: list | None = None
    first: bool = False
    last: bool = False
    ld: tuple | None = None
    mx: int = 4
    my: int = 4
    dataflow: str | int = "fwd"


@dataclass
class ArrayOut:
    """The array's outputs in one cycle (before the clock edge)."""

    in_ready: bool
    out_valid: bool
    right: np.ndarray    # uint32, rows
    top: np.ndarray      # uint32, cols
    error: bool
    #: with ``contexts > 1``: the context served in the cycle, and the one the outputs show
    slot: int = 0
    acc_slot: int = 0


@dataclass
class _Round:
    """One cycle of the cells' round side, on its way to the partial-sum side: the FP generator
    values (``rows × cols`` FP32 bits), whether the cycle is a beat's first, a drain cycle or a
    beat boundary, the dataflow, ``H``'s ``valid`` and ``first`` tags, and whether a vector
    (not WGRAD) was taken at the boundary."""

    gen: np.ndarray
    first: bool
    drain: bool
    df: str
    Hv: np.ndarray
    Hf: np.ndarray
    boundary: bool
    vin: bool


def _zero_groups(n, g):
    return np.zeros(n, np.int64), np.zeros((n, g), np.int64), np.zeros((n, g), np.int64)


def _delay(lines: list, k: int, item):
    """Push ``item`` into delay line ``lines[k]`` (newest first); what leaves it (``item``
    itself through a line of no stages)."""
    line = lines[k]
    if not line:
        return item
    lines[k] = [item] + line[:-1]
    return line[-1]


class ArraySim:
    """Cycle model of the array: :meth:`outputs` for the current cycle's inputs, then
    :meth:`step` for the clock edge (or :meth:`cycle` for both)."""

    def __init__(self, cfg: FMACArrayConfig = FMACArrayConfig()):
        if cfg.contexts != 1:
            raise FastInputError("cfg.contexts", cfg.contexts, "1 (ArraySlots models more)")
        self.cfg = cfg
        R, C, g = cfg.rows, cfg.cols, cfg.group
        z = lambda *s: np.zeros(s, np.int64)
        # cell registers: S (stationary), H (+ tags), V, A
        self.S = [z(R, C), z(R, C, g), z(R, C, g)]
        self.H = [z(R, C), z(R, C, g), z(R, C, g)]
        self.Hv, self.Hf = z(R, C), z(R, C)
        self.V = [z(R, C), z(R, C, g), z(R, C, g)]
        self.A = np.zeros((R, C), np.uint32)
        # input skew: row r of `left` waits r beats (stages [r][0..r-1]), column c of `bottom` c
        self.skew_l = [[(0, z(g), z(g), 0, 0)] * r for r in range(R)]
        self.skew_b = [[(0, z(g), z(g))] * c for c in range(C)]
        # output deskew: row r of `right` has rows - r stages, column c of `top` cols - c
        self.q_right = [[0] * (R - r) for r in range(R)]
        self.q_top = [[0] * (C - c) for c in range(C)]
        self.vline = [0] * (R + C)
        self.cx = self.cy = 0
        self.pend = 0           # boundaries until the wgrad drain
        self.drain = 0          # drain cycles left
        self.error = False
        # rounds between the round side and the partial-sum side, oldest first (reset: the
        # stage registers hold zeros)
        self.line = [_Round(np.zeros((R, C), np.uint32), False, False, "fwd", z(R, C), z(R, C),
                            False, False) for _ in range(cfg.pipeline)]

    # ---- decoded run-time inputs
    def _widths(self, i: ArrayIn):
        kmax = self.cfg.m_max // 2
        kx, ky = _check_fmac_width("mx", i.mx) // 2, _check_fmac_width("my", i.my) // 2
        bad = kx > kmax or ky > kmax
        return min(kx, kmax), min(ky, kmax), bad

    @staticmethod
    def _dataflow(i: ArrayIn):
        code = DATAFLOW_CODES[i.dataflow] if isinstance(i.dataflow, str) else int(i.dataflow)
        if code not in (0, 1, 2, 3):
            raise FastInputError("dataflow", i.dataflow, "a name or code 0..3")
        return DATAFLOWS[0 if code == 3 else code], code == 3

    def _boundary(self, i: ArrayIn) -> bool:
        kx, ky, _ = self._widths(i)
        return not self.drain and self.cx >= kx - 1 and self.cy >= ky - 1

    def _first(self) -> bool:
        return not self.drain and self.cx == 0 and self.cy == 0

    def outputs(self, i: ArrayIn) -> ArrayOut:
        b = self._boundary(i)
        # the partial-sum side's cycle: the round leaving the stages (depth 0: this one)
        if self.line:
            first, drain = self.line[0].first, self.line[0].drain
        else:
            first, drain = self._first(), bool(self.drain)
        if drain:
            right = self.A[:, -1].copy()
        else:
            right = np.array([q[-1] for q in self.q_right], np.uint32)
        top = np.array([q[-1] for q in self.q_top], np.uint32)
        return ArrayOut(in_ready=b and self.pend == 0,
                        out_valid=drain or (first and bool(self.vline[-1])),
                        right=right, top=top, error=self.error)

    def cycle(self, i: ArrayIn) -> ArrayOut:
        out = self.outputs(i)
        self.step(i)
        return out

    def _group(self, grp):
        g = self.cfg.group
        Es, s, q = grp
        s, q = np.asarray(s, np.int64).reshape(-1), np.asarray(q, np.int64).reshape(-1)
        if s.size != g or q.size != g:
            raise FastInputError("group", f"{s.size} signs, {q.size} magnitudes", f"{g} each")
        return int(Es), s, q

    def _vector(self, grps, n):
        g = self.cfg.group
        if grps is None:
            return [(0, np.zeros(g, np.int64), np.zeros(g, np.int64))] * n
        if len(grps) != n:
            raise FastInputError("input vector", f"{len(grps)} groups", f"{n}")
        return [self._group(x) for x in grps]

    def step(self, i: ArrayIn):
        cfg = self.cfg
        R, C = cfg.rows, cfg.cols
        kx, ky, bad_w = self._widths(i)
        df, bad_df = self._dataflow(i)
        out = self.outputs(i)
        boundary = self._boundary(i)
        take = out.in_ready and i.valid
        err = self.error or bad_w or bad_df

        # ---- load port (ignored outside the array)
        ld = None
        if i.ld is not None:
            r, c, grp = i.ld
            if 0 <= r < R and 0 <= c < C:
                ld = (r, c, self._group(grp))
            else:
                err = True

        # ---- the cells' round side, then (``pipeline`` cycles later) their partial sums
        rnd = self._round(df, kx, ky, boundary, take)
        if self.line:
            self.line.append(rnd)
            rnd = self.line.pop(0)
        newA = self._accumulate(rnd)
        if rnd.boundary:
            for r in range(R):
                self.q_right[r] = [int(newA[r, C - 1])] + self.q_right[r][:-1]
            for c in range(C):
                self.q_top[c] = [int(newA[R - 1, c])] + self.q_top[c][:-1]
            self.vline = [int(rnd.vin)] + self.vline[:-1]

        # ---- beat boundary: operands, skew, countdown
        if boundary:
            left = self._vector(i.left, R) if take else [(0, None, None)] * R
            bottom = self._vector(i.bottom, C) if take else [(0, None, None)] * C
            g = cfg.group
            zero = np.zeros(g, np.int64)
            h_in, v_in = [], []
            for r in range(R):
                Es, s_, q_ = left[r]
                h_in.append(_delay(self.skew_l, r, (Es, zero if s_ is None else s_,
                                                    zero if q_ is None else q_,
                                                    int(take), int(take and i.first))))
            for c in range(C):
                Es, s_, q_ = bottom[c]
                v_in.append(_delay(self.skew_b, c, (Es, zero if s_ is None else s_,
                                                    zero if q_ is None else q_)))
            # H moves right, V moves up
            for k in range(3):
                self.H[k][:, 1:] = self.H[k][:, :-1]
                self.V[k][1:, :] = self.V[k][:-1, :]
            self.Hv[:, 1:], self.Hf[:, 1:] = self.Hv[:, :-1], self.Hf[:, :-1]
            for r, (Es, s_, q_, v, f) in enumerate(h_in):
                self.H[0][r, 0], self.H[1][r, 0], self.H[2][r, 0] = Es, s_, q_
                self.Hv[r, 0], self.Hf[r, 0] = v, f
            for c, (Es, s_, q_) in enumerate(v_in):
                self.V[0][0, c], self.V[1][0, c], self.V[2][0, c] = Es, s_, q_

        # ---- control: round counters, wgrad countdown and drain
        if self.drain:
            self.drain -= 1
        elif boundary:
            self.cx = self.cy = 0
            if self.pend:
                self.pend -= 1
                if self.pend == 0:
                    self.drain = C
            if take and i.last and df == "wgrad":
                self.pend = R + C - 1
        elif self.cy >= ky - 1:
            self.cy = 0
            self.cx += 1
        else:
            self.cy += 1

        if ld is not None:
            r, c, (Es, s_, q_) = ld
            self.S[0][r, c], self.S[1][r, c], self.S[2][r, c] = Es, s_, q_
        self.A = newA.astype(np.uint32)
        self.error = err


    def _round(self, df: str, kx: int, ky: int, boundary: bool, take: bool) -> _Round:
        """This cycle's round side: every cell's FP generator value (zeros in a drain cycle,
        where no round runs) and the controls the partial-sum side needs."""
        R, C = self.cfg.rows, self.cfg.cols
        gen = np.zeros((R, C), np.uint32)
        if not self.drain:
            if df == "fwd":
                X, Y = self.V, self.S
            elif df == "bwd_data":
                X, Y = self.H, self.S
            else:
                X, Y = self.H, self.V
            shx, shy = 2 * (kx - 1 - self.cx), 2 * (ky - 1 - self.cy)
            chx = np.where(X[1] == 1, -1, 1) * ((X[2] >> shx) & 3)
            chy = np.where(Y[1] == 1, -1, 1) * ((Y[2] >> shy) & 3)
            P = (chx * chy).sum(axis=2)
            gen = fp_gen_bits(P, X[0] - 2 * self.cx, Y[0] - 2 * self.cy)
        return _Round(gen, self._first(), bool(self.drain), df, self.Hv.copy(), self.Hf.copy(),
                      boundary, take and df != "wgrad")

    def _accumulate(self, rnd: _Round) -> np.ndarray:
        """The cells' ``A`` after the partial-sum side takes round ``rnd``: a drain shifts
        every ``A`` right; otherwise the round's value is added to the partial sum of the
        dataflow (a neighbour's ``A`` or +0 in a beat's first cycle, the cell's own after)."""
        if rnd.drain:
            newA = self.A.copy()
            newA[:, 1:] = self.A[:, :-1]
            newA[:, 0] = 0
            return newA
        a = self.A.copy()
        if rnd.first:
            if rnd.df == "fwd":
                a[:, 1:] = self.A[:, :-1]
                a[:, 0] = 0
            elif rnd.df == "bwd_data":
                a[1:, :] = self.A[:-1, :]
                a[0, :] = 0
            else:
                a = np.where(rnd.Hf == 1, np.uint32(0), self.A)
        s = fp32_add_bits(a, rnd.gen)
        return s if rnd.df != "wgrad" else np.where(rnd.Hv == 1, s, self.A).astype(np.uint32)


class ArraySlots:
    """Cycle model of the array with ``C = cfg.contexts > 1`` interleaved GEMMs (the timing
    contract of :class:`hdl.fast.array.FMACArray`; same interface as :class:`ArraySim`).

    ``C`` one-context arrays at depth 0 (:class:`ArraySim`, :meth:`FMACArrayConfig.one_context`)
    take turns: cycle ``t`` serves context ``t mod C`` (the array's ``slot``, 0 after reset),
    whose ``in_ready`` the cycle shows and which takes the cycle's inputs (a vector, a load,
    the widths and the dataflow) and steps once.  ``out_valid``, ``right`` and ``top`` in
    cycle ``t`` are the outputs context ``acc_slot = (t - L) mod C`` had in cycle ``t - L``,
    ``L = cfg.out_lag`` (before: ``out_valid`` low, +0).  ``error`` is the sticky OR over every
    cycle's input."""

    def __init__(self, cfg: FMACArrayConfig):
        C = cfg.contexts
        if C < 2:
            raise FastInputError("cfg.contexts", C, "2 or more (ArraySim models one)")
        self.cfg = cfg
        self.sims = [ArraySim(cfg.one_context()) for _ in range(C)]
        self.t = 0
        self.error = False
        # the served context's (out_valid, right, top) in the last `out_lag` cycles
        self._shown = deque(maxlen=cfg.out_lag)

    def outputs(self, i: ArrayIn) -> ArrayOut:
        cfg = self.cfg
        C, L = cfg.contexts, cfg.out_lag
        slot = self.t % C
        o = self.sims[slot].outputs(i)
        if self.t >= L:
            valid, right, top = self._shown[0]
        else:
            valid = False
            right = np.zeros(cfg.rows, np.uint32)
            top = np.zeros(cfg.cols, np.uint32)
        return ArrayOut(in_ready=o.in_ready, out_valid=valid, right=right, top=top,
                        error=self.error, slot=slot, acc_slot=(self.t - L) % C)

    def cycle(self, i: ArrayIn) -> ArrayOut:
        out = self.outputs(i)
        self.step(i)
        return out

    def step(self, i: ArrayIn):
        sim = self.sims[self.t % self.cfg.contexts]
        o = sim.outputs(i)
        sim.step(i)
        self._shown.append((o.out_valid, o.right, o.top))
        self.error = self.error or sim.error
        self.t += 1


def array_sim(cfg: FMACArrayConfig):
    """The cycle model of ``cfg``: :class:`ArraySim`, or :class:`ArraySlots` with
    ``contexts``."""
    return ArraySim(cfg) if cfg.contexts == 1 else ArraySlots(cfg)


def interleave(cfg: FMACArrayConfig, inputs: list) -> list:
    """The array's input in every cycle for ``cfg.contexts`` interleaved input sequences (one
    list of :class:`ArrayIn` per context, each what the one-context array takes in its own
    cycles, all of one length): cycle ``t`` takes input ``t // C`` of context ``t mod C``."""
    C = cfg.contexts
    if len(inputs) != C:
        raise FastInputError("inputs", f"{len(inputs)} sequences", f"one per context ({C})")
    n = {len(seq) for seq in inputs}
    if len(n) != 1:
        raise FastInputError("inputs", f"sequences of lengths {sorted(n)}", "one length")
    return [inputs[t % C][t // C] for t in range(C * n.pop())]


# ----------------------------------------------------------------------------------------------
# the GEMM driver

@dataclass
class ArrayRun:
    """A GEMM on the array: the result (FP32 bits after the external accumulator), the cycle
    inputs and the model's outputs in every cycle, and the cycle count."""

    out: np.ndarray
    inputs: list = field(repr=False)
    outputs: list = field(repr=False)
    cycles: int = 0
    #: output vectors per tile in the order they appeared (for checks of the array alone)
    tiles: list = field(default_factory=list, repr=False)


def _grp(qz: Quantized, i, b):
    """Group ``b`` of row ``i`` of ``qz``, or an all-zero group outside it."""
    g = qz.q.shape[2]
    if 0 <= i < qz.q.shape[0] and 0 <= b < qz.q.shape[1]:
        return int(qz.Es[i, b]), qz.signs[i, b], qz.q[i, b]
    return 0, np.zeros(g, np.int64), np.zeros(g, np.int64)


def array_gemm(cfg: FMACArrayConfig, xq: Quantized, yq: Quantized, dataflow: str = "fwd",
               gaps: float = 0.0, seed: int = 0, sim: ArraySim | None = None) -> ArrayRun:
    """``C = X · Y`` on the array model (X's rows and Y's columns quantized along K, as in
    :func:`golden.fast.numerics.gemm_quantized`), one tile after the other: load the stationary groups,
    stream the input vectors (with a bubble before a vector with probability ``gaps``), collect
    the output vectors, add each tile into the result with :func:`fp32_add` (the external
    accumulator).  Returns an :class:`ArrayRun`; ``out`` equals ``gemm_quantized(xq, yq,
    dataflow, "paper", array=(rows, cols))``.  ``sim`` continues an array model from the state
    an earlier GEMM left (default: a fresh array after reset).

    Tiles: FWD maps Y's columns to rows and K-groups to columns (X's rows stream in from the
    bottom); BWD-DATA maps K-groups to rows and Y's columns to columns (X's rows from the left);
    WGRAD maps X's rows to rows and Y's columns to columns and streams all K-groups, X from the
    left and Y from the bottom.  A K-tile shorter than the array is padded with zero groups at
    its *start*: the partial sum stays +0 through them, so it equals the golden chain.
    """
    if dataflow not in DATAFLOWS:
        raise FastInputError("dataflow", dataflow, "one of " + ", ".join(DATAFLOWS))
    mx, my = _check_fmac_width("mx", xq.m), _check_fmac_width("my", yq.m)
    if xq.q.shape[1] != yq.q.shape[1]:
        raise FastInputError("K groups", (xq.q.shape[1], yq.q.shape[1]), "equal on both sides")
    if xq.q.shape[2] != cfg.group or yq.q.shape[2] != cfg.group:
        raise FastInputError("group", (xq.q.shape[2], yq.q.shape[2]), f"the array's {cfg.group}")
    if cfg.contexts != 1:
        raise FastInputError("cfg.contexts", cfg.contexts,
                             "1: one GEMM (interleave one per context with interleave())")
    R, C = cfg.rows, cfg.cols
    M, N, nG = xq.q.shape[0], yq.q.shape[0], xq.q.shape[1]
    if sim is None:
        sim = ArraySim(cfg)
    elif sim.cfg != cfg:
        raise FastInputError("sim", sim.cfg, f"a model of {cfg}")
    rng = np.random.default_rng(seed)
    run = ArrayRun(out=np.zeros((M, N), np.uint32), inputs=[], outputs=[])

    def clock(inp: ArrayIn) -> ArrayOut:
        inp.mx, inp.my, inp.dataflow = mx, my, dataflow
        o = sim.cycle(inp)
        run.inputs.append(inp)
        run.outputs.append(o)
        return o

    def stream(vectors, n_out, collect):
        """Send ``vectors`` (ArrayIn templates), gather ``n_out`` output vectors."""
        got, k = [], 0
        while len(got) < n_out:
            o = sim.outputs(ArrayIn(mx=mx, my=my, dataflow=dataflow))
            inp = ArrayIn()
            if k < len(vectors) and o.in_ready and not (gaps and rng.random() < gaps):
                inp = vectors[k]
                k += 1
            o = clock(inp)
            if o.out_valid:
                got.append(collect(o))
        # the array is empty once the last output left it
        return got

    def load(cells):
        for r, c, grp in cells:
            clock(ArrayIn(ld=(r, c, grp)))

    tile = R if dataflow == "bwd_data" else C
    if dataflow in ("fwd", "bwd_data"):
        outer = range(0, N, C if dataflow == "bwd_data" else R)
        for n0 in outer:
            for k0 in range(0, nG, tile):
                kn = min(tile, nG - k0)
                pad = tile - kn         # zero groups first
                cells = []
                for r in range(R):
                    for c in range(C):
                        if dataflow == "fwd":
                            j, b = n0 + r, k0 + c - pad
                        else:
                            j, b = n0 + c, k0 + r - pad
                        cells.append((r, c, _grp(yq, j, b if b >= k0 else -1)))
                load(cells)
                vecs = []
                for i in range(M):
                    grps = [_grp(xq, i, k0 + t - pad if t >= pad else -1) for t in range(tile)]
                    vecs.append(ArrayIn(valid=True, bottom=grps) if dataflow == "fwd"
                                else ArrayIn(valid=True, left=grps))
                side = "right" if dataflow == "fwd" else "top"
                res = stream(vecs, M, lambda o, side=side: getattr(o, side).copy())
                run.tiles.append(res)
                width = R if dataflow == "fwd" else C
                for i, vec in enumerate(res):
                    cols_ = [n0 + t for t in range(width) if n0 + t < N]
                    run.out[i, cols_] = fp32_add_bits(run.out[i, cols_], vec[:len(cols_)])
    else:
        for m0 in range(0, M, R):
            for n0 in range(0, N, C):
                vecs = [ArrayIn(valid=True, first=b == 0, last=b == nG - 1,
                                left=[_grp(xq, m0 + r, b) for r in range(R)],
                                bottom=[_grp(yq, n0 + c, b) for c in range(C)])
                        for b in range(nG)]
                res = stream(vecs, C, lambda o: o.right.copy())
                run.tiles.append(res)
                for t, vec in enumerate(res):      # column C - 1 first
                    j = n0 + C - 1 - t
                    if j < N:
                        rows_ = [m0 + r for r in range(R) if m0 + r < M]
                        run.out[rows_, j] = fp32_add_bits(run.out[rows_, j], vec[:len(rows_)])
    run.cycles = len(run.inputs)
    return run


__all__ = [
    "DATAFLOW_CODES",
    "FMAC_ARRAY_MAX_CONTEXTS",
    "FMAC_ARRAY_MAX_PIPELINE",
    "FMACArrayConfig",
    "ArrayIn",
    "ArrayOut",
    "ArrayRun",
    "ArraySim",
    "ArraySlots",
    "array_gemm",
    "array_sim",
    "interleave",
]

"""Equinox's weight-stationary hbfp8 systolic array (registry unit ``equinox.array``; spec
``docs/specs/equinox.md`` §2.2-§2.6): the golden cycle model and a GEMM driver.

One array of the MMU is ``n x n`` processing elements.  PE(r, c) (row ``r`` from the top,
column ``c``) holds exactly two registers: a weight vector ``wreg`` of ``w`` X-bit two's
complement mantissas and a partial sum ``psum`` of ``A`` bits.  Every cycle it computes::

    psum[r][c] <= wrap_A(psum[r-1][c] + sum_k a_r[k] * wreg[r][c][k])       (psum[-1] = 0)

with no pipeline register inside (§2.3).  Time below counts *enabled* cycles (``en = 1``);
a cycle with ``en = 0`` changes no register at all: PEs, input skew, exponent register, FIFO,
valid line, normalizer pipeline (§2.6 back-pressure).  Inputs in such a cycle are ignored.

Activations (§2.2).  A vector ``b`` is one HBFP block of ``T = n * w`` mantissas with its
exponent ``act_exp`` (A8: one exponent per row segment of ``T``).  It is *accepted* in a cycle
``t_b`` with ``en = act_valid = 1``; chunk ``r`` (mantissas ``r*w .. r*w + w - 1``) reaches
row ``r`` at ``t_b + r`` through the input skew (row 0 straight from the port, row ``r`` through
``r`` registers), so row ``r`` adds vector ``b``'s chunk at ``t_b + r`` and column ``c``'s sum
leaves row ``n - 1`` as ``acc[c]`` at ``t_b + n``: ``acc[c] = wrap_A(sum_i act[i] * W[i, c])``
with ``W`` the ``T x n`` slice the array holds.  The skew passes ``act`` whether or not it is
valid: outputs that belong to no vector are undefined (:class:`ArrayOut` gives ``None``).

Exponent path (§2.4).  At ``t_b`` a 9-bit adder forms ``esum = act_exp + e_w`` (``e_w`` the
tile exponent register) and pushes it into a FIFO of depth ``n``; a valid line of ``n`` stages
marks ``t_b + n``, where ``acc_valid`` is high and the FIFO is popped: ``esum`` (the FIFO head)
leaves with the row it belongs to.  At most ``n`` vectors are in flight, so the occupancy
``fifo_level`` never exceeds ``n`` (a push into a full FIFO always comes with a pop).

Normalizers (§2.5).  ``n`` bf16 converters take ``(acc[c], esum)`` at ``t_b + n`` and present
``out[c]`` with ``out_valid`` at ``t_b + n + conv_lat``: the value ``acc * 2**(esum -
exp_offset(x_bits))`` rounded by the shared rounding block (:func:`golden.equinox.hbfp.normalizer_config`:
RNE, flush to zero decided after rounding, saturation to ±0x7F7F; see :mod:`golden.equinox.hbfp`).

Weight reload, just in time (§2.2 "Weight reload", A13).  The weight feeder writes one PE row
per cycle through one port: ``wt_valid``, ``wt_row`` (the row index), ``wt`` (``n x w``
mantissas, ``wt[c]`` is PE(``wt_row``, c)'s weight vector) and ``wt_exp`` (the slice's tile
exponent).  A write in cycle τ (with ``en = 1``) takes effect at τ + 1; a write to row 0 also
latches ``wt_exp`` into ``e_w`` at τ + 1.  Row indices ``>= n`` (expressible when ``n`` is not a
power of two) are ignored.  The contract with the feeder: the rows of the next slice are
written as a wavefront skewed like the activations — row ``r`` at ``τ0 + r`` — where ``τ0``
lies between the cycle ``L`` that accepts the last vector of the current slice and the cycle
before the first vector of the next one (``L <= τ0 < F``).  Row ``r`` then does its last MAC
with the old weights at ``L + r <= τ0 + r`` and its first with the new ones at
``F + r > τ0 + r``, and every vector's ``esum`` uses the exponent of its own slice: vectors
stream back to back across slice switches (``τ0 = L``, ``F = L + 1``) with no bubble and no
shadow weight register.  With one row port the wavefronts of two switches must not overlap:
``n`` or more cycles from one ``τ0`` to the next (the thesis's batches are always ``n`` vectors
per slice, §2.6; :func:`array_gemm` pads shorter ones with bubbles).

Reset clears the control state (valid line, FIFO pointers and occupancy, ``out_valid``); the
data registers (weights, partial sums, skew, FIFO entries, tile exponent, normalizer pipeline)
have none: no valid output depends on their contents from before the reset, provided the
feeder writes every row of the first slice (row 0 with its tile exponent) before the first
vector, as the contract above requires anyway.  The model starts with all of them zero.

:func:`array_gemm` runs a tiled GEMM on the model: every ``T x T`` weight tile (one exponent,
A8) is ``w`` slices of ``T x n``; each slice is loaded by the wavefront above and every
activation row segment of its K-tile streams through it.  Its bf16 K-tile partials, summed in
ascending K order by :func:`golden.equinox.hbfp.bf16_add`, equal :func:`golden.equinox.hbfp.hbfp_matmul` bit
for bit.
"""

from collections import deque
from dataclasses import dataclass, field

import numpy as np

from .. import ConfigError, check_int
from ..common.rounding import round_raw
from .hbfp import (
    A_RANGE,
    M_RANGE,
    HBFPInputError,
    bf16_add,
    exp_offset,
    normalizer_config,
    quantize_activations,
    quantize_weights,
    wrap,
)

#: width of a block exponent (the bf16/FP32 exponent field, A4) and of ``esum``
EXP_BITS = 8
ESUM_BITS = 9


class ArrayInputError(HBFPInputError):
    """An array model input outside its ports' ranges (the message names it)."""


@dataclass(frozen=True)
class ArrayConfig:
    """Configuration of one Equinox systolic array (registry unit ``equinox.array``, spec §2).

    The thesis gives no array's ``w`` (Tables 4.1/4.2 list only ``n`` = batch size and the MAC
    count; Equinox_50us has ``n = 16``).  The defaults are the ``equinox-paper`` preset's 4 x 4
    PEs of 4 MACs: the configuration every regression simulates (a 16 x 16 x 8 array takes
    Icarus about ten minutes for the standard test size, Verilator about seven to compile).

    The accumulator must hold at least one product (``acc_bits >= 2 * x_bits``: the largest
    product is ``(-2**(x_bits-1))**2 = 2**(2 x_bits - 2)``); sums wrap to ``acc_bits`` bits
    (A9: exact for ``n * w <= 2**(acc_bits - 2 x_bits + 1) - 1``, 511 for hbfp8 and 24 bits).
    """

    #: array side N: n x n PEs, n output columns, n vectors in flight (Equinox_50us: 16)
    n: int = 4
    #: PE width W: multipliers per PE, the length of each PE's dot product (T = n * w)
    w: int = 4
    #: mantissa width X, two's complement (hbfp8: 8; the thesis's design space 4..16)
    x_bits: int = 8
    #: accumulator width A, two's complement, wrapping (Equinox: 24), 2 * x_bits .. 56
    acc_bits: int = 24
    #: cycles from acc_valid to out_valid: 0 (combinational normalizer), 1 or 2 (§2.5)
    conv_lat: int = 1

    def __post_init__(self):
        check_int(self, "n", 1, 64)
        check_int(self, "w", 1, 64)
        check_int(self, "x_bits", *M_RANGE)
        lo = max(A_RANGE[0], 2 * self.x_bits)
        if isinstance(self.acc_bits, bool) or not isinstance(self.acc_bits, int) \
                or not lo <= self.acc_bits <= A_RANGE[1]:
            raise ConfigError(type(self).__name__, "acc_bits", self.acc_bits,
                              f"an integer in {lo}..{A_RANGE[1]} (at least 2 * x_bits, "
                              "to hold one product)")
        check_int(self, "conv_lat", 0, 2)

    @property
    def T(self) -> int:
        """Elements of an activation vector and side of a weight tile: ``n * w``."""
        return self.n * self.w

    @property
    def row_bits(self) -> int:
        """Width of the weight port's row index."""
        return max(1, (self.n - 1).bit_length())


@dataclass
class ArrayIn:
    """The array's inputs in one cycle (``None`` mantissas read as zeros)."""

    #: global enable: 0 holds every register and ignores every other input
    en: bool = True
    #: ``act`` / ``act_exp`` hold a vector to accept
    act_valid: bool = False
    #: ``n * w`` mantissas (chunk r = elements r*w .. r*w + w - 1)
    act: object = None
    act_exp: int = 0
    #: write ``wt`` into PE row ``wt_row`` (and ``wt_exp`` into the tile exponent for row 0)
    wt_valid: bool = False
    wt_row: int = 0
    #: ``n x w`` mantissas: ``wt[c]`` is PE(wt_row, c)'s weight vector
    wt: object = None
    wt_exp: int = 0


@dataclass
class ArrayOut:
    """The array's outputs in one cycle (``None`` where they belong to no vector)."""

    acc_valid: bool
    #: ``n`` accumulators (int64), row n - 1's partial sums
    acc: np.ndarray | None
    #: ``act_exp + e_w`` of the vector ``acc`` belongs to (the FIFO head)
    esum: int | None
    out_valid: bool
    #: ``n`` bf16 bit patterns (uint16)
    out: np.ndarray | None
    #: vectors accepted and not yet popped (entries in the exponent FIFO), 0..n
    fifo_level: int


def _mantissas(name: str, value, shape, x_bits: int) -> np.ndarray:
    if value is None:
        return np.zeros(shape, np.int64)
    a = np.asarray(value)
    if a.size and not np.issubdtype(a.dtype, np.integer):
        raise ArrayInputError(f"{name} must be integer mantissas, got {a.dtype}")
    if a.size != int(np.prod(shape)):
        raise ArrayInputError(f"{name} must hold {int(np.prod(shape))} mantissas "
                              f"(shape {shape}), got shape {a.shape}")
    a = a.astype(np.int64).reshape(shape)
    lo, hi = -(1 << (x_bits - 1)), (1 << (x_bits - 1)) - 1
    if a.min() < lo or a.max() > hi:
        raise ArrayInputError(f"{name} holds a value outside the {x_bits}-bit two's complement "
                              f"range {lo}..{hi}")
    return a


def _field(name: str, value, bits: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) \
            or not 0 <= value < 1 << bits:
        raise ArrayInputError(f"{name} = {value!r} is invalid: allowed an integer in "
                              f"0..{(1 << bits) - 1}")
    return int(value)


class ArraySim:
    """Cycle model of one array (see the module docstring): :meth:`outputs` in the current
    cycle (they depend on registers only), :meth:`step` for the clock edge, :meth:`cycle` for
    both.

    Attributes ``psum`` (``n x n``), ``wreg`` (``n x n x w``), ``e_w`` and ``fifo`` are the
    registers, for tests.
    """

    def __init__(self, cfg: ArrayConfig = ArrayConfig()):
        self.cfg = cfg
        n, w = cfg.n, cfg.w
        self.wreg = np.zeros((n, n, w), np.int64)
        self.psum = np.zeros((n, n), np.int64)
        #: skew line of row r: r chunks, newest first
        self.skew = [[np.zeros(w, np.int64) for _ in range(r)] for r in range(n)]
        self.e_w = 0
        self.fifo = deque()
        #: valid line: stage k is the act_valid of k + 1 enabled cycles ago
        self.vline = [False] * n
        #: normalizer pipeline stages (valid, bf16 row), newest first
        self.conv = [(False, None)] * cfg.conv_lat
        self._norm = normalizer_config(cfg.x_bits, cfg.acc_bits)

    def normalize(self, acc, esum: int) -> np.ndarray:
        """The normalizers: bf16 bits of ``acc * 2**(esum - exp_offset(x_bits))``."""
        r = round_raw(self._norm, np.asarray(acc, np.int64),
                      np.full(len(acc), esum - exp_offset(self.cfg.x_bits), np.int64))
        return r.bits.astype(np.uint16)

    def outputs(self) -> ArrayOut:
        cfg = self.cfg
        valid = self.vline[-1]
        acc = self.psum[-1].copy() if valid else None
        esum = self.fifo[0] if valid else None
        if cfg.conv_lat == 0:
            out_valid, out = valid, (self.normalize(acc, esum) if valid else None)
        else:
            out_valid, out = self.conv[-1]
        return ArrayOut(acc_valid=valid, acc=acc, esum=esum, out_valid=out_valid,
                        out=None if out is None else out.copy(), fifo_level=len(self.fifo))

    def cycle(self, i: ArrayIn) -> ArrayOut:
        out = self.outputs()
        self.step(i)
        return out

    def _check(self, i: ArrayIn):
        cfg = self.cfg
        act = _mantissas("act", i.act, (cfg.n, cfg.w), cfg.x_bits)
        wt = _mantissas("wt", i.wt, (cfg.n, cfg.w), cfg.x_bits)
        act_exp = _field("act_exp", i.act_exp, EXP_BITS)
        wt_exp = _field("wt_exp", i.wt_exp, EXP_BITS)
        row = _field("wt_row", i.wt_row, cfg.row_bits)
        return act, act_exp, wt, row, wt_exp

    def step(self, i: ArrayIn) -> None:
        """The clock edge at the end of a cycle with inputs ``i``."""
        cfg = self.cfg
        n, A = cfg.n, cfg.acc_bits
        act, act_exp, wt, row, wt_exp = self._check(i)
        if not i.en:
            return
        o = self.outputs()

        # the chunk each row multiplies this cycle: row 0 from the port, row r from its skew
        rows = np.stack([act[0]] + [self.skew[r][-1] for r in range(1, n)])
        for r in range(1, n):
            self.skew[r] = [act[r]] + self.skew[r][:-1]

        # PE(r, c): psum <= wrap(psum of the PE above + chunk_r . wreg[r][c])
        dots = np.einsum("rk,rck->rc", rows, self.wreg)
        above = np.vstack([np.zeros((1, n), np.int64), self.psum[:-1]])
        self.psum = wrap(above + dots, A)

        # exponent path: pop with the row leaving, push the vector entering
        if o.acc_valid:
            self.fifo.popleft()
        if i.act_valid:
            self.fifo.append(act_exp + self.e_w)
        assert len(self.fifo) <= n, "exponent FIFO overflow (the valid line has n stages)"
        self.vline = [bool(i.act_valid)] + self.vline[:-1]

        if cfg.conv_lat:
            stage = (o.acc_valid, self.normalize(o.acc, o.esum) if o.acc_valid else None)
            self.conv = [stage] + self.conv[:-1]

        # the weight row written this cycle (row 0 also latches the tile exponent)
        if i.wt_valid and row < n:
            self.wreg[row] = wt
            if row == 0:
                self.e_w = wt_exp


# ----------------------------------------------------------------------------------------------
# the GEMM driver

@dataclass
class ArrayRun:
    """A GEMM on the array model: the result, the per-K-tile values, and the cycles."""

    #: bf16 bits ``(B, nt * T)``: the K-tile partials summed in ascending K (bf16_add)
    out: np.ndarray
    #: bf16 bits ``(kt, B, nt * T)``: the normalizers' outputs per K-tile
    partials: np.ndarray
    #: ``(kt, B, nt * T)``: the accumulators (acc at t_b + n)
    accs: np.ndarray
    #: ``(kt, B, nt)``: esum per vector and weight tile
    esums: np.ndarray
    #: ``(k, b, j, s)`` of every vector in the order it was accepted: K-tile, activation row,
    #: N-tile, slice of the tile (output columns ``j*T + s*n .. j*T + s*n + n - 1``)
    tags: list = field(repr=False)
    #: the inputs of every cycle and the model's outputs in it
    inputs: list = field(repr=False)
    outputs: list = field(repr=False)
    #: cycles that accepted a vector, transferred an acc row, transferred a bf16 row
    accepted: list = field(default_factory=list, repr=False)
    acc_cycles: list = field(default_factory=list, repr=False)
    out_cycles: list = field(default_factory=list, repr=False)
    cycles: int = 0


def _noise(rng, cfg: ArrayConfig, en: bool) -> ArrayIn:
    """A cycle carrying no vector and no weight write: random values on every data input
    (and, in a stalled cycle, random valid bits too), which the array must ignore."""
    n, w, X = cfg.n, cfg.w, cfg.x_bits
    lo, hi = -(1 << (X - 1)), 1 << (X - 1)
    rows = 1 << cfg.row_bits
    # an enabled cycle may write a row the array does not have (n not a power of two)
    stray = en and rows > n and rng.random() < 0.5
    return ArrayIn(en=en,
                   act_valid=bool(not en and rng.random() < 0.5),
                   act=rng.integers(lo, hi, n * w), act_exp=int(rng.integers(0, 256)),
                   wt_valid=bool(stray or (not en and rng.random() < 0.5)),
                   wt_row=int(rng.integers(n, rows) if stray else rng.integers(0, rows)),
                   wt=rng.integers(lo, hi, (n, w)), wt_exp=int(rng.integers(0, 256)))


def _check_quantized(cfg: ArrayConfig, ex, Mx, ew, Mw):
    T = cfg.T
    ex, Mx, ew, Mw = (np.asarray(v) for v in (ex, Mx, ew, Mw))
    if Mx.ndim != 3 or Mx.shape[2] != T or ex.shape != Mx.shape[:2]:
        raise ArrayInputError(f"activations must be quantize_activations(X, T={T}) output: "
                              f"e (B, kt), M (B, kt, {T}); got {ex.shape}, {Mx.shape}")
    B, kt = ex.shape
    if B < 1 or kt < 1:
        raise ArrayInputError(f"activations of shape {Mx.shape}: at least one vector needed")
    if ew.ndim != 2 or ew.shape[0] != kt or Mw.shape != (kt * T, ew.shape[1] * T) \
            or ew.shape[1] < 1:
        raise ArrayInputError(f"weights must be quantize_weights(Wt, T={T}) output with {kt} "
                              f"K-tiles: e (kt, nt), M (kt*T, nt*T); got {ew.shape}, {Mw.shape}")
    for name, e in (("activation exponents", ex), ("weight exponents", ew)):
        if not np.issubdtype(e.dtype, np.integer) or e.min() < 0 or e.max() > 254:
            raise ArrayInputError(f"{name} must be biased exponents in 0..254")
    _mantissas("activation mantissas", Mx, Mx.shape, cfg.x_bits)
    _mantissas("weight mantissas", Mw, Mw.shape, cfg.x_bits)
    return ex.astype(np.int64), Mx.astype(np.int64), ew.astype(np.int64), Mw.astype(np.int64)


def array_gemm(cfg: ArrayConfig, ex, Mx, ew, Mw, *, gaps: float = 0.0, stalls: float = 0.0,
               seed: int = 0, sim: ArraySim | None = None) -> ArrayRun:
    """A GEMM of quantized operands on the array model, slice after slice.

    Parameters
    ----------
    cfg : ArrayConfig
    ex, Mx : ndarray
        Activations as :func:`golden.equinox.hbfp.quantize_activations` returns them with
        ``T = n * w``: exponents ``(B, kt)``, mantissas ``(B, kt, T)``.
    ew, Mw : ndarray
        Weights as :func:`golden.equinox.hbfp.quantize_weights` returns them: tile exponents
        ``(kt, nt)``, mantissas ``(kt * T, nt * T)``.
    gaps : float
        Probability of a bubble (a cycle without a vector, random data on the inputs) before
        each vector.
    stalls : float
        Probability of 1-3 cycles with ``en = 0`` (random values on every input, valid bits
        included) before each enabled cycle.
    seed : int
        Seeds the bubbles, stalls and the random values.
    sim : ArraySim, optional
        Continue from this model's state (it must be empty: the previous run drained);
        default a fresh array.

    The slices run N-tile by N-tile, K-tile by K-tile, then the ``w`` slices of the tile
    (columns ``s*n .. s*n + n - 1`` of the tile); every slice streams all ``B`` vectors of its
    K-tile.  Slice 0's rows are written in cycles 0..n-1 and its first vector enters in cycle
    1; each later slice's wavefront starts in the cycle that accepts the previous slice's last
    vector, and its first vector follows in the next cycle, unless a slice would otherwise
    end fewer than ``n`` cycles after its wavefront started (``B < n``), in which case bubbles
    go before its last vector.

    Returns
    -------
    ArrayRun
        ``out`` (padded to ``nt * T`` columns) equals
        ``golden.equinox.hbfp.hbfp_matmul_quantized(ex, Mx, ew, Mw, T, x_bits, acc_bits)``.
    """
    ex, Mx, ew, Mw = _check_quantized(cfg, ex, Mx, ew, Mw)
    n, w, T = cfg.n, cfg.w, cfg.T
    B, kt = ex.shape
    nt = ew.shape[1]
    if sim is None:
        sim = ArraySim(cfg)
    elif sim.cfg != cfg:
        raise ArrayInputError(f"sim models {sim.cfg}, not {cfg}")
    elif sim.fifo or any(sim.vline) or any(v for v, _ in sim.conv):
        raise ArrayInputError("sim still has vectors in flight")
    rng = np.random.default_rng(seed)

    # ---- the enabled cycles (beats): weight wavefronts and vectors
    beats: list[ArrayIn] = []

    def at(t: int) -> ArrayIn:
        while len(beats) <= t:
            beats.append(_noise(rng, cfg, True))
        return beats[t]

    tags = []
    tau, t = 0, 0
    for j in range(nt):
        for k in range(kt):
            for s in range(w):
                cols = slice(j * T + s * n, j * T + (s + 1) * n)
                for r in range(n):
                    wrow = Mw[k * T + r * w:k * T + (r + 1) * w, cols].T
                    b = at(tau + r)
                    b.wt_valid, b.wt_row, b.wt, b.wt_exp = True, r, wrow, int(ew[k, j])
                t = max(t, tau + 1)
                for bi in range(B):
                    if gaps and rng.random() < gaps:
                        t += 1
                    if bi == B - 1:
                        t = max(t, tau + n)
                    v = at(t)
                    v.act_valid, v.act, v.act_exp = True, Mx[bi, k], int(ex[bi, k])
                    tags.append((k, bi, j, s))
                    t += 1
                tau = t - 1
    at(t + n + cfg.conv_lat)

    # ---- stalls, then the cycle model
    inputs = []
    for b in beats:
        if stalls and rng.random() < stalls:
            inputs += [_noise(rng, cfg, False) for _ in range(int(rng.integers(1, 4)))]
        inputs.append(b)
    run = ArrayRun(out=np.zeros((B, nt * T), np.uint16),
                   partials=np.zeros((kt, B, nt * T), np.uint16),
                   accs=np.zeros((kt, B, nt * T), np.int64),
                   esums=np.zeros((kt, B, nt), np.int64), tags=tags, inputs=inputs,
                   outputs=[])
    accs, outs = iter(tags), iter(tags)
    for cyc, i in enumerate(inputs):
        o = sim.cycle(i)
        run.outputs.append(o)
        if not i.en:
            continue
        if i.act_valid:
            run.accepted.append(cyc)
        if o.acc_valid:
            k, bi, j, s = next(accs)
            run.accs[k, bi, j * T + s * n:j * T + (s + 1) * n] = o.acc
            run.esums[k, bi, j] = o.esum
            run.acc_cycles.append(cyc)
        if o.out_valid:
            k, bi, j, s = next(outs)
            run.partials[k, bi, j * T + s * n:j * T + (s + 1) * n] = o.out
            run.out_cycles.append(cyc)
    assert len(run.acc_cycles) == len(run.out_cycles) == len(tags), "outputs missing"
    run.cycles = len(inputs)
    acc = run.partials[0]
    for k in range(1, kt):
        acc = bf16_add(acc, run.partials[k])
    run.out = acc
    return run


def array_matmul(cfg: ArrayConfig, X, Wt, rounding: str = "floor", **kwargs) -> ArrayRun:
    """``X @ Wt`` on the array model: :func:`golden.equinox.hbfp.quantize_activations` /
    :func:`golden.equinox.hbfp.quantize_weights` with ``T = n * w`` and ``m = x_bits``, then
    :func:`array_gemm` (``kwargs``: ``gaps``, ``stalls``, ``seed``, ``sim``).  The run's
    ``out`` is cut to ``Wt``'s columns: it equals ``golden.equinox.hbfp.hbfp_matmul(X, Wt, n * w,
    x_bits, acc_bits, rounding)``."""
    ex, Mx = quantize_activations(X, cfg.T, cfg.x_bits, rounding)
    ew, Mw = quantize_weights(Wt, cfg.T, cfg.x_bits, rounding)
    run = array_gemm(cfg, ex, Mx, ew, Mw, **kwargs)
    run.out = run.out[:, :np.shape(Wt)[1]]
    return run


def dot_operands(target: int, length: int, x_bits: int = 8):
    """Two vectors of ``length`` X-bit mantissas whose dot product is exactly ``target`` —
    stimulus for driving a chosen accumulator value through the array (TV9/TV10).  Raises
    :class:`ArrayInputError` if no such pair is found: always beyond ``length`` products of
    the largest magnitude (``2**(2X-2)``, or ``-2**(X-1) (2**(X-1) - 1)`` for negative targets),
    sometimes up to two products short of that."""
    big = 1 << (x_bits - 1)               # |-2**(X-1)|
    top = big - 1
    a, b = [], []
    rest = int(target)
    while len(a) < length and abs(rest) > top * top:
        # whole products of the largest magnitude with the target's sign
        p = (-big, -big) if rest > 0 else (-big, top)
        a.append(p[0])
        b.append(p[1])
        rest -= p[0] * p[1]
    if len(a) < length and abs(rest) > top:
        q = int(np.sign(rest)) * (abs(rest) // top)
        a.append(top)
        b.append(q)
        rest -= top * q
    if len(a) < length and rest:
        a.append(1)
        b.append(rest)
        rest = 0
    if rest:
        raise ArrayInputError(f"no pair of {length}-element {x_bits}-bit mantissa vectors "
                              f"found for the dot product {target}")
    pad = length - len(a)
    return np.array(a + [0] * pad, np.int64), np.array(b + [0] * pad, np.int64)


__all__ = ["ArrayConfig", "ArrayIn", "ArrayOut", "ArraySim", "ArrayRun", "ArrayInputError",
           "array_gemm", "array_matmul", "dot_operands"]

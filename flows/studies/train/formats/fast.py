"""FAST training (``fast``, ``fast-low``, ``fast-high``): every GEMM on FAST's BFP fMAC datapath,
mantissa widths chosen per layer, tensor and iteration.

Every GEMM of the three training phases is the golden FAST GEMM
(:func:`golden.fast.numerics.bfp_gemm`), computed by its compiled kernels
(:mod:`golden.fast.gemm_kernel`: the same groups, draws and bits): both operands are cut into groups of 16 along the
reduction (zero-padded), each group gets a shared 8-bit exponent and per element a sign and an
``m``-bit magnitude (``m`` = 2 or 4); weights and activations are truncated, the output gradient
``G`` is stochastically rounded (8 random bits per element from the converter's per-lane LFSRs,
:class:`golden.fast.numerics.LaneRNG`); the group products are accumulated in FP32 by the fMAC,
one FP32 addition per 2-bit chunk pair (the ``"paper"`` fMAC mode, as the generated hardware
does), on the paper's 256 x 64 fMAC array's tiling (:data:`ARRAY`).  The FP32 result is returned
as float32.  Everything outside the GEMMs is the engine's FP32.

The three formats differ only in the widths:

``fast``
    FAST's Algorithm 1: for layer ``l`` (1..L, network order) at iteration ``i`` (1..I over the
    whole run, ``I = epochs x iterations per epoch``) each of the layer's three tensors ``X`` in
    (W, A, G) is converted with 4-bit magnitudes, its relative improvement over 2 bits
    ``r(X)`` (Eq. 2, :func:`~golden.fast.numerics.rel_improvement`: the magnitude of the dropped
    low chunks over that of the kept high chunks) is compared with
    ``eps(l, i) = 0.6 - 0.3 i / I - 0.3 l / L`` (Eq. 1, :func:`~golden.fast.numerics.epsilon`),
    and ``X`` is used with 2-bit magnitudes when ``r(X) < eps``, else 4
    (:func:`~golden.fast.numerics.choose_m`).
``fast-low``
    2-bit magnitudes everywhere (the paper's LowBFP fixed point).
``fast-high``
    4-bit magnitudes everywhere (the paper's HighBFP).

Where r(X) is computed (choices the paper leaves open)
------------------------------------------------------
* ``r(A_l)`` and ``r(W_l)``: at layer ``l``'s ``fwd`` GEMM, on its operands as they are grouped
  there (A's rows and W's columns, groups along the input features).  The chosen widths hold for
  the layer's backward GEMMs of the same iteration, where A (in ``wgrad``, grouped along the
  batch) and W (in ``bwd_data``, grouped along the output features) are converted again.
* ``r(G_l)``: at the first backward GEMM of layer ``l`` in the iteration, on the stochastically
  rounded 4-bit conversion that GEMM uses: ``bwd_data`` (G's rows, groups along the output
  features), which the engine calls first.  For the first layer the input gradient is not
  needed; an engine that skips that ``bwd_data`` makes ``wgrad`` the first backward GEMM, and
  ``r(G_1)`` is then computed on G as ``wgrad`` groups it (along the batch).  The summary record
  counts which GEMM decided each layer's G width (``g_source``).  The present engine computes
  every layer's ``bwd_data``, so G is always measured in ``bwd_data``.
* The 2-bit operand is the 4-bit one with its low chunk dropped
  (:func:`~golden.fast.numerics.to_m2`), which is how the converter makes 2-bit groups and how
  :func:`~golden.fast.numerics.quantize_rows` defines them, so one conversion (one set of LFSR
  draws) serves both the measurement and the GEMM, and every result equals
  ``bfp_gemm(x, y, mx, my, phase, "paper", ARRAY, rng=...)`` with the chosen widths bit for bit.
* ``fast-low`` and ``fast-high`` measure ``r`` the same way (the per-epoch record reports its
  mean) but ignore it.
* Test-set evaluation (the engine's forward passes after :meth:`end_epoch`): ``fast`` chooses
  each batch's A and W widths with Algorithm 1 at the epoch's last iteration ``i``; these
  choices are not part of the width map.

Random numbers: one :class:`~golden.fast.numerics.LaneRNG` (16 lanes, 8 bits per draw) per
format instance, the lanes' initial LFSR states drawn from ``numpy.random.default_rng(run.seed)``
(16 non-zero 16-bit values), advanced in the engine's GEMM order; a run is therefore
deterministic.

Run time: the compiled kernels cost about 3 ns of CPU per fMAC round and output element
(the round's BLAS product, an FP32 conversion of its sum and an FP32 addition), so a 4 x 4-bit
group pair (4 rounds) costs about four times a 2 x 2-bit one; ``trainfab bench --gemms``
measures the formats' GEMMs beside NumPy's float32 matmul (on a 256 x 576 x 64 GEMM with
4-bit operands the golden model's NumPy rounds take about 50 times as long).

Non-finite operands: the golden model rejects Inf/NaN (BFP cannot hold them).  A diverging
run's GEMM with a non-finite operand returns all NaN, so that the engine reports the divergence;
its widths are not recorded.
"""

import re

import numpy as np

from golden.fast.numerics import (
    DEFAULT_ROUNDING,
    LANES,
    LaneRNG,
    Quantized,
    choose_m,
    epsilon,
    rel_improvement,
    rounds,
    to_m2,
)
from golden.fast.numerics import G as GROUP
from golden.fast.gemm_kernel import gemm_quantized_fast, quantize_rows_fast

from .base import PHASES, Format, RunInfo

#: Eq. 1's constants (the paper's values)
ALPHA, BETA = 0.6, 0.3
#: the paper's fMAC array, (rows, cols): decides how the reduction is cut into tiles whose
#: partial sums start from +0 (FWD: 64 groups per tile, BWD-DATA: 256, WGRAD: one tile)
ARRAY = (256, 64)
#: the fMAC's round combination: one FP32 addition per chunk pair, as the hardware does
FMAC_MODE = "paper"
#: the tensors of Algorithm 1, in the order of the width records
TENSORS = ("w", "a", "g")
#: a tensor whose width was not chosen in an iteration (its GEMM did not run) in the width map
NOT_CHOSEN = "-"


class FastFormatError(ValueError):
    """A GEMM call the FAST formats cannot serve; the message is one line."""


def lane_states_for(seed: int) -> tuple:
    """The initial states of a run's 16 LFSR lanes: non-zero 16-bit values drawn from
    ``numpy.random.default_rng(seed)``."""
    return tuple(int(s) for s in np.random.default_rng(seed).integers(1, 1 << 16, size=LANES))


def narrow(q: Quantized, m: int) -> Quantized:
    """A 4-bit :class:`~golden.fast.numerics.Quantized` operand at ``m`` bits: itself for 4, its
    high chunks (:func:`~golden.fast.numerics.to_m2`) for 2.  An operand quantized at ``m``
    bits already is returned as it is."""
    if m == q.m:
        return q
    if (q.m, m) != (4, 2):
        raise FastFormatError(f"fast: cannot narrow a {q.m}-bit operand to {m} bits")
    return Quantized(*to_m2(q.Es, q.signs, q.q), 2)


def datapath(q: Quantized) -> Quantized:
    """An operand as the fMAC takes it: an odd width ``m`` padded to ``m + 1`` bits with a zero
    low bit (``2 q`` at ``m + 1`` bits is the same value), as FAST's ⌈m/2⌉ chunks suggest for
    MidBFP's 3 bits; even widths unchanged."""
    if q.m % 2 == 0:
        return q
    return Quantized(q.Es, q.signs, q.q << 1, q.m + 1)


def group_pairs(shape, group: int = GROUP) -> int:
    """Group pairs of a GEMM ``[M, K, N]``: ``M * N * ceil(K / group)`` (the hardware's
    ``group`` is 16), each one fMAC job of :func:`~golden.fast.numerics.rounds` cycles."""
    M, K, N = (int(v) for v in shape)
    return M * N * max(1, -(-K // group))


class FAST(Format):
    """FAST BFP training with Algorithm 1's per-layer, per-tensor widths (module docstring).

    Parameters
    ----------
    run : RunInfo
        The run's layers (their order gives ``l``), epochs and iterations per epoch (which give
        ``I``) and the seed of the LFSR lanes.

    Attributes
    ----------
    fixed_m : int or None
        None: Algorithm 1; 2 or 4: that width for every tensor (``fast-low``, ``fast-high``).
    fmac_mode : str
        The golden fMAC's round combination, :data:`FMAC_MODE`.
    """

    name = "fast"
    cost = 10.0
    summary = ("FAST: BFP groups of 16, 2- or 4-bit magnitudes chosen per layer and tensor by "
               "Algorithm 1 (alpha 0.6, beta 0.3), SR for gradients, FP32 fMAC accumulation")
    paper = ("FAST Table II: FAST within 0.1 points of FP32 on CNNs "
             "(ResNet-18 top-1 68.52 vs 68.60)")
    fixed_m: int | None = None
    #: Eq. 1's constants
    alpha, beta = ALPHA, BETA
    #: per-tensor fixed widths (``{"w", "a", "g"}`` → bits), overriding the choice in training
    #: steps (the ``fast-low-g4`` ablation); None: :attr:`fixed_m` or Algorithm 1
    fixed_by_tensor: dict | None = None
    fmac_mode = FMAC_MODE
    #: the fMAC array whose tiling restarts partial sums from +0; None: one FP32 accumulation
    #: along the whole reduction
    array: tuple | None = ARRAY
    #: the quantizer's width: 4 (the converter's, narrowed to 2 by dropping the low chunk) or
    #: a fixed width of its own (MidBFP's 3), which :meth:`choose` then always returns
    quant_m = 4
    #: per phase, the roundings of X and Y; None: FAST's (truncation, SR for the gradient)
    roundings: dict | None = None
    #: values per group (the hardware's 16; other sizes for the sensitivity study)
    group = GROUP

    def __init__(self, run: RunInfo):
        super().__init__(run)
        self.layers = tuple(li.name for li in run.layers)
        self.index = {name: l for l, name in enumerate(self.layers, start=1)}
        self.L = len(self.layers)
        self.I = run.epochs * run.iterations
        self.rng = LaneRNG(lane_states_for(run.seed))
        self.i = 0                     # global iteration of the current step, 1-based
        self.training = False          # between begin_step and end_epoch
        self._step: dict = {}
        self._shapes: dict = {}
        # whole-run records
        self._widths = {t: {name: [] for name in self.layers} for t in TENSORS}
        self._tables: list[dict] = []
        self._runs: list[list[int]] = []
        self._g_source = {name: {"bwd_data": 0, "wgrad": 0} for name in self.layers}
        self._rounds = dict.fromkeys(PHASES, 0)
        self._pairs = dict.fromkeys(PHASES, 0)
        self._committed = 0
        self._new_epoch()

    # -- Algorithm 1

    def choose(self, r: float, l: int, i: int) -> int:
        """The width of a tensor of layer ``l`` with relative improvement ``r`` at iteration
        ``i``: :data:`fixed_m`, or ``choose_m(r, epsilon(l, i, L, I, ALPHA, BETA))``."""
        if self.fixed_m is not None:
            return self.fixed_m
        return choose_m(r, epsilon(l, i, self.L, self.I, self.alpha, self.beta))

    def _new_epoch(self):
        self._ep = {"sum": {t: dict.fromkeys(self.layers, 0) for t in TENSORS},
                    "r": {t: dict.fromkeys(self.layers, 0.0) for t in TENSORS},
                    "n": {t: dict.fromkeys(self.layers, 0) for t in TENSORS},
                    "nr": {t: dict.fromkeys(self.layers, 0) for t in TENSORS},
                    "rounds": dict.fromkeys(PHASES, 0), "pairs": dict.fromkeys(PHASES, 0)}

    # -- hooks

    def begin_step(self, epoch: int, iteration: int) -> None:
        super().begin_step(epoch, iteration)
        self.i = (epoch - 1) * self.run.iterations + iteration + 1
        self.training = True
        self._step = {name: {} for name in self.layers}
        self._shapes = {}

    def _decide(self, st: dict, tensor: str, q: Quantized, l: int) -> int:
        r = rel_improvement(q.Es, q.q) if q.m == 4 else None
        m = self.choose(r, l, self.i)
        if self.fixed_by_tensor is not None:
            m = self.fixed_by_tensor[tensor]
        st[tensor] = m
        st["r_" + tensor] = r
        return m

    def matmul(self, x: np.ndarray, y: np.ndarray, phase: str, layer: str) -> np.ndarray:
        if phase not in PHASES:
            raise FastFormatError(f"fast: unknown GEMM phase '{phase}' "
                                  f"(known: {', '.join(PHASES)})")
        l = self.index.get(layer)
        if l is None:
            raise FastFormatError(f"fast: unknown layer '{layer}' "
                                  f"(the run's layers: {', '.join(self.layers)})")
        x = np.asarray(x, dtype=np.float32)
        y = np.asarray(y, dtype=np.float32)
        if not (np.isfinite(x).all() and np.isfinite(y).all()):
            if self.training:
                self._step[layer]["nonfinite"] = True
            return np.full((x.shape[0], y.shape[1]), np.nan, dtype=np.float32)
        xq, yq = self._operands(x, y, phase)
        if not self.training:
            if phase != "fwd":
                raise FastFormatError(f"fast: a '{phase}' GEMM of layer '{layer}' outside a "
                                      "training step")
            i = min(max(self.i, 1), self.I)
            mx = self.choose(rel_improvement(xq.Es, xq.q), l, i)
            my = self.choose(rel_improvement(yq.Es, yq.q), l, i)
            return self._gemm(xq, yq, mx, my, phase)
        st = self._step[layer]
        if phase == "fwd":
            mx, my = self._decide(st, "a", xq, l), self._decide(st, "w", yq, l)
        else:
            need = "w" if phase == "bwd_data" else "a"
            if need not in st:
                if st.get("nonfinite"):
                    return np.full((x.shape[0], y.shape[1]), np.nan, dtype=np.float32)
                raise FastFormatError(f"fast: the '{phase}' GEMM of layer '{layer}' came before "
                                      "its 'fwd' GEMM in this iteration")
            if "g" not in st:
                self._decide(st, "g", xq if phase == "bwd_data" else yq, l)
                st["g_source"] = phase
            mx, my = (st["g"], st["w"]) if phase == "bwd_data" else (st["a"], st["g"])
        shape = (x.shape[0], x.shape[1], y.shape[1])
        self._shapes.setdefault(layer, {})[phase] = list(shape)
        pairs = group_pairs(shape, self.group)
        self._pairs[phase] += pairs
        self._ep["pairs"][phase] += pairs
        n = pairs * self.rounds(mx, my)
        self._rounds[phase] += n
        self._ep["rounds"][phase] += n
        return self._gemm(xq, yq, mx, my, phase)

    def rounds(self, mx: int, my: int) -> int:
        """fMAC rounds per group pair at widths ``mx``, ``my``: ``rounds`` of the datapath's
        widths (odd widths padded), 1 in the ``"exact"`` mode (one FP32 addition per pair)."""
        if self.fmac_mode == "exact":
            return 1
        return rounds(mx + mx % 2, my + my % 2)

    def _operands(self, x, y, phase):
        """The phase's operands quantized at :attr:`quant_m` bits with the format's roundings,
        drawing SR bits from the lanes (X's groups first, then Y's)."""
        rx, ry = (self.roundings or DEFAULT_ROUNDING)[phase]
        xq = quantize_rows_fast(x, self.quant_m, rx, self.rng, self.group)
        yq = quantize_rows_fast(np.ascontiguousarray(y.T), self.quant_m, ry, self.rng,
                                self.group)
        return xq, yq

    def _gemm(self, xq, yq, mx, my, phase):
        bits = gemm_quantized_fast(datapath(narrow(xq, mx)), datapath(narrow(yq, my)), phase,
                                   self.fmac_mode, self.array)
        return bits.view(np.float32)

    def end_step(self, loss: float) -> None:
        for name in self.layers:
            st = self._step.get(name, {})
            for t in TENSORS:
                m = st.get(t)
                self._widths[t][name].append(NOT_CHOSEN if m is None else str(m))
                if m is not None:
                    self._ep["sum"][t][name] += m
                    if st["r_" + t] is not None:
                        self._ep["r"][t][name] += st["r_" + t]
                        self._ep["nr"][t][name] += 1
                    self._ep["n"][t][name] += 1
            if "g_source" in st:
                self._g_source[name][st["g_source"]] += 1
        table = {name: self._shapes[name] for name in self.layers if name in self._shapes}
        if not self._runs or self._tables[self._runs[-1][1]] != table:
            if table not in self._tables:
                self._tables.append(table)
            self._runs.append([self._committed, self._tables.index(table)])
        self._committed += 1
        self._step = {}

    def end_epoch(self, epoch: int) -> dict:
        """Per layer and tensor the mean chosen width and mean ``r`` over the epoch's
        iterations, and the epoch's fMAC work per phase.

        Returns
        -------
        dict
            ``{"mean_widths": {layer: {"w", "a", "g"}}, "mean_r": {layer: {"w", "a", "g"}},
            "share_4bit": fraction of the epoch's tensor choices that were 4-bit,
            "group_pairs": {phase: n}, "fmac_rounds": {phase: n}}`` (``fmac_rounds`` =
            group pairs x ``rounds(mx, my)``).
        """
        ep = self._ep
        mean_w, mean_r = {}, {}
        n4 = n = 0
        for name in self.layers:
            mean_w[name], mean_r[name] = {}, {}
            for t in TENSORS:
                k = ep["n"][t][name]
                mean_w[name][t] = ep["sum"][t][name] / k if k else None
                kr = ep["nr"][t][name]
                mean_r[name][t] = ep["r"][t][name] / kr if kr else None
                n4 += (ep["sum"][t][name] - 2 * k) // 2
                n += k
        rec = {"mean_widths": mean_w, "mean_r": mean_r,
               "share_4bit": n4 / n if n and self.quant_m == 4 else None,
               "group_pairs": dict(ep["pairs"]), "fmac_rounds": dict(ep["rounds"])}
        self.training = False
        self._new_epoch()
        return rec

    def summary_record(self) -> dict:
        """The width map and the GEMM shapes of the whole run.

        Returns
        -------
        dict
            ``layers``: names in network order (``l = 1..L``); ``iterations_per_epoch``;
            ``iterations``: training iterations recorded; ``widths``: ``{"w"|"a"|"g": {layer:
            str}}``, one character per recorded iteration in training order (``"2"``, ``"4"``,
            or ``"-"`` when not chosen); ``gemm_shapes``: list of shape tables ``{layer: {phase:
            [M, K, N]}}`` (``C (M x N) = X (M x K) . Y (K x N)``); ``shape_runs``: ``[[first
            iteration (0-based), table index], ...]``, the table each iteration used from its
            first iteration on (only the last, smaller mini-batch of an epoch changes it);
            ``g_source``: ``{layer: {"bwd_data": n, "wgrad": n}}``, the GEMM that decided G's
            width; ``group_pairs`` and ``fmac_rounds``: ``{phase: total}`` over the run;
            ``algorithm``: the constants.

        Notes
        -----
        One character per iteration, layer and tensor keeps the record small (15 epochs of the
        digits set: 675 iterations x 3 layers x 3 tensors, about 6 kB; a 60 000-sample set,
        about 250 kB) while keeping every choice, so the width map can be drawn per iteration.
        """
        return {
            "layers": list(self.layers),
            "iterations_per_epoch": self.run.iterations,
            "iterations": self._committed,
            "widths": {t: {name: "".join(v) for name, v in self._widths[t].items()}
                       for t in TENSORS},
            "gemm_shapes": self._tables,
            "shape_runs": self._runs,
            "g_source": self._g_source,
            "group_pairs": dict(self._pairs),
            "fmac_rounds": dict(self._rounds),
            "algorithm": {"adaptive": self.fixed_m is None, "fixed_m": self.fixed_m,
                          **({"fixed_by_tensor": dict(self.fixed_by_tensor)}
                             if self.fixed_by_tensor is not None else {}),
                          "alpha": self.alpha, "beta": self.beta, "L": self.L, "I": self.I,
                          "group": self.group, "array": list(self.array) if self.array else None,
                          "fmac_mode": self.fmac_mode, "quant_m": self.quant_m,
                          "roundings": self.roundings or DEFAULT_ROUNDING},
        }


    @classmethod
    def markdown(cls, result: dict) -> str:
        """The width table of ``train.md``: per layer, the share of 4-bit choices of W, A and G
        in the first epoch, the last epoch and the whole run, and which GEMM measured G."""
        return width_table(result["format"]) if result.get("format") else ""

    @classmethod
    def plot(cls, result: dict, folder) -> list:
        """``widths-<name>.png`` in ``folder``: the width map of an adaptive run (layers x
        iterations for W, A and G, :func:`flows.studies.fast_time.plot_widths`); nothing for
        the fixed widths of ``fast-low`` and ``fast-high``."""
        summary = result.get("format") or {}
        if not summary.get("algorithm", {}).get("adaptive"):
            return []
        from pathlib import Path

        from ...fast_time import plot_widths

        name = f"widths-{cls.name}.png"
        plot_widths(summary, Path(folder) / name)
        return [name]


def _share4(s: str):
    n = sum(c.isdigit() for c in s)
    return s.count("4") / n if n else None


def width_table(summary: dict) -> str:
    """Markdown: per layer and tensor, the share of iterations that used 4-bit magnitudes
    (first epoch, last epoch, whole run) and the GEMM that measured G; see
    :meth:`FAST.summary_record` for the record."""
    alg = summary.get("algorithm", {})
    per, n = summary["iterations_per_epoch"], summary["iterations"]
    if alg.get("fixed_by_tensor"):
        return ("Fixed magnitudes per tensor: " + ", ".join(
            f"{t.upper()} {m} bits" for t, m in alg["fixed_by_tensor"].items())
            + f" ({n} iterations).")
    if not alg.get("adaptive"):
        return (f"Fixed {alg.get('fixed_m')}-bit magnitudes for every tensor "
                f"({n} iterations).")
    last = max(0, (n // per - 1) * per) if per else 0

    def pct(v):
        return "—" if v is None else f"{100 * v:.0f} %"

    lines = [f"Algorithm 1 (alpha {alg['alpha']}, beta {alg['beta']}, L = {alg['L']}, "
             f"I = {alg['I']}): share of iterations with 4-bit magnitudes, "
             "first epoch / last epoch / whole run.", "",
             "| layer | W | A | G | G measured in |", "|---|---|---|---|---|"]
    for layer in summary["layers"]:
        cells = []
        for t in TENSORS:
            s = summary["widths"][t][layer]
            cells.append(" / ".join(pct(_share4(x)) for x in (s[:per], s[last:last + per], s)))
        src = summary.get("g_source", {}).get(layer, {})
        where = ", ".join(f"{k} ({v})" for k, v in src.items() if v) or "—"
        lines.append(f"| {layer} | " + " | ".join(cells) + f" | {where} |")
    return "\n".join(lines)


class FASTLow(FAST):
    """FAST's datapath with 2-bit magnitudes for every tensor (LowBFP)."""

    name = "fast-low"
    summary = "FAST datapath, 2-bit magnitudes everywhere (LowBFP): BFP groups of 16, SR gradients"
    paper = "FAST Table II: LowBFP (fixed 2-bit) loses 3 to 5.6 points against FP32"
    fixed_m = 2


class FASTHigh(FAST):
    """FAST's datapath with 4-bit magnitudes for every tensor (HighBFP)."""

    name = "fast-high"
    summary = "FAST datapath, 4-bit magnitudes everywhere (HighBFP): BFP groups of 16, SR gradients"
    paper = "FAST Table II: HighBFP (fixed 4-bit) within 0.05 points of FP32"
    fixed_m = 4


class MidBFP(FAST):
    """FAST's datapath with 3-bit magnitudes for every tensor (the paper's MidBFP).

    The converter quantizes to 3 bits directly (truncation for W and A, SR with 8 random bits
    for G, as FAST rounds), and the fMAC takes each 3-bit group padded to 4 bits with a zero
    low bit (:func:`datapath`): four rounds per group pair, as HighBFP's.  The paper trains
    MidBFP in software only and leaves its hardware open; padding to ⌈m/2⌉ chunks is what its
    chunked fMAC suggests."""

    name = "mid-bfp"
    cost = 10.0
    summary = ("FAST datapath, 3-bit magnitudes everywhere (MidBFP): BFP groups of 16, SR "
               "gradients, padded to 4 bits in the fMAC")
    paper = "FAST Table II: MidBFP (fixed 3-bit) loses 0.5 to 1.3 points against FP32"
    fixed_m = 3
    quant_m = 3


class MSFP12(FAST):
    """MSFP-12 (Microsoft floating point, the block format FAST Table II compares with): groups
    of 16 along the reduction with an 8-bit shared exponent and, per element, a sign and a 3-bit
    magnitude (8 + 4 bits: MSFP counts the sign in its 12).

    Choices the FAST paper leaves open, documented here:

    * every tensor (W, A and G) is rounded to nearest, ties to even, by FAST's converter
      quantizer (a magnitude that rounds up to 8 saturates at 7): MSFP's own quantizer rounds to
      nearest, and the paper names no stochastic rounding for it;
    * each group pair's dot product is exact and is added once into one FP32 accumulator per
      output along the whole reduction (the golden fMAC's ``"exact"`` mode without array
      tiling): the bit-parallel BFP MAC of an MSFP array, one group pair per step.
    """

    name = "msfp12"
    cost = 3.0
    summary = ("MSFP-12: BFP groups of 16, 8-bit shared exponent, sign + 3-bit magnitudes, "
               "round to nearest, one FP32 accumulation per group pair")
    paper = "FAST Table II: MSFP-12 within 0.5 points of FP32 (ResNet-18 top-1 68.13 vs 68.60)"
    fixed_m = 3
    quant_m = 3
    fmac_mode = "exact"
    array = None
    roundings = {phase: ("rne", "rne") for phase in PHASES}


class MSFP12SR(MSFP12):
    """MSFP-12 with FAST's stochastic rounding (8 random bits from the lanes) for the
    gradients, round to nearest for weights and activations: an ablation that shows what the
    gradients' rounding does to MSFP-12's training (docs/papers.md)."""

    name = "msfp12-sr"
    summary = "MSFP-12 with stochastically rounded gradients (an ablation)"
    paper = "not a paper format: MSFP rounds to nearest"
    roundings = {"fwd": ("rne", "rne"), "bwd_data": ("sr", "rne"), "wgrad": ("rne", "sr")}


class FASTLowG4(FASTLow):
    """LowBFP with 4-bit gradients (2-bit weights and activations): an ablation that shows
    which tensor's 2-bit magnitudes a LowBFP run does not survive (docs/papers.md)."""

    name = "fast-low-g4"
    summary = "LowBFP with 4-bit gradients, 2-bit weights and activations (an ablation)"
    paper = "not a paper format: LowBFP keeps every tensor at 2 bits"
    fixed_by_tensor = {"w": 2, "a": 2, "g": 4}


#: the range of a variant's alpha and beta (:func:`variant`)
VARIANT_RANGE = (0.0, 2.0)


#: the widths and group sizes of the ``bfp-m<m>-g<g>`` variants (the paper's sensitivity study:
#: m 2..5, g 8, 16, 32)
VARIANT_M = (2, 8)
VARIANT_G = (2, 64)


def _fixed_variant(name: str):
    match = re.fullmatch(r"bfp-m(\d+)-g(\d+)", name)
    if match is None:
        return None
    m, g = int(match[1]), int(match[2])
    if not (VARIANT_M[0] <= m <= VARIANT_M[1] and VARIANT_G[0] <= g <= VARIANT_G[1]):
        raise ValueError(f"format {name!r}: m {m} ({VARIANT_M[0]}..{VARIANT_M[1]}) or group "
                         f"{g} ({VARIANT_G[0]}..{VARIANT_G[1]}) out of range")
    return type(f"BFP_{m}_{g}", (FAST,), {
        "name": name, "fixed_m": m, "quant_m": m, "group": g,
        "summary": f"FAST's datapath at fixed {m}-bit magnitudes in groups of {g} (truncation, "
                   "SR gradients; a sweep variant)",
        "paper": "FAST Fig. 20: smaller groups are more accurate; g = 16, m = 4 chosen",
        "__module__": __name__})


def variant(name: str):
    """The class of the FAST variant ``name``, for the sweeps; None for a name of another form:

    ``fast-a<alpha>-b<beta>``
        Algorithm 1 with Eq. 1's constants ``alpha`` and ``beta`` (decimal numbers, e.g.
        ``fast-a0.4-b0.3``).
    ``bfp-m<m>-g<g>``
        FAST's datapath at fixed ``m``-bit magnitudes (2..8) in groups of ``g`` values (2..64)
        along the reduction: the converter's quantizer (truncation for weights and
        activations, SR for gradients, :func:`golden.fast.numerics.group_draws` for groups
        other than 16) and the fMAC (odd widths padded, :func:`datapath`), the paper's Fig. 20
        sensitivity study (which trains in software).

    Raises
    ------
    ValueError
        A parameter out of range; one line.
    """
    fixed = _fixed_variant(name)
    if fixed is not None:
        return fixed
    match = re.fullmatch(r"fast-a(\d+(?:\.\d+)?)-b(\d+(?:\.\d+)?)", name)
    if match is None:
        return None
    alpha, beta = float(match[1]), float(match[2])
    lo, hi = VARIANT_RANGE
    if not (lo <= alpha <= hi and lo <= beta <= hi):
        raise ValueError(f"format {name!r}: alpha {alpha:g} or beta {beta:g} outside 0..2")
    return type(f"FAST_{alpha:g}_{beta:g}", (FAST,), {
        "name": name, "alpha": alpha, "beta": beta,
        "summary": f"FAST with Algorithm 1's alpha {alpha:g} and beta {beta:g} (a sweep "
                   "variant)",
        "paper": "FAST §VI: alpha 0.6, beta 0.3 for all DNNs",
        "__module__": __name__})


#: format name → class
FORMATS = {"fast": FAST, "fast-low": FASTLow, "mid-bfp": MidBFP, "fast-high": FASTHigh,
           "msfp12": MSFP12}
#: ablations: trained only when named (``--formats``), not by ``all``
ABLATIONS = {"fast-low-g4": FASTLowG4, "msfp12-sr": MSFP12SR}

__all__ = ["FORMATS", "ABLATIONS", "FAST", "FASTLow", "MidBFP", "FASTHigh", "MSFP12", "MSFP12SR",
           "FASTLowG4",
           "FastFormatError", "ALPHA", "BETA", "ARRAY", "FMAC_MODE", "TENSORS", "NOT_CHOSEN",
           "lane_states_for", "narrow", "datapath", "group_pairs", "width_table", "variant",
           "VARIANT_M", "VARIANT_G"]

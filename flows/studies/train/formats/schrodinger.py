"""Schrödinger's FP training: learned (``schrodinger``) and loss-driven (``bitwave``) containers
for the tensors kept between passes, with their Gecko footprints.

Schrödinger's FP shrinks what training stashes in memory, not the arithmetic: every weight and
activation the forward pass uses and the backward pass reads is quantized into a narrower
floating-point container, and the GEMMs run in FP32 on the quantized values ("the baseline
datatype is used for weight updates and gradients"; gradients are not compressed).  Both formats
therefore keep the base class's FP32 :meth:`~.base.Format.matmul` and FP32 master weights, and
act in :meth:`~.base.Format.stash`; all value transforms are the golden models of
:mod:`golden.gecko.schrodinger`, and the footprints come from :func:`golden.gecko.codec.footprint`.

``schrodinger`` — Quantum Mantissa + Quantum Exponent (QM+QE)
    Four learned real bitlengths per layer with weights: ``n_m`` and ``n_e`` of its weight and of
    its activation (the GEMM's input), starting at full width (23, 8).  Each training batch draws
    integer bitlengths with :func:`~golden.gecko.schrodinger.select_bits` from its own uniform
    draws, quantizes with R then P (:func:`~golden.gecko.schrodinger.qe_clamp`, then
    :func:`~golden.gecko.schrodinger.truncate_mantissa`), and learns the bitlengths from the
    gradients that reach the stashed tensors (:func:`~golden.gecko.schrodinger.qm_grad`,
    :func:`~golden.gecko.schrodinger.qe_grad`) plus the regularizer γ·λ_i·n_i.
``bitwave`` — BitWave mantissa + exponent (BWM+BWE)
    One network-wide mantissa bitlength and exponent range, driven batch by batch by the slope of
    the training loss (:class:`~golden.gecko.schrodinger.BitWave`) and applied with
    :func:`~golden.gecko.schrodinger.bitwave_quantize`.

Footprint accounting
--------------------
Every stash of a training batch (each layer's weight and activation, every iteration) is counted;
the stashes of the test-set evaluations are not (nothing is kept for a backward pass there).  Per
kind of tensor the format adds up, in bits:

* ``fp32_bits``: 32 per value;
* ``sign_bits``: 1 per value, or 0 for a tensor whose quantized values all have a clear sign bit
  (the paper stores no sign for ReLU outputs).  The decision is made per tensor and per batch
  from the quantized bit patterns, as Gecko's ``sign_en`` needs it (R and BitWave's clamp store
  zeros as +0.0, so a ``-0.0`` input does not force a sign bit); in these models every
  activation is an image or a ReLU/max-pool output and needs no sign bit;
* ``mantissa_bits``: the integer mantissa bitlength in use per value (QM's sampled ``n_m``,
  BitWave's ``n_m``);
* ``exponent_bits``: the container's fixed exponent width per value: QE's sampled integer
  ``n_e``, counted as n_e bits as the paper counts it (the range of eqs. 13–14 holds
  2**n_e + 1 exponents), BitWave's :func:`~golden.gecko.schrodinger.bwe_exp_bits` ``(k)``;
* ``gecko_exponent_bits``: Gecko's exponent cost of the *quantized* tensor, replacing the fixed
  width: :attr:`~golden.gecko.codec.Footprint.exp_bits_lit`, the paper's accounting (3 metadata
  bits per row of 8 values plus 8 × the row's exponent width); ``gecko_exponent_bits_exact``
  is :attr:`~golden.gecko.codec.Footprint.exp_bits_exact`, the lossless code actually stored
  (one more bit per value for the side of the bias); ``gecko_stored_bits`` is
  :attr:`~golden.gecko.codec.Footprint.total_bits` of the whole Gecko stream (sign, exponent
  and mantissa fields in 32-bit lane words, plus metadata words);
* ``fp32_gecko_exponent_bits`` (and ``_exact``): Gecko's exponent cost of the *unquantized* FP32
  tensor, for the exponent compression ratio alone (the paper's 0.60 on weights, 0.38 on
  activations).

Values are streamed to Gecko in the tensor's C order, so a row of 8 is 8 consecutive values of
the GEMM operand, mostly within one of its rows: a weight matrix (K, M) along its output
channels, an activation along its features.  A convolution's activation is the im2col matrix
the engine stashes, in which every input value appears up to 9 times and the zero padding is
counted: the footprints are those of the GEMM operands, not of the feature maps.

:meth:`summary_record` gives the reductions versus FP32 over the whole run (the analogue of the
paper's Table I; larger is better), for the weights, the activations and in total::

    M     = 23 · values / mantissa_bits               (QM, BWM: the mantissa alone)
    E     =  8 · values / exponent_bits               (QE, BWE: the exponent alone)
    E+G   =  8 · values / gecko_exponent_bits
    M+E   = fp32_bits / (sign_bits + mantissa_bits + exponent_bits)
    M+E+G = fp32_bits / (sign_bits + mantissa_bits + gecko_exponent_bits)

A reduction whose denominator is 0 (every mantissa truncated to 0 bits, nothing stashed) is
None.
"""

import math
from pathlib import Path

import numpy as np

from golden.common import float_to_fp32, fp32_to_float
from golden.gecko.codec import GeckoConfig, footprint
from golden.gecko.schrodinger import (
    GAMMA, NE_MAX, BitWave, BitWaveConfig, bitwave_quantize, bwe_exp_bits, clip_bitlength,
    freeze_bitlength, qe_clamp, qe_grad, qm_grad, select_bits, tensor_weights,
    truncate_mantissa,
)

from .base import KINDS, Format, RunInfo

#: FP32's mantissa and exponent widths: the bitlengths' starting values and upper clips
MAN_MAX = 23
EXP_MAX = NE_MAX
#: epochs of learning (QM+QE) or of control (BitWave) before the bitlengths are fixed
LEARN_EPOCHS = 5
#: the paper's learning window on ResNet-18/ImageNet: 5 epochs of 5,005 mini-batches at lr 0.1
PAPER_WINDOW_STEPS = 5 * 5005
PAPER_LR = 0.1
#: the largest default bitlength learning rate: γ · 5 = half a bit per step at most
BIT_LR_MAX = 5.0
#: BitWave loss-history length N in these runs (see :class:`BitWaveFormat`)
BITWAVE_HISTORY = 8
#: BitWave dead-zone threshold T on the loss slope per batch (see :class:`BitWaveFormat`)
BITWAVE_THRESHOLD = 0.01
#: Gecko's exponent compression ratios in the paper, per kind of stashed tensor
PAPER_GECKO_EXPONENT_RATIO = {"weight": 0.60, "activation": 0.38}

# spawn key of the format's own random stream: independent of the engine's initialization and
# data-order streams drawn from the same run seed
_STREAM = 0x5C4D
# the unquantized tensors' exponent cost does not depend on the sign or mantissa fields
_RAW = GeckoConfig()

#: the stored bit counts per kind of tensor (see the module's footprint accounting)
BIT_FIELDS = ("values", "fp32_bits", "sign_bits", "mantissa_bits", "exponent_bits",
              "gecko_exponent_bits", "gecko_exponent_bits_exact", "gecko_stored_bits",
              "fp32_gecko_exponent_bits", "fp32_gecko_exponent_bits_exact")


class StashFormatError(ValueError):
    """A bad argument or call order of a Schrödinger's FP format; one line naming it."""


def learning_epochs(epochs: int) -> int:
    """Epochs during which the bitlengths learn (QM+QE) or follow the loss (BitWave).

    The paper learns for "a few" epochs (5 here, :data:`LEARN_EPOCHS`) and then fixes the
    bitlengths.  Short runs learn for the first half instead (at least one epoch), so at least
    half of every run of 2 or more epochs trains at the fixed widths:
    ``min(5, max(1, epochs // 2))`` — 5 for the engine's 12 epochs, 1 for a 2-epoch run.
    """
    if isinstance(epochs, bool) or not isinstance(epochs, (int, np.integer)) or epochs < 1:
        raise StashFormatError(f"epochs must be a positive integer, got {epochs!r}")
    return min(LEARN_EPOCHS, max(1, int(epochs) // 2))


def _ratio(num: float, den: float):
    return num / den if den else None


class _Ledger:
    """Bit counts of the stashed tensors, per kind, summed over the run."""

    def __init__(self):
        self.bits = {kind: dict.fromkeys(BIT_FIELDS, 0) for kind in KINDS}

    def add(self, kind: str, v: np.ndarray, q: np.ndarray, n_m: int, e_bits: int) -> None:
        """Count one stash: ``v`` the FP32 bit patterns stashed, ``q`` the quantized ones (1-D
        uint32), ``n_m`` mantissa bits per value, ``e_bits`` fixed exponent bits per value."""
        n = int(q.size)
        sign = bool((q >> np.uint32(31)).any())
        fq = footprint(q, GeckoConfig(man_width=int(n_m), sign_en=sign))
        fv = footprint(v, _RAW)
        b = self.bits[kind]
        b["values"] += n
        b["fp32_bits"] += 32 * n
        b["sign_bits"] += int(sign) * n
        b["mantissa_bits"] += int(n_m) * n
        b["exponent_bits"] += int(e_bits) * n
        b["gecko_exponent_bits"] += fq.exp_bits_lit
        b["gecko_exponent_bits_exact"] += fq.exp_bits_exact
        b["gecko_stored_bits"] += fq.total_bits
        b["fp32_gecko_exponent_bits"] += fv.exp_bits_lit
        b["fp32_gecko_exponent_bits_exact"] += fv.exp_bits_exact

    def totals(self) -> dict:
        """``{"weight": {...}, "activation": {...}, "total": {...}}`` of :data:`BIT_FIELDS`."""
        out = {kind: dict(self.bits[kind]) for kind in KINDS}
        out["total"] = {f: sum(self.bits[k][f] for k in KINDS) for f in BIT_FIELDS}
        return out

    def reductions(self, m: str, e: str) -> dict:
        """Reductions versus FP32 named with the mantissa / exponent labels ``m`` and ``e``."""
        t = self.totals()
        parts = ("weight", "activation", "total")

        def row(fn):
            return {p: fn(t[p]) for p in parts}

        return {
            "reductions": {
                m: row(lambda b: _ratio(MAN_MAX * b["values"], b["mantissa_bits"])),
                e: row(lambda b: _ratio(8 * b["values"], b["exponent_bits"])),
                f"{e}+G": row(lambda b: _ratio(8 * b["values"], b["gecko_exponent_bits"])),
                f"{m}+{e}": row(lambda b: _ratio(
                    b["fp32_bits"], b["sign_bits"] + b["mantissa_bits"] + b["exponent_bits"])),
                f"{m}+{e}+G": row(lambda b: _ratio(
                    b["fp32_bits"],
                    b["sign_bits"] + b["mantissa_bits"] + b["gecko_exponent_bits"])),
            },
            "reductions_exact": {
                f"{e}+G": row(lambda b: _ratio(8 * b["values"], b["gecko_exponent_bits_exact"])),
                f"{m}+{e}+G": row(lambda b: _ratio(
                    b["fp32_bits"],
                    b["sign_bits"] + b["mantissa_bits"] + b["gecko_exponent_bits_exact"])),
                "stored": row(lambda b: _ratio(b["fp32_bits"], b["gecko_stored_bits"])),
            },
            "gecko_exponent_ratio": row(
                lambda b: _ratio(b["fp32_gecko_exponent_bits"], 8 * b["values"])),
            "gecko_exponent_ratio_exact": row(
                lambda b: _ratio(b["fp32_gecko_exponent_bits_exact"], 8 * b["values"])),
            "bits": t,
        }


class _StashFormat(Format):
    """FP32 GEMMs on tensors quantized when stashed, with footprint accounting.

    Subclasses implement :meth:`_quantize`.  Stashes after :meth:`begin_step` are training
    stashes; those after :meth:`end_epoch` and before the next :meth:`begin_step` (the engine's
    test-set evaluation) quantize with the current widths but are not counted and draw no random
    numbers.  A tensor holding Inf or NaN (a diverging run; the golden transforms do
    not take them) is passed on unquantized and uncounted, so the engine sees the divergence.
    """

    def __init__(self, run: RunInfo):
        super().__init__(run)
        self.layers = tuple(info.name for info in run.layers)
        self.learn_epochs = learning_epochs(run.epochs)
        self.ledger = _Ledger()
        self.training = False
        self.log: list[dict] = []

    def _key(self, kind: str, layer: str) -> tuple[str, str]:
        if kind not in KINDS:
            raise StashFormatError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
        if layer not in self.layers:
            raise StashFormatError(f"unknown layer {layer!r} (layers: {', '.join(self.layers)})")
        return layer, kind

    def begin_step(self, epoch: int, iteration: int) -> None:
        super().begin_step(epoch, iteration)
        self.training = True

    def stash(self, x: np.ndarray, kind: str, layer: str) -> np.ndarray:
        """The values the forward pass uses and the backward pass reads: ``x`` quantized.

        Parameters
        ----------
        x : numpy.ndarray
            float32 tensor of any shape (a weight (K, M) or a GEMM input (N, K)).
        kind : {"weight", "activation"}
        layer : str
            A layer of the run.

        Returns
        -------
        numpy.ndarray
            float32, ``x``'s shape: the quantized values (``x`` itself if it holds Inf/NaN).
        """
        key = self._key(kind, layer)
        x32 = np.ascontiguousarray(x, dtype=np.float32)
        if not np.isfinite(x32).all():
            self._passthrough(key)
            return x
        v = float_to_fp32(x32).reshape(-1)
        q, n_m, e_bits = self._quantize(v, key)
        if self.training:
            self.ledger.add(kind, v, q, n_m, e_bits)
        return fp32_to_float(q).reshape(x32.shape)

    def _passthrough(self, key) -> None:
        pass

    def _quantize(self, v: np.ndarray, key) -> tuple[np.ndarray, int, int]:
        """(quantized bit patterns, mantissa bits, fixed exponent bits) of 1-D FP32 bits."""
        raise NotImplementedError

    def end_epoch(self, epoch: int) -> dict:
        self.training = False
        record = self._epoch_record(epoch)
        self.log.append(record)
        return record

    def _epoch_record(self, epoch: int) -> dict:
        raise NotImplementedError


    @classmethod
    def markdown(cls, result: dict) -> str:
        """The Table I analogue of the run and its bitlengths per epoch."""
        return stash_markdown(result) if result.get("format") else ""

    @classmethod
    def plot(cls, result: dict, folder) -> list:
        """``bitlengths-<name>.png``: the stashed bitlengths per epoch."""
        return stash_plot(cls.name, result, folder) if result.get("format") else []


class Schrodinger(_StashFormat):
    """Schrödinger's FP with Quantum Mantissa and Quantum Exponent (QM+QE).

    Per layer and kind (weight, activation) the format learns real bitlengths ``n_m`` in
    [0, 23] and ``n_e`` in [0, 8], starting at (23, 8).

    * :meth:`stash` (training): draws ``u_m`` and ``u_e`` for the tensor from the format's own
      generator (seeded by ``run.seed``, in the engine's stash order: per layer the weight,
      then the activation), sets ``k_m = select_bits(n_m, u_m)`` and
      ``k_e = select_bits(n_e, u_e)``, and returns ``P(R(x, k_e), k_m)``
      (``truncate_mantissa(qe_clamp(x, k_e), k_m)``).  At the test-set evaluation no draw is
      made: the bitlengths are rounded up, as at freezing.
    * :meth:`stash_grad`: ``g`` is ∂L/∂Q of the stashed tensor Q.  P is straight-through, so
      ``∂L/∂n_m = qm_grad(R(x), g, n_m, γ, λ_i)`` and
      ``(∂L/∂n_e, ∂L/∂x) = qe_grad(x, g, k_e, γ, λ_i)``; the returned gradient is that
      ``∂L/∂x = g · ∂R/∂x``: ``g`` with the values R saturated (``|x| ≥ Vmax``) zeroed, as the
      golden ``qe_grad`` gives it.  λ_i = ``tensor_weights`` of the sizes of all tensors
      stashed in the batch (2 per layer); γ = 0.1 for both bitlengths.
    * :meth:`end_step`: one plain SGD step ``n -= lr · ∂L/∂n`` on every bitlength (no momentum,
      no weight decay), then :func:`~golden.gecko.schrodinger.clip_bitlength` to [0, 23] /
      [0, 8].
    * :meth:`end_epoch`: after epoch :func:`learning_epochs` the bitlengths are rounded up
      (:func:`~golden.gecko.schrodinger.freeze_bitlength`) and fixed; from then on no draws are
      made and nothing is learned, but R and P still apply with the fixed widths (and the
      gradient is still masked where R saturates).

    Parameters
    ----------
    run : RunInfo
    bit_lr : float, optional
        The bitlengths' learning rate.  The paper learns them with the network's optimizer
        setting (ResNet-18 on ImageNet: lr 0.1 over 5 epochs of 5,005 mini-batches, so the
        regularizer alone can move a bitlength by up to 0.1 · γ · λ · 25,025 ≈ 250 λ bits in
        a learning window).  A digits run has 45 mini-batches per epoch, 550 times fewer, and
        with the model's own rate its bitlengths could move by well under one bit, which the
        round-up at freezing then undoes.  The default therefore scales the rate so that a
        learning window has the paper's reach, ``0.1 · PAPER_WINDOW_STEPS / (iterations ·
        learning_epochs(epochs))``, capped so that the regularizer moves a bitlength by at
        most half a bit per step (``γ · bit_lr ≤ 0.5``, :data:`BIT_LR_MAX` = 5): larger steps
        skip the stochastic rounding's fractional range and collapse a short run's bitlengths
        before the task gradient can hold them.  A 10-epoch digits run gets the cap, 5.
    gamma : float
        Regularizer strength γ (the paper: 0.1 "proved sufficient").
    """

    name = "schrodinger"
    cost = 7.0
    summary = ("Schrödinger's FP QM+QE: learned per-tensor mantissa/exponent bitlengths for "
               "stashed weights and activations; FP32 GEMMs")
    paper = ("Schrödinger's FP: SFP_Q (QM+QE) within 0.5 points of FP32; "
             "footprint 4.74x (QM+QE), 5.64x with Gecko (Table I geo-means)")
    #: the paper's figures (Table I; ResNet-18 row; Gecko's exponent ratios)
    PAPER = {
        "geomean": {"QM": 11.94, "QE": 2.126, "QE+G": 2.972, "QM+QE": 4.74, "QM+QE+G": 5.64},
        "resnet18": {"QM": 11.91, "QE": 2.322, "QE+G": 3.649, "QM+QE": 5.857,
                     "QM+QE+G": 7.599},
        "gecko_exponent_ratio": PAPER_GECKO_EXPONENT_RATIO,
        "accuracy": "within 0.5 points of FP32",
    }

    def __init__(self, run: RunInfo, bit_lr: float | None = None, gamma: float = GAMMA):
        super().__init__(run)
        if bit_lr is None:
            steps = max(1, run.iterations * learning_epochs(run.epochs))
            bit_lr = min(PAPER_LR * PAPER_WINDOW_STEPS / steps, BIT_LR_MAX)
        for what, val in (("bit_lr", bit_lr), ("gamma", gamma)):
            if isinstance(val, bool) or not isinstance(val, (int, float)) \
                    or not math.isfinite(val) or val < 0:
                raise StashFormatError(f"{what} must be a finite number >= 0, got {val!r}")
        self.bit_lr = float(bit_lr)
        self.gamma = float(gamma)
        self.rng = np.random.Generator(np.random.PCG64(
            np.random.SeedSequence(run.seed, spawn_key=(_STREAM,))))
        keys = [(layer, kind) for layer in self.layers for kind in KINDS]
        #: learned real bitlengths {(layer, kind): [n_m, n_e]}
        self.n = {k: [float(MAN_MAX), float(EXP_MAX)] for k in keys}
        self.frozen = False
        self._grad = {k: [0.0, 0.0] for k in keys}
        self._used = {k: [0, 0, 0] for k in keys}       # Σk_m, Σk_e, stashes this epoch
        self._saved: dict = {}
        self._passed: set = set()
        self._lam = None

    # --------------------------------------------------------------- batch

    def begin_step(self, epoch: int, iteration: int) -> None:
        super().begin_step(epoch, iteration)
        self._saved = {}
        self._passed = set()
        self._lam = None

    @property
    def learning(self) -> bool:
        """True while the bitlengths learn (a training batch before they are frozen)."""
        return self.training and not self.frozen

    def integer_bitlengths(self, layer: str, kind: str) -> tuple[int, int]:
        """The bitlengths rounded up: the fixed ones once frozen, the test-time ones before."""
        n_m, n_e = self.n[self._key(kind, layer)]
        return freeze_bitlength(n_m), freeze_bitlength(n_e)

    def _passthrough(self, key) -> None:
        self._saved.pop(key, None)
        self._passed.add(key)

    def _quantize(self, v, key):
        if self.learning:
            u_m, u_e = self.rng.random(2)
            k_m, k_e = select_bits(self.n[key][0], u_m), select_bits(self.n[key][1], u_e)
        else:
            k_m, k_e = self.integer_bitlengths(*key)
        r = qe_clamp(v, k_e)
        q = truncate_mantissa(r, k_m)
        if self.training:
            self._saved[key] = (v, r, k_m, k_e)
            u = self._used[key]
            u[0] += k_m
            u[1] += k_e
            u[2] += 1
        return q, k_m, k_e

    def stash_grad(self, g: np.ndarray, kind: str, layer: str) -> np.ndarray:
        """∂L/∂x of the tensor given to :meth:`stash`, from ``g`` = ∂L/∂(stashed values).

        Accumulates the bitlengths' gradients while they learn.  Returns float32 of ``g``'s
        shape (``g`` itself after a pass-through stash).
        """
        key = self._key(kind, layer)
        if key in self._passed:
            return g
        if key not in self._saved:
            raise StashFormatError(f"stash_grad of {layer} {kind} without its stash in this "
                                   "training batch")
        v, r, k_m, k_e = self._saved[key]
        if g.size != v.size:
            raise StashFormatError(f"gradient of {layer} {kind} has {g.size} values, the "
                                   f"stashed tensor {v.size}")
        gv = np.ascontiguousarray(g, dtype=np.float32).reshape(-1)
        lam = self._lambda(key)
        dn_e, dx = qe_grad(v, gv, k_e, self.gamma, lam)
        if not self.frozen:
            dn_m = qm_grad(r, gv, self.n[key][0], self.gamma, lam)
            acc = self._grad[key]
            acc[0] += dn_m
            acc[1] += dn_e
        return dx.astype(np.float32).reshape(g.shape)

    def _lambda(self, key) -> float:
        if self._lam is None:
            keys = list(self._saved)
            lam = tensor_weights([self._saved[k][0].size for k in keys])
            self._lam = dict(zip(keys, (float(x) for x in lam)))
        return self._lam[key]

    def end_step(self, loss: float) -> None:
        """One SGD step on the bitlengths of the batch, clipped to [0, 23] / [0, 8]."""
        if self.learning:
            for key, acc in self._grad.items():
                n = self.n[key]
                n[0] = clip_bitlength(n[0] - self.bit_lr * acc[0], MAN_MAX)
                n[1] = clip_bitlength(n[1] - self.bit_lr * acc[1], EXP_MAX)
                acc[0] = acc[1] = 0.0
        self._saved = {}

    # --------------------------------------------------------------- epoch

    def _epoch_record(self, epoch: int) -> dict:
        learned = not self.frozen
        tensors: dict = {layer: {} for layer in self.layers}
        for key, (n_m, n_e) in self.n.items():
            s_m, s_e, count = self._used[key]
            tensors[key[0]][key[1]] = {
                "n_m": n_m, "n_e": n_e,
                "n_m_int": freeze_bitlength(n_m), "n_e_int": freeze_bitlength(n_e),
                "n_m_used": s_m / count if count else None,
                "n_e_used": s_e / count if count else None,
            }
            self._used[key] = [0, 0, 0]
        if learned and epoch >= self.learn_epochs:
            for n in self.n.values():
                n[0], n[1] = float(freeze_bitlength(n[0])), float(freeze_bitlength(n[1]))
            self.frozen = True
        return {"epoch": epoch, "learning": learned, "frozen": self.frozen, "tensors": tensors}

    def summary_record(self) -> dict:
        """Whole-run footprint (Table I analogue), bitlength log and the paper's figures.

        Returns
        -------
        dict
            ``reductions`` {"QM", "QE", "QE+G", "QM+QE", "QM+QE+G"} and ``reductions_exact``
            {"QE+G", "QM+QE+G", "stored"}, each ``{"weight", "activation", "total"}``;
            ``gecko_exponent_ratio`` (and ``_exact``) of the unquantized tensors; ``bits``: the
            raw counts of :data:`BIT_FIELDS` per kind and in total; ``bitlengths``: the
            per-epoch records; ``settings``; ``paper``.
        """
        out = self.ledger.reductions("QM", "QE")
        out["bitlengths"] = list(self.log)
        out["settings"] = {"bit_lr": self.bit_lr, "gamma": self.gamma,
                           "learn_epochs": self.learn_epochs}
        out["paper"] = self.PAPER
        return out


class BitWaveFormat(_StashFormat):
    """BitWave: one network-wide mantissa bitlength and exponent range set by the loss (BWM+BWE).

    The golden :class:`~golden.gecko.schrodinger.BitWave` controller starts at ``n_m = 23`` and
    the full exponent range (``k = 0``); :meth:`end_step` feeds it every training batch's loss,
    and when the least-squares slope of the last N losses is below -T it removes a mantissa bit
    and shrinks the exponent range by one value at each end (above +T: the reverse).  After
    epoch :func:`learning_epochs` it fixes ``n_m`` = ceil and ``k`` = floor of their averages
    over the batches.  :meth:`stash` returns ``bitwave_quantize(x, n_m, k)`` for every tensor,
    weights and activations alike; the gradient passes straight through (the golden model
    defines no derivative of BitWave's clamp and truncation, and BitWave learns nothing from
    gradients).

    The paper gives no N or T.  On the digits data set (45 batches of 32 per epoch) the FP32
    ``cnn``'s batch loss falls from about 2.5 to 0.3 in the first epoch and then fluctuates;
    the least-squares slope over N = 8 batches (:data:`BITWAVE_HISTORY`) averages -0.057 per
    batch in the first epoch, with a spread of about 0.02 in the second epoch and under 0.01
    from the third.  T = 0.01 (:data:`BITWAVE_THRESHOLD`) lets the first epoch's descent
    shrink the container and a rising loss grow it back, while the noise of a converging run
    mostly stays in the dead zone.  The steps stay the controller's defaults, one mantissa bit
    and one exponent value per range end per batch.  In 5 x 45 controller steps the range
    shrink k would have to grow in 64 more batches than it falls back to save one exponent bit
    (``bwe_exp_bits(k) = 8`` for k < 64), so in these runs BWE keeps 8 exponent bits and only
    Gecko shrinks the exponent.

    Parameters
    ----------
    run : RunInfo
    history, threshold, step_m, step_k
        :class:`~golden.gecko.schrodinger.BitWaveConfig` fields (N, T, the steps).
    """

    name = "bitwave"
    cost = 4.0
    summary = ("BitWave: one network-wide mantissa bitlength and exponent range for stashed "
               "weights and activations, set by the loss slope; FP32 GEMMs")
    paper = ("Schrödinger's FP: BitWave within 0.1 points of FP32; footprint 3.19x "
             "(BWM+BWE), 4.56x with Gecko (Table I geo-means)")
    PAPER = {
        "geomean": {"BWM": 7.556, "BWE": 1.228, "BWE+G": 2.492, "BWM+BWE": 3.19,
                    "BWM+BWE+G": 4.56},
        "resnet18": {"BWM": 6.961, "BWE": 1.193, "BWE+G": 3.235, "BWM+BWE": 3.197,
                     "BWM+BWE+G": 5.539},
        "gecko_exponent_ratio": PAPER_GECKO_EXPONENT_RATIO,
        "accuracy": "within 0.1 points of FP32",
    }

    def __init__(self, run: RunInfo, history: int = BITWAVE_HISTORY,
                 threshold: float = BITWAVE_THRESHOLD, step_m: int = 1, step_k: int = 1):
        super().__init__(run)
        self.controller = BitWave(BitWaveConfig(
            history=history, threshold=threshold, fmt="fp32", step_m=step_m, step_k=step_k,
            fix_epoch=self.learn_epochs))
        self._sums = [0, 0, 0, 0]                       # Σn_m, Σk, Σexp bits, batches

    def _quantize(self, v, key):
        c = self.controller
        return bitwave_quantize(v, c.n_m, c.k), c.n_m, bwe_exp_bits(c.k)

    def stash_grad(self, g: np.ndarray, kind: str, layer: str) -> np.ndarray:
        self._key(kind, layer)
        return g

    def end_step(self, loss: float) -> None:
        """Feed the batch's loss to the controller (values in effect for the batch logged)."""
        if not self.training:
            return
        c = self.controller
        s = self._sums
        s[0] += c.n_m
        s[1] += c.k
        s[2] += c.exp_bits
        s[3] += 1
        c.step(loss)

    def _epoch_record(self, epoch: int) -> dict:
        c = self.controller
        learned = not c.fixed
        b = self._sums[3]
        rec = {"epoch": epoch, "learning": learned,
               "n_m_mean": self._sums[0] / b if b else None,
               "k_mean": self._sums[1] / b if b else None,
               "exp_bits_mean": self._sums[2] / b if b else None}
        self._sums = [0, 0, 0, 0]
        c.end_epoch()
        lo, hi = c.exp_range
        rec.update({"fixed": c.fixed, "n_m": c.n_m, "k": c.k, "exp_range": [lo, hi],
                    "exp_bits": c.exp_bits})
        return rec

    def summary_record(self) -> dict:
        """As :meth:`Schrodinger.summary_record`, with rows "BWM", "BWE", "BWE+G", "BWM+BWE",
        "BWM+BWE+G"; ``bitlengths`` holds the per-epoch mean bitlengths."""
        out = self.ledger.reductions("BWM", "BWE")
        out["bitlengths"] = list(self.log)
        cfg = self.controller.cfg
        out["settings"] = {"history": cfg.history, "threshold": cfg.threshold,
                           "step_m": cfg.step_m, "step_k": cfg.step_k,
                           "fix_epoch": cfg.fix_epoch}
        out["paper"] = self.PAPER
        return out


#: format name → class

# --- train.md section and plot (both formats)


def stash_markdown(r: dict) -> str:
    """Schrödinger's FP / BitWave: the Table I analogue and the bitlengths per epoch."""
    rec = r["format"]
    red, paper = rec.get("reductions", {}), rec.get("paper", {})
    ref = paper.get("resnet18", {})
    geo = paper.get("geomean", {})
    lines = ["Stash footprint over the run, as a reduction against FP32 (Table I's columns: "
             "single-method columns count only their field, against 23 mantissa or 8 exponent "
             "bits; two-method columns count whole values against 32 bits; +G codes the exponents "
             "with Gecko):", "",
             "| column | weights | activations | total | paper ResNet-18 | paper geo-mean |",
             "|---|---|---|---|---|---|"]
    for col, v in red.items():
        if not isinstance(v, dict) or "total" not in v:
            continue
        lines.append(f"| {col} | {v['weight']:.2f}× | {v['activation']:.2f}× | "
                     f"{v['total']:.2f}× | {_x(ref.get(col))} | {_x(geo.get(col))} |")
    single = [(c, v) for c, v in red.items() if isinstance(v, dict) and "total" in v
              and "+" not in c]
    m_col = next((c for c, _ in single if c in ("QM", "BWM")), None)
    e_col = next((c for c, _ in single if c in ("QE", "BWE")), None)
    if m_col and e_col:
        # a single-method reduction is 23 (or 8) bits over the mean bits stored per value
        def bits(full, v):
            return "—" if not v else f"{full / v:.2f}"

        lines += ["", "Mean bits stored per value, from the single-method columns (23 / "
                  f"{m_col}, 8 / {e_col}):", "",
                  "| field | weights | activations | total | paper ResNet-18 | paper geo-mean |",
                  "|---|---|---|---|---|---|"]
        for col, full, what in ((m_col, 23, "mantissa"), (e_col, 8, "exponent")):
            v = red[col]
            lines.append(f"| {what} | {bits(full, v['weight'])} | "
                         f"{bits(full, v['activation'])} | {bits(full, v['total'])} | "
                         f"{bits(full, ref.get(col))} | {bits(full, geo.get(col))} |")
    ratio = rec.get("gecko_exponent_ratio")
    pr = paper.get("gecko_exponent_ratio", {})
    if ratio:
        lines += ["", f"Gecko's exponent ratio on the FP32 stashed tensors (coded exponent bits "
                  f"/ 8): weights {ratio['weight']:.2f} (paper {pr.get('weight', '—')}), "
                  f"activations {ratio['activation']:.2f} (paper {pr.get('activation', '—')})."]
    logs = rec.get("bitlengths", [])
    if logs and "tensors" in logs[0]:
        names = [(layer, kind) for layer, kinds in logs[0]["tensors"].items() for kind in kinds]
        lines += ["", "Bitlengths in use per epoch (mantissa / exponent, integer after "
                  "freezing):", "",
                  "| epoch | " + " | ".join(f"{layer} {kind[0]}" for layer, kind in names) + " |",
                  "|---|" + "---|" * len(names)]
        for log in logs:
            cells = []
            for layer, kind in names:
                t = log["tensors"][layer][kind]
                cells.append(f"{t['n_m_used']:.1f} / {t['n_e_used']:.1f}")
            lines.append(f"| {log['epoch']} | " + " | ".join(cells) + " |")
    elif logs:
        lines += ["", "| epoch | mean mantissa bits | mean exponent bits | fixed |",
                  "|---|---|---|---|"]
        for log in logs:
            lines.append(f"| {log['epoch']} | {log['n_m_mean']:.2f} | "
                         f"{log['exp_bits_mean']:.2f} | {'yes' if log.get('fixed') else 'no'} |")
    return "\n".join(lines)


def _x(v) -> str:
    return "—" if v is None else f"{v:g}×"


def stash_plot(name: str, r: dict, work) -> list:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    logs = r["format"].get("bitlengths", [])
    if not logs:
        return []
    fig, (am, ae) = plt.subplots(1, 2, figsize=(10, 4))
    xs = [log["epoch"] for log in logs]
    if "tensors" in logs[0]:
        for layer, kinds in logs[0]["tensors"].items():
            for kind in kinds:
                am.plot(xs, [log["tensors"][layer][kind]["n_m_used"] for log in logs],
                        marker=".", label=f"{layer} {kind}")
                ae.plot(xs, [log["tensors"][layer][kind]["n_e_used"] for log in logs],
                        marker=".", label=f"{layer} {kind}")
    else:
        am.plot(xs, [log["n_m_mean"] for log in logs], marker=".", label="network")
        ae.plot(xs, [log["exp_bits_mean"] for log in logs], marker=".", label="network")
    for ax, what in ((am, "mantissa bits"), (ae, "exponent bits")):
        ax.set_xlabel("epoch")
        ax.set_ylabel(what)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"{name}: stashed bitlengths per epoch", fontsize=10)
    fig.tight_layout()
    fig.savefig(Path(work) / f"bitlengths-{name}.png", dpi=110)
    plt.close(fig)
    return [f"bitlengths-{name}.png"]

FORMATS = {"schrodinger": Schrodinger, "bitwave": BitWaveFormat}

__all__ = ["FORMATS", "BIT_FIELDS", "BITWAVE_HISTORY", "BITWAVE_THRESHOLD", "LEARN_EPOCHS",
           "BitWaveFormat", "Schrodinger", "StashFormatError", "learning_epochs"]

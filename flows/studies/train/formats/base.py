"""The numerics interface of the training engine: one class per number format.

The engine (:mod:`flows.studies.train.engine`) sends every GEMM of the three training phases
through :meth:`Format.matmul` and every tensor it keeps between passes through the storage hooks,
so that a number format is one subclass of :class:`Format`.  The base class is FP32: NumPy's
float32 GEMM and tensors kept as they are.

GEMM phases, named as FAST names its dataflows (the same names are used in files, JSON and
tables)::

    fwd       Y  = A  @ W       x = A  (N, K) activations,   y = W  (K, M) weights
    bwd_data  GA = G  @ W.T     x = G  (N, M) gradients,     y = W.T (M, K) weights
    wgrad     GW = A.T @ G      x = A.T (K, N) activations,  y = G  (N, M) gradients

A convolution is one GEMM on its im2col matrix (rows = batch x output positions, columns =
input channels x kernel positions), so it is called with the same three phases.

Storage hooks, in the order the engine calls them in one iteration (one mini-batch):

1. :meth:`begin_step` (epoch, iteration);
2. forward, per layer with weights: ``w_used = stash(w, "weight", layer)`` and
   ``a_used = stash(a, "activation", layer)``: the values the forward GEMM uses and the
   backward pass reads (Schrödinger's FP quantizes both here; "quantized values are saved and
   used in the backward pass"); then ``matmul(a_used, w_used, "fwd", layer)``;
3. backward, per layer: ``matmul(g, w_used.T, "bwd_data", layer)`` and
   ``matmul(a_used.T, g, "wgrad", layer)``, then ``stash_grad(g_w, "weight", layer)`` and
   ``stash_grad(g_a, "activation", layer)``, which turn the gradient with respect to the stashed
   tensor into the gradient passed on to the original one (and let a format learn from it);
4. the optimizer step, then ``w = store_weight(w, layer)`` (the master weights as the format
   keeps them: HBFP's wide BFP weight storage);
5. :meth:`end_step` with the mini-batch's loss;
6. after the last mini-batch of an epoch, :meth:`end_epoch` returns the format's per-epoch
   record (bitlengths, chosen widths), which goes into ``train.json``.

All arrays are float32.  A format must be deterministic given its ``seed``.
"""

from dataclasses import dataclass

import numpy as np

#: the three GEMM phases of a training iteration
PHASES = ("fwd", "bwd_data", "wgrad")
#: the kinds of stashed tensor
KINDS = ("weight", "activation")


@dataclass(frozen=True)
class LayerInfo:
    """A layer with weights, as a format sees it."""

    #: unique name (``conv1``, ``fc2``, …), used in every record
    name: str
    #: ``linear`` or ``conv``
    kind: str
    #: the weight matrix's shape as the GEMM sees it, (K, M)
    weight_shape: tuple[int, int]


@dataclass(frozen=True)
class RunInfo:
    """What a format may know about the run before it starts."""

    layers: tuple[LayerInfo, ...]
    epochs: int
    #: mini-batches per epoch
    iterations: int
    seed: int


class Format:
    """FP32 training: NumPy float32 GEMMs, tensors kept as they are.

    Subclasses override :meth:`matmul` and whichever hooks their format needs.
    """

    #: the name used on the command line, in files and in tables
    name = "fp32"
    #: one line: what the format is
    summary = "IEEE FP32 operands and accumulation (the reference)"
    #: the paper's accuracy claim for this format, shown beside the measured one in train.md
    paper = "reference"
    #: a training step's time against fp32's (measured on ``lenet``, one thread): only a hint
    #: for the order in which ``trainfab train -j N`` starts formats, the slowest first
    cost = 1.0

    def __init__(self, run: RunInfo):
        self.run = run
        self.epoch = 0
        self.iteration = 0

    def begin_step(self, epoch: int, iteration: int) -> None:
        self.epoch, self.iteration = epoch, iteration

    def matmul(self, x: np.ndarray, y: np.ndarray, phase: str, layer: str) -> np.ndarray:
        return np.matmul(x, y, dtype=np.float32)

    def stash(self, x: np.ndarray, kind: str, layer: str) -> np.ndarray:
        return x

    def stash_grad(self, g: np.ndarray, kind: str, layer: str) -> np.ndarray:
        return g

    def store_weight(self, w: np.ndarray, layer: str) -> np.ndarray:
        return w

    def end_step(self, loss: float) -> None:
        pass

    def end_epoch(self, epoch: int) -> dict:
        return {}

    def summary_record(self) -> dict:
        """Whole-run extras for ``train.json`` (footprint tables, width maps)."""
        return {}

    @classmethod
    def markdown(cls, result: dict) -> str:
        """The format's own section of ``train.md`` from its run's result (``train.json``'s
        entry: ``epochs`` and the ``format`` summary record); empty for none."""
        return ""

    @classmethod
    def plot(cls, result: dict, folder) -> list:
        """Draw the format's own plots into ``folder``; returns the file names written."""
        return []


__all__ = ["PHASES", "KINDS", "LayerInfo", "RunInfo", "Format"]

"""FPRaker training: bfloat16 operands, every dot product accumulated as the FPRaker tile does.

Each GEMM of the three training phases runs on the bit-level FPRaker tile model,
:func:`golden.fpraker.gemm.tile_gemm`, with the paper's tile (the
:class:`~golden.fpraker.tile.TileConfig` defaults: 8 x 8 PEs of 8 lanes, canonical-signed-digit
terms, the exponent computed once per group of 8 products, a 1.9 accumulator with 12 datapath
fraction bits, out-of-bounds term skipping with ``kmax = 12``, shift window ``dmax = 3``,
truncating bfloat16 read-out), on its compiled (numba) engine.  The operands are rounded to bfloat16 first
(round to nearest, ties to even, :func:`golden.common.float_to_bf16`); the tile's bfloat16
results are widened to float32.  Everything outside the GEMMs is the engine's FP32.

Which operand is term-serial
----------------------------
The tile streams one operand's significands term by term (the serial operand ``S``, the
tile's A) against the other's (the parallel operand ``P``, the tile's B).  The paper chooses per
layer; here the rule is fixed: **the left operand ``x`` of** :meth:`FPRaker.matmul` **is serial in
every phase** — the activations in ``fwd`` (``A @ W``), the output gradients in ``bwd_data``
(``G @ W.T``) and the activations in ``wgrad`` (``A.T @ G``); weights are never serial.  The
choice changes the numbers, not only the cycles: out-of-bounds skipping drops the serial
operand's terms that fall too far below the running accumulator, and which terms those are
depends on which operand is decomposed.

Cycle accounting
----------------
Every :class:`~golden.fpraker.tile.GemmResult` carries the cycles of one tile doing the GEMM's
tile runs one after another and its multiply-accumulates.  The format sums them per phase over
the GEMMs of training iterations (between ``begin_step`` and ``end_step``); the forward passes
of the engine's test-set evaluation are run on the tile too but not counted.
"""

import numpy as np

from golden.common import bf16_to_float, float_to_bf16
from golden.fpraker.gemm import tile_gemm
from golden.fpraker.tile import TileConfig

from .base import PHASES, Format

#: the tile every GEMM runs on (the paper's configuration)
TILE = TileConfig()
#: the tile model's engine: the compiled copy, bit and cycle exact with the NumPy model
ENGINE = "numba"

_BF16_EXP = 0x7F80


def fpraker_gemm(x: np.ndarray, y: np.ndarray, cfg: TileConfig = TILE):
    """``x @ y`` on the FPRaker tile model with ``x`` the serial operand.

    Parameters
    ----------
    x : numpy.ndarray
        (N, K) float32, rounded to bfloat16 (RNE) and streamed term-serially.
    y : numpy.ndarray
        (K, M) float32, rounded to bfloat16 (RNE); its columns are the parallel operand.
    cfg : TileConfig
        The tile.

    Returns
    -------
    out : numpy.ndarray
        (N, M) float32: the tile's bfloat16 results widened, or all NaN when a rounded operand
        is not finite (the tile model rejects Inf/NaN; a diverging run then shows its
        divergence in the loss instead of stopping on the error).
    result : golden.fpraker.tile.GemmResult or None
        The tile model's result (``out`` there is ``(M, N)``: ``out[m, n] = y[:, m] . x[n]``),
        None for non-finite operands.
    """
    s = float_to_bf16(np.asarray(x, dtype=np.float32))
    p = float_to_bf16(np.asarray(y, dtype=np.float32).T)
    if ((s & _BF16_EXP) == _BF16_EXP).any() or ((p & _BF16_EXP) == _BF16_EXP).any():
        return np.full((s.shape[0], p.shape[0]), np.nan, dtype=np.float32), None
    res = tile_gemm(s, p, cfg, engine=ENGINE)
    return np.ascontiguousarray(bf16_to_float(res.out).T), res


class FPRaker(Format):
    """bfloat16 operands; each GEMM on the FPRaker tile with the left operand term-serial.

    :meth:`summary_record` returns ``{"cycles": {phase: int}, "macs": {phase: int}}``: tile
    cycles and multiply-accumulates summed over the run's training GEMMs; :meth:`end_epoch`
    returns the same two dicts for the epoch.
    """

    name = "fpraker"
    cost = 75.0
    summary = ("bfloat16 operands (RNE), dot products on the FPRaker tile (term-serial left "
               "operand, 1.9 accumulator, out-of-bounds skipping)")
    paper = ("FPRaker (MICRO'21): trains to the same accuracy as bfloat16 "
             "(no accuracy loss; the accumulator keeps enough precision)")

    def __init__(self, run):
        super().__init__(run)
        self._training = False
        self._cycles = dict.fromkeys(PHASES, 0)
        self._macs = dict.fromkeys(PHASES, 0)
        self._epoch_cycles = dict.fromkeys(PHASES, 0)
        self._epoch_macs = dict.fromkeys(PHASES, 0)

    def begin_step(self, epoch: int, iteration: int) -> None:
        super().begin_step(epoch, iteration)
        self._training = True

    def end_step(self, loss: float) -> None:
        self._training = False

    def matmul(self, x: np.ndarray, y: np.ndarray, phase: str, layer: str) -> np.ndarray:
        out, res = fpraker_gemm(x, y)
        if self._training and res is not None:
            self._epoch_cycles[phase] += res.cycles
            self._epoch_macs[phase] += res.macs
        return out

    def end_epoch(self, epoch: int) -> dict:
        rec = {"cycles": dict(self._epoch_cycles), "macs": dict(self._epoch_macs)}
        for p in PHASES:
            self._cycles[p] += self._epoch_cycles[p]
            self._macs[p] += self._epoch_macs[p]
        self._epoch_cycles = dict.fromkeys(PHASES, 0)
        self._epoch_macs = dict.fromkeys(PHASES, 0)
        return rec

    def summary_record(self) -> dict:
        # an epoch cut short by divergence never reaches end_epoch: count its GEMMs too
        return {"cycles": {p: int(self._cycles[p] + self._epoch_cycles[p]) for p in PHASES},
                "macs": {p: int(self._macs[p] + self._epoch_macs[p]) for p in PHASES}}

    @classmethod
    def markdown(cls, result: dict) -> str:
        """One tile's cycles per phase over the run's training GEMMs."""
        rec = result["format"]
        cycles, macs = rec.get("cycles", {}), rec.get("macs", {})
        if not cycles:
            return ""
        lines = ["One FPRaker tile's cycles for every GEMM of the run (the numerics' by-product; "
                 "`trainfab speedup` on a capture gives the iso-area comparison):", "",
                 "| phase | MACs | tile cycles | MACs per cycle |", "|---|---|---|---|"]
        for phase, c in cycles.items():
            m = macs.get(phase, 0)
            lines.append(f"| {phase} | {m:,} | {c:,} | {m / c if c else 0:.1f} |")
        return "\n".join(lines)


#: format name → class
FORMATS = {"fpraker": FPRaker}

__all__ = ["FORMATS", "FPRaker", "fpraker_gemm", "TILE", "ENGINE"]

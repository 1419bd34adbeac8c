"""The bit-parallel formats of FAST's Table II, trained on the golden arithmetic of the Table IV
MAC lanes (:mod:`golden.baseline.gemm`): ``int8``, ``int12``, ``hfp8`` and ``fp16`` (NVIDIA
mixed precision).

Every GEMM of the three phases quantizes its two operands, one scale per tensor, multiplies them
on the lanes and undoes the scales:

``int8``, ``int12``
    Each operand symmetric with one float64 scale per tensor, ``s = max|x| / (2**(b-1) - 1)``,
    rounded to nearest (:func:`~golden.baseline.gemm.int_quantize`); exact products accumulated
    in a 32-bit two's complement register that wraps (:func:`~golden.baseline.gemm.int_gemm`;
    the record counts the outputs that wrapped); the result is ``float32(acc * (s_x * s_y))``,
    computed in float64.
``hfp8``
    Sun et al.'s hybrid FP8, as the FAST paper describes it: 1-4-3 (``e4m3``) for weights and
    activations, 1-5-2 (``e5m2``) for the gradients of the backward pass.  Each operand gets a
    power-of-two scale per tensor (:func:`~golden.baseline.gemm.float_quantize`), products are
    exact in FP32 and accumulated in FP32 in reduction order
    (:func:`~golden.baseline.gemm.float_gemm`), and the result is multiplied by the inverse
    powers of two in float64 and rounded to float32.  FAST's Table IV prices an ``e4m2`` MAC,
    narrower than both HFP8 formats; the ablation ``hfp8-e4m2`` trains on that one everywhere.
``fp16``
    NVIDIA mixed precision: fp16 operands, the same per-tensor power-of-two scale (for the
    gradients it is an ideal loss scale, one per tensor, that never overflows), FP32
    accumulation in reduction order.

All formats keep FP32 master weights and everything outside the GEMMs in FP32, as the papers'
mixed-precision baselines do.  Which operand is a gradient: X in ``bwd_data`` (``G``), Y in
``wgrad`` (``G``).

Per epoch the record gives, per phase, the share of non-zero operand values that the
quantization flushed to zero (``flushed``), and for the integer formats the share of outputs whose
exact sum left the 32-bit range (``wrapped``).

Non-finite operands: a diverging run's GEMM with a non-finite operand returns all NaN, so that
the engine reports the divergence.
"""

import numpy as np

from golden.baseline.gemm import float_gemm, float_quantize, int_gemm, int_quantize
from golden.common.formats import format_named

from .base import PHASES, Format, RunInfo


def _flushed(x: np.ndarray, bits: np.ndarray, width: int) -> tuple[int, int]:
    """Non-zero values of ``x`` and how many of them became a (signed) zero pattern."""
    nonzero = x != 0
    zero = (bits & ((1 << (width - 1)) - 1)) == 0 if width else bits == 0
    return int(nonzero.sum()), int((nonzero & zero).sum())


class LaneFormat(Format):
    """A Table II format on the MAC lanes (module docstring).  Subclasses set :attr:`operand`
    (weights and activations) and :attr:`gradient` (format names)."""

    operand = "int8"
    gradient = "int8"

    def __init__(self, run: RunInfo):
        super().__init__(run)
        self.training = False
        self._new_epoch()

    def _new_epoch(self):
        self._ep = {p: {"values": 0, "flushed": 0, "outputs": 0, "wrapped": 0} for p in PHASES}

    def begin_step(self, epoch: int, iteration: int) -> None:
        super().begin_step(epoch, iteration)
        self.training = True

    def formats(self, phase: str) -> tuple[str, str]:
        """The formats of X and Y in ``phase``."""
        if phase not in PHASES:
            raise ValueError(f"{self.name}: unknown GEMM phase '{phase}' "
                             f"(known: {', '.join(PHASES)})")
        return (self.gradient if phase == "bwd_data" else self.operand,
                self.gradient if phase == "wgrad" else self.operand)

    def matmul(self, x: np.ndarray, y: np.ndarray, phase: str, layer: str) -> np.ndarray:
        fx, fy = (format_named(f) for f in self.formats(phase))
        x = np.asarray(x, dtype=np.float32)
        y = np.asarray(y, dtype=np.float32)
        if not (np.isfinite(x).all() and np.isfinite(y).all()):
            return np.full((x.shape[0], y.shape[1]), np.nan, dtype=np.float32)
        ep = self._ep[phase]
        if fx.kind == "int":
            xb, sx = int_quantize(x, fx)
            yb, sy = int_quantize(y, fy)
            acc, wrapped = int_gemm(xb, yb, fx)
            out = (acc.astype(np.float64) * (sx * sy)).astype(np.float32)
            widths = (0, 0)
        else:
            xb, ex = float_quantize(x, fx)
            yb, ey = float_quantize(y, fy)
            bits = float_gemm(xb, fx, yb, fy)
            out = (bits.view(np.float32).astype(np.float64) * 2.0 ** -(ex + ey)
                   ).astype(np.float32)
            wrapped = 0
            widths = (fx.width, fy.width)
        if self.training:
            for v, b, w in ((x, xb, widths[0]), (y, yb, widths[1])):
                n, z = _flushed(v, b, w)
                ep["values"] += n
                ep["flushed"] += z
            ep["outputs"] += out.size
            ep["wrapped"] += wrapped
        return out

    def end_epoch(self, epoch: int) -> dict:
        """Per phase, the share of non-zero operand values flushed to zero and (integer
        formats) the share of outputs that wrapped, over the epoch's training GEMMs.

        Returns
        -------
        dict
            ``{"flushed": {phase: share}, "wrapped": {phase: share}}`` (``None`` for a phase
            with no GEMM).
        """
        rec = {"flushed": {p: (e["flushed"] / e["values"] if e["values"] else None)
                           for p, e in self._ep.items()},
               "wrapped": {p: (e["wrapped"] / e["outputs"] if e["outputs"] else None)
                           for p, e in self._ep.items()}}
        self.training = False
        self._new_epoch()
        return rec

    def summary_record(self) -> dict:
        return {"operand": self.operand, "gradient": self.gradient}

    @classmethod
    def markdown(cls, result: dict) -> str:
        """Per epoch, the share of operand values flushed to zero per phase (and wrapped
        outputs for the integer formats)."""
        epochs = result.get("epochs") or []
        if not epochs or "flushed" not in (epochs[0].get("format") or {}):
            return ""
        ints = format_named(cls.operand).kind == "int"
        head = "| epoch | " + " | ".join(f"flushed {p}" for p in PHASES)
        head += (" | " + " | ".join(f"wrapped {p}" for p in PHASES)) if ints else ""
        lines = [f"Operands: {cls.operand} (weights, activations), {cls.gradient} "
                 "(gradients); share of non-zero operand values flushed to zero by the "
                 "quantization" + (", and of outputs whose sum wrapped the 32-bit accumulator"
                                   if ints else "") + ".", "", head + " |",
                 "|---" * (1 + len(PHASES) * (2 if ints else 1)) + "|"]

        def pct(v):
            return "—" if v is None else f"{100 * v:.2f} %"

        for i, ep in enumerate(epochs, start=1):
            rec = ep.get("format") or {}
            cells = [pct(rec["flushed"].get(p)) for p in PHASES]
            if ints:
                cells += [pct(rec["wrapped"].get(p)) for p in PHASES]
            lines.append(f"| {i} | " + " | ".join(cells) + " |")
        return "\n".join(lines)


class INT8(LaneFormat):
    name = "int8"
    cost = 2.0
    summary = ("INT8: one symmetric scale per tensor, round to nearest, 32-bit wrapping "
               "integer accumulation; FP32 master weights")
    paper = "FAST Table II: INT8 loses 2.3 to 5.2 points against FP32 (ResNet-18 65.53 vs 68.60)"
    operand = gradient = "int8"


class INT12(LaneFormat):
    name = "int12"
    cost = 2.0
    summary = ("INT12: one symmetric scale per tensor, round to nearest, 32-bit wrapping "
               "integer accumulation; FP32 master weights")
    paper = "FAST Table II: INT12 within 0.5 points of FP32 (ResNet-18 68.51 vs 68.60)"
    operand = gradient = "int12"


class HFP8(LaneFormat):
    name = "hfp8"
    cost = 4.0
    summary = ("HFP8: e4m3 weights and activations, e5m2 gradients, a power-of-two scale per "
               "tensor, FP32 accumulation in reduction order; FP32 master weights")
    paper = "FAST Table II: HFP8 within 0.5 points of FP32 (ResNet-18 68.53 vs 68.60)"
    operand, gradient = "e4m3", "e5m2"


class HFP8E4M2(HFP8):
    """HFP8 on the e4m2 operands of FAST's Table IV MAC for every tensor: an ablation showing
    what the priced MAC's narrower format trains to."""

    name = "hfp8-e4m2"
    summary = "e4m2 operands everywhere (FAST's Table IV HFP8 MAC; an ablation)"
    paper = "not a paper format: FAST prices an e4m2 MAC but trains HFP8 (e4m3/e5m2)"
    operand = gradient = "hfp8"


class FP16(LaneFormat):
    name = "fp16"
    cost = 4.0
    summary = ("NVIDIA mixed precision: fp16 operands with a power-of-two scale per tensor (an "
               "ideal loss scale for gradients), FP32 accumulation in reduction order")
    paper = "FAST Table II: NVIDIA mixed precision within 0.05 points of FP32 (ResNet-18 68.57)"
    operand = gradient = "fp16"


#: format name → class
FORMATS = {"int8": INT8, "int12": INT12, "hfp8": HFP8, "fp16": FP16}
#: ablations: trained only when named
ABLATIONS = {"hfp8-e4m2": HFP8E4M2}

__all__ = ["FORMATS", "ABLATIONS", "LaneFormat", "INT8", "INT12", "HFP8", "HFP8E4M2", "FP16"]

"""bfloat16 training: every GEMM operand rounded to bfloat16, products accumulated in FP32.

This is the mixed-precision baseline the training accelerators are measured against (FAST's
Table II lists it beside FP32).  Only the operands of the three GEMM phases are bfloat16; the
master weights, the optimizer state, biases, activation functions, the loss and every tensor the
engine keeps between passes stay FP32, as in mixed-precision training.
"""

import numpy as np

from golden.common.bf16_kernel import bf16_round_fast

from .base import Format


def bf16_round(x: np.ndarray) -> np.ndarray:
    """``x`` rounded to bfloat16 (round to nearest, ties to even) and widened back to float32.

    The rounding is the golden helper :func:`golden.common.float_to_bf16` (integer RNE on the
    FP32 bit pattern), computed by its compiled copy
    :func:`golden.common.bf16_kernel.bf16_round_fast` (the same bits); values that round past
    the largest finite bfloat16 become ±Inf and NaN stays NaN.

    Parameters
    ----------
    x : numpy.ndarray
        Any shape; read as float32.

    Returns
    -------
    numpy.ndarray
        float32, ``x``'s shape; every value is a bfloat16 value.
    """
    return bf16_round_fast(x)


class BF16(Format):
    """bfloat16 operands (RNE), FP32 accumulation.

    ``matmul(x, y)`` is ``bf16_round(x) @ bf16_round(y)`` as a float32 GEMM (NumPy's BLAS):
    every product of two bfloat16 values is exact in FP32, so the only roundings are the operand
    roundings and the FP32 accumulation.  All three phases are treated alike; the storage hooks
    are the FP32 ones (FP32 master weights).
    """

    name = "bf16"
    cost = 3.0
    summary = "bfloat16 operands (RNE), FP32 accumulation; FP32 master weights"
    paper = ("FAST Table II: bfloat16 within 0.05 points of FP32 "
             "(ResNet-18 top-1 68.55 vs 68.60)")

    def matmul(self, x: np.ndarray, y: np.ndarray, phase: str, layer: str) -> np.ndarray:
        return np.matmul(bf16_round(x), bf16_round(y), dtype=np.float32)


#: format name → class
FORMATS = {"bf16": BF16}

__all__ = ["FORMATS", "BF16", "bf16_round"]

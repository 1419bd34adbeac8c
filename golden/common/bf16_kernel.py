"""FP32 values rounded to bfloat16 and widened back, at training speed: the same bits as
:func:`golden.common.float_to_bf16` followed by :func:`golden.common.bf16_to_float`.

One numba loop over the float32 bit patterns does what the reference does in whole-array
uint64 steps: add ``0x7FFF`` plus the kept LSB and clear the low 16 bits (round to nearest,
ties to even; a value that rounds past the largest finite bfloat16 carries into the exponent
and becomes infinity; subnormals round on the bfloat16 subnormal grid), and a NaN keeps its top
16 bits with the quiet bit set.  ``tests/test_golden_bf16_kernel.py`` checks it against the
reference on random and special bit patterns.  Without numba the reference runs instead.
"""

import numpy as np

from . import bf16_to_float, float_to_bf16
from .jit import jit, numba


@jit
def _round(bits, out):
    for i in range(bits.size):
        b = bits[i]
        if (b & np.uint32(0x7F800000)) == np.uint32(0x7F800000) and (b & np.uint32(0x7FFFFF)):
            out[i] = (b & np.uint32(0xFFFF0000)) | np.uint32(0x00400000)
        else:
            out[i] = (b + np.uint32(0x7FFF) + ((b >> np.uint32(16)) & np.uint32(1))) \
                & np.uint32(0xFFFF0000)


def bf16_round_fast(x) -> np.ndarray:
    """``x`` (read as float32) rounded to bfloat16 (RNE) and widened to float32, ``x``'s
    shape: the reference's bits (module docstring)."""
    shape = np.shape(x)
    x = np.ascontiguousarray(x, dtype=np.float32)
    if numba is None:
        return np.asarray(bf16_to_float(float_to_bf16(x)), dtype=np.float32).reshape(shape)
    out = np.empty(x.shape, dtype=np.uint32)
    _round(x.reshape(-1).view(np.uint32), out.reshape(-1))
    return out.view(np.float32).reshape(shape)


__all__ = ["bf16_round_fast"]

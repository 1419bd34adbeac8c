"""Compiled helpers of the FP32 adder for the fast GEMM kernels: the same bits as
:func:`golden.common.fp_add.fp32_add_bits` once a float32 addition has been done."""

import numpy as np

from .fp_add import QNAN
from .jit import jit


@jit
def settle(bits):
    """The FP32 adder's result from the bits of an IEEE float32 sum (uint32): a subnormal
    flushed to a zero of its sign (FTZ), a NaN the adder's quiet NaN ``0x7FC00000``."""
    field = bits & np.uint32(0x7F800000)
    out = bits if field != 0 else bits & np.uint32(0x80000000)
    nan = field == np.uint32(0x7F800000) and (bits & np.uint32(0x7FFFFF)) != 0
    return np.uint32(QNAN) if nan else out


__all__ = ["settle"]

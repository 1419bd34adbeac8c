"""The compiled bfloat16 rounding (golden.common.bf16_kernel) equals the reference
(float_to_bf16, then bf16_to_float) on a million random FP32 bit patterns and on the special
ones: zeros, ties to even both ways, carries into the exponent, the largest finite values, the
infinities, quiet and signalling NaNs, subnormals."""

import numpy as np
import pytest

from golden.common import bf16_to_float, float_to_bf16
from golden.common.bf16_kernel import bf16_round_fast
from golden.common.jit import numba

pytestmark = pytest.mark.skipif(numba is None, reason="numba is not installed")

SPECIAL = [0x00000000, 0x80000000,                 # zeros
           0x3F808000, 0x3F818000, 0xBF818000,     # ties: to the even below, to the even above
           0x3F80FFFF, 0x3FFFFFFF, 0x3F7FFFFF,     # carries into the next exponent
           0x7F7F7FFF, 0x7F7F8000, 0x7F7FFFFF,     # largest finite, rounding past it
           0x7F800000, 0xFF800000,                 # infinities
           0x7FC00000, 0x7F800001, 0xFFBFFFFF,     # quiet and signalling NaNs
           0x00000001, 0x00008000, 0x00018000, 0x807FFFFF]   # subnormals


def reference(bits):
    return np.asarray(bf16_to_float(float_to_bf16(bits.view(np.float32))),
                      dtype=np.float32).view(np.uint32)


def test_random_and_special_patterns():
    rng = np.random.default_rng(11)
    bits = np.concatenate([np.array(SPECIAL, np.uint32),
                           rng.integers(0, 2**32, 1_000_000, dtype=np.uint64).astype(np.uint32)])
    got = bf16_round_fast(bits.view(np.float32)).view(np.uint32)
    assert np.array_equal(got, reference(bits)), np.flatnonzero(got != reference(bits))[:5]
    # the special cases are what their names say
    got = dict(zip(SPECIAL, bf16_round_fast(np.array(SPECIAL, np.uint32).view(np.float32))
                   .view(np.uint32).tolist()))
    assert got[0x3F808000] == 0x3F800000 and got[0x3F818000] == 0x3F820000
    assert got[0x7F7F8000] == 0x7F800000 and got[0x7F7F7FFF] == 0x7F7F0000
    assert got[0x7F800001] == 0x7FC00000


def test_shapes_and_the_bf16_format():
    from flows.studies.train.formats.bf16 import bf16_round

    x = np.random.default_rng(2).standard_normal((3, 5, 7)).astype(np.float32)
    y = bf16_round_fast(x)
    assert y.shape == x.shape and y.dtype == np.float32
    assert bf16_round_fast(np.float32(1.00390625)).shape == ()
    assert np.array_equal(bf16_round(x).view(np.uint32), reference(x.view(np.uint32)))
    assert np.array_equal(bf16_round(x[:, 1:, ::2]).view(np.uint32),
                          reference(np.ascontiguousarray(x[:, 1:, ::2]).view(np.uint32)))

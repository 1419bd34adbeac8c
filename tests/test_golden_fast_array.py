"""The golden fMAC array (golden.fast.array): T20 against bfp_gemm, the timing contract of its
docstring, and its input checks."""

import numpy as np
import pytest

from golden import ConfigError
from golden.fast.numerics import (
    DATAFLOWS,
    FastInputError,
    Quantized,
    bfp_gemm,
    fmac_group,
    gemm_quantized,
    quantize_operands,
    rounds,
)
from golden.fast.array import FMACArrayConfig, ArrayIn, ArraySim, array_gemm


def _matrices(gen, M, K, N):
    X = (gen.standard_normal((M, K)) * np.exp2(gen.integers(-8, 8, (M, K)))).astype(np.float32)
    Y = gen.standard_normal((K, N)).astype(np.float32)
    X[gen.random(X.shape) < 0.1] = -0.0
    return X, Y


@pytest.mark.parametrize("shape", [(2, 2), (4, 4), (3, 2), (1, 5)], ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("dataflow", DATAFLOWS)
def test_t20_array_equals_bfp_gemm(shape, dataflow):
    """T20: every (mx, my) in {2, 4}², a partial K-tile, more outputs than one tile, bubbles,
    default rounding per dataflow (SR for the gradient operand)."""
    cfg = FMACArrayConfig(rows=shape[0], cols=shape[1])
    gen = np.random.default_rng(hash((shape, dataflow)) & 0xFFFF)
    for mx in (2, 4):
        for my in (2, 4):
            M, N = 3, shape[0] + shape[1] + 1
            K = 16 * (max(shape) + 1) - 7
            X, Y = _matrices(gen, M, K, N)
            xq, yq = quantize_operands(X, Y, mx, my, dataflow)
            run = array_gemm(cfg, xq, yq, dataflow, gaps=0.3, seed=mx * 10 + my)
            want = bfp_gemm(X, Y, mx, my, dataflow, "paper", array=shape)
            assert (run.out == want).all(), (mx, my)


def test_t20_float64_bound():
    """The array's result is within (FP32 adds) x 2**-24 x sum |round values| of the exact dot
    product of the dequantized operands (T20's second half)."""
    gen = np.random.default_rng(5)
    cfg = FMACArrayConfig(rows=2, cols=3)
    X, Y = _matrices(gen, 4, 150, 5)
    xq, yq = quantize_operands(X, Y, 4, 4, "fwd")
    out = array_gemm(cfg, xq, yq, "fwd").out.view(np.float32).astype(np.float64)

    def deq(q):
        return np.where(q.signs == 1, -1.0, 1.0) * q.q * np.exp2(q.Es[..., None] - 127.0 - 3)

    dx, dy = deq(xq).reshape(4, -1), deq(yq).reshape(5, -1)
    exact = dx @ dy.T
    n_adds = xq.q.shape[1] * rounds(4, 4) + 4
    bound = n_adds * 2.0 ** -24 * (np.abs(dx) @ np.abs(dy).T)
    assert (np.abs(out - exact) <= bound).all()


def test_tile_padding_goes_first():
    """A short K-tile is padded with zero groups before its real groups, so the tile's partial
    sum is the golden chain of its real groups even when that chain ends in −0 (padding after
    them would add +0 and make it +0).  Here -2**-125 + 3 * 2**-127 = -2**-127 flushes to −0."""
    cfg = FMACArrayConfig(rows=1, cols=3)
    z = np.zeros((1, 2, 16), np.int64)
    qx, qy, sx = z.copy(), z.copy(), z.copy()
    qx[0, :, 0] = (1, 3)
    qy[0, :, 0] = (1, 1)
    sx[0, 0, 0] = 1
    xq = Quantized(np.array([[66, 65]]), sx, qx, 2)
    yq = Quantized(np.array([[65, 64]]), z.copy(), qy, 2)
    chain = np.float32(0)
    for b in range(2):
        chain = fmac_group(chain, (xq.Es[0, b], xq.signs[0, b], xq.q[0, b]), 2,
                           (yq.Es[0, b], yq.signs[0, b], yq.q[0, b]), 2)
    assert chain.view(np.uint32) == 0x80000000
    run = array_gemm(cfg, xq, yq, "fwd")
    assert run.tiles[0][0][0] == 0x80000000
    assert (run.out == gemm_quantized(xq, yq, "fwd", "paper", array=(1, 3))).all()


@pytest.mark.parametrize("depth", [0, 1, 3])
def test_latency_and_throughput(depth):
    """A vector taken at the end of beat t leaves in the first cycle of beat t + rows + cols,
    ``pipeline`` cycles later with register stages; back-to-back vectors are taken every
    rounds(mx, my) cycles at every depth."""
    for rows, cols, mx, my in ((2, 3, 4, 4), (3, 1, 2, 4), (1, 1, 2, 2)):
        cfg = FMACArrayConfig(rows=rows, cols=cols, pipeline=depth)
        sim = ArraySim(cfg)
        R = rounds(mx, my)
        grp = (127, [0] * 16, [1] * 16)
        taken, outs = [], []
        for t in range(R * (rows + cols + 8)):
            i = ArrayIn(valid=len(taken) < 5, bottom=[grp] * cols, mx=mx, my=my)
            o = sim.cycle(i)
            if o.in_ready and i.valid:
                taken.append(t)
            if o.out_valid:
                outs.append(t)
        assert taken == [R - 1 + R * k for k in range(5)]
        assert outs == [R * (rows + cols + k) + depth for k in range(5)]


def test_wgrad_drain_order_and_block():
    """WGRAD: no input is taken from ``last`` until the drain ends; the drain presents the last
    column first, one column per cycle."""
    cfg = FMACArrayConfig(rows=2, cols=3)
    gen = np.random.default_rng(2)
    X, Y = _matrices(gen, 2, 48, 3)
    xq, yq = quantize_operands(X, Y, 2, 2, "wgrad")
    run = array_gemm(cfg, xq, yq, "wgrad")
    valid = [t for t, o in enumerate(run.outputs) if o.out_valid]
    assert valid == list(range(valid[0], valid[0] + 3))
    want = gemm_quantized(xq, yq, "wgrad", "paper", array=(2, 3))
    for k, vec in enumerate(run.tiles[0]):
        assert (np.where(vec == 0x80000000, 0, vec) == want[:, 2 - k]).all()
    last = max(t for t, i in enumerate(run.inputs) if i.valid and i.last)
    assert not any(o.in_ready for o in run.outputs[last + 1:valid[-1] + 1])


def test_sticky_error():
    cfg = FMACArrayConfig(rows=3, cols=2, m_max=2)
    for bad in (ArrayIn(dataflow=3), ArrayIn(mx=4),
                ArrayIn(ld=(3, 0, (0, [0] * 16, [0] * 16)))):
        sim = ArraySim(cfg)
        errs = [sim.cycle(i).error for i in (ArrayIn(mx=2, my=2), bad, ArrayIn(mx=2, my=2))]
        assert errs == [False, False, True]


@pytest.mark.parametrize("field, value", [("rows", 0), ("cols", 0), ("rows", 1.5),
                                          ("m_max", 3), ("group", 0), ("cols", True),
                                          ("pipeline", -1), ("pipeline", 4)])
def test_config_errors(field, value):
    with pytest.raises(ConfigError, match=field):
        FMACArrayConfig(**{field: value})


def test_gemm_input_errors():
    gen = np.random.default_rng(0)
    X, Y = _matrices(gen, 2, 32, 2)
    xq, yq = quantize_operands(X, Y, 4, 4)
    with pytest.raises(FastInputError, match="dataflow"):
        array_gemm(FMACArrayConfig(), xq, yq, "bwd")
    with pytest.raises(FastInputError, match="group"):
        array_gemm(FMACArrayConfig(group=8), xq, yq)
    _, y2 = quantize_operands(X[:, :16], Y[:16], 4, 4)
    with pytest.raises(FastInputError, match="K groups"):
        array_gemm(FMACArrayConfig(), xq, y2)
    with pytest.raises(FastInputError, match="sim"):
        array_gemm(FMACArrayConfig(), xq, yq, sim=ArraySim(FMACArrayConfig(rows=2)))

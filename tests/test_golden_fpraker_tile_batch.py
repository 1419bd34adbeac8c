"""The compiled FPRaker tile GEMM (``golden.fpraker.tile_batch``) against the NumPy tile model
(``golden.fpraker.gemm.tile_gemm``, the spec in code): bit for bit and cycle for cycle on random
shapes, operand kinds and configurations, and its scalar NORM_RNE / jam / align helpers against
the NumPy accumulator functions."""

import numpy as np
import pytest

pytest.importorskip("numba")

from golden.common.accumulator import align_acc, norm_rne, shift_jam
from golden.fpraker import tile_batch
from golden.fpraker.pe import PEConfig, random_operands, required_int_bits
from golden.fpraker.gemm import tile_gemm
from golden.fpraker.tile import STALL_CAUSES, TileConfig
from golden.fpraker.tile_batch import bench_tile_gemm, tile_gemm_fast

KINDS = ("mix", "relu", "wide", "cancel", "uniform", "narrow")


def tile_cfg(**kw) -> TileConfig:
    """A TileConfig with the smallest legal int_bits unless given."""
    if "int_bits" not in kw:
        d = TileConfig()
        kw["int_bits"] = required_int_bits(
            kw.get("lanes", d.lanes), kw.get("frac_bits", d.frac_bits),
            kw.get("keep_bits", d.keep_bits), kw.get("dmax", d.dmax),
            kw.get("exp_mode", d.exp_mode), kw.get("encoding", d.encoding))
    return TileConfig(**kw)


def assert_same(fast, ref):
    """Every field of two GemmResults."""
    assert fast.out.dtype == ref.out.dtype == np.uint16
    assert fast.out.shape == ref.out.shape
    bad = np.argwhere(fast.out != ref.out)
    assert bad.size == 0, (f"{len(bad)} outputs differ, first at {tuple(bad[0])}: "
                           f"{fast.out[tuple(bad[0])]:#06x} vs {ref.out[tuple(bad[0])]:#06x}")
    assert fast.cycles == ref.cycles
    assert fast.stalls == ref.stalls
    assert list(fast.stalls) == list(STALL_CAUSES)
    for name in ("useful", "tile_runs", "groups", "macs", "lane_cycles"):
        assert getattr(fast, name) == getattr(ref, name), name
    assert fast.useful + sum(fast.stalls.values()) == fast.lane_cycles


def operands(rng, M, N, K, kind):
    S, _ = random_operands(rng, M, K, kind)
    _, P = random_operands(rng, N, K, kind)
    return S, P


def test_available():
    assert tile_batch.available()


# ---------------------------------------------------------------------------------------------
# scalar helpers against the NumPy accumulator functions

def test_shift_jam_and_align_match_numpy():
    rng = np.random.default_rng(3)
    x = rng.integers(-(1 << 40), 1 << 40, size=400)
    x[:20] = 0
    s = rng.integers(-30, 80, size=400)
    want = shift_jam(x, s)
    got = [tile_batch._shift_jam(int(a), int(b)) for a, b in zip(x, s)]
    assert got == want.tolist()
    cfg = PEConfig(frac_bits=14, keep_bits=7, int_bits=6)
    zero = rng.integers(0, 2, size=400).astype(bool)
    sign = rng.integers(0, 2, size=400)
    exp = rng.integers(-300, 300, size=400)
    sig = rng.integers(1 << 7, 1 << 8, size=400)
    E = exp + rng.integers(0, 40, size=400)
    want = align_acc(zero, sign, exp, sig, E, cfg)
    got = [tile_batch._align(bool(z), int(a), int(b), int(c), int(e), 14, 7)
           for z, a, b, c, e in zip(zero, sign, exp, sig, E)]
    assert got == want.tolist()


@pytest.mark.parametrize("keep_bits,frac_bits,int_bits", [(9, 12, 5), (1, 1, 8), (6, 20, 16)])
def test_norm_matches_norm_rne(keep_bits, frac_bits, int_bits):
    """RNE ties, carries, zero, and exponents past the 10-bit register (it wraps)."""
    cfg = PEConfig(keep_bits=keep_bits, frac_bits=frac_bits, int_bits=int_bits, kmax=keep_bits + 3,
                   dmax=0)
    rng = np.random.default_rng(keep_bits)
    W = frac_bits + int_bits
    X = rng.integers(-(1 << W) + 1, 1 << W, size=600)
    # ties and carries: a kept part of all ones plus exactly half an ulp
    for n in range(keep_bits + 1, W):
        drop = n - keep_bits
        X[n] = (((1 << (n + 1)) - 1) >> drop << drop) | (1 << (drop - 1))
        X[n + W] = -((3 << (n - keep_bits - 1)) | (1 << n))
    X[:3] = (0, 1, -1)
    E = rng.integers(-2048, 2048, size=600)
    E[3:8] = (511, 512, -512, -513, 2047)
    zero, sign, exp, sig = norm_rne(X, E, cfg)
    for i in range(600):
        got = tile_batch._norm(int(X[i]), int(E[i]), frac_bits, keep_bits)
        assert got == (bool(zero[i]), int(sign[i]), int(exp[i]), int(sig[i])), (X[i], E[i])


# ---------------------------------------------------------------------------------------------
# whole GEMMs against the NumPy tile model

CONFIGS = {
    "default": {},
    "step": {"exp_mode": "step"},
    "noshare": {"share_exp": False},
    "step-noshare-b0": {"exp_mode": "step", "share_exp": False, "b_buffers": 0},
    "b0": {"b_buffers": 0},
    "b2-3x5": {"b_buffers": 2, "rows": 3, "cols": 5},
    "1x1": {"rows": 1, "cols": 1},
    "1x8-noshare": {"rows": 1, "cols": 8, "share_exp": False},
    "8x1-step": {"rows": 8, "cols": 1, "exp_mode": "step"},
    "7x2-lanes4": {"rows": 7, "cols": 2, "lanes": 4},
    "5x3-lanes4-step-b2": {"rows": 5, "cols": 3, "lanes": 4, "exp_mode": "step", "b_buffers": 2},
    "binary-group": {"encoding": "binary", "int_bits": 6, "rows": 4, "cols": 6},
    "binary-step-rne": {"encoding": "binary", "exp_mode": "step", "out_round": "rne"},
    "keep6-kmax9": {"keep_bits": 6, "kmax": 9, "rows": 2, "cols": 7, "out_round": "rne"},
    "dmax0-kmax1023": {"dmax": 0, "kmax": 1023, "rows": 6, "cols": 4},
    "dmax12-kmax0-step": {"dmax": 12, "kmax": 0, "exp_mode": "step", "rows": 3, "cols": 3},
    "frac16-int7": {"frac_bits": 16, "int_bits": 7, "rows": 5, "cols": 5, "b_buffers": 3},
    "indep": {"sync": "independent"},
    "indep-step": {"sync": "independent", "exp_mode": "step"},
    "indep-noshare-b0": {"sync": "independent", "share_exp": False, "b_buffers": 0},
    "indep-1x1": {"sync": "independent", "rows": 1, "cols": 1},
    "indep-7x2-lanes4-b2": {"sync": "independent", "rows": 7, "cols": 2, "lanes": 4,
                            "b_buffers": 2},
    "indep-binary-step-rne": {"sync": "independent", "encoding": "binary", "exp_mode": "step",
                              "out_round": "rne", "rows": 3, "cols": 5},
    "indep-dmax0-kmax1": {"sync": "independent", "dmax": 0, "kmax": 1, "rows": 6, "cols": 4},
    "indep-dmax12-kmax0": {"sync": "independent", "dmax": 12, "kmax": 0, "rows": 3, "cols": 3},
    "pipe": {"pipeline": 1},
    "pipe-3x5-noshare-b0": {"pipeline": 1, "rows": 3, "cols": 5, "share_exp": False,
                            "b_buffers": 0},
    "indep-pipe-5x3": {"sync": "independent", "pipeline": 1, "rows": 5, "cols": 3},
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_gemm_matches_numpy_model(name):
    cfg = tile_cfg(**CONFIGS[name])
    rng = np.random.default_rng(sum(map(ord, name)))
    for kind in KINDS:
        M = int(rng.integers(1, 3 * cfg.cols + 2))
        N = int(rng.integers(1, 3 * cfg.rows + 2))
        K = int(rng.integers(1, 6 * cfg.lanes))
        S, P = operands(rng, M, N, K, kind)
        assert_same(tile_gemm_fast(S, P, cfg), tile_gemm(S, P, cfg, engine="numpy"))


def test_random_configurations():
    """Random legal configurations (every field the TileConfig allows, lanes up to 64)."""
    rng = np.random.default_rng(2024)
    for _ in range(120):
        lanes = int(rng.choice([1, 2, 3, 4, 5, 8, 8, 16, 64]))
        keep = int(rng.integers(1, 10))
        F = int(rng.integers(keep, 21))
        mode = str(rng.choice(["step", "group"]))
        enc = str(rng.choice(["csd", "binary"]))
        dmax = int(rng.integers(0, F + 1))
        need = required_int_bits(lanes, F, keep, dmax, mode, enc)
        cfg = TileConfig(rows=int(rng.integers(1, 9)), cols=int(rng.integers(1, 9)), lanes=lanes,
                         share_exp=bool(rng.integers(0, 2)), b_buffers=int(rng.integers(0, 4)),
                         exp_mode=mode, frac_bits=F, keep_bits=keep,
                         kmax=int(rng.choice([0, 1, keep + 3, 40, 1023])), dmax=dmax,
                         int_bits=int(min(16, need + rng.integers(0, 3))), encoding=enc,
                         out_round=str(rng.choice(["trunc", "rne"])),
                         sync=str(rng.choice(["lockstep", "independent"])),
                         pipeline=int(rng.integers(0, 2)) if mode == "group" else 0)
        kind = str(rng.choice(KINDS))
        M, N = (int(v) for v in rng.integers(1, 14, size=2))
        K = int(rng.integers(1, 4 * lanes + 2))
        S, P = operands(rng, M, N, K, kind)
        assert_same(tile_gemm_fast(S, P, cfg), tile_gemm(S, P, cfg, engine="numpy"))


@pytest.mark.parametrize("M,N,K", [(1, 1, 1), (1, 1, 0), (9, 17, 3), (8, 8, 64), (2, 30, 9)])
def test_edge_shapes(M, N, K):
    rng = np.random.default_rng(M * 100 + N * 10 + K)
    for cfg in (TileConfig(), TileConfig(exp_mode="step", share_exp=False, b_buffers=0),
                TileConfig(sync="independent")):
        S, P = operands(rng, M, N, K, "mix")
        assert_same(tile_gemm_fast(S, P, cfg), tile_gemm(S, P, cfg, engine="numpy"))


def test_zero_and_extreme_operands():
    """All-zero rows and columns, B zeros, and products that overflow or underflow bf16."""
    rng = np.random.default_rng(11)
    S, P = operands(rng, 13, 11, 37, "uniform")
    S[3] = 0
    P[:, 5:20] = 0
    S[:, 30:] = 0x7F7F            # the largest finite bf16
    P[7, :] = 0x0080              # the smallest normal
    for cfg in (TileConfig(), TileConfig(exp_mode="step", out_round="rne"),
                TileConfig(sync="independent", exp_mode="step")):
        assert_same(tile_gemm_fast(S, P, cfg), tile_gemm(S, P, cfg, engine="numpy"))


def test_threads_progress_and_blocks():
    """Blocks of instances on threads give the same result; progress counts instances."""
    rng = np.random.default_rng(5)
    cfg = TileConfig(rows=3, cols=4)
    S, P = operands(rng, 10, 8, 29, "mix")
    ref = tile_gemm(S, P, cfg, engine="numpy")
    calls = []
    res, _ = tile_batch._run(S, P, cfg, progress=lambda d, t: calls.append((d, t)), threads=2,
                             chunk=5)
    assert_same(res, ref)
    total = 3 * 12
    assert calls == [(min(total, k), total) for k in range(5, total + 5, 5)]
    calls.clear()
    assert_same(tile_gemm_fast(S, P, cfg, progress=lambda d, t: calls.append((d, t))), ref)
    assert calls == [(total, total)]
    with pytest.raises(ValueError, match="threads"):
        tile_gemm_fast(S, P, cfg, threads=0)


def test_empty_gemm():
    """No serial or no parallel row: an empty result (the NumPy model raises KeyError here)."""
    for M, N, sync in ((0, 3, "lockstep"), (3, 0, "lockstep"), (0, 3, "independent")):
        S = np.full((M, 5), 0x3F80, dtype=np.uint16)
        P = np.full((N, 5), 0x3F80, dtype=np.uint16)
        r = tile_gemm_fast(S, P, TileConfig(sync=sync))
        assert r.out.shape == (N, M) and r.cycles == 0 and r.useful == 0 and r.macs == 0
        assert r.stalls == {k: 0 for k in STALL_CAUSES}


@pytest.mark.parametrize("S,P,match", [
    (np.array([[0x7F80]], dtype=np.uint16), np.array([[0x3F80]], dtype=np.uint16), "255"),
    (np.array([[0x3F80]], dtype=np.uint16), np.array([[0xFFC0]], dtype=np.uint16), "255"),
    (np.array([[1.0]]), np.array([[0x3F80]], dtype=np.uint16), "integer"),
    (np.array([[70000]]), np.array([[0x3F80]]), "outside"),
    (np.zeros((2, 3), dtype=np.uint16), np.zeros((2, 4), dtype=np.uint16), "reduction"),
])
def test_operand_errors_match(S, P, match):
    for f in (tile_gemm, tile_gemm_fast):
        with pytest.raises(ValueError, match=match):
            f(S, P, TileConfig())


def test_bench_runs():
    text = bench_tile_gemm(scale=16)
    assert "| numba" in text and "| NumPy" in text
    assert text.count("identical (out, cycles, stalls, useful): yes") == 2

"""Golden FPRaker tile (golden.fpraker.tile) and the PE's group exponent mode: spec TV14, TV15,
TV18 (tolerance against exact rationals), the group mode's integer headroom, the GEMM mapping,
the independent column protocol (every PE equals the standalone PE), and input checks."""

from fractions import Fraction

import numpy as np
import pytest

from golden import ConfigError
from golden.common import bf16_to_float
from golden.fpraker.pe import (Acc, PEConfig, pe_dot_batch, pe_dot_batch_acc, pe_group,
                               random_operands)
from golden.fpraker.gemm import tile_gemm
from golden.fpraker.tile import SYNCS, STALL_CAUSES, TileConfig, schedule, tile_run
from golden.fpraker.encoder import encode_terms

MODES = ("step", "group")


def _frac(bits: int) -> Fraction:
    return Fraction(float(bf16_to_float(np.uint16(bits))))


def _tile_ops(rng, R, C, G, kind="mix", L=8):
    A, _ = random_operands(rng, C, G * L, kind)
    _, B = random_operands(rng, R, G * L, kind)
    return A.reshape(C, G, L), B.reshape(R, G, L)


@pytest.mark.parametrize("sync", SYNCS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("share", [True, False])
def test_tv14_exponent_sharing_cycles(mode, share, sync):
    """TV14: A = 8 x 1.0 against any non-zero B: 2 cycles with sharing, 1 without; all-zero A
    the same (at least 2 cycles per group with sharing, even with no term)."""
    cfg = TileConfig(rows=2, cols=1, share_exp=share, exp_mode=mode, sync=sync)
    want = 2 if share else 1
    B = np.full((2, 1, 8), 0x4000)
    for a in (0x3F80, 0x0000):
        r = tile_run(np.full((1, 1, 8), a), B, cfg)
        assert r.cycles == want
        assert r.group_cycles.tolist() == [[want]]
    # the odd row waits one cycle for its exponent block: 8 lanes of lost slots
    r = tile_run(np.full((1, 1, 8), 0x3F80), B, cfg)
    assert r.stalls["exponent_block"] == (8 if share else 0)


@pytest.mark.parametrize("mode", MODES)
def test_tv15a_single_row_equals_standalone_pe(mode):
    """TV15 (a): R = 1 without sharing is the standalone PE, bit for bit and cycle for cycle."""
    rng = np.random.default_rng(5)
    for kind in ("mix", "relu", "wide", "cancel", "uniform"):
        cfg = TileConfig(rows=1, cols=5, share_exp=False, exp_mode=mode, b_buffers=0)
        A, B = _tile_ops(rng, 1, 5, 7, kind)
        r = tile_run(A, B, cfg)
        flatA = A.reshape(5, -1)
        flatB = np.repeat(B.reshape(1, -1), 5, axis=0)
        out, _ = pe_dot_batch(flatA, flatB, cfg.pe)
        _, gc = pe_dot_batch_acc(flatA, flatB, cfg.pe)
        assert (r.out[0] == out).all(), kind
        assert (r.group_cycles == gc).all(), kind


@pytest.mark.parametrize("sync", SYNCS)
@pytest.mark.parametrize("mode", MODES)
def test_tv15_buffers_and_termination(mode, sync):
    """TV15 (b) N = 0 is the sum of the slowest column's group times; (c) more B buffers never
    slow the tile; (d) every column group ends within R * sum(n_i) + R * 8 + 2 cycles; the
    lane-cycle classes add up to cycles x PEs x lanes."""
    rng = np.random.default_rng(7)
    for trial in range(12):
        R, C = int(rng.integers(1, 9)), int(rng.integers(1, 9))
        G = int(rng.integers(1, 10))
        A, B = _tile_ops(rng, R, C, G, ("mix", "relu", "narrow")[trial % 3])
        totals = []
        for n in (0, 1, 2):
            r = tile_run(A, B, TileConfig(rows=R, cols=C, b_buffers=n, exp_mode=mode,
                                          sync=sync))
            totals.append(r.cycles)
            assert r.useful + sum(r.stalls.values()) == r.lane_cycles == r.cycles * R * C * 8
            assert set(r.stalls) == set(STALL_CAUSES)
            if n == 0:
                assert r.cycles == int(r.group_cycles.max(axis=0).sum())
        assert totals[0] >= totals[1] >= totals[2]
        terms = np.vectorize(lambda x: 0 if (x >> 7) & 0xFF == 0 else
                             len(encode_terms(128 | (x & 0x7F))))(A).sum(axis=2)
        assert (r.group_cycles <= R * terms + R * 8 + 2).all()


def _standalone(A, B, cfg):
    """Every PE of a tile run as the standalone PE (``cfg.pe``): read-outs (rows, cols) and
    cycles of every group (cols, rows, groups)."""
    C, G, L = A.shape
    R = B.shape[0]
    flatA = np.repeat(A.reshape(C, G * L), R, axis=0)        # PE (c, r) at c * R + r
    flatB = np.tile(B.reshape(R, G * L), (C, 1))
    out, _ = pe_dot_batch(flatA, flatB, cfg.pe)
    _, gc = pe_dot_batch_acc(flatA, flatB, cfg.pe)
    return out.reshape(C, R).T, gc.reshape(C, R, G)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("share", [True, False])
def test_independent_equals_standalone_pe(mode, share):
    """sync = "independent" (spec §5.3 [C']): every PE's read-out equals the standalone PE's
    (same exponent mode) on its own operands, PE by PE, and a column's group takes
    max(min_cycles, max over its rows of (start offset + the standalone PE's cycles)): with
    ``share_exp`` max(n_2j, 1 + n_2j+1) over the row pairs.  The lane-cycles add up, with no
    lock-step stall; a PE's idle cycles after its own group are ``column_wait``."""
    rng = np.random.default_rng(21 + share)
    for trial, kind in enumerate(("mix", "relu", "wide", "cancel", "uniform", "narrow")):
        R, C, G = (3, 4, 6) if trial % 2 else (8, 2, 5)
        cfg = TileConfig(rows=R, cols=C, share_exp=share, exp_mode=mode, sync="independent",
                         b_buffers=trial % 3)
        A, B = _tile_ops(rng, R, C, G, kind)
        r = tile_run(A, B, cfg)
        out, gc = _standalone(A, B, cfg)
        assert (r.out == out).all(), kind
        off = np.array([r_ % 2 if share else 0 for r_ in range(R)])
        fin = gc + off[None, :, None]
        want = np.maximum(fin.max(axis=1), 2 if share else 1)
        assert (r.group_cycles == want).all(), kind
        if share and R % 2 == 0:
            pairs = np.maximum(gc[:, 0::2], 1 + gc[:, 1::2]).max(axis=1)
            assert (r.group_cycles == pairs).all(), kind
        assert r.stalls["lock_step"] == 0
        assert r.useful + sum(r.stalls.values()) == r.lane_cycles == r.cycles * R * C * 8
        waits = (want[:, None, :] - fin).sum() * 8
        assert r.stalls["column_wait"] == waits, kind
        assert r.stalls["exponent_block"] == (C * G * (R // 2) * 8 if share else 0)


def test_independent_differs_from_lockstep():
    """The two protocols are different machines: on random data lock-step changes some PE's
    result (its rounding follows its neighbours' stalls) and the column group times, and it
    alone has lock-step stalls."""
    rng = np.random.default_rng(4)
    A, B = _tile_ops(rng, 8, 8, 16, "normal")
    lock = tile_run(A, B, TileConfig())
    indep = tile_run(A, B, TileConfig(sync="independent"))
    assert (lock.out != indep.out).any()
    assert (lock.group_cycles != indep.group_cycles).any()
    assert lock.stalls["lock_step"] > 0 and lock.stalls["column_wait"] == 0
    assert indep.stalls["lock_step"] == 0 and indep.stalls["column_wait"] > 0
    out, _ = _standalone(A, B, TileConfig(sync="independent"))
    assert (indep.out == out).all() and (lock.out != out).any()


@pytest.mark.parametrize("sync", SYNCS)
@pytest.mark.parametrize("share", [True, False])
def test_tv14_with_the_pipeline_stage(share, sync):
    """TV14 with the stage after the exponent block: one more cycle (3 with sharing, 2
    without), the stage's cycle lost by every PE (8 lanes each) and the odd row's as before."""
    cfg = TileConfig(rows=2, cols=1, share_exp=share, sync=sync, pipeline=1)
    want = (2 if share else 1) + 1
    B = np.full((2, 1, 8), 0x4000)
    for a in (0x3F80, 0x0000):
        r = tile_run(np.full((1, 1, 8), a), B, cfg)
        assert r.cycles == want and r.group_cycles.tolist() == [[want]]
    r = tile_run(np.full((1, 1, 8), 0x3F80), B, cfg)
    assert r.stalls["exponent_block"] == 2 * 8 + (8 if share else 0)


@pytest.mark.parametrize("sync", SYNCS)
@pytest.mark.parametrize("share", [True, False])
def test_pipeline_stage_adds_one_cycle_per_group_and_keeps_the_results(share, sync):
    """The stage delays every row's start by one cycle and changes nothing else (module
    docstring): the same read-outs and useful, shift-window and lock-step lane-cycles, every
    (column, group) exactly one cycle longer, ``rows x lanes`` more exponent-block lane-cycles
    per (column, group)."""
    rng = np.random.default_rng(7 + share + 2 * (sync == "independent"))
    for R, C, G in ((2, 2, 9), (3, 2, 7), (4, 4, 5), (1, 3, 6)):
        for kind in ("mix", "normal", "relu", "cancel"):
            A, B = _tile_ops(rng, R, C, G, kind)
            base = dict(rows=R, cols=C, share_exp=share, sync=sync)
            r0 = tile_run(A, B, TileConfig(**base))
            r1 = tile_run(A, B, TileConfig(**base, pipeline=1))
            assert (r1.out == r0.out).all()
            assert (r1.group_cycles == r0.group_cycles + 1).all()
            assert r1.useful == r0.useful
            for cause in ("shift_range", "lock_step", "column_wait"):
                assert r1.stalls[cause] == r0.stalls[cause], cause
            assert r1.stalls["exponent_block"] == r0.stalls["exponent_block"] + C * G * R * 8


def test_pipeline_config_errors():
    """``pipeline`` is 0 or 1, and 1 only in the group exponent mode."""
    assert TileConfig().pipeline == 0 and TileConfig(pipeline=1).min_cycles == 3
    for bad in (-1, 2, True, 1.0):
        with pytest.raises(ConfigError, match="pipeline") as e:
            TileConfig(pipeline=bad)
        assert e.value.field == "pipeline"
    with pytest.raises(ConfigError, match="exp_mode is 'group'"):
        TileConfig(pipeline=1, exp_mode="step")


def test_sync_config_error():
    """An unknown protocol is a ConfigError naming the field and the allowed values."""
    assert TileConfig().sync == "lockstep"
    for bad in ("lock-step", "", True, None):
        with pytest.raises(ConfigError, match=r"sync.*'lockstep', 'independent'") as e:
            TileConfig(sync=bad)
        assert e.value.field == "sync"


def test_schedule_run_ahead():
    """The recurrence of spec §5.2 on a hand example: with one buffer, a column may start group
    s as soon as every column has started s - 1."""
    gc = np.array([[5, 1, 1], [1, 1, 5]])
    start, total = schedule(gc, 1)
    assert start.tolist() == [[0, 5, 6], [0, 1, 5]]
    assert total == 10
    start, total = schedule(gc, 0)
    assert start.tolist() == [[0, 5, 6], [0, 5, 6]] and total == 11


@pytest.mark.parametrize("sync", SYNCS)
@pytest.mark.parametrize("mode", MODES)
def test_tv18_error_bound_against_exact(mode, sync):
    """TV18: |y - exact| <= 2**-7 * sum|a b| for random N(0,1) bfloat16 operands, K = 64, in
    every PE of a tile (both exponent modes, both column protocols); also ReLU data, as the
    speedup study's."""
    rng = np.random.default_rng(11)
    for kind in ("normal", "relu"):
        A, B = _tile_ops(rng, 4, 4, 8, kind)
        r = tile_run(A, B, TileConfig(rows=4, cols=4, exp_mode=mode, sync=sync))
        for i in range(4):
            for c in range(4):
                a, b = A[c].reshape(-1), B[i].reshape(-1)
                exact = sum(_frac(x) * _frac(y) for x, y in zip(a, b))
                bound = sum(abs(_frac(x) * _frac(y)) for x, y in zip(a, b)) / 128
                assert abs(_frac(r.out[i, c]) - exact) <= bound, (kind, i, c)


@pytest.mark.parametrize("encoding, int_bits", [("csd", 5), ("binary", 6)])
def test_group_mode_headroom(encoding, int_bits):
    """The group mode's fixed-point sum never leaves its F + int_bits + 1 bits: eight products
    at the top of the group's range on a full accumulator (the worst case the docstring bounds),
    and the configuration with one integer bit fewer is refused."""
    cfg = PEConfig(exp_mode="group", encoding=encoding, int_bits=int_bits, kmax=1023)
    limit = 1 << (cfg.frac_bits + cfg.int_bits)
    worst = 0
    for a in (0x3FFF, 0x3FD5, 0x3FAA, 0x3F80, 0x3FC0):
        acc = Acc(False, 0, 1, (1 << 10) - 1)        # 1.111111111 x 2**1
        _, _, trace = pe_group(acc, [a] * 8, [0x3FFF] * 8, cfg)
        worst = max(worst, max(abs(t.X) for t in trace))
    assert worst < limit
    with pytest.raises(ConfigError):
        PEConfig(exp_mode="group", encoding=encoding, int_bits=int_bits - 1)


def test_group_mode_cycle_rules():
    """Group mode: E_g is fixed for the group (k = E_g - ABe + t), the accumulator is
    normalized once at the end: TV3's pair gives the step mode's result and schedule."""
    for mode in MODES:
        acc, cycles, trace = pe_group(Acc.ZERO, [0x4081], [0x4153], PEConfig(exp_mode=mode))
        assert cycles == 2
        assert [t.k[0] for t in trace] == [0, 7]
        assert acc == Acc(False, 5, 0x353 & 0x3FF | 0x200, 0x353) or acc.sig == 0x353
    # a group whose accumulator grows past 2**(E_g + 1): E stays, the sum is exact until RNE
    cfg = PEConfig(exp_mode="group")
    _, _, trace = pe_group(Acc.ZERO, [0x3F80] * 8, [0x3F80] * 8, cfg)
    assert {t.E for t in trace} == {0}
    assert trace[-1].X == 8 << cfg.frac_bits


def test_tile_gemm_matches_tile_runs():
    """tile_gemm splits a GEMM into tile runs (padding the edges) and gives each run's
    tile_run figures."""
    rng = np.random.default_rng(3)
    cfg = TileConfig(rows=4, cols=3)
    S, _ = random_operands(rng, 7, 37, "relu")
    P, _ = random_operands(rng, 6, 37, "normal")
    g = tile_gemm(S, P, cfg, chunk=5, engine="numpy")
    fast = tile_gemm(S, P, cfg)          # the default engine (numba when installed)
    assert (fast.out == g.out).all() and fast._replace(out=None) == g._replace(out=None)
    Sp = np.zeros((9, 40), dtype=np.int64)
    Sp[:7, :37] = S
    Pp = np.zeros((8, 40), dtype=np.int64)
    Pp[:6, :37] = P
    cycles, stalls, useful = 0, dict.fromkeys(STALL_CAUSES, 0), 0
    for rb in range(2):
        for cb in range(3):
            r = tile_run(Sp[cb * 3:cb * 3 + 3].reshape(3, 5, 8),
                         Pp[rb * 4:rb * 4 + 4].reshape(4, 5, 8), cfg)
            cycles += r.cycles
            useful += r.useful
            for k in stalls:
                stalls[k] += r.stalls[k]
            blk = g.out[rb * 4:rb * 4 + 4, cb * 3:cb * 3 + 3]
            assert (r.out[:blk.shape[0], :blk.shape[1]] == blk).all()
    assert (g.cycles, g.stalls, g.useful) == (cycles, stalls, useful)
    assert (g.tile_runs, g.groups, g.macs) == (6, 5, 7 * 6 * 37)


def test_bad_input():
    with pytest.raises(ConfigError):
        TileConfig(rows=0)
    with pytest.raises(ConfigError):
        TileConfig(b_buffers=9)
    with pytest.raises(ValueError, match="shape"):
        tile_run(np.zeros((2, 1, 8), int), np.zeros((8, 1, 8), int), TileConfig())
    with pytest.raises(ValueError, match="groups"):
        tile_run(np.zeros((8, 2, 8), int), np.zeros((8, 1, 8), int), TileConfig())
    with pytest.raises(ValueError, match="cannot multiply"):
        tile_gemm(np.zeros((3, 8), int), np.zeros((3, 9), int))
    with pytest.raises(ValueError, match="Inf/NaN"):
        tile_run(np.full((8, 1, 8), 0x7F80), np.zeros((8, 1, 8), int), TileConfig())

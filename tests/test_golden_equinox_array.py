"""The golden Equinox systolic array (golden.equinox.array): GEMMs bit-exact with
golden.equinox.hbfp.hbfp_matmul, the spec's TV8/TV9/TV10/TV13 through the array, the §2.6 timing
contract (partial sums, acc, bf16, FIFO occupancy), just-in-time weight reload, en stalls, and
its configuration and input checks.  Expected values come from the spec, from golden.equinox.hbfp or
from integer arithmetic written out here — never from the model under test."""

import copy

import numpy as np
import pytest

from golden import ConfigError
from golden.equinox import (
    ArrayConfig,
    ArrayIn,
    ArrayInputError,
    ArraySim,
    array_gemm,
    array_matmul,
    dot_operands,
)
from golden.equinox.hbfp import (
    HBFPInputError,
    acc_to_bf16,
    hbfp_matmul,
    quantize_activations,
    quantize_weights,
    tile_partials,
    wrap,
)

CONFIGS = [
    ArrayConfig(n=4, w=4, conv_lat=1),
    ArrayConfig(n=2, w=2),
    ArrayConfig(n=3, w=8),
    ArrayConfig(n=2, w=3, conv_lat=2),
    ArrayConfig(n=1, w=1, conv_lat=0),
    ArrayConfig(n=3, w=1, conv_lat=0),
    ArrayConfig(n=2, w=3, x_bits=12, acc_bits=30),
    ArrayConfig(n=3, w=2, x_bits=4, acc_bits=10, conv_lat=2),
    ArrayConfig(n=2, w=2, x_bits=16, acc_bits=40),
]


def _label(cfg):
    return f"n{cfg.n}w{cfg.w}x{cfg.x_bits}a{cfg.acc_bits}L{cfg.conv_lat}"


def _matrices(gen, B, K, N):
    X = (gen.standard_normal((B, K)) * np.exp2(gen.integers(-6, 6, (B, K)))).astype(np.float32)
    Wt = (gen.standard_normal((K, N)) * np.exp2(gen.integers(-3, 3, (K, N)))).astype(np.float32)
    X[gen.random(X.shape) < 0.1] = 0.0
    return X, Wt


def _int_partials(cfg, ex, Mx, ew, Mw):
    """Accumulators per K-tile by plain integer arithmetic: (kt, B, nt*T)."""
    T = cfg.T
    kt = ex.shape[1]
    return np.stack([wrap(Mx[:, k, :].astype(object) @ Mw[k * T:(k + 1) * T].astype(object),
                          cfg.acc_bits) for k in range(kt)]).astype(np.int64)


# ---------------------------------------------------------------------------- configuration

def test_defaults():
    cfg = ArrayConfig()
    assert (cfg.n, cfg.w, cfg.x_bits, cfg.acc_bits, cfg.conv_lat) == (4, 4, 8, 24, 1)
    assert cfg.T == 16 and cfg.row_bits == 2 and ArrayConfig(n=16).row_bits == 4
    assert ArrayConfig(n=3).row_bits == 2 and ArrayConfig(n=1).row_bits == 1


@pytest.mark.parametrize("field, value", [
    ("n", 0), ("n", 65), ("n", True), ("n", 2.0), ("w", 0), ("w", 65), ("x_bits", 1),
    ("x_bits", 17), ("acc_bits", 15), ("acc_bits", 57), ("acc_bits", "24"), ("conv_lat", -1),
    ("conv_lat", 3),
])
def test_config_errors(field, value):
    with pytest.raises(ConfigError) as e:
        ArrayConfig(**{field: value})
    assert f"ArrayConfig.{field} = {value!r}" in str(e.value)
    assert "allowed" in str(e.value)


def test_acc_bits_bound_follows_x_bits():
    ArrayConfig(x_bits=4, acc_bits=8)
    with pytest.raises(ConfigError, match=r"acc_bits = 23 .*24\.\.56"):
        ArrayConfig(x_bits=12, acc_bits=23)


# ---------------------------------------------------------------------------- GEMMs

@pytest.mark.parametrize("cfg", CONFIGS, ids=_label)
def test_gemm_equals_hbfp_matmul(cfg):
    """Padded K and N, several K- and N-tiles, B below and above n, bubbles and stalls, every
    deterministic rounding: bit-exact with hbfp_matmul; the per-tile accumulators and bf16
    partials equal integer dot products and tile_partials."""
    gen = np.random.default_rng(cfg.n * 100 + cfg.w * 10 + cfg.x_bits)
    T = cfg.T
    shapes = [(1, 1, 1), (cfg.n + 1, 2 * T + 1, T + 2), (2, T, 2 * T), (cfg.n, 3 * T - 1, 1)]
    for q, (B, K, N) in enumerate(shapes):
        X, Wt = _matrices(gen, B, K, N)
        rounding = ("floor", "rne", "rtz", "floor")[q]
        run = array_matmul(cfg, X, Wt, rounding, gaps=0.3, stalls=0.3, seed=q)
        want = hbfp_matmul(X, Wt, T, cfg.x_bits, cfg.acc_bits, rounding)
        assert run.out.shape == want.shape
        assert (run.out == want).all(), (B, K, N, rounding)
        ex, Mx = quantize_activations(X, T, cfg.x_bits, rounding)
        ew, Mw = quantize_weights(Wt, T, cfg.x_bits, rounding)
        parts, _ = tile_partials(ex, Mx, ew, Mw, T, cfg.x_bits, cfg.acc_bits)
        assert (run.partials == parts).all()
        assert (run.accs == _int_partials(cfg, ex, Mx, ew, Mw)).all()
        assert (run.esums == ex[:, :, None].transpose(1, 0, 2) + ew[:, None, :]).all()
        assert len(run.accepted) == B * ex.shape[1] * ew.shape[1] * cfg.w


def test_accumulators_wrap():
    """A9: sums beyond acc_bits wrap, in the array as in hbfp_matmul: 15 (-128)(-128)
    products and 3 * -128 are 245376, which 16 bits hold as 245376 - 4 * 2**16 = -16768."""
    cfg = ArrayConfig(n=4, w=4, acc_bits=16)
    ex = np.full((1, 1), 127)
    Mx = np.full((1, 1, 16), -128)
    Mx[0, 0, 0] = 3
    ew = np.full((1, 1), 127)
    Mw = np.full((16, 16), -128)
    run = array_gemm(cfg, ex, Mx, ew, Mw)
    true = 15 * 2 ** 14 - 384
    assert true >= 1 << 15
    assert run.accs[0, 0, 0] == wrap(true, 16) == true - 4 * (1 << 16) == -16768
    parts, wrapped = tile_partials(ex, Mx, ew, Mw, 16, 8, 16)
    assert wrapped.all() and (run.partials == parts).all()


# ---------------------------------------------------------------------------- spec vectors

def _slice_rows(cfg, column0):
    """Weight rows of a slice whose column 0 holds ``column0`` (T mantissas), zeros elsewhere."""
    rows = np.zeros((cfg.n, cfg.n, cfg.w), np.int64)
    rows[:, 0, :] = np.asarray(column0, np.int64).reshape(cfg.n, cfg.w)
    return rows


def _directed(cfg, cases):
    """Run (a, b, e_act, e_w) cases through column 0, one slice each; the transferred
    (acc, esum, out) rows."""
    sim = ArraySim(cfg)
    n = cfg.n
    beats = [ArrayIn() for _ in range(n * len(cases) + 2 * n + cfg.conv_lat + 2)]
    for q, (a, b, e_act, e_w) in enumerate(cases):
        rows = _slice_rows(cfg, b)
        for r in range(n):
            bt = beats[q * n + r]
            bt.wt_valid, bt.wt_row, bt.wt, bt.wt_exp = True, r, rows[r], e_w
        v = beats[q * n + 1]
        v.act_valid, v.act, v.act_exp = True, a, e_act
    accs, outs = [], []
    for i in beats:
        o = sim.cycle(i)
        if o.acc_valid:
            accs.append((list(o.acc), o.esum))
        if o.out_valid:
            outs.append(list(o.out))
    return accs, outs


@pytest.mark.parametrize("cfg", [ArrayConfig(n=2, w=2), ArrayConfig(n=4, w=4),
                                 ArrayConfig(n=1, w=4, conv_lat=0)], ids=_label)
def test_tv8_through_the_array(cfg):
    a = np.zeros(cfg.T, np.int64)
    b = np.zeros(cfg.T, np.int64)
    a[:4] = [64, 32, -16, 8]
    b[:4] = [32, 64, 32, -64]
    accs, outs = _directed(cfg, [(a, b, 127, 128)])
    assert accs == [([3072] + [0] * (cfg.n - 1), 255)]
    assert outs == [[0x3FC0] + [0] * (cfg.n - 1)]


TV9 = [(255, 0x437F), (257, 0x4380), (259, 0x4382), (511, 0x4400), (-259, 0xC382),
       (1, 0x3F80), (8388607, 0x4B00), (-8388608, 0xCB00)]
TV10 = [(1, 2, 0x0000), (100, 508, 0x7F7F), (-100, 508, 0xFF7F), (0, 0, 0x0000),
        (0, 266, 0x0000), (0, 508, 0x0000)]


def test_tv9_tv10_normalizer():
    sim = ArraySim(ArrayConfig(n=16, w=8))
    for acc, bits in TV9:
        assert sim.normalize([acc], 266).tolist() == [bits], acc
    for acc, esum, bits in TV10:
        assert sim.normalize([acc], esum).tolist() == [bits], (acc, esum)


def test_tv9_tv10_through_the_array():
    """Every TV9/TV10 accumulator produced by PE dot products (T = 576 reaches ±2**23)."""
    cfg = ArrayConfig(n=9, w=64)
    cases = [(acc, 266, bits) for acc, bits in TV9] + TV10
    dots = []
    for acc, esum, _ in cases:
        a, b = dot_operands(acc, cfg.T)
        assert int(np.dot(a, b)) == acc
        dots.append((a, b, esum - esum // 2, esum // 2))
    accs, outs = _directed(cfg, dots)
    assert [(acc[0], esum) for acc, esum in accs] == [(acc, esum) for acc, esum, _ in cases]
    assert [out[0] for out in outs] == [bits for *_, bits in cases]
    assert all(out[1:] == [0] * 8 for out in outs)


#: TV13's operands (TV12's Wt, docs/specs/equinox.md §7; tests/test_golden_hbfp.py explains this one)
TV13_X = np.array([[1.0, 0.5, -0.25, 0.125], [3.0, 0.1, -0.3, 2.5]], dtype=np.float32)
TV13_WT = np.array([[1.0, -0.5], [0.25, 2.0], [-1.0, 0.75], [0.5, -2.0]], dtype=np.float32)


@pytest.mark.parametrize("n, w", [(2, 2), (4, 1), (1, 4), (1, 2), (2, 1)])
def test_tv13_through_the_array(n, w):
    """T = 4 and T = 2 both give the spec's result."""
    run = array_matmul(ArrayConfig(n=n, w=w), TV13_X, TV13_WT, gaps=0.2, stalls=0.2)
    assert run.out.tolist() == [[0x3FB8, 0x3D80], [0x4093, 0xC0D2]]


def test_zero_activation_block_gives_plus_zero():
    """§2.4: e_act = 0 (all-zero block) gives +0 whatever the tile exponent."""
    cfg = ArrayConfig(n=2, w=2)
    gen = np.random.default_rng(1)
    b = gen.integers(-128, 128, 4)
    accs, outs = _directed(cfg, [(np.zeros(4, np.int64), b, 0, 254)])
    assert accs == [([0, 0], 254)] and outs == [[0, 0]]


# ---------------------------------------------------------------------------- timing contract

def _stream(cfg, gen, count, stalls=0.0):
    """``count`` random vectors back to back against one random slice, with ``en`` stalls;
    the inputs, the outputs and the model's partial sums after each cycle."""
    n, w = cfg.n, cfg.w
    lo, hi = -(1 << (cfg.x_bits - 1)), 1 << (cfg.x_bits - 1)
    W = gen.integers(lo, hi, (n, n, w))           # W[r, c] = PE(r, c)'s weights
    acts = gen.integers(lo, hi, (count, cfg.T))
    beats = [ArrayIn(wt_valid=True, wt_row=r, wt=W[r], wt_exp=100) for r in range(n)]
    for q in range(count):
        while len(beats) <= q + 1:
            beats.append(ArrayIn())
        beats[q + 1].act_valid, beats[q + 1].act, beats[q + 1].act_exp = True, acts[q], 20 + q
    beats += [ArrayIn() for _ in range(n + cfg.conv_lat + 2)]
    inputs = []
    for b in beats:
        if gen.random() < stalls:
            inputs.append(ArrayIn(en=False, act_valid=True, act=gen.integers(lo, hi, cfg.T),
                                  wt_valid=True, wt_row=0, wt=gen.integers(lo, hi, (n, w))))
        inputs.append(b)
    sim = ArraySim(cfg)
    outs, psums = [], []
    for i in inputs:
        outs.append(sim.cycle(i))
        psums.append(sim.psum.copy())
    return W, acts, inputs, outs, psums


@pytest.mark.parametrize("cfg", [ArrayConfig(n=3, w=2, conv_lat=L) for L in (0, 1, 2)]
                         + [ArrayConfig(n=4, w=1)], ids=_label)
@pytest.mark.parametrize("stalls", [0.0, 0.4])
def test_psum_timing(cfg, stalls):
    """Vector b accepted in enabled cycle β: row r's partial sum (chunks 0..r against rows
    0..r) is in its register after cycle β + r; acc_valid with the full sums and esum in
    β + n; out_valid with their bf16 values in β + n + conv_lat."""
    n, w = cfg.n, cfg.w
    gen = np.random.default_rng(7)
    W, acts, inputs, outs, psums = _stream(cfg, gen, 5, stalls)
    en_cycles = [t for t, i in enumerate(inputs) if i.en]     # beat -> cycle
    accepted = [en_cycles.index(t) for t, i in enumerate(inputs) if i.en and i.act_valid]
    assert accepted == [1, 2, 3, 4, 5]
    acc_beats = [b for b, t in enumerate(en_cycles) if outs[t].acc_valid]
    out_beats = [b for b, t in enumerate(en_cycles) if outs[t].out_valid]
    assert acc_beats == [b + n for b in accepted]
    assert out_beats == [b + n + cfg.conv_lat for b in accepted]
    for q, beta in enumerate(accepted):
        chunks = acts[q].reshape(n, w)
        partial = np.zeros(n, np.int64)
        for r in range(n):
            partial = partial + W[r] @ chunks[r]
            assert (psums[en_cycles[beta + r]][r] == partial).all(), (q, r)
        o = outs[en_cycles[beta + n]]
        assert o.acc.tolist() == partial.tolist() and o.esum == 20 + q + 100
        bf = outs[en_cycles[beta + n + cfg.conv_lat]].out
        assert bf.tolist() == [acc_to_bf16(int(v), 120 + q) for v in partial]


def test_stalled_cycles_change_nothing():
    """en = 0: every register holds whatever the other inputs carry."""
    cfg = ArrayConfig(n=3, w=2, conv_lat=2)
    gen = np.random.default_rng(3)
    _, _, inputs, _, _ = _stream(cfg, gen, 4)
    sim = ArraySim(cfg)
    for i in inputs[:5]:
        sim.step(i)
    before = copy.deepcopy(sim.__dict__)
    for _ in range(5):
        sim.step(ArrayIn(en=False, act_valid=True, act=gen.integers(-128, 128, 6), act_exp=9,
                         wt_valid=True, wt_row=0, wt=gen.integers(-128, 128, (3, 2)),
                         wt_exp=77))
    after = sim.__dict__
    for key, value in before.items():
        if key == "cfg" or key == "_norm":
            continue
        assert repr(after[key]) == repr(value), key


def test_rows_beyond_n_are_ignored():
    cfg = ArrayConfig(n=3, w=2)
    sim = ArraySim(cfg)
    sim.step(ArrayIn(wt_valid=True, wt_row=3, wt=np.ones((3, 2), np.int64), wt_exp=5))
    assert not sim.wreg.any() and sim.e_w == 0
    sim.step(ArrayIn(wt_valid=True, wt_row=0, wt=np.ones((3, 2), np.int64), wt_exp=5))
    assert sim.wreg[0].all() and not sim.wreg[1:].any() and sim.e_w == 5


@pytest.mark.parametrize("cfg", [ArrayConfig(n=4, w=2), ArrayConfig(n=2, w=3, conv_lat=2)],
                         ids=_label)
def test_fifo_occupancy(cfg):
    """fifo_level = vectors accepted in the last n enabled cycles, never above n; a steady
    back-to-back stream keeps it at n."""
    gen = np.random.default_rng(11)
    X, Wt = _matrices(gen, cfg.n, 3 * cfg.T, 2 * cfg.T)
    for gaps, stalls in ((0.0, 0.0), (0.4, 0.4)):
        run = array_matmul(cfg, X, Wt, gaps=gaps, stalls=stalls, seed=5)
        beat, acc_beats, levels = 0, set(), []
        for i, o in zip(run.inputs, run.outputs):
            want = sum(1 for b in range(beat - cfg.n, beat) if b in acc_beats)
            assert o.fifo_level == want <= cfg.n
            levels.append(o.fifo_level)
            if i.en:
                if i.act_valid:
                    acc_beats.add(beat)
                beat += 1
        if not gaps:
            assert max(levels) == cfg.n


def test_stalls_do_not_change_results():
    """The same GEMM with and without en stalls: identical outputs in the enabled cycles."""
    cfg = ArrayConfig(n=3, w=2, conv_lat=2)
    gen = np.random.default_rng(4)
    X, Wt = _matrices(gen, 4, 13, 7)
    plain = array_matmul(cfg, X, Wt, gaps=0.3, seed=9)
    stalled = array_matmul(cfg, X, Wt, gaps=0.3, stalls=0.5, seed=9)
    assert stalled.cycles > plain.cycles
    assert (plain.out == stalled.out).all() and (plain.partials == stalled.partials).all()
    enabled = [o for i, o in zip(stalled.inputs, stalled.outputs) if i.en]
    assert repr(enabled) == repr(plain.outputs)


# ---------------------------------------------------------------------------- weight reload

def _shift_wavefronts(run, cfg, delta):
    """The run's inputs with every weight write moved by ``delta`` cycles (no stalls)."""
    inputs = [copy.copy(i) for i in run.inputs] + [ArrayIn() for _ in range(abs(delta))]
    writes = [(t, i.wt_row, i.wt, i.wt_exp) for t, i in enumerate(run.inputs) if i.wt_valid]
    for i in inputs:
        i.wt_valid = False
    for t, row, wt, e in writes:
        i = inputs[max(0, t + delta)]
        i.wt_valid, i.wt_row, i.wt, i.wt_exp = True, row, wt, e
    return inputs


def test_jit_reload_back_to_back():
    """Batches of n vectors stream with no bubble across slice switches; the wavefront of
    slice s + 1 writes row r in the cycle of row r's last MAC with slice s (L + r).  One
    cycle later or earlier is wrong: the contract's bounds are tight."""
    cfg = ArrayConfig(n=3, w=2)
    gen = np.random.default_rng(8)
    X, Wt = _matrices(gen, 3, 2 * cfg.T, 2 * cfg.T)
    run = array_matmul(cfg, X, Wt)
    want = hbfp_matmul(X, Wt, cfg.T)
    assert (run.out == want).all()
    n_vec = 3 * 2 * 2 * cfg.w
    assert run.accepted == list(range(1, 1 + n_vec))           # no bubble
    last = run.accepted[cfg.n - 1::cfg.n][:-1]                 # each slice's last vector
    for L in last:
        assert [(run.inputs[L + r].wt_valid, run.inputs[L + r].wt_row)
                for r in range(cfg.n)] == [(True, r) for r in range(cfg.n)]
    assert [(i.wt_valid, i.wt_row) for i in run.inputs[:cfg.n]] == \
        [(True, r) for r in range(cfg.n)]
    for delta in (1, -1):
        sim = ArraySim(cfg)
        outs = [sim.cycle(i) for i in _shift_wavefronts(run, cfg, delta)]
        accs = [o.acc.tolist() for o in outs if o.acc_valid]
        good = [o.acc.tolist() for o in run.outputs if o.acc_valid]
        assert accs != good, delta


# ---------------------------------------------------------------------------- helpers, errors

@pytest.mark.parametrize("x_bits", [2, 4, 8, 12])
def test_dot_operands(x_bits):
    gen = np.random.default_rng(x_bits)
    T = 40
    big = 1 << (x_bits - 1)
    hi_reach, lo_reach = (T - 2) * big * big, -(T - 2) * big * (big - 1)
    targets = gen.integers(lo_reach, hi_reach + 1, 50).tolist()
    for target in [0, 1, -1, hi_reach, lo_reach] + targets:
        a, b = dot_operands(target, T, x_bits)
        assert len(a) == len(b) == T
        lo, hi = -(1 << (x_bits - 1)), (1 << (x_bits - 1)) - 1
        assert a.min() >= lo and a.max() <= hi and b.min() >= lo and b.max() <= hi
        assert int(np.dot(a, b)) == target
    with pytest.raises(ArrayInputError, match="dot product"):
        dot_operands(T * (1 << (2 * x_bits - 2)) + 1, T, x_bits)


def test_step_input_errors():
    cfg = ArrayConfig(n=2, w=2)
    sim = ArraySim(cfg)
    bad = [
        (ArrayIn(act=[1, 2, 3]), "act must hold 4"),
        (ArrayIn(act=[0, 0, 0, 128]), "outside the 8-bit"),
        (ArrayIn(act=[0.5, 0, 0, 0]), "integer mantissas"),
        (ArrayIn(wt=np.zeros((2, 3), np.int64)), "wt must hold 4"),
        (ArrayIn(act_exp=256), "act_exp = 256"),
        (ArrayIn(wt_exp=-1), "wt_exp = -1"),
        (ArrayIn(wt_row=2), "wt_row = 2"),
    ]
    for i, msg in bad:
        with pytest.raises(ArrayInputError, match=msg):
            sim.step(i)
    assert issubclass(ArrayInputError, HBFPInputError)


def test_gemm_input_errors():
    cfg = ArrayConfig(n=2, w=2)
    ex, Mx = quantize_activations(np.ones((2, 4), np.float32), 4)
    ew, Mw = quantize_weights(np.ones((4, 4), np.float32), 4)
    with pytest.raises(ArrayInputError, match="T=4"):
        array_gemm(cfg, ex, Mx[:, :, :2], ew, Mw)
    with pytest.raises(ArrayInputError, match="K-tiles"):
        array_gemm(cfg, ex, Mx, np.zeros((2, 1), np.int64), Mw)
    with pytest.raises(ArrayInputError, match="0..254"):
        array_gemm(cfg, ex + 128, Mx, ew, Mw)
    with pytest.raises(ArrayInputError, match="two's complement"):
        array_gemm(cfg, ex, Mx * 4, ew, Mw)
    with pytest.raises(ArrayInputError, match="models"):
        array_gemm(cfg, ex, Mx, ew, Mw, sim=ArraySim(ArrayConfig(n=2, w=3)))
    busy = ArraySim(cfg)
    busy.step(ArrayIn(act_valid=True))
    with pytest.raises(ArrayInputError, match="in flight"):
        array_gemm(cfg, ex, Mx, ew, Mw, sim=busy)

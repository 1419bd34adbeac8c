"""Testbench of Equinox's systolic array (``equinox.array``) against the golden cycle model
(:class:`golden.equinox.ArraySim`) and :func:`golden.equinox.hbfp.hbfp_matmul`.

Every test plans its cycles on the golden model (:func:`golden.equinox.array_gemm` for GEMMs:
just-in-time weight wavefronts, vectors, random bubbles and ``en`` stalls carrying random data
the array must ignore; hand-built cycles for the directed vectors), then drives the same inputs
into the array cycle by cycle.  In every cycle ``acc_valid``, ``out_valid`` and ``fifo_level``
must equal the model's, and when valid ``acc``, ``esum`` and ``out`` too.  Independently of the
model, every cycle also checks the timing contract from the inputs alone: a vector accepted in
enabled cycle β leaves as ``acc`` in enabled cycle β + n and as ``out`` in β + n + conv_lat, and
``fifo_level`` counts the vectors in flight (never more than n).  Spec vectors (TV8, TV9, TV10)
are asserted against the spec's constants; GEMMs end to end against ``hbfp_matmul``, summing the
array's own bf16 outputs.

The random part's size (:func:`tb.common.test_size`) counts input vectors.
"""

import functools

import cocotb
import numpy as np
from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge

from golden.equinox import ArrayConfig, ArrayIn, ArraySim, array_matmul, dot_operands
from golden.equinox.hbfp import acc_to_bf16, bf16_add, hbfp_matmul, quantize_activations
from hdl.equinox.array import act_layout, wt_layout

from ..common import config_from_env, rng, start, test_size, uint

# ---------------------------------------------------------------------------------------------
# driving and reading the ports

@functools.cache
def _offsets(cfg: ArrayConfig):
    """Bit offsets of the struct ports' fields, from the RTL's own layouts."""
    a, w = act_layout(cfg), wt_layout(cfg)
    return {"act_exp": a["exp"].offset, "act_man": a["man"].offset,
            "wt_row": w["row"].offset, "wt_exp": w["exp"].offset, "wt_man": w["man"].offset}


def _pack_mantissas(values, X: int, offset: int) -> int:
    mask = (1 << X) - 1
    word = 0
    for k, v in enumerate(np.asarray(values, np.int64).reshape(-1).tolist()):
        word |= (v & mask) << (offset + k * X)
    return word


def drive(dut, cfg: ArrayConfig, i: ArrayIn) -> None:
    off = _offsets(cfg)
    X = cfg.x_bits
    zeros = np.zeros(cfg.T, np.int64)
    dut.en.value = int(i.en)
    dut.act_valid.value = int(i.act_valid)
    dut.act.value = (_pack_mantissas(zeros if i.act is None else i.act, X, off["act_man"])
                     | (i.act_exp << off["act_exp"]))
    dut.wt_valid.value = int(i.wt_valid)
    dut.wt.value = (_pack_mantissas(zeros if i.wt is None else i.wt, X, off["wt_man"])
                    | (i.wt_exp << off["wt_exp"]) | (i.wt_row << off["wt_row"]))


def _lanes(handle, n: int, width: int, signed: bool = False) -> list[int]:
    v = uint(handle)
    out = []
    for k in range(n):
        x = (v >> (k * width)) & ((1 << width) - 1)
        if signed and x >> (width - 1):
            x -= 1 << width
        out.append(x)
    return out


class Trace:
    """What the array produced in a replay: ``acc``/``esum`` rows and bf16 rows with the
    cycles they were transferred in (``valid & en``)."""

    def __init__(self):
        self.accs, self.esums, self.acc_cycles = [], [], []
        self.outs, self.out_cycles = [], []


async def replay(dut, cfg: ArrayConfig, inputs, outputs, where: str) -> Trace:
    """Drive ``inputs``; compare every cycle with the model's ``outputs`` and with the timing
    contract computed from the inputs alone (see the module docstring)."""
    n, L = cfg.n, cfg.conv_lat
    trace = Trace()
    beat = 0                  # enabled cycles so far
    accepted = set()          # beats of the accepted vectors
    for t, (i, want) in enumerate(zip(inputs, outputs)):
        drive(dut, cfg, i)
        await ReadOnly()
        at = f"{where}: cycle {t}"
        got = (uint(dut.acc_valid), uint(dut.out_valid), uint(dut.fifo_level))
        exp = (int(want.acc_valid), int(want.out_valid), want.fifo_level)
        assert got == exp, f"{at}: acc_valid/out_valid/fifo_level {got}, model {exp}"
        # the contract, from the inputs: vectors in flight, rows leaving at β + n (+ conv_lat)
        in_flight = sum(1 for b in range(beat - n, beat) if b in accepted)
        assert got[2] == in_flight <= n, \
            f"{at}: fifo_level {got[2]}, {in_flight} vectors in flight (n = {n})"
        assert got[0] == (beat - n in accepted), f"{at}: acc_valid {got[0]} at beat {beat}"
        assert got[1] == (beat - n - L in accepted), f"{at}: out_valid {got[1]} at beat {beat}"
        if want.acc_valid:
            acc = _lanes(dut.acc, n, cfg.acc_bits, signed=True)
            esum = uint(dut.esum)
            assert (acc, esum) == ([int(v) for v in want.acc], want.esum), \
                f"{at}: acc {acc} esum {esum}, model {list(want.acc)} esum {want.esum}"
            if i.en:
                trace.accs.append(acc)
                trace.esums.append(esum)
                trace.acc_cycles.append(t)
        if want.out_valid:
            out = _lanes(dut.out, n, 16)
            assert out == [int(v) for v in want.out], \
                f"{at}: out {[hex(v) for v in out]}, model {[hex(int(v)) for v in want.out]}"
            if i.en:
                trace.outs.append(out)
                trace.out_cycles.append(t)
        if i.en:
            if i.act_valid:
                accepted.add(beat)
            beat += 1
        await FallingEdge(dut.clk)
    return trace


def planned(cfg: ArrayConfig, inputs: list, sim: ArraySim | None = None):
    """The model's outputs for a hand-built cycle list (from ``sim``'s state or reset)."""
    sim = sim or ArraySim(cfg)
    return [sim.cycle(i) for i in inputs]


def wavefront(cfg: ArrayConfig, beats: list, tau: int, rows, exp: int) -> None:
    """Schedule the weight rows of a slice (``rows[r]``: ``n x w``) at beats ``tau + r``."""
    for r in range(cfg.n):
        while len(beats) <= tau + r:
            beats.append(ArrayIn())
        b = beats[tau + r]
        b.wt_valid, b.wt_row, b.wt, b.wt_exp = True, r, rows[r], exp


def directed_dots(cfg: ArrayConfig, cases):
    """Cycles that put each case ``(a, b, e_act, e_w)`` through column 0 (``a``, ``b``: ``T``
    mantissas; the other columns hold zero weights): one slice per case, a wavefront every
    ``n`` cycles, the vector right after its wavefront started."""
    n, w = cfg.n, cfg.w
    beats = []
    for q, (a, b, e_act, e_w) in enumerate(cases):
        tau = q * n
        rows = np.zeros((n, n, w), np.int64)
        rows[:, 0, :] = np.asarray(b, np.int64).reshape(n, w)
        wavefront(cfg, beats, tau, rows, e_w)
        while len(beats) <= tau + 1:
            beats.append(ArrayIn())
        v = beats[tau + 1]
        v.act_valid, v.act, v.act_exp = True, np.asarray(a, np.int64), e_act
    beats += [ArrayIn() for _ in range(2 * n + cfg.conv_lat + 2)]
    return beats


# ---------------------------------------------------------------------------------------------
# tests

@cocotb.test()
async def tv8_dot_product(dut):
    """TV8 through the array: a = [64, 32, -16, 8] (e 127) against b = [32, 64, 32, -64]
    (e 128) in column 0: acc = 3072, esum = 255, bf16 0x3FC0 (1.5) for hbfp8.  With
    ``n * w < 4`` the blocks span K-tiles (TV8's FP values through ``array_matmul``) and the
    bf16 sum of the array's partials must still be 0x3FC0."""
    cfg = config_from_env(ArrayConfig)
    await start(dut)
    a = np.array([64, 32, -16, 8])
    b = np.array([32, 64, 32, -64])
    if cfg.T >= 4 and cfg.x_bits >= 8:
        A = np.zeros(cfg.T, np.int64)
        Bv = np.zeros(cfg.T, np.int64)
        A[:4], Bv[:4] = a, b
        inputs = directed_dots(cfg, [(A, Bv, 127, 128)])
        trace = await replay(dut, cfg, inputs, planned(cfg, inputs), "TV8")
        assert len(trace.accs) == 1
        assert (trace.accs[0][0], trace.esums[0]) == (3072, 255), (trace.accs[0], trace.esums)
        want = 0x3FC0 if cfg.x_bits == 8 else acc_to_bf16(3072, 255, cfg.x_bits)
        assert trace.outs[0][0] == want, hex(trace.outs[0][0])
        assert trace.outs[0][1:] == [0] * (cfg.n - 1)
    else:
        X = (a * 2.0 ** -6).astype(np.float32)[None, :]      # [1, 0.5, -0.25, 0.125]
        Wt = (b * 2.0 ** -5).astype(np.float32)[:, None]     # [1, 2, 1, -2]
        run = array_matmul(cfg, X, Wt)
        trace = await replay(dut, cfg, run.inputs, run.outputs, "TV8 (K-tiled)")
        total = trace.outs[0][0]
        for row in trace.outs[1:]:
            total = int(bf16_add(total, row[0]))
        want = 0x3FC0 if cfg.x_bits == 8 else \
            int(hbfp_matmul(X, Wt, cfg.T, cfg.x_bits, cfg.acc_bits)[0, 0])
        assert total == want, f"TV8: 0x{total:04X}, expected 0x{want:04X}"


def _bf16_pow2(k: int, negative: bool = False) -> int:
    """bf16 bits of ±2**k (normal range)."""
    return (int(negative) << 15) | ((127 + k) << 7)


def reachable(cfg: ArrayConfig, acc: int) -> bool:
    """Whether the array can produce ``acc`` without wrapping: it fits ``A`` bits and
    :func:`golden.equinox.dot_operands` finds ``T``-lane operands for it."""
    if not -(1 << (cfg.acc_bits - 1)) <= acc < 1 << (cfg.acc_bits - 1):
        return False
    try:
        dot_operands(acc, cfg.T, cfg.x_bits)
    except ValueError:
        return False
    return True


@cocotb.test()
async def tv9_tv10_normalizer(dut):
    """TV9 (rounding at esum = 266) and TV10 (FTZ, saturation, zero) through the array: each
    accumulator is produced by a dot product chosen for it (:func:`golden.equinox.dot_operands`)
    in column 0, and the exponent sum by ``e_act + e_w``; the other columns must give +0.
    Accumulators beyond this array's reach (TV9's ±2**23 need ``n * w >= 513``) are replaced by
    the largest reachable ones of the same kind: ``2**k - 1`` (rounds up to ``2**k``: a carry
    into the exponent) and ``-2**k`` (exact), whose bf16 bits follow from ``k`` alone.  The
    constants are hbfp8's; other mantissa widths are checked against
    :func:`golden.equinox.hbfp.acc_to_bf16`."""
    cfg = config_from_env(ArrayConfig)
    await start(dut)
    cases = [  # (acc, esum, bf16): TV9, then TV10
        (255, 266, 0x437F), (257, 266, 0x4380), (259, 266, 0x4382), (511, 266, 0x4400),
        (-259, 266, 0xC382), (1, 266, 0x3F80), (8388607, 266, 0x4B00),
        (-8388608, 266, 0xCB00),
        (1, 2, 0x0000), (100, 508, 0x7F7F), (-100, 508, 0xFF7F), (0, 508, 0x0000),
        (0, 266, 0x0000), (0, 0, 0x0000),
    ]
    run_cases = []
    for acc, esum, bits in cases:
        if not reachable(cfg, acc):
            neg = acc < 0
            k = max(k for k in range(1, cfg.acc_bits - 1)
                    if reachable(cfg, -(1 << k) if neg else (1 << k) - 1))
            acc = -(1 << k) if neg else (1 << k) - 1
            bits = _bf16_pow2(k, neg) if neg or k >= 9 else None
            cocotb.log.info("TV9: acc out of reach, substitute %d", acc)
        if cfg.x_bits != 8 or bits is None:
            bits = acc_to_bf16(acc, esum, cfg.x_bits)
        run_cases.append((acc, esum, bits))
    dots = []
    for acc, esum, _ in run_cases:
        a, b = dot_operands(acc, cfg.T, cfg.x_bits)
        dots.append((a, b, esum - esum // 2, esum // 2))
    inputs = directed_dots(cfg, dots)
    trace = await replay(dut, cfg, inputs, planned(cfg, inputs), "TV9/TV10")
    assert len(trace.outs) == len(run_cases)
    for (acc, esum, bits), got_acc, got_esum, out in zip(run_cases, trace.accs, trace.esums,
                                                         trace.outs):
        assert (got_acc[0], got_esum) == (acc, esum), (got_acc, got_esum, acc, esum)
        assert out[0] == bits, f"acc {acc} esum {esum}: 0x{out[0]:04X}, spec 0x{bits:04X}"
        assert out[1:] == [0] * (cfg.n - 1), out


def random_matrices(gen, B, K, N):
    X = (gen.standard_normal((B, K)) * np.exp2(gen.integers(-6, 6, (B, K)))).astype(np.float32)
    Wt = (gen.standard_normal((K, N)) * np.exp2(gen.integers(-3, 3, (K, N)))).astype(np.float32)
    X[gen.random(X.shape) < 0.15] = 0.0
    Wt[gen.random(Wt.shape) < 0.1] = 0.0
    if B > 1 and gen.random() < 0.3:
        X[gen.integers(B)] = 0.0                   # a zero block: e_act = 0, result +0
    return X, Wt


async def gemm(dut, cfg, gen, B, K, N, where, gaps=0.0, stalls=0.0, rounding="floor",
               sim=None):
    """One GEMM planned on the model and replayed; the array's bf16 partials summed in
    ascending K must equal ``hbfp_matmul``.  Returns the run and the trace."""
    X, Wt = random_matrices(gen, B, K, N)
    run = array_matmul(cfg, X, Wt, rounding, gaps=gaps, stalls=stalls,
                       seed=int(gen.integers(1 << 30)), sim=sim)
    want = hbfp_matmul(X, Wt, cfg.T, cfg.x_bits, cfg.acc_bits, rounding)
    assert (run.out == want).all(), f"{where}: the array model differs from hbfp_matmul"
    trace = await replay(dut, cfg, run.inputs, run.outputs, where)
    # end to end from the array's own outputs
    kt = run.partials.shape[0]
    parts = np.zeros_like(run.partials)
    assert len(trace.outs) == len(run.tags)
    for (k, b, j, s), row in zip(run.tags, trace.outs):
        c0 = j * cfg.T + s * cfg.n
        parts[k, b, c0:c0 + cfg.n] = row
    total = parts[0]
    for k in range(1, kt):
        total = bf16_add(total, parts[k])
    assert (total[:, :N] == want).all(), f"{where}: the array's result differs from hbfp_matmul"
    return run, trace


@cocotb.test()
async def jit_reload_back_to_back(dut):
    """Batches of exactly n vectors over at least 3 weight slices with no bubble and no stall:
    the vectors enter in consecutive cycles across every slice switch (each wavefront starts
    in the cycle of the slice's last vector), the FIFO fills to n, and the results are
    correct."""
    cfg = config_from_env(ArrayConfig)
    await start(dut)
    gen = np.random.default_rng(rng("jit").getrandbits(64))
    kt = max(2, -(-3 // cfg.w))
    run, trace = await gemm(dut, cfg, gen, cfg.n, kt * cfg.T, cfg.T + 1, "JIT back to back")
    slices = kt * 2 * cfg.w
    assert len(run.accepted) == cfg.n * slices >= 3 * cfg.n
    assert run.accepted == list(range(1, 1 + len(run.accepted))), "a bubble between vectors"
    assert np.diff(trace.acc_cycles).max() == 1 and np.diff(trace.out_cycles).max() == 1
    assert max(o.fifo_level for o in run.outputs) == cfg.n


@cocotb.test()
async def random_gemms(dut):
    """Random GEMMs back to back without reset (shapes with K and N padding, B below and above
    n, several K- and N-tiles, every rounding mode of the quantizer), with random bubbles and
    ``en`` stalls carrying random data, until ``test_size()`` vectors went through; every GEMM
    covers at least 3 weight slices."""
    cfg = config_from_env(ArrayConfig)
    await start(dut)
    gen = np.random.default_rng(rng("random_gemms").getrandbits(64))
    sim = ArraySim(cfg)
    T = cfg.T
    vectors = q = 0
    while vectors < test_size():
        B = int(gen.integers(1, 2 * cfg.n + 2))
        K = int(gen.integers(1, 3 * T + 1))
        N = int(gen.integers(1, 2 * T + 1))
        while -(-K // T) * -(-N // T) * cfg.w < 3:
            K += T
        gaps, stalls = (float(gen.choice([0.0, 0.2, 0.5])) for _ in range(2))
        rounding = str(gen.choice(["floor", "rne", "rtz"]))
        where = f"GEMM {q} {B}x{K}x{N} gaps {gaps} stalls {stalls} {rounding}"
        run, _ = await gemm(dut, cfg, gen, B, K, N, where, gaps, stalls, rounding, sim=sim)
        vectors += len(run.accepted)
        q += 1
    cocotb.log.info("random_gemms: %d GEMMs, %d vectors", q, vectors)


@cocotb.test()
async def reset_with_vectors_in_flight(dut):
    """A reset in the middle of a stream empties the valid line and the FIFO (``acc_valid``,
    ``out_valid`` and ``fifo_level`` read 0); a new GEMM after it runs correctly even though
    the data registers keep their old contents."""
    cfg = config_from_env(ArrayConfig)
    await start(dut)
    gen = np.random.default_rng(rng("reset").getrandbits(64))
    X, Wt = random_matrices(gen, cfg.n + 1, cfg.T, cfg.n)
    run = array_matmul(cfg, X, Wt)
    stop = run.accepted[-1]              # the last vector entered: n vectors in flight
    await replay(dut, cfg, run.inputs[:stop + 1], run.outputs[:stop + 1], "before reset")
    drive(dut, cfg, ArrayIn(en=False))
    dut.rst.value = 1
    await RisingEdge(dut.clk)
    await FallingEdge(dut.clk)
    dut.rst.value = 0
    await ReadOnly()
    got = (uint(dut.acc_valid), uint(dut.out_valid), uint(dut.fifo_level))
    assert got == (0, 0, 0), f"after reset: acc_valid/out_valid/fifo_level {got}"
    await FallingEdge(dut.clk)
    await gemm(dut, cfg, gen, cfg.n, 2 * cfg.T, cfg.T, "after reset", gaps=0.2, stalls=0.2)


@cocotb.test()
async def zero_activation_block(dut):
    """§2.4: a zero activation block (e_act = 0, M = 0) gives +0 in every column whatever the
    weights and tile exponent; next to it the other vectors are unaffected."""
    cfg = config_from_env(ArrayConfig)
    await start(dut)
    gen = np.random.default_rng(rng("zero").getrandbits(64))
    X, Wt = random_matrices(gen, 3, cfg.T, cfg.T)
    X[1] = 0.0
    ex, _ = quantize_activations(X, cfg.T, cfg.x_bits)
    assert ex[1, 0] == 0
    run = array_matmul(cfg, X, Wt)
    trace = await replay(dut, cfg, run.inputs, run.outputs, "zero block")
    for (k, b, j, s), row in zip(run.tags, trace.outs):
        if b == 1:
            assert row == [0] * cfg.n, f"zero block, slice {s}: {[hex(v) for v in row]}"
    assert (run.out == hbfp_matmul(X, Wt, cfg.T, cfg.x_bits, cfg.acc_bits)).all()

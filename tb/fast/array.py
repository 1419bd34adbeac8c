"""Testbench of FAST's fMAC array (``fast.array``) against the golden cycle model
(:class:`golden.fast.array.ArraySim`) and ``golden.fast.numerics.bfp_gemm``.

Each GEMM is planned on the golden model (:func:`golden.fast.array.array_gemm`: stationary
loads, input vectors with random bubbles, tiles, the external accumulator); the same inputs are
then driven into the array cycle by cycle, and ``i.ready``, ``out_valid``, ``error`` and — when
valid — the output vector must equal the model's in every cycle, so an output vector a cycle
early or late (the cells' ``pipeline`` stages, the deskew) fails.  The model's result must equal
``bfp_gemm`` bit for bit (T20; ``gemm_quantized`` on random BFP groups when the configuration's
groups are not FAST's 16 elements).

With ``contexts = C > 1`` every test runs ``C`` GEMMs at once, one per context: each is planned
on its own one-context model (shapes drawn per context in the random GEMMs), the shorter plans
are padded with idle cycles (which their models also take), the plans are interleaved
(:func:`golden.fast.array.interleave`) and the array is checked every cycle against
:class:`golden.fast.array.ArraySlots`, ``slot`` and ``acc_slot`` included.
"""

import functools

import cocotb
import numpy as np
from cocotb.triggers import FallingEdge, ReadOnly

from golden.fast.numerics import (
    FMAC_WIDTHS,
    G,
    Quantized,
    bfp_gemm,
    gemm_quantized,
    quantize_operands,
    rounds,
)
from golden.fast.array import (
    DATAFLOW_CODES,
    ArrayIn,
    ArraySim,
    FMACArrayConfig,
    array_gemm,
    array_sim,
    interleave,
)
from hdl.fast.array import input_layout, load_layout

from ..common import config_from_env, idle, reset, rng, start, test_size, uint
from ..common.layouts import pack
from .fmac import operand_value


@functools.cache
def _layouts(cfg):
    return input_layout(cfg), load_layout(cfg)


def drive(dut, cfg, i: ArrayIn) -> None:
    in_l, ld_l = _layouts(cfg)
    dut.mx.value = i.mx // 2 - 1
    dut.my.value = i.my // 2 - 1
    dut.dataflow.value = DATAFLOW_CODES[i.dataflow] if isinstance(i.dataflow, str) \
        else i.dataflow
    dut.i__valid.value = int(i.valid)
    if i.valid:
        vec = {"first": int(i.first), "last": int(i.last)}
        if i.left is not None:
            vec["left"] = [operand_value(g) for g in i.left]
        if i.bottom is not None:
            vec["bottom"] = [operand_value(g) for g in i.bottom]
        dut.i__payload.value = pack(in_l, vec)
    dut.ld__valid.value = int(i.ld is not None)
    if i.ld is not None:
        r, c, grp = i.ld
        dut.ld__payload.value = pack(ld_l, {"row": r, "col": c, "group": operand_value(grp)})


def _words(handle, n: int) -> list[int]:
    v = uint(handle)
    return [(v >> (32 * k)) & 0xFFFFFFFF for k in range(n)]


async def replay(dut, cfg, inputs, outputs, where: str) -> list[int]:
    """Drive ``inputs`` and compare every cycle with the model's ``outputs``; the cycles in
    which a vector was accepted."""
    accepted = []
    lag = cfg.out_lag
    for t, (i, want) in enumerate(zip(inputs, outputs)):
        drive(dut, cfg, i)
        await ReadOnly()
        got = (uint(dut.i__ready), uint(dut.out_valid), uint(dut.error))
        exp = (int(want.in_ready), int(want.out_valid), int(want.error))
        assert got == exp, f"{where}: cycle {t}: ready/out_valid/error {got}, model {exp}"
        if cfg.contexts > 1:
            got, exp = (uint(dut.slot), uint(dut.acc_slot)), (want.slot, want.acc_slot)
            assert got == exp, f"{where}: cycle {t}: slot/acc_slot {got}, model {exp}"
        if want.out_valid:
            # the outputs are those of the step `lag` cycles back, in its dataflow
            shown = inputs[t - lag].dataflow if t >= lag else i.dataflow
            for name, n in (("right", cfg.rows), ("top", cfg.cols)):
                g = _words(getattr(dut, name), n)
                w = [int(v) for v in getattr(want, name)]
                if name == "top" and shown != "bwd_data":
                    continue
                if name == "right" and shown == "bwd_data":
                    continue
                assert g == w, (f"{where}: cycle {t}: {name} "
                                f"{[hex(v) for v in g]}, model {[hex(v) for v in w]}")
        if want.in_ready and i.valid:
            accepted.append(t)
        await FallingEdge(dut.clk)
    return accepted


def random_matrices(gen, M, K, N):
    def mat(shape):
        x = gen.standard_normal(shape) * np.exp2(gen.integers(-6, 6, shape))
        x[gen.random(shape) < 0.2] = 0.0
        x[gen.random(shape) < 0.05] = -0.0
        return x.astype(np.float32)

    return mat((M, K)), mat((K, N))


def operands(gen, cfg, M, K, N, mx, my, dataflow):
    """Random operands of a GEMM and its golden result: FP32 matrices through ``bfp_gemm`` for
    16-element groups (FAST's), random BFP groups through ``gemm_quantized`` otherwise."""
    if cfg.group == G:
        X, Y = random_matrices(gen, M, K, N)
        xq, yq = quantize_operands(X, Y, mx, my, dataflow)
        return xq, yq, bfp_gemm(X, Y, mx, my, dataflow, "paper", array=(cfg.rows, cfg.cols))
    nG = -(-K // G)

    def quantized(rows, m):
        Es = gen.integers(110, 145, (rows, nG))
        q = gen.integers(0, 1 << m, (rows, nG, cfg.group))
        q[gen.random(q.shape) < 0.2] = 0
        return Quantized(Es, gen.integers(0, 2, q.shape), q, m)

    xq, yq = quantized(M, mx), quantized(N, my)
    return xq, yq, gemm_quantized(xq, yq, dataflow, "paper", array=(cfg.rows, cfg.cols))


class Plans:
    """The models of a run of GEMMs on the array: one one-context model per context (which
    plans that context's GEMMs) and the model of the whole array (:func:`array_sim`)."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.one = cfg.one_context() if cfg.contexts > 1 else cfg
        self.sims = [ArraySim(self.one) for _ in range(cfg.contexts)]
        self.array = array_sim(cfg)


async def gemm(dut, cfg, gen, M, K, N, mx, my, dataflow, gaps, where, plans=None,
               shapes=None):
    """One random GEMM per context planned on the golden models and replayed on the array;
    the accept cycles.  ``shapes`` gives each context's ``(M, K, N)`` (default: ``M, K, N``
    for every one).  Without ``plans`` the models and the array start from reset; with it,
    all continue from the state the earlier GEMMs left (``plans`` holds the models that
    planned them)."""
    C = cfg.contexts
    fresh = plans is None
    plans = plans or Plans(cfg)
    shapes = shapes or [(M, K, N)] * C
    runs = []
    for k, (sim, (m_, k_, n_)) in enumerate(zip(plans.sims, shapes)):
        xq, yq, want = operands(gen, plans.one, m_, k_, n_, mx, my, dataflow)
        run = array_gemm(plans.one, xq, yq, dataflow, gaps=gaps,
                         seed=int(gen.integers(1 << 30)), sim=sim)
        assert (run.out == want).all(), \
            f"{where}: context {k}: the array model differs from the GEMM model"
        runs.append(run)
    # the shorter plans idle until the longest ends (their models take those cycles too)
    n = max(len(run.inputs) for run in runs)
    for run, sim in zip(runs, plans.sims):
        while len(run.inputs) < n:
            run.inputs.append(ArrayIn(mx=mx, my=my, dataflow=dataflow))
            run.outputs.append(sim.cycle(run.inputs[-1]))
    inputs = interleave(cfg, [run.inputs for run in runs]) if C > 1 else runs[0].inputs
    outputs = [plans.array.cycle(i) for i in inputs]
    if fresh:
        idle(dut)
        await reset(dut)
    return await replay(dut, cfg, inputs, outputs, where)


def widths(cfg, fast_only=True):
    """The run-time widths the array holds: FAST's 2 and 4 (T20), or every fMAC width."""
    return [m for m in ((2, 4) if fast_only else FMAC_WIDTHS) if m <= cfg.m_max]


@cocotb.test()
async def t20_every_dataflow_and_width(dut):
    """T20: a GEMM in FWD, BWD-DATA and WGRAD at every (mx, my) in {2, 4}² (that ``m_max``
    allows), with a partial K-tile, more output columns than one tile holds and random
    bubbles."""
    cfg = config_from_env(FMACArrayConfig)
    await start(dut)
    gen = np.random.default_rng(rng("t20").getrandbits(64))
    for df in DATAFLOW_CODES:
        tile = cfg.rows if df == "bwd_data" else cfg.cols
        out_w = cfg.cols if df == "bwd_data" else cfg.rows
        for mx in widths(cfg):
            for my in widths(cfg):
                M = 3 if df != "wgrad" else cfg.rows + 1
                K = 16 * (tile + 1) - 5 if df != "wgrad" else 40
                N = out_w + 1 if df != "wgrad" else cfg.cols
                await gemm(dut, cfg, gen, M, K, N, mx, my, df, 0.25, f"T20 {df} ({mx}, {my})")


@cocotb.test()
async def steady_state_throughput(dut):
    """With no bubbles, the array takes one input vector every ``rounds(mx, my)`` cycles: one
    group pair per cell per beat (every context one in its own cycles: one every
    ``contexts × rounds(mx, my)``)."""
    cfg = config_from_env(FMACArrayConfig)
    await start(dut)
    gen = np.random.default_rng(rng("throughput").getrandbits(64))
    for df in DATAFLOW_CODES:
        for mx, my in {(widths(cfg)[-1], widths(cfg)[-1]), (2, widths(cfg)[-1])}:
            tile = cfg.rows if df == "bwd_data" else cfg.cols
            out_w = cfg.cols if df == "bwd_data" else cfg.rows
            M, K, N = (cfg.rows, 16 * 8, cfg.cols) if df == "wgrad" else (8, 16 * tile, out_w)
            acc = await gemm(dut, cfg, gen, M, K, N, mx, my, df, 0.0, f"throughput {df}")
            C = cfg.contexts
            for k in range(C):
                got = [t for t in acc if t % C == k]
                assert len(got) == 8 and set(np.diff(got)) == {C * rounds(mx, my)}, \
                    f"throughput {df} ({mx}, {my}): context {k}: vectors accepted at {got}"


@cocotb.test()
async def random_gemms(dut):
    """Random GEMMs back to back with no reset between them (the unit's test size counts them):
    random widths (every fMAC width up to ``m_max``), shapes and bubble rates; the dataflows go FWD, WGRAD, BWD-DATA, WGRAD, then
    at random, so WGRAD starts from the partial sums the other dataflows leave behind."""
    cfg = config_from_env(FMACArrayConfig)
    await start(dut)
    gen = np.random.default_rng(rng("random_gemms").getrandbits(64))
    plans = Plans(cfg)
    order = ["fwd", "wgrad", "bwd_data", "wgrad"]
    for k in range(test_size()):
        df = order[k] if k < len(order) else list(DATAFLOW_CODES)[int(gen.integers(3))]
        mx, my = (int(gen.choice(widths(cfg, False))) for _ in range(2))
        shapes = [(int(gen.integers(1, 5)), int(gen.integers(1, 16 * (cfg.rows + cfg.cols))),
                   int(gen.integers(1, 6))) for _ in range(cfg.contexts)]
        await gemm(dut, cfg, gen, *shapes[0], mx, my, df, float(gen.choice([0.0, 0.3, 0.7])),
                   f"random GEMM {k} {df} ({mx}, {my}) {shapes}", plans=plans, shapes=shapes)


@cocotb.test()
async def illegal_inputs_set_error(dut):
    """The sticky error, cycle by cycle with the model: dataflow code 3, a width above
    ``m_max``, a load outside the array (when the address ports can express one)."""
    cfg = config_from_env(FMACArrayConfig)
    ok = ArrayIn(mx=2, my=2)
    cases = [("dataflow 3", ArrayIn(dataflow=3, mx=2, my=2))]
    if cfg.m_max < 8:
        cases.append(("width", ArrayIn(mx=cfg.m_max + 2, my=2)))
    if cfg.rows & (cfg.rows - 1):
        cases.append(("load row", ArrayIn(mx=2, my=2, ld=(cfg.rows, 0, (1, [0] * cfg.group,
                                                                      [1] * cfg.group)))))
    await start(dut)
    for name, bad in cases:
        idle(dut)
        await reset(dut)
        sim = array_sim(cfg)
        seq = [ok, bad, ok, ok]
        outs = [sim.cycle(i) for i in seq]
        assert [o.error for o in outs] == [False, False, True, True], name
        await replay(dut, cfg, seq, outs, f"error: {name}")
    assert uint(dut.error) == 1

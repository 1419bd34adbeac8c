"""Testbench of the FPRaker tile (``fpraker.tile``) against ``golden.fpraker.tile.tile_run``,
through the shared tile driver (:mod:`tb.common.tile`).

Every reduction's read-outs must equal the golden model's bit for bit, under either column
protocol (``sync``).  Without stream bubbles the tile must also be cycle-exact: its busy cycles
equal the golden ``cycles``, and the per-cycle trace (lanes processed, lanes held by the shift
window, PEs not yet served by their exponent block, with ``sync = "independent"`` PEs waiting
for their column's slowest PE, idle columns) adds up to the golden stall counts: ``useful``,
``shift_range``, ``exponent_block``, ``column_wait`` and ``inter_column`` exactly,
``lock_step + no_term`` as their sum (the trace does not tell those two apart).

The C-slow tile (``contexts > 1``) is refused here: it is the one-context tile transformed
(:func:`hdl.common.cslow.c_slow`), and ``tests/test_cslow.py`` checks it against the
one-context tile cycle by cycle.
"""

import cocotb
import numpy as np
from cocotb.triggers import FallingEdge, ReadOnly

from tb.common.power import power_test
from golden.common import float_to_bf16
from golden.fpraker.tile import TileConfig, tile_run

from ..common import config_from_env, rng, start, test_size, uint
from ..common.tile import TileDriver, expect, operands, power_stream, random_sweep


async def setup(dut):
    cfg = config_from_env(TileConfig)
    if cfg.contexts > 1:
        raise ValueError(f"fpraker.tile testbench: contexts={cfg.contexts}: it checks the "
                         "one-context tile against the golden model; the C-slow tile is that "
                         "tile transformed, checked against it cycle by cycle in "
                         "tests/test_cslow.py")
    await start(dut)
    return cfg, TileDriver(dut, cfg.rows, cfg.cols, cfg.lanes)


class TraceCounter:
    """Counts the trace's lane classes in the cycles in which ``busy`` is high."""

    def __init__(self, dut, cfg):
        self.dut, self.cfg = dut, cfg
        self.counts = dict.fromkeys(("useful", "shift_range", "exponent_block", "column_wait",
                                     "inter_column", "other"), 0)
        self.running = True

    async def watch(self):
        dut, cfg = self.dut, self.cfg
        R, C, L = cfg.rows, cfg.cols, cfg.lanes
        while self.running:
            await FallingEdge(dut.clk)
            await ReadOnly()
            if not uint(dut.busy):
                continue
            working = uint(dut.trace__working)
            started = uint(dut.trace__started)
            waiting = uint(dut.trace__waiting) if cfg.sync == "independent" else 0
            for r in range(R):
                for c in range(C):
                    n = r * C + c
                    if not working >> c & 1:
                        self.counts["inter_column"] += L
                    elif not started >> n & 1:
                        self.counts["exponent_block"] += L
                    elif waiting >> n & 1:
                        self.counts["column_wait"] += L
                    else:
                        proc = bin(uint(getattr(dut, f"trace__proc__{n}"))).count("1")
                        shift = bin(uint(getattr(dut, f"trace__shift__{n}"))).count("1")
                        self.counts["useful"] += proc
                        self.counts["shift_range"] += shift
                        self.counts["other"] += L - proc - shift

    def expect(self, want, where):
        s = want.stalls
        golden = {"useful": want.useful, "shift_range": s["shift_range"],
                  "exponent_block": s["exponent_block"], "column_wait": s["column_wait"],
                  "inter_column": s["inter_column"],
                  "other": s["lock_step"] + s["no_term"]}
        assert self.counts == golden, f"{where}: stall counts {self.counts}, golden {golden}"


async def reduction(drv, cfg, A, B, where: str, r=None, gaps: bool = False, trace=False):
    """One reduction through the driver, checked against the golden tile (results always;
    cycles and, with ``trace``, stall counts when there are no gaps); returns the golden
    result."""
    want = tile_run(A, B, cfg)
    kw = {}
    if gaps:
        kw = {"gap_a": [r.choice((0.0, 0.1, 0.3, 0.6)) for _ in range(cfg.cols)],
              "gap_b": [r.choice((0.0, 0.1, 0.3, 0.6)) for _ in range(cfg.rows)], "rnd": r}
    counter = None
    if trace and not gaps:
        counter = TraceCounter(drv.dut, cfg)
        task = cocotb.start_soon(counter.watch())
    got = await drv.run(A, B, max_cycles=60 * A.shape[1] * cfg.lanes + 100, **kw)
    if counter is not None:
        counter.running = False
        await FallingEdge(drv.dut.clk)
        task.cancel()
    expect(got.out, want.out, where, A, B)
    if not gaps:
        assert got.busy_cycles == want.cycles, \
            f"{where}: {got.busy_cycles} busy cycles, golden {want.cycles}"
        if counter is not None:
            counter.expect(want, where)
    assert uint(drv.dut.error) == 0, f"{where}: error set without an exponent-255 operand"
    return want


@cocotb.test()
async def directed_reductions(dut):
    """TV14 (one group of ones / of zeros: 2 cycles with exponent sharing, 1 without), exact
    distinct products per PE (row and column wiring), zeros and denormals, read-out overflow."""
    cfg, drv = await setup(dut)
    R, C, L = cfg.rows, cfg.cols, cfg.lanes
    assert (drv.read_out() == 0).all(), "outputs after reset must read +0"
    assert uint(dut.busy) == 0 and uint(dut.error) == 0
    want_cycles = (2 if cfg.share_exp else 1) + cfg.pipeline  # TV14, one more per stage
    for what, a in (("ones", 0x3F80), ("zeros", 0x0000)):
        A = np.full((C, 1, L), a)
        B = np.full((R, 1, L), 0x4000)
        got = await reduction(drv, cfg, A, B, f"TV14 {what}", trace=True)
        assert got.cycles == want_cycles, f"TV14 {what}: golden {got.cycles} cycles"
    A = np.zeros((C, 1, L), dtype=np.int64)
    B = np.zeros((R, 1, L), dtype=np.int64)
    A[:, 0, 0] = float_to_bf16(np.arange(1, C + 1, dtype=np.float32))
    B[:, 0, 0] = float_to_bf16(np.arange(1, R + 1, dtype=np.float32))
    want = await reduction(drv, cfg, A, B, "distinct products", trace=True)
    exact = float_to_bf16(np.outer(np.arange(1, R + 1), np.arange(1, C + 1)).astype(np.float32))
    expect(want.out, exact, "golden distinct products")
    await reduction(drv, cfg, np.full((C, 2, L), 0x0001), np.full((R, 2, L), 0x8000),
                    "zeros and denormals", trace=True)
    await reduction(drv, cfg, np.full((C, 1, L), 0x7F00), np.full((R, 1, L), 0x7F00),
                    "overflow")


@cocotb.test()
async def random_reductions(dut):
    """Random reductions of 1-24 groups, back to back: value sparsity swept from dense to 90 %
    zeros, mantissas with zero suffixes (term sparsity) in half of them, random valid gaps per
    stream in half of them; the stall counts are checked on the runs without gaps.
    ``TRAINFAB_TEST_SIZE`` groups in total."""
    cfg, drv = await setup(dut)
    r = rng("random_reductions")
    nprng = np.random.default_rng(r.randrange(1 << 30))

    async def one(k, A, B, zeros, suffix, gaps, kind):
        await reduction(drv, cfg, A, B, f"reduction {k} ({A.shape[1]} groups of {kind}, "
                        f"{zeros:.0%} zeros, suffix={suffix}, gaps={gaps})", r, gaps,
                        trace=k % 3 == 0)

    await random_sweep(cfg, r, nprng, test_size(), 24, one, "random_reductions",
                       kinds=("mix", "normal", "relu", "wide", "cancel", "narrow"))


@cocotb.test()
async def clear_back_to_back(dut):
    """Two reductions in one stream (the second starts with ``clear``), with and without
    gaps: the second's read-outs equal a fresh golden run of its groups."""
    cfg, drv = await setup(dut)
    r = rng("clear_back_to_back")
    nprng = np.random.default_rng(r.randrange(1 << 30))
    C = cfg.cols
    for gaps in (False, True):
        kw = {"gap_a": 0.3, "gap_b": 0.3, "rnd": r} if gaps else {}
        A, B = operands(nprng, cfg, 9)
        clear = np.zeros((C, 9), dtype=bool)
        clear[:, 0] = clear[:, 4] = True
        got = await drv.run(A, B, clear=clear, **kw)
        want = tile_run(A[:, 4:], B[:, 4:], cfg)
        expect(got.out, want.out, f"second of two back-to-back reductions (gaps={gaps})")


@cocotb.test()
async def error_flag(dut):
    """An exponent-255 operand sets the sticky ``error`` (only reset clears it)."""
    cfg, drv = await setup(dut)
    C, R, L = cfg.cols, cfg.rows, cfg.lanes
    A = np.full((C, 1, L), 0x3F80)
    B = np.full((R, 1, L), 0x3F80)
    await drv.run(A, B)
    assert uint(dut.error) == 0
    A[C - 1, 0, L - 1] = 0x7F80
    await drv.run(A, B)
    assert uint(dut.error) == 1, "Inf operand did not set error"
    await drv.run(np.full((C, 1, L), 0x3F80), B)
    assert uint(dut.error) == 1, "error is not sticky"


@power_test
async def power_run(dut):
    """``trainfab power``: :func:`tb.common.tile.power_stream` against the golden tile."""
    cfg, drv = await setup(dut)
    await power_stream(drv, cfg, tile_run)

"""Testbench of the bit-parallel bfloat16 baseline tile (``baseline.bf16_tile``) against
``golden.baseline.bf16_tile_run``, through the shared tile driver (:mod:`tb.common.tile`).

Every reduction's read-outs must equal the golden model's bit for bit; the streams must be
joined (every A and B group of a cycle taken together) and ``busy`` high exactly in the cycles
:func:`golden.baseline.bf16_tile_busy` gives for the cycles in which groups were taken (at
``pipeline = 0`` exactly those; with register stages also the ``pipeline`` cycles after each),
so a reduction of ``G`` groups without bubbles has ``G + pipeline`` busy cycles (the golden
``cycles``) and runs in ``G + pipeline + 1`` cycles.  ``pipeline_timing`` checks every output,
``busy`` and ``ready`` in every cycle against the cycle model
:func:`golden.baseline.bf16_tile_cycles`, and the cycle in which ``error`` rises, so a tile whose
results or side-band signals arrive a cycle early or late fails.

With the PEs' ``contexts = C > 1`` (interleaved output tiles) ``pipeline_timing`` checks every
cycle against :func:`golden.baseline.bf16_tile_cycles` from the tile's ``slot``, with ``slot``
and ``acc_slot`` too; the reductions offer every group ``C`` times in a row without bubbles
(:func:`drive`), so that every output tile computes the same reduction, the one-context
:func:`golden.baseline.bf16_tile_run`.
"""

import dataclasses

import cocotb
import numpy as np
from cocotb.triggers import FallingEdge, ReadOnly

from tb.common.power import power_test
from golden.baseline import BaselineTileConfig, bf16_tile_busy, bf16_tile_cycles, bf16_tile_run
from golden.common import float_to_bf16
from golden.common.stream import interleaved_shown

from ..common import config_from_env, effort, reset, rng, start, test_size, uint
from ..common.layouts import pack
from ..common.tile import TileDriver, expect, operands, power_stream, random_sweep

#: below full effort, tiles of more PEs than this get proportionally fewer random groups
#: (Icarus's time per cycle grows with the PE count: about 180 cycles/s for a 4 x 4 tile, 40 for
#: the 8 x 8 paper tile)
PE_BUDGET = 16


def random_groups(cfg) -> int:
    """Groups of :func:`random_reductions`: the unit's test size, scaled down by
    ``PE_BUDGET / (rows * cols)`` below full effort for tiles of more than ``PE_BUDGET`` PEs (the
    8 x 8 paper tile runs a quarter of them in ``make test``, all of them in ``make test-full``)."""
    n = test_size()
    pes = cfg.rows * cfg.cols
    if effort() != "full" and pes > PE_BUDGET:
        n = max(1, n * PE_BUDGET // pes)
    return n


def _streams(cfg):
    return [f"a__{c}" for c in range(cfg.cols)] + [f"b__{r}" for r in range(cfg.rows)]


def _one(cfg):
    """The configuration with one output tile: the reduction every output tile computes."""
    return dataclasses.replace(cfg, contexts=1)


async def drive(drv: TileDriver, cfg, A, B, clear=None, **kw):
    """``drv.run`` of one reduction; with ``contexts = C > 1`` every group (and its ``clear``)
    is offered ``C`` times in a row and without bubbles (``kw``'s gaps are dropped), so that
    every output tile takes each group once and the read-outs are the reduction's."""
    C = cfg.contexts
    if C == 1:
        return await drv.run(A, B, clear=clear, **kw)
    G = np.asarray(A).shape[1]
    if clear is None:
        clear = np.zeros((cfg.cols, G), dtype=bool)
        clear[:, 0] = True
    clear = np.broadcast_to(np.asarray(clear, dtype=bool), (cfg.cols, G))
    return await drv.run(np.repeat(A, C, axis=1), np.repeat(B, C, axis=1),
                         clear=np.repeat(clear, C, axis=1))


async def warm_up(dut, cfg):
    """``pipeline`` cycles of all-ones payloads on every stream without ``valid``: every stage
    register leaves its initial value before any check (Icarus evaluates a combinational block
    only when one of its inputs changes); nothing may be taken, accumulated or flagged.

    With interleaved output tiles, first groups of ones on every stream (not checked) and a
    second reset: an idle loop passes the same values round, which Icarus never evaluates."""
    if cfg.contexts > 1:
        ones = {"a": [0x3F80] * cfg.lanes, "clear": 1}
        for c in range(cfg.cols):
            getattr(dut, f"a__{c}__payload").value = pack(
                TileDriver(dut, cfg.rows, cfg.cols, cfg.lanes).a_layout, ones)
        for r in range(cfg.rows):
            getattr(dut, f"b__{r}__payload").value = pack(
                TileDriver(dut, cfg.rows, cfg.cols, cfg.lanes).b_layout,
                {"b": [0x3F80] * cfg.lanes})
        for name in _streams(cfg):
            getattr(dut, f"{name}__valid").value = 1
        for _ in range(3 * cfg.contexts + cfg.pipeline):
            await FallingEdge(dut.clk)
        for name in _streams(cfg):
            getattr(dut, f"{name}__valid").value = 0
        await reset(dut)
    for name in _streams(cfg):
        handle = getattr(dut, f"{name}__payload")
        handle.value = (1 << len(handle)) - 1
        getattr(dut, f"{name}__valid").value = 0
    for k in range(cfg.pipeline):
        await FallingEdge(dut.clk)
        assert uint(dut.busy) == 0 and uint(dut.error) == 0, f"warm-up cycle {k}: busy or error"


async def setup(dut):
    cfg = config_from_env(BaselineTileConfig)
    await start(dut)
    await warm_up(dut, cfg)
    return cfg, TileDriver(dut, cfg.rows, cfg.cols, cfg.lanes)


def expect_joined(drv: TileDriver, cfg, groups: int, where: str):
    """Every stream took its groups in the same cycles, and ``busy`` was high in exactly the
    cycles :func:`golden.baseline.bf16_tile_busy` gives for them."""
    taken = drv.a_sources[0].accepted_cycles
    assert len(taken) == groups, f"{where}: {len(taken)} of {groups} groups taken"
    for s in drv.a_sources + drv.b_sources:
        assert s.accepted_cycles == taken, \
            f"{where}: {s.name} took groups in cycles {s.accepted_cycles[:8]}…, a__0 in " \
            f"{taken[:8]}… (the streams must be joined)"
    want = bf16_tile_busy(cfg, taken, len(drv.busy_trace))
    busy = [k for k, b in enumerate(drv.busy_trace) if b]
    expected = [k for k, b in enumerate(want) if b]
    assert busy == expected, f"{where}: busy in cycles {busy[:8]}…, golden {expected[:8]}… " \
                             f"(pipeline {cfg.pipeline}; groups taken in {taken[:8]}…)"


async def reduction(drv, cfg, A, B, where: str, r=None, gaps: bool = False, clear=None):
    """One reduction through the driver, checked against the golden tile; returns the golden
    result."""
    want = bf16_tile_run(A, B, _one(cfg))
    G = A.shape[1]
    C = cfg.contexts
    kw = {}
    if gaps and C == 1:
        kw = {"gap_a": [r.choice((0.0, 0.1, 0.3, 0.6)) for _ in range(cfg.cols)],
              "gap_b": [r.choice((0.0, 0.1, 0.3, 0.6)) for _ in range(cfg.rows)], "rnd": r}
    got = await drive(drv, cfg, A, B, clear=clear, **kw)
    expect(got.out, want.out, where, A, B)
    assert want.cycles == G + cfg.pipeline
    # every group once per output tile, and the accumulation loop's C - 1 edges
    busy = C * G + cfg.pipeline + C - 1
    if not kw:
        assert got.busy_cycles == busy, f"{where}: {got.busy_cycles} busy cycles, golden {busy}"
        assert got.cycles == busy + 1, f"{where}: {got.cycles} cycles for {G} groups, " \
            f"expected {busy + 1} (one per group and output tile, the pipeline's " \
            f"{cfg.pipeline + C - 1} and the cycle in which busy is seen low)"
    expect_joined(drv, cfg, C * G, where)
    assert uint(drv.dut.error) == 0, f"{where}: error set without an exponent-255 operand"
    return want


@cocotb.test()
async def directed_reductions(dut):
    """Hand-checked sums, one group, zeros, per-PE distinct operands (row/column wiring)."""
    cfg, drv = await setup(dut)
    R, C, L = cfg.rows, cfg.cols, cfg.lanes
    assert (drv.read_out() == 0).all(), "outputs after reset must read +0"
    assert uint(dut.busy) == 0 and uint(dut.error) == 0
    # PE (r, c): lane 0 holds (c + 1) * (r + 1), every other lane 0: distinct exact products
    A = np.zeros((C, 1, L), dtype=np.int64)
    B = np.zeros((R, 1, L), dtype=np.int64)
    A[:, 0, 0] = float_to_bf16(np.arange(1, C + 1, dtype=np.float32))
    B[:, 0, 0] = float_to_bf16(np.arange(1, R + 1, dtype=np.float32))
    want = await reduction(drv, cfg, A, B, "distinct products")
    exact = float_to_bf16(np.outer(np.arange(1, R + 1), np.arange(1, C + 1)).astype(np.float32))
    expect(want.out, exact, "golden distinct products")
    # 1.0 * 1.0 in every lane of three groups: 3 * lanes
    A = np.full((C, 3, L), 0x3F80)
    B = np.full((R, 3, L), 0x3F80)
    want = await reduction(drv, cfg, A, B, "ones")
    assert (want.out == float_to_bf16(np.float32(3 * L))).all()
    # zeros and denormals only: +0 (and -0 products sum to +0)
    A = np.full((C, 2, L), 0x0001)
    B = np.full((R, 2, L), 0x8000)
    await reduction(drv, cfg, A, B, "zeros and denormals")
    # overflow to Inf and underflow to 0 on read-out
    A = np.full((C, 1, L), 0x7F00)
    B = np.full((R, 1, L), 0x7F00)
    await reduction(drv, cfg, A, B, "overflow")
    A = np.full((C, 1, L), 0x8080)
    B = np.full((R, 1, L), 0x0080)
    await reduction(drv, cfg, A, B, "underflow")


@cocotb.test()
async def random_reductions(dut):
    """Random reductions of 1-48 groups, back to back: value sparsity swept from dense to 90 %
    zeros, mantissas with zero suffixes (term sparsity) in half of them, random valid gaps per
    stream in half of them (every combination of the three every 20 reductions).
    :func:`random_groups` groups in total (``TRAINFAB_TEST_SIZE``; a quarter below full effort
    for the 8 x 8 tile)."""
    cfg, drv = await setup(dut)
    r = rng("random_reductions")
    nprng = np.random.default_rng(r.randrange(1 << 30))

    async def one(k, A, B, zeros, suffix, gaps, kind):
        await reduction(drv, cfg, A, B, f"reduction {k} ({A.shape[1]} groups, {zeros:.0%} "
                        f"zeros, suffix={suffix}, gaps={gaps})", r, gaps)

    await random_sweep(cfg, r, nprng, random_groups(cfg), 48, one, "random_reductions")


@cocotb.test()
async def clear_and_reset(dut):
    """Two reductions back to back in one stream (the second starts with ``clear``), a
    reduction continued without ``clear``, ``clear`` on some columns only (it restarts the whole
    column and nothing else), and reset clearing every accumulator."""
    cfg, drv = await setup(dut)
    r = rng("clear_and_reset")
    nprng = np.random.default_rng(r.randrange(1 << 30))
    C = cfg.cols
    for gaps in (False, True):
        tag = " with gaps" if gaps else ""
        kw = {"gap_a": 0.3, "gap_b": 0.3, "rnd": r} if gaps else {}
        # back to back: groups 0..5 one reduction, 6..13 the next (clear on group 6)
        A, B = operands(nprng, cfg, 14)
        clear = np.zeros((C, 14), dtype=bool)
        clear[:, 0] = clear[:, 6] = True
        got = await drive(drv, cfg, A, B, clear=clear, **kw)
        want = bf16_tile_run(A[:, 6:], B[:, 6:], _one(cfg))
        expect(got.out, want.out, f"second of two back-to-back reductions{tag}")
        expect_joined(drv, cfg, 14 * cfg.contexts, f"two back-to-back reductions{tag}")
        # continue without clear: the accumulators carry on from the previous reduction
        A2, B2 = operands(nprng, cfg, 5)
        got = await drive(drv, cfg, A2, B2, clear=False, **kw)
        want = bf16_tile_run(np.concatenate([A[:, 6:], A2], 1),
                             np.concatenate([B[:, 6:], B2], 1), _one(cfg))
        expect(got.out, want.out, f"reduction continued without clear{tag}")
        # clear on the even columns only: they restart, the odd ones continue
        A3, B3 = operands(nprng, cfg, 4)
        clear = np.zeros((C, 4), dtype=bool)
        clear[0::2, 0] = True
        got = await drive(drv, cfg, A3, B3, clear=clear, **kw)
        fresh = bf16_tile_run(A3, B3, _one(cfg)).out
        carried = bf16_tile_run(np.concatenate([A[:, 6:], A2, A3], 1),
                                np.concatenate([B[:, 6:], B2, B3], 1), _one(cfg)).out
        want = np.where((np.arange(C) % 2 == 0)[None, :], fresh, carried)
        expect(got.out, want, f"clear on the even columns only{tag}")
        # clear on a later group of one column: that column keeps the groups from there
        A4, B4 = operands(nprng, cfg, 5)
        c = r.randrange(C)
        clear = np.zeros((C, 5), dtype=bool)
        clear[:, 0] = True
        clear[c, 3] = True
        got = await drive(drv, cfg, A4, B4, clear=clear, **kw)
        want = bf16_tile_run(A4, B4, _one(cfg)).out
        want[:, c] = bf16_tile_run(A4[:, 3:], B4[:, 3:], _one(cfg)).out[:, c]
        expect(got.out, want, f"clear on group 3 of column {c}{tag}")

    # reset clears every accumulator: +0 read-outs, and a reduction without clear starts at 0
    A, B = operands(nprng, cfg, 3)
    await reduction(drv, cfg, A, B, "before reset")
    await reset(dut)
    assert (drv.read_out() == 0).all(), f"outputs after reset: {drv.read_out()}"
    A, B = operands(nprng, cfg, 4)
    got = await drive(drv, cfg, A, B, clear=False)
    expect(got.out, bf16_tile_run(A, B, _one(cfg)).out, "reduction without clear after reset")


@cocotb.test()
async def pipeline_timing(dut):
    """Groups taken in random cycles (every stream valid, or every stream idle), ``clear`` on
    random columns: every read-out after every edge, ``busy`` and every ``ready`` in every cycle
    against :func:`golden.baseline.bf16_tile_cycles`; then an exponent-255 operand: ``error``
    must rise exactly ``pipeline`` cycles after its group was taken (with the group's
    results; ``pipeline + contexts - 1`` with interleaved output tiles), and stay up."""
    cfg, drv = await setup(dut)
    r = rng("pipeline_timing")
    nprng = np.random.default_rng(r.randrange(1 << 30))
    C = cfg.cols
    n = max(24, random_groups(cfg) // 10)
    A, B = operands(nprng, cfg, n)
    items = []
    for g in range(n):
        while r.random() < 0.25:
            items.append(None)
        clear = np.array([g == 0 or r.random() < 0.2 for _ in range(C)])
        items.append((A[:, g], B[:, g], clear))
    K = cfg.contexts
    lag = cfg.pipeline + K - 1
    items += [None] * lag
    slot = uint(dut.slot) if K > 1 else 0
    want = bf16_tile_cycles(cfg, items, slot=slot)
    streams = _streams(cfg)
    for t, item in enumerate(items):
        if item is None:
            for name in streams:
                getattr(dut, f"{name}__valid").value = 0
        else:
            a, b, clear = item
            for c in range(C):
                getattr(dut, f"a__{c}__payload").value = pack(
                    drv.a_layout, {"a": a[c].tolist(), "clear": int(clear[c])})
            for row in range(cfg.rows):
                getattr(dut, f"b__{row}__payload").value = pack(drv.b_layout,
                                                                {"b": b[row].tolist()})
            for name in streams:
                getattr(dut, f"{name}__valid").value = 1
        await ReadOnly()
        where = f"pipeline {cfg.pipeline} cycle {t}"
        if K > 1:
            shown = interleaved_shown(t, cfg.pipeline, K, slot)
            assert (uint(dut.slot), uint(dut.acc_slot)) == ((slot + t) % K, shown), \
                f"{where}: slot/acc_slot {(uint(dut.slot), uint(dut.acc_slot))}"
        assert uint(dut.busy) == int(want[t].busy), \
            f"{where}: busy {uint(dut.busy)}, golden {int(want[t].busy)}"
        for name in streams:
            assert uint(getattr(dut, f"{name}__ready")) == int(item is not None), \
                f"{where}: {name}__ready {uint(getattr(dut, f'{name}__ready'))} with every " \
                f"stream {'valid' if item is not None else 'idle'}"
        await FallingEdge(dut.clk)
        taken = "a group" if item is not None else "no group"
        expect(drv.read_out(), want[t].out, f"{where} ({taken} taken)")
        assert uint(dut.error) == 0, f"{where}: error without an exponent-255 operand"

    # one group with an exponent-255 operand: error rises with the group's results
    bad = {"a": [0x3F80] * cfg.lanes, "clear": 1}
    bad["a"][r.randrange(cfg.lanes)] = 0x7F80
    c = r.randrange(C)
    for name in streams:
        getattr(dut, f"{name}__valid").value = 1
    getattr(dut, f"a__{c}__payload").value = pack(drv.a_layout, bad)
    await FallingEdge(dut.clk)
    for name in streams:
        getattr(dut, f"{name}__valid").value = 0
    for k in range(lag):
        assert uint(dut.error) == 0, \
            f"error {k + 1} cycles after the bad group was taken, expected {lag + 1}"
        await FallingEdge(dut.clk)
    for k in range(3):
        assert uint(dut.error) == 1, f"error not high (sticky) {lag + 1 + k} cycles " \
                                     "after the bad group was taken"
        await FallingEdge(dut.clk)
    await reset(dut)
    assert uint(dut.error) == 0 and uint(dut.busy) == 0


@cocotb.test()
async def error_flag(dut):
    """``error`` rises after an accepted operand with exponent field 255 (A or B, Inf or NaN)
    and stays up until reset; an offered but not accepted one (the join not firing) leaves it
    low.  PEs the bad operand did not reach stay exact."""
    cfg, drv = await setup(dut)
    r = rng("error_flag")
    nprng = np.random.default_rng(r.randrange(1 << 30))
    R, C, L = cfg.rows, cfg.cols, cfg.lanes
    assert uint(dut.error) == 0

    # a bad operand offered on a[0] while some other stream is not valid: never accepted
    bad = {"a": [0x7F80] * L, "clear": 1}
    dut.a__0__payload.value = pack(drv.a_layout, bad)
    dut.a__0__valid.value = 1
    for _ in range(3):
        await ReadOnly()
        assert uint(dut.a__0__ready) == 0, "a__0 ready while the B streams are not valid"
        assert uint(dut.busy) == 0
        await FallingEdge(dut.clk)
    assert uint(dut.error) == 0, "error set by an operand that was not accepted"
    dut.a__0__valid.value = 0
    await FallingEdge(dut.clk)
    assert uint(dut.error) == 0

    for trial, (where, code) in enumerate((("B", 0x7F80), ("A", 0xFFC1), ("B", 0x7FFF))):
        await reset(dut)
        assert uint(dut.error) == 0, "reset must clear error"
        A, B = operands(nprng, cfg, 6)
        await reduction(drv, cfg, A, B, f"trial {trial}: clean reduction")
        g, lane = r.randrange(6), r.randrange(L)
        A, B = operands(nprng, cfg, 6)
        if where == "A":
            c = r.randrange(C)
            A[c, g, lane] = code
            reached = np.zeros((R, C), dtype=bool)
            reached[:, c] = True
            clean_A, clean_B = A.copy(), B
            clean_A[c, g, lane] = 0
        else:
            row = r.randrange(R)
            B[row, g, lane] = code
            reached = np.zeros((R, C), dtype=bool)
            reached[row, :] = True
            clean_A, clean_B = A, B.copy()
            clean_B[row, g, lane] = 0
        got = await drive(drv, cfg, A, B)
        assert uint(dut.error) == 1, f"trial {trial}: {code:#06x} in {where} group {g} lane " \
                                     f"{lane} accepted without error"
        want = bf16_tile_run(clean_A, clean_B, _one(cfg)).out
        expect(np.where(reached, 0, got.out), np.where(reached, 0, want),
               f"trial {trial}: PEs the bad operand did not reach")
        # sticky through later clean reductions
        A, B = operands(nprng, cfg, 3)
        got = await drive(drv, cfg, A, B)
        expect(got.out, bf16_tile_run(A, B, _one(cfg)).out, f"trial {trial}: after the error")
        for _ in range(2):
            await FallingEdge(dut.clk)
            assert uint(dut.error) == 1, f"trial {trial}: error must be sticky"
    await reset(dut)
    assert uint(dut.error) == 0


@power_test
async def power_run(dut):
    """``trainfab power``: :func:`tb.common.tile.power_stream` against the golden tile."""
    cfg, drv = await setup(dut)
    await power_stream(drv, cfg, bf16_tile_run)

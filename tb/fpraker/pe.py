"""Testbench of the standalone FPRaker PE (``fpraker.pe``) against ``golden.fpraker.pe``.

Two harnesses:

* :class:`CycleHarness` compares the PE with :func:`golden.fpraker.pe.pe_group`'s trace every
  cycle (spec TV20): ``busy``/``last``, the lanes consumed, the step exponent E, the base shift,
  then after the edge the per-lane done flags, the accumulator and the bfloat16 read-out.  The
  eligible-lane mask of each cycle is the one given to the golden model.
* :func:`stream` pushes dot products group after group with no idle cycle, as fast as the PE
  takes them, scheduled by the golden model's per-group cycle counts: the next group must be
  accepted exactly in the cycle the golden model says the current group ends (``busy & last``),
  and each dot product's accumulator and read-out must equal the golden model's.

Expected values come only from ``golden``; spec §13 numbers are asserted in addition where the
configuration under test is the vector's configuration.
"""

import functools

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly

from tb.common.power import PowerWindow, group_operands, power_test
from golden.common import BF16
from golden.fpraker.pe import (Acc, PEConfig, PESlots, pe_dot_batch_acc, pe_group,
                               random_operands)
from hdl.common.formats import group_layout

from ..common import config_from_env, mask, reset, rng, start, test_size, uint
from ..common.checks import TraceChecker, expect_acc
from ..common.layouts import pack

#: the trace ports checked during a step, against the golden CycleTrace's same-named fields
STEP_FIELDS = {"processed": mask, "E": lambda E: E, "base": lambda base: base}
#: the trace ports checked after the step's clock edge
STATE_FIELDS = {"done": lambda done: mask(i for i, d in enumerate(done) if d)}


@functools.cache
def _group(lanes: int):
    return group_layout(BF16, lanes)


def drive_group(dut, cfg: PEConfig, a, b, clear) -> None:
    """Put one group (``lanes`` bf16 pairs, zero-padded, and ``clear``) on ``grp.payload``."""
    dut.grp__payload.value = pack(_group(cfg.lanes), {"a": a, "b": b, "clear": int(clear)})


class CycleHarness:
    """Drives groups one cycle at a time and checks every cycle against the golden trace."""

    def __init__(self, dut, cfg: PEConfig):
        self.dut = dut
        self.cfg = cfg
        self.acc = Acc.ZERO         # the accumulator register as the golden model has it
        self.cycle = 0
        self.step = TraceChecker(dut, STEP_FIELDS, signed=("E",))
        self.state = TraceChecker(dut, STATE_FIELDS)

    def check_acc(self, where: str):
        expect_acc(self.dut, self.acc, self.cfg, where)

    async def group(self, a, b, clear=False, eligible=None, label=""):
        """Offer one group in an idle cycle and follow it to its end; returns (acc, cycles)."""
        dut, cfg = self.dut, self.cfg
        full = (1 << cfg.lanes) - 1
        start_acc = Acc.ZERO if clear else self.acc
        acc, cycles, trace = pe_group(start_acc, a, b, cfg, eligible)
        masks = list(eligible or [])
        # acceptance cycle: the PE is idle
        drive_group(dut, cfg, a, b, clear)
        dut.grp__valid.value = 1
        dut.eligible.value = full
        await ReadOnly()
        assert uint(dut.grp__ready) == 1 and uint(dut.trace__busy) == 0, f"{label}: PE not idle"
        await FallingEdge(dut.clk)
        dut.grp__valid.value = 0
        for c, tr in enumerate(trace):
            where = f"{label} cycle {c} of {cycles} (a={[hex(x) for x in a]}, " \
                    f"b={[hex(x) for x in b]}, masks={masks})"
            mask = masks[c] if c < len(masks) else full
            dut.eligible.value = mask
            await ReadOnly()
            assert uint(dut.trace__busy) == 1, f"{where}: busy low"
            assert uint(dut.trace__last) == (1 if c == cycles - 1 else 0), f"{where}: last wrong"
            self.step.check(tr, where)
            await FallingEdge(dut.clk)
            self.acc = tr.acc
            self.cycle += 1
            self.state.check(tr, where)
            self.check_acc(where)
        dut.eligible.value = full
        await ReadOnly()
        assert uint(dut.trace__busy) == 0, f"{label}: still busy after {cycles} golden cycles"
        await FallingEdge(dut.clk)
        self.check_acc(f"{label} after the group")
        return acc, cycles


class SlotsHarness:
    """The PE with ``pipeline >= 1`` (interleaved dot products) against
    :class:`golden.fpraker.pe.PESlots`, every cycle: ``slot``, ``acc_slot``, ``ready``,
    ``busy``, ``last``, the step's trace (consumed lanes, E, base, the done flags it read) and
    the accumulator shown.  Each context has its own queue of groups ``(a, b, clear, masks)``;
    a cycle offers the head of the served context's queue (unless ``idle`` says not to), and
    ``eligible`` is driven with the mask of the step whose control completes next cycle."""

    def __init__(self, dut, cfg: PEConfig):
        self.dut, self.cfg = dut, cfg
        self.model = PESlots(cfg)
        self.step = TraceChecker(dut, STEP_FIELDS, signed=("E",))
        #: groups taken, per context
        self.taken = [0] * (cfg.pipeline + 1)

    async def cycle(self, group=None, label: str = "") -> bool:
        """One cycle offering ``group`` (or nothing); returns whether it was taken."""
        dut, model = self.dut, self.model
        dut.eligible.value = model.next_mask()
        if group is None:
            dut.grp__valid.value = 0
        else:
            drive_group(dut, self.cfg, *group[:3])
            dut.grp__valid.value = 1
        await ReadOnly()
        out = model.cycle(group)
        where = f"{label} cycle {model.t - 1} (slot {out.slot})"
        assert uint(dut.slot) == out.slot, f"{where}: slot {uint(dut.slot)}"
        assert uint(dut.acc_slot) == out.acc_slot, f"{where}: acc_slot {uint(dut.acc_slot)}"
        for name in ("ready", "busy", "last"):
            port = dut.grp__ready if name == "ready" else getattr(dut, f"trace__{name}")
            assert uint(port) == int(getattr(out, name)), f"{where}: {name} {uint(port)}"
        if out.busy:
            self.step.check(out.trace, where)
            assert uint(dut.trace__done) == mask(i for i, d in enumerate(out.done_before) if d), \
                f"{where}: done flags read {uint(dut.trace__done):b}, golden {out.done_before}"
        expect_acc(dut, out.acc, self.cfg, f"{where}: acc of context {out.acc_slot}")
        await FallingEdge(dut.clk)
        taken = group is not None and out.ready
        if taken:
            self.taken[out.slot] += 1
        return taken

    async def run(self, queues, label: str = "", idle: float = 0.0, r=None, drain=True):
        """Feed each context its queue of groups, then run until the PE is idle (every step
        out of the loop) and, with ``drain``, until every accumulator has been shown."""
        queues = [list(q) for q in queues]
        while any(queues):
            c = self.model.served()
            offer = queues[c][0] if queues[c] and not (idle and r.random() < idle) else None
            if await self.cycle(offer, label):
                queues[c].pop(0)
        while not self.model.idle:
            await self.cycle(None, label)
        for _ in range(self.cfg.pipeline + 1 if drain else 0):
            await self.cycle(None, label)

    async def warm_up(self):
        """Groups of ones (not checked), then a second reset: an idle loop passes the same
        values round, and Icarus never evaluates a combinational block whose inputs stay
        constant.  Then the reset state is checked."""
        dut, L = self.dut, self.cfg.lanes
        one = [0x3F80] * L
        drive_group(dut, self.cfg, one, one, 1)
        dut.grp__valid.value = 1
        await ClockCycles(dut.clk, 4 * (self.cfg.pipeline + 1), rising=False)
        dut.grp__valid.value = 0
        await reset(dut)
        await self.cycle(None, "after the second reset")


async def setup(dut):
    cfg = config_from_env(PEConfig)
    await start(dut, idle_values={"eligible": (1 << cfg.lanes) - 1})
    return cfg


async def slots_setup(dut, cfg):
    h = SlotsHarness(dut, cfg)
    await h.warm_up()
    return h


#: the directed groups of :func:`directed_vectors`, (a, b, clear) for a PE of ``L`` lanes
def directed_groups(L: int) -> list:
    fig5 = ([0x40E8, 0x4058][:L], [0x4118, 0x4050][:L])
    groups = [([0x4081], [0x4153], True), (*fig5, True),
              ([0x0000, 0x3F80, 0x0005][:L], [0x3F80, 0x0000, 0x3F80][:L], True),
              ([], [], True), ([0x3E00], [0x3F80], True),
              ([0xBFC0, 0x3F80][:L], [0x4040, 0x4040][:L], True), ([0x3FC0], [0x3FC0], True)]
    if L >= 2:
        groups += [([0x3F80, 0x3E00], [0x3F80, 0x3F80], True),
                   ([0x3F80, 0x3D80], [0x3F80, 0x3F80], True)]
    groups += [([0x3FB0], [0x3FBA], True), ([0x7F00], [0x7F00], True),
               ([0x8080], [0x0080], True),
               ([0x3FB0], [0x3FBA], True), ([0x3F80] * L, [0x3FFF] * L, False),
               ([0xBFB0], [0x3FBA], True), ([0xBF80] * L, [0x3FFF] * L, False),
               ([0x4980], [0x3F80], True), ([0x3F80, 0x3FC0][:L], [0x3F80, 0x3F80][:L], False),
               ([0x4580], [0x3F80], True), ([0x3F81], [0x3F80], False),
               ([0xC580], [0x3F80], True), ([0x3F81], [0xBF80], False),
               ([0x4000], [0x4000], True), ([0xC080], [0x3F80], False),
               ([0x3F80] * L, [0x3F80] * L, False)]
    return groups


def _is(cfg, **fields) -> bool:
    """The configuration under test is the default one with exactly these overrides."""
    return cfg == PEConfig(**fields)


@cocotb.test()
async def directed_vectors(dut):
    """Spec §13 vectors TV3, TV4/TV6 (Fig. 5), TV11, TV12, TV13, TV16 cycle by cycle."""
    cfg = await setup(dut)
    if cfg.pipeline:
        # every context runs the vectors' groups in order (the chains stay within one)
        h = await slots_setup(dut, cfg)
        groups = [(a, b, clear, None) for a, b, clear in directed_groups(cfg.lanes)]
        await h.run([groups] * (cfg.pipeline + 1), "directed vectors")
        assert h.taken == [len(groups)] * (cfg.pipeline + 1), h.taken
        return
    h = CycleHarness(dut, cfg)
    L = cfg.lanes
    default = _is(cfg) or _is(cfg, out_round="rne")

    acc, cycles = await h.group([0x4081], [0x4153], clear=True, label="TV3")
    if default:
        assert cycles == 2 and acc == Acc(False, 0, 5, 0x353)
        assert uint(dut.acc__out) == (0x4254 if cfg.out_round == "trunc" else 0x4255)

    fig5 = ([0x40E8, 0x4058][:L], [0x4118, 0x4050][:L])
    acc, cycles = await h.group(*fig5, clear=True, label="TV4/TV6 Fig. 5")
    if default:
        assert cycles == 3 and acc.to_fraction(9) * 1000 == 79875          # TV6
    if _is(cfg, encoding="binary", kmax=1023):
        assert cycles == 5 and acc == Acc(False, 0, 6, 0x27F)               # TV4
        assert uint(dut.acc__out) == 0x429F

    acc, cycles = await h.group([0x0000, 0x3F80, 0x0005][:L], [0x3F80, 0x0000, 0x3F80][:L],
                                clear=True, label="TV11 zeros")
    assert cycles == 1 and acc == Acc.ZERO and uint(dut.acc__out) == 0
    acc, cycles = await h.group([], [], clear=True, label="TV11 empty group")
    assert cycles == 1 and acc == Acc.ZERO
    acc, cycles = await h.group([0x3E00], [0x3F80], clear=True, label="TV11 zero acc")
    assert uint(dut.acc__out) == 0x3E00

    acc, cycles = await h.group([0xBFC0, 0x3F80][:L], [0x4040, 0x4040][:L], clear=True,
                                label="TV12 signs")
    if default:
        assert cycles == 2 and acc == Acc(False, 1, 0, 0x300) and uint(dut.acc__out) == 0xBFC0
    acc, cycles = await h.group([0x3FC0], [0x3FC0], clear=True, label="TV12 2.25")
    if default:
        assert cycles == 2 and uint(dut.acc__out) == 0x4010

    if L >= 2:
        acc, cycles = await h.group([0x3F80, 0x3E00], [0x3F80, 0x3F80], clear=True,
                                    label="TV13 k=(0,3)")
        if default:
            assert cycles == 1
        acc, cycles = await h.group([0x3F80, 0x3D80], [0x3F80, 0x3F80], clear=True,
                                    label="TV13 k=(0,4)")
        if default:
            assert cycles == 2

    # TV16 read-out: 1.998046875 (RNE carry), overflow to Inf, underflow to 0, negative zero
    acc, _ = await h.group([0x3FB0], [0x3FBA], clear=True, label="TV16 1.998")
    if default:
        assert acc == Acc(False, 0, 0, 0x3FF)
        assert uint(dut.acc__out) == (0x3FFF if cfg.out_round == "trunc" else 0x4000)
    await h.group([0x7F00], [0x7F00], clear=True, label="TV16 overflow")
    assert uint(dut.acc__out) in (0x7F80,), "2**254 must read out as +Inf"
    await h.group([0x8080], [0x0080], clear=True, label="TV16 underflow")
    assert uint(dut.acc__out) == 0x8000, "-2**-252 must read out as -0"

    # TV7: the worst step (acc 1.998 plus all lanes 1.992 at k = 0) needs 5 integer bits
    await h.group([0x3FB0], [0x3FBA], clear=True, label="TV7 acc")
    await h.group([0x3F80] * L, [0x3FFF] * L, label="TV7 worst step")
    await h.group([0xBFB0], [0x3FBA], clear=True, label="TV7 negative acc")
    await h.group([0xBF80] * L, [0x3FFF] * L, label="TV7 negative worst step")
    # TV10: an out-of-bounds-only cycle (acc at 2**20, products at 2**0) still counts
    await h.group([0x4980], [0x3F80], clear=True, label="TV10 acc")
    acc0 = h.acc
    acc, cycles = await h.group([0x3F80, 0x3FC0][:L], [0x3F80, 0x3F80][:L], label="TV10")
    if cfg.kmax < 20:
        assert cycles == 1 and acc == acc0

    # OB-b (spec §3.3, worked by hand in tests/test_golden_fpraker_pe.py): acc = 2**12, then
    # A = 0x3F81 (terms t = 0, 7) x 1.0: the first term is processed at k = 12 = KMAX and the
    # lane is done (OB-b), so its t = 7 term is never presented; without OB-b the group would
    # take a second cycle to drop it (OB-a at k = 19)
    acc, _ = await h.group([0x4580], [0x3F80], clear=True, label="OB-b acc 2**12")
    acc, cycles = await h.group([0x3F81], [0x3F80], label="OB-b predictive drop")
    if (cfg.keep_bits, cfg.frac_bits, cfg.kmax) == (9, 12, 12):
        assert cycles == 1 and acc == Acc(False, 0, 12, 512), (cycles, acc)
        assert uint(dut.trace__done) & 1 == 1, "lane 0 must be done after OB-b"
    await h.group([0xC580], [0x3F80], clear=True, label="OB-b negative acc")
    await h.group([0x3F81], [0xBF80], label="OB-b negative")

    # accumulation across groups without clear, and a sign change of the accumulator
    await h.group([0x4000], [0x4000], clear=True, label="chain 1")
    await h.group([0xC080], [0x3F80], label="chain 2")
    await h.group([0x3F80] * L, [0x3F80] * L, label="chain 3")


@cocotb.test()
async def per_cycle_random_masks(dut):
    """TV20: random groups under random per-cycle eligible masks, checked every cycle."""
    cfg = await setup(dut)
    h = CycleHarness(dut, cfg)
    r = rng("per_cycle_random_masks")
    nprng = np.random.default_rng(r.randrange(1 << 30))
    n = max(20, test_size() // 12)
    A, B = random_operands(nprng, n, cfg.lanes, "mix")
    full = (1 << cfg.lanes) - 1
    if cfg.pipeline:
        h = await slots_setup(dut, cfg)
        C = cfg.pipeline + 1
        queues = [[] for _ in range(C)]
        for g in range(n):
            p = r.random()
            masks = [r.randrange(full + 1) if r.random() < p else full
                     for _ in range(r.randrange(0, 16))]
            queues[g % C].append((A[g].tolist(), B[g].tolist(), r.random() < 0.3, masks))
        await h.run(queues, "random masks", idle=0.2, r=r)
        assert sum(h.taken) == n, h.taken
        return
    for g in range(n):
        p = r.random()
        masks = [r.randrange(full + 1) if r.random() < p else full
                 for _ in range(r.randrange(0, 16))]
        await h.group(A[g].tolist(), B[g].tolist(), clear=r.random() < 0.3, eligible=masks,
                      label=f"group {g}")


async def stream(dut, cfg, A, B, label):
    """Back-to-back dot products (rows of A/B) at full rate; checks cycles and results.

    Returns ``(golden cycles, groups checked)``: a group counts as checked once the PE ended it
    in the golden model's cycle; every row's accumulator and read-out are checked as well.
    """
    L = cfg.lanes
    accs, group_cycles = pe_dot_batch_acc(A, B, cfg)
    n, G = group_cycles.shape
    A = np.pad(A, ((0, 0), (0, G * L - A.shape[1]))).tolist()
    B = np.pad(B, ((0, 0), (0, G * L - B.shape[1]))).tolist()
    dut.eligible.value = (1 << L) - 1
    pending = None          # (row, expected acc) whose result appears after the next edge
    first = True
    checked = 0
    for row in range(n):
        for g in range(G):
            drive_group(dut, cfg, A[row][g * L:(g + 1) * L], B[row][g * L:(g + 1) * L], g == 0)
            dut.grp__valid.value = 1
            await ReadOnly()
            where = f"{label}: row {row} group {g}"
            assert uint(dut.grp__ready) == 1, f"{where}: not accepted when golden says it is"
            if not first:
                # the previous group ends exactly here: cycle counts agree
                assert uint(dut.trace__busy) == 1 and uint(dut.trace__last) == 1, \
                    f"{where}: previous group did not end in the golden model's cycle"
                checked += 1
            first = False
            await FallingEdge(dut.clk)
            if pending is not None:
                prow, pacc = pending
                expect_acc(dut, pacc, cfg, f"{label}: row {prow} a={[hex(x) for x in A[prow]]} "
                                           f"b={[hex(x) for x in B[prow]]}")
                pending = None
            dut.grp__valid.value = 0
            if group_cycles[row, g] > 1:
                await ClockCycles(dut.clk, int(group_cycles[row, g]) - 1, rising=False)
        pending = (row, accs[row])
    await ReadOnly()
    assert uint(dut.trace__busy) == 1 and uint(dut.trace__last) == 1, f"{label}: last group end"
    checked += 1
    await FallingEdge(dut.clk)
    prow, pacc = pending
    expect_acc(dut, pacc, cfg, f"{label}: row {prow}")
    await ReadOnly()
    assert uint(dut.trace__busy) == 0
    await FallingEdge(dut.clk)
    return int(group_cycles.sum()), checked


@cocotb.test()
async def random_regression(dut):
    """Random dot products (N(0,1), ReLU zeros, narrow mantissas, wide exponent spreads, sign
    cancellation, uniform bit patterns) streamed back to back, each group ended in the golden
    model's cycle: about the unit's test size (``TRAINFAB_TEST_SIZE``) in groups, in 1-, 3-
    and 8-group dot products."""
    cfg = await setup(dut)
    r = rng("random_regression")
    nprng = np.random.default_rng(r.randrange(1 << 30))
    n = test_size()
    plan = ((1, max(1, n // 2)), (3, max(1, n // 10)), (8, max(1, n // 40)))
    if cfg.pipeline:
        # every context streams its own dot products at full rate; each result is also
        # checked against the batch model's
        h = await slots_setup(dut, cfg)
        C = cfg.pipeline + 1
        for groups, rows in plan:
            A, B = random_operands(nprng, rows, groups * cfg.lanes, "mix")
            accs, _ = pe_dot_batch_acc(A, B, cfg)
            L = cfg.lanes
            queues = [[] for _ in range(C)]
            for row in range(rows):
                for g in range(groups):
                    queues[row % C].append((A[row, g * L:(g + 1) * L].tolist(),
                                            B[row, g * L:(g + 1) * L].tolist(), g == 0, None))
            await h.run(queues, f"{groups}-group dot products")
            last = {row % C: row for row in range(rows)}
            for c, row in last.items():
                assert h.model.final[c] == accs[row], f"context {c}: row {row}"
        assert sum(h.taken) == sum(g * rows for g, rows in plan), h.taken
        return
    total_cycles = total_checked = 0
    for groups, rows in plan:
        A, B = random_operands(nprng, rows, groups * cfg.lanes, "mix")
        c, checked = await stream(dut, cfg, A, B, f"{groups}-group dot products")
        assert checked == groups * rows, f"{groups}-group dot products: {checked} checked"
        total_cycles += c
        total_checked += checked
    # the cycle total is the golden model's schedule, which the PE followed group by group
    cocotb.log.info("random_regression: %d groups checked, %d cycles (%.3f cycles/group)",
                    total_checked, total_cycles, total_cycles / total_checked)


@power_test
async def power_run(dut):
    """``trainfab power``: the operand groups of ``a``/``b`` (groups, lanes) streamed back to
    back as dot products of ``dot_groups`` groups, as fast as the PE takes them (no back-pressure,
    no idle cycle), every result and group schedule checked against the golden model; the
    measured window covers exactly the stream.

    An interleaved PE (``pipeline >= 1``) takes dot product ``r`` in context ``r mod C``, every
    context at full rate, checked every cycle against :class:`PESlots`; its window ends when
    the last step has left the loop, so it also holds the few cycles in which the contexts
    finish at different times (``busy_cycles`` counts them)."""
    cfg = await setup(dut)
    A, B, dot = group_operands(cfg.lanes)
    groups = A.shape[0]
    rows = groups // dot
    if cfg.pipeline:
        h = await slots_setup(dut, cfg)
        C = cfg.pipeline + 1
        queues = [[] for _ in range(C)]
        for g in range(groups):
            queues[(g // dot) % C].append((A[g].tolist(), B[g].tolist(), g % dot == 0, None))
        window = PowerWindow(dut)
        start_cycle = h.model.t
        await h.run(queues, "power run", drain=False)
        assert sum(h.taken) == groups, f"power run: {sum(h.taken)} of {groups} groups taken"
        window.close(groups=groups, busy_cycles=h.model.t - start_cycle, dot_products=rows)
        return
    window = PowerWindow(dut)
    cycles, checked = await stream(dut, cfg, A.reshape(rows, dot * cfg.lanes),
                                   B.reshape(rows, dot * cfg.lanes), "power run")
    assert checked == groups, f"power run: {checked} of {groups} groups checked"
    window.close(groups=groups, busy_cycles=cycles, dot_products=rows)

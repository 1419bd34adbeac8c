"""Testbench of the bit-parallel bfloat16 baseline PE (``baseline.bf16_pe``) against
``golden.baseline``: groups offered one per cycle (back to back, or with idle cycles), the
accumulator and read-out checked after every edge against the cycle model
:func:`golden.baseline.bf16_pe_cycles`, so a group that reaches the accumulator a cycle early or
late (``pipeline`` stages) fails.

With ``contexts = C > 1`` the cycle model also names the dot product each group joins and the
one ``acc`` shows: ``slot`` and ``acc_slot`` are checked in every cycle, the harness keeps all
``C`` accumulators, and a directed group is offered ``C`` times in a row (once per dot product),
so that every dot product takes the same chain and the directed checks hold for each.
"""

import dataclasses

import cocotb
import numpy as np
from cocotb.triggers import FallingEdge

from tb.common.power import PowerWindow, group_operands, power_test
from golden.baseline import Acc, BaselineConfig, bf16_pe_acc_slot, bf16_pe_cycles
from golden.common import BF16
from golden.fpraker.pe import random_operands
from hdl.common.formats import group_layout

from ..common import config_from_env, reset, rng, start, test_size, uint
from ..common.checks import expect_acc
from ..common.layouts import pack


class Harness:
    """Drives groups, one per cycle, and checks the accumulator after every edge against the
    golden cycle model."""

    def __init__(self, dut, cfg: BaselineConfig):
        self.dut = dut
        self.cfg = cfg
        self.group = group_layout(BF16, cfg.lanes)
        #: every dot product's accumulator once every group driven so far has been accumulated
        #: (one, or ``contexts`` by slot)
        self.accs = [Acc.ZERO] * cfg.contexts
        #: the dot product that took the last group
        self.last = 0
        #: groups whose result was checked against the golden model
        self.checked = 0

    @property
    def acc(self) -> Acc:
        """The accumulator of the dot product that took the last group."""
        return self.accs[self.last]

    def check(self, where: str):
        shown = uint(self.dut.acc_slot) if self.cfg.contexts > 1 else 0
        expect_acc(self.dut, self.accs[shown], self.cfg, where)

    async def warm_up(self):
        """``pipeline`` cycles of all-ones operands without ``valid``: every stage register
        leaves its initial value before any check (Icarus evaluates a combinational block only
        when one of its inputs changes), and nothing may be accumulated.

        With interleaved dot products, first groups of ones (not checked) and a second reset:
        an idle loop passes the same values round, which Icarus never evaluates."""
        dut = self.dut
        if self.cfg.contexts > 1:
            one = [0x3F80] * self.cfg.lanes
            dut.grp__payload.value = pack(self.group, {"a": one, "b": one, "clear": 1})
            dut.grp__valid.value = 1
            for _ in range(3 * self.cfg.contexts + self.cfg.pipeline):
                await FallingEdge(dut.clk)
            dut.grp__valid.value = 0
            await reset(dut)
            self.check("after the second reset")
        dut.grp__valid.value = 0
        dut.grp__payload.value = (1 << self.group.size) - 1
        for k in range(self.cfg.pipeline):
            await FallingEdge(dut.clk)
            self.check(f"warm-up cycle {k}: no group offered")

    async def run(self, items, label=""):
        """Drive ``items``, one per cycle: ``None`` (an idle cycle) or a group ``(a, b, clear)``
        with an optional fourth element naming it; then idle cycles until every group has been
        accumulated (``pipeline``, and ``contexts - 1`` more with interleaved dot products).
        The accumulator (and the slots) are checked after every edge."""
        dut = self.dut
        C = self.cfg.contexts
        cycles = list(items) + [None] * (self.cfg.pipeline + C - 1)
        groups = [None if it is None else it[:3] for it in cycles]
        slot = uint(dut.slot) if C > 1 else 0
        start = self.accs[0] if C == 1 else self.accs
        want = bf16_pe_cycles(self.cfg, groups, start, **({"slot": slot} if C > 1 else {}))
        last = "none yet"
        for t, item in enumerate(cycles):
            if item is None:
                dut.grp__valid.value = 0
            else:
                a, b, clear = item[:3]
                dut.grp__payload.value = pack(self.group, {"a": a, "b": b, "clear": int(clear)})
                dut.grp__valid.value = 1
                last = (f"{item[3] if len(item) > 3 else label} a={[hex(x) for x in a]} "
                        f"b={[hex(x) for x in b]} clear={int(clear)}")
                self.last = (slot + t) % C
            if C > 1:
                assert uint(dut.slot) == (slot + t) % C, f"{label} cycle {t}: slot"
            await FallingEdge(dut.clk)
            if C > 1:
                assert uint(dut.acc_slot) == bf16_pe_acc_slot(self.cfg, t + 1, slot), \
                    f"{label} cycle {t + 1}: acc_slot {uint(dut.acc_slot)}"
            expect_acc(dut, want[t], self.cfg, f"{label} pipeline {self.cfg.pipeline} cycle "
                       f"{t} (last group offered: {last})")
        dut.grp__valid.value = 0
        if C == 1:
            self.accs = [want[-1]]
        else:
            # every dot product as the model leaves it: the next C cycles show each once
            n = len(cycles)
            more = bf16_pe_cycles(self.cfg, groups + [None] * C, start, slot=slot)
            for v in range(n, n + C):
                self.accs[bf16_pe_acc_slot(self.cfg, v, slot)] = more[v - 1]
        self.checked += sum(item is not None for item in items)

    async def cycle(self, a=(), b=(), *, start=True, clear=False, label=""):
        """One group (or an idle cycle with ``start=False``), then the pipeline's idle cycles;
        with interleaved dot products the group is offered once per dot product."""
        item = (list(a), list(b), clear) if start else None
        await self.run([item] * (self.cfg.contexts if start else 1), label)


async def setup(dut):
    cfg = config_from_env(BaselineConfig)
    await start(dut)
    h = Harness(dut, cfg)
    h.check("after reset")
    await h.warm_up()
    return h


def _default(cfg) -> bool:
    return dataclasses.replace(cfg, pipeline=0, contexts=1) in (BaselineConfig(),
                                                                BaselineConfig(out_round="rne"))


@cocotb.test()
async def directed_vectors(dut):
    """Signs (TV12), zeros/denormals (TV11), read-out (TV16), idle cycles, clear."""
    h = await setup(dut)
    L = h.cfg.lanes
    await h.cycle([0xBFC0, 0x3F80][:L], [0x4040, 0x4040][:L], clear=True, label="TV12")
    if _default(h.cfg) and L >= 2:
        assert h.acc == Acc(False, 1, 0, 0x300) and uint(dut.acc__out) == 0xBFC0
    await h.cycle(start=False, label="idle holds the accumulator")
    await h.cycle([0x0000, 0x3F80, 0x0005][:L], [0x3F80, 0x0000, 0x3F80][:L], clear=True,
                  label="TV11")
    assert uint(dut.acc__out) == 0 and uint(dut.acc__zero) == 1
    await h.cycle([0x3E00], [0x3F80], label="TV11 zero acc")
    assert uint(dut.acc__out) == 0x3E00
    await h.cycle([0x3FB0], [0x3FBA], clear=True, label="TV16 1.998")
    if _default(h.cfg):
        assert h.acc == Acc(False, 0, 0, 0x3FF)
        assert uint(dut.acc__out) == (0x3FFF if h.cfg.out_round == "trunc" else 0x4000)
    await h.cycle([0x7F00], [0x7F00], clear=True, label="TV16 overflow")
    assert uint(dut.acc__out) == 0x7F80
    await h.cycle([0x8080], [0x0080], clear=True, label="TV16 underflow")
    assert uint(dut.acc__out) == 0x8000
    # the largest products in every lane: a product >= 2 raises E by one, so these sums stay
    # below 2**16 on the 2**(E-F) grid and do not exercise the fifth integer bit
    await h.cycle([0x3FFF] * L, [0x3FFF] * L, clear=True, label="largest products 1")
    await h.cycle([0x407F] * L, [0x3FFF] * L, label="largest products 2")
    await h.cycle([0xC07F] * L, [0x3FFF] * L, label="largest products negative")
    # the int_bits worst case: products just below 2 (0x3FB5**2 = 32761/16384, aligned at
    # E = 0 to RTO(32761, 2) = 8191) on acc = 1.998 (8184): X = 8184 + 8 * 8191 = 73712 >= 2**16
    # with 8 lanes, which needs 5 integer bits (the paper's 4 overflow)
    for s in (0, 1):
        sign = "negative " if s else ""
        await h.cycle([0x3FB0 | s << 15], [0x3FBA], clear=True, label=f"{sign}worst-case acc")
        await h.cycle([0x3FB5 | s << 15] * L, [0x3FB5] * L, label=f"{sign}worst-case step")
        if (h.cfg.lanes, h.cfg.keep_bits, h.cfg.frac_bits) == (8, 9, 12):
            # by hand (spec §11.6): NORM_RNE(±73712, 0) = 1.P sig 575.875 -> 576 at exp 4
            assert h.acc == Acc(False, s, 4, 576), h.acc


@cocotb.test()
async def random_regression(dut):
    """Random groups back to back (every cycle, an idle cycle before 2 % of them), dot products
    of 1-8 groups, mixed data, every cycle checked against the cycle model; the unit's test
    size (``TRAINFAB_TEST_SIZE``) in groups."""
    h = await setup(dut)
    r = rng("random_regression")
    nprng = np.random.default_rng(r.randrange(1 << 30))
    L = h.cfg.lanes
    n = test_size()
    A, B = random_operands(nprng, n, L, "mix")
    A, B = A.tolist(), B.tolist()
    items = []
    remaining = 0
    for g in range(n):
        clear = remaining == 0
        if clear:
            remaining = r.randint(1, 8)
        remaining -= 1
        if r.random() < 0.02:
            items.append(None)
        items.append((A[g], B[g], clear, f"group {g}"))
    await h.run(items, "random_regression")
    assert h.checked == n, f"{h.checked} of {n} groups checked"


@power_test
async def power_run(dut):
    """``trainfab power``: the operand groups of ``a``/``b`` (groups, lanes), one per cycle with
    no idle cycle, the accumulator cleared at the first group of every ``dot_groups``; every
    result checked against the golden model; the measured window covers exactly those cycles
    and the ``pipeline`` cycles in which the last groups reach the accumulator."""
    h = await setup(dut)
    A, B, dot = group_operands(h.cfg.lanes)
    groups = A.shape[0]
    window = PowerWindow(dut)
    await h.run([(A[g].tolist(), B[g].tolist(), g % dot == 0, f"power group {g}")
                 for g in range(groups)], "power_run")
    assert h.checked == groups, f"power run: {h.checked} of {groups} groups checked"
    window.close(groups=groups, busy_cycles=groups, dot_products=groups // dot)

"""Testbench of the FPRaker term encoder (``fpraker.encoder``) against ``golden.fpraker``.

Every lane is mirrored by a queue of the terms ``golden.fpraker.encode_terms`` gives for the
significand it last loaded; each cycle the RTL's (valid, tp, neg) must equal the head of that
queue, and the queue changes exactly as the lane's load/drop/advance rules say (spec §2.3).
"""

import cocotb
from cocotb.triggers import FallingEdge

from golden.fpraker import EncoderConfig, encode_terms

from ..common import bit, config_from_env, effort, mask, port, reset, rng, start, test_size, uint


class Harness:
    """Drives all lanes once per cycle and checks every output against the golden queues."""

    def __init__(self, dut, cfg: EncoderConfig):
        self.dut = dut
        self.cfg = cfg
        self.queues = [[] for _ in range(cfg.lanes)]
        self.cycles = 0
        self.terms_popped = 0

    def check(self) -> None:
        dut = self.dut
        for i, queue in enumerate(self.queues):
            where = f"cycle {self.cycles}, lane {i}, expected terms {queue}"
            assert bit(dut.terms__valid, i) == (1 if queue else 0), f"valid wrong at {where}"
            if queue:
                t, sign = queue[0]
                tp = uint(port(dut, "terms__tp", i))
                assert tp == t + 1, f"tp={tp} (t={tp - 1}) at {where}"
                assert bit(dut.terms__neg, i) == (1 if sign < 0 else 0), f"term sign wrong at {where}"
        assert uint(dut.error) == 0, f"error flag set at cycle {self.cycles}"

    async def cycle(self, load=(), sigs=None, zero=(), advance=(), drop=()) -> None:
        """Check the outputs, then drive one cycle's inputs (lists of lane indices)."""
        self.check()
        dut, lanes = self.dut, self.cfg.lanes
        sigs = sigs or {}
        dut.load.value = mask(load)
        dut.zero.value = mask(zero)
        dut.terms__advance.value = mask(advance)
        dut.terms__drop.value = mask(drop)
        for i in range(lanes):
            port(dut, "sig", i).value = sigs.get(i, 0x80)
        for i in range(lanes):
            queue = self.queues[i]
            if i in load:
                self.queues[i] = [] if i in zero else encode_terms(sigs[i], self.cfg.encoding)
            elif i in drop:
                queue.clear()
            elif i in advance and queue:
                queue.pop(0)
                self.terms_popped += 1
        await FallingEdge(dut.clk)
        self.cycles += 1

    def busy(self) -> bool:
        return any(self.queues)


async def setup(dut):
    cfg = config_from_env(EncoderConfig)
    await start(dut)
    h = Harness(dut, cfg)
    await h.cycle()
    return h


@cocotb.test()
async def exhaustive_significands(dut):
    """All 128 significands pass through every lane; terms popped with random stalls."""
    h = await setup(dut)
    r = rng("exhaustive_significands")
    lanes = h.cfg.lanes
    expected_terms = 0
    for offset in range(lanes):  # rotate so that every lane sees every significand
        sigs = [128 + (k + offset) % 128 for k in range(128)]
        for first in range(0, 128, lanes):
            chunk = {i: s for i, s in enumerate(sigs[first:first + lanes])}
            expected_terms += sum(len(encode_terms(s, h.cfg.encoding)) for s in chunk.values())
            await h.cycle(load=list(chunk), sigs=chunk)
            while h.busy():
                await h.cycle(advance=[i for i in range(lanes) if r.random() < 0.7])
        if effort() == "quick":
            break
    await h.cycle()
    assert h.terms_popped == expected_terms, (h.terms_popped, expected_terms)


@cocotb.test()
async def zero_loads(dut):
    """A zero/denormal load yields no terms, whatever the significand bits (even hidden bit 0)."""
    h = await setup(dut)
    lanes = h.cfg.lanes
    every = list(range(lanes))
    for sig in (0x00, 0x05, 0x80, 0xFF):
        await h.cycle(load=every, sigs={i: sig for i in every}, zero=every)
        await h.cycle(advance=every)
        await h.cycle()


@cocotb.test()
async def random_stalls_drops_reloads(dut):
    """Random mixes of loads (also while terms remain), zero loads, stalls, pops and drops."""
    h = await setup(dut)
    r = rng("random_stalls_drops_reloads")
    lanes = h.cfg.lanes
    n = test_size()
    for _ in range(n):
        load, zero, advance, drop, sigs = [], [], [], [], {}
        for i in range(lanes):
            x = r.random()
            if x < 0.15 or (not h.queues[i] and x < 0.5):
                load.append(i)
                sigs[i] = r.randrange(128, 256)
                if r.random() < 0.1:
                    zero.append(i)
            if r.random() < 0.05:
                drop.append(i)
            if r.random() < 0.6:
                advance.append(i)
        await h.cycle(load=load, sigs=sigs, zero=zero, advance=advance, drop=drop)
    await h.cycle()


@cocotb.test()
async def missing_hidden_bit_sets_sticky_error(dut):
    """Loading a non-zero significand below 128 sets ``error``, which stays set until reset."""
    cfg = config_from_env(EncoderConfig)
    await start(dut)
    assert uint(dut.error) == 0
    dut.load.value = 1
    dut.zero.value = 0
    port(dut, "sig", 0).value = 0x7F
    await FallingEdge(dut.clk)
    dut.load.value = 0
    for _ in range(3):
        await FallingEdge(dut.clk)
        assert uint(dut.error) == 1, "error flag not sticky"
    # a legal load does not clear it; only reset does
    dut.load.value = (1 << cfg.lanes) - 1
    for i in range(cfg.lanes):
        port(dut, "sig", i).value = 0xC0
    await FallingEdge(dut.clk)
    dut.load.value = 0
    assert uint(dut.error) == 1
    await reset(dut)
    assert uint(dut.error) == 0, "reset did not clear the error flag"

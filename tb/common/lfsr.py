"""Testbench of the LFSR bank (``common.lfsr``) against ``golden.common.lfsr.LaneRNG``.

Every cycle after reset, ``rand`` must show every lane's next golden draw; ``en`` is driven in
random patterns (runs of enabled and idle cycles), and a draw is taken only in an enabled
cycle.  The random part is ``TRAINFAB_TEST_SIZE`` cycles.
"""

import cocotb
from cocotb.triggers import FallingEdge, Timer

from golden.common.lfsr import LFSRConfig

from . import config_from_env, port, rng, start, test_size, uint


async def _check(dut, cfg, pattern, name):
    draws = cfg.rng().draws(sum(pattern) + 1)
    taken = 0
    for cycle, en in enumerate(pattern):
        dut.en.value = en
        await Timer(1, unit="ns")  # rand is combinational from the state
        for lane in range(cfg.lanes):
            got = uint(port(dut, "rand", lane))
            assert got == int(draws[taken, lane]), (
                f"{name}: cycle {cycle}, lane {lane}: rand {got:#x}, golden draw {taken} "
                f"{int(draws[taken, lane]):#x}")
        await FallingEdge(dut.clk)
        taken += en


@cocotb.test()
async def draws_every_cycle(dut):
    """``en`` high every cycle: draw k in cycle k."""
    cfg = config_from_env(LFSRConfig)
    await start(dut)
    await _check(dut, cfg, [1] * 64, "every cycle")


@cocotb.test()
async def random_enables(dut):
    """The unit's test size in cycles of random ``en`` runs (idle cycles keep the draw)."""
    cfg = config_from_env(LFSRConfig)
    r = rng("random_enables")
    pattern = []
    while len(pattern) < test_size():
        pattern += [r.random() < 0.6] * r.randint(1, 9)
    await start(dut)
    await _check(dut, cfg, [int(x) for x in pattern[:test_size()]], "random enables")

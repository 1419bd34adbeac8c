"""Shared testbench plumbing: run parameters from the runner, clock and reset, port access.

The runner (:mod:`flows.simulate`) passes the unit's configuration as JSON in
``TRAINFAB_CONFIG``, the random seed in ``TRAINFAB_SEED`` and the effort level (``quick`` for
demos, ``full`` for the test suite) in ``TRAINFAB_EFFORT``.
"""

import json
import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, RisingEdge

CLOCK_NS = 10


def config_from_env(cls):
    """The configuration object the Verilog under test was generated from."""
    return cls(**json.loads(os.environ.get("TRAINFAB_CONFIG", "{}")))


def seed_from_env() -> int:
    return int(os.environ.get("TRAINFAB_SEED", "1"))


def effort() -> str:
    """``"quick"`` (a few seconds per testbench) or ``"full"`` (the regression)."""
    level = os.environ.get("TRAINFAB_EFFORT", "full")
    if level not in ("quick", "full"):
        raise ValueError(f"TRAINFAB_EFFORT={level!r}: expected 'quick' or 'full'")
    return level


def rng(test_name: str) -> random.Random:
    """A random generator seeded from the run seed and the test's name (tests stay independent)."""
    seed = seed_from_env()
    cocotb.log.info("%s: seed %d (reproduce with --seed %d)", test_name, seed, seed)
    return random.Random(f"{seed}:{test_name}")


async def start(dut, reset_cycles: int = 2) -> None:
    """Start the clock on ``dut.clk``, then :func:`reset`."""
    cocotb.start_soon(Clock(dut.clk, CLOCK_NS, unit="ns").start())
    await reset(dut, reset_cycles)


async def reset(dut, reset_cycles: int = 2) -> None:
    """Hold the synchronous reset ``dut.rst`` for some cycles (the clock must be running).

    Returns on a falling edge with reset released, the moment to drive the first inputs.
    """
    dut.rst.value = 1
    for _ in range(reset_cycles):
        await RisingEdge(dut.clk)
    await FallingEdge(dut.clk)
    dut.rst.value = 0


def port(dut, name: str, index: int | None = None):
    """A top-level port by its signature path; array members are ``name__<index>``."""
    return getattr(dut, name if index is None else f"{name}__{index}")


def drive_array(dut, name: str, values, lanes: int, pad: int = 0) -> None:
    """Drive the array port ``name__0 .. name__<lanes-1>``; missing values get ``pad``."""
    values = list(values)
    for i in range(lanes):
        port(dut, name, i).value = values[i] if i < len(values) else pad


def uint(handle) -> int:
    """A port's current value as an unsigned int (1-bit ports read as ``Logic``, wider ones as
    ``LogicArray``; both raise if any bit is X or Z)."""
    value = handle.value
    return value.to_unsigned() if hasattr(value, "to_unsigned") else int(value)


def sint(handle) -> int:
    """A port's current value as a two's-complement signed int."""
    value = handle.value
    return value.to_signed() if hasattr(value, "to_signed") else -int(value)


def bit(handle, i: int) -> int:
    """Bit ``i`` of a port's current value."""
    return (uint(handle) >> i) & 1

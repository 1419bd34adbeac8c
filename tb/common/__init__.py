"""The testbench toolkit: run parameters, clock/reset/idle inputs (:func:`setup`: the usual
start of a test), port access, and (in the submodules) stream drivers, layout packing and
golden-model checkers.

* :mod:`.streams` — valid/ready :class:`~.streams.Source`/:class:`~.streams.Sink` with random
  gaps and back-pressure, :func:`~.streams.cross` of the gap and back-pressure patterns, and the
  cycle loop :func:`~.streams.run`;
* :mod:`.layouts` — pack and unpack payloads through the RTL's own data layouts;
* :mod:`.checks` — :func:`~.checks.expect_acc` (an accumulator interface against a golden
  ``Acc``) and :class:`~.checks.TraceChecker` (trace ports against a golden per-cycle record,
  field by field);
* :mod:`.bfp` — the FP → BFP converters' stream check (outputs, LFSR states, sticky ``error``)
  and random blocks.
* :mod:`.latency` — fixed-latency units with a ``pipeline`` field: one input vector per cycle,
  each output checked exactly ``pipeline`` cycles later.

The runner (:mod:`flows.eda.simulate`) passes the unit's configuration as JSON in
``TRAINFAB_CONFIG``, the seed in ``TRAINFAB_SEED``, the effort level in ``TRAINFAB_EFFORT``
(``quick`` for demos, ``standard`` for ``make test``, ``full`` for ``make test-full``), the
size of the random part for that effort in ``TRAINFAB_TEST_SIZE``, and the path of the unit's
manifest (its port list) in ``TRAINFAB_MANIFEST``.
"""

import json
import os
import random

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, RisingEdge

CLOCK_NS = 10
EFFORTS = ("quick", "standard", "full")
#: random-part sizes when the runner gives none (a testbench run by hand)
DEFAULT_SIZES = {"quick": 300, "standard": 3000, "full": 20000}


def config_from_env(cls):
    """The configuration object the Verilog under test was generated from."""
    return cls(**json.loads(os.environ.get("TRAINFAB_CONFIG", "{}")))


def seed_from_env() -> int:
    return int(os.environ.get("TRAINFAB_SEED", "1"))


def effort() -> str:
    """The effort level: ``quick``, ``standard`` or ``full``."""
    level = os.environ.get("TRAINFAB_EFFORT", "standard")
    if level not in EFFORTS:
        raise ValueError(f"TRAINFAB_EFFORT={level!r}: expected one of {', '.join(EFFORTS)}")
    return level


def test_size() -> int:
    """Size of the testbench's random part at this effort (the unit declares it; what it counts
    — groups, rows, vectors — is the testbench's docstring's business)."""
    text = os.environ.get("TRAINFAB_TEST_SIZE")
    return int(text) if text else DEFAULT_SIZES[effort()]


test_size.__test__ = False   # not a pytest test


def rng(test_name: str) -> random.Random:
    """A random generator seeded from the run seed and the test's name (tests stay independent)."""
    seed = seed_from_env()
    cocotb.log.info("%s: seed %d (reproduce with --seed %d)", test_name, seed, seed)
    return random.Random(f"{seed}:{test_name}")


def manifest() -> dict:
    """The unit's manifest (``trainfab generate``'s JSON: configuration, ports, tools)."""
    path = os.environ.get("TRAINFAB_MANIFEST")
    if not path:
        raise RuntimeError("TRAINFAB_MANIFEST is not set: run testbenches through "
                           "flows.eda.simulate.run_testbench (trainfab regress)")
    with open(path) as f:
        return json.load(f)


def input_ports() -> list[str]:
    """Every input port of the unit except the clock and reset."""
    return [p["name"] for p in manifest()["ports"]
            if p["direction"] == "input" and p["name"] not in ("clk", "rst")]


def idle(dut, values: dict | None = None) -> None:
    """Drive every input port to 0, or to ``values[name]``: no request, no data."""
    values = values or {}
    unknown = set(values) - set(input_ports())
    assert not unknown, f"idle values for ports the unit does not have: {sorted(unknown)}"
    for name in input_ports():
        getattr(dut, name).value = values.get(name, 0)


async def start(dut, reset_cycles: int = 2, idle_values: dict | None = None) -> None:
    """Drive every input idle (:func:`idle`), start the clock on ``dut.clk``, then
    :func:`reset`; returns on a falling edge, the moment to drive the first inputs."""
    idle(dut, idle_values)
    cocotb.start_soon(Clock(dut.clk, CLOCK_NS, unit="ns").start())
    await reset(dut, reset_cycles)


async def setup(dut, cls, name: str):
    """Start the test ``name``: inputs idle, clock, reset (:func:`start`); returns the unit's
    configuration (a ``cls`` from the environment, :func:`config_from_env`), the test's random
    generator (:func:`rng`) and a NumPy generator seeded from it."""
    cfg = config_from_env(cls)
    r = rng(name)
    gen = np.random.default_rng(r.getrandbits(64))
    await start(dut)
    return cfg, r, gen


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


def mask(lanes) -> int:
    """A bit mask with bit ``i`` set for every ``i`` in ``lanes``."""
    return sum(1 << i for i in lanes)

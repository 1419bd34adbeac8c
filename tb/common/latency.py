"""Vectors through a fixed-latency unit: combinational, or ``depth`` register stages.

A unit with a ``pipeline`` field is combinational at depth 0 (no clock: drive, settle, check)
and clocked otherwise.  :func:`apply_vectors` drives one vector per cycle, back to back, and
checks the outputs of vector ``k`` exactly ``depth`` cycles after it was driven: a unit that is
a cycle early or late shows a neighbouring vector's result, which the check reports.
"""

from cocotb.triggers import FallingEdge, Timer

from . import idle, input_ports, start


async def begin(dut, depth: int) -> None:
    """Idle inputs; for ``depth > 0`` also the clock and a reset, then ``depth`` cycles of
    all-ones inputs (returns on a falling edge).

    The all-ones cycles make every stage register move away from its initial value before any
    check: Icarus evaluates a combinational block only when one of its inputs changes, so a
    block fed by registers that still hold their initial value (zero inputs after reset) would
    read X."""
    if not depth:
        idle(dut)
        return
    await start(dut)
    for name in input_ports():
        handle = getattr(dut, name)
        handle.value = (1 << len(handle)) - 1
    for _ in range(depth):
        await FallingEdge(dut.clk)


async def apply_vectors(dut, depth: int, n: int, drive, check) -> None:
    """Drive vectors ``0..n-1`` with ``drive(k)`` and check each with ``check(k)``.

    ``depth = 0``: each vector settles for 1 ns, then is checked.  ``depth > 0`` (after
    :func:`begin`): vector ``k`` is driven before clock edge ``k`` and checked after edge
    ``k + depth - 1`` (on the falling edge ``depth`` cycles after it was driven), while later
    vectors keep coming every cycle; after the last vector the inputs cycle through the vectors
    again until the pipeline has drained."""
    if depth == 0:
        for k in range(n):
            drive(k)
            await Timer(1, unit="ns")
            check(k)
        return
    for cycle in range(n + depth):
        if cycle >= depth:
            check(cycle - depth)
        drive(cycle % n)
        await FallingEdge(dut.clk)


__all__ = ["begin", "apply_vectors"]

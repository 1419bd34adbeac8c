"""The testbench side of ``trainfab power``: the operands to drive and the window to measure.

A unit's testbench supports power runs with one cocotb test named ``power_run``, declared with
:func:`power_test` (it is registered only when ``trainfab power`` runs the testbench, so normal
regressions are unchanged)::

    from tb.common.power import PowerWindow, operands, power_test

    @power_test
    async def power_run(dut):
        ops = operands()                    # {"a": ..., "b": ..., "dot_groups": int}
        ...reset, idle inputs...
        window = PowerWindow(dut)           # opens the measured window (call it on a falling edge)
        ...drive every group of ops["a"]/ops["b"], wait for the last result, check results...
        window.close(groups=...)            # on a falling edge, after the last result

See :mod:`flows.eda.power` for the full contract (array shapes, what the window must cover).
"""

import functools
import json
import os

#: path of the operands (``.npz``) the power flow gives the testbench
OPERANDS_ENV = "TRAINFAB_POWER_OPERANDS"
#: path where the testbench writes the measured window (JSON)
WINDOW_ENV = "TRAINFAB_POWER_WINDOW"


def requested() -> bool:
    """Whether this simulation is a ``trainfab power`` run."""
    return bool(os.environ.get(OPERANDS_ENV))


def power_test(func):
    """``cocotb.test()`` for ``power_run`` in power runs; otherwise ``func`` unregistered."""
    import cocotb

    return cocotb.test()(func) if requested() else func


@functools.cache
def operands() -> dict:
    """The arrays of the power run's ``.npz`` (int64 bf16 bit patterns) and ``dot_groups``
    (groups per dot product; the accumulator is cleared at the first group of each)."""
    import numpy as np

    with np.load(os.environ[OPERANDS_ENV]) as data:
        out = {k: data[k].astype(np.int64) for k in data.files if k != "dot_groups"}
        out["dot_groups"] = int(data["dot_groups"]) if "dot_groups" in data.files else 8
    return out


def group_operands(lanes: int) -> tuple:
    """``(a, b, dot_groups)`` of :func:`operands` for a unit that takes one group of ``lanes``
    values a side at a time: ``a`` and ``b`` must be (groups, ``lanes``) with groups a multiple
    of ``dot_groups``."""
    ops = operands()
    A, B, dot = ops["a"], ops["b"], ops["dot_groups"]
    groups = A.shape[0]
    assert A.shape == B.shape == (groups, lanes) and groups % dot == 0, \
        f"power operands: a {A.shape}, b {B.shape}, dot_groups {dot}; expected (groups, " \
        f"{lanes}) with groups a multiple of dot_groups"
    return A, B, dot


class PowerWindow:
    """The measured stretch of a power run: opened when created, written by :meth:`close`."""

    def __init__(self, dut):
        from cocotb.utils import get_sim_time

        self._now = lambda: int(get_sim_time("ps"))
        self.start_ps = self._now()

    def close(self, groups: int, **facts) -> None:
        """End the window now and write it (``groups``: operand groups driven in it; other
        ``facts``, JSON values, are shown in the report)."""
        end = self._now()
        assert end > self.start_ps, "power window closed at the time it was opened"
        with open(os.environ[WINDOW_ENV], "w") as f:
            json.dump({"start_ps": self.start_ps, "end_ps": end, "groups": int(groups),
                       **facts}, f)


__all__ = ["OPERANDS_ENV", "WINDOW_ENV", "requested", "power_test", "operands", "group_operands",
           "PowerWindow"]

"""Option types, ranges and help texts shared by the commands' arguments and the flows that
check the same values (a clock period, a seed)."""

import argparse
import math

from . import FlowError

#: the seeds every ``--seed`` accepts (NumPy's generators and cocotb take 32-bit seeds)
SEED_RANGE = (0, 2**32 - 1)
SEED_HELP = "0 to 2**32-1"


def bounded(kind, lo, hi):
    """An argparse ``type`` for an ``int`` or ``float`` option that must lie in ``lo..hi``.

    A value that is not a number of ``kind``, is not finite or is out of range is refused
    before anything runs, in one line naming the option (argparse adds it) and the range:
    ``argument --cycles: '1e14' is not an integer from 1,000 to 10,000,000``."""
    what = "an integer" if kind is int else "a number"

    def parse(text):
        try:
            value = kind(text)
        except (TypeError, ValueError, OverflowError):
            value = None
        if (value is None or isinstance(value, float) and not math.isfinite(value)
                or not lo <= value <= hi):
            shown = text if len(str(text)) <= 40 else str(text)[:39] + "…"
            raise argparse.ArgumentTypeError(f"{shown!r} is not {what} from {lo:,} to {hi:,}")
        return value

    parse.__name__ = what
    return parse


#: the clock periods the flow accepts (ABC takes the delay target in whole picoseconds)
CLOCK_RANGE_NS = (0.01, 100_000.0)


def check_clock(clock_ns) -> float:
    """``clock_ns`` as a float if it is a usable clock period; :class:`FlowError` otherwise."""
    lo, hi = CLOCK_RANGE_NS
    try:
        value = float(clock_ns)
    except (TypeError, ValueError):
        value = float("nan")
    if not (lo <= value <= hi):  # also false for nan
        raise FlowError(f"--clock-ns {clock_ns}: the clock period must be a number of "
                        f"nanoseconds from {lo:g} to {hi:g}")
    return value


#: the simulators the testbenches run on
SIMULATORS = ("icarus", "verilator")

UNIT_HELP = "a unit name, e.g. fpraker.encoder ('trainfab list' lists them)"

__all__ = ["SEED_RANGE", "SEED_HELP", "UNIT_HELP", "CLOCK_RANGE_NS", "SIMULATORS", "bounded", "check_clock"]

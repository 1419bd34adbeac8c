"""Command-line option types and help texts shared by every command's arguments (the CLI in
:mod:`flows.cli` and the commands that declare their own arguments: sweep, power, speedup)."""

import argparse
import math

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


UNIT_HELP = "a unit name, e.g. fpraker.encoder ('trainfab list' lists them)"

__all__ = ["SEED_RANGE", "SEED_HELP", "UNIT_HELP", "bounded"]

"""The LFSR bank of the stochastic-rounding units: one 16-bit maximal-length Fibonacci LFSR
(x^16 + x^14 + x^13 + x^11 + 1) per lane.

A *draw* steps every lane ``bits`` times and returns the ``bits`` freshly shifted-in bits of
each, ``R = state >> (16 - bits)``; the hardware unrolls the steps into one cycle
(:func:`hdl.common.lfsr.lfsr_steps`).  FAST's converter draws 8 bits per lane (``docs/specs/fast.md``
§3); Equinox's quantizer draws ``rbits`` (16 by default, ``docs/specs/equinox.md`` §1.5).  Lane ``i``
is seeded ``(0xACE1 ^ 0x1F35 * i) & 0xFFFF``, non-zero for up to 64 lanes.
"""

import functools
from dataclasses import dataclass

import numpy as np

from .. import ConfigError, check_int

#: period of the 16-bit maximal-length LFSR
PERIOD = (1 << 16) - 1
#: most lanes with distinct non-zero seeds
MAX_LANES = 64


def lfsr16_step(s: int) -> int:
    """One step of the 16-bit Fibonacci LFSR x^16 + x^14 + x^13 + x^11 + 1."""
    bit = (s ^ (s >> 2) ^ (s >> 3) ^ (s >> 5)) & 1
    return ((s >> 1) | (bit << 15)) & 0xFFFF


@functools.cache
def lfsr_cycle():
    """The LFSR's maximal cycle: ``seq[k]`` is the state ``k`` steps after state 1, ``pos`` the
    inverse (every non-zero 16-bit state appears once)."""
    seq = np.empty(PERIOD, dtype=np.int64)
    s = 1
    for k in range(PERIOD):
        seq[k] = s
        s = lfsr16_step(s)
    pos = np.full(1 << 16, -1, dtype=np.int64)
    pos[seq] = np.arange(PERIOD)
    return seq, pos


def lane_seeds(lanes: int) -> tuple:
    """The lane seeds ``(0xACE1 ^ 0x1F35 * i) & 0xFFFF``, all non-zero for up to 64 lanes."""
    return tuple((0xACE1 ^ (0x1F35 * i)) & 0xFFFF for i in range(lanes))


assert all(lane_seeds(MAX_LANES))


class LaneRNG:
    """A bank of per-lane LFSRs.  Each :meth:`draw` is one conversion that uses the noise:
    every lane steps ``bits`` times and yields its ``bits`` fresh bits.

    The lanes are followed by their position on the LFSR's cycle (built once from
    :func:`lfsr16_step`), so :meth:`draws` produces many conversions' values at NumPy speed.
    """

    def __init__(self, seeds=None, lanes: int = 16, bits: int = 8):
        if isinstance(bits, bool) or not isinstance(bits, int) or not 1 <= bits <= 16:
            raise ConfigError("LaneRNG", "bits", bits, "an integer in 1..16")
        seeds = lane_seeds(lanes) if seeds is None else tuple(int(s) for s in seeds)
        if len(seeds) != lanes or not all(0 < s <= 0xFFFF for s in seeds):
            raise ConfigError("LaneRNG", "seeds", seeds, f"{lanes} non-zero 16-bit values")
        self.lanes = lanes
        self.bits = bits
        self._pos = lfsr_cycle()[1][np.array(seeds)]

    @property
    def state(self) -> np.ndarray:
        """The lanes' 16-bit LFSR states."""
        return lfsr_cycle()[0][self._pos]

    def draw(self) -> np.ndarray:
        """One conversion's random values, one per lane."""
        return self.draws(1)[0]

    def draws(self, n: int) -> np.ndarray:
        """``n`` conversions' random values, an ``(n, lanes)`` array (row ``t`` = draw ``t``;
        ``uint8`` for draws of up to 8 bits, else ``uint16``)."""
        steps = self.bits * np.arange(1, n + 1, dtype=np.int64)[:, None]
        states = lfsr_cycle()[0][(self._pos[None, :] + steps) % PERIOD]
        self._pos = (self._pos + self.bits * n) % PERIOD
        return (states >> (16 - self.bits)).astype(np.uint8 if self.bits <= 8 else np.uint16)


@dataclass(frozen=True)
class LFSRConfig:
    """Configuration of the LFSR bank on its own (registry unit ``common.lfsr``): the random
    source of FAST's converter and Equinox's quantizer.  The defaults are FAST's (16 lanes, 8
    bits per draw).

    The bank holds one LFSR per lane, seeded by :func:`lane_seeds`; in a cycle with ``en`` every
    lane steps ``bits`` times; ``rand[i]`` always shows lane ``i``'s next draw, the
    ``bits`` bits the steps shift in (:meth:`LaneRNG.draws`: draw ``k`` is shown after ``k``
    enabled cycles).
    """

    #: lanes, each a 16-bit LFSR with its own seed (FAST's converter: 16), 1..64
    lanes: int = 16
    #: fresh bits per lane and draw, the steps unrolled into one cycle (FAST: 8; Equinox's
    #: quantizer: 16), 1..16
    bits: int = 8

    def __post_init__(self):
        check_int(self, "lanes", 1, MAX_LANES)
        check_int(self, "bits", 1, 16)

    def rng(self) -> "LaneRNG":
        """The golden bank of this configuration, at its seeds."""
        return LaneRNG(lanes=self.lanes, bits=self.bits)


__all__ = ["PERIOD", "MAX_LANES", "lfsr16_step", "lfsr_cycle", "lane_seeds", "LaneRNG",
           "LFSRConfig"]

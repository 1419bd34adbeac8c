"""The LFSR bank's hardware step and the bank on its own (twin of :mod:`golden.common.lfsr`)."""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from golden.common.lfsr import LFSRConfig, lane_seeds


def lfsr_steps(m, state, steps: int, name: str):
    """``steps`` unrolled steps of the 16-bit Fibonacci LFSR x^16 + x^14 + x^13 + x^11 + 1
    (:func:`golden.common.lfsr.lfsr16_step`) from ``state``, in ``m``'s comb domain; returns the
    last state, whose top ``steps`` bits are the fresh ones.  Each step is a signal of its own,
    so the expressions stay linear in the number of steps."""
    s = state
    for k in range(steps):
        nxt = Signal(16, name=f"{name}_s{k + 1}")
        m.d.comb += nxt.eq(Cat(s[1:], s[0] ^ s[2] ^ s[3] ^ s[5]))
        s = nxt
    return s


class LFSRBank(wiring.Component):
    """``lanes`` 16-bit LFSRs (x^16 + x^14 + x^13 + x^11 + 1), lane ``i`` reset to
    :func:`golden.common.lfsr.lane_seeds`'s seed ``i``.

    ``rand[i]`` shows, combinationally, lane ``i``'s next draw: the ``bits`` bits that
    ``bits`` steps of its LFSR shift in (:func:`lfsr_steps`); a cycle with ``en`` takes the
    draw, and the lane's state becomes the stepped one at the clock edge.  After ``k`` enabled
    cycles ``rand`` is the golden :class:`~golden.common.lfsr.LaneRNG`'s draw ``k``.  One draw
    per cycle at most; the steps are unrolled, so the critical path grows with ``bits``.

    Parameters
    ----------
    cfg : golden.common.lfsr.LFSRConfig
    """

    def __init__(self, cfg: LFSRConfig = LFSRConfig()):
        self.cfg = cfg
        super().__init__({"en": In(1), "rand": Out(cfg.bits).array(cfg.lanes)})

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        for i, seed in enumerate(lane_seeds(cfg.lanes)):
            state = Signal(16, name=f"state{i}", init=seed)
            stepped = lfsr_steps(m, state, cfg.bits, f"lane{i}")
            m.d.comb += self.rand[i].eq(stepped[16 - cfg.bits:])
            with m.If(self.en):
                m.d.sync += state.eq(stepped)
        return m


__all__ = ["lfsr_steps", "LFSRBank"]

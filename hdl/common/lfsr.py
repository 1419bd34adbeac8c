"""The LFSR bank's hardware step (twin of :mod:`golden.common.lfsr`)."""

from amaranth.hdl import Cat, Signal


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


__all__ = ["lfsr_steps"]

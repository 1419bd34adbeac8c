"""Building blocks shared by several units: leading-one detection and priority encoding here;
arithmetic trees and shifters in :mod:`.arith`; the FPRaker/baseline accumulator in :mod:`.accumulator`."""

from amaranth.hdl import Const, Signal, unsigned
from amaranth.utils import ceil_log2


def msb_index(m, value, *, name: str = "msb") -> Signal:
    """Index of the most significant set bit of ``value`` (a leading-one detector).

    Combinational: the returned signal is ``ceil_log2(width)`` bits wide and reads 0 when
    ``value`` is 0, so callers must qualify it with ``value != 0``.  Written as a priority chain
    from the LSB up (the last assignment wins), which yosys turns into a balanced encoder.
    """
    width = len(value)
    index = Signal(max(1, ceil_log2(width)), name=name)
    for j in range(width):
        with m.If(value[j]):
            m.d.comb += index.eq(j)
    return index


def onehot(m, index, width: int, *, name: str = "onehot") -> Signal:
    """A ``width``-bit one-hot decode of ``index`` (zero when ``index >= width``)."""
    out = Signal(width, name=name)
    m.d.comb += out.eq(Const(1, unsigned(width + 1)) << index)
    return out


__all__ = ["msb_index", "onehot"]

"""Building blocks shared by several units: leading-one detection and priority encoding here;
arithmetic trees and shifters in :mod:`.arith`; the FPRaker/baseline accumulator in :mod:`.accumulator`;
the FP → BFP pipeline of FAST's converter and Equinox's quantizer in :mod:`.bfp`."""

from amaranth.hdl import Signal
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


def leading_one(m, value, *, name: str = "lead"):
    """Isolate the most significant set bit of ``value``.

    Returns ``(lead, lower)``: ``lead`` is one-hot at the leading one (zero when ``value`` is
    0) and ``lower`` is ``value`` with that bit cleared.  Built from a prefix OR from the MSB
    down (``above[j]`` = any bit above ``j`` is set), so no index is decoded back into a mask.
    """
    width = len(value)
    above = Signal(width, name=f"{name}_above")
    for j in range(width - 1):
        m.d.comb += above[j].eq(value[j + 1:].any())
    lead = Signal(width, name=name)
    lower = Signal(width, name=f"{name}_lower")
    m.d.comb += [lead.eq(value & ~above), lower.eq(value & above)]
    return lead, lower


__all__ = ["msb_index", "leading_one"]

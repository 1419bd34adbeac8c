"""Generic arithmetic blocks: reduction trees, adder trees (inline or as a component) and a
jamming right shifter.

Each helper adds combinational logic to a module ``m`` and returns the result signal(s).
"""

from amaranth.hdl import Const, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out


def tree_reduce(m, items, pick, shape, name: str):
    """Balanced reduction tree over ``(valid, value)`` pairs.

    ``pick(a, b)`` is a 1-bit expression choosing ``a`` over ``b`` when both are valid (e.g.
    ``a >= b`` for a max tree); values are carried in ``shape``.  Returns ``(valid, value)`` of
    the winner; ``value`` is meaningless when ``valid`` is 0.  Depth ``ceil(log2(len(items)))``.
    """
    level = list(items)
    depth = 0
    while len(level) > 1:
        nxt = []
        for i in range(0, len(level) - 1, 2):
            (va, xa), (vb, xb) = level[i], level[i + 1]
            v = Signal(name=f"{name}_v{depth}_{i // 2}")
            x = Signal(shape, name=f"{name}_x{depth}_{i // 2}")
            m.d.comb += [v.eq(va | vb), x.eq(Mux(va & (~vb | pick(xa, xb)), xa, xb))]
            nxt.append((v, x))
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
        depth += 1
    return level[0]


def adder_tree(m, values, width, name: str):
    """Balanced tree of adders; returns a signal of ``width`` (an int: ``signed(width)``; or a
    shape) — the caller sizes it for the sum."""
    shape = signed(width) if isinstance(width, int) else width
    level = list(values)
    depth = 0
    while len(level) > 1:
        nxt = []
        for i in range(0, len(level) - 1, 2):
            s = Signal(shape, name=f"{name}_{depth}_{i // 2}")
            m.d.comb += s.eq(level[i] + level[i + 1])
            nxt.append(s)
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
        depth += 1
    out = Signal(shape, name=name)
    m.d.comb += out.eq(level[0])
    return out


class AdderTree(wiring.Component):
    """:func:`adder_tree` as a component of its own (a block of its own in area breakdowns).

    Ports
    -----
    i : In(ArrayLayout(shape, n)); o : Out(signed(width))
    """

    def __init__(self, n: int, shape, width: int):
        self.n = n
        super().__init__({"i": In(data.ArrayLayout(shape, n)), "o": Out(signed(width))})

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.o.eq(adder_tree(m, [self.i[k] for k in range(self.n)], len(self.o),
                                         "sum"))
        return m


def jam_right(m, x, amount, name: str):
    """``x >> amount`` with every shifted-out 1 OR-ed into the LSB (round to odd, spec §3.3).

    ``x`` may be signed (two's-complement floor, then sticky: equal to sign-magnitude jamming);
    amounts of ``len(x)`` or more saturate, which gives the same result as any larger shift.
    Returns a signal of ``x``'s shape.
    """
    width = len(x)
    amt = Signal(range(width + 1), name=f"{name}_amt")
    m.d.comb += amt.eq(Mux(amount >= width, width, amount))
    low = Signal(width, name=f"{name}_low")    # the bits shifted out
    m.d.comb += low.eq(~(Const((1 << width) - 1, width) << amt)[:width])
    out = Signal(x.shape(), name=name)
    m.d.comb += out.eq((x >> amt) | (x.as_unsigned() & low).any())
    return out


__all__ = ["tree_reduce", "adder_tree", "jam_right"]

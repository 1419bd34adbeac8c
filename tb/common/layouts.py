"""Pack and unpack port values through the RTL's own :mod:`amaranth.lib.data` layouts.

A testbench never re-types a field offset: ``pack(layout, {"a": [x0, x1], "clear": 1})`` builds
the integer a struct-typed port takes (a struct given as an int is its whole bit pattern), and ``unpack(layout, bits)`` turns a port's integer back
into nested dicts, lists and ints (signed fields as signed ints).  Missing fields and array
elements pack as 0; values that do not fit their field are errors.
"""

import numpy as np
from amaranth.hdl import Shape
from amaranth.lib import data


def _shape(layout):
    return layout if isinstance(layout, data.Layout) else Shape.cast(layout)


def pack(layout, value) -> int:
    """The integer a port of shape ``layout`` holds for ``value`` (dict / sequence / int)."""
    layout = _shape(layout)
    if isinstance(layout, data.Layout) and isinstance(value, (int, np.integer)):
        # a whole word given as its bit pattern (a bf16 value as its 16 bits)
        if not 0 <= value < (1 << layout.size):
            raise ValueError(f"{value} does not fit {layout!r} ({layout.size} bits)")
        return int(value)
    if isinstance(layout, data.Layout):
        if isinstance(layout, data.ArrayLayout):
            items = list(value)
            if len(items) > layout.length:
                raise ValueError(f"{len(items)} elements for {layout!r}")
            pairs = enumerate(items)
        else:
            if not isinstance(value, dict):
                raise TypeError(f"a {layout!r} value must be a dict, not {value!r}")
            names = {name for name, _ in layout}
            unknown = set(value) - names
            if unknown:
                raise KeyError(f"no field {sorted(unknown)} in {layout!r}")
            pairs = value.items()
        bits = 0
        for key, v in pairs:
            field = layout[key]
            bits |= pack(field.shape, v) << field.offset
        return bits
    v = int(value)
    lo, hi = ((-(1 << (layout.width - 1)), (1 << (layout.width - 1)) - 1) if layout.signed
              else (0, (1 << layout.width) - 1))
    if not lo <= v <= hi:
        raise ValueError(f"{v} does not fit {layout!r}")
    return v & ((1 << layout.width) - 1)


def unpack(layout, bits: int):
    """The nested dicts/lists/ints of a port value (the inverse of :func:`pack`)."""
    layout = _shape(layout)
    if isinstance(layout, data.ArrayLayout):
        return [unpack(f.shape, (bits >> f.offset) & ((1 << f.width) - 1)) for _, f in layout]
    if isinstance(layout, data.Layout):
        return {name: unpack(f.shape, (bits >> f.offset) & ((1 << f.width) - 1))
                for name, f in layout}
    bits &= (1 << layout.width) - 1
    if layout.signed and bits >> (layout.width - 1):
        bits -= 1 << layout.width
    return bits


def field(layout, bits: int, *path):
    """One field of a port value: ``field(layout, bits, "a", 3, "exp")``."""
    layout = _shape(layout)
    offset = 0
    for key in path:
        f = layout[key]
        offset += f.offset
        layout = _shape(f.shape)
    return unpack(layout, bits >> offset)

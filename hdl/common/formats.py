"""Number formats as :mod:`amaranth.lib.data` layouts, built from :mod:`golden.common.formats`.

RTL reads fields by name (``a.exp``, ``a.man``, ``a.sign``; ``blk.exp``, ``blk.man[i]``)
instead of bit slices, and testbenches pack and unpack words through the same layouts
(:func:`tb.common.layouts.pack`), so a field offset is written down once, in the golden format.

* a :class:`~golden.common.formats.FloatFormat` → ``StructLayout({"man", "exp", "sign"})``;
* an :class:`~golden.common.formats.IntFormat` → ``signed(bits)`` / ``unsigned(bits)``;
* a :class:`~golden.common.formats.BFPFormat` → ``StructLayout({"exp", "man": ArrayLayout})``
  whose elements are ``{"mag", "sign"}`` structs (sign-magnitude) or ``signed(man_bits)``.
"""

from amaranth.hdl import Mux, Signal, signed, unsigned
from amaranth.lib import data

from golden.common.formats import BFPFormat, FloatFormat, IntFormat, format_named


def layout(fmt):
    """The data layout (or shape, for integers) of a format object or format name."""
    fmt = format_named(fmt)
    if isinstance(fmt, FloatFormat):
        return data.StructLayout(fmt.fields)
    if isinstance(fmt, IntFormat):
        return signed(fmt.bits) if fmt.signed else unsigned(fmt.bits)
    if isinstance(fmt, BFPFormat):
        elem = (data.StructLayout({"mag": fmt.man_bits, "sign": 1}) if fmt.sign_magnitude
                else signed(fmt.man_bits))
        return data.StructLayout({"exp": fmt.exp_bits, "man": data.ArrayLayout(elem, fmt.block)})
    raise TypeError(f"not a number format: {fmt!r}")


def group_layout(fmt, lanes: int, operands=("a", "b"), flags=("clear",)) -> data.StructLayout:
    """Payload of an operand group: ``lanes`` values of ``fmt`` per operand, plus 1-bit flags
    (e.g. ``clear``: the group starts a new dot product)."""
    fields = {name: data.ArrayLayout(layout(fmt), lanes) for name in operands}
    fields.update({flag: 1 for flag in flags})
    return data.StructLayout(fields)


def decode(m, value, fmt, *, daz: bool = True, name: str = "dec"):
    """Unpack a float view into ``(zero, sign, exp, sig)`` signals.

    ``exp`` is the biased exponent field (callers subtract the bias where they add exponents,
    which folds the constant), ``sig`` the significand with its hidden bit.  With ``daz`` an
    exponent field of 0 (zero or subnormal) reads as zero; without it subnormals keep a clear
    hidden bit (and the exponent field should then be read as 1 — the caller's business).
    """
    fmt = format_named(fmt)
    zero = Signal(name=f"{name}_zero")
    sig = Signal(fmt.man_bits + 1, name=f"{name}_sig")
    nonzero_exp = value.exp != 0
    m.d.comb += [
        zero.eq(~nonzero_exp if daz else ~nonzero_exp & (value.man == 0)),
        sig.eq(Mux(nonzero_exp, value.man | (1 << fmt.man_bits), 0 if daz else value.man)),
    ]
    return zero, value.sign, value.exp, sig


__all__ = ["layout", "group_layout", "decode"]

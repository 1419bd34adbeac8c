"""Named interface signatures shared by the units, connected with :func:`amaranth.lib.wiring.connect`.

Each is described from the producer's side (``Out`` members flow from the unit that drives the
interface); a consumer takes it ``In(...)`` (flipped).  Verilog port names are the member
paths joined by ``__``: ``acc__sig``, ``terms__tp__3``, ``grp__payload``.

============================  =================================================================
:class:`AccumulatorSignature` a PE accumulator register ``(zero, sign, exp, sig)`` and its
                              read-out word ``out``
:func:`operand_group`         a valid/ready stream (:mod:`amaranth.lib.stream`) of operand
                              groups: ``lanes`` values of a format per operand, plus flags
:func:`tile_a_stream`         a tile column's serial-operand stream: ``lanes`` values and ``clear``
:func:`tile_b_stream`         a tile row's parallel-operand stream: ``lanes`` values
:class:`TileSignature`        a PE tile: ``cols`` A streams, ``rows`` B streams, the read-out of
                              every PE, ``busy`` and the sticky ``error``
:class:`TermStreamSignature`  per-lane term streams from term encoders to a PE (``valid``,
                              ``tp``, ``neg`` forward; ``advance``, ``drop`` back)
:class:`SidebandSignature`    a tensor's run-time format description (Gecko's side-band:
                              mantissa width, sign enable, fixed exponent width)
:class:`RawSignature`         a raw number into the rounding block: significand, exponent,
                              sign, random bits
:class:`RoundedSignature`     the rounding block's result: unpacked fields, the packed word,
                              inexact/overflow/underflow flags
============================  =================================================================
"""

from amaranth.hdl import signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from golden.common.accumulator import EXP_W
from golden.common.formats import BF16, format_named
from golden.common.rounding import RoundConfig

from .formats import group_layout, layout


class AccumulatorSignature(wiring.Signature):
    """A ``1.P`` accumulator register and its read-out, driven by the PE.

    Members
    -------
    zero : Out(1), reset 1
    sign : Out(1)
    exp : Out(signed(10))
        Unbiased exponent (spec ``docs/specs/fpraker.md`` §1.2: 10-bit signed register).
    sig : Out(keep_bits + 1)
        Significand with its hidden bit: value ``(-1)**sign * sig * 2**(exp - keep_bits)``.
    out : Out(layout of ``out_fmt``)
        The register read out to ``out_fmt`` (bfloat16).
    """

    def __init__(self, keep_bits: int, out_fmt=BF16):
        self.keep_bits = keep_bits
        self.out_fmt = format_named(out_fmt)
        super().__init__({
            "zero": Out(1, init=1), "sign": Out(1), "exp": Out(signed(EXP_W)),
            "sig": Out(keep_bits + 1), "out": Out(layout(self.out_fmt)),
        })


def operand_group(fmt, lanes: int, operands=("a", "b"), flags=("clear",)) -> stream.Signature:
    """A valid/ready stream whose payload is one operand group (:func:`~.formats.group_layout`).

    The producer holds ``payload`` and ``valid`` until ``ready`` (the stream rules of
    :mod:`amaranth.lib.stream`).  In Verilog the payload is one port ``<name>__payload``; its
    field offsets are in the unit's manifest and in the layout.
    """
    return stream.Signature(group_layout(fmt, lanes, operands, flags))


def tile_a_stream(fmt, lanes: int) -> stream.Signature:
    """A tile column's serial-operand stream: payload ``{a: lanes values, clear: 1}``.

    ``clear`` marks the first group of a new reduction: every PE of the column starts that group
    from a zero accumulator.
    """
    return operand_group(fmt, lanes, operands=("a",), flags=("clear",))


def tile_b_stream(fmt, lanes: int) -> stream.Signature:
    """A tile row's parallel-operand stream: payload ``{b: lanes values}``.  Group ``s`` of row
    ``r``'s stream pairs with group ``s`` of every column's A stream."""
    return operand_group(fmt, lanes, operands=("b",), flags=())


class TileSignature(wiring.Signature):
    """A ``rows`` x ``cols`` tile of PEs (spec ``docs/specs/fpraker.md`` §5): PE ``(r, c)`` computes
    ``sum_s A[c][s] . B[r][s]`` over the groups ``s`` of column ``c``'s A stream and row ``r``'s
    B stream.

    Members (from the tile's side, i.e. the tile takes it ``Out``; a driver flips it)
    -------
    a : In(tile_a_stream) array of ``cols``
    b : In(tile_b_stream) array of ``rows``
    out : Out(layout of ``fmt``) array of ``rows`` x ``cols``
        PE ``(r, c)``'s accumulator read out (``out[r][c]``; Verilog ``out__r__c``).
    busy : Out(1)
        Some PE is working on a group this cycle; the outputs are final once every stream's
        groups have been taken and ``busy`` is low.
    error : Out(1)
        Sticky: an accepted operand had the all-ones exponent (Inf/NaN, illegal input, spec §12
        A16).  Cleared by reset only.
    """

    def __init__(self, rows: int, cols: int, lanes: int, fmt=BF16):
        self.rows, self.cols, self.lanes = rows, cols, lanes
        self.fmt = format_named(fmt)
        super().__init__({
            "a": In(tile_a_stream(self.fmt, lanes)).array(cols),
            "b": In(tile_b_stream(self.fmt, lanes)).array(rows),
            "out": Out(layout(self.fmt)).array(rows, cols),
            "busy": Out(1),
            "error": Out(1),
        })


class TermStreamSignature(wiring.Signature):
    """Per-lane term streams from term-encoder lanes to a PE (spec ``docs/specs/fpraker.md`` §2.3).

    Members
    -------
    valid : Out(lanes)
        Lane ``i`` presents a term.
    tp : Out(4) array of ``lanes``
        The term's position plus one, ``t + 1`` (weight ``2**-t``).
    neg : Out(lanes)
        The term is negative.
    last : Out(lanes)
        The term is the lane's last one (popping it empties the lane).
    advance : In(lanes)
        Pop lane ``i``'s term at the clock edge.
    drop : In(lanes)
        Discard all of lane ``i``'s remaining terms.
    """

    def __init__(self, lanes: int):
        self.lanes = lanes
        super().__init__({
            "valid": Out(lanes), "tp": Out(4).array(lanes), "neg": Out(lanes),
            "last": Out(lanes), "advance": In(lanes), "drop": In(lanes),
        })


class SidebandSignature(wiring.Signature):
    """A tensor's run-time format description (spec ``docs/specs/gecko.md`` §4.7, §5).

    Members
    -------
    man_width : Out(5)
        Mantissa bits kept.
    sign_en : Out(1)
        The sign bit is stored.
    fixed_en : Out(1)
        Use ``fixed_w`` as every row's exponent width (no width detector).
    fixed_w : Out(3)
    """

    #: field name → width; also the fields of the decompressor command
    FIELDS = {"man_width": 5, "sign_en": 1, "fixed_en": 1, "fixed_w": 3}

    def __init__(self):
        super().__init__({name: Out(width) for name, width in self.FIELDS.items()})

    @classmethod
    def layout(cls, **extra) -> data.StructLayout:
        """The side-band values as one struct, after ``extra`` leading fields."""
        return data.StructLayout({**extra, **cls.FIELDS})


class RawSignature(wiring.Signature):
    """A raw number for the rounding block: ``value = sig * 2**(exp - frac)`` (``cfg.frac``).

    Members
    -------
    sig : Out(in_width), signed when ``cfg.signed``
    exp : Out(signed(exp_width))
    sign : Out(1)
        Only with a magnitude significand.
    rand : Out(rand_bits)
        Only in mode ``"sr"``.
    """

    def __init__(self, cfg: RoundConfig):
        members = {"sig": Out(signed(cfg.in_width) if cfg.signed else cfg.in_width),
                   "exp": Out(signed(cfg.exp_width))}
        if not cfg.signed:
            members["sign"] = Out(1)
        if cfg.mode == "sr":
            members["rand"] = Out(cfg.rand_bits)
        super().__init__(members)


class RoundedSignature(wiring.Signature):
    """The rounding block's result (:class:`golden.common.rounding.Rounded`).

    Members
    -------
    zero, sign : Out(1)
    exp : Out(signed)
        Unbiased exponent (float targets only).
    sig : Out
        Significand with hidden bit (floats) or the integer's magnitude.
    bits : Out(layout of the target format)
        The packed word.
    inexact, overflow, underflow : Out(1)
    """

    def __init__(self, cfg: RoundConfig):
        members = {"zero": Out(1), "sign": Out(1)}
        if cfg.format.kind == "float":
            members["exp"] = Out(signed(cfg.out_exp_width))
        members.update({"sig": Out(cfg.out_sig_width), "bits": Out(layout(cfg.format)),
                        "inexact": Out(1), "overflow": Out(1), "underflow": Out(1)})
        super().__init__(members)


__all__ = ["AccumulatorSignature", "operand_group", "tile_a_stream", "tile_b_stream",
           "TileSignature", "TermStreamSignature", "SidebandSignature",
           "RawSignature", "RoundedSignature", "In", "Out"]

"""Gecko building blocks (spec ``docs/specs/gecko.md`` §4.3–§4.5, §5.3, §5.5, §5.6).

Combinational: :class:`ExpCoder`, :class:`ExpDecoder`, :class:`WidthDetector`,
:class:`FieldBuilder`, :class:`FieldParser`.  Sequential (one lane or one metadata stream, with
the control decided by the enclosing compressor/decompressor): :class:`Packer`,
:class:`Unpacker`, :class:`MetaPacker`, :class:`MetaUnpacker`.

Fields travel *left-aligned* in a lane word (bit ``lane_w - 1`` holds the field's first bit), so
masking, packing and parsing need only shifts by the small widths (sign, 1 + w, the fill
pointer), never a shift by the whole field width.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from golden.common import FloatFormat

from ..common import msb_index
from ..common.pipeline import stage
from ..common.signatures import SidebandSignature

#: the fixed Gecko bias
BIAS = 127
#: bits of MAG (|E - 127| <= 127)
MAG_BITS = 7
#: bits of the per-row exponent width (the paper's 3-bit metadata)
W_BITS = SidebandSignature.FIELDS["fixed_w"]
#: bits of the man_width control input (the paper's "5b man_width")
MW_BITS = SidebandSignature.FIELDS["man_width"]
#: bits of a field-length value (W <= 32)
LEN_BITS = 6
#: metadata word width and codes per word (A8)
META_WORD = 32
META_PER_WORD = 10


def _keep_mask(m: Module, man_width, mb: int) -> Signal:
    """Mask of the top ``man_width`` bits of an ``mb``-bit mantissa (eq. 5's
    ``((1 << n) - 1) << (mb - n)``); ``man_width`` must not exceed ``mb``."""
    keep = Signal(mb)
    m.d.comb += keep.eq(~((Const((1 << mb) - 1, mb) >> man_width)[:mb]))
    return keep


class ExpCoder(wiring.Component):
    """Canonical Gecko exponent code (§4.3, A1–A3), combinational.

    ``E == 0 -> (1, 0)``; ``1..126 -> (1, 127 - E)``; ``127..254 -> (0, E - 127)``.  ``E = 255``
    raises ``err`` and is coded as ``E = 254`` (A3).

    Ports
    -----
    e : In(8)
        Biased exponent.
    ds : Out(1)
        Sign of the difference: 1 for ``E < 127`` (and the zero marker).
    mag : Out(7)
        ``|E - 127|``, 0 for ``E = 0``.
    err : Out(1)
        ``E == 255`` (Inf/NaN, unsupported).
    """

    def __init__(self):
        super().__init__({"e": In(8), "ds": Out(1), "mag": Out(MAG_BITS), "err": Out(1)})

    def elaborate(self, platform):
        m = Module()
        e = Signal(8)
        m.d.comb += [
            self.err.eq(self.e == 255),
            e.eq(Mux(self.err, 254, self.e)),
            self.ds.eq(e < BIAS),
        ]
        with m.If(e == 0):
            m.d.comb += self.mag.eq(0)
        with m.Elif(e < BIAS):
            m.d.comb += self.mag.eq(BIAS - e)
        with m.Else():
            m.d.comb += self.mag.eq(e - BIAS)
        return m


class ExpDecoder(wiring.Component):
    """Inverse of :class:`ExpCoder`: ``E = 0`` for (1, 0), else ``127 -/+ MAG``; combinational.

    Ports
    -----
    ds : In(1)
    mag : In(7)
    e : Out(8)
    """

    def __init__(self):
        super().__init__({"ds": In(1), "mag": In(MAG_BITS), "e": Out(8)})

    def elaborate(self, platform):
        m = Module()
        with m.If(self.ds):
            m.d.comb += self.e.eq(Mux(self.mag == 0, 0, BIAS - self.mag))
        with m.Else():
            m.d.comb += self.e.eq(BIAS + self.mag)
        return m


class WidthDetector(wiring.Component):
    """Row exponent width ``w = bit_length(OR of the lanes' MAG)`` (§4.3, A4); combinational.

    The paper's OR + leading-one detector.  Also checks a fixed width (§4.7): ``over`` is set when
    ``fixed_en`` and some ``MAG >= 2**fixed_w``; then ``w = fixed_w``.

    Parameters
    ----------
    lanes : int

    Ports
    -----
    mag : In(7) array of ``lanes``
    fixed_en : In(1)
    fixed_w : In(3)
    w : Out(3)
        Width used for the row.
    over : Out(1)
        A magnitude does not fit the fixed width.
    """

    def __init__(self, lanes: int):
        self.lanes = lanes
        super().__init__({
            "mag": In(MAG_BITS).array(lanes), "fixed_en": In(1), "fixed_w": In(W_BITS),
            "w": Out(W_BITS), "over": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        orr = Signal(MAG_BITS)
        acc = Const(0, MAG_BITS)
        for j in range(self.lanes):
            acc = acc | self.mag[j]
        m.d.comb += orr.eq(acc)
        lod = msb_index(m, orr, name="lod")
        detected = Mux(orr.any(), lod + 1, 0)
        m.d.comb += [
            self.w.eq(Mux(self.fixed_en, self.fixed_w, detected)),
            self.over.eq(self.fixed_en & ((orr >> self.fixed_w) != 0)),
        ]
        return m


class FieldBuilder(wiring.Component):
    """One value's container field, left-aligned in a lane word (§4.4, A5, A6); combinational.

    ``field = [S if sign_en | DS | MAG[w-1:0] | M top man_width bits] << (lane_w - length)``:
    the mask of the paper's packer.  Bits of MAG above ``w`` are dropped (they can only be set
    in fixed-width mode, where the overflow is flagged).

    Parameters
    ----------
    fmt : golden.common.FloatFormat
    split : bool
        A register stage (the compressor's ``head`` cut) between the head ``{S, DS, MAG}`` with
        the kept mantissa bits and the mantissa's placement behind the head; it loads while
        ``en`` is high.  ``w``, ``sign_en`` and ``man_width`` are registered too, so the
        head's length is added after the stage and no register drives the shifter.

    Ports
    -----
    sign, ds : In(1)
    mag : In(7)
    man : In(mantissa bits)
    w : In(3)
    man_width : In(5)
        Must not exceed the mantissa bits (the enclosing unit clamps it).
    sign_en : In(1)
    en : In(1)
        With ``split``: the stage loads.
    field : Out(lane_w)
    length : Out(6)
        ``W = sign_en + 1 + w + man_width``.  With ``split`` both outputs are those of the
        inputs of the cycle before the last ``en``.
    """

    def __init__(self, fmt: FloatFormat, split: bool = False):
        self.fmt = fmt
        self.split = split
        super().__init__({
            "sign": In(1), "ds": In(1), "mag": In(MAG_BITS), "man": In(fmt.man_bits),
            "w": In(W_BITS), "man_width": In(MW_BITS), "sign_en": In(1),
            **({"en": In(1)} if split else {}), "field": Out(fmt.width), "length": Out(LEN_BITS),
        })

    def elaborate(self, platform):
        m = Module()
        lw, mb = self.fmt.width, self.fmt.man_bits
        # MAG's low w bits moved to the top of a 7-bit slot: the bits above w fall off
        mag_la = Signal(MAG_BITS)
        # 7 - w == ~w for a 3-bit w
        m.d.comb += mag_la.eq((self.mag << ~self.w)[:MAG_BITS])
        head = Signal(2 + MAG_BITS)          # {S, DS, MAG} left-aligned, 9 bits
        m.d.comb += head.eq(Mux(self.sign_en, Cat(mag_la, self.ds, self.sign),
                                Cat(Const(0, 1), mag_la, self.ds)))
        hlen = Signal(4)
        if not self.split:
            m.d.comb += hlen.eq(self.sign_en + 1 + self.w)
        # mantissa: keep its top man_width bits, left-aligned in the lane word
        keep = _keep_mask(m, self.man_width, mb)
        parts = stage(m, {"head": head, "man": self.man & keep, "w": self.w,
                          "sign_en": self.sign_en, "man_width": self.man_width},
                      self.split, en=self.en if self.split else None, name="head")
        if self.split:
            m.d.comb += hlen.eq(parts["sign_en"] + 1 + parts["w"])
        man_la = Signal(lw)
        m.d.comb += man_la.eq(Cat(Const(0, lw - mb), parts["man"]))
        m.d.comb += [
            self.field.eq(Cat(Const(0, lw - len(head)), parts["head"]) | (man_la >> hlen)),
            self.length.eq(hlen + parts["man_width"]),
        ]
        return m


class FieldParser(wiring.Component):
    """Split a left-aligned field back into an FP word (§4.4, §5.5); combinational.

    Zero-extends MAG, decodes it to E (:class:`ExpDecoder`) and re-inserts the trimmed
    mantissa bits as zeros.  With ``sign_en`` off the sign is 0.

    Parameters
    ----------
    fmt : golden.common.FloatFormat
    head_sum : bool
        Move the mantissa by one shift by the head's length ``sign_en + 1 + w`` (a small adder)
        instead of a shift by the sign and one by ``w``: the decompressor's pipelined row stage
        takes ``w`` and ``sign_en`` from registers shared by every lane, which then drive the
        adder rather than every lane's shifter.
    split : bool
        A register stage (the ``split`` cut) between the split of the field (sign, DS, MAG,
        the mantissa bits) and the exponent decoder and mantissa mask; it loads while ``en``
        is high.

    Ports
    -----
    field : In(lane_w)
        Left-aligned; bits after the field are ignored.
    w : In(3)
    man_width : In(5)
    sign_en : In(1)
    en : In(1)
        With ``split``: the stage loads.
    value : Out(lane_w)
        The FP32 / bf16 bit pattern ``P(x, man_width)`` (with ``split``: of the field of the
        cycle before the last ``en``).
    """

    def __init__(self, fmt: FloatFormat, head_sum: bool = False, split: bool = False):
        self.fmt = fmt
        self.head_sum = head_sum
        self.split = split
        super().__init__({
            "field": In(fmt.width), "w": In(W_BITS), "man_width": In(MW_BITS), "sign_en": In(1),
            **({"en": In(1)} if split else {}), "value": Out(fmt.width),
        })

    def elaborate(self, platform):
        m = Module()
        lw, mb = self.fmt.width, self.fmt.man_bits
        m.submodules.dec = dec = ExpDecoder()
        rest = Signal(lw)                     # the field after the sign bit
        m.d.comb += rest.eq(Mux(self.sign_en, self.field << 1, self.field))
        sign = Mux(self.sign_en, self.field[lw - 1], 0)
        mag_la = rest[lw - 1 - MAG_BITS:lw - 1]
        after = Signal(lw)                    # the mantissa bits, left-aligned
        if self.head_sum:
            head = Signal(4)
            m.d.comb += [head.eq(self.sign_en + 1 + self.w), after.eq(self.field << head)]
        else:
            m.d.comb += after.eq((rest << 1) << self.w)
        parts = stage(m, {"sign": sign, "ds": rest[lw - 1], "mag": mag_la >> ~self.w,  # ~w: 7 - w
                          "man": after[lw - mb:], "man_width": self.man_width},
                      self.split, en=self.en if self.split else None, name="split")
        keep = _keep_mask(m, parts["man_width"], mb)
        m.d.comb += [
            dec.ds.eq(parts["ds"]),
            dec.mag.eq(parts["mag"]),
            self.value.eq(Cat(parts["man"] & keep, dec.e, parts["sign"])),
        ]
        return m


def _combine(m, buf, word, pos, load, name: str) -> Signal:
    """A two-word buffer with ``word`` OR-ed in behind its first ``pos`` bits when ``load``
    (``buf | ({word, 0} >> pos)``): the combine step of the packer and the unpacker."""
    lw = len(word)
    out = Signal(2 * lw, name=name)
    m.d.comb += out.eq(Mux(load, buf | (Cat(Const(0, lw), word) >> pos)[:2 * lw], buf))
    return out


class Packer(wiring.Component):
    """One lane's packer: the paper's (L, R) register pair and rotate (Fig. 11, §5.3).

    ``acc = {L, R}`` (2 x lane_w bits) holds the lane's not-yet-emitted bits, MSB first.  A
    loaded field is placed at the shared fill pointer ``p``:
    ``merged = acc | ({field, 0} >> p)`` and ``word = merged[top half]`` is presented
    combinationally.  At the clock edge ``acc`` becomes ``merged``, ``merged << lane_w`` (when the
    controller emits ``word`` because the fill passed a word boundary), or 0 (``clear``).

    Parameters
    ----------
    lane_w : int
    placed : bool
        The field arrives already placed: a two-word window ``win`` (``{field, 0} >> p``, the
        compressor's ``place`` stage) replaces ``field`` and ``p``, and ``merged = acc | win``.

    Ports
    -----
    field : In(lane_w)
        Left-aligned field (without ``placed``).
    p : In(log2 lane_w)
        Fill pointer (bits already in L; without ``placed``).
    win : In(2 * lane_w)
        The placed field (with ``placed``).
    load : In(1)
        Merge ``field`` this cycle.
    shift : In(1)
        L was emitted: move R into L.
    clear : In(1)
        End of tensor: empty the registers (wins over ``shift``).
    word : Out(lane_w)
        The top half of ``merged``.
    """

    def __init__(self, lane_w: int, placed: bool = False):
        self.lane_w = lane_w
        self.placed = placed
        ports = ({"win": In(2 * lane_w)} if placed
                 else {"field": In(lane_w), "p": In(ceil_log2(lane_w))})
        super().__init__({
            **ports, "load": In(1), "shift": In(1), "clear": In(1), "word": Out(lane_w),
        })

    def elaborate(self, platform):
        m = Module()
        lw = self.lane_w
        acc = Signal(2 * lw)
        if self.placed:
            merged = Signal(2 * lw, name="merged")
            m.d.comb += merged.eq(Mux(self.load, acc | self.win, acc))
        else:
            merged = _combine(m, acc, self.field, self.p, self.load, "merged")
        m.d.comb += self.word.eq(merged[lw:])
        with m.If(self.clear):
            m.d.sync += acc.eq(0)
        with m.Elif(self.shift):
            m.d.sync += acc.eq(Cat(Const(0, lw), merged[:lw]))
        with m.Else():
            m.d.sync += acc.eq(merged)
        return m


class Unpacker(wiring.Component):
    """One lane's unpacker: 64-bit (L, R) buffer with combine-and-shift (Fig. 12, §5.5).

    ``buf`` holds ``avail`` valid bits, MSB first.  When ``load`` a new word is combined behind
    them: ``window = buf | ({word, 0} >> avail)``; ``field`` (the top lane word of ``window``) is
    presented combinationally.  ``take`` shifts the row's field out (``buf = window << length``);
    ``clear`` empties the buffer at the end of a tensor.

    Ports
    -----
    word : In(lane_w)
    avail : In(ceil_log2(2 * lane_w))
        Valid bits in the buffer (0 .. 2 * lane_w - 1: 6 bits for FP32, 5 for bf16).
    load : In(1)
    take : In(1)
    length : In(6)
    clear : In(1)
    field : Out(lane_w)
    """

    def __init__(self, lane_w: int):
        self.lane_w = lane_w
        super().__init__({
            "word": In(lane_w), "avail": In(ceil_log2(2 * lane_w)), "load": In(1),
            "take": In(1), "length": In(LEN_BITS), "clear": In(1), "field": Out(lane_w),
        })

    def elaborate(self, platform):
        m = Module()
        lw = self.lane_w
        buf = Signal(2 * lw)
        window = _combine(m, buf, self.word, self.avail, self.load, "window")
        m.d.comb += self.field.eq(window[lw:])
        with m.If(self.clear):
            m.d.sync += buf.eq(0)
        with m.Elif(self.take):
            m.d.sync += buf.eq((window << self.length)[:2 * lw])
        return m


class WindowUnpacker(wiring.Component):
    """One lane's unpacker of the pipelined decompressor: the last lane word loaded and the
    incoming one as a two-word window, the row's field taken from it by one shift (§5.5).

    The decompressor loads a word only when the bits left over (``avail``) are fewer than the
    row's field needs, so fewer than ``lane_w`` bits are ever left over: a row's field starts
    at the last ``avail`` bits of the last word loaded (``held``), or at the top of the
    incoming word when none are left.  ``field = ({held, word} >> avail)[low lane_w]``; a
    loaded word enters ``held`` at the clock edge.  Unlike :class:`Unpacker` nothing is
    shifted in a loop: ``held`` only loads words.

    Ports
    -----
    word : In(lane_w)
        The incoming word (read only when the row loads it).
    load : In(1)
        The row takes ``word``.
    avail : In(ceil_log2(2 * lane_w))
        Bits of ``held`` not yet consumed, 0..lane_w - 1.
    field : Out(lane_w)
        Left-aligned; the bits after the row's field are those that follow it in the stream,
        or stale.
    """

    def __init__(self, lane_w: int):
        self.lane_w = lane_w
        super().__init__({
            "word": In(lane_w), "load": In(1), "avail": In(ceil_log2(2 * lane_w)),
            "field": Out(lane_w),
        })

    def elaborate(self, platform):
        m = Module()
        lw = self.lane_w
        held = Signal(lw)
        with m.If(self.load):
            m.d.sync += held.eq(self.word)
        m.d.comb += self.field.eq((Cat(self.word, held) >> self.avail)[:lw])
        return m


class MetaPacker(wiring.Component):
    """Packs 3-bit row widths ten per 32-bit word, MSB first (§4.5, A8).

    ``word`` is the current word with the pushed ``code`` already in place (bits [31:29] hold the
    first row; bits [1:0] are 0); ``full`` says that this push completes the word (10 codes or
    ``last``).  At the edge a completing push starts a new, empty word.

    Ports
    -----
    code : In(3)
    push : In(1)
    last : In(1)
        The pushed code is the tensor's last: flush the partial word.
    word : Out(32)
    ends : Out(1)
        A push now would complete the word (independent of ``push``).
    full : Out(1)
        ``push & ends``.
    """

    def __init__(self):
        super().__init__({
            "code": In(W_BITS), "push": In(1), "last": In(1), "word": Out(META_WORD),
            "ends": Out(1), "full": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        held = Signal(META_WORD)
        cnt = Signal(range(META_PER_WORD))
        placed = Signal(META_WORD)
        with m.Switch(cnt):
            for i in range(META_PER_WORD):
                with m.Case(i):
                    lo = META_WORD - W_BITS * (i + 1)
                    m.d.comb += placed.eq(self.code << lo)
        m.d.comb += [
            self.word.eq(held | Mux(self.push, placed, 0)),
            self.ends.eq((cnt == META_PER_WORD - 1) | self.last),
            self.full.eq(self.push & self.ends),
        ]
        with m.If(self.full):
            m.d.sync += [held.eq(0), cnt.eq(0)]
        with m.Elif(self.push):
            m.d.sync += [held.eq(self.word), cnt.eq(cnt + 1)]
        return m


class MetaUnpacker(wiring.Component):
    """Hands out the 3-bit row widths of packed metadata words in order (inverse of MetaPacker).

    ``need`` says no code is held: the current ``code`` is then the top of the incoming ``word``,
    and a ``take`` consumes that word (the controller must assert the word's ready).

    Ports
    -----
    word : In(32)
    take : In(1)
        Consume the current code.
    clear : In(1)
        End of tensor: drop the codes left in the word (its zero padding).
    need : Out(1)
    code : Out(3)
    """

    def __init__(self):
        super().__init__({
            "word": In(META_WORD), "take": In(1), "clear": In(1), "need": Out(1),
            "code": Out(W_BITS),
        })

    def elaborate(self, platform):
        m = Module()
        codes = Signal(W_BITS * META_PER_WORD)  # held codes, next one at the top
        left = Signal(range(META_PER_WORD + 1))
        incoming = self.word[META_WORD - W_BITS * META_PER_WORD:]
        m.d.comb += [
            self.need.eq(left == 0),
            self.code.eq(Mux(self.need, incoming, codes)[-W_BITS:]),
        ]
        with m.If(self.clear):
            m.d.sync += left.eq(0)
        with m.Elif(self.take):
            with m.If(self.need):
                m.d.sync += [codes.eq(incoming << W_BITS), left.eq(META_PER_WORD - 1)]
            with m.Else():
                m.d.sync += [codes.eq(codes << W_BITS), left.eq(left - 1)]
        return m


__all__ = [
    "ExpCoder", "ExpDecoder", "WidthDetector", "FieldBuilder", "FieldParser", "Packer",
    "Unpacker", "WindowUnpacker", "MetaPacker", "MetaUnpacker",
]

"""FPRaker base-delta compression of off-chip tensors (units ``fpraker.bdc_encoder`` and
``fpraker.bdc_decoder``; spec ``docs/specs/fpraker.md`` §7).

The group code, the bit order and the partial final group are those of
:mod:`golden.fpraker.bdc`: fields LSB first, groups concatenated into one bit string per
tensor, cut into ``word``-bit words (stream bit ``k`` is bit ``k % word`` of word
``k // word``; the tensor's final word is zero-padded).

Stream payloads (``amaranth.lib.stream``, valid/ready):

* a *value* is ``{value: bf16 {man, exp, sign}, last: 1}``; ``last`` marks a tensor's final
  value (the encoder closes a partial group and pads the final word there; the decoder sets it
  on the final value of a command's count);
* a *word* is ``{data: word, last: 1}``; ``last`` marks a tensor's final word;
* a decoder *command* is ``{count: 32}``, the tensor's value count: the stream does not say
  how many values a partial final group holds, so the decoder is told (0 = empty tensor, which
  has no words).
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from golden.common.formats import BF16
from golden.fpraker.bdc import BDCConfig

from ..common.formats import layout

#: bits of the decoder command's value count
COUNT_BITS = 32
#: bits of a group header, of the base / a raw exponent, of a value's sign + mantissa field
HEADER_BITS, EXP_BITS, SM_BITS = 3, 8, 8
#: bits of a group's first chunk: header, base, the first value's sign + mantissa
HEAD_CHUNK = HEADER_BITS + EXP_BITS + SM_BITS
#: the escape header (exponents stored raw) and the widest delta stored as a delta
ESCAPE, MAX_DELTA = 7, 6

VALUE_LAYOUT = data.StructLayout({"value": layout(BF16), "last": 1})
CMD_LAYOUT = data.StructLayout({"count": COUNT_BITS})


def word_layout(cfg: BDCConfig) -> data.StructLayout:
    """Payload of a packed word plus the end-of-tensor flag."""
    return data.StructLayout({"data": cfg.word, "last": 1})


def encoder_members(cfg: BDCConfig) -> dict:
    """The encoder's ports: values in, packed words out."""
    return {"i": In(stream.Signature(VALUE_LAYOUT)), "o": Out(stream.Signature(word_layout(cfg)))}


def decoder_members(cfg: BDCConfig) -> dict:
    """The decoder's ports: a command per tensor and packed words in, values out, the sticky
    ``error``."""
    return {"cmd": In(stream.Signature(CMD_LAYOUT)), "i": In(stream.Signature(word_layout(cfg))),
            "o": Out(stream.Signature(VALUE_LAYOUT)), "error": Out(1)}


def delta_code(m, d, name: str = "wcode") -> Signal:
    """``min(w(d), 7)`` of a signed exponent difference ``d``: 0 for ``d == 0``, the least
    two's complement width 1..6 that holds it, else 7 (the escape)."""
    code = Signal(3, name=name)
    m.d.comb += code.eq(ESCAPE)
    for w in range(MAX_DELTA, 0, -1):          # the narrowest fitting width is assigned last
        with m.If((d >= -(1 << (w - 1))) & (d <= (1 << (w - 1)) - 1)):
            m.d.comb += code.eq(w)
    with m.If(d == 0):
        m.d.comb += code.eq(0)
    return code


def stored_bits(header):
    """Bits stored per exponent after a group's first: the delta width, 8 for the escape."""
    return Mux(header == ESCAPE, EXP_BITS, header)


class BDCEncoder(wiring.Component):
    """BDC encoder: one bf16 value per cycle in, the packed bit string out in ``word``-bit
    words (spec §7).

    The header (the group's largest delta width) is known only after the group's last value,
    so a group is buffered before any of it is written out.  Two group buffers alternate: one
    fills from ``i`` while the other is written out, one value (one ``sm | delta`` chunk, or the
    first value's ``header | base | sm`` chunk) per cycle, into a bit accumulator that emits a
    word whenever it holds ``word`` bits.  Throughput: one value per cycle while ``o`` is
    ready, indefinitely for tensors of whole groups; a tensor's final word costs at most one
    extra cycle (the flush of a partial word), and a final partial group is written out in as
    many cycles as it holds values, so a following group's input can wait while the buffer it
    needs drains (at most ``group`` cycles per tensor).  Latency: a group's first chunk enters
    the accumulator the cycle after the group's last value was accepted.  Output words equal
    ``golden.fpraker.bdc.to_words`` of ``golden.fpraker.bdc.encode`` of each tensor.

    Parameters
    ----------
    cfg : golden.fpraker.bdc.BDCConfig
        ``group`` (values per group, buffered twice) and ``word`` (output word width).

    Ports
    -----
    i : In(stream of values)
        bf16 values; ``last`` on a tensor's final value closes its (possibly partial) group.
    o : Out(stream of words)
        Packed words; ``last`` on a tensor's final (zero-padded) word.
    """

    def __init__(self, cfg: BDCConfig = BDCConfig()):
        self.cfg = cfg
        super().__init__(encoder_members(cfg))

    def elaborate(self, platform):
        m = Module()
        G, W = self.cfg.group, self.cfg.word
        IDX = ceil_log2(G)
        CNT = ceil_log2(G + 1)

        # ---- the two group buffers and what the fill side records for each group
        banks = [Array(Signal(16, name=f"bank{b}_{k}") for k in range(G)) for b in range(2)]
        full = [Signal(name=f"full{b}") for b in range(2)]
        count = [Signal(CNT, name=f"count{b}") for b in range(2)]
        header = [Signal(3, name=f"header{b}") for b in range(2)]
        final = [Signal(name=f"final{b}") for b in range(2)]

        # ---- fill side: accept values, track the running largest delta width
        wb = Signal()                       # bank being filled
        wi = Signal(IDX)                    # index in the group
        base = Signal(8)                    # exponent of the group's first value
        dmax = Signal(3)                    # largest delta code so far
        v = self.i.payload.value
        m.d.comb += self.i.ready.eq(~Mux(wb, full[1], full[0]))
        d = Signal(signed(9))
        m.d.comb += d.eq(v.exp - base)
        code = delta_code(m, d)
        new_max = Signal(3)
        m.d.comb += new_max.eq(Mux(wi == 0, 0, Mux(code > dmax, code, dmax)))
        with m.If(self.i.valid & self.i.ready):
            for b in range(2):
                with m.If(wb == b):
                    m.d.sync += banks[b][wi].eq(v.as_value())
            with m.If(self.i.payload.last | (wi == G - 1)):
                for b in range(2):
                    with m.If(wb == b):
                        m.d.sync += [full[b].eq(1), count[b].eq(wi + 1), header[b].eq(new_max),
                                     final[b].eq(self.i.payload.last)]
                m.d.sync += [wb.eq(~wb), wi.eq(0), dmax.eq(0)]
            with m.Else():
                m.d.sync += [wi.eq(wi + 1), dmax.eq(new_max)]
                with m.If(wi == 0):
                    m.d.sync += base.eq(v.exp)

        # ---- write-out side: one chunk per cycle from the full bank
        rb = Signal()                       # bank being written out
        rk = Signal(IDX)                    # chunk (value) index
        cur = Signal(VALUE_LAYOUT["value"].shape)
        first = Signal(VALUE_LAYOUT["value"].shape)
        hdr = Signal(3)
        n = Signal(CNT)
        fin = Signal()
        busy = Signal()
        m.d.comb += [
            cur.eq(Mux(rb, banks[1][rk], banks[0][rk])),
            first.eq(Mux(rb, banks[1][0], banks[0][0])),
            hdr.eq(Mux(rb, header[1], header[0])), n.eq(Mux(rb, count[1], count[0])),
            fin.eq(Mux(rb, final[1], final[0])), busy.eq(Mux(rb, full[1], full[0])),
        ]
        sm = Cat(cur.man, cur.sign)
        eff = Signal(4)
        m.d.comb += eff.eq(stored_bits(hdr))
        x = Signal(EXP_BITS)                 # the stored exponent: delta bits or the raw field
        with m.Switch(hdr):
            for h in range(MAX_DELTA + 1):
                with m.Case(h):
                    m.d.comb += x.eq((cur.exp - first.exp)[:h] if h else 0)
            with m.Default():
                m.d.comb += x.eq(cur.exp)
        chunk = Signal(HEAD_CHUNK)
        length = Signal(range(HEAD_CHUNK + 1))
        with m.If(rk == 0):
            m.d.comb += [chunk.eq(Cat(hdr, cur.exp, sm)), length.eq(HEAD_CHUNK)]
        with m.Else():
            m.d.comb += [chunk.eq(Cat(sm, x)), length.eq(SM_BITS + eff)]
        last_chunk = rk == n - 1

        # ---- bit accumulator: bits above ``fill`` are always zero
        acc = Signal(W)
        fill = Signal(range(W))
        flush = Signal()                    # a tensor's final bits wait for a word of their own
        merged = Signal(W + HEAD_CHUNK)
        total = Signal(range(W + HEAD_CHUNK + 1))
        m.d.comb += [merged.eq(acc | (chunk << fill)), total.eq(fill + length)]
        can_o = ~self.o.valid | self.o.ready
        step = Signal()
        m.d.comb += step.eq(busy & can_o & ~flush)

        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        with m.If(flush):
            with m.If(can_o):
                m.d.sync += [self.o.valid.eq(1), self.o.payload.data.eq(acc),
                             self.o.payload.last.eq(1), acc.eq(0), fill.eq(0), flush.eq(0)]
        with m.Elif(step):
            ends = fin & last_chunk
            with m.If(total >= W):
                m.d.sync += [self.o.valid.eq(1), self.o.payload.data.eq(merged[:W]),
                             self.o.payload.last.eq(ends & (total == W)),
                             acc.eq(merged[W:]), fill.eq(total - W)]
                with m.If(ends & (total != W)):
                    m.d.sync += flush.eq(1)
            with m.Elif(ends):
                m.d.sync += [self.o.valid.eq(1), self.o.payload.data.eq(merged[:W]),
                             self.o.payload.last.eq(1), acc.eq(0), fill.eq(0)]
            with m.Else():
                m.d.sync += [acc.eq(merged[:W]), fill.eq(total)]
            with m.If(last_chunk):
                for b in range(2):
                    with m.If(rb == b):
                        m.d.sync += full[b].eq(0)
                m.d.sync += [rb.eq(~rb), rk.eq(0)]
            with m.Else():
                m.d.sync += rk.eq(rk + 1)
        return m


class BDCDecoder(wiring.Component):
    """BDC decoder: packed words in, one bf16 value per cycle out (spec §7).

    A command gives a tensor's value count; the unit then parses its bit string chunk by chunk
    (a group's ``header | base | sm`` chunk, then one ``sm | delta`` chunk per value) from a bit
    buffer, taking a word only when the buffer holds fewer bits than the next chunk, and
    presents each value in an output register.  No group is buffered: a value's exponent is
    known as soon as its delta is read.  Latency: a value is registered one cycle after its
    bits are present.  Throughput: one value per cycle while words are available and ``o`` is
    ready (a word holds at least one chunk); one idle cycle between tensors.  Output equals
    ``golden.fpraker.bdc.decode``.

    Every header is legal: a header larger than the encoder would write is decoded as written.

    Parameters
    ----------
    cfg : golden.fpraker.bdc.BDCConfig
        ``group`` (where headers are expected) and ``word`` (input word width).

    Ports
    -----
    cmd : In(stream of commands)
        ``count``: the values of the next tensor (0: an empty tensor, without words).
    i : In(stream of words)
        The tensor's packed words; ``last`` must be set on the word holding its final bit, and
        only there.
    o : Out(stream of values)
        Decoded values; ``last`` on the tensor's final value.
    error : Out(1)
        Sticky (cleared by reset) when a stream is malformed: the tensor's bits run past a word
        marked ``last`` (a truncated stream: the rest of the tensor is dropped, ``o`` stops
        before the missing value and the next command starts on the next word); the word
        holding the tensor's final bit is not marked ``last`` (a stream longer than its count:
        the rest of that word is dropped); or a delta takes an exponent outside 0..255 (its
        low 8 bits are output).  Alignment after an error is not guaranteed.
    """

    def __init__(self, cfg: BDCConfig = BDCConfig()):
        self.cfg = cfg
        super().__init__(decoder_members(cfg))

    def elaborate(self, platform):
        m = Module()
        G, W = self.cfg.group, self.cfg.word

        active = Signal()
        left = Signal(COUNT_BITS)            # values of the tensor still to decode
        k = Signal(range(G))                 # index in the group
        hdr = Signal(3)
        base = Signal(EXP_BITS)
        buf = Signal(W)                      # unread bits, LSB first; bits above avail are 0
        avail = Signal(range(W))
        cur_last = Signal()                  # the word the buffered bits came from was ``last``

        m.d.comb += self.cmd.ready.eq(~active)
        with m.If(self.cmd.valid & ~active):
            m.d.sync += [active.eq(self.cmd.payload.count != 0), left.eq(self.cmd.payload.count),
                         k.eq(0), buf.eq(0), avail.eq(0), cur_last.eq(0)]

        length = Signal(range(HEAD_CHUNK + 1))
        m.d.comb += length.eq(Mux(k == 0, HEAD_CHUNK, SM_BITS + stored_bits(hdr)))
        need = Signal()
        m.d.comb += need.eq(avail < length)
        truncated = Signal()
        m.d.comb += truncated.eq(active & need & cur_last)
        can_o = ~self.o.valid | self.o.ready
        go = Signal()
        m.d.comb += [go.eq(active & can_o & ~truncated & (~need | self.i.valid)),
                     self.i.ready.eq(go & need)]
        window = Signal(2 * W)
        m.d.comb += window.eq(buf | Mux(need, self.i.payload.data << avail, 0))

        # ---- parse the chunk at the window's bottom
        value = Signal(VALUE_LAYOUT["value"].shape)
        head_hdr = window[:HEADER_BITS]
        head_base = window[HEADER_BITS:HEADER_BITS + EXP_BITS]
        exp = Signal(signed(10))             # base + delta before the range check
        bad = Signal()
        with m.If(k == 0):
            sm = window[HEADER_BITS + EXP_BITS:HEAD_CHUNK]
            m.d.comb += [value.man.eq(sm[:7]), value.sign.eq(sm[7]), value.exp.eq(head_base)]
        with m.Else():
            sm = window[:SM_BITS]
            x = window[SM_BITS:SM_BITS + EXP_BITS]
            with m.Switch(hdr):
                for h in range(MAX_DELTA + 1):
                    with m.Case(h):
                        m.d.comb += exp.eq(base + (x[:h].as_signed() if h else Const(0)))
                with m.Default():
                    m.d.comb += exp.eq(x)
            m.d.comb += [value.man.eq(sm[:7]), value.sign.eq(sm[7]), value.exp.eq(exp[:8]),
                         bad.eq((exp < 0) | (exp > 255))]

        ends = left == 1
        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        with m.If(truncated):
            m.d.sync += [self.error.eq(1), active.eq(0)]
        with m.If(go):
            m.d.sync += [self.o.valid.eq(1), self.o.payload.value.eq(value),
                         self.o.payload.last.eq(ends), left.eq(left - 1),
                         k.eq(Mux(k == G - 1, 0, k + 1))]
            with m.If(k == 0):
                m.d.sync += [hdr.eq(head_hdr), base.eq(head_base)]
            with m.If(bad):
                m.d.sync += self.error.eq(1)
            with m.If(ends):
                m.d.sync += [active.eq(0), buf.eq(0), avail.eq(0)]
                with m.If(~Mux(need, self.i.payload.last, cur_last)):
                    m.d.sync += self.error.eq(1)
            with m.Else():
                m.d.sync += [buf.eq(window >> length),
                             avail.eq(avail + Mux(need, W, 0) - length)]
                with m.If(need):
                    m.d.sync += cur_last.eq(self.i.payload.last)
        return m


class BDCLoopback(wiring.Component):
    """A BDC encoder feeding a decoder directly (the end-to-end check): values in, the same
    values out.  The decoder takes at most one word per value, so no buffer is needed between
    them.

    Ports
    -----
    i
        As :class:`BDCEncoder`.
    cmd, o, error
        As :class:`BDCDecoder`.
    """

    def __init__(self, cfg: BDCConfig = BDCConfig()):
        self.cfg = cfg
        dec = decoder_members(cfg)
        super().__init__({"i": encoder_members(cfg)["i"],
                          **{name: dec[name] for name in ("cmd", "o", "error")}})

    def elaborate(self, platform):
        m = Module()
        m.submodules.encoder = enc = BDCEncoder(self.cfg)
        m.submodules.decoder = dec = BDCDecoder(self.cfg)
        wiring.connect(m, wiring.flipped(self.i), enc.i)
        wiring.connect(m, enc.o, dec.i)
        wiring.connect(m, wiring.flipped(self.cmd), dec.cmd)
        wiring.connect(m, dec.o, wiring.flipped(self.o))
        m.d.comb += self.error.eq(dec.error)
        return m


__all__ = ["COUNT_BITS", "VALUE_LAYOUT", "CMD_LAYOUT", "word_layout", "encoder_members",
           "decoder_members", "delta_code", "BDCEncoder", "BDCDecoder", "BDCLoopback"]

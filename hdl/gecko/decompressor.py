"""The Gecko decompressor (unit ``gecko.decompressor``; ``docs/specs/gecko.md`` §5.4, §5.5): lane
words and metadata back to a row of values per cycle.  Stream payloads and the choices the
paper leaves open: :mod:`hdl.gecko.streams`."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.utils import ceil_log2

from golden.gecko.codec import GeckoConfig

from ..common.signatures import SidebandSignature
from .blocks import (
    LEN_BITS, W_BITS, FieldParser, MetaUnpacker, Unpacker,
)

from .streams import (ROWS_BITS, clamp_man_width, decompressor_members, lane_widths)


class GeckoDecompressor(wiring.Component):
    """Gecko decompressor: one row of ``lanes`` FP values out per cycle (Fig. 10, §5.4, §5.5).

    A command gives the tensor's row count and side-band values; the unit then pops metadata
    words (one per ten rows) and packed word rows (only when a lane's buffer holds fewer bits
    than the row's field width, so at most one per output row) and presents each decoded row in
    an output register.  Latency: an output row is registered one cycle after its inputs are
    present.  Throughput: one output row per cycle while inputs are available and ``o`` is
    ready; one idle cycle between tensors.  Output equals ``golden.gecko.codec.decompress``, i.e.
    ``P(x, man_width)`` of the compressed values.  ``cfg`` (``lanes``, ``fmt``) shapes the
    circuit as for :class:`GeckoCompressor`.

    Ports
    -----
    cmd : In(stream of commands)
        ``rows`` (0 = empty tensor, nothing is emitted) and the side-band values ``ctl``
        (``man_width``, ``sign_en``, ``fixed_en``, ``fixed_w``) of one tensor.
    i : In(stream of rows)
        Packed lane words (``last`` is ignored: the row count delimits the tensor).
    meta : In(stream of metadata words)
        Not read in fixed mode.
    o : Out(stream of rows)
        Decoded values; ``last`` on the tensor's final row.
    err_cfg : Out(1)
        Sticky: a command's ``man_width`` exceeded the mantissa.
    """

    def __init__(self, cfg: GeckoConfig = GeckoConfig()):
        self.cfg = cfg
        super().__init__(decompressor_members(cfg))

    def elaborate(self, platform):
        m = Module()
        cfg, fmt = self.cfg, self.cfg.format
        lanes, lw, mb = lane_widths(cfg)

        active = Signal()
        rows_left = Signal(ROWS_BITS)
        c = Signal(SidebandSignature.layout())     # the current tensor's side-band values
        cmd = self.cmd.payload
        cmd_err = Signal()
        cmd_mw = clamp_man_width(m, cmd.ctl.man_width, mb, cmd_err)
        m.d.comb += self.cmd.ready.eq(~active)
        with m.If(self.cmd.valid & ~active):
            m.d.sync += [
                active.eq(cmd.rows != 0), rows_left.eq(cmd.rows), c.eq(cmd.ctl),
                c.man_width.eq(cmd_mw),
            ]
            with m.If(cmd_err):
                m.d.sync += self.err_cfg.eq(1)

        m.submodules.metaunpack = mu = MetaUnpacker()
        m.d.comb += mu.word.eq(self.meta.payload.word)
        need_meta = ~c.fixed_en & mu.need
        w = Signal(W_BITS)
        m.d.comb += w.eq(Mux(c.fixed_en, c.fixed_w, mu.code))
        length = Signal(LEN_BITS)
        m.d.comb += length.eq(c.sign_en + 1 + w + c.man_width)
        avail = Signal(ceil_log2(2 * lw))
        need_word = avail < length

        can_o = ~self.o.valid | self.o.ready
        go = Signal()
        m.d.comb += [
            go.eq(active & can_o & (~need_meta | self.meta.valid) & (~need_word | self.i.valid)),
            self.meta.ready.eq(go & need_meta),
            self.i.ready.eq(go & need_word),
        ]
        done = go & (rows_left == 1)
        m.d.comb += [mu.take.eq(go & ~c.fixed_en), mu.clear.eq(done)]

        values = []
        for j in range(lanes):
            up = m.submodules[f"unpack{j}"] = Unpacker(lw)
            parse = m.submodules[f"parse{j}"] = FieldParser(fmt)
            m.d.comb += [
                up.word.eq(self.i.payload.data[j]), up.avail.eq(avail),
                up.load.eq(need_word), up.take.eq(go), up.length.eq(length), up.clear.eq(done),
                parse.field.eq(up.field), parse.w.eq(w), parse.man_width.eq(c.man_width),
                parse.sign_en.eq(c.sign_en),
            ]
            values.append(parse.value)

        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        with m.If(go):
            m.d.sync += [
                self.o.valid.eq(1), self.o.payload.last.eq(done), rows_left.eq(rows_left - 1),
                avail.eq(Mux(done, 0, avail + Mux(need_word, lw, 0) - length)),
            ]
            m.d.sync += [self.o.payload.data[j].eq(values[j]) for j in range(lanes)]
            with m.If(done):
                m.d.sync += active.eq(0)
        return m


__all__ = ["GeckoDecompressor"]

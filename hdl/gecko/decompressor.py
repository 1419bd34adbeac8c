"""The Gecko decompressor (unit ``gecko.decompressor``; ``docs/specs/gecko.md`` §5.4, §5.5): lane
words and metadata back to a row of values per cycle.  Stream payloads and the choices the
paper leaves open: :mod:`hdl.gecko.streams`.

Pipeline stages (``cfg.pipeline``, 0..2; :data:`CUTS`)
------------------------------------------------------
``pipeline = 0`` is the paper's decompressor: in one cycle the control (command, metadata
unpacker, field length, the count ``avail`` of bits left over) decides a row, and each lane's
:class:`~hdl.gecko.blocks.Unpacker` (a two-word buffer shifted right by ``avail`` and left by
the field length, in a loop) and field parser produce it into the output register.  Its clock
is bound by that loop and by the ``avail`` register, which steers every lane's shifters (in
OSU 0.18 µm its flip-flop drives about 500 loads, 7 ns from the clock edge).

With ``pipeline >= 1`` the control and its handshakes stay as they are; the unpackers become
:class:`~hdl.gecko.blocks.WindowUnpacker` (the last word loaded and the incoming one, shifted
once by ``avail``: no shifter in a loop), ``avail`` is kept as the sum of its last value and
step so that no register drives the lanes' shifters, and the rows pass stages at named cut
points:

- ``field`` (depths 1 and 2): the rows' fields, registered with their width, ``man_width``,
  ``sign_en`` and ``last``; the field parsers (moving the mantissa by one shift by the head's
  length, :class:`~hdl.gecko.blocks.FieldParser` ``head_sum``) follow into the output register;
- ``split`` (depth 2): inside the field parsers, between the split of the field (sign, DS, MAG,
  mantissa bits) and the exponent decoder and mantissa mask.

Each stage takes a row when it is empty or its row moves on, so under back-pressure the stages
stall together and bubbles close up.  A row is on ``o`` ``1 + pipeline`` cycles after the cycle
that takes its inputs (:func:`golden.gecko.codec.decompressor_cycles`); with ``o`` always ready
the inputs are taken in the same cycles as at depth 0.
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.utils import ceil_log2

from golden.gecko.codec import GeckoConfig

from ..common.signatures import SidebandSignature
from ..common.pipeline import stage
from .blocks import (
    LEN_BITS, W_BITS, FieldParser, MetaUnpacker, Unpacker, WindowUnpacker,
)

from .streams import (ROWS_BITS, clamp_man_width, decompressor_members, lane_widths,
                      valid_bit)


#: cut points of each pipeline depth (see the module docstring)
CUTS = {0: (), 1: ("field",), 2: ("field", "split")}


class GeckoDecompressor(wiring.Component):
    """Gecko decompressor: one row of ``lanes`` FP values out per cycle (Fig. 10, §5.4, §5.5).

    A command gives the tensor's row count and side-band values; the unit then pops metadata
    words (one per ten rows) and packed word rows (only when a lane's buffer holds fewer bits
    than the row's field width, so at most one per output row) and presents each decoded row in
    an output register.  Latency: an output row is on ``o`` ``1 + pipeline`` cycles after the
    cycle that takes its inputs (stages in the module docstring).  Throughput: one output row
    per cycle while inputs are available and ``o`` is ready; one idle cycle between tensors.
    Output equals ``golden.gecko.codec.decompress``, i.e. ``P(x, man_width)`` of the
    compressed values; the timing is ``golden.gecko.codec.decompressor_cycles``.  ``cfg``
    (``lanes``, ``fmt``, ``pipeline``) shapes the circuit as for :class:`GeckoCompressor`.

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
        cuts = CUTS[cfg.pipeline]

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

        # a row can go when the next stage can take it: o (depth 0) or the first row stage
        if cuts:
            free = Signal(name="rows_ready")
        else:
            free = ~self.o.valid | self.o.ready
        go = Signal()
        m.d.comb += [
            go.eq(active & free & (~need_meta | self.meta.valid) & (~need_word | self.i.valid)),
            self.meta.ready.eq(go & need_meta),
            self.i.ready.eq(go & need_word),
        ]
        done = go & (rows_left == 1)
        m.d.comb += [mu.take.eq(go & ~c.fixed_en), mu.clear.eq(done)]

        if cuts:
            # avail is kept as its value before the last row and that row's step, added here,
            # so that no register drives the lanes' shifters directly
            avail_base = Signal.like(avail, name="avail_base")
            avail_step = Signal.like(avail, name="avail_step")
            m.d.comb += avail.eq(avail_base + avail_step)
            with m.If(go):
                m.d.sync += [
                    rows_left.eq(rows_left - 1), avail_base.eq(Mux(done, 0, avail)),
                    avail_step.eq(Mux(done, 0, Mux(need_word, lw, 0) - length)),
                ]
                with m.If(done):
                    m.d.sync += active.eq(0)
            self._row_stages(m, cuts, go, free, need_word, avail, done, w, c)
            return m

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

    def _row_stages(self, m, cuts, go, rows_ready, need_word, avail, done, w, c):
        """The window unpackers and the row stages after the control (``pipeline`` >= 1)."""
        cfg, fmt = self.cfg, self.cfg.format
        lanes, lw, _ = lane_widths(cfg)

        # ---- the window: fewer than lane_w bits are ever left over, so the row's field starts
        # in the last word loaded (its last avail bits) or at the top of the incoming word
        fields = []
        for j in range(lanes):
            up = m.submodules[f"unpack{j}"] = WindowUnpacker(lw)
            m.d.comb += [
                up.word.eq(self.i.payload.data[j]), up.load.eq(go & need_word),
                up.avail.eq(avail),
            ]
            fields.append(up.field)

        # ---- field: the rows' fields and side-band values registered; with the ``split`` cut
        # the parsers hold a second stage
        split = "split" in cuts
        can_o = ~self.o.valid | self.o.ready
        f_valid = Signal(name="field_valid")
        f_leave = Signal(name="field_leave")
        m.d.comb += rows_ready.eq(~f_valid | f_leave)
        valid_bit(m, f_valid, go, f_leave)
        row = stage(m, {"w": w, "man_width": c.man_width, "sign_en": c.sign_en, "last": done},
                    True, en=go, name="field")
        fields = stage(m, fields, True, en=go, name="field_data")
        last = row["last"]
        if split:
            s_valid = Signal(name="split_valid")
            out = Signal(name="split_leave")
            m.d.comb += [f_leave.eq(f_valid & (~s_valid | out)), out.eq(s_valid & can_o)]
            valid_bit(m, s_valid, f_leave, out)
            last = stage(m, {"last": last}, True, en=f_leave, name="split")["last"]
        else:
            out = f_leave
            m.d.comb += f_leave.eq(f_valid & can_o)

        values = []
        for j in range(lanes):
            parse = m.submodules[f"parse{j}"] = FieldParser(fmt, head_sum=True, split=split)
            m.d.comb += [
                parse.field.eq(fields[j]), parse.w.eq(row["w"]),
                parse.man_width.eq(row["man_width"]), parse.sign_en.eq(row["sign_en"]),
            ]
            if split:
                m.d.comb += parse.en.eq(f_leave)
            values.append(parse.value)

        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        with m.If(out):
            m.d.sync += [self.o.valid.eq(1), self.o.payload.last.eq(last)]
            m.d.sync += [self.o.payload.data[j].eq(values[j]) for j in range(lanes)]


__all__ = ["GeckoDecompressor"]

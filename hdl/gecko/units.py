"""Gecko compressor, decompressor and their loopback (spec ``docs/specs/gecko.md`` §5.2–§5.6).

Stream payloads (``amaranth.lib.stream``, valid/ready):

* a *row* is ``{data: lanes x lane_w, last: 1}``; lane ``j`` occupies bits
  ``[lane_w*j + lane_w - 1 : lane_w*j]`` (A7), ``last`` sits above the data;
* a *metadata word* is ``{word: 32, last: 1}`` (ten 3-bit widths, MSB first, A8);
* a decompressor *command* is ``{rows: 32, ctl: {man_width: 5, sign_en: 1, fixed_en: 1,
  fixed_w: 3}}``: the row count and the tensor's side-band values
  (:class:`hdl.common.signatures.SidebandSignature`), which the compressor takes on its ``ctl``
  ports.

Choices the paper leaves open
-----------------------------
* ``man_width``, ``sign_en`` and the fixed width are run-time inputs (the paper's units "accept
  external mantissa and exponent length signals"), so one circuit serves every tensor.  The
  compressor samples them with each input row (they must not change inside a tensor); the
  decompressor takes them, with the row count, from one command per tensor.  The configuration's
  ``man_width``/``sign_en``/``fixed_width`` fields are therefore not used by the circuit.
* A ``man_width`` above the format's mantissa is treated as the full mantissa and sets the
  sticky ``err_cfg``.
* End of tensor: the compressor's input ``last`` flushes the partial lane words and metadata
  word; the final output row and metadata word carry ``last``.  The decompressor drops the
  padding of the tensor's final words and starts the next command on the next cycle.
* Fixed-width mode emits no metadata; the decompressor takes the width from its command.
* The compressor stalls when its word output is not ready, or when a row would complete a
  metadata word while the previous one is still unread.  The two outputs must be drained
  independently (as by writes to two DRAM regions): a metadata word completes up to ten rows
  after the data of its first row, and one data word can span up to 32 rows (see
  :class:`GeckoLoopback` for the buffering a direct connection needs).
"""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from golden.gecko.codec import GeckoConfig

from ..common.signatures import SidebandSignature
from .blocks import (
    LEN_BITS, META_WORD, MW_BITS, W_BITS, ExpCoder, FieldBuilder, FieldParser, MetaPacker,
    MetaUnpacker, Packer, Unpacker, WidthDetector,
)

#: bits of the decompressor's row count
ROWS_BITS = 32


def row_layout(cfg: GeckoConfig) -> data.StructLayout:
    """Payload of a row of ``lanes`` lane words plus the end-of-tensor flag."""
    return data.StructLayout({
        "data": data.ArrayLayout(cfg.lane_width, cfg.lanes),
        "last": 1,
    })


META_LAYOUT = data.StructLayout({"word": META_WORD, "last": 1})

CMD_LAYOUT = data.StructLayout({"rows": ROWS_BITS, "ctl": SidebandSignature.layout()})


def _widths(cfg: GeckoConfig) -> tuple:
    """``(lanes, lane word width, mantissa bits)`` of a configuration."""
    return cfg.lanes, cfg.lane_width, cfg.format.man_bits


def _clamp_man_width(m, man_width, mb, err):
    """``min(man_width, mb)``; drives ``err`` when the input was larger."""
    mw = Signal(MW_BITS)
    m.d.comb += [err.eq(man_width > mb), mw.eq(Mux(err, mb, man_width))]
    return mw


def _compressor_members(cfg: GeckoConfig) -> dict:
    """The compressor's ports: rows in, lane words and metadata out, the run-time side-band
    inputs and the sticky error outputs."""
    rows = row_layout(cfg)
    return {"i": In(stream.Signature(rows)), "o": Out(stream.Signature(rows)),
            "meta": Out(stream.Signature(META_LAYOUT)), "ctl": In(SidebandSignature()),
            "err_exp": Out(1), "err_mag": Out(1), "err_sign": Out(1), "err_cfg": Out(1)}


def _decompressor_members(cfg: GeckoConfig) -> dict:
    """The decompressor's ports: the compressor's mirrored (its lane words and metadata come in,
    rows of values go out) plus the per-tensor command carrying the side-band values."""
    rows = row_layout(cfg)
    return {"cmd": In(stream.Signature(CMD_LAYOUT)), "i": In(stream.Signature(rows)),
            "meta": In(stream.Signature(META_LAYOUT)), "o": Out(stream.Signature(rows)),
            "err_cfg": Out(1)}


def _buffer(m, name: str, source, sink, depth: int) -> None:
    """Connect the stream ``source`` to ``sink`` through a ``depth``-entry FIFO."""
    fifo = m.submodules[name] = SyncFIFOBuffered(width=len(source.payload.as_value()), depth=depth)
    m.d.comb += [
        fifo.w_data.eq(source.payload), fifo.w_en.eq(source.valid), source.ready.eq(fifo.w_rdy),
        sink.payload.eq(fifo.r_data), sink.valid.eq(fifo.r_rdy), fifo.r_en.eq(sink.ready),
    ]


class GeckoCompressor(wiring.Component):
    """Gecko compressor: one row of ``lanes`` FP values in per cycle (Fig. 9, §5.2, §5.3).

    Pipeline: input register → exponent coder, width detector and field builders (registered) →
    packers with the shared fill pointer and the metadata packer → output registers.  Latency
    from an accepted input row to the output word it completes: 3 cycles.  Throughput: one
    input row per cycle while both outputs are ready; a ``last`` row whose bits straddle two
    words costs one extra cycle for the flush.  Output words are complete lane words of the
    lanes' MSB-first bitstreams (§4.5), identical to ``golden.gecko.codec.compress``.

    Parameters
    ----------
    cfg : golden.gecko.codec.GeckoConfig
        ``lanes`` and ``fmt`` shape the circuit.

    Ports
    -----
    i : In(stream of rows)
        Values to compress; ``last`` marks the tensor's final row (pad it with +0.0).
    o : Out(stream of rows)
        Packed lane words; ``last`` on the tensor's final word row.
    meta : Out(stream of metadata words)
        Row widths, ten per word; ``last`` on the tensor's final word.  Silent in fixed mode.
    ctl : In(SidebandSignature)
        The tensor's side-band values, sampled with each row: ``man_width`` (mantissa bits
        kept), ``sign_en`` (store the sign bit), ``fixed_en``/``fixed_w`` (a fixed exponent
        width instead of the width detector, §4.7).
    err_exp : Out(1)
        Sticky: an input had E = 255 (coded as E = 254, A3).
    err_mag : Out(1)
        Sticky: a magnitude did not fit the fixed width (its high bits were dropped).
    err_sign : Out(1)
        Sticky: a negative input arrived with ``sign_en`` = 0 (its sign was dropped).
    err_cfg : Out(1)
        Sticky: ``man_width`` exceeded the mantissa.
    """

    def __init__(self, cfg: GeckoConfig = GeckoConfig()):
        self.cfg = cfg
        super().__init__(_compressor_members(cfg))

    def elaborate(self, platform):
        m = Module()
        cfg, fmt = self.cfg, self.cfg.format
        lanes, lw, mb = _widths(cfg)

        # ---- stage 1: input register (row + its control values)
        r1_valid = Signal()
        r1_data = Signal(data.ArrayLayout(lw, lanes))
        r1_last = Signal()
        r1_ctl = Signal(SidebandSignature.layout())
        r1_advance = Signal()
        m.d.comb += self.i.ready.eq(~r1_valid | r1_advance)
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [
                r1_valid.eq(1), r1_data.eq(self.i.payload.data), r1_last.eq(self.i.payload.last),
                *(getattr(r1_ctl, name).eq(getattr(self.ctl, name))
                  for name in SidebandSignature.FIELDS),
            ]
        with m.Elif(r1_advance):
            m.d.sync += r1_valid.eq(0)

        # ---- code, detect width, build fields (combinational from stage 1)
        cfg_err = Signal()
        mw = _clamp_man_width(m, r1_ctl.man_width, mb, cfg_err)
        m.submodules.width = width = WidthDetector(lanes)
        m.d.comb += [width.fixed_en.eq(r1_ctl.fixed_en), width.fixed_w.eq(r1_ctl.fixed_w)]
        exp_errs, sign_errs, fields = [], [], []
        for j in range(lanes):
            word = r1_data[j]
            sign, e, man = word[lw - 1], word[mb:lw - 1], word[:mb]
            coder = m.submodules[f"code{j}"] = ExpCoder()
            build = m.submodules[f"field{j}"] = FieldBuilder(fmt)
            m.d.comb += [
                coder.e.eq(e), width.mag[j].eq(coder.mag),
                build.sign.eq(sign), build.ds.eq(coder.ds), build.mag.eq(coder.mag),
                build.man.eq(man), build.w.eq(width.w), build.man_width.eq(mw),
                build.sign_en.eq(r1_ctl.sign_en),
            ]
            exp_errs.append(coder.err)
            sign_errs.append(sign & ~r1_ctl.sign_en)
            fields.append(build)
        with m.If(r1_valid):
            with m.If(Cat(*exp_errs).any()):
                m.d.sync += self.err_exp.eq(1)
            with m.If(Cat(*sign_errs).any()):
                m.d.sync += self.err_sign.eq(1)
            with m.If(width.over):
                m.d.sync += self.err_mag.eq(1)
            with m.If(cfg_err):
                m.d.sync += self.err_cfg.eq(1)

        # ---- stage 2: registered fields
        r2_valid = Signal()
        r2_field = Signal(data.ArrayLayout(lw, lanes))
        r2_len = Signal(LEN_BITS)
        r2_w = Signal(W_BITS)
        r2_last = Signal()
        r2_fixed_en = Signal()
        r2_accept = Signal()
        m.d.comb += r1_advance.eq(r1_valid & (~r2_valid | r2_accept))
        with m.If(r1_advance):
            m.d.sync += [
                r2_valid.eq(1), r2_len.eq(fields[0].length), r2_w.eq(width.w),
                r2_last.eq(r1_last), r2_fixed_en.eq(r1_ctl.fixed_en),
            ]
            m.d.sync += [r2_field[j].eq(fields[j].field) for j in range(lanes)]
        with m.Elif(r2_accept):
            m.d.sync += r2_valid.eq(0)

        # ---- stage 3: packers, shared fill pointer, metadata packer, output registers
        p = Signal(ceil_log2(lw))
        flush = Signal()                    # a last row left bits to emit in a second word
        can_o = ~self.o.valid | self.o.ready
        # the metadata register only blocks a row whose code completes a metadata word
        m.submodules.metapack = mp = MetaPacker()
        meta_ok = ~self.meta.valid | self.meta.ready | r2_fixed_en | ~mp.ends
        m.d.comb += r2_accept.eq(r2_valid & can_o & meta_ok & ~flush)
        fill = Signal(LEN_BITS + 1)
        m.d.comb += fill.eq(p + r2_len)
        full = fill >= lw
        rest = Signal(ceil_log2(lw) + 1)
        m.d.comb += rest.eq(Mux(full, fill - lw, fill))

        emit = Signal()
        emit_last = Signal()
        clear = Signal()
        shift = Signal()
        with m.If(flush):
            m.d.comb += [emit.eq(can_o), emit_last.eq(1), clear.eq(can_o)]
        with m.Elif(r2_accept):
            with m.If(full):
                m.d.comb += [emit.eq(1), shift.eq(1), emit_last.eq(r2_last & (rest == 0))]
            with m.Elif(r2_last):
                m.d.comb += [emit.eq(1), emit_last.eq(1), clear.eq(1)]

        packers = []
        for j in range(lanes):
            pk = m.submodules[f"pack{j}"] = Packer(lw)
            m.d.comb += [
                pk.field.eq(r2_field[j]), pk.p.eq(p), pk.load.eq(r2_accept),
                pk.shift.eq(shift), pk.clear.eq(clear),
            ]
            packers.append(pk)

        with m.If(flush):
            with m.If(can_o):
                m.d.sync += [flush.eq(0), p.eq(0)]
        with m.Elif(r2_accept):
            m.d.sync += p.eq(Mux(clear, 0, rest))
            with m.If(r2_last & full & (rest != 0)):
                m.d.sync += flush.eq(1)

        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        with m.If(emit):
            m.d.sync += [self.o.valid.eq(1), self.o.payload.last.eq(emit_last)]
            m.d.sync += [self.o.payload.data[j].eq(packers[j].word) for j in range(lanes)]

        m.d.comb += [
            mp.code.eq(r2_w), mp.push.eq(r2_accept & ~r2_fixed_en), mp.last.eq(r2_last),
        ]
        with m.If(self.meta.ready):
            m.d.sync += self.meta.valid.eq(0)
        with m.If(mp.full):
            m.d.sync += [
                self.meta.valid.eq(1), self.meta.payload.word.eq(mp.word),
                self.meta.payload.last.eq(r2_last),
            ]
        return m


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
        super().__init__(_decompressor_members(cfg))

    def elaborate(self, platform):
        m = Module()
        cfg, fmt = self.cfg, self.cfg.format
        lanes, lw, mb = _widths(cfg)

        active = Signal()
        rows_left = Signal(ROWS_BITS)
        c = Signal(SidebandSignature.layout())     # the current tensor's side-band values
        cmd = self.cmd.payload
        cmd_err = Signal()
        cmd_mw = _clamp_man_width(m, cmd.ctl.man_width, mb, cmd_err)
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


class GeckoLoopback(wiring.Component):
    """A compressor feeding a decompressor: rows in, ``P(x, man_width)`` rows out.

    Verifies the pair end to end (spec §8.17).  The compressor's control inputs are ports; the
    decompressor's command (row count and the same side-band values) is a stream port.

    Both streams pass through FIFOs.  In a system they go to separate DRAM regions; wired back
    to back each can wait for the other, so without buffering the pair deadlocks:

    * a row's metadata word completes up to ten rows after that row's data, and those ten rows
      emit at most ten word rows (plus a flush): ``WORD_FIFO_DEPTH`` = 16 covers them;
    * a data word can hold up to 32 rows' fields (W >= 1), i.e. its completion can need up to
      four metadata words beyond the one the decompressor is reading: ``META_FIFO_DEPTH`` = 8.

    Parameters
    ----------
    cfg : golden.gecko.codec.GeckoConfig

    Ports
    -----
    i, ctl, err_exp, err_mag, err_sign, err_cfg
        As :class:`GeckoCompressor` (``err_cfg`` ORs both units).
    cmd, o
        As :class:`GeckoDecompressor`.
    """

    #: word rows buffered between the units (>= 10 rows' words + flush + pipeline slack)
    WORD_FIFO_DEPTH = 16
    #: metadata words buffered between the units (>= 32 rows' worth + slack)
    META_FIFO_DEPTH = 8

    def __init__(self, cfg: GeckoConfig = GeckoConfig()):
        self.cfg = cfg
        # the compressor's input side (rows, side-band, errors) and the decompressor's command
        # and output streams
        comp, dec = _compressor_members(cfg), _decompressor_members(cfg)
        super().__init__({**{name: comp[name] for name in comp if name not in ("o", "meta")},
                          "cmd": dec["cmd"], "o": dec["o"]})

    def elaborate(self, platform):
        m = Module()
        m.submodules.comp = comp = GeckoCompressor(self.cfg)
        m.submodules.decomp = dec = GeckoDecompressor(self.cfg)
        wiring.connect(m, wiring.flipped(self.i), comp.i)
        wiring.connect(m, wiring.flipped(self.cmd), dec.cmd)
        _buffer(m, "words", comp.o, dec.i, self.WORD_FIFO_DEPTH)
        _buffer(m, "metas", comp.meta, dec.meta, self.META_FIFO_DEPTH)
        wiring.connect(m, dec.o, wiring.flipped(self.o))
        wiring.connect(m, wiring.flipped(self.ctl), comp.ctl)
        m.d.comb += [
            self.err_exp.eq(comp.err_exp), self.err_mag.eq(comp.err_mag),
            self.err_sign.eq(comp.err_sign), self.err_cfg.eq(comp.err_cfg | dec.err_cfg),
        ]
        return m


__all__ = ["GeckoCompressor", "GeckoDecompressor", "GeckoLoopback", "row_layout",
           "META_LAYOUT", "CMD_LAYOUT"]

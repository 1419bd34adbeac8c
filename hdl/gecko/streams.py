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

from amaranth.hdl import Mux, Signal
from amaranth.lib import data, stream
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from golden.gecko.codec import GeckoConfig

from ..common.signatures import SidebandSignature
from .blocks import (
    META_WORD, MW_BITS,
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


def lane_widths(cfg: GeckoConfig) -> tuple:
    """``(lanes, lane word width, mantissa bits)`` of a configuration."""
    return cfg.lanes, cfg.lane_width, cfg.format.man_bits


def clamp_man_width(m, man_width, mb, err):
    """``min(man_width, mb)``; drives ``err`` when the input was larger."""
    mw = Signal(MW_BITS)
    m.d.comb += [err.eq(man_width > mb), mw.eq(Mux(err, mb, man_width))]
    return mw


def compressor_members(cfg: GeckoConfig) -> dict:
    """The compressor's ports: rows in, lane words and metadata out, the run-time side-band
    inputs and the sticky error outputs."""
    rows = row_layout(cfg)
    return {"i": In(stream.Signature(rows)), "o": Out(stream.Signature(rows)),
            "meta": Out(stream.Signature(META_LAYOUT)), "ctl": In(SidebandSignature()),
            "err_exp": Out(1), "err_mag": Out(1), "err_sign": Out(1), "err_cfg": Out(1)}


def decompressor_members(cfg: GeckoConfig) -> dict:
    """The decompressor's ports: the compressor's mirrored (its lane words and metadata come in,
    rows of values go out) plus the per-tensor command carrying the side-band values."""
    rows = row_layout(cfg)
    return {"cmd": In(stream.Signature(CMD_LAYOUT)), "i": In(stream.Signature(rows)),
            "meta": In(stream.Signature(META_LAYOUT)), "o": Out(stream.Signature(rows)),
            "err_cfg": Out(1)}


def valid_bit(m, valid, take, leave) -> None:
    """The valid register of a row stage: set when a row moves in (``take``), cleared when its
    row moves on (``leave``) and no other comes in.  A stage takes a row when it is empty or its
    row moves on, so under back-pressure the stages stall together and bubbles close up."""
    with m.If(take):
        m.d.sync += valid.eq(1)
    with m.Elif(leave):
        m.d.sync += valid.eq(0)


def stream_buffer(m, name: str, source, sink, depth: int) -> None:
    """Connect the stream ``source`` to ``sink`` through a ``depth``-entry FIFO."""
    fifo = m.submodules[name] = SyncFIFOBuffered(width=len(source.payload.as_value()), depth=depth)
    m.d.comb += [
        fifo.w_data.eq(source.payload), fifo.w_en.eq(source.valid), source.ready.eq(fifo.w_rdy),
        sink.payload.eq(fifo.r_data), sink.valid.eq(fifo.r_rdy), fifo.r_en.eq(sink.ready),
    ]


__all__ = ["ROWS_BITS", "META_LAYOUT", "CMD_LAYOUT", "row_layout", "lane_widths", "clamp_man_width",
           "compressor_members", "decompressor_members", "valid_bit", "stream_buffer"]

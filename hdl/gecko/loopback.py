"""The Gecko loopback (unit ``gecko.loopback``): the compressor feeding the decompressor through
FIFOs, the end-to-end check."""

from amaranth.hdl import Module
from amaranth.lib import wiring

from golden.gecko.codec import GeckoConfig


from .streams import (stream_buffer, compressor_members, decompressor_members)
from .compressor import GeckoCompressor
from .decompressor import GeckoDecompressor


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
        Both units are built from it, so ``pipeline`` gives each its register stages.

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
        comp, dec = compressor_members(cfg), decompressor_members(cfg)
        super().__init__({**{name: comp[name] for name in comp if name not in ("o", "meta")},
                          "cmd": dec["cmd"], "o": dec["o"]})

    def elaborate(self, platform):
        m = Module()
        m.submodules.comp = comp = GeckoCompressor(self.cfg)
        m.submodules.decomp = dec = GeckoDecompressor(self.cfg)
        wiring.connect(m, wiring.flipped(self.i), comp.i)
        wiring.connect(m, wiring.flipped(self.cmd), dec.cmd)
        stream_buffer(m, "words", comp.o, dec.i, self.WORD_FIFO_DEPTH)
        stream_buffer(m, "metas", comp.meta, dec.meta, self.META_FIFO_DEPTH)
        wiring.connect(m, dec.o, wiring.flipped(self.o))
        wiring.connect(m, wiring.flipped(self.ctl), comp.ctl)
        m.d.comb += [
            self.err_exp.eq(comp.err_exp), self.err_mag.eq(comp.err_mag),
            self.err_sign.eq(comp.err_sign), self.err_cfg.eq(comp.err_cfg | dec.err_cfg),
        ]
        return m


__all__ = ["GeckoLoopback"]

"""The Gecko compressor (unit ``gecko.compressor``; ``docs/specs/gecko.md`` §5.2, §5.3): a row of
FP32/bf16 values per cycle to per-lane packed words and a metadata stream.  Stream payloads and
the choices the paper leaves open: :mod:`hdl.gecko.streams`."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.utils import ceil_log2

from golden.gecko.codec import GeckoConfig

from ..common.signatures import SidebandSignature
from .blocks import (
    LEN_BITS, W_BITS, ExpCoder, FieldBuilder, MetaPacker, Packer, WidthDetector,
)

from .streams import (clamp_man_width, compressor_members, lane_widths)


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
        super().__init__(compressor_members(cfg))

    def elaborate(self, platform):
        m = Module()
        cfg, fmt = self.cfg, self.cfg.format
        lanes, lw, mb = lane_widths(cfg)

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
        mw = clamp_man_width(m, r1_ctl.man_width, mb, cfg_err)
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


__all__ = ["GeckoCompressor"]

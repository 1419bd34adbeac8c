"""The Gecko compressor (unit ``gecko.compressor``; ``docs/specs/gecko.md`` §5.2, §5.3): a row of
FP32/bf16 values per cycle to per-lane packed words and a metadata stream.  Stream payloads and
the choices the paper leaves open: :mod:`hdl.gecko.streams`.

Pipeline stages (``cfg.pipeline``, 0..2; :data:`CUTS`)
------------------------------------------------------
``pipeline = 0`` is the paper's compressor: the input register; the exponent coders, the width
detector and the field builders into the field registers; the packers and the metadata packer
into the output registers.  Its clock is bound by the packers: the fill pointer register steers
every lane's placement shifter (in OSU 0.18 µm its flip-flop drives about 440 loads, 5.8 ns
from the clock edge: the flow does not buffer register outputs), in a loop through the
accumulators.  The added stages, at named cut points:

- ``place`` (depths 1 and 2): each lane's field moved to the row's fill offset in a two-word
  window, in a stage of its own; the packers then only OR the window into their accumulators
  and shift by whole words.  The offset is the sum of the last placed row's offset and its
  step (its length, or back to 0 after a tensor's last row), added in the stage that uses it,
  so no register drives the lanes' shifters;
- ``head`` (depth 2): inside the field builders, after each lane's head ``{S, DS, MAG}`` (MAG
  cut to the row's width) and kept mantissa bits, before the mantissa's placement behind the
  head (:class:`~hdl.gecko.blocks.FieldBuilder` ``split``); the row's width and side-band
  values are registered with them.

Every stage takes a row when it is empty or its row moves on (as the unit's other stages), so
under back-pressure the stages stall together and bubbles close up; one row per cycle passes
while both outputs are ready.  The output word a row completes leaves ``3 + pipeline`` cycles
after the row was accepted (:func:`golden.gecko.codec.compressor_cycles`).  The sticky errors
are decided from the input register at every depth, two cycles after the row that causes them
was accepted.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.utils import ceil_log2

from golden.gecko.codec import GeckoConfig

from ..common.signatures import SidebandSignature
from ..common.pipeline import stage
from .blocks import (
    LEN_BITS, W_BITS, ExpCoder, FieldBuilder, MetaPacker, Packer, WidthDetector,
)

from .streams import (clamp_man_width, compressor_members, lane_widths, valid_bit)


#: cut points of each pipeline depth (see the module docstring)
CUTS = {0: (), 1: ("place",), 2: ("head", "place")}


class GeckoCompressor(wiring.Component):
    """Gecko compressor: one row of ``lanes`` FP values in per cycle (Fig. 9, §5.2, §5.3).

    Pipeline: input register → exponent coder, width detector and field builders (registered) →
    packers with the shared fill pointer and the metadata packer → output registers, plus the
    ``pipeline`` stages of the module docstring.  Latency from an accepted input row to the
    output word it completes: ``3 + pipeline`` cycles.  Throughput: one input row per cycle
    while both outputs are ready; a ``last`` row whose bits straddle two words costs one extra
    cycle for the flush.  Output words are complete lane words of the lanes' MSB-first
    bitstreams (§4.5), identical to ``golden.gecko.codec.compress``; the timing is
    ``golden.gecko.codec.compressor_cycles``.

    Parameters
    ----------
    cfg : golden.gecko.codec.GeckoConfig
        ``lanes``, ``fmt`` and ``pipeline`` shape the circuit.

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
        cuts = CUTS[cfg.pipeline]

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

        # ---- code, detect width, build fields (combinational from stage 1; the ``head`` cut
        # is a stage inside the field builders)
        cfg_err = Signal()
        mw = clamp_man_width(m, r1_ctl.man_width, mb, cfg_err)
        m.submodules.width = width = WidthDetector(lanes)
        m.d.comb += [width.fixed_en.eq(r1_ctl.fixed_en), width.fixed_w.eq(r1_ctl.fixed_w)]
        head_cut = "head" in cuts
        row = stage(m, {"w": width.w, "fixed_en": r1_ctl.fixed_en, "last": r1_last},
                    head_cut, en=r1_advance, name="head")
        exp_errs, sign_errs, fields = [], [], []
        for j in range(lanes):
            word = r1_data[j]
            sign, e, man = word[lw - 1], word[mb:lw - 1], word[:mb]
            coder = m.submodules[f"code{j}"] = ExpCoder()
            build = m.submodules[f"field{j}"] = FieldBuilder(fmt, split=head_cut)
            m.d.comb += [
                coder.e.eq(e), width.mag[j].eq(coder.mag),
                build.sign.eq(sign), build.ds.eq(coder.ds), build.mag.eq(coder.mag),
                build.man.eq(man), build.w.eq(width.w), build.man_width.eq(mw),
                build.sign_en.eq(r1_ctl.sign_en),
            ]
            if head_cut:
                m.d.comb += build.en.eq(r1_advance)
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
        if head_cut:
            head_valid = Signal()
            into_r2 = Signal()
            m.d.comb += [
                into_r2.eq(head_valid & (~r2_valid | r2_accept)),
                r1_advance.eq(r1_valid & (~head_valid | into_r2)),
            ]
            valid_bit(m, head_valid, r1_advance, into_r2)
        else:
            into_r2 = r1_advance
            m.d.comb += r1_advance.eq(r1_valid & (~r2_valid | r2_accept))
        with m.If(into_r2):
            m.d.sync += [
                r2_valid.eq(1), r2_len.eq(fields[0].length), r2_w.eq(row["w"]),
                r2_last.eq(row["last"]), r2_fixed_en.eq(row["fixed_en"]),
            ]
            m.d.sync += [r2_field[j].eq(fields[j].field) for j in range(lanes)]
        with m.Elif(r2_accept):
            m.d.sync += r2_valid.eq(0)

        # ---- stage 3: packers, shared fill pointer, metadata packer, output registers (the
        # ``place`` cut puts a stage before them that places each lane's field)
        placed = "place" in cuts
        if placed:
            accept = Signal()
            row3, p = self._place(m, accept, r2_valid, r2_field, r2_len, r2_w, r2_last,
                                  r2_fixed_en, r2_accept)
        else:
            accept = r2_accept
            row3 = {"valid": r2_valid, "len": r2_len, "w": r2_w, "last": r2_last,
                    "fixed_en": r2_fixed_en}
            p = Signal(ceil_log2(lw))
        flush = Signal()                    # a last row left bits to emit in a second word
        can_o = ~self.o.valid | self.o.ready
        # the metadata register only blocks a row whose code completes a metadata word
        m.submodules.metapack = mp = MetaPacker()
        meta_ok = ~self.meta.valid | self.meta.ready | row3["fixed_en"] | ~mp.ends
        m.d.comb += accept.eq(row3["valid"] & can_o & meta_ok & ~flush)
        fill = Signal(LEN_BITS + 1)
        m.d.comb += fill.eq(p + row3["len"])
        full = fill >= lw
        rest = Signal(ceil_log2(lw) + 1)
        m.d.comb += rest.eq(Mux(full, fill - lw, fill))

        emit = Signal()
        emit_last = Signal()
        clear = Signal()
        shift = Signal()
        with m.If(flush):
            m.d.comb += [emit.eq(can_o), emit_last.eq(1), clear.eq(can_o)]
        with m.Elif(accept):
            with m.If(full):
                m.d.comb += [emit.eq(1), shift.eq(1), emit_last.eq(row3["last"] & (rest == 0))]
            with m.Elif(row3["last"]):
                m.d.comb += [emit.eq(1), emit_last.eq(1), clear.eq(1)]

        packers = []
        for j in range(lanes):
            pk = m.submodules[f"pack{j}"] = Packer(lw, placed=placed)
            if placed:
                m.d.comb += pk.win.eq(row3["win"][j])
            else:
                m.d.comb += [pk.field.eq(r2_field[j]), pk.p.eq(p)]
            m.d.comb += [pk.load.eq(accept), pk.shift.eq(shift), pk.clear.eq(clear)]
            packers.append(pk)

        with m.If(flush):
            with m.If(can_o):
                m.d.sync += flush.eq(0)
                if not placed:
                    m.d.sync += p.eq(0)
        with m.Elif(accept):
            if not placed:
                m.d.sync += p.eq(Mux(clear, 0, rest))
            with m.If(row3["last"] & full & (rest != 0)):
                m.d.sync += flush.eq(1)

        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        with m.If(emit):
            m.d.sync += [self.o.valid.eq(1), self.o.payload.last.eq(emit_last)]
            m.d.sync += [self.o.payload.data[j].eq(packers[j].word) for j in range(lanes)]

        m.d.comb += [
            mp.code.eq(row3["w"]), mp.push.eq(accept & ~row3["fixed_en"]),
            mp.last.eq(row3["last"]),
        ]
        with m.If(self.meta.ready):
            m.d.sync += self.meta.valid.eq(0)
        with m.If(mp.full):
            m.d.sync += [
                self.meta.valid.eq(1), self.meta.payload.word.eq(mp.word),
                self.meta.payload.last.eq(row3["last"]),
            ]
        return m

    def _place(self, m, accept, r2_valid, r2_field, r2_len, r2_w, r2_last, r2_fixed_en,
               r2_accept):
        """The ``place`` stage: each lane's field moved to the row's fill offset in a two-word
        window.  Returns the stage's row (``valid``, ``win``, ``len``, ``w``, ``last``,
        ``fixed_en``; it moves on with ``accept``) and its fill offset."""
        lanes, lw, _ = lane_widths(self.cfg)
        ptr = ceil_log2(lw)
        valid = Signal(name="place_valid")
        m.d.comb += r2_accept.eq(r2_valid & (~valid | accept))
        valid_bit(m, valid, r2_accept, accept)
        # the offset of the row placed last and the step to the next row's offset (its length,
        # or back to 0 after a tensor's last row): the offset is their sum, added here, so no
        # register drives the lanes' shifters
        p = Signal(ptr, name="place_p")
        step = Signal(ptr, name="place_step")
        offset = Signal(ptr, name="place_offset")
        m.d.comb += offset.eq(p + step)
        with m.If(r2_accept):
            m.d.sync += [p.eq(offset), step.eq(Mux(r2_last, -offset, r2_len))]
        row = stage(m, {"len": r2_len, "w": r2_w, "last": r2_last, "fixed_en": r2_fixed_en},
                    True, en=r2_accept, name="place")
        row["win"] = stage(m, [(Cat(Const(0, lw), r2_field[j]) >> offset)[:2 * lw]
                               for j in range(lanes)], True, en=r2_accept, name="place_win")
        row["valid"] = valid
        return row, p

__all__ = ["GeckoCompressor"]

"""The bit-parallel bfloat16 baseline tile (unit ``baseline.bf16_tile``).

Pipeline stages (``cfg.pipeline``, 0..3)
----------------------------------------
The tile's stages are its PEs' (:mod:`hdl.baseline.bf16_pe`, cut points ``CUTS``): every PE is
built with ``cfg.pipeline`` register stages before its accumulation step, so a group taken at
edge ``t`` is accumulated in every PE at edge ``t + pipeline`` and ``out`` shows it from the
cycle after.  The join, ``ready`` and the acceptance of groups are unchanged (one group per
cycle, no back-pressure inside the tile: the stages always advance).  Two side-band signals
travel beside the PEs' stages: ``busy`` stays high while a taken group is still in a stage, and
the exponent-255 check of a taken group reaches the sticky ``error`` ``pipeline`` cycles later,
in the edge at which the group reaches the accumulators.

Interleaved output tiles (``cfg.contexts``)
-------------------------------------------
With the PEs' ``contexts = C > 1`` (:mod:`hdl.baseline.bf16_pe`) every PE holds ``C``
accumulators and the tile computes ``C`` output tiles interleaved: the group taken in a cycle
joins the output tile of that cycle's slot (``slot``, a free-running counter), and ``out`` shows
the output tiles in rotation (``acc_slot`` names the one shown).  A taken group reaches the
accumulators ``C - 1`` edges later than with one context, so ``busy`` and the error check
travel ``pipeline + C - 1`` cycles.
"""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring

from golden.baseline import BaselineTileConfig

from ..common.pipeline import delay, slot_ports, slots
from ..common.signatures import TileSignature


from .bf16_pe import BF16PE


class Bf16Tile(wiring.Component):
    """The FPRaker paper's bit-parallel bfloat16 baseline tile: ``rows`` x ``cols``
    :class:`BF16PE` (spec ``docs/specs/fpraker.md`` §5.1 "the baseline tile has the same 8×8×8
    shape", §14).  PE ``(r, c)`` computes ``sum_s A[c][s] . B[r][s]``; column ``c``'s A stream
    is broadcast down the column, row ``r``'s B stream along the row.  Bit-exact with
    :func:`golden.baseline.bf16_tile_run`.

    Sub-components: ``pe<r>_<c>`` (:class:`BF16PE`, with its ``products``, ``exponent``,
    ``lanes`` and ``accumulator`` blocks); the join and the error flag are the top's own cells.

    Latency/throughput: the streams are joined — every PE takes one group in a cycle in which
    every ``a[c]`` and every ``b[r]`` stream is valid, and then every stream's ``ready`` is
    asserted together (``ready`` depends on the ``valid`` of all streams, which the stream rules
    allow; no ``valid`` depends on a ``ready``).  The group taken at edge ``t`` is accumulated
    at edge ``t + cfg.pipeline`` (0: at that edge) and ``out`` shows the result from the cycle
    after, so a reduction of ``G`` groups streamed without bubbles takes ``G + pipeline``
    cycles (:attr:`TileResult.cycles`; :func:`golden.baseline.bf16_tile_cycles` is the cycle
    model; stages in the module docstring).

    Parameters
    ----------
    cfg : golden.baseline.BaselineTileConfig
        ``rows``, ``cols`` and the PE fields (:attr:`~golden.baseline.BaselineTileConfig.pe`).

    Ports
    -----
    (:class:`hdl.common.signatures.TileSignature`)
    a : In(stream {a: lanes bf16, clear}) array of ``cols``
        ``clear`` on a group: every PE of column ``c`` starts it from a zero accumulator.
    b : In(stream {b: lanes bf16}) array of ``rows``
    out : Out(bf16) array of ``rows`` x ``cols``
        PE ``(r, c)``'s accumulator read out (``out_round``).
    busy : Out(1)
        A group is taken this cycle (the join fires) or a group taken in one of the
        ``pipeline`` cycles before is still in the PEs' stages: a reduction of ``G`` groups has
        exactly ``G`` busy cycles at ``pipeline = 0``, whatever the bubbles in the streams, and
        ``G + pipeline`` without bubbles.
    error : Out(1)
        Sticky (reset clears it): an accepted group held an operand with exponent field 255
        (outside the PEs' contract, spec §1.3); the results of the PEs it reached are undefined.
        It rises ``pipeline`` cycles after the group was taken, as the group's results would
        (``pipeline + contexts - 1`` with interleaved output tiles).
    slot, acc_slot : Out(range(contexts)), only with ``cfg.contexts > 1``
        The output tile a group taken in this cycle joins, and the one ``out`` shows
        (module docstring).
    """

    def __init__(self, cfg: BaselineTileConfig = BaselineTileConfig()):
        self.cfg = cfg
        sig = TileSignature(cfg.rows, cfg.cols, cfg.lanes)
        if cfg.contexts > 1:
            sig = wiring.Signature({**dict(sig.members), **slot_ports(cfg.contexts)})
        super().__init__(sig)

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        streams = list(self.a) + list(self.b)
        fire = Signal()
        m.d.comb += fire.eq(Cat(*(s.valid for s in streams)).all())
        m.d.comb += [s.ready.eq(fire) for s in streams]
        # the edges from a taken group to its accumulators: the stages, and the accumulation
        # loop's cuts with interleaved output tiles
        lag = cfg.pipeline + cfg.contexts - 1
        if cfg.contexts > 1:
            slots(m, self.slot, self.acc_slot, cfg.contexts, cfg.pipeline)
        if lag:
            # a taken group's valid through the PEs' stages
            flight = []
            for k in range(lag):
                flight.append(delay(m, flight[-1] if flight else fire, 1, name=f"flight{k + 1}"))
            m.d.comb += self.busy.eq(Cat(fire, *flight).any())
        else:
            m.d.comb += self.busy.eq(fire)

        # PE (r, c): column c's A and clear, row r's B; every PE accumulates when the join fires
        for r in range(cfg.rows):
            for c in range(cfg.cols):
                pe = m.submodules[f"pe{r}_{c}"] = BF16PE(cfg.pe)
                a, b = self.a[c].payload, self.b[r].payload
                m.d.comb += [
                    pe.grp.valid.eq(fire),
                    pe.grp.payload.a.eq(a.a),
                    pe.grp.payload.clear.eq(a.clear),
                    pe.grp.payload.b.eq(b.b),
                    self.out[r][c].eq(pe.acc.out),
                ]

        operands = [x for s in self.a for x in s.payload.a] + \
                   [x for s in self.b for x in s.payload.b]
        special = Cat(*(x.exp == 0xFF for x in operands)).any()
        if lag:
            bad = delay(m, fire & special, lag, name="error")
            with m.If(bad):
                m.d.sync += self.error.eq(1)
        else:
            with m.If(fire & special):
                m.d.sync += self.error.eq(1)
        return m


__all__ = ["Bf16Tile"]

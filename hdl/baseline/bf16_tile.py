"""The bit-parallel bfloat16 baseline tile (unit ``baseline.bf16_tile``)."""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring

from golden.baseline import BaselineTileConfig

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
    allow; no ``valid`` depends on a ``ready``).  The group is accumulated at that clock edge and
    ``out`` shows the result from the next cycle, so a reduction of ``G`` groups streamed
    without bubbles takes ``G`` cycles (:attr:`TileResult.cycles`).

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
        A group is being accumulated this cycle (the join fires): a reduction of ``G`` groups
        has exactly ``G`` busy cycles, whatever the bubbles in the streams.
    error : Out(1)
        Sticky (reset clears it): an accepted group held an operand with exponent field 255
        (outside the PEs' contract, spec §1.3); the results of the PEs it reached are undefined.
    """

    def __init__(self, cfg: BaselineTileConfig = BaselineTileConfig()):
        self.cfg = cfg
        super().__init__(TileSignature(cfg.rows, cfg.cols, cfg.lanes))

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        streams = list(self.a) + list(self.b)
        fire = Signal()
        m.d.comb += fire.eq(Cat(*(s.valid for s in streams)).all())
        m.d.comb += [s.ready.eq(fire) for s in streams]
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
        with m.If(fire & special):
            m.d.sync += self.error.eq(1)
        return m


__all__ = ["Bf16Tile"]

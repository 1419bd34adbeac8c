"""FAST's fMAC systolic array (registry unit ``fast.array``; spec ``docs/specs/fast.md`` §5).

``rows × cols`` cells (:class:`ArrayCell`), each an fMAC datapath (the :class:`ChunkProducts`
multiplier array and adder tree, the exponent adder, the FP generator and the shared FP32 adder)
with four registers: a stationary group ``S``, the operands moving right (``H``) and up
(``V``), and the partial sum / accumulator ``A``.  The run-time ``dataflow`` input picks what a
cell multiplies and where its partial sum comes from: FWD (weight-stationary, sums flow right),
BWD-DATA (weight-stationary, operands from the left, sums flow up) and WGRAD (output-stationary,
operands from the left and from below, then a drain to the right).  The array also holds the
input skew, the output deskew and the round / beat controller.

Cycle-accurate with :class:`golden.fast.array.ArraySim`; its docstring is the timing contract.

Pipeline stages (``cfg.pipeline``, 0..3)
----------------------------------------
``pipeline = 0`` is the paper's cell: a round's products, sum, FP generator and FP32 addition in
one cycle.  Stages go in every cell at the fMAC's cut points (:data:`hdl.fast.fmac.CUTS`),
between the round side (operand selection, :class:`ChunkProducts`, the exponent adder, the FP
generator) and the partial-sum side (the partial-sum multiplexer, the FP32 adder, ``A``), which
stays one cycle, so every result is bit-exact with the one-cycle cell:

- ``generator`` (depths 1..3): the FP generator's FP32 value, before the FP32 adder;
- ``tree`` (depths 2 and 3): the adder tree's sum and the round's exponent, before the FP
  generator;
- ``products`` (depth 3): the 2b x 2b products and the round's exponent, before the adder tree.

Each stage also carries the controls of the partial-sum side (the beat's first cycle, the drain,
the dataflow, ``H``'s ``valid`` and ``first`` tags), so that side, the output deskew and the
valid line run ``pipeline`` cycles behind the round side, the operands, the skew and the
controller: ``out_valid``, ``right`` and ``top`` are those of depth 0 delayed by ``pipeline``
cycles, ``i.ready`` and ``error`` keep their depth-0 timing, and the throughput is unchanged.
The accumulation loop (partial-sum multiplexer, FP32 adder, ``A``) bounds the clock at every
depth.

Interleaved GEMMs (``cfg.contexts``, 1..6)
------------------------------------------
With ``C = contexts > 1`` the array is C-slowed, as the fMAC is: every state register (each
cell's ``S``, ``H`` and ``V``, the input skew, the round counters, the WGRAD countdown and
drain, the output deskew and the valid line) becomes a ring of ``C``
(:func:`hdl.common.pipeline.ring`) whose head is the context served in the cycle, and each
cell's FP32 adder takes ``C - 1`` stages inside its accumulation loop
(:func:`hdl.common.fp_add.interleaved_loop`).  So ``C`` GEMMs share the array, each served every
``C``-th cycle exactly as by the one-context array (:class:`golden.fast.array.ArraySlots`).  The
loop has no hold multiplexer: a drain cycle passes the left neighbour's ``A`` and a WGRAD bubble
the cell's own, each plus ``-0``; the addend and the partial sum's one-hot selects are formed
before the ``generator`` register.  The deskew and the valid line run ``C - 1`` cycles behind
the partial-sum side, where the adder's sums leave the loop; ``slot`` names the context served
and ``acc_slot`` the one the outputs show, ``(slot - pipeline - C + 1) mod C``.  ``error`` stays
one sticky flag.  ``contexts = 1`` generates the same netlist as the array without the field
(the Verilog differs only in generated names of internal ports).
"""

from amaranth.hdl import Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for

from golden.common import FP32
from golden.common.fp_add import FPAddConfig
from golden.fast.fmac import FMACConfig
from golden.fast.array import FMACArrayConfig

from ..common.formats import layout
from ..common.fp_add import FPAdder, interleaved_loop
from ..common.pipeline import delay, ring, slot_ports, slots, stage, state_rings
from ..common.rounding import Round
from .fmac import CUTS, ChunkProducts, chunk_count, fp_gen_config, operand_layout

FP32_LAYOUT = layout(FP32)


def fmac_config(cfg: FMACArrayConfig) -> FMACConfig:
    return FMACConfig(group=cfg.group, m_max=cfg.m_max)


def moving_layout(cfg: FMACArrayConfig) -> data.StructLayout:
    """The operand moving right: a BFP group, ``valid`` (not a bubble) and ``first`` (the first
    group of a WGRAD accumulation)."""
    return data.StructLayout({"op": operand_layout(fmac_config(cfg)), "valid": 1, "first": 1})


def input_layout(cfg: FMACArrayConfig) -> data.StructLayout:
    """An input vector: ``rows`` groups entering from the left, ``cols`` from below, and the
    WGRAD flags ``first`` / ``last``."""
    op = operand_layout(fmac_config(cfg))
    return data.StructLayout({"left": data.ArrayLayout(op, cfg.rows),
                              "bottom": data.ArrayLayout(op, cfg.cols),
                              "first": 1, "last": 1})


def load_layout(cfg: FMACArrayConfig) -> data.StructLayout:
    """A write of one cell's stationary group."""
    return data.StructLayout({"row": bits_for(cfg.rows - 1), "col": bits_for(cfg.cols - 1),
                              "group": operand_layout(fmac_config(cfg))})


def hold(m, reg, value, en, contexts: int, *, name: str) -> None:
    """``reg`` loads ``value`` while ``en`` is high and holds otherwise; with ``contexts > 1``
    ``reg`` is the head of a ring of that many (:func:`hdl.common.pipeline.ring`)."""
    if contexts == 1:
        with m.If(en):
            m.d.sync += reg.eq(value)
    else:
        ring(m, reg, Mux(en, value, reg), contexts, name=name)


class ArrayCell(wiring.Component):
    """One fMAC cell of the array with its registers (see the module docstring).

    Latency: the round of a cycle (from the operands, ``shx``/``shy``/``esub`` and the
    dataflow of that cycle) reaches ``A`` at the edge ``cfg.pipeline`` cycles later, with that
    cycle's ``first``, ``drain``, dataflow and ``H`` tags; ``a`` is in that delayed time.  With
    ``contexts = C > 1`` ``S``, ``H`` and ``V`` are rings of ``C``, and the sum leaves the
    adder's ``C - 1`` stages as ``a_next`` (the value ``A`` takes at the edge) ``C - 1``
    cycles after the partial-sum side reads ``a``.

    Ports
    -----
    h_in, v_in : In
        The operands the cell takes at a beat boundary (from the left / from below).
    a_left, a_below : In(fp32)
        The neighbours' ``A`` (+0 at the array's edge).
    ld, ld_we : In
        A stationary group and its write enable.
    boundary, first, drain : In(1)
        The beat's last cycle, its first cycle, a WGRAD drain cycle.
    fwd, bwd, wgrad : In(1)
        The dataflow, one-hot.
    shx, shy : In(range(m_max))
        Chunk shifts of the round; ``esub`` = 2 cx + 2 cy, the exponent offset of the round.
    h, v : Out
        The ``H`` and ``V`` registers (to the right / upper neighbour).
    a, a_next : Out(fp32)
        ``A`` and the value it takes at the next clock edge.
    """

    def __init__(self, cfg: FMACArrayConfig):
        self.cfg = cfg
        fc = fmac_config(cfg)
        op = operand_layout(fc)
        kmax = cfg.m_max // 2
        super().__init__({
            "h_in": In(moving_layout(cfg)), "v_in": In(op),
            "a_left": In(FP32_LAYOUT), "a_below": In(FP32_LAYOUT),
            "ld": In(op), "ld_we": In(1),
            "boundary": In(1), "first": In(1), "drain": In(1),
            "fwd": In(1), "bwd": In(1), "wgrad": In(1),
            "shx": In(range(cfg.m_max)), "shy": In(range(cfg.m_max)),
            "esub": In(range(4 * (kmax - 1) + 1)),
            "h": Out(moving_layout(cfg)), "v": Out(op), "a": Out(FP32_LAYOUT),
            "a_next": Out(FP32_LAYOUT),
        })

    def elaborate(self, platform):
        cfg = self.cfg
        fc = fmac_config(cfg)
        m = Module()
        S = Signal(operand_layout(fc))
        N = cfg.contexts
        if N == 1:
            with m.If(self.ld_we):
                m.d.sync += S.eq(self.ld)
            with m.If(self.boundary):
                m.d.sync += [self.h.eq(self.h_in), self.v.eq(self.v_in)]
        else:
            hold(m, S, self.ld, self.ld_we, N, name="S")
            hold(m, self.h, self.h_in, self.boundary, N, name="h")
            hold(m, self.v, self.v_in, self.boundary, N, name="v")

        # what the cell multiplies: X is V in FWD, H otherwise; Y is V in WGRAD, S otherwise
        x = Signal(operand_layout(fc))
        y = Signal(operand_layout(fc))
        m.d.comb += [x.as_value().eq(Mux(self.fwd, self.v.as_value(), self.h.op.as_value())),
                     y.as_value().eq(Mux(self.wgrad, self.v.as_value(), S.as_value()))]

        cuts = CUTS[cfg.pipeline]
        gen_cfg = fp_gen_config(fc)
        mul = m.submodules.multipliers = ChunkProducts(fc, gen_cfg.in_width,
                                                       cut="products" in cuts)
        m.d.comb += [mul.x.eq(x), mul.y.eq(y), mul.shx.eq(self.shx), mul.shy.eq(self.shy)]
        gen = m.submodules.fp_gen = Round(gen_cfg)
        e = Signal(gen.i.exp.shape())
        # the partial-sum side's controls travel with the round
        side = {"e": e, "first": self.first, "drain": self.drain, "fwd": self.fwd,
                "bwd": self.bwd, "wgrad": self.wgrad, "h_first": self.h.first,
                "h_valid": self.h.valid}
        side = stage(m, side, "products" in cuts, name="products")
        side = stage(m, {"p": mul.p, **side}, "tree" in cuts, name="tree")
        m.d.comb += [e.eq(x.es + y.es - self.esub - 256), gen.i.sig.eq(side["p"]),
                     gen.i.exp.eq(side["e"])]
        del side["p"], side["e"]
        if N > 1:
            return self._interleaved(m, gen.o.bits, side, "generator" in cuts)
        side = stage(m, {"bits": gen.o.bits, **side}, "generator" in cuts, name="generator")
        first, fwd, bwd, wgrad = side["first"], side["fwd"], side["bwd"], side["wgrad"]

        # the partial sum the round adds to
        a = Signal(FP32_LAYOUT)
        with m.If(first & fwd):
            m.d.comb += a.eq(self.a_left)
        with m.Elif(first & bwd):
            m.d.comb += a.eq(self.a_below)
        with m.Elif(first & wgrad & side["h_first"]):
            m.d.comb += a.eq(0)
        with m.Else():
            m.d.comb += a.eq(self.a)
        add = m.submodules.fp_add = FPAdder(FPAddConfig("fp32"))
        m.d.comb += [add.a.eq(a), add.b.eq(side["bits"])]

        with m.If(side["drain"]):
            m.d.comb += self.a_next.eq(self.a_left)
        with m.Elif(wgrad & ~side["h_valid"]):
            m.d.comb += self.a_next.eq(self.a)
        with m.Else():
            m.d.comb += self.a_next.eq(add.sum)
        m.d.sync += self.a.eq(self.a_next)
        return m

    def _interleaved(self, m, bits, side, cut: bool):
        """The accumulation loop of ``contexts > 1``: ``A``'s ring is the adder's stages and
        one register.  A drain cycle adds ``-0`` to the left neighbour's ``A``, a WGRAD bubble
        ``-0`` to the cell's own (exact for every value ``A`` holds), so nothing bypasses the
        adder.  The addend and the one-hot selects of the partial sum are formed before the
        ``generator`` register, so the loop starts at an AND-OR of four sources."""
        first, fwd, bwd, wgrad = side["first"], side["fwd"], side["bwd"], side["wgrad"]
        keep = wgrad & ~side["h_valid"]
        left = side["drain"] | (first & fwd & ~keep)
        below = first & bwd & ~keep
        zero = first & wgrad & side["h_first"] & ~keep
        sel = stage(m, {"bits": Mux(side["drain"] | keep, 0x80000000, bits), "left": left,
                        "below": below, "own": ~(left | below | zero)}, cut, name="generator")
        a = Signal(FP32_LAYOUT)
        m.d.comb += a.eq((self.a_left.as_value() & sel["left"].replicate(32))
                         | (self.a_below.as_value() & sel["below"].replicate(32))
                         | (self.a.as_value() & sel["own"].replicate(32)))
        m.d.comb += self.a_next.eq(interleaved_loop(m, self.a, a, sel["bits"],
                                                    self.cfg.contexts, name="fp_add"))
        return m


class FMACArray(wiring.Component):
    """The fMAC array with its input skew, output deskew and controller.

    Latency: ``out_valid``, ``right`` and ``top`` come ``cfg.pipeline`` cycles later than
    at depth 0 (stages in the module docstring); ``i.ready`` and ``error`` do not move.

    Parameters
    ----------
    cfg : golden.fast.array.FMACArrayConfig
        ``rows``, ``cols``, ``group`` (multipliers per cell), ``m_max`` and ``pipeline``
        (register stages in every cell).

    Ports
    -----
    i : In(stream of :func:`input_layout`)
        One input vector per beat; ``ready`` is high in a beat's last cycle unless a WGRAD drain
        is pending.
    ld : In(stream of :func:`load_layout`)
        Writes one cell's stationary group (always ready).
    mx, my : In(2)
        Run-time operand widths as codes ``m / 2 - 1``.
    dataflow : In(2)
        0 FWD, 1 BWD-DATA, 2 WGRAD.
    out_valid : Out(1)
        ``right`` (FWD, WGRAD drain) or ``top`` (BWD-DATA) holds an output vector this cycle.
    right : Out(rows × fp32); top : Out(cols × fp32)
    error : Out(1)
        Sticky: a width above ``m_max``, dataflow code 3, a load outside the array.
    slot, acc_slot : Out(range(contexts)), only with ``cfg.contexts > 1``
        The context served in the cycle (its ``i.ready``; the cycle's vector, load, widths and
        dataflow are its), and the one ``out_valid``, ``right`` and ``top`` show.
    """

    def __init__(self, cfg: FMACArrayConfig = FMACArrayConfig()):
        self.cfg = cfg
        super().__init__({
            "i": In(stream.Signature(input_layout(cfg))),
            "ld": In(stream.Signature(load_layout(cfg))),
            "mx": In(2), "my": In(2), "dataflow": In(2),
            "out_valid": Out(1),
            "right": Out(data.ArrayLayout(FP32_LAYOUT, cfg.rows)),
            "top": Out(data.ArrayLayout(FP32_LAYOUT, cfg.cols)),
            "error": Out(1),
            **slot_ports(cfg.contexts),
        })

    def elaborate(self, platform):
        cfg = self.cfg
        R, C = cfg.rows, cfg.cols
        N = cfg.contexts
        kmax = cfg.m_max // 2
        m = Module()

        # ---- controller: widths, dataflow, round counters, WGRAD countdown and drain
        kx, ky = chunk_count(m, self.mx, kmax), chunk_count(m, self.my, kmax)
        fwd, bwd, wgrad = Signal(), Signal(), Signal()
        m.d.comb += [fwd.eq((self.dataflow == 0) | (self.dataflow == 3)),
                     bwd.eq(self.dataflow == 1), wgrad.eq(self.dataflow == 2)]
        cx, cy = Signal(range(kmax)), Signal(range(kmax))
        pend = Signal(range(R + C))
        drain = Signal(range(C + 1))
        draining, boundary, first, take = Signal(), Signal(), Signal(), Signal()
        state = {"cx": cx, "cy": cy, "pend": pend, "drain": drain}
        # the registers themselves, or the served context's next state into rings of `N`
        nxt, dom = state_rings(m, state, N)
        if N > 1:
            slots(m, self.slot, self.acc_slot, N, cfg.pipeline + N - 1)
        m.d.comb += [
            draining.eq(drain != 0),
            boundary.eq(~draining & (cx >= kx - 1) & (cy >= ky - 1)),
            first.eq(~draining & (cx == 0) & (cy == 0)),
            self.i.ready.eq(boundary & (pend == 0)),
            take.eq(self.i.valid & self.i.ready),
        ]
        with m.If(draining):
            m.d[dom] += nxt["drain"].eq(drain - 1)
        with m.Elif(boundary):
            m.d[dom] += [nxt["cx"].eq(0), nxt["cy"].eq(0)]
            with m.If(pend != 0):
                m.d[dom] += nxt["pend"].eq(pend - 1)
                with m.If(pend == 1):
                    m.d[dom] += nxt["drain"].eq(C)
            with m.If(take & self.i.payload.last & wgrad):
                m.d[dom] += nxt["pend"].eq(R + C - 1)
        with m.Elif(cy >= ky - 1):
            m.d[dom] += [nxt["cy"].eq(0), nxt["cx"].eq(cx + 1)]
        with m.Else():
            m.d[dom] += nxt["cy"].eq(cy + 1)

        ld = self.ld.payload
        m.d.comb += self.ld.ready.eq(1)
        with m.If((self.mx + 1 > kmax) | (self.my + 1 > kmax) | (self.dataflow == 3)
                  | (self.ld.valid & ((ld.row >= R) | (ld.col >= C)))):
            m.d.sync += self.error.eq(1)

        # ---- input skew: row r of `left` waits r beats, column c of `bottom` c beats
        p = self.i.payload
        h_in, v_in = [], []
        for r in range(R):
            item = Signal(moving_layout(cfg), name=f"left_in{r}")
            m.d.comb += [item.op.eq(p.left[r]), item.valid.eq(take),
                         item.first.eq(take & p.first)]
            for s in range(r):
                reg = Signal(moving_layout(cfg), name=f"skew_l{r}_{s}")
                hold(m, reg, item, boundary, N, name=f"skew_l{r}_{s}")
                item = reg
            h_in.append(item)
        for c in range(C):
            item = p.bottom[c]
            for s in range(c):
                reg = Signal(operand_layout(fmac_config(cfg)), name=f"skew_b{c}_{s}")
                hold(m, reg, item, boundary, N, name=f"skew_b{c}_{s}")
                item = reg
            v_in.append(item)

        # ---- the cells
        shx, shy = Signal(range(cfg.m_max)), Signal(range(cfg.m_max))
        esub = Signal(range(4 * (kmax - 1) + 1))
        m.d.comb += [shx.eq((kx - 1 - cx) << 1), shy.eq((ky - 1 - cy) << 1),
                     esub.eq((cx << 1) + (cy << 1))]
        cells = [[None] * C for _ in range(R)]
        for r in range(R):
            for c in range(C):
                cell = cells[r][c] = ArrayCell(cfg)
                m.submodules[f"cell_{r}_{c}"] = cell
                m.d.comb += [cell.boundary.eq(boundary), cell.first.eq(first),
                             cell.drain.eq(draining), cell.fwd.eq(fwd), cell.bwd.eq(bwd),
                             cell.wgrad.eq(wgrad), cell.shx.eq(shx), cell.shy.eq(shy),
                             cell.esub.eq(esub), cell.ld.eq(ld.group),
                             cell.ld_we.eq(self.ld.valid & (ld.row == r) & (ld.col == c))]
        for r in range(R):
            for c in range(C):
                cell = cells[r][c]
                m.d.comb += [
                    cell.h_in.eq(h_in[r] if c == 0 else cells[r][c - 1].h),
                    cell.v_in.eq(v_in[c] if r == 0 else cells[r - 1][c].v),
                    cell.a_left.eq(Const(0, 32) if c == 0 else cells[r][c - 1].a),
                    cell.a_below.eq(Const(0, 32) if r == 0 else cells[r - 1][c].a),
                ]

        # ---- output deskew and the valid line, in the time the partial sums leave the loop
        # (the partial-sum side's at one context; the adder's `N - 1` stages later with more)
        D = cfg.pipeline + N - 1
        acc_boundary = delay(m, boundary, D, name="acc_boundary")
        acc_vin = delay(m, take & ~wgrad, D, name="acc_vin")
        acc_draining = delay(m, draining, D, name="acc_draining")
        acc_first = delay(m, first, D, name="acc_first")
        vline = Signal(R + C)
        hold(m, vline, Mux(acc_vin, 1, 0) | (vline << 1), acc_boundary, N, name="vline")

        def deskew(src, stages, name):
            regs = [Signal(FP32_LAYOUT, name=f"{name}_{s}") for s in range(stages)]
            if N == 1:
                with m.If(acc_boundary):
                    m.d.sync += regs[0].eq(src)
                    for s in range(1, stages):
                        m.d.sync += regs[s].eq(regs[s - 1])
            else:
                for s in range(stages):
                    hold(m, regs[s], src if s == 0 else regs[s - 1], acc_boundary, N,
                         name=f"{name}_{s}")
            return regs[-1]

        for r in range(R):
            q = deskew(cells[r][C - 1].a_next, R - r, f"right{r}")
            # a drain shows `A` itself, from the partial-sum side's time
            a = delay(m, cells[r][C - 1].a, N - 1, name=f"drain{r}")
            m.d.comb += self.right[r].eq(Mux(acc_draining, a.as_value(), q.as_value()))
        for c in range(C):
            m.d.comb += self.top[c].eq(deskew(cells[R - 1][c].a_next, C - c, f"top{c}"))
        m.d.comb += self.out_valid.eq(acc_draining | (acc_first & vline[R + C - 1]))
        return m


__all__ = ["FMACArray", "ArrayCell", "hold", "input_layout", "load_layout", "moving_layout"]

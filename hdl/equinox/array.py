"""Equinox's weight-stationary hbfp8 systolic array (registry unit ``equinox.array``; spec
``docs/specs/equinox.md`` §2.2-§2.6).

``n x n`` single-cycle PEs (:class:`PE`: a weight vector and a partial sum, nothing else), the
triangular input skew (:class:`InputSkew`), the exponent adder with its FIFO and valid line
(:class:`ExponentPath`) and ``n`` bf16 output normalizers (instances of the shared rounding
block :class:`hdl.common.rounding.Round`).  Weights are reloaded just in time, one PE row per
cycle, so vectors stream back to back across weight slices.

Cycle-accurate with :class:`golden.equinox.ArraySim`; its module docstring
(:mod:`golden.equinox.array`) is the timing and weight-feeder contract.
"""

from amaranth.hdl import Array, Cat, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from golden.common import BF16
from golden.equinox import ArrayConfig
from golden.equinox.hbfp import exp_offset, normalizer_config

from ..common.arith import adder_tree
from ..common.formats import layout
from ..common.rounding import Round

#: widths of a block exponent (A4) and of an exponent sum (§1.7)
EXP_BITS = 8
ESUM_BITS = 9
#: the normalizer's exponent input (``esum - exp_offset``, 10 bits signed like
#: :func:`golden.equinox.hbfp.normalizer_config`'s ``exp_width``)
NORM_EXP = signed(10)


def chunk_layout(cfg: ArrayConfig) -> data.ArrayLayout:
    """One PE's operand vector: ``w`` X-bit two's complement mantissas."""
    return data.ArrayLayout(signed(cfg.x_bits), cfg.w)


def act_layout(cfg: ArrayConfig) -> data.StructLayout:
    """An activation vector: an HBFP block of ``T = n * w`` two's complement mantissas with
    its 8-bit biased exponent (A4, A8) — the layout :func:`hdl.common.formats.layout` gives a
    two's complement :class:`golden.common.formats.BFPFormat`, written out here because that
    class caps blocks at 256 elements.  Chunk ``r`` (for PE row ``r``) is ``man[r*w:(r+1)*w]``."""
    return data.StructLayout({"exp": EXP_BITS,
                              "man": data.ArrayLayout(signed(cfg.x_bits), cfg.T)})


def wt_layout(cfg: ArrayConfig) -> data.StructLayout:
    """A weight-row write: the PE row index, the tile exponent (latched with row 0) and the
    ``n`` weight vectors of the row (``man[c]`` for PE(row, c))."""
    return data.StructLayout({"row": cfg.row_bits, "exp": EXP_BITS,
                              "man": data.ArrayLayout(chunk_layout(cfg), cfg.n)})


class PE(wiring.Component):
    """One w-wide MAC (§2.3): ``psum <= wrap_A(psum_in + sum_k a[k] * wreg[k])``.

    ``w`` signed X x X multipliers, an adder tree and the A-bit adder, in one cycle (no
    pipeline register, [T §6.2.5]).  State: ``wreg`` (``w`` mantissas) and ``psum`` — nothing
    else.  Neither has a reset: no valid output depends on them before they are written.

    Ports
    -----
    a : In(w x signed(X))
        The row's activation chunk (row-broadcast).
    psum_in : In(signed(A))
        The partial sum of the PE above (0 in row 0).
    wt : In(w x signed(X)); wt_load : In(1)
        A weight vector and its write enable (takes effect at the next cycle).
    en : In(1)
        Global enable: 0 holds ``psum`` and ``wreg``.
    psum : Out(signed(A))
        The partial-sum register.
    """

    def __init__(self, cfg: ArrayConfig):
        self.cfg = cfg
        super().__init__({"a": In(chunk_layout(cfg)), "psum_in": In(signed(cfg.acc_bits)),
                          "wt": In(chunk_layout(cfg)), "wt_load": In(1), "en": In(1),
                          "psum": Out(signed(cfg.acc_bits))})

    def elaborate(self, platform):
        cfg = self.cfg
        X, w = cfg.x_bits, cfg.w
        m = Module()
        wreg = Signal(chunk_layout(cfg), reset_less=True, name="wreg")
        psum = Signal(signed(cfg.acc_bits), reset_less=True, name="psum_reg")
        prods = []
        for k in range(w):
            p = Signal(signed(2 * X), name=f"prod{k}")
            m.d.comb += p.eq(self.a[k] * wreg[k])
            prods.append(p)
        dot = adder_tree(m, prods, 2 * X + ceil_log2(w), "dot")
        with m.If(self.en):
            # the assignment keeps the low A bits: the accumulator wraps (A9)
            m.d.sync += psum.eq(self.psum_in + dot)
            with m.If(self.wt_load):
                m.d.sync += wreg.eq(self.wt)
        m.d.comb += self.psum.eq(psum)
        return m


class InputSkew(wiring.Component):
    """The triangular delay line at the array's input (§2.2): chunk ``r`` of the activation
    vector reaches PE row ``r`` after ``r`` enabled cycles (row 0 straight through);
    ``n (n - 1) / 2`` chunk registers, no reset.

    Ports
    -----
    act : In(T x signed(X)); en : In(1)
    rows : Out(n x w x signed(X))
        The chunk each PE row multiplies in this cycle.
    """

    def __init__(self, cfg: ArrayConfig):
        self.cfg = cfg
        super().__init__({"act": In(data.ArrayLayout(signed(cfg.x_bits), cfg.T)), "en": In(1),
                          "rows": Out(data.ArrayLayout(chunk_layout(cfg), cfg.n))})

    def elaborate(self, platform):
        cfg = self.cfg
        n, w = cfg.n, cfg.w
        m = Module()
        for r in range(n):
            item = self.act[r * w:(r + 1) * w]
            for s in range(r):
                reg = Signal(chunk_layout(cfg), reset_less=True, name=f"row{r}_{s}")
                with m.If(self.en):
                    m.d.sync += reg.eq(item)
                item = reg
            m.d.comb += self.rows[r].eq(item)
        return m


class ExponentPath(wiring.Component):
    """The per-array exponent path (§2.4): the tile exponent register, the 9-bit adder
    ``esum = act_exp + e_w``, a FIFO of ``depth`` entries and a valid line of ``n`` stages.

    A vector accepted at ``t_b`` (``en & push``) pushes its ``esum``; ``valid`` is high at
    ``t_b + n``, when ``esum`` shows the FIFO head, popped at the end of that cycle (if ``en``).
    The FIFO is a circular buffer with read and write pointers; with ``depth = n`` (the
    array's choice) a push into a full FIFO always comes with a pop.

    Ports
    -----
    en : In(1)
        Global enable: 0 holds every register.
    push : In(1); act_exp : In(8)
        A vector enters (``act_valid``) and its block exponent.
    wt_exp : In(8); wt_exp_load : In(1)
        Latch ``wt_exp`` as the tile exponent (with the weight row-0 write).
    valid : Out(1)
        ``acc_valid``: the vector accepted ``n`` enabled cycles ago leaves now.
    esum : Out(9)
        The FIFO head.
    level : Out(range(depth + 1))
        FIFO occupancy: vectors in flight.
    """

    def __init__(self, cfg: ArrayConfig, depth: int | None = None):
        self.cfg = cfg
        self.depth = cfg.n if depth is None else depth
        super().__init__({"en": In(1), "push": In(1), "act_exp": In(EXP_BITS),
                          "wt_exp": In(EXP_BITS), "wt_exp_load": In(1),
                          "valid": Out(1), "esum": Out(ESUM_BITS),
                          "level": Out(range(self.depth + 1))})

    def elaborate(self, platform):
        n, depth = self.cfg.n, self.depth
        m = Module()
        e_w = Signal(EXP_BITS, reset_less=True, name="e_w")
        esum_in = Signal(ESUM_BITS)
        m.d.comb += esum_in.eq(self.act_exp + e_w)
        vline = Signal(n)
        with m.If(self.en):
            m.d.sync += vline.eq(Cat(self.push, vline[:-1]))
            with m.If(self.wt_exp_load):
                m.d.sync += e_w.eq(self.wt_exp)
        m.d.comb += self.valid.eq(vline[-1])
        push, pop = Signal(), Signal()
        m.d.comb += [push.eq(self.en & self.push), pop.eq(self.en & self.valid)]

        buf = Array(Signal(ESUM_BITS, reset_less=True, name=f"entry{k}") for k in range(depth))
        if depth > 1:
            wptr = Signal(range(depth))
            rptr = Signal(range(depth))

            def nxt(p):
                return Mux(p == depth - 1, 0, p + 1)

            with m.If(push):
                m.d.sync += [buf[wptr].eq(esum_in), wptr.eq(nxt(wptr))]
            with m.If(pop):
                m.d.sync += rptr.eq(nxt(rptr))
            m.d.comb += self.esum.eq(buf[rptr])
        else:
            with m.If(push):
                m.d.sync += buf[0].eq(esum_in)
            m.d.comb += self.esum.eq(buf[0])
        level = Signal(range(depth + 1))
        m.d.sync += level.eq(level + push - pop)
        m.d.comb += self.level.eq(level)
        return m


class SystolicArray(wiring.Component):
    """One Equinox weight-stationary BFP systolic array (spec §2.2-§2.6).

    Computes, for every accepted activation vector (an HBFP block of ``T = n * w`` X-bit
    mantissas), the ``n`` dot products with the ``T x n`` weight slice the PEs hold:
    ``acc[c]`` (``A``-bit, wrapping) and ``esum = act_exp + e_w`` at ``t_b + n``, and
    their bf16 values ``acc * 2**(esum - exp_offset(X))`` (RNE, flush to zero, saturating:
    the shared rounding block with :func:`golden.equinox.hbfp.normalizer_config`) at
    ``t_b + n + conv_lat``.

    Latency ``n`` cycles to ``acc``, ``n + conv_lat`` to ``out``, independent of ``w``.
    Throughput one vector per cycle (``n² w`` MACs), also across weight slices: the rows of
    the next slice are written just in time, one row per cycle, as a wavefront skewed like the
    activations (row ``r`` in the cycle of its last MAC with the old slice; the tile exponent
    with row 0).  ``en = 0`` holds everything (§2.6).  The full contract — including what the
    weight feeder must do — is :mod:`golden.equinox.array`'s docstring.

    Choices [C] (besides the spec's §2.2-§2.6 and A12/A13): the weight port writes one row per
    cycle by index (the weight bank's row width, Eq. 4.2; rows ``>= n`` are ignored); the FIFO
    is a circular buffer of exactly ``n`` entries whose pop is timed by an ``n``-stage valid
    line; data registers (weights, partial sums, skew, FIFO entries, tile exponent, normalizer
    pipeline) have no reset, control registers do; invalid input vectors flow through the skew
    and PEs unmasked (their outputs are not valid); ``conv_lat = 2`` registers the normalizer's
    inputs (``acc`` row and ``esum - exp_offset``) as well as its outputs, ``conv_lat = 0``
    makes it combinational.

    Parameters
    ----------
    cfg : golden.equinox.ArrayConfig
        ``n``, ``w``, ``x_bits`` (X), ``acc_bits`` (A), ``conv_lat``.

    Ports
    -----
    en : In(1)
        Global enable (back-pressure): 0 holds every register; the other inputs are ignored.
    act_valid : In(1); act : In(:func:`act_layout`)
        An activation vector (``man``, ``exp``), accepted when ``en & act_valid``.
    wt_valid : In(1); wt : In(:func:`wt_layout`)
        Write ``wt.man`` into PE row ``wt.row`` (and ``wt.exp`` into the tile exponent when
        ``row = 0``) at the end of a cycle with ``en``.
    acc_valid : Out(1); acc : Out(n x signed(A)); esum : Out(9)
        The accumulators of row ``n - 1`` and their exponent sum (FIFO head), ``t_b + n``.
    out_valid : Out(1); out : Out(n x bf16)
        The normalized row, ``t_b + n + conv_lat``.
    fifo_level : Out(range(n + 1))
        Exponent FIFO occupancy (vectors in flight), at most ``n``.
    """

    def __init__(self, cfg: ArrayConfig = ArrayConfig()):
        self.cfg = cfg
        n = cfg.n
        super().__init__({
            "en": In(1),
            "act_valid": In(1), "act": In(act_layout(cfg)),
            "wt_valid": In(1), "wt": In(wt_layout(cfg)),
            "acc_valid": Out(1), "acc": Out(data.ArrayLayout(signed(cfg.acc_bits), n)),
            "esum": Out(ESUM_BITS),
            "out_valid": Out(1), "out": Out(data.ArrayLayout(layout(BF16), n)),
            "fifo_level": Out(range(n + 1)),
        })

    def elaborate(self, platform):
        cfg = self.cfg
        n, A = cfg.n, cfg.acc_bits
        m = Module()
        en = self.en

        skew = m.submodules.skew = InputSkew(cfg)
        m.d.comb += [skew.act.eq(self.act.man), skew.en.eq(en)]

        exp = m.submodules.exp_path = ExponentPath(cfg)
        m.d.comb += [exp.en.eq(en), exp.push.eq(self.act_valid), exp.act_exp.eq(self.act.exp),
                     exp.wt_exp.eq(self.wt.exp),
                     exp.wt_exp_load.eq(self.wt_valid & (self.wt.row == 0))]

        pes = [[None] * n for _ in range(n)]
        for r in range(n):
            load = Signal(name=f"wt_load{r}")
            m.d.comb += load.eq(self.wt_valid & (self.wt.row == r))
            for c in range(n):
                pe = pes[r][c] = PE(cfg)
                m.submodules[f"pe_{r}_{c}"] = pe
                m.d.comb += [pe.a.eq(skew.rows[r]), pe.wt.eq(self.wt.man[c]),
                             pe.wt_load.eq(load), pe.en.eq(en),
                             pe.psum_in.eq(0 if r == 0 else pes[r - 1][c].psum)]
        for c in range(n):
            m.d.comb += self.acc[c].eq(pes[n - 1][c].psum)
        m.d.comb += [self.acc_valid.eq(exp.valid), self.esum.eq(exp.esum),
                     self.fifo_level.eq(exp.level)]

        # ---- normalizers: (acc, esum - exp_offset) -> bf16, conv_lat register stages
        e = Signal(NORM_EXP, name="norm_exp")
        m.d.comb += e.eq(exp.esum - exp_offset(cfg.x_bits))
        src_acc, src_exp, src_valid = self.acc, e, exp.valid
        if cfg.conv_lat == 2:
            src_acc = Signal(data.ArrayLayout(signed(A), n), reset_less=True, name="norm_acc")
            src_exp = Signal(NORM_EXP, reset_less=True, name="norm_exp_q")
            src_valid = Signal(name="norm_valid")
            with m.If(en):
                m.d.sync += [src_acc.eq(self.acc), src_exp.eq(e), src_valid.eq(exp.valid)]
        bits = []
        for c in range(n):
            norm = m.submodules[f"norm_{c}"] = Round(normalizer_config(cfg.x_bits, A))
            m.d.comb += [norm.i.sig.eq(src_acc[c]), norm.i.exp.eq(src_exp)]
            bits.append(norm.o.bits)
        if cfg.conv_lat == 0:
            m.d.comb += [self.out_valid.eq(src_valid)] + [self.out[c].eq(bits[c])
                                                           for c in range(n)]
        else:
            out = Signal(data.ArrayLayout(layout(BF16), n), reset_less=True, name="out_q")
            out_valid = Signal(name="out_valid_q")
            with m.If(en):
                m.d.sync += [out_valid.eq(src_valid)] + [out[c].eq(bits[c]) for c in range(n)]
            m.d.comb += [self.out.eq(out), self.out_valid.eq(out_valid)]
        return m


__all__ = ["SystolicArray", "PE", "InputSkew", "ExponentPath", "act_layout", "wt_layout",
           "chunk_layout"]

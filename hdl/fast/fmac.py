"""FAST's fMAC (registry unit ``fast.fmac``; spec ``docs/specs/fast.md`` §4): the dot product of two
BFP groups, 2 bits of each operand per cycle, accumulated in FP32.

Bit-exact with :func:`golden.fast.fmac.fmac_run` (paper mode).  Per cycle (one *round*): the chunk
multiplexers pick 2-bit chunk ``cx`` of every X magnitude and ``cy`` of every Y magnitude, 16
2b×2b multipliers with the product signs feed a signed adder tree (``P`` in [-144, 144]), the
exponent adder forms ``(Esx - 2cx) + (Esy - 2cy) - 256``, the FP generator (the shared rounding
block: exact, FTZ, ±Inf) turns ``P`` into FP32, and the FP32 adder
(:class:`hdl.common.fp_add.FPAdder`) adds it to the accumulator register.  Rounds go X's chunks
outer, most significant first (§4.4's canonical order).

Pipeline stages (``cfg.pipeline``, 0..3)
----------------------------------------
``pipeline = 0`` is the paper's fMAC: a round's chunks, products, sum, FP generator and FP32
addition in one cycle.  Stages go on the round's side only, before the accumulation; the FP32
addition (the ``clear`` multiplexer, the adder and the accumulator register) stays one cycle, so
every result is bit-exact with the one-cycle fMAC and only arrives later:

- ``generator`` (depths 1..3): the FP generator's FP32 value, before the FP32 adder;
- ``tree`` (depths 2 and 3): the adder tree's sum ``P`` and the round's exponent, before the FP
  generator;
- ``products`` (depth 3): the 2b x 2b products (inside :class:`ChunkProducts`) and the round's
  exponent, before the adder tree.

Each stage also carries the round's enable (``busy``) and whether it starts from +0 (the first
round of a pair with ``clear``).  The round of cycle ``t`` is added into the accumulator at edge
``t + pipeline``: ``busy``, ``last`` and ``grp.ready`` keep their depth-0 timing, ``acc`` holds a
pair's result from the cycle ``pipeline + 1`` after its last round
(:class:`golden.fast.fmac.FMACSim`), and ``error`` is set at the edge that takes the pair,
as at depth 0.  The accumulation loop (multiplexer, FP32 adder, accumulator) bounds the clock
at every depth.

Interleaved dot products (``cfg.contexts``, 1..6)
------------------------------------------------
With ``C = contexts > 1`` the fMAC is C-slowed: every state register (the pair's operands, the
chunk counts and counters, ``fresh``, ``busy``) becomes a ring of ``C``
(:func:`hdl.common.pipeline.ring`) whose head is the context served in the cycle, and the
FP32 adder takes ``C - 1`` stages inside the accumulation loop
(:func:`hdl.common.fp_add.interleaved_sum`).  ``C`` dot products share the datapath, each
served every ``C``-th cycle and accumulated exactly as by the one-context fMAC; ``slot`` names
the context served in the cycle (its ``busy``, ``last`` and ``grp.ready``; a pair taken joins
it) and ``acc_slot`` the one ``acc`` shows, ``(slot - pipeline) mod C``
(:class:`golden.fast.fmac.FMACSlots`).  The round's addend (the FP generator's value, or
``-0`` in a cycle without a round) and its restart flag are formed before the ``generator``
register.  ``error`` stays one sticky flag.  ``contexts = 1`` generates the same Verilog as the
unit without the field.
"""

from amaranth.hdl import Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for

from golden.common import FP32
from golden.common.fp_add import FPAddConfig
from golden.common.rounding import RoundConfig
from golden.fast.fmac import FMACConfig

from ..common.arith import AdderTree
from ..common.formats import layout
from ..common.fp_add import FPAdder, interleaved_sum
from ..common.pipeline import slot_ports, slots, stage, state_rings
from ..common.rounding import Round

#: cut points of each pipeline depth (see the module docstring)
CUTS = {0: (), 1: ("generator",), 2: ("tree", "generator"), 3: ("products", "tree", "generator")}


def operand_layout(cfg: FMACConfig) -> data.StructLayout:
    """One BFP group: shared exponent, sign bits, magnitudes (``m_max`` bits each)."""
    return data.StructLayout({"es": 8, "sign": cfg.group,
                              "q": data.ArrayLayout(cfg.m_max, cfg.group)})


def pair_layout(cfg: FMACConfig) -> data.StructLayout:
    """A group pair: X (streamed, outer loop) and Y, their run-time widths as codes
    ``m / 2 - 1`` (0..3 for 2, 4, 6, 8 bits), and ``clear`` (start from +0)."""
    return data.StructLayout({"x": operand_layout(cfg), "y": operand_layout(cfg),
                              "mx": 2, "my": 2, "clear": 1})


def fp_gen_config(cfg: FMACConfig) -> RoundConfig:
    """The FP generator as a rounding block: ``|P| <= 9 * group`` (144 for 16 lanes, 9 bits
    of two's complement), exponent ``Ex + Ey - 256`` in 10 bits; the conversion is exact."""
    return RoundConfig(fmt="fp32", in_width=bits_for(9 * cfg.group, True), signed=True, frac=0,
                       exp_width=10, mode="rne")


def chunk_count(m, code, kmax: int):
    """2-bit chunks of a run-time width code ``m / 2 - 1``, clamped to the ``kmax`` chunks the
    operand registers hold (a wider request is the caller's sticky error)."""
    k = Signal(range(1, kmax + 1))
    m.d.comb += k.eq(Mux(code + 1 > kmax, kmax, code + 1))
    return k


class ChunkMultipliers(wiring.Component):
    """One round's 2b x 2b multipliers (combinational): chunk ``x.q >> shx`` of every X
    magnitude times chunk ``y.q >> shy`` of the Y magnitude in the same lane, negated when the
    signs differ.

    Ports
    -----
    x, y : In(operand layout); shx, shy : In(range(m_max)); prod : Out(group × signed(5))
    """

    def __init__(self, cfg: FMACConfig):
        self.cfg = cfg
        op = operand_layout(cfg)
        super().__init__({"x": In(op), "y": In(op), "shx": In(range(cfg.m_max)),
                          "shy": In(range(cfg.m_max)),
                          "prod": Out(data.ArrayLayout(signed(5), cfg.group))})

    def elaborate(self, platform):
        m = Module()
        x, y = self.x, self.y
        for j in range(self.cfg.group):
            a = Signal(2, name=f"chx{j}")
            b = Signal(2, name=f"chy{j}")
            m.d.comb += [a.eq(x.q[j] >> self.shx), b.eq(y.q[j] >> self.shy),
                         self.prod[j].eq(Mux(x.sign[j] ^ y.sign[j], -(a * b), a * b))]
        return m


class ChunkProducts(wiring.Component):
    """One round's multiplier array: :class:`ChunkMultipliers` (``products``) and the adder
    tree summing them into ``p`` (``tree``); combinational, or with the ``products`` cut (a
    register stage between the multipliers and the tree: ``p`` one cycle later).

    Ports
    -----
    x, y : In(operand layout); shx, shy : In(range(m_max)); p : Out(signed(width))
    """

    def __init__(self, cfg: FMACConfig, width: int, cut: bool = False):
        self.cfg = cfg
        self.cut = cut
        op = operand_layout(cfg)
        super().__init__({"x": In(op), "y": In(op), "shx": In(range(cfg.m_max)),
                          "shy": In(range(cfg.m_max)), "p": Out(signed(width))})

    def elaborate(self, platform):
        m = Module()
        mul = m.submodules.products = ChunkMultipliers(self.cfg)
        tree = m.submodules.tree = AdderTree(self.cfg.group, signed(5), len(self.p))
        prod = stage(m, {"prod": mul.prod}, self.cut, name="products")["prod"]
        m.d.comb += [mul.x.eq(self.x), mul.y.eq(self.y), mul.shx.eq(self.shx),
                     mul.shy.eq(self.shy), tree.i.eq(prod), self.p.eq(tree.o)]
        return m


class FMAC(wiring.Component):
    """fMAC: ``acc += X · Y`` for BFP groups X, Y in ``rounds(mx, my)`` cycles.

    Latency/throughput: a pair accepted on ``grp`` runs its rounds in the following cycles
    (``busy``), one FP32 addition each; ``last`` flags its final round, in which the next pair
    is accepted (``grp.ready = ~busy | last``), so pairs follow each other with no idle cycle.
    ``acc`` holds the result from the cycle ``cfg.pipeline + 1`` after the last round (stages
    in the module docstring; :class:`golden.fast.fmac.FMACSim` is the cycle model).

    Parameters
    ----------
    cfg : golden.fast.fmac.FMACConfig
        ``group`` (multipliers, 16), ``m_max`` (widest operand, 8) and ``pipeline`` (register
        stages before the accumulation).

    Ports
    -----
    grp : In(stream of :func:`pair_layout`)
    acc : Out(fp32)
        The accumulator register (reset +0).
    busy, last : Out(1)
    error : Out(1)
        Sticky: a pair asked for a width above ``m_max`` (it is processed at ``m_max``).
    slot, acc_slot : Out(range(contexts)), only with ``cfg.contexts > 1``
        The context served in the cycle (``busy``, ``last``, ``grp.ready`` are its own) and the
        one ``acc`` shows (module docstring).
    """

    def __init__(self, cfg: FMACConfig = FMACConfig()):
        self.cfg = cfg
        super().__init__({
            "grp": In(stream.Signature(pair_layout(cfg))),
            "acc": Out(layout(FP32)),
            "busy": Out(1), "last": Out(1), "error": Out(1),
            **slot_ports(cfg.contexts),
        })

    def elaborate(self, platform):
        cfg = self.cfg
        C = cfg.contexts
        m = Module()
        kmax = cfg.m_max // 2
        p = self.grp.payload

        # ---- the pair's registers and the round counters
        x = Signal(operand_layout(cfg))
        y = Signal(operand_layout(cfg))
        kx = Signal(range(1, kmax + 1))           # chunks per operand (1..kmax)
        ky = Signal(range(1, kmax + 1))
        cx = Signal(range(kmax))
        cy = Signal(range(kmax))
        fresh = Signal()                          # this pair starts from +0
        take = Signal()
        state = {"x": x, "y": y, "kx": kx, "ky": ky, "cx": cx, "cy": cy, "fresh": fresh,
                 "busy": self.busy}
        # the registers themselves, or the served context's next state into rings of `C`
        nxt, dom = state_rings(m, state, C)
        if C > 1:
            slots(m, self.slot, self.acc_slot, C, cfg.pipeline)
        m.d.comb += [self.grp.ready.eq(~self.busy | self.last),
                     take.eq(self.grp.valid & self.grp.ready)]

        with m.If(take):
            m.d[dom] += [nxt["x"].eq(p.x), nxt["y"].eq(p.y),
                         nxt["kx"].eq(chunk_count(m, p.mx, kmax)),
                         nxt["ky"].eq(chunk_count(m, p.my, kmax)),
                         nxt["cx"].eq(0), nxt["cy"].eq(0), nxt["fresh"].eq(p.clear),
                         nxt["busy"].eq(1)]
            with m.If((p.mx + 1 > kmax) | (p.my + 1 > kmax)):
                m.d.sync += self.error.eq(1)
        with m.Elif(self.last):
            m.d[dom] += nxt["busy"].eq(0)
        with m.Elif(self.busy):
            with m.If(cy == ky - 1):
                m.d[dom] += [nxt["cy"].eq(0), nxt["cx"].eq(cx + 1)]
            with m.Else():
                m.d[dom] += nxt["cy"].eq(cy + 1)
        m.d.comb += self.last.eq(self.busy & (cx == kx - 1) & (cy == ky - 1))

        # ---- one round: chunks, 2b x 2b products, adder tree
        # chunk c of a k-chunk magnitude is bits [2(k-1-c), 2(k-1-c)+2): the shift is 2(k-1-c)
        cuts = CUTS[cfg.pipeline]
        gen_cfg = fp_gen_config(cfg)
        mul = m.submodules.multipliers = ChunkProducts(cfg, gen_cfg.in_width,
                                                       cut="products" in cuts)
        m.d.comb += [mul.x.eq(x), mul.y.eq(y), mul.shx.eq((kx - 1 - cx) << 1),
                     mul.shy.eq((ky - 1 - cy) << 1)]
        P = mul.p

        # ---- exponent adder and FP generator
        gen = m.submodules.fp_gen = Round(gen_cfg)
        e = Signal(signed(bits_for(2 * 255 + 256, True)))
        side = stage(m, {"e": e, "en": self.busy, "fresh": fresh}, "products" in cuts,
                     name="products")
        side = stage(m, {"p": P, **side}, "tree" in cuts, name="tree")
        m.d.comb += [e.eq(x.es + y.es - (cx << 1) - (cy << 1) - 256), gen.i.sig.eq(side["p"]),
                     gen.i.exp.eq(side["e"])]
        if C > 1:
            # interleaved dot products: an idle cycle adds -0 to the sum it passes
            # (hdl.common.fp_add.interleaved_sum); the addend and the restart are formed
            # before the generator's register
            side = stage(m, {"b": Mux(side["en"], gen.o.bits, 0x80000000),
                             "restart": side["en"] & side["fresh"]},
                         "generator" in cuts, name="generator")
            interleaved_sum(m, self.acc, side["b"], side["restart"], C, name="fp_add")
            with m.If(self.busy):
                m.d.comb += nxt["fresh"].eq(0)
                with m.If(take):
                    m.d.comb += nxt["fresh"].eq(p.clear)
            return m
        side = stage(m, {"bits": gen.o.bits, "en": side["en"], "fresh": side["fresh"]},
                     "generator" in cuts, name="generator")

        # ---- FP32 accumulation
        add = m.submodules.fp_add = FPAdder(FPAddConfig("fp32"))
        m.d.comb += [add.a.eq(Mux(side["fresh"], 0, self.acc)), add.b.eq(side["bits"])]
        # without stages the round's enable is ``busy`` itself: one condition for both
        with m.If(self.busy):
            if not cfg.pipeline:
                m.d.sync += self.acc.eq(add.sum)
            m.d.sync += fresh.eq(0)
            with m.If(take):
                m.d.sync += fresh.eq(p.clear)
        if cfg.pipeline:
            with m.If(side["en"]):
                m.d.sync += self.acc.eq(add.sum)
        return m


__all__ = ["FMAC", "CUTS", "ChunkProducts", "ChunkMultipliers", "chunk_count", "operand_layout",
           "pair_layout", "fp_gen_config"]

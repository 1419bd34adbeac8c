"""The FP → BFP pipeline of the block converters: FAST's FP32 → BFP converter
(:mod:`hdl.fast.converter`) and Equinox's FP32/bf16 → hbfp quantizer
(:mod:`hdl.equinox.quantizer`).

A block of ``lanes`` floating-point values becomes a shared exponent ``Es`` (the largest
exponent field of the block, or an exponent floor when that is larger) and one fixed-point
mantissa per lane on that exponent's grid.  :class:`BFPPipeline` adds it to a unit's module in
two steps:

1. :meth:`~BFPPipeline.front`, registered (the unit's first pipeline stage): decode with DAZ
   (subnormals read as zero), the compare-and-forward tree of the lanes' exponent fields (and
   the floor) to ``Es``, the noise per lane for stochastic rounding — the injected bits, the
   next draw of the lane's 16-bit LFSR (stepped ``noise_bits`` times, unrolled; it advances only
   for blocks that take their noise from it) or 0 for blocks without noise — and the sticky
   error for Inf/NaN inputs;
2. :meth:`~BFPPipeline.mantissas`, combinational (the unit registers the result; the register
   stages below may cut it): per lane the exponent difference ``E - Es`` and the rounding
   block (:class:`~.rounding.Round`, the golden quantizer's own configuration): a clamped
   shifter with the rounding increment and saturation.

:class:`BlockConverter` is the units' component: their ports, and the two steps on them
between the unit's input stream and its own output logic.

Stochastic rounding takes the noise inside the rounding block when its mode is ``"sr"`` (the
noise window under the LSB is added before it is dropped) and otherwise after it: the block
rounds (floor) to ``noise_bits`` more bits than the mantissa, the noise is added and shifted
out, and the sum saturates at the mantissa's largest value (``M = floor(s + R / 2**noise_bits)``).

The pipeline advances as a whole (:meth:`~BFPPipeline.enable`): every stage moves when the
unit's output register is empty or read, and back-pressure stalls all of them and the input.

Register stages (:data:`CUT_POINTS`)
------------------------------------
Without cuts the pipeline is the one above: stage 1 registered, stage 2 combinational into the
unit's register.  Each cut the unit takes (``cuts``; the units' ``pipeline`` fields pick them
through their own ``CUTS`` tables) adds one register stage at a named point, every stage
loading only while the pipeline advances, so the whole pipeline still stalls together and
takes one block per cycle:

- ``tree``: inside stage 1, half-way up the compare-and-forward tree: the partial maxima of
  groups of ``2**ceil(levels / 2)`` exponents, registered with the lanes' fields, their noise
  and ``valid``;
- ``difference``: after the exponent differences ``E - Es`` and the rounding block's input
  significands (two's complement, or magnitude and sign), before the rounding block;
- ``normalize``: inside the rounding block, after its clamped shift and sticky (the block at
  ``pipeline = 1``, :data:`hdl.common.rounding.CUTS`, its registers gated by the advance signal
  with Amaranth's ``EnableInserter``);
- ``increment`` (only with ``normalize``): inside the rounding block, after the rounding
  increment (the block at ``pipeline = 2``), before the saturation and, with noise added after
  the block, the noise adder.

Side-band fields (``valid``, ``Es``, the signs, the noise) travel in the same stages.  With
``k`` cuts every block reaches the unit's output register ``k`` cycles later, and the sticky
``error`` of a block with an Inf or NaN is set ``k`` advances later too (a delay line beside
the datapath), in the same position relative to the block's output as without cuts.
"""

import dataclasses
from typing import NamedTuple

from amaranth.hdl import Cat, Const, EnableInserter, Module, Mux, Signal, signed, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from golden.common.formats import format_named
from golden.common.rounding import RoundConfig

from .arith import tree_reduce
from .formats import decode
from .lfsr import lfsr_steps
from .pipeline import delay, stage
from .rounding import Round

#: the points a register stage can cut (see the module docstring)
CUT_POINTS = ("tree", "difference", "normalize", "increment")


class Front(NamedTuple):
    """The registered outputs of :meth:`BFPPipeline.front` (one block)."""

    #: the block in this register is valid
    valid: Signal
    #: the shared exponent ``Es`` (biased, the input format's exponent field)
    es: Signal
    #: the lanes' signs, one bit each
    sign: Signal
    #: per lane the exponent field ``E`` (0 for zeros and subnormals)
    exp: list
    #: per lane the significand with its hidden bit (0 for zeros and subnormals)
    sig: list
    #: per lane the noise (``noise_bits`` bits; empty without noise)
    noise: list


class Mantissas(NamedTuple):
    """The outputs of :meth:`BFPPipeline.mantissas` (one block, combinational, for the unit's
    register), with the block's side-band fields from the same stage."""

    #: the block is valid
    valid: Signal
    #: the shared exponent ``Es``
    es: Signal
    #: the lanes' signs, one bit each
    sign: Signal
    #: per lane the rounded mantissa
    man: list


class BFPPipeline:
    """One FP → BFP block of ``lanes`` lanes (see the module docstring).

    Parameters
    ----------
    lanes : int
        Values per block, one lane each.
    in_format : FloatFormat or str
        Format of the input values (``fp32``, ``bf16``).
    rounding : golden.common.rounding.RoundConfig
        The per-lane rounding block, an integer target.  Its input is the lane's significand
        aligned to the top of ``in_width`` (two's complement when ``signed``, else the
        magnitude with the sign) at exponent ``E - Es + exp_offset``.
    exp_offset : int
        The rounding block's exponent of a value at the shared exponent.
    noise_bits : int
        Random bits per lane for stochastic rounding; 0: no noise, no LFSRs.
    seeds : sequence of int
        The lanes' LFSR reset states (with ``noise_bits``).
    cuts : sequence of str
        The register stages to add, named from :data:`CUT_POINTS` (module docstring); one
        cycle of latency each.
    """

    def __init__(self, lanes: int, in_format, rounding: RoundConfig, *, exp_offset: int = 0,
                 noise_bits: int = 0, seeds=(), cuts=()):
        self.lanes = lanes
        self.fmt = format_named(in_format)
        self.rounding = rounding
        self.exp_offset = exp_offset
        self.noise_bits = noise_bits
        self.seeds = tuple(seeds)
        if noise_bits and len(self.seeds) < lanes:
            raise ValueError(f"{lanes} lanes with noise need {lanes} LFSR seeds, got "
                             f"{len(self.seeds)}")
        if rounding.mode == "sr" and rounding.rand_bits != noise_bits:
            raise ValueError(f"a rounding block in mode sr takes {rounding.rand_bits} noise "
                             f"bits, not {noise_bits}")
        self.cuts = tuple(cuts)
        unknown = [c for c in self.cuts if c not in CUT_POINTS]
        if unknown or len(set(self.cuts)) < len(self.cuts):
            raise ValueError(f"cuts {self.cuts}: allowed distinct names of {CUT_POINTS}")
        if "increment" in self.cuts and "normalize" not in self.cuts:
            raise ValueError("the increment cut needs the normalize cut")

    def enable(self, m, i, o) -> Signal:
        """The pipeline-advance signal of a unit with input stream ``i`` and output stream
        ``o`` (whose register is the last stage): ``~o.valid | o.ready``, also ``i.ready``."""
        en = Signal(name="en")
        m.d.comb += [en.eq(~o.valid | o.ready), i.ready.eq(en)]
        return en

    def front(self, m, x, valid, en, error, *, floor=None, noise_en=None, inject=None,
              rand=None) -> Front:
        """Stage 1 for the block ``x`` (an array view of ``lanes`` input values), taken when
        ``valid & en``; registers advance with ``en``.

        ``error`` (the unit's sticky flag) is set by a taken block holding an Inf or NaN, one
        advance per cut after it is taken.  ``floor``: an exponent field that takes part
        in the shared exponent.  The noise of a lane is ``rand[j]`` when ``inject`` is high,
        else the lane's next LFSR draw; it is 0 when ``noise_en`` (default: always) is low, and
        the LFSRs step only for taken blocks with ``noise_en`` and without ``inject``.  With the
        ``tree`` cut, stage 1 is two register stages.
        """
        fmt, L, nb = self.fmt, self.lanes, self.noise_bits
        tree = "tree" in self.cuts
        take = valid & en
        v1 = Signal(name="v1")
        r1_es = Signal(fmt.exp_bits, name="r1_es")
        r1_e = [Signal(fmt.exp_bits, name=f"r1_e{j}") for j in range(L)]
        r1_sig = [Signal(fmt.man_bits + 1, name=f"r1_sig{j}") for j in range(L)]
        r1_s = Signal(L, name="r1_s")
        r1_r = [Signal(nb, name=f"r1_r{j}") for j in range(L)] if nb else []
        lanes = [decode(m, x[j], fmt, name=f"x{j}") for j in range(L)]
        # the compare-and-forward tree (every input valid: zeros carry exponent 0)
        one = Const(1, 1)
        items = [(one, e) for _, _, e, _ in lanes] + ([(one, floor)] if floor is not None else [])
        if tree:
            # the lower half of the tree's levels, registered with the lanes' fields
            size = 1 << ((len(items) - 1).bit_length() + 1) // 2
            parts = [tree_reduce(m, items[k:k + size], lambda a, b: a >= b, fmt.exp_bits,
                                 f"cf{k // size}")[1] for k in range(0, len(items), size)]
            parts = stage(m, parts, True, en=en, name="tree_es")
            items = [(one, p) for p in parts]
            lanes = [(None, *stage(m, {"sign": sign, "e": e, "sig": sig}, True, en=en,
                                   name=f"tree{j}").values())
                     for j, (_, sign, e, sig) in enumerate(lanes)]
            valid = stage(m, {"valid": valid}, True, en=en, name="tree")["valid"]
        _, es = tree_reduce(m, items, lambda a, b: a >= b, fmt.exp_bits, "cf")
        for j, (_, sign, e, sig) in enumerate(lanes):
            with m.If(en):
                m.d.sync += [r1_e[j].eq(e), r1_sig[j].eq(sig), r1_s[j].eq(sign)]
        if nb:
            step = take
            step = step if noise_en is None else step & noise_en
            step = step if inject is None else step & ~inject
            for j in range(L):
                lfsr = Signal(16, name=f"lfsr{j}", init=self.seeds[j])
                nxt = lfsr_steps(m, lfsr, nb, f"lfsr{j}")
                with m.If(step):
                    m.d.sync += lfsr.eq(nxt)
                noise = nxt[16 - nb:]
                noise = noise if inject is None else Mux(inject, rand[j], noise)
                noise = noise if noise_en is None else Mux(noise_en, noise, 0)
                noise = stage(m, {"r": noise}, tree, en=en, name=f"tree{j}")["r"]
                with m.If(en):
                    m.d.sync += r1_r[j].eq(noise)
        with m.If(en):
            m.d.sync += [v1.eq(valid), r1_es.eq(es)]
        bad = delay(m, take & Cat(*(x[j].exp == fmt.exp_max for j in range(L))).any(),
                    len(self.cuts), en=en, name="error")
        with m.If(en & bad if self.cuts else bad):
            m.d.sync += error.eq(1)
        return Front(v1, r1_es, r1_s, r1_e, r1_sig, r1_r)

    def mantissas(self, m, s1: Front, en) -> Mantissas:
        """Stage 2 from the registers ``s1``: per lane the rounded mantissa (two's complement
        when the rounding block's target is signed, else a magnitude), combinational from the
        last of the ``difference``, ``normalize`` and ``increment`` stages taken; registers
        advance with ``en``."""
        qcfg, nb, cuts = self.rounding, self.noise_bits, self.cuts
        tgt = qcfg.format
        width = qcfg.in_width - qcfg.signed       # magnitude bits of the rounding block's input
        diff = "difference" in cuts
        inner = ("normalize" in cuts) + ("increment" in cuts)
        rcfg = dataclasses.replace(qcfg, pipeline=inner) if inner else qcfg
        side = stage(m, {"valid": s1.valid, "es": s1.es, "sign": s1.sign}, diff, en=en,
                     name="difference")
        lane_sign = side["sign"]
        side = {k: delay(m, v, inner, en=en, name=f"round_{k}") for k, v in side.items()}

        def cut(j, key, value):
            """Lane ``j``'s ``value`` through the ``difference`` stage (when taken)."""
            return stage(m, {key: value}, diff, en=en, name=f"difference{j}")[key]

        out = []
        for j in range(self.lanes):
            rnd = Round(rcfg)
            m.submodules[f"round{j}"] = EnableInserter({"sync": en})(rnd) if inner else rnd
            exp = Signal(signed(qcfg.exp_width), name=f"qexp{j}")
            mag = s1.sig[j] << (width - len(s1.sig[j]))
            m.d.comb += [exp.eq(s1.exp[j] - s1.es + self.exp_offset),
                         rnd.i.exp.eq(cut(j, "exp", exp))]
            if qcfg.signed:
                sig = Signal(signed(qcfg.in_width), name=f"sig{j}")
                m.d.comb += [sig.eq(Mux(s1.sign[j], -mag, mag)),
                             rnd.i.sig.eq(cut(j, "sig", sig))]
            else:
                m.d.comb += [rnd.i.sig.eq(cut(j, "sig", mag)), rnd.i.sign.eq(lane_sign[j])]
            word = rnd.o.bits.as_signed() if tgt.signed else rnd.o.bits
            noise = cut(j, "r", s1.noise[j]) if nb else None
            if nb and qcfg.mode == "sr":
                m.d.comb += rnd.i.rand.eq(noise)
                result = word
            elif nb:
                noise = delay(m, noise, inner, en=en, name=f"round_r{j}")
                bits = tgt.bits - nb                # the mantissa's width
                shape = signed if tgt.signed else unsigned
                hi = (1 << (bits - tgt.signed)) - 1
                total = Signal(shape(tgt.bits + 1), name=f"sr{j}")
                shifted = Signal(shape(bits + 1), name=f"srq{j}")
                m.d.comb += [total.eq(word + noise), shifted.eq(total >> nb)]
                result = Mux(shifted > hi, hi, shifted)
            else:
                result = word
            out.append(result)
        return Mantissas(side["valid"], side["es"], side["sign"], out)


class BlockConverter(wiring.Component):
    """A block converter unit on a :class:`BFPPipeline` (FAST's converter, Equinox's
    quantizer): the configuration ``cfg`` and the ports below, the payloads of the unit's
    ``input_layout(cfg)`` (the block's values in ``x``) and ``output_layout(cfg)``.

    :meth:`elaborate` builds the unit's pipeline (:meth:`pipeline`) on the ports: the advance
    signal (:meth:`BFPPipeline.enable`, also ``i.ready``), stage 1 on ``i``
    (:meth:`BFPPipeline.front`, with the unit's noise inputs) setting ``error``, stage 2
    (:meth:`BFPPipeline.mantissas`), then the unit's own logic from stage 2 to ``o``'s
    registers (:meth:`output`).

    Ports
    -----
    i : In(stream of ``input_layout(cfg)``)
    o : Out(stream of ``output_layout(cfg)``)
    error : Out(1)
        Sticky: a block with an Inf or NaN value was accepted (its output is unspecified); set
        ``pipeline`` advances after the cycle after the block is taken.
    """

    def __init__(self, cfg, input_layout, output_layout):
        self.cfg = cfg
        super().__init__({"i": In(stream.Signature(input_layout(cfg))),
                          "o": Out(stream.Signature(output_layout(cfg))), "error": Out(1)})

    def pipeline(self) -> tuple:
        """The unit's :class:`BFPPipeline` and the keyword arguments of its
        :meth:`~BFPPipeline.front` besides the block (``floor``, ``noise_en``, ``inject``,
        ``rand``: fields of ``i.payload``)."""
        raise NotImplementedError

    def output(self, m, s2: Mantissas, en) -> None:
        """The unit's logic from stage 2's outputs ``s2`` to ``o.valid`` and ``o.payload``
        (registers advancing with ``en``; ``o``'s are the pipeline's last stage)."""
        raise NotImplementedError

    def elaborate(self, platform):
        m = Module()
        bfp, noise = self.pipeline()
        en = bfp.enable(m, self.i, self.o)
        s1 = bfp.front(m, self.i.payload.x, self.i.valid, en, self.error, **noise)
        self.output(m, bfp.mantissas(m, s1, en), en)
        return m


__all__ = ["BFPPipeline", "BlockConverter", "CUT_POINTS", "Front", "Mantissas"]

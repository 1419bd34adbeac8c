"""The extended-precision accumulator shared by the FPRaker PE and the bit-parallel bf16 PE.

Spec ``docs/specs/fpraker.md`` §1.2/§1.3/§3.3/§11.6 (Block 3, "Accumulation"); the golden counterpart
is :mod:`golden.common.accumulator`.  Both rounding steps are instances of the shared rounding
block (:class:`hdl.common.rounding.Round`) configured by the golden model's own
:func:`~golden.common.accumulator.norm_config` and
:func:`~golden.common.accumulator.read_out_config`.
"""

import dataclasses

from amaranth.hdl import Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from golden.common.accumulator import EXP_W, XW, norm_config, read_out_config

from .arith import jam_right, tree_reduce
from .pipeline import delay, stage
from .rounding import Round
from .signatures import AccumulatorSignature


def step_exponent(m, valid, weights, zero_in, acc_exp):
    """The step exponent of both PEs: ``E = max(weights[i] over valid lanes, acc_exp unless
    zero_in)``, 0 when there is neither (a max tree, spec §3.3 / §11.6)."""
    e_valid, e_max = tree_reduce(
        m, [(valid[i], w) for i, w in enumerate(weights)] + [(~zero_in, acc_exp.as_signed())],
        lambda a, b: a >= b, signed(XW), "emax")
    E = Signal(signed(XW), name="E")
    m.d.comb += E.eq(Mux(e_valid, e_max, 0))
    return E


class Accumulator(wiring.Component):
    """One accumulation step per cycle and the accumulator register (spec §1.2, §3.3).

    Combinationally: the register (treated as zero when ``clear``) is aligned to the
    ``2**(E - F)`` grid of the step exponent ``E`` (the "acc shift", round to odd below the
    grid), the partial sum ``addend`` (already on that grid) is added in
    ``frac_bits + int_bits + 1`` signed bits, and the sum is normalized back to ``1.P`` with RNE
    (:func:`golden.common.accumulator.norm_rne`).  With ``en`` the result is registered at the
    clock edge.  ``acc.out`` reads the register out to bfloat16 (``out_round``).

    With ``cuts`` the step is C-slow (``1 + len(cuts)`` interleaved accumulators, the
    bit-parallel PE's ``contexts``): registers cut the loop at the named points, in this
    order: ``exponent`` (``E`` and the register as the step reads it, before the acc shift),
    ``align`` (after the acc shift: the aligned register and ``E``), ``add`` (the
    normalizer's input), ``normalize`` and ``increment`` (the normalizer's own stages,
    :mod:`hdl.common.rounding`).  ``en`` and the register as the step read it travel beside the
    cuts: a step without ``en`` writes that value back, so every accumulator passes the loop
    once every ``1 + len(cuts)`` cycles.  ``addend`` is expected as many cycles after ``E``
    as ``exponent`` and ``align`` are taken (the caller cuts its own terms alike).  The
    register keeps its reset value until the cuts have filled (``len(cuts)`` cycles).
    ``wait`` more registers between the acc shift and the ``align`` cut hold the aligned
    register, ``E`` and the values beside them for a caller whose ``addend`` takes that many
    more cycles (the FPRaker PE's own cuts before its adder tree's result); the loop then holds
    ``1 + len(cuts) + wait`` accumulators.

    Parameters
    ----------
    cfg : PEConfig or BaselineConfig
        ``frac_bits`` (F), ``keep_bits`` (P), ``int_bits``, ``out_round``.
    cuts : tuple of str
        Register cuts inside the loop (above); empty: the one-cycle step.
    wait : int
        Registers after the acc shift, before the ``align`` cut (above); default 0.

    Ports
    -----
    en : In(1)
        Register this step's result.
    clear : In(1)
        This step starts from a zero accumulator (a new dot product).
    E : In(signed(12))
        The step exponent; at least the register's exponent when it is not zero.
    addend : In(signed(F + int_bits + 1))
        The partial sum on the ``2**(E - F)`` grid.
    zero_in : Out(1)
        The accumulator as this step sees it is zero (``acc.zero | clear``).
    acc : Out(AccumulatorSignature(keep_bits))
        The register and its read-out.
    """

    def __init__(self, cfg, cuts=(), wait: int = 0):
        unknown = set(cuts) - set(LOOP_CUTS)
        if unknown:
            raise ValueError(f"Accumulator cuts {sorted(unknown)}: the loop's cut points are "
                             f"{', '.join(LOOP_CUTS)}")
        if isinstance(wait, bool) or not isinstance(wait, int) or wait < 0:
            raise ValueError(f"Accumulator wait must be an integer >= 0, not {wait!r}")
        self.cfg = cfg
        self.cuts = tuple(c for c in LOOP_CUTS if c in cuts)
        self.wait = wait
        self.norm_cfg = norm_config(cfg)
        super().__init__({
            "en": In(1), "clear": In(1), "E": In(signed(XW)),
            "addend": In(signed(self.norm_cfg.in_width)),
            "zero_in": Out(1),
            "acc": Out(AccumulatorSignature(cfg.keep_bits)),
        })

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        acc = self.acc
        m.d.comb += self.zero_in.eq(acc.zero | self.clear)
        if self.cuts or self.wait:
            self._loop(m)
        else:
            aligned = self._align(m, self.E, self.zero_in, acc.sign, acc.exp, acc.sig)
            norm = m.submodules.norm = Round(self.norm_cfg)
            m.d.comb += [norm.i.sig.eq(aligned + self.addend), norm.i.exp.eq(self.E)]
            with m.If(self.en):
                m.d.sync += [acc.zero.eq(norm.o.zero), acc.sign.eq(norm.o.sign),
                             acc.exp.eq(norm.o.exp), acc.sig.eq(norm.o.sig)]

        readout = m.submodules.readout = Round(read_out_config(cfg))
        m.d.comb += [
            readout.i.sig.eq(acc.sig), readout.i.exp.eq(acc.exp), readout.i.sign.eq(acc.sign),
            acc.out.eq(readout.o.bits),
        ]
        return m

    def _align(self, m, E, zero_in, sign, exp, sig):
        """The register aligned to the step's ``2**(E - F)`` grid (0 when ``zero_in``)."""
        F, P = self.cfg.frac_bits, self.cfg.keep_bits
        width = self.norm_cfg.in_width
        # the acc shift: E >= eacc for a non-zero accumulator, so shifting the F-P zero-padded
        # significand right by E - eacc is exact up to F-P positions and jams beyond
        diff = Signal(signed(XW + 1))
        m.d.comb += diff.eq(E - exp)
        padded = Signal(width - 1)
        m.d.comb += padded.eq(sig << (F - P))
        mag = jam_right(m, padded, diff.as_unsigned(), name="acc_jam")
        aligned = Signal(signed(width))
        m.d.comb += aligned.eq(Mux(zero_in, 0, Mux(sign, -mag, mag)))
        return aligned

    def _loop(self, m):
        """The step with register cuts inside the loop (class docstring)."""
        acc, cuts = self.acc, self.cuts
        keep = {"en": self.en, "zero": acc.zero, "sign": acc.sign, "exp": acc.exp,
                "sig": acc.sig}
        r = stage(m, {"E": self.E, "zero_in": self.zero_in, **keep}, "exponent" in cuts,
                  name="acc_exponent")
        aligned = self._align(m, r["E"], r["zero_in"], r["sign"], r["exp"], r["sig"])
        r = {"aligned": aligned, "E": r["E"], **{k: r[k] for k in keep}}
        r = {k: delay(m, v, self.wait, name=f"acc_wait_{k}") for k, v in r.items()}
        r = stage(m, r, "align" in cuts, name="acc_align")
        r = stage(m, {"sum": r["aligned"] + self.addend, "E": r["E"],
                      **{k: r[k] for k in keep}}, "add" in cuts, name="acc_add")
        depth = sum(c in cuts for c in ("normalize", "increment"))
        norm = m.submodules.norm = Round(dataclasses.replace(self.norm_cfg, pipeline=depth))
        m.d.comb += [norm.i.sig.eq(r["sum"]), norm.i.exp.eq(r["E"])]
        old = {k: delay(m, r[k], depth, name=f"acc_keep_{k}") for k in keep}
        live = delay(m, Const(1), len(cuts) + self.wait, name="acc_live")
        with m.If(live):
            with m.If(old["en"]):
                m.d.sync += [acc.zero.eq(norm.o.zero), acc.sign.eq(norm.o.sign),
                             acc.exp.eq(norm.o.exp), acc.sig.eq(norm.o.sig)]
            with m.Else():
                m.d.sync += [acc.zero.eq(old["zero"]), acc.sign.eq(old["sign"]),
                             acc.exp.eq(old["exp"]), acc.sig.eq(old["sig"])]


#: the cut points of the accumulation loop, in loop order (:class:`Accumulator`'s ``cuts``)
LOOP_CUTS = ("exponent", "align", "add", "normalize", "increment")


__all__ = ["XW", "EXP_W", "LOOP_CUTS", "step_exponent", "Accumulator"]

"""The extended-precision accumulator shared by the FPRaker PE and the bit-parallel bf16 PE.

Spec ``docs/specs/fpraker.md`` §1.2/§1.3/§3.3/§11.6 (Block 3, "Accumulation"); the golden counterpart
is :mod:`golden.common.accumulator`.  Both rounding steps are instances of the shared rounding
block (:class:`hdl.common.rounding.Round`) configured by the golden model's own
:func:`~golden.common.accumulator.norm_config` and
:func:`~golden.common.accumulator.read_out_config`.
"""

from amaranth.hdl import Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from golden.common.accumulator import EXP_W, XW, norm_config, read_out_config

from .arith import jam_right, tree_reduce
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

    Parameters
    ----------
    cfg : PEConfig or BaselineConfig
        ``frac_bits`` (F), ``keep_bits`` (P), ``int_bits``, ``out_round``.

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

    def __init__(self, cfg):
        self.cfg = cfg
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
        F, P = cfg.frac_bits, cfg.keep_bits
        acc = self.acc
        width = self.norm_cfg.in_width
        m.d.comb += self.zero_in.eq(acc.zero | self.clear)

        # the acc shift: E >= eacc for a non-zero accumulator, so shifting the F-P zero-padded
        # significand right by E - eacc is exact up to F-P positions and jams beyond
        diff = Signal(signed(XW + 1))
        m.d.comb += diff.eq(self.E - acc.exp)
        padded = Signal(width - 1)
        m.d.comb += padded.eq(acc.sig << (F - P))
        mag = jam_right(m, padded, diff.as_unsigned(), name="acc_jam")
        aligned = Signal(signed(width))
        m.d.comb += aligned.eq(Mux(self.zero_in, 0, Mux(acc.sign, -mag, mag)))

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


__all__ = ["XW", "EXP_W", "step_exponent", "Accumulator"]

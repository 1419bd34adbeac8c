"""The extended-precision accumulator shared by the FPRaker PE and the bit-parallel bf16 PE.

Spec ``seed-fpraker.md`` §1.2/§1.3/§3.3/§11.6; the golden counterpart is
:mod:`golden.common.accumulator`.
"""

from amaranth.hdl import Cat, Const, Mux, Signal, signed

from . import msb_index
from .arith import jam_right

#: internal signed exponent width: unbiased product exponents are -252..254, term weights
#: -259..255, and k = E - w stays below 800 with a 10-bit accumulator exponent
XW = 12
#: accumulator exponent register width (spec §1.2 [C]: 10-bit signed)
EXP_W = 10


class Accumulator:
    """The accumulator step shared by the FPRaker and baseline PEs (spec §1.2, §3.3).

    :meth:`align` puts the accumulator (``zero, sign, exp, sig`` values) on the ``2**(E - F)``
    grid of the step exponent ``E`` as a signed integer; the PE adds its partial sum (already on
    that grid) and :meth:`normalize` rounds the sum back to ``1.P`` with RNE, returning the next
    ``(zero, sign, exp, sig)`` signals.  Combinational.
    """

    def __init__(self, frac_bits: int, keep_bits: int, int_bits: int):
        self.F, self.P, self.INT = frac_bits, keep_bits, int_bits
        #: magnitude width of the step sum
        self.MW = frac_bits + int_bits
        #: signed width of the step adder
        self.XWIDTH = self.MW + 1

    def align(self, m, zero, sign, exp, sig, E):
        """Accumulator on the ``2**(E - F)`` grid as a signed integer (the "acc shift")."""
        F, P = self.F, self.P
        diff = Signal(signed(XW + 1), name="acc_diff")   # E - eacc >= 0 for a non-zero acc
        m.d.comb += diff.eq(E - exp)
        left = Signal(self.MW, name="acc_left")
        m.d.comb += left.eq(sig << (F - P))
        # E >= eacc for a non-zero accumulator: shifting the F-P zero-padded significand right
        # by E - eacc is exact up to F-P positions and jams beyond, as RTO_or_shl of spec §3.3
        mag = jam_right(m, left, diff.as_unsigned(), name="acc_jam")
        ag = Signal(signed(self.XWIDTH), name="acc_aligned")
        m.d.comb += ag.eq(Mux(zero, 0, Mux(sign, -mag, mag)))
        return ag

    def normalize(self, m, x, E):
        """NORM_RNE(x, E) of spec §3.3 → ``(zero, sign, exp, sig)`` signals."""
        F, P, MW = self.F, self.P, self.MW
        neg = x < 0
        mag = Signal(MW, name="sum_mag")
        m.d.comb += mag.eq(Mux(neg, -x, x))
        n = msb_index(m, mag, name="sum_msb")
        # left-justify: the leading one moves to bit MW-1
        lshift = Signal(range(MW), name="sum_lshift")
        just = Signal(MW, name="sum_just")
        m.d.comb += [lshift.eq(MW - 1 - n), just.eq((mag << lshift)[:MW])]
        pre = just[MW - 1 - P:MW]                 # 1.P significand before rounding
        guard = just[MW - 2 - P] if MW - 2 - P >= 0 else Const(0)
        sticky = just[:MW - 2 - P].any() if MW - 2 - P > 0 else Const(0)
        rounded = Signal(P + 2, name="sum_rounded")
        m.d.comb += rounded.eq(pre + (guard & (sticky | pre[0])))
        carry = rounded[P + 1]
        zero = Signal(name="next_zero")
        sign = Signal(name="next_sign")
        exp = Signal(signed(EXP_W), name="next_exp")
        sig = Signal(P + 1, name="next_sig")
        m.d.comb += [
            zero.eq(mag == 0),
            sign.eq(neg),
            exp.eq(Mux(zero, 0, E + n - F + carry)),
            sig.eq(Mux(zero, 0, Mux(carry, rounded >> 1, rounded[:P + 1]))),
        ]
        return zero, sign, exp, sig


def bf16_read_out(m, zero, sign, exp, sig, keep_bits: int, out_round: str):
    """Accumulator → bfloat16 bits (spec §1.2 read-out, §1.3 overflow ±Inf / underflow ±0)."""
    P = keep_bits
    q = Signal(9, name="ro_sig")
    if P >= 7:
        drop = P - 7
        top = sig[drop:P + 1]
        if out_round == "rne" and drop > 0:
            guard = sig[drop - 1]
            sticky = sig[:drop - 1].any() if drop > 1 else Const(0)
            m.d.comb += q.eq(top + (guard & (sticky | top[0])))
        else:
            m.d.comb += q.eq(top)
    else:
        m.d.comb += q.eq(sig << (7 - P))
    carry = q[8]
    biased = Signal(signed(EXP_W + 2), name="ro_biased")
    m.d.comb += biased.eq(exp + 127 + carry)
    man = Mux(carry, q[1:8], q[:7])
    out = Signal(16, name="ro_bits")
    with m.If(zero | (biased <= 0)):
        m.d.comb += out.eq(Cat(Const(0, 15), sign & ~zero))
    with m.Elif(biased >= 255):
        m.d.comb += out.eq(Cat(Const(0, 7), Const(0xFF, 8), sign))
    with m.Else():
        m.d.comb += out.eq(Cat(man, biased[:8], sign))
    return out


def accumulator_ports(keep_bits: int) -> dict:
    """Signature members exposing an accumulator register and its bfloat16 read-out."""
    from amaranth.lib.wiring import Out

    return {"acc_zero": Out(1, init=1), "acc_sign": Out(1), "acc_exp": Out(signed(EXP_W)),
            "acc_sig": Out(keep_bits + 1), "out": Out(16)}


__all__ = ["XW", "EXP_W", "Accumulator", "accumulator_ports", "bf16_read_out"]

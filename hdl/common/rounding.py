"""The rounding block (registry unit ``common.round``): one parameterized normalize/round/convert
step, bit-exact with :func:`golden.common.rounding.round_raw`.

Every unit that rounds instantiates it: the PE accumulators normalize their step sums with it
(``e10m9``, RNE, wrapping exponent) and read out bfloat16 with it (a normalized ``1.P`` input,
RNE or truncation, ±Inf/FTZ); FP→BFP converters, FP adders and bfloat16 normalizers are further
configurations of the same component.  The semantics (modes, ranges, flags) are documented in
:mod:`golden.common.rounding`.

Structure (combinational)
-------------------------
Float targets: absolute value (two's complement inputs) → leading-one detector and a left
shift that justifies the leading one to the top bit (both skipped for ``normalized`` inputs) →
the top ``man_bits + 1`` bits are the significand, the bits below it the guard/sticky (or the
``rand_bits`` window for ``sr``) → increment → renormalize on carry → exponent
``exp + n - frac + carry`` → range: ±Inf/±max or FTZ (IEEE) or the exponent's low bits (wrap).

Integer targets: absolute value → barrel right shift by ``frac - exp`` with the shifted-out
bits OR-ed into a sticky (or a left shift for ``exp > frac``) → increment → clamp.

Pipeline stages (``cfg.pipeline``, 0..3; :data:`CUTS`)
--------------------------------------------------------
``pipeline = 0`` is the combinational block every unit instantiates.  Otherwise registers cut
the structure above at named points, and every output appears exactly ``pipeline`` clock
cycles after its input (a new input every cycle; no enable, no stall):

- ``normalize`` (depths 1, 2, 3): after the leading-one detector and the justifying left shift
  (floats), after the right/left shifts and the sticky (integers) — about half-way;
- ``increment`` (depths 2, 3): after the rounding increment, before the renormalize/exponent
  and range logic (floats) or the clamp (integers);
- ``magnitude`` (depth 3): after the absolute value of a two's complement input (for a
  magnitude input, an input register).

The side-band fields (sign, exponent, random value, zero flag) travel beside the datapath in
the same registers.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for

from golden.common.rounding import RoundConfig

from . import msb_index
from .pipeline import stage
from .signatures import RawSignature, RoundedSignature

#: cut points of each pipeline depth (see the module docstring)
CUTS = {0: (), 1: ("normalize",), 2: ("normalize", "increment"),
        3: ("magnitude", "normalize", "increment")}


def _range_shape(lo: int, hi: int, min_width: int = 1):
    """A signed shape holding ``lo..hi`` and at least ``min_width`` bits."""
    return signed(max(min_width, bits_for(lo, True), bits_for(hi, True)))


class Round(wiring.Component):
    """Round a raw number into a target format (see the module docstring).

    Latency: ``cfg.pipeline`` cycles (0: combinational; the stages are listed in the module
    docstring).  Throughput: one number per cycle.

    Parameters
    ----------
    cfg : golden.common.rounding.RoundConfig
        Target format, input widths and binary point, mode, random width, range handling.
        With ``normalized`` the block trusts that the input's top bit is set (or the input is
        zero); the golden model rejects other inputs, the hardware would misround them.

    Ports
    -----
    i : In(RawSignature(cfg))
        ``sig``, ``exp``, ``sign`` (magnitude inputs), ``rand`` (mode ``"sr"``).
    o : Out(RoundedSignature(cfg))
        ``zero``, ``sign``, ``exp`` (floats), ``sig``, ``bits``, ``inexact``, ``overflow``,
        ``underflow``.
    """

    def __init__(self, cfg: RoundConfig = RoundConfig()):
        self.cfg = cfg
        super().__init__({"i": In(RawSignature(cfg)), "o": Out(RoundedSignature(cfg))})

    def _increment(self, m, neg, lsb, window, below, rand):
        """The rounding increment from the bits under the LSB: ``window`` holds the first of
        them (one guard bit; ``rand_bits`` of them in mode sr) and ``below`` is the OR of the
        rest (ignored by sr, which drops them).  For ``rto`` the result is the bit OR-ed into
        the LSB."""
        cfg = self.cfg
        G = len(window)
        guard = window[G - 1]
        inexact = Signal(name="inexact_bits")
        inc = Signal(name="inc")
        m.d.comb += inexact.eq(window.any() | below)
        mode = cfg.mode
        if mode == "rne":
            m.d.comb += inc.eq(guard & (below | lsb))
        elif mode == "rna":
            m.d.comb += inc.eq(guard)
        elif mode == "rdn":
            m.d.comb += inc.eq(neg & inexact)
        elif mode == "rup":
            m.d.comb += inc.eq(~neg & inexact)
        elif mode == "rto":
            m.d.comb += inc.eq(inexact)
        elif mode == "sr":
            total = Signal(G + 1, name="sr_sum")
            m.d.comb += [total.eq(window + rand), inc.eq(total[G])]
        return inc, inexact

    @property
    def _window_bits(self) -> int:
        """Bits under the LSB that the increment looks at individually."""
        return self.cfg.rand_bits if self.cfg.mode == "sr" else 1

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        W = cfg.in_width
        neg = Signal()
        mag = Signal(W)
        if cfg.signed:
            m.d.comb += [neg.eq(self.i.sig < 0), mag.eq(Mux(neg, -self.i.sig, self.i.sig))]
        else:
            m.d.comb += [neg.eq(self.i.sign), mag.eq(self.i.sig)]
        cuts = CUTS[cfg.pipeline]
        side = {"neg": neg, "mag": mag, "exp": self.i.exp}
        if cfg.mode == "sr":
            side["rand"] = self.i.rand
        side = stage(m, side, "magnitude" in cuts, name="magnitude")
        if cfg.format.kind == "float":
            self._float(m, side, cuts)
        else:
            self._int(m, side, cuts)
        return m

    def _float(self, m, side, cuts):
        cfg, fmt = self.cfg, self.cfg.format
        W, P = cfg.in_width, cfg.format.man_bits
        neg, mag = side["neg"], side["mag"]
        zero_in = Signal()
        m.d.comb += zero_in.eq(mag == 0)
        if cfg.normalized:
            n, just = W - 1, mag
        else:
            n = msb_index(m, mag, name="lead")
            lshift = Signal(range(W), name="lshift")
            just = Signal(W, name="just")
            m.d.comb += [lshift.eq(W - 1 - n), just.eq((mag << lshift)[:W])]
        keep = {k: v for k, v in side.items() if k != "mag"}
        keep.update(zero_in=zero_in, just=just)
        if not isinstance(n, int):           # a normalized input's n is a constant
            keep["n"] = n
        side = stage(m, keep, "normalize" in cuts, name="normalize")
        neg, zero_in, just = side["neg"], side["zero_in"], side["just"]
        n = side.get("n", n)
        R = W - 1 - P                        # bits under the kept significand
        G = self._window_bits
        if R > 0:
            pre = just[R:]
            # the first G bits under the LSB (zero-padded when fewer exist), and the rest
            window = just[R - G:R] if R >= G else Cat(Const(0, G - R), just[:R])
            below = just[:R - G].any() if R > G else Const(0)
            inc, inexact = self._increment(m, neg, pre[0], window, below, side.get("rand"))
        else:
            pre = Cat(Const(0, -R), just) if R < 0 else just
            inc, inexact = Const(0), Const(0)
        rounded = Signal(P + 2, name="rounded")
        if cfg.mode == "rto":
            m.d.comb += rounded.eq(pre | inc)
        else:
            m.d.comb += rounded.eq(pre + inc)
        if "increment" in cuts:
            keep = {"neg": neg, "zero_in": zero_in, "exp": side["exp"], "rounded": rounded,
                    "inexact": inexact}
            if not isinstance(n, int):
                keep["n"] = n
            side = stage(m, keep, True, name="increment")
            neg, zero_in, rounded, inexact = (side["neg"], side["zero_in"], side["rounded"],
                                              side["inexact"])
            n = side.get("n", n)
        carry = rounded[P + 1]
        sig = Mux(carry, rounded[1:], rounded[:P + 1])

        # e = exp + n + carry - frac over every input: exact bounds, and at least exp_bits + 1
        # bits so that a wrapping exponent's low bits are taken from a sign-extended value
        lo, hi = cfg.exp_min - cfg.frac, cfg.exp_max + W - cfg.frac
        e = Signal(_range_shape(lo, hi, fmt.exp_bits + 1), name="exp_unbiased")
        m.d.comb += e.eq(side["exp"] + n + carry - cfg.frac)
        o = self.o
        m.d.comb += o.inexact.eq(inexact)
        if cfg.overflow == "wrap":
            m.d.comb += [
                o.zero.eq(zero_in),
                o.exp.eq(Mux(zero_in, 0, e[:fmt.exp_bits].as_signed())),
                o.sig.eq(Mux(zero_in, 0, sig)),
                o.bits.exp.eq(Mux(zero_in, 0, e[:fmt.exp_bits])),
            ]
        else:
            biased = Signal(_range_shape(lo + fmt.bias, hi + fmt.bias, fmt.exp_bits + 1),
                            name="exp_biased")
            over = Signal(name="over")
            under = Signal(name="under")
            m.d.comb += [
                biased.eq(e + fmt.bias),
                over.eq(~zero_in & (biased >= fmt.exp_max)),
                under.eq(~zero_in & (biased <= 0)),
                o.overflow.eq(over), o.underflow.eq(under),
                o.zero.eq(zero_in | under),
            ]
            sat = cfg.overflow == "saturate"
            with m.If(zero_in | under):
                m.d.comb += [o.exp.eq(0), o.sig.eq(0), o.bits.exp.eq(0)]
            with m.Elif(over):
                m.d.comb += [
                    o.exp.eq(fmt.emax if sat else fmt.emax + 1),
                    o.sig.eq((2 << P) - 1 if sat else 1 << P),
                    o.bits.exp.eq(fmt.exp_max - 1 if sat else fmt.exp_max),
                ]
            with m.Else():
                m.d.comb += [o.exp.eq(e), o.sig.eq(sig), o.bits.exp.eq(biased[:fmt.exp_bits])]
        m.d.comb += [o.sign.eq(neg), o.bits.sign.eq(neg), o.bits.man.eq(o.sig[:P])]

    def _int(self, m, side, cuts):
        cfg, fmt = self.cfg, self.cfg.format
        neg, mag = side["neg"], side["mag"]
        W, B = cfg.in_width, fmt.bits
        G = self._window_bits
        # s = frac - exp: right shift amount (left shift when negative)
        s = Signal(_range_shape(cfg.frac - cfg.exp_max, cfg.frac - cfg.exp_min), name="shift")
        m.d.comb += s.eq(cfg.frac - side["exp"])
        # right shifts: mag with G zero bits appended, shifted by min(s, W + G), sticky below
        wide = Cat(Const(0, G), mag)
        amt = Signal(range(W + G + 1), name="rshift")
        m.d.comb += amt.eq(Mux(s >= W + G, W + G, s[:len(amt)]))
        shifted = Signal(W + G, name="shifted")
        lost = Signal(W + G, name="lost_mask")
        m.d.comb += [
            shifted.eq(wide >> amt),
            lost.eq(~(Const((1 << (W + G)) - 1, W + G) << amt)[:W + G]),
        ]
        sticky = Signal(name="sticky")
        m.d.comb += sticky.eq((wide & lost).any())
        q_right = shifted[G:]
        # left shifts: exact while the leading one stays inside the format's B bits
        lsh = Signal(range(B + 1), name="lshift")
        m.d.comb += lsh.eq(Mux(-s >= B, B, (-s)[:len(lsh)]))
        left = Signal(W + B, name="left")
        m.d.comb += left.eq(mag << lsh)
        left_over = Signal(name="left_over")
        m.d.comb += left_over.eq((mag != 0) & ((-s > B) | (left[B:] != 0)))
        right = s >= 0
        if "normalize" in cuts:
            keep = {"neg": neg, "right": right, "shifted": shifted, "sticky": sticky,
                    "left": left, "left_over": left_over}
            if "rand" in side:
                keep["rand"] = side["rand"]
            side = stage(m, keep, True, name="normalize")
            neg, right, shifted, sticky, left, left_over = (
                side["neg"], side["right"], side["shifted"], side["sticky"], side["left"],
                side["left_over"])
            q_right = shifted[G:]
        window = Mux(right, shifted[:G], 0)
        inc, inexact = self._increment(m, neg, Mux(right, q_right[0], left[0]), window,
                                       Mux(right, sticky, 0), side.get("rand"))
        q0 = Signal(max(W, B) + 1, name="q0")
        m.d.comb += q0.eq(Mux(right, q_right, left[:B]))
        q = Signal(max(W, B) + 1, name="q")
        m.d.comb += q.eq(q0 | inc if cfg.mode == "rto" else q0 + inc)
        if "increment" in cuts:
            side = stage(m, {"neg": neg, "right": right, "left_over": left_over, "q": q,
                             "inexact": inexact}, True, name="increment")
            neg, right, left_over, q, inexact = (side["neg"], side["right"], side["left_over"],
                                                 side["q"], side["inexact"])
        limit = Signal(B + 1, name="limit")
        m.d.comb += limit.eq(Mux(neg, -fmt.min, fmt.max) if fmt.signed else fmt.max)
        over = Signal(name="over")
        m.d.comb += over.eq((~right & left_over) | (q > limit))
        mag_out = Signal(B + 1, name="mag_out")
        m.d.comb += mag_out.eq(Mux(over, limit, q))
        o = self.o
        m.d.comb += [
            o.zero.eq(mag_out == 0), o.sig.eq(mag_out), o.inexact.eq(inexact),
            o.overflow.eq(over),
        ]
        if fmt.signed:
            m.d.comb += [o.sign.eq(neg & (mag_out != 0)),
                         o.bits.eq(Mux(neg, -mag_out, mag_out)[:B])]
        else:
            m.d.comb += [o.sign.eq(neg), o.bits.eq(mag_out[:B])]


__all__ = ["Round"]

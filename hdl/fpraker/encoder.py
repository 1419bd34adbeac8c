"""FPRaker term encoder (spec ``docs/specs/fpraker.md`` §2.3).

Each lane holds the recoded digits of one A significand and hands them to the PE one term per
cycle, most significant first.  The digit recoder is the combinational NAF circuit of spec §2.2
(``x3 = 3n``; ``pos = (x3 & ~n) >> 1``; ``neg = (~x3 & n) >> 1``) or, in binary mode, the
significand bits themselves.
"""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from golden.fpraker import EncoderConfig

from ..common import leading_one
from ..common.signatures import TermStreamSignature

#: digit positions j = 0..8; bit j is the term at t = 7 - j
DIGITS = 9


def recode_digits(m, sig, encoding: str, name: str = ""):
    """The digit recoder of spec §2.2 on the 8-bit significand ``sig`` (hidden bit included):
    ``(digits, negs)``, 9-bit masks of the non-zero digits (bit ``j`` = the term at
    ``t = 7 - j``) and of the negative ones.  ``encoding`` ``"csd"``: the NAF circuit
    (``x3 = 3n``; ``pos = (x3 & ~n) >> 1``; ``neg = (~x3 & n) >> 1``); ``"binary"``: the
    significand's bits.  Combinational; ``name`` prefixes the signals' names."""
    digits = Signal(DIGITS, name=f"{name}digits")
    negs = Signal(DIGITS, name=f"{name}negs")
    if encoding == "csd":
        n = Signal(10, name=f"{name}n")     # zero-extended so that ~n has ones above bit 7
        x3 = Signal(10, name=f"{name}x3")
        m.d.comb += [
            n.eq(sig),
            x3.eq(n + (n << 1)),
            digits.eq((((x3 & ~n) | (~x3 & n)) >> 1)[:DIGITS]),
            negs.eq(((~x3 & n) >> 1)[:DIGITS]),
        ]
    else:
        m.d.comb += [digits.eq(sig), negs.eq(0)]
    return digits, negs


def present_term(m, rem, negm, name: str = "term") -> dict:
    """The term an encoder lane presents, from its state: ``rem`` (the digits not yet popped)
    and ``negm`` (their signs).  Returns the values ``valid`` (a term is present), ``tp``
    (``t + 1``, 4 bits), ``neg``, ``last`` (the lane's last term) and ``rest`` (``rem`` after
    popping it).  The current term is the leading digit: it is isolated instead of encoding an
    index and decoding it again for the pop; ``tp = 8 - j`` is then an OR over the one-hot
    lead.  Combinational; ``name`` names the leading-one detector."""
    lead, rest = leading_one(m, rem, name=name)
    return {
        "valid": rem.any(),
        "tp": Cat(*(Cat(*(lead[j] for j in range(DIGITS) if (8 - j) >> b & 1)).any()
                    for b in range(4))),
        "neg": (negm & lead).any(),
        "last": rem.any() & ~rest.any(),
        "rest": rest,
    }


class TermEncoderLane(wiring.Component):
    """One encoder lane: load a significand, then pop its terms MSB first.

    Latency: a load takes effect at the next clock edge; from then on the current term is
    presented combinationally every cycle until ``advance`` pops it or ``drop`` discards the
    rest.  Throughput: one term per cycle.

    Parameters
    ----------
    encoding : {"csd", "binary"}
        Canonical signed digit (NAF) or plain binary digits.

    Ports
    -----
    load : In(1)
        Load ``sig``/``zero`` at the next edge (wins over ``advance`` and ``drop``).
    sig : In(8)
        Significand with its hidden bit (128..255).
    zero : In(1)
        The operand is zero or denormal: load no terms.
    advance : In(1)
        Pop the current term.
    drop : In(1)
        Discard all remaining terms.
    valid : Out(1)
        A term is present.
    tp : Out(4)
        Position of the current term plus one, ``t + 1`` in 0..8 (weight ``2**-t``).
    neg : Out(1)
        The current term is negative.
    last : Out(1)
        The current term is the lane's last one.
    error : Out(1)
        Sticky: a non-zero load had its hidden bit (``sig[7]``) clear.  Cleared by reset.
    """

    def __init__(self, encoding: str = "csd"):
        if encoding not in ("csd", "binary"):
            raise ValueError(f"unknown encoding {encoding!r}: expected 'csd' or 'binary'")
        self.encoding = encoding
        super().__init__({
            "load": In(1), "sig": In(8), "zero": In(1), "advance": In(1), "drop": In(1),
            "valid": Out(1), "tp": Out(4), "neg": Out(1), "last": Out(1), "error": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        rem = Signal(DIGITS)    # digits not yet popped
        negm = Signal(DIGITS)   # sign of each digit (1 = negative)

        digits, negs = recode_digits(m, self.sig, self.encoding)

        term = present_term(m, rem, negm)
        m.d.comb += [self.valid.eq(term["valid"]), self.tp.eq(term["tp"]),
                     self.neg.eq(term["neg"]), self.last.eq(term["last"])]
        rest = term["rest"]

        with m.If(self.load):
            m.d.sync += [rem.eq(digits), negm.eq(negs)]
            with m.If(self.zero):
                m.d.sync += rem.eq(0)
            with m.Elif(~self.sig[7]):
                m.d.sync += self.error.eq(1)
        with m.Elif(self.drop):
            m.d.sync += rem.eq(0)
        with m.Elif(self.advance):
            m.d.sync += rem.eq(rest)
        return m


class TermEncoder(wiring.Component):
    """``cfg.lanes`` independent term-encoder lanes (spec §2.3).

    Per-lane strobes and flags are packed into ``lanes``-bit vectors (bit ``i`` = lane ``i``);
    per-lane multi-bit fields are arrays (``sig__0``, ``terms__tp__0``, ... in Verilog).  Timing
    is that of :class:`TermEncoderLane`.  ``error`` is the OR of the lanes' sticky errors.

    Parameters
    ----------
    cfg : golden.fpraker.EncoderConfig
        ``lanes`` and ``encoding``.

    Ports
    -----
    load, zero : In(lanes); sig : In(8) array
        Load lane ``i`` with ``sig[i]`` (no terms when ``zero[i]``) at the next edge.
    terms : Out(TermStreamSignature(lanes))
        The lanes' current terms (``valid``, ``tp``, ``neg``) and their ``advance``/``drop``
        strobes.
    error : Out(1)
    """

    def __init__(self, cfg: EncoderConfig = EncoderConfig()):
        self.cfg = cfg
        lanes = cfg.lanes
        super().__init__({
            "load": In(lanes), "sig": In(8).array(lanes), "zero": In(lanes),
            "terms": Out(TermStreamSignature(lanes)), "error": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        terms = self.terms
        errors = []
        for i in range(self.cfg.lanes):
            lane = m.submodules[f"lane{i}"] = TermEncoderLane(self.cfg.encoding)
            m.d.comb += [
                lane.load.eq(self.load[i]), lane.sig.eq(self.sig[i]), lane.zero.eq(self.zero[i]),
                lane.advance.eq(terms.advance[i]), lane.drop.eq(terms.drop[i]),
                terms.valid[i].eq(lane.valid), terms.tp[i].eq(lane.tp),
                terms.neg[i].eq(lane.neg), terms.last[i].eq(lane.last),
            ]
            errors.append(lane.error)
        m.d.comb += self.error.eq(Cat(*errors).any())
        return m


__all__ = ["recode_digits", "present_term", "TermEncoderLane", "TermEncoder"]

"""FPRaker term encoding (spec ``docs/specs/fpraker.md`` §2).

An 8-bit bfloat16 significand ``Sig = 128 + m`` (hidden bit included, value ``Sig/128``) is
rewritten as a short list of signed powers of two, the *terms*, which the PE processes one per
cycle, most significant first.  A term ``(t, sign)`` weighs ``sign * 2**(-t)`` relative to the
hidden bit, so ``Sig/128 == sum(sign * 2**(-t))``.

Encodings
---------
``"csd"`` (default, spec §2.2 [C]): canonical signed digit = non-adjacent form.  Digits are
computed with the combinational recoder ``x3 = 3n; pos = (x3 & ~n) >> 1; neg = (~x3 & n) >> 1``;
digit ``j`` (0..8) becomes the term ``t = 7 - j``, so ``t`` ranges over -1..7 (``t = -1`` is the
``2**+1`` carry-out term, which 85 of the 128 significands have).  At most 5 terms.

``"binary"``: the plain 1-bits of the significand, ``t`` in 0..7, all positive, up to 8 terms
(the encoding of the paper's Fig. 5 walk-through).
"""

from dataclasses import dataclass

import numpy as np

from .. import check_choice, check_int

ENCODINGS = ("csd", "binary")

#: width of the recoded digit vector: bit j of ``rem`` is the term at t = 7 - j
DIGITS = 9


@dataclass(frozen=True)
class EncoderConfig:
    """Configuration of the term encoder (spec §2.3).

    The defaults are the paper's: one encoder lane per PE lane, canonical recoding.
    """

    #: number of independent encoder lanes (one per PE lane; the paper has 8)
    lanes: int = 8
    #: term encoding: "csd" (canonical signed digit / NAF, the paper's) or "binary" (Fig. 5)
    encoding: str = "csd"

    def __post_init__(self):
        check_int(self, "lanes", 1, 64)
        check_choice(self, "encoding", ENCODINGS)


def _check_sig(sig) -> None:
    if isinstance(sig, bool) or not isinstance(sig, (int, np.integer)):
        raise ValueError(f"significand must be an integer, got {sig!r}")
    if not 128 <= int(sig) <= 255:
        raise ValueError(f"significand {sig!r} is outside 128..255 (8 bits, hidden bit set)")


def recode(sig: int, encoding: str = "csd") -> tuple[int, int]:
    """The encoder's load value: ``(rem, negm)``, 9-bit digit masks (spec §2.3).

    Bit ``j`` of ``rem`` is set when the significand has a non-zero digit at position ``j``
    (term ``t = 7 - j``); the same bit of ``negm`` is set when that digit is negative.
    """
    _check_sig(sig)
    n = int(sig)
    if encoding == "csd":
        x3 = 3 * n
        pos = ((x3 & ~n) >> 1) & 0x1FF
        neg = ((~x3 & n) >> 1) & 0x1FF
        return pos | neg, neg
    if encoding == "binary":
        return n, 0
    raise ValueError(f"unknown encoding {encoding!r}: expected one of {', '.join(ENCODINGS)}")


def encode_terms(sig: int, encoding: str = "csd") -> list[tuple[int, int]]:
    """The terms of an 8-bit significand, most significant first.

    Parameters
    ----------
    sig : int
        Significand with its hidden bit, 128..255.
    encoding : {"csd", "binary"}
        Term encoding (see the module docstring).

    Returns
    -------
    list of (t, sign)
        ``t`` in -1..7 (csd) or 0..7 (binary), increasing; ``sign`` is +1 or -1.  The weight of
        a term is ``sign * 2**(-t)`` relative to the hidden bit.

    Raises
    ------
    ValueError
        ``sig`` outside 128..255 or an unknown encoding.
    """
    rem, negm = recode(sig, encoding)
    terms = []
    for j in range(DIGITS - 1, -1, -1):
        if rem >> j & 1:
            terms.append((7 - j, -1 if negm >> j & 1 else +1))
    return terms


def term_counts(sigs, encoding: str = "csd") -> np.ndarray:
    """Number of terms of each significand in an integer array (vectorized; 0 for 0 = no terms).

    Entries equal to 0 stand for zero/denormal operands, which have no terms; every other entry
    must lie in 128..255.
    """
    n = np.asarray(sigs, dtype=np.int64)
    bad = (n != 0) & ((n < 128) | (n > 255))
    if bad.any():
        raise ValueError(f"significand {int(n[bad].flat[0])} is outside 128..255")
    if encoding == "csd":
        x3 = 3 * n
        digits = (((x3 & ~n) | (~x3 & n)) >> 1) & 0x1FF
    elif encoding == "binary":
        digits = n
    else:
        raise ValueError(f"unknown encoding {encoding!r}: expected one of {', '.join(ENCODINGS)}")
    return np.bitwise_count(digits.astype(np.uint64)).astype(np.int64)


__all__ = ["ENCODINGS", "EncoderConfig", "recode", "encode_terms", "term_counts"]

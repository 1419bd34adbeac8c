"""FPRaker base-delta compression (BDC) of off-chip bfloat16 tensors (spec
``docs/specs/fpraker.md`` §7).

Values leaving the chip are cut into groups of ``group`` consecutive values (the paper's
channel-wise groups of 32).  Each group keeps every value's sign and mantissa (8 bits) and
replaces the exponents by a base and narrow deltas.

Group code (§7 [C])
-------------------
For a group of ``n`` values ``v_0 .. v_{n-1}`` with exponent fields ``e_i``::

    base = e_0;  d_i = e_i - base                          (i = 1 .. n-1)
    w(d) = 0 if d == 0 else the least w >= 1 with -2**(w-1) <= d <= 2**(w-1) - 1
    delta = max_i w(d_i)                                   (0 for n = 1)
    delta <= 6: header = delta, each d_i stored in delta-bit two's complement
    delta >= 7: header = 7 (escape), each e_i stored raw in 8 bits

    header(3) | base(8) | sm_0(8) | sm_1(8) | x_1 | sm_2(8) | x_2 | ... | sm_{n-1}(8) | x_{n-1}

``sm_i`` is ``sign << 7 | mantissa`` of ``v_i`` and ``x_i`` the delta (``delta`` bits) or the
raw exponent (8 bits, escape), so a group holds ``3 + 8 + 8 n + (n - 1) delta_eff`` bits
(``delta_eff`` = 8 for the escape) against ``16 n`` uncompressed.  Zeros, subnormals, Inf and
NaN are not special: their exponent fields (0 or 255) are coded like any other, so every
``uint16`` pattern round-trips, and a zero among normal values usually forces the escape.

Stream layout (choices of this project)
---------------------------------------
* Every field is written LSB first; the groups of a tensor follow each other without padding,
  so a tensor is one bit string.  Bit ``k`` of the stream is bit ``k % 8`` of byte ``k // 8``
  (:attr:`BDCStream.data`), and bit ``k % word`` of word ``k // word`` in the RTL's
  ``word``-bit output words (:func:`to_words`): the bytes are the little-endian image of the
  words.  The final byte/word is padded with zeros.
* The last group of a tensor may hold fewer than ``group`` values (``n = count % group``); its
  layout is the same with fewer values.  The value count is side information: the decoder is
  told it (:func:`decode`'s ``count``, the RTL decoder's command), never reads it from the
  stream.
* Every header 0..7 is legal.  The encoder always writes the least ``delta``; a decoder reading
  a larger (non-minimal) ``delta`` decodes it as written.  A delta that then takes the exponent
  outside 0..255 makes the group malformed (``ValueError`` here, the sticky ``error`` of the
  RTL decoder).
"""

from dataclasses import dataclass

import numpy as np

from .. import check_int
from ..common import check_patterns, fields_equal

#: header bits of a group
HEADER_BITS = 3
#: the escape header: exponents stored raw
ESCAPE = 7
#: the largest delta width stored as a delta (wider deltas escape)
MAX_DELTA = 6
#: bits of a raw exponent (escape) and of a sign + mantissa field
EXP_BITS = 8
SM_BITS = 8
#: bits of the first chunk of a group: header, base, sm_0
HEAD_CHUNK = HEADER_BITS + EXP_BITS + SM_BITS

# w(d) for d = -255 .. 255 (index d + 255)
_D = np.arange(-255, 256)
_W = np.where(_D == 0, 0,
              np.array([int(d if d >= 0 else -d - 1).bit_length() + 1 for d in _D])).astype(np.int8)


@dataclass(frozen=True)
class BDCConfig:
    """Configuration of the BDC encoder/decoder pair (spec §7).

    The defaults are the paper's groups of 32 with 32-bit words off the encoder.
    """

    #: values per group (the paper blocks channel-wise in 32s); the last group of a tensor may
    #: be shorter
    group: int = 32
    #: bits per packed word of the RTL's output (encoder) / input (decoder) stream; at least a
    #: group's first chunk (19 bits), so that one word per cycle sustains one value per cycle
    word: int = 32

    def __post_init__(self):
        check_int(self, "group", 2, 64)
        check_int(self, "word", HEAD_CHUNK, 128)


def delta_width(d):
    """``w(d)``: the two's complement width of exponent differences ``d`` (0 for ``d == 0``).

    Works on a Python int (returns an int) or an integer array (returns an int64 array);
    ``d`` must lie in -255..255.
    """
    scalar = np.ndim(d) == 0
    a = np.asarray(d)
    if a.dtype.kind not in "iu":
        raise ValueError(f"exponent difference must be an integer, got {d!r}")
    a = a.astype(np.int64)
    bad = (a < -255) | (a > 255)
    if bad.any():
        raise ValueError(f"exponent difference {int(a[bad].flat[0])} is outside -255..255")
    w = _W[a + 255].astype(np.int64)
    return int(w) if scalar else w


def _check_values(values) -> np.ndarray:
    return check_patterns(values, np.uint16, "values", "uint16 bfloat16 bit patterns "
                          "(np.asarray(x, dtype=np.uint16))")


def _groups(values: np.ndarray, group: int):
    """Exponents as a (groups, group) int64 array, the tail padded with each group's base (so
    the padding has delta 0), the per-group value counts and the per-group headers."""
    n = values.size
    g = -(-n // group)
    e = np.zeros(g * group, dtype=np.int64)
    e[:n] = (values.astype(np.int64) >> 7) & 0xFF
    e = e.reshape(g, group)
    counts = np.full(g, group, dtype=np.int64)
    if n % group:
        counts[-1] = n % group
        e[-1, counts[-1]:] = e[-1, 0]
    base = e[:, :1]
    w = _W[e - base + 255]
    delta = w.max(axis=1, initial=0).astype(np.int64)
    header = np.where(delta > MAX_DELTA, ESCAPE, delta)
    return e, counts, header


def _eff(header):
    """Stored bits per exponent after the first: the delta width, or 8 for the escape."""
    return np.where(header == ESCAPE, EXP_BITS, header)


def _group_bits(counts, header):
    return HEADER_BITS + EXP_BITS + SM_BITS * counts + (counts - 1) * _eff(header)


def group_bits(values) -> int:
    """Stored bits of one group of 1..64 values: ``3 + 8 + 8 n + (n - 1) delta_eff``."""
    values = _check_values(values)
    if not 1 <= values.size <= 64:
        raise ValueError(f"a group holds 1..64 values, got {values.size}")
    _, counts, header = _groups(values, values.size)
    return int(_group_bits(counts, header)[0])


def group_header(values) -> int:
    """Header of one group of 1..64 values: the delta width 0..6, or 7 (escape)."""
    values = _check_values(values)
    if not 1 <= values.size <= 64:
        raise ValueError(f"a group holds 1..64 values, got {values.size}")
    return int(_groups(values, values.size)[2][0])


# --------------------------------------------------------------------------------------------
# footprint (statistics)


@dataclass(frozen=True)
class BDCFootprint:
    """Size of one BDC-compressed tensor (all counts in bits unless named otherwise).

    ``a + b`` is the footprint of the two tensors streamed as one (b's groups after a's); it
    equals ``footprint(concatenation)`` when ``a.count`` is a multiple of ``group``, so
    statistics can be gathered chunk by chunk.
    """

    #: values per group
    group: int
    #: values in the tensor
    count: int
    #: groups (the last one possibly partial)
    groups: int
    #: stream bits: the sum of the groups' bits, before padding to a byte or word
    bits: int
    #: of which exponent bits: header, base and the deltas or raw exponents
    exp_bits: int
    #: groups per header 0..6 (delta width) and 7 (escape), a length-8 int64 array
    header_hist: np.ndarray

    @property
    def raw_bits(self) -> int:
        """Uncompressed bits: 16 per value."""
        return 16 * self.count

    @property
    def bits_per_value(self) -> float:
        return self.bits / self.count if self.count else 0.0

    @property
    def ratio(self) -> float:
        """Compressed / bfloat16 size (< 1 is a saving)."""
        return self.bits / self.raw_bits if self.count else 0.0

    @property
    def escape_share(self) -> float:
        """Share of groups stored with the escape (raw exponents)."""
        return int(self.header_hist[ESCAPE]) / self.groups if self.groups else 0.0

    def __add__(self, other: "BDCFootprint") -> "BDCFootprint":
        if self.group != other.group:
            raise ValueError(f"cannot add footprints of groups of {self.group} and {other.group}")
        if self.count % self.group:
            raise ValueError(f"cannot append to a footprint of {self.count} values, not a whole "
                             f"number of groups of {self.group}")
        return BDCFootprint(group=self.group, count=self.count + other.count,
                            groups=self.groups + other.groups, bits=self.bits + other.bits,
                            exp_bits=self.exp_bits + other.exp_bits,
                            header_hist=self.header_hist + other.header_hist)

    def __eq__(self, other) -> bool:
        if not isinstance(other, BDCFootprint):
            return NotImplemented
        return fields_equal(self, other)

    __hash__ = None


def footprint(values, cfg: BDCConfig = BDCConfig()) -> BDCFootprint:
    """Footprint of ``encode(values, cfg)`` without building the stream (vectorized; about
    10**7 values per second)."""
    values = _check_values(values)
    _, counts, header = _groups(values, cfg.group)
    gbits = _group_bits(counts, header)
    bits = int(gbits.sum())
    return BDCFootprint(group=cfg.group, count=int(values.size), groups=int(counts.size),
                        bits=bits, exp_bits=bits - SM_BITS * int(values.size),
                        header_hist=np.bincount(header, minlength=8).astype(np.int64))


# --------------------------------------------------------------------------------------------
# stream


@dataclass(frozen=True, eq=False)
class BDCStream:
    """A compressed tensor: the bit string as bytes (LSB first) and its length in bits."""

    #: ``ceil(bits / 8)`` bytes; bit ``k`` of the stream is bit ``k % 8`` of byte ``k // 8``
    data: np.ndarray
    #: stream length in bits (the padding bits of the final byte are zero)
    bits: int

    def __eq__(self, other) -> bool:
        if not isinstance(other, BDCStream):
            return NotImplemented
        return self.bits == other.bits and np.array_equal(self.data, other.data)

    __hash__ = None


def _fields(values: np.ndarray, cfg: BDCConfig):
    """Every field of the stream in order: (value, width) int64 arrays."""
    n = values.size
    e, counts, header = _groups(values, cfg.group)
    g = counts.size
    v = values.astype(np.int64)
    sm = ((v >> 8) & 0x80) | (v & 0x7F)
    # per group: header, base, sm_0, then (sm_i, x_i) pairs; padding slots get width 0
    slots = 3 + 2 * (cfg.group - 1)
    val = np.zeros((g, slots), dtype=np.int64)
    wid = np.zeros((g, slots), dtype=np.int64)
    smp = np.zeros(g * cfg.group, dtype=np.int64)
    smp[:n] = sm
    smp = smp.reshape(g, cfg.group)
    eff = _eff(header)
    val[:, 0], wid[:, 0] = header, HEADER_BITS
    val[:, 1], wid[:, 1] = e[:, 0], EXP_BITS
    val[:, 2], wid[:, 2] = smp[:, 0], SM_BITS
    present = np.arange(1, cfg.group)[None, :] < counts[:, None]
    x = np.where(header[:, None] == ESCAPE, e[:, 1:],
                 (e[:, 1:] - e[:, :1]) & ((1 << eff[:, None]) - 1))
    val[:, 3::2], wid[:, 3::2] = smp[:, 1:], np.where(present, SM_BITS, 0)
    val[:, 4::2], wid[:, 4::2] = x, np.where(present, eff[:, None], 0)
    return val.reshape(-1), wid.reshape(-1)


def encode(values, cfg: BDCConfig = BDCConfig()) -> BDCStream:
    """Compress a 1-D ``uint16`` array of bfloat16 bit patterns (any length, any patterns).

    Returns
    -------
    BDCStream
        ``decode(stream, values.size, cfg)`` returns ``values`` bit for bit;
        ``stream.bits == footprint(values, cfg).bits``.
    """
    values = _check_values(values)
    val, wid = _fields(values, cfg)
    offs = np.concatenate(([0], np.cumsum(wid)))
    total = int(offs[-1])
    bits = np.zeros(total + 8, dtype=np.uint8)
    j = np.arange(8)
    keep = j[None, :] < wid[:, None]
    pos = (offs[:-1, None] + j[None, :])[keep]
    bits[pos] = ((val[:, None] >> j[None, :]) & 1)[keep]
    data = np.packbits(bits[:total], bitorder="little")
    return BDCStream(data=data, bits=total)


def decode(stream: BDCStream, count: int, cfg: BDCConfig = BDCConfig()) -> np.ndarray:
    """Expand a stream of ``count`` values back to ``uint16`` bit patterns.

    Reads only the stream, ``count`` and ``cfg.group``, as the hardware decoder does.  Raises
    ``ValueError`` when the stream ends inside a group, holds bits beyond the ``count`` values,
    has non-zero padding, or a delta takes an exponent outside 0..255.
    """
    if not isinstance(stream, BDCStream):
        raise ValueError(f"stream must be a BDCStream, got {type(stream).__name__}")
    if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < 0:
        raise ValueError(f"count must be a non-negative integer, got {count!r}")
    count = int(count)
    data = np.asarray(stream.data)
    if data.dtype != np.uint8 or data.ndim != 1:
        raise ValueError(f"stream data has dtype {data.dtype} shape {data.shape}; expected "
                         f"1-D uint8 bytes")
    if not isinstance(stream.bits, (int, np.integer)) or not 0 <= stream.bits <= 8 * data.size:
        raise ValueError(f"stream length {stream.bits!r} bits does not fit its {data.size} "
                         f"bytes")
    total = int(stream.bits)
    if -(-total // 8) != data.size:
        raise ValueError(f"stream of {total} bits has {data.size} bytes; expected "
                         f"{-(-total // 8)}")
    bits = np.unpackbits(data, bitorder="little").astype(np.int64)
    if bits[total:].any():
        raise ValueError(f"stream padding after bit {total} is not zero")
    # walk the headers (one Python step per group), then gather every field at once
    starts, headers, counts = [], [], []
    pos, left = 0, count
    while left:
        n = min(cfg.group, left)
        if pos + HEAD_CHUNK > total:
            raise ValueError(f"stream ends at bit {total} inside the header of group "
                             f"{len(starts)} (value {count - left} of {count})")
        h = int(bits[pos] | bits[pos + 1] << 1 | bits[pos + 2] << 2)
        eff = EXP_BITS if h == ESCAPE else h
        end = pos + HEAD_CHUNK + (n - 1) * (SM_BITS + eff)
        if end > total:
            raise ValueError(f"stream ends at bit {total} inside group {len(starts)} (values "
                             f"{count - left}..{count - left + n - 1} of {count}), which needs "
                             f"bits {pos}..{end - 1}")
        starts.append(pos)
        headers.append(h)
        counts.append(n)
        pos, left = end, left - n
    if pos != total:
        raise ValueError(f"stream holds {total} bits but its {count} values end at bit {pos}")
    out = np.zeros(count, dtype=np.int64)
    if not count:
        return out.astype(np.uint16)
    starts, headers, counts = (np.array(a, dtype=np.int64) for a in (starts, headers, counts))
    eff = _eff(headers)
    weights = 1 << np.arange(8)

    def read(at, width):
        j = np.arange(8)
        idx = np.minimum(at[:, None] + j[None, :], bits.size - 1)
        return (bits[idx] * weights * (j[None, :] < width[:, None])).sum(axis=1)

    gid = np.repeat(np.arange(starts.size), counts)
    k = np.arange(count) - np.repeat(np.cumsum(counts) - counts, counts)   # index in group
    first = k == 0
    base = read(starts + HEADER_BITS, np.full(starts.size, EXP_BITS))[gid]
    e_g = eff[gid]
    at_sm = np.where(first, starts[gid] + HEADER_BITS + EXP_BITS,
                     starts[gid] + HEAD_CHUNK + (k - 1) * (SM_BITS + e_g))
    sm = read(at_sm, np.full(count, SM_BITS))
    x = read(at_sm + SM_BITS, np.where(first, 0, e_g))
    esc = headers[gid] == ESCAPE
    sext = np.where((e_g > 0) & ((x >> np.maximum(e_g - 1, 0)) & 1 == 1), x - (1 << e_g), x)
    e = np.where(first, base, np.where(esc, x, base + sext))
    bad = (e < 0) | (e > 255)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"value {i}: header {int(headers[gid[i]])} delta {int(sext[i])} from "
                         f"base {int(base[i])} gives exponent {int(e[i])}, outside 0..255")
    out = ((sm >> 7) << 15) | (e << 7) | (sm & 0x7F)
    return out.astype(np.uint16)


def to_words(stream: BDCStream, cfg: BDCConfig = BDCConfig()) -> list[int]:
    """The stream cut into ``cfg.word``-bit words (bit ``k`` at bit ``k % word`` of word
    ``k // word``; the last word zero-padded), as the RTL encoder emits them."""
    value = int.from_bytes(np.asarray(stream.data, dtype=np.uint8).tobytes(), "little")
    n = -(-stream.bits // cfg.word)
    mask = (1 << cfg.word) - 1
    return [(value >> (q * cfg.word)) & mask for q in range(n)]


def from_words(words, bits: int, cfg: BDCConfig = BDCConfig()) -> BDCStream:
    """The stream of ``bits`` bits held in ``words`` (the inverse of :func:`to_words`)."""
    words = [int(w) for w in words]
    if any(not 0 <= w < 1 << cfg.word for w in words):
        raise ValueError(f"a word does not fit {cfg.word} bits")
    if bits > cfg.word * len(words) or bits < 0:
        raise ValueError(f"{len(words)} words of {cfg.word} bits cannot hold {bits} bits")
    value = sum(w << (q * cfg.word) for q, w in enumerate(words))
    if value >> bits:
        raise ValueError(f"the words hold set bits after bit {bits} (non-zero padding)")
    data = np.frombuffer(value.to_bytes(-(-bits // 8), "little"), dtype=np.uint8).copy()
    return BDCStream(data=data, bits=bits)


__all__ = ["BDCConfig", "BDCFootprint", "BDCStream", "ESCAPE", "MAX_DELTA", "HEAD_CHUNK",
           "delta_width", "group_bits", "group_header", "footprint", "encode", "decode",
           "to_words", "from_words"]

"""Gecko lossless exponent compression (spec ``docs/specs/gecko.md`` §4, §5.2–§5.5).

A tensor of FP32 (``uint32``) or bfloat16 (``uint16``) bit patterns is cut into rows of
``lanes`` consecutive values (the paper's groups of 8).  Each value becomes a variable-length
*field*; every row's fields have one width, so the lanes fill their words in lockstep.

Exponent code (§4.3, choices A1–A3)
-----------------------------------
The paper subtracts the fixed bias 127 and stores ``|E - 127|`` with a per-row width found by
OR + leading-one detection; it does not say where the sign of ``E - 127`` goes nor how zeros
(``E = 0``) are stored.  The canonical code used here is lossless::

    E == 0         -> (DS, MAG) = (1, 0)          zero / subnormal marker
    1 <= E <= 126  -> (DS, MAG) = (1, 127 - E)
    127 <= E <= 254-> (DS, MAG) = (0, E - 127)
    E == 255       -> unsupported (ValueError)

and the row width is ``w = bit_length(OR of the row's MAG)`` in 0..7 (3 bits of metadata).
Because ``MAG`` of a zero is 0, ``w`` equals the paper's literal width (§4.6, zeros excluded),
so the paper-style cost is simply the exact cost without the DS bits.

Field and stream layout (§4.4, §4.5, choices A5–A10)
----------------------------------------------------
Field, MSB first: ``[S if sign_en | DS | MAG[w-1:0] | M top man_width bits]``, width
``W = sign_en + 1 + w + man_width`` <= the lane word (32 FP32, 16 bf16).  Each lane's fields are
concatenated MSB-first and cut into lane words; output row ``q`` holds word ``q`` of every lane.
The last partial word is zero-padded; a partial last row is padded with +0.0; the element count
is side information.  Metadata packs ten 3-bit widths per 32-bit word, MSB first (bits [31:29]
first, bits [1:0] zero).

Choices the paper leaves open
-----------------------------
* ``man_width=None`` (the default) means the format's full mantissa (23 or 7 bits): Gecko by
  itself is lossless (§III-C); a QM/BitWave width is given explicitly.
* Fixed-width mode (``fixed_width`` set, §4.7): the width is side information like
  ``man_width``, so no metadata stream is produced (``meta`` is empty, 0 metadata bits).  A
  ``MAG >= 2**fixed_width`` is a ``ValueError`` (the RTL raises a sticky error instead).
* ``Footprint.raw_bits`` (the ratio's denominator) is ``rows x lanes x lane width``: §4.5 writes
  ``rows x 8 x 32`` for the paper's FP32 hardware; for bf16 the tensor is deliberately measured
  against its own 16-bit words, so ``ratio`` is the saving over the format actually stored.
* ``exp_decode`` accepts every 7-bit MAG: the non-canonical ``(1, 127)`` decodes to ``E = 0``
  by the same formula, as the decompressor's ``127 - MAG`` does.

Cycle models
------------
:func:`compressor_cycles` and :func:`decompressor_cycles` are the timing contract of the
hardware units at every ``pipeline`` depth: from which inputs are offered and which outputs are
ready in each clock cycle, the units' ready outputs and the words or rows on their outputs in
that cycle (the contents are those of :func:`compress` and :func:`decompress`).
"""

from dataclasses import dataclass

import numpy as np

from .. import check_bool, check_choice, check_int, runtime
from ..common import FORMATS, FloatFormat, check_patterns, fields, fields_equal, pack

#: the source formats Gecko codes (8-bit exponents, bias 127)
SOURCE_FORMATS = ("fp32", "bf16")

#: the fixed exponent bias Gecko subtracts (the paper: "127 ... provides the best compression")
BIAS = 127
#: metadata bits per row (the paper's 3-bit width)
META_BITS = 3
#: metadata codes per 32-bit metadata word (§4.5, A8)
META_PER_WORD = 10
#: width of a metadata word
META_WORD = 32
#: most register stages of the compressor and decompressor (:class:`GeckoConfig`.pipeline)
GECKO_MAX_PIPELINE = 2

# bit_length of 0..127 (the leading-one detector over a 7-bit OR), as a lookup table
_BITLEN = np.array([int(v).bit_length() for v in range(128)], dtype=np.int64)


@dataclass(frozen=True)
class GeckoConfig:
    """Configuration of a Gecko compressor/decompressor pair (spec §4, §5.6).

    The defaults are the paper's hardware: 8 lanes of FP32, sign stored, width detector on.
    ``man_width``, ``sign_en`` and ``fixed_width`` are per-tensor side-band values; the RTL takes
    them as run-time inputs and uses these fields only as the testbench's default values.
    ``pipeline`` changes only when results leave the units (their cycle models
    :func:`compressor_cycles` and :func:`decompressor_cycles`), never the streams.
    """

    #: values per row = lanes of the packer/unpacker array (the paper groups 8 values)
    lanes: int = 8
    #: source format: "fp32" (32-bit lane words, 23-bit mantissa) or "bf16" (16-bit, 7-bit)
    fmt: str = "fp32"
    #: mantissa bits kept (eq. 5): 0..23 FP32, 0..7 bf16; None = full mantissa (lossless); a
    #: run-time input of the RTL
    man_width: int | None = runtime(None)
    #: store the sign bit; False only for non-negative tensors (A5); a run-time input
    sign_en: bool = runtime(True)
    #: None = Gecko (per-row width from the detector); 0..7 = fixed exponent width (§4.7, A29);
    #: a run-time input
    fixed_width: int | None = runtime(None)
    #: register stages added to the compressor and the decompressor, 0..2 (0: the paper's
    #: circuits); the streams are unchanged, each word or row leaves pipeline cycles later
    pipeline: int = 0

    def __post_init__(self):
        check_int(self, "lanes", 1, 64)
        check_choice(self, "fmt", SOURCE_FORMATS)
        m = FORMATS[self.fmt].man_bits
        if self.man_width is None:
            object.__setattr__(self, "man_width", m)
        check_int(self, "man_width", 0, m)
        check_bool(self, "sign_en")
        if self.fixed_width is not None:
            check_int(self, "fixed_width", 0, 7)
        check_int(self, "pipeline", 0, GECKO_MAX_PIPELINE)

    @property
    def format(self) -> FloatFormat:
        """The :class:`~golden.common.FloatFormat` of the source values."""
        return FORMATS[self.fmt]

    @property
    def lane_width(self) -> int:
        """Bits per lane word (16 or 32)."""
        return self.format.width


# --------------------------------------------------------------------------------------------
# exponent code


def exp_code(E):
    """Canonical Gecko code ``(DS, MAG)`` of biased exponents ``E`` (§4.3, A1–A3).

    Works on a Python int (returns ints) or an integer array (returns two int64 arrays).
    Raises ``ValueError`` for ``E == 255`` (Inf/NaN, A3) or ``E`` outside 0..255.
    """
    scalar = np.ndim(E) == 0
    e = np.asarray(E)
    if e.dtype.kind not in "iu":
        raise ValueError(f"exponent must be an integer, got {E!r}")
    e = e.astype(np.int64)
    bad = (e < 0) | (e > 254)
    if bad.any():
        v = int(e[bad].flat[0])
        why = "Inf/NaN exponent 255 is not supported by Gecko" if v == 255 else "outside 0..254"
        raise ValueError(f"exponent {v}: {why}")
    ds, mag = _code(e)
    if scalar:
        return int(ds), int(mag)
    return ds, mag


def _code(e):
    """(DS, MAG) of int64 exponents already checked to lie in 0..254."""
    ds = (e < BIAS).astype(np.int64)
    mag = np.where(e == 0, 0, np.abs(e - BIAS))
    return ds, mag


def exp_decode(ds, mag):
    """Biased exponent from a Gecko code: ``0`` for (1, 0), else ``127 -/+ MAG`` (§4.3).

    Accepts ints or integer arrays; ``DS`` must be 0/1 and ``MAG`` 0..127.
    """
    scalar = np.ndim(ds) == 0 and np.ndim(mag) == 0
    d = np.asarray(ds)
    m = np.asarray(mag)
    for name, v in (("DS", d), ("MAG", m)):
        if v.dtype.kind not in "iu":
            raise ValueError(f"{name} must be an integer, got {v!r}")
    d = d.astype(np.int64)
    m = m.astype(np.int64)
    if ((d < 0) | (d > 1)).any():
        raise ValueError(f"DS {int(d[(d < 0) | (d > 1)].flat[0])} is not 0 or 1")
    if ((m < 0) | (m > 127)).any():
        raise ValueError(f"MAG {int(m[(m < 0) | (m > 127)].flat[0])} is outside 0..127")
    e = _decode(d, m)
    return int(e) if scalar else e


def _decode(d, m):
    return np.where(d == 1, np.where(m == 0, 0, BIAS - m), BIAS + m)


# --------------------------------------------------------------------------------------------
# shared front end: validation, row codes and widths (one implementation for compress and stats)


def _check_bits(bits, cfg: GeckoConfig) -> np.ndarray:
    return check_patterns(bits, cfg.format.dtype, "bits",
                          f"{np.dtype(cfg.format.dtype).name} (fmt={cfg.fmt!r})")


def _rows(bits: np.ndarray, cfg: GeckoConfig):
    """Checked per-value fields ``(S, E, M)`` as int64 arrays of shape (rows, lanes).

    The last row is padded with +0.0 (A9).  Raises ``ValueError`` on E = 255 and, with
    ``sign_en`` off, on a set sign bit.
    """
    fmt = cfg.format
    bits = _check_bits(bits, cfg)
    n = bits.size
    rows = -(-n // cfg.lanes)
    padded = np.zeros(rows * cfg.lanes, dtype=np.int64)
    padded[:n] = bits
    s, e, m = fields(padded, fmt)
    if (e == fmt.exp_max).any():
        i = int(np.flatnonzero(e == fmt.exp_max)[0])
        raise ValueError(f"element {i} = {int(bits[i]):#x} is Inf/NaN (exponent 255), "
                         f"which Gecko does not support")
    if not cfg.sign_en and s.any():
        i = int(np.flatnonzero(s)[0])
        raise ValueError(f"element {i} = {int(bits[i]):#x} is negative but sign_en is False")
    shape = (rows, cfg.lanes)
    return s.reshape(shape), e.reshape(shape), m.reshape(shape)


def _widths(mag: np.ndarray, cfg: GeckoConfig) -> np.ndarray:
    """Per-row exponent width: OR + leading-one detector, or the fixed width (§4.3, §4.7)."""
    if cfg.fixed_width is not None:
        over = mag >= (1 << cfg.fixed_width)
        if over.any():
            r, j = (int(v[0]) for v in np.nonzero(over))
            raise ValueError(f"element {r * cfg.lanes + j}: exponent magnitude "
                             f"{int(mag[r, j])} does not fit fixed_width={cfg.fixed_width}")
        return np.full(mag.shape[0], cfg.fixed_width, dtype=np.int64)
    orr = np.bitwise_or.reduce(mag, axis=1) if mag.shape[0] else np.zeros(0, np.int64)
    return _BITLEN[orr]


def _field_widths(widths: np.ndarray, cfg: GeckoConfig) -> np.ndarray:
    """Field width W per row (§4.4)."""
    return int(cfg.sign_en) + 1 + widths + cfg.man_width


# --------------------------------------------------------------------------------------------
# footprint accounting


@dataclass(frozen=True)
class Footprint:
    """Size of one compressed tensor (§4.5 exact bits, §4.6 paper-style cost).

    All counts are bits unless named otherwise.  ``a + b`` is the footprint of the two tensors
    streamed as one (b's rows after a's, the lane words and metadata packed continuously); it
    equals ``footprint(concatenation)`` whenever ``a.count`` is a multiple of ``lanes``, so
    statistics can be gathered chunk by chunk.
    """

    #: values per row
    lanes: int
    #: bits per lane word
    lane_width: int
    #: values in the tensor (before tail padding)
    count: int
    #: rows of ``lanes`` values (tail padded)
    rows: int
    #: field bits per lane, sum of W over the rows (before word padding)
    field_bits: int
    #: uncompressed bits of the padded rows: rows * lanes * lane width.  This is the §4.5
    #: compression-ratio denominator, which the spec writes for FP32 as rows * 8 * 32; the
    #: lane width is used deliberately, so a bf16 tensor is measured against its own 16-bit
    #: words (rows * lanes * 16) and ``ratio`` compares it with bf16, not with FP32.
    #: Divide ``total_bits`` by ``rows * lanes * 32`` for the reduction versus FP32.
    raw_bits: int
    #: data bits actually stored: lanes * lane width * words per lane
    data_bits: int
    #: metadata bits stored: 32 per metadata word (0 in fixed-width mode)
    meta_bits: int
    #: exact exponent cost: per row 3 metadata bits (Gecko mode) + lanes * (1 + w)
    exp_bits_exact: int
    #: paper-style cost (§4.6): per row 3 + lanes * w_lit (fixed mode: lanes * w, A29)
    exp_bits_lit: int
    #: rows with each exponent width 0..7 (length-8 int64 array)
    width_hist: np.ndarray

    @property
    def total_bits(self) -> int:
        """Data plus metadata bits."""
        return self.data_bits + self.meta_bits

    @property
    def ratio(self) -> float:
        """Compressed / uncompressed size (Table IV sense; < 1 is a saving), relative to the
        source format (``raw_bits``: 16-bit words for bf16, see there)."""
        return self.total_bits / self.raw_bits if self.raw_bits else 0.0

    def __add__(self, other: "Footprint") -> "Footprint":
        if (self.lanes, self.lane_width) != (other.lanes, other.lane_width):
            raise ValueError(f"cannot add footprints of {self.lanes}x{self.lane_width}-bit and "
                             f"{other.lanes}x{other.lane_width}-bit lanes")
        kw = {name: getattr(self, name) + getattr(other, name)
              for name in self.__dataclass_fields__}
        kw["lanes"], kw["lane_width"] = self.lanes, self.lane_width
        lw = self.lane_width
        kw["data_bits"] = self.lanes * lw * -(-kw["field_bits"] // lw)
        has_meta = self.meta_bits or other.meta_bits
        kw["meta_bits"] = META_WORD * -(-kw["rows"] // META_PER_WORD) if has_meta else 0
        return Footprint(**kw)

    def __eq__(self, other) -> bool:
        if not isinstance(other, Footprint):
            return NotImplemented
        return fields_equal(self, other)

    __hash__ = None


def _exp_costs(widths: np.ndarray, cfg: GeckoConfig) -> tuple[int, int]:
    rows = widths.size
    wsum = int(widths.sum())
    if cfg.fixed_width is not None:
        return cfg.lanes * (rows + wsum), cfg.lanes * wsum
    return META_BITS * rows + cfg.lanes * (rows + wsum), META_BITS * rows + cfg.lanes * wsum


def _words(field_bits_per_lane: int, cfg: GeckoConfig) -> int:
    return -(-field_bits_per_lane // cfg.lane_width)


def _meta_words(rows: int, cfg: GeckoConfig) -> int:
    return 0 if cfg.fixed_width is not None else -(-rows // META_PER_WORD)


def footprint(bits, cfg: GeckoConfig) -> Footprint:
    """Footprint of ``compress(bits, cfg)`` without building the stream (vectorized).

    Shares validation and width detection with :func:`compress`; equal to
    ``compress(bits, cfg).footprint()``.
    """
    _, e, _ = _rows(bits, cfg)
    widths = _widths(_code(e)[1], cfg)
    exact, lit = _exp_costs(widths, cfg)
    rows = widths.size
    field_bits = int(_field_widths(widths, cfg).sum())
    return Footprint(
        lanes=cfg.lanes, lane_width=cfg.lane_width, count=int(bits.size), rows=rows,
        field_bits=field_bits, raw_bits=rows * cfg.lanes * cfg.lane_width,
        data_bits=cfg.lanes * cfg.lane_width * _words(field_bits, cfg),
        meta_bits=META_WORD * _meta_words(rows, cfg), exp_bits_exact=exact,
        exp_bits_lit=lit, width_hist=np.bincount(widths, minlength=8).astype(np.int64))


# --------------------------------------------------------------------------------------------
# stream


@dataclass(frozen=True, eq=False)
class GeckoStream:
    """A compressed tensor: data words, metadata words and the side-band values."""

    #: lane words, shape (n_words, lanes): row q holds word q of every lane (§4.5)
    data: np.ndarray
    #: packed metadata words (uint32), ten 3-bit widths each, MSB first; empty in fixed mode
    meta: np.ndarray
    #: exponent width of every input row (int64, shape (rows,))
    widths: np.ndarray
    #: number of values in the tensor (side information)
    count: int
    #: configuration used (man_width, sign_en, fixed_width are side information)
    cfg: GeckoConfig

    def footprint(self) -> Footprint:
        """Accounting from the stream as stored (words and metadata actually produced)."""
        exact, lit = _exp_costs(self.widths, self.cfg)
        rows = self.widths.size
        return Footprint(
            lanes=self.cfg.lanes, lane_width=self.cfg.lane_width, count=self.count, rows=rows,
            field_bits=int(_field_widths(self.widths, self.cfg).sum()),
            raw_bits=rows * self.cfg.lanes * self.cfg.lane_width,
            data_bits=self.data.size * self.cfg.lane_width, meta_bits=self.meta.size * META_WORD,
            exp_bits_exact=exact, exp_bits_lit=lit,
            width_hist=np.bincount(self.widths, minlength=8).astype(np.int64))


def pack_meta(widths) -> np.ndarray:
    """Pack 3-bit codes ten per 32-bit word, MSB first, zero padded (§4.5, A8)."""
    w = np.asarray(widths, dtype=np.uint32)
    if w.size and (w.max() > 7):
        raise ValueError(f"metadata code {int(w.max())} does not fit 3 bits")
    n_words = -(-w.size // META_PER_WORD)
    codes = np.zeros(n_words * META_PER_WORD, dtype=np.uint32)
    codes[:w.size] = w
    shifts = (META_WORD - META_BITS * (1 + np.arange(META_PER_WORD))).astype(np.uint32)
    return np.bitwise_or.reduce(codes.reshape(n_words, META_PER_WORD) << shifts, axis=1,
                                initial=0).astype(np.uint32)


def unpack_meta(meta, rows: int) -> np.ndarray:
    """First ``rows`` 3-bit codes of a packed metadata stream (inverse of :func:`pack_meta`)."""
    meta = np.asarray(meta, dtype=np.uint32)
    if meta.size * META_PER_WORD < rows:
        raise ValueError(f"{meta.size} metadata words hold fewer than {rows} row widths")
    shifts = (META_WORD - META_BITS * (1 + np.arange(META_PER_WORD))).astype(np.uint32)
    codes = (meta[:, None] >> shifts) & 7
    return codes.reshape(-1)[:rows].astype(np.int64)


def compress(bits, cfg: GeckoConfig = GeckoConfig()) -> GeckoStream:
    """Compress a 1-D array of bit patterns (``uint32`` FP32 / ``uint16`` bf16) into a stream.

    Parameters
    ----------
    bits : numpy.ndarray
        Values in streaming order; any length.  Inf/NaN (E = 255) and, with ``sign_en`` off,
        negative values (including -0.0) raise ``ValueError``.
    cfg : GeckoConfig

    Returns
    -------
    GeckoStream
        ``decompress`` of it returns ``truncate_mantissa(bits, cfg.man_width)``.
    """
    fmt = cfg.format
    lw = cfg.lane_width
    s, e, m = _rows(bits, cfg)
    ds, mag = _code(e)
    widths = _widths(mag, cfg)
    W = _field_widths(widths, cfg)
    n = cfg.man_width
    f = (ds << widths[:, None]) | mag
    if cfg.sign_en:
        f = f | (s << (widths[:, None] + 1))
    f = (f << n) | (m >> (fmt.man_bits - n))
    # Field r starts at bit offset o_r of every lane's stream: place it in the 2-word window
    # (word k, word k+1) that it can straddle, then OR the halves into their words.
    offs = np.concatenate(([0], np.cumsum(W)))
    n_words = _words(int(offs[-1]), cfg)
    k = offs[:-1] // lw
    p = offs[:-1] % lw
    win = f.astype(np.uint64) << (2 * lw - p - W)[:, None].astype(np.uint64)
    hi = win >> np.uint64(lw)
    lo = win & np.uint64((1 << lw) - 1)
    data = np.zeros((n_words + 1, cfg.lanes), dtype=np.uint64)
    if k.size:
        starts = np.flatnonzero(np.diff(k, prepend=-1))
        data[k[starts]] |= np.bitwise_or.reduceat(hi, starts, axis=0)
        data[k[starts] + 1] |= np.bitwise_or.reduceat(lo, starts, axis=0)
    meta = pack_meta(widths) if cfg.fixed_width is None else np.zeros(0, np.uint32)
    return GeckoStream(data=data[:n_words].astype(fmt.dtype), meta=meta, widths=widths,
                       count=int(bits.size), cfg=cfg)


def decompress(stream: GeckoStream) -> np.ndarray:
    """Expand a stream back to bit patterns: ``truncate_mantissa(x, man_width)`` (§4.4).

    Reads only ``data``, ``meta`` (or the fixed width), ``count`` and the configuration, as the
    hardware decompressor does.
    """
    cfg = stream.cfg
    fmt = cfg.format
    lw = cfg.lane_width
    rows = -(-stream.count // cfg.lanes)
    data = np.asarray(stream.data)
    if data.dtype != fmt.dtype or data.ndim != 2 or data.shape[1] != cfg.lanes:
        raise ValueError(f"stream data has dtype {data.dtype} shape {data.shape}; expected "
                         f"{np.dtype(fmt.dtype).name} with {cfg.lanes} lanes")
    if cfg.fixed_width is None:
        widths = unpack_meta(stream.meta, rows)
    else:
        widths = np.full(rows, cfg.fixed_width, dtype=np.int64)
    W = _field_widths(widths, cfg)
    offs = np.concatenate(([0], np.cumsum(W)))
    if _words(int(offs[-1]), cfg) > data.shape[0]:
        raise ValueError(f"stream holds {data.shape[0]} words per lane; the widths need "
                         f"{_words(int(offs[-1]), cfg)}")
    k = offs[:-1] // lw
    p = offs[:-1] % lw
    d = np.zeros((data.shape[0] + 1, cfg.lanes), dtype=np.uint64)
    d[:-1] = data
    win = (d[k] << np.uint64(lw)) | d[k + 1]
    f = ((win >> (2 * lw - p - W)[:, None].astype(np.uint64))
         & ((np.uint64(1) << W[:, None].astype(np.uint64)) - np.uint64(1))).astype(np.int64)
    n = cfg.man_width
    w = widths[:, None]
    man = (f & ((1 << n) - 1)) << (fmt.man_bits - n)
    f = f >> n
    mag = f & ((1 << w) - 1)
    ds = (f >> w) & 1
    s = (f >> (w + 1)) & 1 if cfg.sign_en else np.zeros_like(f)
    out = pack(s, _decode(ds, mag), man, fmt).reshape(-1)[:stream.count]
    return out.astype(fmt.dtype)


# --------------------------------------------------------------------------------------------
# cycle models of the hardware units (their timing contract, every pipeline depth)

#: cycles from the acceptance of a compressor input row to the first cycle its sticky error
#: flag reads 1 (the checks read the input register, at every depth)
COMPRESSOR_ERROR_LAG = 2


def compressor_latency(cfg: GeckoConfig) -> int:
    """Cycles from the acceptance of a compressor input row to the cycle in which the word row it
    completes is on ``o``, when nothing stalls: ``3 + pipeline``."""
    return 3 + cfg.pipeline


def decompressor_latency(cfg: GeckoConfig) -> int:
    """Cycles from the cycle in which the decompressor takes a row (and the metadata word and
    word row it needs) to the cycle the decoded row is on ``o``, when nothing stalls:
    ``1 + pipeline``."""
    return 1 + cfg.pipeline


@dataclass(frozen=True)
class CompressorCycle:
    """One clock cycle of :func:`compressor_cycles`: the unit's handshake outputs."""

    #: ``i.ready``
    i_ready: bool
    #: ``(lane words, last)`` on ``o`` (``o.valid``), or None
    o: tuple | None
    #: ``(word, last)`` on ``meta`` (``meta.valid``), or None
    meta: tuple | None


@dataclass(frozen=True)
class DecompressorCycle:
    """One clock cycle of :func:`decompressor_cycles`: the unit's handshake outputs."""

    #: ``cmd.ready``
    cmd_ready: bool
    #: ``i.ready``
    i_ready: bool
    #: ``meta.ready``
    meta_ready: bool
    #: ``(lane values, last)`` on ``o`` (``o.valid``), or None
    o: tuple | None


def _tensor_plan(cfg: GeckoConfig, tensors):
    """``(stream, field widths W per row)`` of every ``(bits, tensor config)``; a tensor config
    must have the unit's ``lanes`` and ``fmt``."""
    plan = []
    for bits, t in tensors:
        if (t.lanes, t.fmt) != (cfg.lanes, cfg.fmt):
            raise ValueError(f"a tensor of lanes={t.lanes}, fmt={t.fmt!r} on a unit of "
                             f"lanes={cfg.lanes}, fmt={cfg.fmt!r}")
        s = compress(bits, t)
        plan.append((s, _field_widths(s.widths, t)))
    return plan


def _leaves(stages, last_leaves: bool) -> list:
    """Which rows of a chain of row stages move on this cycle: a stage's row moves on when the
    next stage is empty or its row moves on; the last stage's when ``last_leaves``."""
    leave = [False] * len(stages)
    for k in range(len(stages) - 1, -1, -1):
        nxt = last_leaves if k == len(stages) - 1 else (stages[k + 1] is None or leave[k + 1])
        leave[k] = stages[k] is not None and nxt
    return leave


def _advance(stages, leave, incoming) -> list:
    """The chain of row stages after the clock edge (``incoming``: the row entering the first
    stage, or None)."""
    out = list(stages)
    for k in range(len(stages) - 1, -1, -1):
        came = incoming if k == 0 else (stages[k - 1] if leave[k - 1] else None)
        if came is not None:
            out[k] = came
        elif leave[k]:
            out[k] = None
    return out


def compressor_cycles(cfg: GeckoConfig, tensors, cycles) -> list[CompressorCycle]:
    """Cycle model of the Gecko compressor (the timing contract of
    :class:`hdl.gecko.GeckoCompressor` at ``cfg.pipeline``).

    ``tensors`` are ``(bits, tensor config)`` pairs streamed back to back (each tensor config
    gives ``man_width``, ``sign_en`` and ``fixed_width``; ``lanes`` and ``fmt`` are the unit's);
    their rows, padded with +0.0 and ``last`` on each tensor's final row, are offered in order.
    ``cycles`` holds per clock cycle ``(i_valid, o_ready, meta_ready)``: whether the next row
    is offered (ignored once every row was taken) and whether each output is ready.  Returns
    the unit's outputs in each cycle.

    A row passes ``2 + pipeline`` row stages (the input register, the fields and the added
    stages); a stage takes a row when it is empty or its row moves on, and ``i.ready`` says
    the first one does.  The last one feeds the packer, which accepts a row while ``o`` is
    free (empty or being read), the metadata register is free or the row does not complete a
    metadata word (ten codes, or the tensor's last row; fixed-width rows push none), and no
    flush is pending.  An accepted row emits a word row when its field reaches the end of the
    lane word, or, as a tensor's last row, whatever is left; a last row whose field straddles a
    word end leaves a flush, which emits the final word the next time ``o`` is free and blocks
    the packer until then.  Words and metadata words are those of :func:`compress`, in order.
    """
    lw = cfg.lane_width
    rows, words, metas = [], [], []
    for s, W in _tensor_plan(cfg, tensors):
        fixed = s.cfg.fixed_width is not None
        rows += [(int(w), r == W.size - 1, fixed) for r, w in enumerate(W)]
        n = s.data.shape[0]
        words += [(tuple(int(v) for v in s.data[q]), q == n - 1) for q in range(n)]
        metas += [(int(v), q == s.meta.size - 1) for q, v in enumerate(s.meta)]
    words, metas = iter(words), iter(metas)
    stages = [None] * (2 + cfg.pipeline)
    taken = 0                   # input rows accepted
    flush = False
    p = 0                       # the packers' fill pointer
    count = 0                   # codes in the metadata word being packed
    o = meta = None
    out = []
    for i_valid, o_ready, meta_ready in cycles:
        can_o = o is None or bool(o_ready)
        head = stages[-1]
        accept = False
        if head is not None and not flush:
            _, last, fixed = rows[head]
            ends = count == META_PER_WORD - 1 or last
            accept = can_o and (meta is None or bool(meta_ready) or fixed or not ends)
        leave = _leaves(stages, accept)
        i_ready = stages[0] is None or leave[0]
        out.append(CompressorCycle(i_ready, o, meta))
        incoming = None
        if i_valid and i_ready and taken < len(rows):
            incoming = taken
            taken += 1
        emit = emit_meta = None
        if flush:
            if can_o:
                emit, flush = next(words), False
        elif accept:
            W, last, fixed = rows[head]
            fill = p + W
            if fill >= lw or last:
                emit = next(words)
            flush = last and fill > lw
            p = 0 if last else fill % lw
            if not fixed:
                if count == META_PER_WORD - 1 or last:
                    emit_meta, count = next(metas), 0
                else:
                    count += 1
        o = emit if emit is not None else (None if o_ready else o)
        meta = emit_meta if emit_meta is not None else (None if meta_ready else meta)
        stages = _advance(stages, leave, incoming)
    return out


def decompressor_cycles(cfg: GeckoConfig, tensors, cycles) -> list[DecompressorCycle]:
    """Cycle model of the Gecko decompressor (the timing contract of
    :class:`hdl.gecko.GeckoDecompressor` at ``cfg.pipeline``).

    ``tensors`` are ``(bits, tensor config)`` pairs as for :func:`compressor_cycles`; for each
    one a command (its row count and side-band values), the word rows and the metadata words of
    its :func:`compress` stream are offered in order.  ``cycles`` holds per clock cycle
    ``(cmd_valid, i_valid, meta_valid, o_ready)``: whether the next command, word row and
    metadata word are offered (each ignored once all of them were taken) and whether ``o`` is
    ready.  Returns the unit's outputs in each cycle.

    An idle unit takes a command (``cmd.ready`` while idle) and starts its rows the next cycle
    (a command of 0 rows is taken and leaves it idle).  A row goes when the row stage after the
    control can take it (depth 0: ``o`` is free) and the inputs it needs are offered: the next
    metadata word when no width code is left (Gecko mode), the next word row when fewer bits
    are left over than its field needs.  It then passes ``pipeline`` row stages (each takes a
    row when empty or when its row moves on) into ``o``.  After a tensor's last row the
    left-over codes and bits are dropped.  Rows are those of :func:`decompress`, the last one
    padded with +0.0.
    """
    lw = cfg.lane_width
    tensors_out = []
    plan = _tensor_plan(cfg, tensors)
    for s, W in plan:
        values = np.zeros(W.size * cfg.lanes, dtype=np.int64)
        values[:s.count] = decompress(s)
        rows = [(tuple(int(v) for v in values[r * cfg.lanes:(r + 1) * cfg.lanes]),
                 r == W.size - 1) for r in range(W.size)]
        tensors_out.append((W, s.cfg.fixed_width is not None, rows))
    commands = iter(tensors_out)
    words_left = sum(s.data.shape[0] for s, _ in plan)
    metas_left = sum(s.meta.size for s, _ in plan)
    stages = [None] * cfg.pipeline
    current = None              # (W, fixed, rows) of the tensor being decoded
    row = 0                     # its next row
    active = False
    avail = 0                   # bits left over from the words taken
    left = 0                    # width codes left from the metadata word taken
    o = None
    out = []
    for cmd_valid, i_valid, meta_valid, o_ready in cycles:
        can_o = o is None or bool(o_ready)
        leave = _leaves(stages, can_o)
        can_row = can_o if not stages else (stages[0] is None or leave[0])
        go = need_meta = need_word = False
        if active:
            W, fixed, rows = current
            need_meta = not fixed and left == 0
            need_word = avail < W[row]
            go = (can_row and (not need_meta or (bool(meta_valid) and metas_left > 0))
                  and (not need_word or (bool(i_valid) and words_left > 0)))
        out.append(DecompressorCycle(not active, go and need_word, go and need_meta, o))
        item = None
        if go:
            words_left -= need_word
            metas_left -= need_meta
            item = rows[row]
            done = row == W.size - 1
            avail = 0 if done else avail + (lw if need_word else 0) - int(W[row])
            left = 0 if done else (left if fixed else
                                   META_PER_WORD - 1 if need_meta else left - 1)
            row += 1
            active = not done
        elif cmd_valid and not active:
            current = next(commands, None)
            row = 0
            active = current is not None and current[0].size > 0
        if stages:
            moved = stages[-1] if leave[-1] else None
            stages = _advance(stages, leave, item)
        else:
            moved = item
        o = moved if moved is not None else (None if o_ready else o)
    return out


__all__ = [
    "BIAS", "GECKO_MAX_PIPELINE", "GeckoConfig", "GeckoStream", "Footprint", "exp_code",
    "exp_decode", "compress", "decompress", "footprint", "pack_meta", "unpack_meta",
    "COMPRESSOR_ERROR_LAG", "compressor_latency", "decompressor_latency", "CompressorCycle",
    "DecompressorCycle", "compressor_cycles", "decompressor_cycles",
]

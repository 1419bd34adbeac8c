"""HBFP numerics (spec ``docs/specs/equinox.md`` §1): block floating point in every dot product,
bfloat16 everywhere else.

A BFP block of X-bit mantissas ``M`` (two's complement, full range ``-2**(X-1) .. 2**(X-1)-1``,
A1/A2) shares one 8-bit biased exponent ``e`` (bias 127, the bf16/FP32 exponent field; A4)::

    value_i = M_i * 2**(e - 127 - (X - 2))          (e == 0: the block is all zeros)

so the block's largest element lands in ``64 <= |M| < 128`` for X = 8 (§1.3).

* :func:`bfp_quantize` — FP32 (or bf16) block → ``(e, M)``: ``e`` is the largest exponent field
  of the block (A3; subnormals are flushed first), every element is scaled by
  ``2**-(e - 127 - (X - 2))`` and rounded to an X-bit integer with ``floor`` (the default:
  arithmetic shift right, "aligning, and truncating", A5), ``rne`` (ties to even; a maximum
  element rounding up to ``2**(X-1)`` saturates, A6), ``rtz`` (sign-magnitude truncation, for
  comparison) or ``stoch``: ``M = floor(s + R / 2**r)`` with an explicit ``r``-bit random
  integer ``R`` per element, so that stochastic rounding is bit-exact testable (§1.5).
  Rounding is the shared rounding block (:mod:`golden.common.rounding`) with an integer
  target: ``floor`` is its ``rdn`` mode; ``stoch`` is ``rdn`` to ``X + r`` bits, plus ``R``, an
  arithmetic shift by ``r`` and saturation.
* :func:`bfp_dot` — the PE arithmetic: an integer dot product wrapped to ``A`` bits (A9), with
  the exponent sum ``e_a + e_b`` (9-bit unsigned, §1.7).
* :func:`acc_to_bf16` — the array's output normalizer (§2.5): ``acc * 2**(esum - 254 - 2(X-2))``
  to bfloat16, RNE, flush to zero below ``2**-126``, saturation to ±0x7F7F above the largest
  finite value.  It is the rounding block (:func:`normalizer_config`), which decides the flush
  on the exponent *after* rounding, as IEEE 754's "tininess after rounding" does: a value just
  below ``2**-126`` that rounds up to ``2**-126`` is kept, where spec §2.5 step 5 (deciding on
  the pre-rounding exponent) would flush it.  That is the one case where the two differ; the RTL
  instantiates the same block.
* :func:`hbfp_matmul` — a GEMM as the Equinox datapath computes it (§1.6, A8, A10): weights
  blocked in ``T x T`` tiles, activations in row segments of ``T``, every K-tile's partial
  product converted to bf16 by the normalizer, and the partials summed in bf16 in ascending K
  order (:func:`bf16_add`).
* :func:`weight_store`, :func:`weight_narrow`, :func:`weight_update` — wide weight storage
  (§1.8): the optimizer keeps 16-bit mantissas; dot products read their top X bits (A11).

Only the conversions that *define* a value use floating point (``x`` is read as FP32 bit
patterns; :func:`bfp_dequantize` returns exact float64 values for checks); all the arithmetic is
integer arithmetic on bit patterns.  Non-finite inputs are rejected (A7).
"""

import numpy as np

from ..common import BF16, FP32, fields, int_matmul_t, wrap
from ..common.fp_add import fp_add_bits
from ..common.rounding import RoundConfig, round_checked, round_raw

#: rounding modes of :func:`bfp_quantize`
ROUNDINGS = ("floor", "rne", "rtz", "stoch")
#: the shared rounding block's mode for each (``stoch`` rounds ``floor`` first, see above)
_ROUND_MODE = {"floor": "rdn", "rne": "rne", "rtz": "rtz", "stoch": "rdn"}
#: mantissa widths the models accept (the thesis's design space is 4..16, §1.2)
M_RANGE = (2, 16)
#: accumulator widths the models accept
A_RANGE = (2, 56)
#: largest exponent sum (two 8-bit biased exponents of finite values)
ESUM_MAX = 2 * 254
#: a bfloat16 value's largest finite magnitude
BF16_MAX = 0x7F7F


class HBFPInputError(ValueError):
    """An HBFP model input outside its documented range (the message names it)."""


def _check_int(name: str, value, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not lo <= value <= hi:
        raise HBFPInputError(f"{name} = {value!r} is invalid: allowed an integer in {lo}..{hi}")
    return int(value)


def exp_offset(m: int = 8) -> int:
    """The constant the normalizer subtracts from ``e_a + e_b``: ``2 * 127 + 2 * (m - 2)``."""
    return 254 + 2 * (m - 2)


# ----------------------------------------------------------------------------------------------
# bfloat16

def _fp32_bits(x) -> np.ndarray:
    """FP32 bit patterns of ``x`` (values, converted to float32 with NumPy's RNE); non-finite
    values are errors."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.int64)
    bad = ((bits >> 23) & 0xFF) == 0xFF
    if bad.any():
        raise HBFPInputError(f"non-finite value {float(np.asarray(x, dtype=np.float32)[bad].flat[0])}: "
                             "HBFP blocks take finite FP32/bf16 values only (Inf/NaN rejected, A7)")
    return bits


def _f32_to_bf16_config() -> RoundConfig:
    return RoundConfig(fmt="bf16", in_width=24, frac=23, exp_width=10, mode="rne",
                       overflow="saturate")


def f32_to_bf16(x) -> np.ndarray:
    """FP32 values → bfloat16 bit patterns (``uint16``): round to nearest even, subnormal inputs
    flushed to a signed zero (FTZ/DAZ), values that round past the largest finite bf16 saturate
    to ±0x7F7F (A7).  Inf/NaN raise :class:`HBFPInputError`."""
    bits = _fp32_bits(x)
    sign, e, man = fields(bits, FP32)
    sig = np.where(e == 0, 0, man | (1 << 23))
    r = round_checked(_f32_to_bf16_config(), sig, e - 127, sign, np.zeros_like(sig))
    out = np.where(e == 0, sign << 15, r.bits).astype(np.uint16)
    return out if out.ndim else out[()]


def bf16_to_f32(h) -> np.ndarray:
    """bfloat16 bit patterns → float32 values (exact: bf16 is the top half of FP32)."""
    h = np.asarray(h)
    if h.size and (h.min() < 0 or h.max() > 0xFFFF):
        raise HBFPInputError("bf16_to_f32 takes 16-bit patterns (0..0xFFFF)")
    out = (h.astype(np.uint32) << 16).view(np.float32)
    return out if out.ndim else out[()]


def bf16_add(a, b) -> np.ndarray:
    """Sum of bf16 bit patterns as the SIMD unit adds tile partials (§1.9, A10): the exact sum
    rounded once to bf16 (RNE), DAZ/FTZ, saturating to ±0x7F7F (the shared FP adder,
    :func:`golden.common.fp_add.fp_add_bits`, in bf16; its ±Inf on overflow becomes the largest
    finite value, A7).  Rounding the exact sum to FP32 first and then to bf16 gives the same
    bits: FP32 rounds only when the operands' exponents differ by more than 16, and then the
    smaller one cannot move the bf16 rounding decision."""
    s = fp_add_bits(np.asarray(a, dtype=np.uint16), np.asarray(b, dtype=np.uint16), BF16)
    s = s.astype(np.int64)
    inf = (s & 0x7FFF) == 0x7F80
    return np.where(inf, (s & 0x8000) | BF16_MAX, s).astype(np.uint16)


# ----------------------------------------------------------------------------------------------
# FP → BFP

def quant_config(m: int = 8, rounding: str = "floor", rbits: int = 0) -> RoundConfig:
    """The rounding block of :func:`bfp_quantize` for one element: a 25-bit two's complement
    significand (``±(1.f * 2**23)``) at exponent ``e_i - e`` rounded to an ``m``-bit integer
    (``m + rbits`` bits for ``stoch``, which adds the random bits afterwards)."""
    return RoundConfig(fmt=f"int{m + rbits}", in_width=25, signed=True, frac=25 - m - rbits,
                       exp_width=10, mode=_ROUND_MODE[rounding], overflow="saturate")


def _check_rounding(rounding) -> str:
    if rounding not in ROUNDINGS:
        raise HBFPInputError(f"rounding = {rounding!r} is invalid: allowed one of "
                             + ", ".join(repr(r) for r in ROUNDINGS))
    return rounding


def bfp_quantize(x, m: int = 8, rounding: str = "floor", rand=None, rbits: int = 16):
    """Quantize blocks of FP32 values to BFP (§1.4, §1.5, §1.9).

    Parameters
    ----------
    x : array_like of float
        One block (1-D) or blocks along the last axis; read as FP32.
    m : int
        Mantissa width X, two's complement, 2..16.
    rounding : {"floor", "rne", "rtz", "stoch"}
    rand : array_like of int, optional
        ``rbits``-bit random integers, one per element (required for ``"stoch"``).
    rbits : int
        Width of ``rand``, 1..24.

    Returns
    -------
    e : int or ndarray of int64
        The shared biased exponent per block (0: all zeros).
    M : ndarray of int64
        Mantissas, ``x``'s shape.
    """
    m = _check_int("m", m, *M_RANGE)
    _check_rounding(rounding)
    bits = _fp32_bits(x)
    if bits.ndim == 0:
        raise HBFPInputError("bfp_quantize takes a block (at least one dimension), not a scalar")
    if bits.shape[-1] == 0:
        raise HBFPInputError("bfp_quantize: empty block")
    sign, ef, man = fields(bits, FP32)
    sig = np.where(ef == 0, 0, man | (1 << 23))
    ef = np.where(ef == 0, 0, ef)
    e = ef.max(axis=-1)
    sig = np.where(sign == 1, -sig, sig)
    shift = ef - e[..., None]
    if rounding == "stoch":
        rbits = _check_int("rbits", rbits, 1, 24)
        if rand is None:
            raise HBFPInputError("rounding 'stoch' needs rand: one rbits-bit random integer per "
                                 "element")
        R = np.asarray(rand)
        if R.shape != bits.shape or not np.issubdtype(R.dtype, np.integer):
            raise HBFPInputError(f"rand must be integers of x's shape {bits.shape}, "
                                 f"got {R.dtype} {R.shape}")
        R = R.astype(np.int64)
        if R.size and (R.min() < 0 or R.max() >= 1 << rbits):
            raise HBFPInputError(f"rand values must lie in 0..{(1 << rbits) - 1} (rbits = {rbits})")
        t = round_checked(quant_config(m, "stoch", rbits), sig, shift, sign, 0)
        tv = np.where(t.sign == 1, -t.sig, t.sig)
        M = np.clip((tv + R) >> rbits, -(1 << (m - 1)), (1 << (m - 1)) - 1)
    else:
        r = round_checked(quant_config(m, rounding), sig, shift, sign, np.zeros_like(sig))
        M = np.where(r.sign == 1, -r.sig, r.sig)
    M = np.where(e[..., None] == 0, 0, M)
    return (int(e), M) if e.ndim == 0 else (e, M)


def bfp_dequantize(e, M, m: int = 8) -> np.ndarray:
    """Exact float64 values of BFP blocks (``e`` per block, ``M`` along the last axis)."""
    m = _check_int("m", m, *M_RANGE)
    e = np.asarray(e, dtype=np.int64)
    M = np.asarray(M, dtype=np.int64)
    scale = np.ldexp(1.0, (e - 127 - (m - 2)).astype(np.int64))
    return np.where(e[..., None] == 0, 0.0, M * scale[..., None])


# ----------------------------------------------------------------------------------------------
# dot products and the normalizer

def _check_mantissas(name: str, M, m: int) -> np.ndarray:
    M = np.asarray(M)
    if not np.issubdtype(M.dtype, np.integer):
        raise HBFPInputError(f"{name} must be integer mantissas, got {M.dtype}")
    M = M.astype(np.int64)
    if M.size and (M.min() < -(1 << (m - 1)) or M.max() > (1 << (m - 1)) - 1):
        raise HBFPInputError(f"{name} holds a value outside the {m}-bit two's complement range")
    return M


def _check_exponents(name: str, e) -> np.ndarray:
    e = np.asarray(e)
    if not np.issubdtype(e.dtype, np.integer) or (e.size and (e.min() < 0 or e.max() > 254)):
        raise HBFPInputError(f"{name} must be biased exponents in 0..254")
    return e.astype(np.int64)


def bfp_dot(ea, Ma, eb, Mb, A: int = 24, m: int = 8):
    """The PE arithmetic: ``(acc, esum, wrapped)`` of two BFP blocks (§1.7, §2.3).

    ``acc`` is the integer dot product ``sum(Ma * Mb)`` wrapped to ``A`` bits, ``esum`` is
    ``ea + eb`` and ``wrapped`` tells whether the true sum does not fit ``A`` bits (A9: the
    hardware wraps silently, the model flags it).  Blocks run along the last axis; leading axes
    broadcast (scalars come back for 1-D blocks).
    """
    A = _check_int("A", A, *A_RANGE)
    m = _check_int("m", m, *M_RANGE)
    Ma = _check_mantissas("Ma", Ma, m)
    Mb = _check_mantissas("Mb", Mb, m)
    if Ma.shape[-1:] != Mb.shape[-1:]:
        raise HBFPInputError(f"blocks of different lengths: {Ma.shape} and {Mb.shape}")
    ea = _check_exponents("ea", ea)
    eb = _check_exponents("eb", eb)
    true = (Ma * Mb).sum(axis=-1)
    acc = wrap(true, A)
    esum = ea + eb
    wrapped = acc != true
    if acc.ndim == 0 and np.ndim(esum) == 0:
        return int(acc), int(esum), bool(wrapped)
    return acc, esum, wrapped


def normalizer_config(m: int = 8, A: int = 24) -> RoundConfig:
    """The rounding block of the output normalizer: an ``A``-bit two's complement accumulator
    at the exponent ``esum - exp_offset(m)`` (10 bits signed) to bf16, RNE, saturating."""
    return RoundConfig(fmt="bf16", in_width=A, signed=True, frac=0, exp_width=10, mode="rne",
                       overflow="saturate")


def acc_to_bf16(acc, esum, m: int = 8, A: int | None = None):
    """bf16 bits of ``acc * 2**(esum - exp_offset(m))`` (§2.5; see the module docstring for the
    flush-to-zero boundary).  ``acc = 0`` gives +0.  ``A`` defaults to the narrowest width
    holding ``acc`` (at least 24); the result does not depend on it.  Returns an ``int`` for
    scalar inputs, else a ``uint16`` array."""
    m = _check_int("m", m, *M_RANGE)
    acc = np.asarray(acc)
    if not np.issubdtype(acc.dtype, np.integer):
        raise HBFPInputError(f"acc must be integers, got {acc.dtype}")
    acc = acc.astype(np.int64)
    esum = np.asarray(esum)
    if not np.issubdtype(esum.dtype, np.integer) or (
            esum.size and (esum.min() < 0 or esum.max() > ESUM_MAX)):
        raise HBFPInputError(f"esum must be exponent sums in 0..{ESUM_MAX}")
    if A is None:
        need = int(np.abs(acc).max()).bit_length() + 1 if acc.size else 1
        A = max(24, need)
    A = _check_int("A", A, *A_RANGE)
    if acc.size and (acc.min() < -(1 << (A - 1)) or acc.max() >= 1 << (A - 1)):
        raise HBFPInputError(f"acc outside the {A}-bit two's complement range")
    out = round_raw(normalizer_config(m, A), acc, esum.astype(np.int64) - exp_offset(m)).bits
    out = out.astype(np.uint16)
    return int(out) if out.ndim == 0 else out


# ----------------------------------------------------------------------------------------------
# tiled GEMM

def _check_T(T) -> int:
    return _check_int("T", T, 1, 1 << 20)


def activation_blocks(X, T: int) -> np.ndarray:
    """Activations ``X`` (``B x K``, FP32) as row segments of ``T``: ``(B, K/T, T)``, ``K``
    zero-padded to a multiple of ``T`` (A8)."""
    T = _check_T(T)
    X = np.asarray(X, dtype=np.float32)
    if X.ndim != 2:
        raise HBFPInputError(f"activations must be a 2-D matrix, got shape {X.shape}")
    B, K = X.shape
    kt = -(-K // T)
    Xp = np.zeros((B, kt * T), dtype=np.float32)
    Xp[:, :K] = X
    return Xp.reshape(B, kt, T)


def weight_tiles(Wt, T: int) -> np.ndarray:
    """Weights ``Wt`` (``K x N``, FP32) as ``T x T`` tiles, both sides zero-padded (A8):
    ``(K/T, N/T, T*T)``, each tile row-major; :func:`weight_untile` puts them back."""
    T = _check_T(T)
    W = np.asarray(Wt, dtype=np.float32)
    if W.ndim != 2:
        raise HBFPInputError(f"weights must be a 2-D matrix, got shape {W.shape}")
    K, N = W.shape
    kt, nt = -(-K // T), -(-N // T)
    Wp = np.zeros((kt * T, nt * T), dtype=np.float32)
    Wp[:K, :N] = W
    return Wp.reshape(kt, T, nt, T).transpose(0, 2, 1, 3).reshape(kt, nt, T * T)


def weight_untile(M, T: int) -> np.ndarray:
    """Tile mantissas ``(K/T, N/T, T*T)`` as the padded matrix ``(K/T * T, N/T * T)``."""
    kt, nt, _ = M.shape
    return M.reshape(kt, nt, T, T).transpose(0, 2, 1, 3).reshape(kt * T, nt * T)


def quantize_activations(X, T: int, m: int = 8, rounding: str = "floor", rand=None,
                         rbits: int = 16):
    """Activations ``X`` (``B x K``) as BFP row segments of ``T`` (A8; ``K`` zero-padded to a
    multiple of ``T``): ``e`` of shape ``(B, K/T)``, ``M`` of shape ``(B, K/T, T)``."""
    blocks = activation_blocks(X, T)
    R = None if rand is None else np.asarray(rand).reshape(blocks.shape)
    return bfp_quantize(blocks, m, rounding, R, rbits)


def quantize_weights(Wt, T: int, m: int = 8, rounding: str = "floor", rand=None,
                     rbits: int = 16):
    """Weights ``Wt`` (``K x N``) as BFP ``T x T`` tiles (A8; both sides zero-padded): ``e`` of
    shape ``(K/T, N/T)``, ``M`` of shape ``(K/T * T, N/T * T)`` (the padded matrix)."""
    tiles = weight_tiles(Wt, T)
    R = None if rand is None else np.asarray(rand).reshape(tiles.shape)
    e, M = bfp_quantize(tiles, m, rounding, R, rbits)
    return e, weight_untile(M, T)


def check_gemm_shapes(X, Wt) -> None:
    """``X`` (``B x K``) and ``Wt`` (``K x N``) must be 2-D with the same ``K >= 1``: an
    :class:`HBFPInputError` otherwise (the GEMM would zero-pad a short operand silently)."""
    sx, sw = np.shape(X), np.shape(Wt)
    if len(sx) != 2 or len(sw) != 2:
        raise HBFPInputError(f"hbfp_matmul takes 2-D matrices X (B x K) and Wt (K x N), got "
                             f"shapes {sx} and {sw}")
    if sx[1] != sw[0] or sx[1] < 1:
        raise HBFPInputError(f"hbfp_matmul takes X (B x K) and Wt (K x N) with the same K >= 1, "
                             f"got shapes {sx} and {sw}")


def hbfp_matmul(X, Wt, T: int, m: int = 8, A: int = 24, rounding: str = "floor"):
    """``X @ Wt`` as Equinox computes it: bf16 bits of shape ``(B, N)`` (§1.6, §1.9, A8, A10).

    ``X`` (``B x K``) is quantized per row segment of ``T``, ``Wt`` (``K x N``) per ``T x T``
    tile, both with ``rounding`` (``floor``, ``rne`` or ``rtz``; stochastic rounding needs
    random bits: quantize with :func:`quantize_activations`/:func:`quantize_weights` and call
    :func:`hbfp_matmul_quantized`).  Each K-tile's integer dot products wrap to ``A`` bits
    and are normalized to bf16; the partials are summed in bf16 in ascending K order.
    """
    A = _check_int("A", A, *A_RANGE)
    if rounding == "stoch":
        raise HBFPInputError("hbfp_matmul: rounding 'stoch' needs random bits; quantize with "
                             "quantize_activations/quantize_weights and call "
                             "hbfp_matmul_quantized")
    check_gemm_shapes(X, Wt)
    ex, Mx = quantize_activations(X, T, m, rounding)
    ew, Mw = quantize_weights(Wt, T, m, rounding)
    N = np.shape(Wt)[1]
    return hbfp_matmul_quantized(ex, Mx, ew, Mw, T, m, A)[:, :N]


def tile_partials(ex, Mx, ew, Mw, T: int, m: int = 8, A: int = 24):
    """The normalizer's bf16 outputs per K-tile: ``(K/T, B, N)`` uint16, from quantized
    operands (:func:`quantize_activations` / :func:`quantize_weights` layouts), and a flag
    array telling which accumulators wrapped."""
    T = _check_T(T)
    m = _check_int("m", m, *M_RANGE)
    A = _check_int("A", A, *A_RANGE)
    B, kt, _ = Mx.shape
    N = Mw.shape[1]
    if T * (1 << (2 * m - 2)) >= 1 << 53:
        raise HBFPInputError(f"T = {T} with m = {m}: the dot products exceed the exact range")
    out = np.zeros((kt, B, N), dtype=np.uint16)
    wrapped = np.zeros((kt, B, N), dtype=bool)
    for k in range(kt):
        true = int_matmul_t(Mx[:, k, :], Mw[k * T:(k + 1) * T, :].T)
        acc = wrap(true, A)
        wrapped[k] = acc != true
        esum = ex[:, k, None] + np.repeat(ew[k], T)[None, :N]
        out[k] = round_checked(normalizer_config(m, A), acc, esum - exp_offset(m), 0, 0).bits
    return out, wrapped


def hbfp_matmul_quantized(ex, Mx, ew, Mw, T: int, m: int = 8, A: int = 24):
    """:func:`hbfp_matmul` of quantized operands (the padded ``N``)."""
    parts, _ = tile_partials(ex, Mx, ew, Mw, T, m, A)
    acc = parts[0]
    for k in range(1, parts.shape[0]):
        acc = bf16_add(acc, parts[k])
    return acc


# ----------------------------------------------------------------------------------------------
# wide weight storage (§1.8)

def weight_store(w, wide: int = 16, rounding: str = "floor"):
    """Quantize weights to the wide storage format: ``(e, M_wide)`` (§1.8)."""
    return bfp_quantize(w, wide, rounding)


def weight_narrow(M_wide, wide: int = 16, m: int = 8) -> np.ndarray:
    """The mantissas dot products read: the top ``m`` bits of the wide ones (arithmetic shift,
    same exponent; A11).  With ``floor`` this equals quantizing the FP value to ``m`` bits
    directly."""
    wide = _check_int("wide", wide, *M_RANGE)
    m = _check_int("m", m, M_RANGE[0], wide)
    return _check_mantissas("M_wide", M_wide, wide) >> (wide - m)


def weight_update(e, M_wide, delta, wide: int = 16, rounding: str = "floor"):
    """One optimizer step on wide-stored weights (§1.8 [D]): dequantize to FP32 (exact), add the
    FP32 update ``delta`` (the shared FP32 adder: RNE, DAZ/FTZ), re-quantize to ``wide`` bits.
    Returns the new ``(e, M_wide)``."""
    wide = _check_int("wide", wide, *M_RANGE)
    w32 = bfp_dequantize(e, M_wide, wide).astype(np.float32)
    d = np.broadcast_to(np.asarray(delta, dtype=np.float32), w32.shape)
    s = fp_add_bits(w32.view(np.uint32), _fp32_bits(d).astype(np.uint32), FP32)
    return bfp_quantize(s.view(np.float32), wide, rounding)


__all__ = ["ROUNDINGS", "HBFPInputError", "exp_offset", "f32_to_bf16", "bf16_to_f32", "bf16_add",
           "quant_config", "bfp_quantize", "bfp_dequantize", "wrap", "bfp_dot",
           "normalizer_config", "acc_to_bf16", "activation_blocks", "weight_tiles",
           "weight_untile", "quantize_activations", "quantize_weights",
           "check_gemm_shapes", "hbfp_matmul", "tile_partials", "hbfp_matmul_quantized", "weight_store",
           "weight_narrow", "weight_update"]

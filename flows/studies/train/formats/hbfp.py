"""HBFP training (``hbfp8``, ``hbfp12``): block floating point in every dot product, bfloat16
results, wide BFP weight storage.

Every GEMM of the three training phases is :func:`golden.equinox.hbfp.hbfp_matmul`, the Equinox
datapath, computed by its compiled kernel :func:`golden.equinox.hbfp_kernel.hbfp_matmul_fast`
(the same bits): the left operand ``x`` is quantized per row segment of ``T`` values (one shared 8-bit
exponent, ``m``-bit two's complement mantissas), the right operand ``y`` per ``T x T`` tile, both
with ``floor`` rounding (the Equinox quantizer's "aligning, and truncating"); each K-tile's
integer dot products go through an ``A``-bit accumulator and the normalizer to bfloat16, and the
K-tile partials are summed in bfloat16 in ascending K order.  The result is widened to float32.
So the weights are tiled in ``fwd`` (``A @ W``) and ``bwd_data`` (``G @ W.T``), the gradients in
``wgrad`` (``A.T @ G``, where the activations are the row-segmented operand).

Choices
-------
``T = 16``
    The block size of the golden model's default array and of the ``equinox-paper`` preset
    (:class:`golden.equinox.ArrayConfig`: ``T = n * w`` with 4 x 4 PEs of 4 MACs).  The HBFP
    papers train with larger tiles (24 and up); smaller tiles give smaller quantization errors.
``A`` (:func:`acc_bits`)
    Equinox's 24-bit accumulator when it holds ``T`` largest products without wrapping, else
    the narrowest width that does: ``T * 2**(2m - 2) <= 2**(A - 1) - 1``.  The golden
    accumulator wraps silently (no saturation), so the width is chosen to make wrapping
    impossible; below it a dot product can wrap to a wrong sign.  ``T = 16`` gives ``A = 24``
    for hbfp8 (24 bits would hold up to 511 products) and ``A = 28`` for hbfp12.
Wide weight storage (:meth:`HBFP.store_weight`)
    The master weights are kept as the thesis keeps them: after every optimizer step each
    ``T x T`` tile of the weight matrix (the tiles the ``fwd`` and ``bwd_data`` GEMMs use) is
    re-quantized to 16-bit mantissas with :func:`golden.equinox.hbfp.weight_store` and stored
    as its exact value (:func:`~golden.equinox.hbfp.bfp_dequantize`).  The engine's FP32
    optimizer step on that value followed by the re-quantization is the thesis's
    :func:`~golden.equinox.hbfp.weight_update` (dequantize, add the FP32 update, re-quantize).
    The dot products then quantize the stored values to ``m`` bits with ``floor``, which is
    reading the top ``m`` bits of the wide mantissas (:func:`~golden.equinox.hbfp.weight_narrow`)
    — except for a tile whose largest element was stored as the most negative wide mantissa
    ``-2**15``: its value is a power of two one exponent higher, and the tile is read with that
    exponent (one mantissa bit less for its other elements).
Non-finite operands
    The golden model rejects Inf/NaN (they cannot be block floating point).  A diverging run's
    non-finite operand gives an all-NaN GEMM result, and a non-finite weight is stored as it
    is, so the engine reports the divergence.
"""

import re

import numpy as np

from golden.common import bf16_to_float
from golden.equinox import ArrayConfig
from golden.equinox.hbfp import (HBFPInputError, bfp_dequantize, weight_store, weight_tiles,
                                 weight_untile)
from golden.equinox.hbfp_kernel import hbfp_matmul_fast

from .base import Format

#: block size: the default Equinox array's ``T = n * w`` (the ``equinox-paper`` preset)
T = ArrayConfig().T
#: mantissa bits of the wide weight storage
WIDE = 16
#: Equinox's accumulator width
EQUINOX_ACC = 24


def acc_bits(m: int, T: int = T) -> int:
    """The accumulator width of ``hbfp<m>``: 24 bits (Equinox's) when ``T`` products cannot wrap
    it, else the narrowest width where they cannot.

    The largest product of two ``m``-bit two's complement mantissas is
    ``(-2**(m - 1))**2 = 2**(2m - 2)``; ``T`` of them fit an ``A``-bit two's complement
    accumulator when ``T * 2**(2m - 2) <= 2**(A - 1) - 1`` (the most negative sum,
    ``T * -2**(m - 1) * (2**(m - 1) - 1)``, is smaller in magnitude).
    """
    return max(EQUINOX_ACC, (T << (2 * m - 2)).bit_length() + 1)


def store_tiles(w: np.ndarray, T: int = T, wide: int = WIDE) -> np.ndarray:
    """``w`` as the wide BFP storage holds it: every ``T x T`` tile (from the top-left corner;
    the last ones zero-padded) quantized to ``wide``-bit mantissas with
    :func:`golden.equinox.hbfp.weight_store` (``floor``) and dequantized exactly.

    Parameters
    ----------
    w : numpy.ndarray
        (K, M) float32 weights, finite.
    T : int
        Tile side.
    wide : int
        Mantissa bits of the storage.

    Returns
    -------
    numpy.ndarray
        (K, M) float32.
    """
    K, M = np.shape(w)
    v = weight_untile(bfp_dequantize(*weight_store(weight_tiles(w, T), wide), wide), T)
    return v[:K, :M].astype(np.float32)


class HBFP(Format):
    """HBFP with ``m``-bit mantissas, blocks of :attr:`block`, an :func:`acc_bits` accumulator
    and :attr:`wide`-bit weight storage (module docstring)."""

    name = "hbfp"
    cost = 6.0
    #: mantissa bits of the dot products
    m = 8
    #: block size T (row segments of T, T x T weight tiles)
    block = T
    #: mantissa bits of the weight storage (``m``: the weights are stored as the dot products
    #: read them, without the wide storage)
    wide = WIDE
    #: the quantizer's rounding of both operands, per phase (Equinox's: ``floor`` everywhere)
    rounding = {"fwd": "floor", "bwd_data": "floor", "wgrad": "floor"}

    def __init__(self, run):
        super().__init__(run)
        self.T = self.block
        self.A = acc_bits(self.m, self.T)

    def block_for(self, rows: int, cols: int) -> int:
        """The block size that gives the same bits as :attr:`T` for a ``rows x cols`` weight
        operand (the right operand of the GEMM, or the stored weights) with less padding: when
        both fit one block, ``max(rows, cols)`` (one row segment and one weight tile either
        way; the padding zeros change no shared exponent), else ``T``.  The accumulator stays
        :attr:`A`, so the arithmetic is the same."""
        return max(rows, cols, 1) if max(rows, cols) <= self.T else self.T

    def matmul(self, x: np.ndarray, y: np.ndarray, phase: str, layer: str) -> np.ndarray:
        try:
            bits = hbfp_matmul_fast(x, y, self.block_for(*np.shape(y)), self.m, self.A,
                                    self.rounding[phase])
        except HBFPInputError:
            if np.isfinite(x).all() and np.isfinite(y).all():
                raise
            return np.full((x.shape[0], y.shape[1]), np.nan, dtype=np.float32)
        return np.asarray(bf16_to_float(bits))

    def store_weight(self, w: np.ndarray, layer: str) -> np.ndarray:
        if not np.isfinite(w).all():
            return w
        return store_tiles(w, self.block_for(*np.shape(w)), self.wide)

    def summary_record(self) -> dict:
        rec = {"m": self.m, "T": self.T, "A": self.A, "wide": self.wide}
        if self.rounding != HBFP.rounding:      # an ablation says how it rounds
            rec["rounding"] = dict(self.rounding)
        return rec


class HBFP8(HBFP):
    name = "hbfp8"
    m = 8
    summary = (f"HBFP: 8-bit mantissas in blocks of {T} (T x T weight tiles), "
               f"{acc_bits(8)}-bit accumulators, bfloat16 results, {WIDE}-bit weight storage")
    paper = ("HBFP thesis: hbfp8 with 16-bit wide weight storage trains to within about "
             "0.5 points of FP32")


class HBFP12(HBFP):
    name = "hbfp12"
    m = 12
    summary = (f"HBFP: 12-bit mantissas in blocks of {T} (T x T weight tiles), "
               f"{acc_bits(12)}-bit accumulators, bfloat16 results, {WIDE}-bit weight storage")
    paper = "HBFP thesis: hbfp12 matches FP32"


class HBFP8RNE(HBFP8):
    """hbfp8 with round-to-nearest-even quantization in every GEMM (not Equinox's floor): an
    ablation that shows what the quantizer's rounding does to training."""

    name = "hbfp8-rne"
    rounding = {"fwd": "rne", "bwd_data": "rne", "wgrad": "rne"}
    summary = "hbfp8 with round-to-nearest-even quantization in every GEMM (an ablation)"
    paper = "not a paper format: Equinox quantizes with floor"


class HBFP8RNEWgrad(HBFP8):
    """hbfp8 with round-to-nearest-even quantization in the weight-gradient GEMM only
    (``A.T @ G``), floor in ``fwd`` and ``bwd_data``: an ablation that isolates the GEMM whose
    floor bias training does not survive (docs/papers.md)."""

    name = "hbfp8-rne-wgrad"
    rounding = {"fwd": "floor", "bwd_data": "floor", "wgrad": "rne"}
    summary = ("hbfp8 with round-to-nearest-even quantization in the weight-gradient GEMM only "
               "(an ablation)")
    paper = "not a paper format: Equinox quantizes with floor"


#: the ranges of the variants' parameters (:func:`variant`)
VARIANT_M = (4, 16)
VARIANT_T = (1, 4096)


def variant(name: str):
    """The class of the HBFP variant ``name``: ``hbfp<m>-t<T>`` (``m``-bit mantissas in blocks
    of ``T``, the 16-bit wide weight storage) or ``hbfp<m>-t<T>-w<W>`` (``W``-bit weight
    storage; ``W = m`` stores the weights as the dot products read them, no wide storage), with
    a ``-rne`` suffix the quantizer rounding to nearest (ties to even) in every GEMM instead of
    Equinox's floor, for the sweeps of the thesis's Fig. 3.3 design space; None for a name of
    another form.

    Raises
    ------
    ValueError
        A parameter out of range (``m`` 4..16, ``T`` 1..4096, ``m <= W <= 24``); one line.
    """
    match = re.fullmatch(r"hbfp(\d+)-t(\d+)(?:-w(\d+))?(-rne)?", name)
    if match is None:
        return None
    m, block = int(match[1]), int(match[2])
    wide = int(match[3]) if match[3] else WIDE
    if not (VARIANT_M[0] <= m <= VARIANT_M[1] and VARIANT_T[0] <= block <= VARIANT_T[1]
            and m <= wide <= 24):
        raise ValueError(f"format {name!r}: m {m} (4..16), T {block} (1..4096) or weight "
                         f"storage {wide} bits (m..24) out of range")
    storage = ("the weights stored as read" if wide == m else f"{wide}-bit weight storage")
    rne = match[4] is not None
    return type(f"HBFP_{m}_{block}_{wide}{'_rne' if rne else ''}", (HBFP,), {
        "name": name, "m": m, "block": block, "wide": wide,
        **({"rounding": dict.fromkeys(HBFP.rounding, "rne")} if rne else {}),
        "summary": f"HBFP: {m}-bit mantissas in blocks of {block}, {acc_bits(m, block)}-bit "
                   f"accumulators, bfloat16 results, {storage} (a sweep variant)",
        "paper": "HBFP thesis Tables 3.1/3.2: accuracy against mantissa width and block size",
        "__module__": __name__})


#: format name → class
FORMATS = {"hbfp8": HBFP8, "hbfp12": HBFP12}
#: ablations: trained only when named (``--formats``), not by ``all``
ABLATIONS = {"hbfp8-rne": HBFP8RNE, "hbfp8-rne-wgrad": HBFP8RNEWgrad}

__all__ = ["FORMATS", "ABLATIONS", "HBFP", "HBFP8", "HBFP12", "HBFP8RNE", "HBFP8RNEWgrad", "T", "WIDE", "EQUINOX_ACC", "acc_bits",
           "store_tiles", "variant"]

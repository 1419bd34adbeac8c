"""Number formats of ``trainfab train``: each is a :class:`~.base.Format` subclass, listed in
:data:`FORMATS` under the name used on the command line, in the order of every report.

========== =====================================================================================
fp32       IEEE FP32 GEMMs (the reference)
bf16       operands rounded to bfloat16 (RNE), FP32 accumulation
fp16       NVIDIA mixed precision: fp16 operands (per-tensor power-of-two scale), FP32 accumulation
int8/12    INT8/INT12 operands (per-tensor scale), 32-bit wrapping integer accumulation
hfp8       HFP8: e4m3 weights and activations, e5m2 gradients, FP32 accumulation
fpraker    bfloat16 operands, dot products accumulated as the FPRaker tile does
hbfp8/12   Equinox's HBFP GEMMs (8/12-bit mantissas), wide BFP weight storage
fast       FAST's BFP GEMMs with the per-layer 2/4-bit schedule (Algorithm 1); fast-low,
           mid-bfp and fast-high at fixed 2, 3 and 4 bits
msfp12     MSFP-12: BFP groups of 16, sign + 3-bit magnitudes, round to nearest
schrodinger Quantum Mantissa + Quantum Exponent stashes (learned bitlengths), Gecko footprints
bitwave    BitWave stashes (loss-slope controlled bitlengths), Gecko footprints
========== =====================================================================================

Parametric variants (:data:`VARIANTS`, for sweeps; trained only when named):
``hbfp<m>-t<T>[-w<W>][-rne]`` (HBFP at any mantissa width, block size and weight storage; ``-rne``:
rounding to nearest), ``fast-a<alpha>-b<beta>`` (Algorithm 1 with other constants) and
``bfp-m<m>-g<g>`` (FAST's datapath at a fixed width and group size, Fig. 20's study).

Ablations (:data:`ABLATIONS`, trained only when named): ``hbfp8-rne`` (round-to-nearest-even
quantization in every GEMM), ``hbfp8-rne-wgrad`` (in the weight-gradient GEMM only) and
``fast-low-g4`` (LowBFP with 4-bit gradients), ``msfp12-sr`` (MSFP-12 with stochastically rounded
gradients) and ``hfp8-e4m2`` (FAST's Table IV HFP8 MAC operand for every tensor).
"""

from .base import KINDS, PHASES, Format, LayerInfo, RunInfo
from . import bf16, fast, fpraker, hbfp, lanes, schrodinger

#: format name → class; ``fmt_factory(run_info)`` is ``FORMATS[name](run_info)``
FORMATS: dict[str, type[Format]] = {"fp32": Format, **bf16.FORMATS, **lanes.FORMATS,
                                    **fpraker.FORMATS, **hbfp.FORMATS, **fast.FORMATS,
                                    **schrodinger.FORMATS}
#: ablations: formats that change one block of a paper format, trained only when named
#: (``--formats hbfp8,hbfp8-rne-wgrad``), never by ``--formats all``
ABLATIONS: dict[str, type[Format]] = {**hbfp.ABLATIONS, **fast.ABLATIONS, **lanes.ABLATIONS}

#: the parametric families of ``--formats`` (sweeps), one line each for the error messages
VARIANTS = ("hbfp<m>-t<T>[-w<W>][-rne] (HBFP with m-bit mantissas, blocks of T, W-bit weight "
            "storage, round to nearest)",
            "fast-a<alpha>-b<beta> (FAST with Algorithm 1's alpha and beta)",
            "bfp-m<m>-g<g> (FAST's datapath at fixed m-bit magnitudes in groups of g)")


def variant(name: str):
    """The class of a parametric format name (:data:`VARIANTS`), or None when ``name`` is not
    of such a form.  A parameter out of range is a one-line ``ValueError``."""
    for family in (hbfp, fast):
        cls = family.variant(name)
        if cls is not None:
            return cls
    return None


class Known(dict):
    """The formats ``--formats`` accepts: :data:`FORMATS`, then :data:`ABLATIONS` (iterating
    lists these), and any :func:`variant` name (``in`` and ``[]`` accept them)."""

    def __missing__(self, name):
        cls = variant(name) if isinstance(name, str) else None
        if cls is None:
            raise KeyError(name)
        return cls

    def get(self, name, default=None):
        try:
            return self[name]
        except (KeyError, ValueError):
            return default

    def __contains__(self, name):
        if dict.__contains__(self, name):
            return True
        try:
            return isinstance(name, str) and variant(name) is not None
        except ValueError:
            return False


def known() -> Known:
    """Every format name ``trainfab train`` accepts (:class:`Known`)."""
    return Known({**FORMATS, **ABLATIONS})


__all__ = ["FORMATS", "ABLATIONS", "VARIANTS", "KINDS", "PHASES", "Format", "LayerInfo",
           "RunInfo", "variant", "known", "Known"]

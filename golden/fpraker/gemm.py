"""The FPRaker tile GEMM and its engine switch.

:func:`tile_gemm` runs a whole GEMM on the FPRaker tile's cycle model on one of two engines
that give the same bits and cycles: the NumPy model, which is the specification of the mapping
(:func:`golden.fpraker.tile.tile_gemm_numpy`), and its numba-compiled copy
(:func:`golden.fpraker.tile_batch.tile_gemm_fast`, checked against it bit for bit and cycle for
cycle; about 30 million MACs/s per core under ``sync = "lockstep"``, 50 million under
``"independent"``).  numba is optional: without it the switch falls back
to NumPy.  The rest of :mod:`golden` imports NumPy only.
"""

from .tile import GemmResult, TileConfig, tile_gemm_numpy

#: engines of :func:`tile_gemm`
ENGINES = ("auto", "numba", "numpy")


def tile_gemm(S, P, cfg: TileConfig = TileConfig(), progress=None, chunk: int = 4096,
              engine: str = "auto") -> GemmResult:
    """``out[n, m] = sum_k P[n, k] * S[m, k]`` on FPRaker tiles: see
    :func:`golden.fpraker.tile.tile_gemm_numpy` for the operands, the result and the errors.

    Parameters
    ----------
    progress : callable, optional
        ``progress(done, total)`` as the work advances.
    chunk : int
        Column instances per NumPy batch (the NumPy engine).
    engine : {"auto", "numba", "numpy"}
        ``"numba"``: the compiled engine; ``"numpy"``: the NumPy model; ``"auto"``: numba when
        it is installed.
    """
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}: expected one of {ENGINES}")
    if engine != "numpy":
        from . import tile_batch

        if tile_batch.available():
            return tile_batch.tile_gemm_fast(S, P, cfg, progress=progress)
        if engine == "numba":
            raise ValueError("engine 'numba': numba is not installed")
    return tile_gemm_numpy(S, P, cfg, progress=progress, chunk=chunk)


__all__ = ["ENGINES", "tile_gemm"]

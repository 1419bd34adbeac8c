"""numba, when it is installed, for the fast kernels that stand beside the bit-level models.

``golden`` otherwise imports only NumPy.  A kernel module decorates its scalar loops with
:func:`jit` and offers its compiled path only when :data:`numba` is not ``None``; without numba
the decorated functions stay plain Python (the callers then use the reference models).

The JIT cache goes to numba's default place (``__pycache__`` next to the kernel's file, ignored
by git, or numba's user-wide cache directory when that folder is read-only; ``NUMBA_CACHE_DIR``
overrides both).
"""

try:
    import numba
except ImportError:           # the kernels are optional
    numba = None


def jit(f):
    """``numba.njit`` (nopython, no GIL) with an on-disk cache when numba finds a writable cache
    location; ``f`` itself without numba."""
    if numba is None:
        return f
    try:
        return numba.njit(cache=True, nogil=True)(f)
    except RuntimeError:      # no writable cache location: compile once per session
        return numba.njit(nogil=True)(f)


__all__ = ["numba", "jit"]

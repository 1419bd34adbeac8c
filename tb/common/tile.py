"""A cocotb driver for PE tiles with the :class:`hdl.common.signatures.TileSignature` ports
(``baseline.bf16_tile``, the FPRaker tile): one reduction per call.

The tile's ports: ``a__<c>__{valid,ready,payload}`` (column ``c``'s groups ``{a, clear}``),
``b__<r>__{valid,ready,payload}`` (row ``r``'s groups ``{b}``), ``out__<r>__<c>`` (PE ``(r, c)``'s
bf16 read-out), ``busy`` and ``error``.  Every A and B stream is a
:class:`~.streams.Source` (it holds an item until accepted and may idle at random), all
driven by the cycle loop :func:`~.streams.run`; payloads are packed through the signature's own
layouts.  The operand arrays are those of :func:`golden.common.tile.check_tile_operands`:
``A`` (cols, groups, lanes) and ``B`` (rows, groups, lanes) bf16 bit patterns.
"""

import random
from typing import NamedTuple

import numpy as np

from golden.common import BF16
from hdl.common.signatures import tile_a_stream, tile_b_stream

from . import uint
from .streams import Source, run


class TileRun(NamedTuple):
    """What a reduction did: unpacks as ``out, busy_cycles, cycles``."""

    #: PE read-outs ``out[r, c]`` sampled once the reduction finished, uint16 (rows, cols)
    out: np.ndarray
    #: cycles in which ``busy`` was high
    busy_cycles: int
    #: cycles from the first cycle the streams were driven to the first cycle in which every
    #: group had been taken and ``busy`` was low (that cycle included)
    cycles: int


#: share of zero operands in the random reductions: dense to 90 % zeros (value sparsity)
ZERO_SHARES = (0.0, 0.25, 0.5, 0.75, 0.9)


def operands(nprng, cfg, groups: int, zeros: float = 0.0, suffix: bool = False,
             kind: str = "mix"):
    """Random ``A`` (cols, groups, lanes) and ``B`` (rows, groups, lanes): ``random_operands``
    data of ``kind``, a share ``zeros`` of each operand set to (signed) zero and, with
    ``suffix``, every mantissa's low 0-7 bits cleared (few terms: term sparsity)."""
    from golden.fpraker.pe import random_operands

    K = groups * cfg.lanes
    A = random_operands(nprng, cfg.cols, K, kind)[0].astype(np.int64)
    B = random_operands(nprng, cfg.rows, K, kind)[1].astype(np.int64)
    out = []
    for X in (A, B):
        if suffix:
            cut = nprng.integers(0, 8, size=X.shape)
            X = X & ~((1 << cut) - 1)
        X = np.where(nprng.random(X.shape) < zeros, X & 0x8000, X)
        out.append(X)
    A, B = out
    return A.reshape(cfg.cols, groups, cfg.lanes), B.reshape(cfg.rows, groups, cfg.lanes)


def expect(got, want, where: str, A=None, B=None):
    """Read-outs ``got`` equal ``want`` (rows, cols), else an ``AssertionError`` naming the
    first differing PE and its operands."""
    bad = np.argwhere(got != want)
    if bad.size:
        r, c = bad[0]
        detail = ""
        if A is not None:
            detail = (f"; A[{c}] = {[[hex(int(x)) for x in g] for g in A[c]]}, "
                      f"B[{r}] = {[[hex(int(x)) for x in g] for g in B[r]]}")
        raise AssertionError(f"{where}: {len(bad)} PEs differ, first ({r}, {c}): got "
                             f"{int(got[r, c]):#06x}, expected {int(want[r, c]):#06x}{detail}")


async def random_sweep(cfg, r, nprng, total: int, max_groups: int, one, name: str,
                       kinds=("mix",)):
    """Random reductions of 1..``max_groups`` groups until ``total`` groups ran: value sparsity
    cycles through :data:`ZERO_SHARES`, zero mantissa suffixes (term sparsity) in every other
    round of those, stream gaps in every other round of both (all 20 combinations every 20
    reductions), operand kinds cycling through ``kinds``.  ``await one(k, A, B, zeros, suffix,
    gaps, kind)`` runs and checks reduction ``k``."""
    done = k = 0
    seen = set()
    n = len(ZERO_SHARES)
    while done < total:
        G = min(total - done, r.randint(1, max_groups))
        zeros, suffix, gaps = ZERO_SHARES[k % n], (k // n) % 2 == 1, (k // (2 * n)) % 2 == 1
        kind = kinds[k % len(kinds)]
        A, B = operands(nprng, cfg, G, zeros, suffix, kind)
        await one(k, A, B, zeros, suffix, gaps, kind)
        seen.add((zeros, suffix, gaps))
        done += G
        k += 1
    import cocotb

    cocotb.log.info("%s: %d groups in %d reductions", name, done, k)
    assert done == total
    if k >= 4 * n:
        assert len(seen) == 4 * n, f"data kinds run: {sorted(seen)}"


async def power_stream(drv, cfg, golden_run):
    """The body of a tile testbench's ``power_run`` (the ``trainfab power`` contract,
    :mod:`flows.eda.power`): the operand groups ``a`` (cols, groups, lanes) and ``b`` (rows, groups,
    lanes) streamed back to back as reductions of ``dot_groups`` groups (``clear`` on each one's
    first group), no back-pressure; the last reduction's read-outs are checked against
    ``golden_run(A, B, cfg).out``.  The measured window covers exactly the stream."""
    from tb.common.power import PowerWindow, operands as power_operands

    ops = power_operands()
    A, B, dot = ops["a"], ops["b"], ops["dot_groups"]
    G = A.shape[1]
    assert A.shape == (cfg.cols, G, cfg.lanes) and B.shape == (cfg.rows, G, cfg.lanes) \
        and G % dot == 0, f"power operands: a {A.shape}, b {B.shape}, dot_groups {dot}"
    clear = np.zeros((cfg.cols, G), dtype=bool)
    clear[:, ::dot] = True
    window = PowerWindow(drv.dut)
    got = await drv.run(A, B, clear=clear, max_cycles=60 * G * cfg.lanes + 100)
    want = golden_run(A[:, G - dot:], B[:, G - dot:], cfg)
    expect(got.out, want.out, "power run, last reduction")
    window.close(groups=G, busy_cycles=got.busy_cycles, reductions=G // dot)


def _per_stream(value, n: int, what: str) -> list[float]:
    values = [float(value)] * n if np.isscalar(value) else [float(v) for v in value]
    if len(values) != n or not all(0.0 <= v < 1.0 for v in values):
        raise ValueError(f"{what} must be a probability in [0, 1) or {n} of them, got {value!r}")
    return values


class TileDriver:
    """Drives reductions into a tile of ``rows`` x ``cols`` PEs of ``lanes`` lanes.

    After :meth:`run`, :attr:`a_sources` / :attr:`b_sources` are that run's
    :class:`~.streams.Source` objects (``accepted_cycles``: the cycle each group was taken) and
    :attr:`busy_trace` the value of ``busy`` in every cycle.
    """

    def __init__(self, dut, rows: int, cols: int, lanes: int, fmt=BF16):
        self.dut = dut
        self.rows, self.cols, self.lanes = rows, cols, lanes
        self.a_layout = tile_a_stream(fmt, lanes).members["payload"].shape
        self.b_layout = tile_b_stream(fmt, lanes).members["payload"].shape
        self.a_sources: list[Source] = []
        self.b_sources: list[Source] = []
        self.busy_trace: list[int] = []

    def read_out(self) -> np.ndarray:
        """The current ``out__<r>__<c>`` ports, uint16 (rows, cols)."""
        return np.array([[uint(getattr(self.dut, f"out__{r}__{c}")) for c in range(self.cols)]
                         for r in range(self.rows)], dtype=np.uint16)

    async def run(self, A, B, *, clear=None, gap_a=0.0, gap_b=0.0, rnd=None,
                  max_cycles: int | None = None) -> TileRun:
        """Stream one reduction and wait for it to finish (call on a falling edge, reset
        released; returns on a falling edge with every stream idle).

        Parameters
        ----------
        A, B : arrays (cols, groups, lanes) and (rows, groups, lanes) of bf16 bit patterns
            Group ``g`` of column ``c``'s stream is ``A[c, g]``, of row ``r``'s ``B[r, g]``.
        clear : None or bool array broadcastable to (cols, groups)
            Which A groups carry ``clear``; ``None``: the first group of every column (a new
            reduction from zero in every PE).  All false continues the accumulators.
        gap_a, gap_b : float or a sequence of ``cols`` / ``rows`` floats
            Probability that column ``c``'s (row ``r``'s) stream idles in a cycle instead of
            offering its next group (bubbles; an offered group stays valid until taken).
        rnd : random.Random, optional
            Source of the gaps (default ``random.Random(0)``); pass a seeded one.
        max_cycles : int, optional
            Fail (``AssertionError``) after this many cycles; default ``200 * (groups + 10)``.

        Returns
        -------
        TileRun
            ``(out, busy_cycles, cycles)``: the outputs read once every group was taken and
            ``busy`` was low, the number of busy cycles and the cycles run.
        """
        A = np.asarray(A)
        B = np.asarray(B)
        groups = A.shape[1] if A.ndim == 3 else -1
        if A.shape != (self.cols, groups, self.lanes) or B.shape != (self.rows, groups,
                                                                      self.lanes):
            raise ValueError(f"A {A.shape} and B {B.shape} do not fit a {self.rows} x "
                             f"{self.cols} tile of {self.lanes} lanes with one group count")
        if clear is None:
            clear = np.zeros((self.cols, groups), dtype=bool)
            clear[:, 0] = True
        clear = np.broadcast_to(np.asarray(clear, dtype=bool), (self.cols, groups))
        gaps_a = _per_stream(gap_a, self.cols, "gap_a")
        gaps_b = _per_stream(gap_b, self.rows, "gap_b")
        rnd = rnd if rnd is not None else random.Random(0)

        self.a_sources = [
            Source(self.dut, f"a__{c}",
                   [({"a": A[c, g].tolist(), "clear": int(clear[c, g])}, {})
                    for g in range(groups)], rnd, gaps_a[c], self.a_layout)
            for c in range(self.cols)]
        self.b_sources = [
            Source(self.dut, f"b__{r}", [({"b": B[r, g].tolist()}, {}) for g in range(groups)],
                   rnd, gaps_b[r], self.b_layout)
            for r in range(self.rows)]
        sources = self.a_sources + self.b_sources
        self.busy_trace = []

        def sample_busy(cycle):
            self.busy_trace.append(uint(self.dut.busy))

        def finished():
            # busy low in a cycle after the last group was taken (a tile may start working
            # only in the cycle after it takes a group)
            if not all(s.done for s in sources) or self.busy_trace[-1]:
                return False
            taken = [s.accepted_cycles[-1] for s in sources if s.accepted_cycles]
            return not taken or len(self.busy_trace) - 1 > max(taken)

        cycles = await run(self.dut, sources, [], finished,
                           max_cycles if max_cycles is not None else 200 * (groups + 10),
                           check=sample_busy)
        return TileRun(self.read_out(), sum(self.busy_trace), cycles)


async def drive_tile(dut, A, B, **kwargs) -> TileRun:
    """One reduction through :class:`TileDriver` (its ``rows``, ``cols`` and ``lanes`` taken
    from the shapes of ``B`` and ``A``); the keyword arguments are :meth:`TileDriver.run`'s."""
    A, B = np.asarray(A), np.asarray(B)
    return await TileDriver(dut, B.shape[0], A.shape[0], A.shape[-1]).run(A, B, **kwargs)


__all__ = ["TileRun", "TileDriver", "drive_tile", "ZERO_SHARES", "operands", "expect",
           "random_sweep", "power_stream"]

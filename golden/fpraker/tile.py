"""FPRaker tile: ``rows`` x ``cols`` PEs sharing term encoders, exponent blocks and B buffers.

Spec ``docs/specs/fpraker.md`` §4, §5 and §11 (items 4 and 5).  PE ``(r, c)`` computes
``sum_s A[c, s] . B[r, s]``: A (the serial operand, bfloat16) streams down column ``c`` through
one term encoder of ``lanes`` lanes shared by the column's PEs; B (the parallel operand) is
shared along row ``r`` from a per-row buffer.

Column protocols (§5.3, ``sync``)
---------------------------------
``sync = "lockstep"`` (the default; intra-column term lock-step [C]): each encoder lane
presents its current term to every PE of the column.  A PE may process lane ``i`` only when the
term is not yet ``taken`` by it and the lane is not ``done`` for it (out of bounds, or B zero).  The PEs run the cycle rules of :mod:`golden.fpraker.pe` (step or group
exponent mode) with that eligibility mask.  At the end of a cycle, encoder lane ``i`` pops its
term when every PE has ``taken | done`` for it (this cycle's takes count), which clears the
``taken`` flags; it drops all its remaining terms when every PE is ``done`` for it (the OB
signals AND-ed down the column).  A PE's rounding, and so its result, can depend on its column
neighbours' stalls (the tile model simulates the column, it never calls the PE model per PE).

``sync = "independent"`` (per-PE term selectors [C']): the column's encoder broadcasts every
lane's whole term mask, and each PE selects its own next term per lane, as the standalone PE
does.  Every PE therefore runs exactly :func:`golden.fpraker.pe.pe_group` (in the tile's
exponent mode) on its own operands, from its start cycle: at least one cycle, until each of its
lanes is exhausted or done; its result and its cycles per group equal the standalone PE's.
The PEs of a column meet at group boundaries: the column's group ends when every PE has
finished it, so it takes ``max(min_cycles, max_r(offset_r + n_r))`` cycles, where ``n_r`` is PE
``r``'s standalone cycle count and ``offset_r`` its exponent-block wait (below) plus the
``pipeline`` stage; with ``share_exp`` that is ``max(n_2j, 1 + n_2j+1)`` over the row pairs
(each one more with the stage), at least ``min_cycles``.  A PE that
finished waits for the column's slowest PE (``column_wait``).

Register stage after the exponent block (``pipeline``)
------------------------------------------------------
``pipeline = 1`` (group mode only) registers the exponent block's outputs (``E_g``, the lanes'
offsets, the aligned accumulator) before the PE loads them: the block still computes a row's
``E_g`` in the row's serve cycle below (from the encoder lanes and the accumulator as they are
then), and the PE starts one cycle later.  The PE's accumulator does not change in between,
and a lane an unstarted PE has not taken pops only when that PE is done with it, so the
numerics equal ``pipeline = 0``; every row starts one cycle later, so every column's group
takes exactly one more cycle (``min_cycles`` included) under either protocol.  The cycle of
delay is counted as ``exponent_block``.

Exponent-block sharing (§4, ``share_exp``)
------------------------------------------
One exponent block serves the PEs of rows ``2j`` and ``2j + 1``: row ``2j`` starts the group in
the column's first cycle and row ``2j + 1`` one cycle later (in group mode that is the cycle the
block computes the row's ``E_g``; in step mode it is the same skew).  A column's group is
complete at the start of a cycle when every row has started and every encoder lane is empty
(lock-step) or every PE has finished its group (independent), and takes at least 2 cycles
with sharing (1 without), even if it holds no term (TV14).  The skew is the same under both
protocols: the odd row of a pair starts every group one cycle after the even row, so under
``sync = "independent"`` a pair needs ``max(n_2j, 1 + n_2j+1)`` cycles.

B buffers and inter-column synchronization (§5.2)
-------------------------------------------------
Column ``c`` may begin group ``s`` only when it has finished group ``s - 1`` and every column
has begun group ``s - b_buffers`` (``b_buffers = 0``: every group starts in all columns at once,
after the slowest column's previous group).  Group times do not depend on start times, so::

    start(c, s)  = max(finish(c, s - 1), max_c' start(c', s - N))     (N = b_buffers >= 1)
    start(c, s)  = max_c' finish(c', s - 1)                            (N = 0)
    finish(c, s) = start(c, s) + cycles(c, s)

and the tile takes ``max_c finish(c, last)`` cycles.

Stall causes (lane-cycles, the paper's Fig. 15 analogue)
--------------------------------------------------------
Every cycle of the tile, every lane of every PE is in exactly one class (checked in that order):

* ``inter_column``: the PE's column is not working on a group (waiting for the B buffers, or
  finished while other columns still run);
* ``exponent_block``: the PE has not started the group yet (its exponent block serves its pair
  partner first);
* ``column_wait`` (``sync = "independent"`` only): the PE has finished the group and waits for
  its column's other PEs;
* useful (:attr:`~golden.common.tile.TileResult.useful`): the lane processed a term;
* ``shift_range``: the lane had an eligible, in-bounds term outside the ``dmax`` window;
* ``lock_step`` (``sync = "lockstep"`` only): the encoder lane presents a term this PE has
  already taken, waiting for a column neighbour;
* ``no_term``: the lane has no term for this PE (encoder lane empty, out of bounds, B zero,
  dropped this cycle) while the column still works on the group.
"""

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .. import ConfigError, check_bool, check_choice, check_int
from ..common.accumulator import Acc, acc_arrays, decode_bf16, read_out_bits
from ..common.tile import TileResult, check_tile_operands, gemm_groups
from ..common.tile import pe_tile_base
from .pe import MSB9, RECODE, PEConfig, LaneState, start_group, step_lanes

#: stall causes of :attr:`TileResult.stalls`, in the order the classes are checked
STALL_CAUSES = ("inter_column", "exponent_block", "column_wait", "shift_range", "lock_step",
                "no_term")
#: intra-column synchronization protocols (spec §5.3): term lock-step [C] or per-PE term
#: selectors over broadcast term masks [C']
SYNCS = ("lockstep", "independent")
#: most register stages after the exponent block (``TileConfig.pipeline``)
MAX_PIPELINE = 1
#: most interleaved contexts of the C-slow tile (``TileConfig.contexts``)
MAX_CONTEXTS = 8
#: per-(column, group) lane-cycle counters of the column simulation
_COUNTERS = ("useful", "exponent_block", "column_wait", "shift_range", "lock_step", "no_term")


@dataclass(frozen=True)
class TileConfig(pe_tile_base(
        PEConfig,
        ("rows", int, 8, "PE rows: B operands, one per row (paper: 8), 1..64"),
        ("cols", int, 8, "PE columns: A operands, one term encoder per column (paper: 8), 1..64"),
        "lanes",
        ("share_exp", bool, True, "one exponent block per two PEs of a column, the row pairs "
                                  "skewed by a cycle (spec §4; the paper's)"),
        ("b_buffers", int, 1, "B-buffer run-ahead: how many groups a column may run ahead of "
                              "the slowest, 0..8 (spec §5.2; paper: 1)"),
        ("sync", str, "lockstep", "how the PEs of a column share its term encoder (spec §5.3): "
                                  "'lockstep' (a term popped when every PE took it) or "
                                  "'independent' (each PE selects its own terms; the PEs meet "
                                  "at group boundaries)"),
        ("pipeline", int, 0, "register stages after the exponent block, 0 or 1 (1 needs "
                             "exp_mode 'group'): one more cycle per group, the same results"),
        ("contexts", int, 1, "independent GEMMs the tile holds in rotation, 1..8 (the C-slow "
                             "tile): cycle t serves GEMM t mod contexts"),
        "exp_mode", exp_mode="group")):
    """Configuration of the FPRaker tile (spec §9.1); defaults are the paper's 8x8 tile.

    ``rows``: PE rows (B operands, one per row; paper: 8).  ``cols``: PE columns (A operands,
    one term encoder per column; paper: 8).  ``share_exp``: one exponent block per two PEs of a
    column (row pairs skewed by a cycle, spec §4).  ``b_buffers``: B-buffer run-ahead, how many
    groups a column may run ahead of the slowest (spec §5.2; paper: 1).  ``sync``: how the PEs
    of a column share its term encoder (spec §5.3): ``"lockstep"`` (each encoder lane presents
    one term to every PE and pops it when all took it) or ``"independent"`` (the encoder
    broadcasts each lane's term mask and every PE selects its own terms, exactly as the
    standalone PE; the PEs meet at group boundaries).  ``pipeline``: register stages after the
    exponent block, 0 or 1 (1 needs ``exp_mode = "group"``; module docstring): one more cycle
    per group, the same results.  ``contexts``: independent GEMMs the tile holds in rotation
    (1 to :data:`MAX_CONTEXTS`; the RTL's C-slow version, :mod:`hdl.fpraker.tile`): cycle ``t``
    serves GEMM ``t mod contexts``, and each GEMM sees the one-context tile's cycles, so every
    model here describes one context.  The other fields are
    :class:`PEConfig`'s, with its defaults and validation, except ``exp_mode``, ``"group"`` by
    default (the paper's once-per-group exponent block); :attr:`pe` is that PE configuration.
    """

    def __post_init__(self):
        check_int(self, "rows", 1, 64)
        check_int(self, "cols", 1, 64)
        check_bool(self, "share_exp")
        check_int(self, "b_buffers", 0, 8)
        check_choice(self, "sync", SYNCS)
        check_int(self, "pipeline", 0, MAX_PIPELINE)
        check_int(self, "contexts", 1, MAX_CONTEXTS)
        super().__post_init__()
        if self.pipeline and self.exp_mode != "group":
            raise ConfigError(type(self).__name__, "pipeline", self.pipeline,
                              "0 unless exp_mode is 'group' (the stage holds the group's "
                              "exponent block outputs)")

    @property
    def min_cycles(self) -> int:
        """Cycles a column's group takes at least (TV14; one more with the ``pipeline``
        stage)."""
        return (2 if self.share_exp else 1) + self.pipeline

    def row_offsets(self):
        """Per row, the cycles before its exponent block serves it at the start of every group
        (spec §4): 1 for the odd row of each pair with ``share_exp``, else 0."""
        return (np.arange(self.rows) % 2) if self.share_exp else np.zeros(self.rows, np.int64)

    def start_offsets(self):
        """Per row, the cycles before it starts the group: :meth:`row_offsets` plus the
        ``pipeline`` stage."""
        return self.row_offsets() + self.pipeline


# ----------------------------------------------------------------------------------------------
# one group of many independent columns

def _retire(fin, idx, R, out, cur, ln):
    """Columns ``fin`` (a mask over the running columns ``idx``) finished their group: write
    their PEs' accumulators ``cur`` into ``out`` and drop them from the running state (``ln``
    included).  Returns the running columns, their accumulators and the mask ``keep`` of the
    columns that go on (for the caller's own per-column state)."""
    rows = (idx[fin][:, None] * R + np.arange(R)).reshape(-1)
    fr = np.repeat(fin, R)
    for o, x in zip(out, cur):
        o[rows] = x[fr]
    keep = ~fin
    keep_r = np.repeat(keep, R)
    ln.take(keep_r)
    return idx[keep], tuple(x[keep_r] for x in cur), keep


def _group_state(acc, A, B, pe):
    """The state both column protocols start a group from, for ``n`` columns of ``R`` PEs
    (the arguments are :func:`_columns_group`'s): the PEs' lanes (PE ``(col, r)`` at
    ``col * R + r``), copies of the accumulators to run (``cur``) and to retire finished
    columns into (``out``), the running columns (all of them) and the cycles per column
    (zero).  Returns ``(ln, cur, out, idx, cycles)``."""
    n, L = A.shape
    R = B.shape[1]
    ln = LaneState(np.repeat(A, R, axis=0), B.reshape(n * R, L), pe)
    cur = tuple(np.asarray(a).copy() for a in acc)
    return ln, cur, tuple(a.copy() for a in cur), np.arange(n), np.zeros(n, dtype=np.int64)


def _columns_group(acc, A, B, cfg, pe, counts):
    """Run one group on ``n`` independent columns of ``R`` PEs.

    ``acc``: accumulator arrays of shape (n * R,) (column-major: PE (col, r) at col * R + r);
    ``A``: (n, lanes) bf16 of each column; ``B``: (n, R, lanes).  Adds each cycle's lane
    classes into ``counts`` (cause -> array (n,)).  Returns (acc arrays, cycles (n,)).
    """
    n, L = A.shape
    R = B.shape[1]
    ln, cur, out, idx, cycles = _group_state(acc, A, B, pe)
    act_a, _, _, ma = decode_bf16(A)
    enc = RECODE[pe.encoding][np.where(act_a, ma, 0)][..., 0]       # encoder lanes (n, L)
    offset, begin = cfg.row_offsets(), cfg.start_offsets()
    served = np.zeros((n, R), dtype=bool)
    started = np.zeros((n, R), dtype=bool)
    taken = np.zeros((n, R, L), dtype=bool)
    c = 0
    while idx.size:
        c += 1
        m = idx.size
        ln.rem = np.repeat(enc, R, axis=0)
        # the exponent block serves a row (E_g from the lanes as they are now); the row starts
        # when the pipeline stage has passed it on
        serve = (~served) & (offset[None, :] < c)
        if pe.exp_mode == "group" and serve.any():
            start_group(ln, cur, pe, rows=serve.reshape(-1))
        served |= serve
        started |= begin[None, :] < c
        done0 = ln.done.reshape(m, R, L).copy()
        mask = (started[:, :, None] & ~taken).reshape(m * R, L)
        nxt, d = step_lanes(ln, cur, pe, mask)
        st = started.reshape(-1)
        cur = tuple(np.where(st, x, y) for x, y in zip(nxt, cur))
        proc = d["proc"].reshape(m, R, L)
        shift = (d["elig"] & ~d["ob_a"] & ~d["proc"]).reshape(m, R, L)
        has = (enc != 0)[:, None, :]
        lock = has & ~done0 & taken & ~proc & ~shift
        s3 = started[:, :, None]
        counts["useful"][idx] += (s3 & proc).sum(axis=(1, 2))
        counts["shift_range"][idx] += (s3 & shift).sum(axis=(1, 2))
        counts["lock_step"][idx] += (s3 & lock).sum(axis=(1, 2))
        counts["exponent_block"][idx] += (~started).sum(axis=1) * L
        counts["no_term"][idx] += (s3 & ~proc & ~shift & ~lock).sum(axis=(1, 2))
        # encoder lanes: pop when every PE has taken or is done, drop when every PE is done
        done = ln.done.reshape(m, R, L)
        taken |= proc
        adv = (taken | done).all(axis=1) & (enc != 0)
        j = MSB9[enc]
        enc = np.where(adv, enc & ~(np.int64(1) << j), enc)
        enc = np.where(done.all(axis=1), 0, enc)
        taken &= ~adv[:, None, :]
        cycles[idx] += 1
        fin = started.all(axis=1) & (enc == 0).all(axis=1) & (c >= cfg.min_cycles)
        if fin.any():
            idx, cur, keep = _retire(fin, idx, R, out, cur, ln)
            enc, served, started, taken = enc[keep], served[keep], started[keep], taken[keep]
    return out, cycles


def _columns_group_independent(acc, A, B, cfg, pe, counts):
    """:func:`_columns_group` under ``sync = "independent"`` (spec §5.3 [C']): every PE runs
    the standalone PE's group (:func:`golden.fpraker.pe.pe_group`'s rules on its own copy of
    the encoder's term masks) from its start cycle (the §4 skew), at least one cycle, until
    its own lanes are exhausted or done; the column's group ends when every PE has finished
    and ``min_cycles`` have passed.  A PE that finished waits (``column_wait``)."""
    n, L = A.shape
    R = B.shape[1]
    ln, cur, out, idx, cycles = _group_state(acc, A, B, pe)
    # a PE's own terms never pop before it starts: its E_g is the same whether the exponent
    # block's outputs wait in the pipeline stage or not
    offset = cfg.start_offsets()
    started = np.zeros((n, R), dtype=bool)
    finished = np.zeros((n, R), dtype=bool)
    c = 0
    while idx.size:
        c += 1
        m = idx.size
        new = (~started) & (offset[None, :] < c)
        if pe.exp_mode == "group" and new.any():
            start_group(ln, cur, pe, rows=new.reshape(-1))
        started |= new
        active = started & ~finished
        act = active.reshape(-1)
        nxt, d = step_lanes(ln, cur, pe, np.repeat(act[:, None], L, axis=1))
        cur = tuple(np.where(act, x, y) for x, y in zip(nxt, cur))
        proc = d["proc"].reshape(m, R, L)
        shift = (d["elig"] & ~d["ob_a"] & ~d["proc"]).reshape(m, R, L)
        a3 = active[:, :, None]
        n_proc = (a3 & proc).sum(axis=(1, 2))
        n_shift = (a3 & shift).sum(axis=(1, 2))
        counts["useful"][idx] += n_proc
        counts["shift_range"][idx] += n_shift
        counts["exponent_block"][idx] += (~started).sum(axis=1) * L
        counts["column_wait"][idx] += (started & finished).sum(axis=1) * L
        counts["no_term"][idx] += active.sum(axis=1) * L - n_proc - n_shift
        # a PE finishes its group with the cycle that leaves its lanes exhausted or done
        finished |= active & ln.complete().reshape(m, R)
        cycles[idx] += 1
        fin = finished.all(axis=1) & (c >= cfg.min_cycles)
        if fin.any():
            idx, cur, keep = _retire(fin, idx, R, out, cur, ln)
            started, finished = started[keep], finished[keep]
    return out, cycles


def _run_columns(A, B, cfg, progress=None):
    """Every column of ``A`` (n, G, lanes) against its ``R`` rows of ``B`` (n, R, G, lanes, or
    a function of the group index returning that group's (n, R, lanes)), group after group from
    zero accumulators.  Returns (acc arrays (n * R,), cycles (n, G), counts cause -> (n, G))."""
    n, G, L = A.shape
    R = cfg.rows
    pe = cfg.pe
    group_b = B if callable(B) else (lambda s: B[:, :, s])
    acc = acc_arrays(Acc.ZERO, n * R, pe.keep_bits)
    cycles = np.zeros((n, G), dtype=np.int64)
    counts = {k: np.zeros((n, G), dtype=np.int64) for k in _COUNTERS}
    group = _columns_group_independent if cfg.sync == "independent" else _columns_group
    for s in range(G):
        cnt = {k: np.zeros(n, dtype=np.int64) for k in counts}
        acc, cycles[:, s] = group(acc, A[:, s], group_b(s), cfg, pe, cnt)
        for k in counts:
            counts[k][:, s] = cnt[k]
        if progress is not None:
            progress(s + 1, G)
    return acc, cycles, counts


def schedule(group_cycles, b_buffers: int):
    """Start cycles of every (column, group) under the B-buffer rule of spec §5.2 (module
    docstring) and the tile's total cycles.  ``group_cycles``: (cols, groups) ints, or
    (tiles, cols, groups) for many independent tile runs (then the totals are an array)."""
    gc = np.asarray(group_cycles, dtype=np.int64)
    single = gc.ndim == 2
    if single:
        gc = gc[None]
    T, C, G = gc.shape
    start = np.zeros((T, C, G), dtype=np.int64)
    finish = np.zeros((T, C, G), dtype=np.int64)
    for s in range(G):
        prev = finish[:, :, s - 1] if s else np.zeros((T, C), dtype=np.int64)
        if b_buffers == 0:
            start[:, :, s] = prev.max(axis=1, keepdims=True)
        else:
            gate = (start[:, :, s - b_buffers].max(axis=1, keepdims=True) if s >= b_buffers
                    else 0)
            start[:, :, s] = np.maximum(prev, gate)
        finish[:, :, s] = start[:, :, s] + gc[:, :, s]
    total = finish[:, :, -1].max(axis=1)
    return (start[0], int(total[0])) if single else (start, total)


def _stalls(counts, group_cycles, total, R, L):
    """The stall dict of a tile run from the per-(column, group) counts."""
    stalls = {k: int(counts[k].sum()) for k in STALL_CAUSES if k != "inter_column"}
    C = group_cycles.shape[0]
    stalls["inter_column"] = int((C * total - group_cycles.sum()) * R * L)
    return {k: stalls[k] for k in STALL_CAUSES}


def tile_run(A, B, cfg: TileConfig = TileConfig()) -> TileResult:
    """Run a tile over whole streams (spec §11 item 5): ``A`` (cols, groups, lanes) and ``B``
    (rows, groups, lanes) bfloat16 bits; every PE starts from a zero accumulator.

    Returns
    -------
    golden.common.tile.TileResult
        ``out[r, c]`` the bf16 read-out (``out_round``) of PE ``(r, c)``; ``cycles`` the tile's
        cycles; ``stalls`` lane-cycles per cause (:data:`STALL_CAUSES`); ``group_cycles``
        (cols, groups).

    Raises
    ------
    ValueError
        Operand shapes or values (:func:`golden.common.tile.check_tile_operands`), Inf/NaN
        operands.
    """
    A, B = check_tile_operands(A, B, cfg.rows, cfg.cols, cfg.lanes)
    C, R, L = cfg.cols, cfg.rows, cfg.lanes
    acc, gc, counts = _run_columns(A, np.broadcast_to(B[None], (C,) + B.shape), cfg)
    _, total = schedule(gc, cfg.b_buffers)
    out = read_out_bits(*acc, cfg.pe).reshape(C, R).T.copy()
    return TileResult(out=out, cycles=total, stalls=_stalls(counts, gc, total, R, L),
                      group_cycles=gc, useful=int(counts["useful"].sum()),
                      lane_cycles=total * R * C * L)


class GemmResult(NamedTuple):
    """A GEMM on one FPRaker tile (:func:`golden.fpraker.gemm.tile_gemm`)."""

    #: bf16 results, shape (N, M): ``out[n, m] = P[n] . S[m]``
    out: np.ndarray
    #: cycles of one tile doing every tile run one after another
    cycles: int
    #: tile runs: ceil(N / rows) * ceil(M / cols)
    tile_runs: int
    #: groups of ``lanes`` per tile run: ceil(K / lanes)
    groups: int
    #: multiply-accumulates of the GEMM, M * N * K
    macs: int
    #: stall cause -> lane-cycles, summed over the tile runs
    stalls: dict
    #: lane-cycles that processed a term
    useful: int
    #: cycles * rows * cols * lanes
    lane_cycles: int


def tile_gemm_numpy(S, P, cfg: TileConfig = TileConfig(), progress=None,
                    chunk: int = 4096) -> GemmResult:
    """A whole GEMM on FPRaker tiles (spec §5.1, §6): ``out[n, m] = sum_k P[n, k] * S[m, k]``,
    on this module's vectorised NumPy model (the specification of the GEMM mapping;
    :func:`golden.fpraker.gemm.tile_gemm` chooses between it and the compiled engine).

    ``S`` (M, K) is the serial operand (row ``m`` streams down a tile column as A), ``P`` (N, K)
    the parallel operand (row ``n`` is a tile row's B); both bfloat16 bit patterns.  The output
    is split into ``ceil(N / rows) x ceil(M / cols)`` tile runs of ``ceil(K / lanes)`` groups
    (zero padded; padded rows and columns are idle PEs).  Cycle-exact and bit-exact with
    :func:`tile_run` on every tile run; column instances are simulated ``chunk`` at a time, so
    memory stays proportional to ``chunk * rows * lanes`` plus the operands and the output.

    Parameters
    ----------
    progress : callable, optional
        ``progress(done, total)`` as the work advances.
    chunk : int
        Column instances per NumPy batch.

    Raises
    ------
    ValueError
        Operands that are not 2-D integer arrays, reduction lengths that differ, Inf/NaN values.
    """
    S3, P3 = gemm_groups(S, P, cfg.lanes)
    M, G, L = S3.shape
    N = P3.shape[0]
    R, C = cfg.rows, cfg.cols
    nb, cb = -(-N // R), -(-M // C)
    P4 = np.zeros((nb * R, G, L), dtype=np.int64)
    P4[:N] = P3
    P4 = P4.reshape(nb, R, G, L)
    Mp = cb * C
    S3p = np.zeros((Mp, G, L), dtype=np.int64)
    S3p[:M] = S3
    # column instances: (row block, serial row), all independent
    inst_rb = np.repeat(np.arange(nb), Mp)
    inst_m = np.tile(np.arange(Mp), nb)
    n_inst = inst_rb.size
    out = np.zeros((nb * R, Mp), dtype=np.uint16)
    gc = np.zeros((n_inst, G), dtype=np.int64)
    counts = dict.fromkeys(_COUNTERS, 0)
    steps = -(-n_inst // chunk) * G
    done_steps = 0
    for lo in range(0, n_inst, chunk):
        hi = min(n_inst, lo + chunk)
        rb, mm = inst_rb[lo:hi], inst_m[lo:hi]

        def report(s, g, base=done_steps):
            if progress is not None:
                progress(base + s, steps)

        acc, gc[lo:hi], cnt = _run_columns(S3p[mm], lambda s: P4[rb, :, s], cfg, report)
        done_steps += G
        res = read_out_bits(*acc, cfg.pe).reshape(hi - lo, R)
        out[(rb[:, None] * R + np.arange(R)).reshape(-1), np.repeat(mm, R)] = res.reshape(-1)
        for k, v in cnt.items():
            counts[k] += int(v.sum())
    # tile runs: (row block, column block) -> C column instances
    gct = gc.reshape(nb, cb, C, G).reshape(nb * cb, C, G)
    _, totals = schedule(gct, cfg.b_buffers)
    cycles = int(totals.sum())
    stalls = {k: counts[k] for k in STALL_CAUSES if k != "inter_column"}
    stalls["inter_column"] = int((C * totals.sum() - gct.sum()) * R * L)
    return GemmResult(out=out[:N, :M], cycles=cycles, tile_runs=nb * cb, groups=G,
                      macs=M * N * np.asarray(S).shape[1],
                      stalls={k: stalls[k] for k in STALL_CAUSES}, useful=counts["useful"],
                      lane_cycles=cycles * R * C * L)

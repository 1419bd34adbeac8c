"""Accelerated FPRaker tile GEMM: a numba copy of :func:`golden.fpraker.tile.tile_gemm_numpy`.

This module is **not** a specification.  The NumPy tile model (:mod:`golden.fpraker.tile` on
top of :mod:`golden.fpraker.pe` and :mod:`golden.common.accumulator`) is the spec in code; this
engine re-expresses its column-group simulation in scalar integer code compiled by numba
(``@njit``, nopython) so that whole-network GEMMs run in seconds.  It is checked against the
NumPy model bit for bit and cycle for cycle (``tests/test_golden_fpraker_tile_batch.py``: the
read-out, the tile cycles, every stall count, the useful lane-cycles, tile runs and groups on
random shapes, operand kinds and configurations).  Any change to the NumPy model's protocol or
arithmetic must be mirrored here; the test suite catches a divergence.

numba (:mod:`golden.common.jit`) is optional: without it :func:`available` is false and
:func:`tile_gemm_fast` raises ``RuntimeError`` (callers then use the NumPy model).

What is compiled (per column instance = one tile row block x one serial row, all independent):
group after group, the column protocol of the configuration's ``sync``: the lock-step cycle
protocol of :func:`golden.fpraker.tile._columns_group` (:func:`_gemm_kernel`: encoder lanes
shared by the column's PEs, ``taken``/``done`` flags, pops and drops, the exponent-block skew
of ``share_exp``, the ``pipeline`` stage, ``min_cycles``) or the independent protocol of
:func:`golden.fpraker.tile._columns_group_independent` (:func:`_gemm_kernel_independent`: each
PE's group run to its end on its own copy of the term masks, the column's group time the
latest PE end after its skew, at least ``min_cycles``), the PE cycle rules of
:func:`golden.fpraker.pe.step_lanes` / :func:`~golden.fpraker.pe.start_group` in both exponent modes,
``shift_jam``, ``align_acc`` and NORM_RNE (:func:`golden.common.accumulator.norm_rne`: RNE of
the signed step sum to ``1.P``, exponent kept modulo ``2**10`` as the ``overflow="wrap"``
rounding block does), the stall-class counters and the cycles of every (instance, group).  The
term tables are the NumPy model's own (``RECODE``, ``MSB9``).  The B-buffer schedule, the
stall totals and the bfloat16 read-out stay NumPy (the model's own functions).

Lane sets are kept as int64 bit masks (bit ``i`` = lane ``i``; ``lanes <= 64``).  Two
shortcuts, both exact: in group mode the accumulator is normalized once at the group's end
(the model normalizes ``X`` every cycle but keeps only the last value, and ``X`` does not
change in a cycle without a processed term); in step mode a PE cycle without an eligible lane
leaves the accumulator as it is (the model aligns it to its own exponent and renormalizes,
which is the identity).

Differences from :func:`~golden.fpraker.tile.tile_gemm_numpy` outside the results: ``progress``
counts column instances rather than (chunk, group) steps; ``threads`` runs blocks of instances
on threads (every instance writes only its own outputs, so results do not depend on it); an
empty GEMM (no serial or no parallel row) returns an empty result.
The JIT cache is :func:`golden.common.jit.jit`'s (``__pycache__`` next to this file, unless
that folder is read-only or ``NUMBA_CACHE_DIR`` says otherwise).
"""

import time

import numpy as np

from ..common.accumulator import decode_bf16, read_out_bits
from ..common.jit import jit, numba
from ..common.tile import gemm_groups
from .pe import MSB9, RECODE
from .tile import STALL_CAUSES, GemmResult, TileConfig, schedule

#: order of the per-instance counters the kernels return
_COUNTS = ("useful", "exponent_block", "shift_range", "lock_step", "no_term", "column_wait")


# ----------------------------------------------------------------------------------------------
# bit intrinsics (LLVM ctpop / cttz / ctlz; plain Python without numba)

if numba is not None:
    from llvmlite import ir as _ir
    from numba.core import types as _types
    from numba.core.extending import intrinsic as _intrinsic

    def _bit_intrinsic(emit):
        """The intrinsic whose code on an integer is ``emit(builder, value)``, of the
        integer's type; its name and docstring are ``emit``'s."""
        def typer(typingctx, src):
            if not isinstance(src, _types.Integer):
                return None

            def codegen(context, builder, signature, args):
                return emit(builder, args[0])
            return src(src), codegen
        typer.__name__, typer.__qualname__ = emit.__name__, emit.__qualname__
        typer.__doc__ = emit.__doc__
        return _intrinsic(typer)

    @_bit_intrinsic
    def _popcount(builder, x):
        """Set bits of an integer (LLVM ``ctpop``)."""
        return builder.ctpop(x)

    @_bit_intrinsic
    def _ctz(builder, x):
        """Index of the lowest set bit of a non-zero integer (LLVM ``cttz``)."""
        return builder.cttz(x, _ir.Constant(_ir.IntType(1), 0))

    @_bit_intrinsic
    def _clz(builder, x):
        """Leading zeros of an integer (LLVM ``ctlz``)."""
        return builder.ctlz(x, _ir.Constant(_ir.IntType(1), 0))
else:
    def _popcount(m):
        return bin(m & 0xFFFFFFFFFFFFFFFF).count("1")

    def _ctz(m):
        return ((m & -m) & 0xFFFFFFFFFFFFFFFF).bit_length() - 1

    def _clz(m):
        return 64 - (m & 0xFFFFFFFFFFFFFFFF).bit_length()


# ----------------------------------------------------------------------------------------------
# scalar kernels (compiled on first call)

@jit
def _shift_jam(x, s):
    """Scalar :func:`golden.common.accumulator.shift_jam`."""
    if s > 0:
        if s > 62:
            s = 62
        r = x >> s
        if (x & ((np.int64(1) << s) - 1)) != 0:
            r |= 1
        return r
    ns = -s
    if ns > 62:
        ns = 62
    return x << ns


@jit
def _norm(X, E, F, P):
    """Scalar NORM_RNE (``round_checked(norm_config(cfg), X, E)``): the signed sum
    ``X * 2**(E - F)`` rounded to nearest even into ``1.P``; the exponent wraps to 10 bits
    (format ``e10m<P>`` with ``overflow="wrap"``).  Returns ``(zero, sign, exp, sig)``."""
    if X == 0:
        return True, np.int64(0), np.int64(0), np.int64(0)
    sign = np.int64(0)
    mag = X
    if X < 0:
        sign = np.int64(1)
        mag = -X
    n = np.int64(63) - np.int64(_clz(mag))      # bit_length(mag) - 1
    s = n - P
    if s > 0:
        q = mag >> s
        rem = mag - (q << s)
        half = np.int64(1) << (s - 1)
        if rem > half or (rem == half and (q & 1) == 1):
            q += 1
    else:
        q = mag << (-s)
    carry = np.int64(0)
    if (q >> (P + 1)) != 0:
        q >>= 1
        carry = np.int64(1)
    e = E + n - F + carry
    e = ((e + 512) & 1023) - 512
    return False, sign, e, q


@jit
def _align(zero, sign, exp, sig, E, F, P):
    """Scalar :func:`golden.common.accumulator.align_acc`."""
    if zero:
        return np.int64(0)
    mag = _shift_jam(sig, E - exp - (F - P))
    return -mag if sign == 1 else mag


@jit
def _acc_state(R):
    """The accumulators of ``R`` PEs: zero, sign, exponent and significand arrays."""
    return (np.zeros(R, dtype=np.bool_), np.zeros(R, dtype=np.int64),
            np.zeros(R, dtype=np.int64), np.zeros(R, dtype=np.int64))


@jit
def _lane_state(L):
    """The scratch of ``L`` encoder lanes: each lane's ``k`` (:func:`_bounds`), term mask and
    term signs, A exponent and A sign (:func:`_load_group`), and the weight ``ea_i - t_i``
    (``ABe_i - t_i`` minus the B exponent) and sign of the term it presents
    (:func:`_present`)."""
    return (np.zeros(L, dtype=np.int64), np.zeros(L, dtype=np.int64),
            np.zeros(L, dtype=np.int64), np.zeros(L, dtype=np.int64),
            np.zeros(L, dtype=np.int64), np.zeros(L, dtype=np.int64),
            np.zeros(L, dtype=np.int64))


@jit
def _start_instance(q, Mp, R, zero, sign, exp, sig):
    """Column instance ``q`` (row block ``q // Mp`` against serial row ``q % Mp``) begins:
    every accumulator back to zero (a new reduction).  Returns its serial row and its first
    parallel row."""
    for r in range(zero.size):
        zero[r] = True
        sign[r] = 0
        exp[r] = 0
        sig[r] = 0
    rb = q // Mp
    return q - rb * Mp, rb * R


@jit
def _load_group(S, m, g, rec_rem, rec_negm, enc, negm, ea, sa):
    """The encoder lanes of serial row ``m``'s group ``g``: each lane's term mask ``enc`` and
    its signs ``negm`` (from the recoder tables), the A exponent ``ea`` (unbiased) and sign
    ``sa``.  Returns the mask of lanes that have terms."""
    one = np.int64(1)
    encm = np.int64(0)
    for i in range(S.shape[2]):
        a = np.int64(S[m, g, i])
        ef = (a >> 7) & 255
        sa[i] = (a >> 15) & 1
        ea[i] = ef - 127
        ix = 128 + (a & 127) if ef != 0 else 0
        enc[i] = rec_rem[ix]
        negm[i] = rec_negm[ix]
        if enc[i] != 0:
            encm |= one << i
    return encm


@jit
def _step_exponent(mask, tw, ebrow, zero, exp):
    """E over the lanes of ``mask`` (weights ``tw[i] + ebrow[i]``: the term's weight with the
    B exponent) and a non-zero accumulator's exponent ``exp``; 0 when there is neither."""
    one = np.int64(1)
    E = np.int64(0)
    any_w = False
    mm = mask
    while mm != 0:
        i = _ctz(mm)
        mm ^= one << i
        w = tw[i] + np.int64(ebrow[i])
        if not any_w or w > E:
            E = w
        any_w = True
    if not zero and (not any_w or exp > E):
        E = exp
    return E


@jit
def _bounds(mask, E, tw, ebrow, kmax, kk):
    """Per lane of ``mask`` its ``k = E - weight`` (into ``kk``); returns ``(base, run, ob)``:
    the smallest ``k`` of the lanes in bounds, those lanes, and the lanes out of bounds
    (``k > kmax``, OB-a)."""
    one = np.int64(1)
    base = np.int64(0)
    any_run = False
    run = np.int64(0)
    ob = np.int64(0)
    mm = mask
    while mm != 0:
        i = _ctz(mm)
        mm ^= one << i
        k = E - tw[i] - np.int64(ebrow[i])
        kk[i] = k
        if k > kmax:
            ob |= one << i
        else:
            run |= one << i
            if not any_run or k < base:
                base = k
            any_run = True
    return base, run, ob


@jit
def _present(i, terms, ea, sa, negm, msb9, tw, sneg):
    """Lane ``i`` presents the first of its remaining ``terms`` (a non-zero term mask): the
    term's weight ``ea[i] - t`` into ``tw`` and its sign (A's times the term's, 1: negative)
    into ``sneg``.  Returns the term's bit ``j`` (``t = 7 - j``)."""
    j = msb9[terms]
    tw[i] = ea[i] - (7 - j)
    sneg[i] = sa[i] ^ ((negm[i] >> j) & 1)
    return j


@jit
def _lanes_step(mask, E, tw, ebrow, sgbrow, sneg, kk, kmax, dmax, sh_t):
    """One PE cycle of the lanes of ``mask`` (term weights ``tw``, B exponents ``ebrow``, B
    signed significands ``sgbrow``, term signs ``sneg``) at the step exponent ``E``: the
    lanes in bounds (:func:`_bounds`) whose ``k`` is within ``dmax`` of the smallest one,
    ``base``, go through the adder tree, each B shifted left by ``dmax - (k - base)``.
    Returns ``(Tg, proc, shift, ob)``: the tree's sum on the ``2**(E - F)`` grid
    (:func:`_shift_jam` by ``base - sh_t``, ``sh_t = F - 7 - dmax``), the lanes processed,
    the lanes in bounds outside the window, and the lanes out of bounds (OB-a: ``k > kmax``;
    OB-b: processed at ``k >= kmax``)."""
    one = np.int64(1)
    base, run, ob = _bounds(mask, E, tw, ebrow, kmax, kk)      # OB-a
    T = np.int64(0)
    proc = np.int64(0)
    mm = run
    while mm != 0:
        i = _ctz(mm)
        mm ^= one << i
        d = kk[i] - base
        if d <= dmax:
            proc |= one << i
            v = np.int64(sgbrow[i]) << (dmax - d)
            if sneg[i] == 1:
                T -= v
            else:
                T += v
            if kk[i] >= kmax:
                ob |= one << i           # OB-b
    return _shift_jam(T, base - sh_t), proc, run & ~proc, ob


@jit
def _store(X, E, F, Pk, r, zero, sign, exp, sig):
    """Normalize the sum ``X`` on the ``2**(E - F)`` grid into PE ``r``'s accumulator."""
    z, s_, e_, m_ = _norm(X, E, F, Pk)
    zero[r] = z
    sign[r] = s_
    exp[r] = e_
    sig[r] = m_


@jit
def _add_step(Tg, E, F, Pk, r, zero, sign, exp, sig):
    """Step mode: PE ``r``'s accumulator aligned to ``E`` plus the step's sum ``Tg``,
    normalized back into it."""
    _store(_align(zero[r], sign[r], exp[r], sig[r], E, F, Pk) + Tg, E, F, Pk, r, zero, sign,
           exp, sig)


@jit
def _write_out(q, R, zero, sign, exp, sig, out_zero, out_sign, out_exp, out_sig, cnt, useful,
               exponent_block, shift_range, lock_step, no_term, column_wait):
    """Instance ``q``'s final accumulators into the outputs, PE ``(q, r)`` at ``q * R + r``,
    and its lane-cycle counters into ``cnt[q]`` (``_COUNTS`` order)."""
    for r in range(R):
        out_zero[q * R + r] = zero[r]
        out_sign[q * R + r] = sign[r]
        out_exp[q * R + r] = exp[r]
        out_sig[q * R + r] = sig[r]
    cnt[q, 0] = useful
    cnt[q, 1] = exponent_block
    cnt[q, 2] = shift_range
    cnt[q, 3] = lock_step
    cnt[q, 4] = no_term
    cnt[q, 5] = column_wait


@jit
def _gemm_kernel(S, ebP, sgbP, zmP, Mp, R, share, group, F, Pk, kmax, dmax, min_cycles, pipe,
                 rec_rem, rec_negm, msb9, lo, hi,
                 out_zero, out_sign, out_exp, out_sig, gc, cnt):
    """Column instances ``lo .. hi - 1`` of a GEMM (see :func:`_run`).

    ``S`` (Mp, G, L) bf16 bits of the serial rows; the parallel rows pre-decoded, shape
    (nb * R, G, L): ``ebP`` unbiased exponents, ``sgbP`` signed significands (``-SigB`` for a
    negative B), and ``zmP`` (nb * R, G) int64 the lane masks of zero B.  Instance ``q`` is row
    block ``q // Mp`` against serial row ``q % Mp``.  Writes the final accumulator of PE
    ``(q, r)`` at ``q * R + r``, the cycles of every (instance, group) in ``gc`` and the
    lane-cycle counters (``_COUNTS`` order, ``column_wait`` 0) of every instance in ``cnt``.
    ``pipe``: the tile's ``pipeline`` stage (a row's exponent block serves it ``pipe`` cycles
    before it starts).
    """
    G = S.shape[1]
    L = S.shape[2]
    sh_t = F - 7 - dmax
    one = np.int64(1)
    kk, enc, negm, ea, sa, tw, sneg = _lane_state(L)
    jl = np.zeros(L, dtype=np.int64)
    zero, sign, exp, sig = _acc_state(R)
    eg = np.zeros(R, dtype=np.int64)
    xg = np.zeros(R, dtype=np.int64)
    done = np.zeros(R, dtype=np.int64)
    taken = np.zeros(R, dtype=np.int64)
    for q in range(lo, hi):
        m, r0 = _start_instance(q, Mp, R, zero, sign, exp, sig)
        n_use = 0
        n_exp = 0
        n_shift = 0
        n_lock = 0
        n_none = 0
        for g in range(G):
            # ---- group set-up: the encoder lanes (A); a zero B marks the PE's lane done
            _load_group(S, m, g, rec_rem, rec_negm, enc, negm, ea, sa)
            for r in range(R):
                done[r] = np.int64(zmP[r0 + r, g])
                taken[r] = 0
            # the exponent block serves rows in cycle 1, odd rows in cycle 2 when two share
            # one; a row starts ``pipe`` cycles after it was served
            n_started = 0
            c = 0
            while True:
                c += 1
                # the terms the encoder lanes present this cycle
                encm = np.int64(0)
                for i in range(L):
                    if enc[i] != 0:
                        encm |= one << i
                        jl[i] = _present(i, enc[i], ea, sa, negm, msb9, tw, sneg)
                and_td = np.int64(-1)
                and_done = np.int64(-1)
                for r in range(R):
                    row = r0 + r
                    off = 1 if share and (r & 1) == 1 else 0
                    if group and c == 1 + off:
                        # exponent block: E_g over the first terms and the accumulator
                        E = _step_exponent(encm & ~done[r], tw, ebP[row, g], zero[r], exp[r])
                        eg[r] = E
                        xg[r] = _align(zero[r], sign[r], exp[r], sig[r], E, F, Pk)
                    if c < 1 + off + pipe:
                        # waiting for the (shared) exponent block and its pipeline stage
                        n_exp += L
                        and_td &= taken[r] | done[r]
                        and_done &= done[r]
                        continue
                    if c == 1 + off + pipe:
                        n_started += 1
                    dm = done[r]
                    tk = taken[r]
                    elig = encm & ~dm & ~tk
                    lock = encm & ~dm & tk
                    proc = np.int64(0)
                    shift = np.int64(0)   # in bounds but outside the dmax window
                    ob = np.int64(0)
                    if elig != 0:
                        if group:
                            E = eg[r]
                        else:
                            E = _step_exponent(elig, tw, ebP[row, g], zero[r], exp[r])
                        Tg, proc, shift, ob = _lanes_step(elig, E, tw, ebP[row, g],
                                                          sgbP[row, g], sneg, kk, kmax, dmax,
                                                          sh_t)
                        if group:
                            xg[r] += Tg
                        else:
                            _add_step(Tg, E, F, Pk, r, zero, sign, exp, sig)
                    # (step mode without an eligible lane leaves the accumulator unchanged:
                    # aligning it to its own exponent and renormalizing is exact)
                    n_p = _popcount(proc)
                    n_w = _popcount(shift)
                    n_l = _popcount(lock)
                    n_use += n_p
                    n_shift += n_w
                    n_lock += n_l
                    n_none += L - n_p - n_w - n_l
                    dm |= ob
                    tk |= proc
                    done[r] = dm
                    taken[r] = tk
                    and_td &= tk | dm
                    and_done &= dm
                # encoder lanes: pop when every PE has taken or is done, drop when all are done
                adv = and_td & encm
                mm = adv
                while mm != 0:
                    i = _ctz(mm)
                    mm ^= one << i
                    enc[i] &= ~(one << jl[i])
                mm = and_done & encm
                while mm != 0:
                    i = _ctz(mm)
                    mm ^= one << i
                    enc[i] = 0
                if adv != 0:
                    for r in range(R):
                        taken[r] &= ~adv
                if c >= min_cycles and n_started == R:
                    all_empty = True
                    for i in range(L):
                        if enc[i] != 0:
                            all_empty = False
                            break
                    if all_empty:
                        break
            gc[q, g] = c
            if group:
                for r in range(R):
                    _store(xg[r], eg[r], F, Pk, r, zero, sign, exp, sig)
        _write_out(q, R, zero, sign, exp, sig, out_zero, out_sign, out_exp, out_sig, cnt, n_use,
                   n_exp, n_shift, n_lock, n_none, 0)


@jit
def _gemm_kernel_independent(S, ebP, sgbP, zmP, Mp, R, share, group, F, Pk, kmax, dmax,
                             min_cycles, pipe, rec_rem, rec_negm, msb9, lo, hi,
                             out_zero, out_sign, out_exp, out_sig, gc, cnt):
    """:func:`_gemm_kernel` under ``sync = "independent"`` (same arguments and outputs): the
    PEs of a column do not interact within a group, so each PE runs its group to completion on
    its own copy of the encoder lanes' term masks (the standalone PE's rules,
    :func:`golden.fpraker.tile._columns_group_independent`), and the column's group takes
    ``max(min_cycles, max_r(offset_r + cycles_r))`` cycles; the lane-cycles of a PE outside
    its own cycles are ``exponent_block`` (before its start) and ``column_wait`` (after its
    end)."""
    G = S.shape[1]
    L = S.shape[2]
    sh_t = F - 7 - dmax
    one = np.int64(1)
    kk, enc, negm, ea, sa, tw, sneg = _lane_state(L)
    rem = np.zeros(L, dtype=np.int64)      # the PE's copy of each lane's remaining terms
    zero, sign, exp, sig = _acc_state(R)
    fin = np.zeros(R, dtype=np.int64)
    for q in range(lo, hi):
        m, r0 = _start_instance(q, Mp, R, zero, sign, exp, sig)
        n_use = 0
        n_exp = 0
        n_shift = 0
        n_busy = 0
        n_wait = 0
        for g in range(G):
            encm = _load_group(S, m, g, rec_rem, rec_negm, enc, negm, ea, sa)
            col = min_cycles
            for r in range(R):
                row = r0 + r
                off = (1 if share and (r & 1) == 1 else 0) + pipe
                # the PE's copy of the term masks; a zero B marks its lane done
                dm = np.int64(zmP[row, g])
                live = encm & ~dm
                mm = live
                while mm != 0:
                    i = _ctz(mm)
                    mm ^= one << i
                    rem[i] = enc[i]
                    _present(i, rem[i], ea, sa, negm, msb9, tw, sneg)
                E = np.int64(0)
                xg = np.int64(0)
                if group:
                    # exponent block: E_g over the first terms and the accumulator
                    E = _step_exponent(live, tw, ebP[row, g], zero[r], exp[r])
                    xg = _align(zero[r], sign[r], exp[r], sig[r], E, F, Pk)
                n = 0
                while True:
                    n += 1
                    if live != 0:
                        if not group:
                            E = _step_exponent(live, tw, ebP[row, g], zero[r], exp[r])
                        Tg, proc, shift, ob = _lanes_step(live, E, tw, ebP[row, g],
                                                          sgbP[row, g], sneg, kk, kmax, dmax,
                                                          sh_t)
                        n_use += _popcount(proc)
                        n_shift += _popcount(shift)
                        # each processed lane pops its term and presents the next
                        mm = proc
                        while mm != 0:
                            i = _ctz(mm)
                            mm ^= one << i
                            rem[i] &= ~(one << msb9[rem[i]])
                            if rem[i] == 0:
                                live &= ~(one << i)  # exhausted
                            else:
                                _present(i, rem[i], ea, sa, negm, msb9, tw, sneg)
                        live &= ~ob                  # OB-a, OB-b
                        if group:
                            xg += Tg
                        else:
                            _add_step(Tg, E, F, Pk, r, zero, sign, exp, sig)
                    if live == 0:
                        break
                if group:
                    _store(xg, E, F, Pk, r, zero, sign, exp, sig)
                n_exp += off * L
                n_busy += n * L
                fin[r] = off + n
                if off + n > col:
                    col = off + n
            for r in range(R):
                n_wait += (col - fin[r]) * L
            gc[q, g] = col
        _write_out(q, R, zero, sign, exp, sig, out_zero, out_sign, out_exp, out_sig, cnt, n_use,
                   n_exp, n_shift, 0, n_busy - n_use - n_shift, n_wait)


# ----------------------------------------------------------------------------------------------
# availability

def available() -> bool:
    """True when numba can be imported (the engine can run)."""
    return numba is not None


def _compiled(sync: str = "lockstep"):
    """The compiled kernel of the ``sync`` protocol; ``RuntimeError`` without numba."""
    if numba is None:
        raise RuntimeError("golden.fpraker.tile_batch needs numba (pip install numba); "
                           "use golden.fpraker.gemm.tile_gemm(..., engine='numpy') without it")
    return _gemm_kernel_independent if sync == "independent" else _gemm_kernel


# ----------------------------------------------------------------------------------------------
# the GEMM

def _run(S, P, cfg: TileConfig, progress=None, threads: int = 1, chunk: int = 2048):
    """The fast engine's GEMM: ``(GemmResult, group cycles (nb, Mp, G))``."""
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads={threads!r}: expected an int >= 1")
    kernel = _compiled(cfg.sync)
    S3, P3 = gemm_groups(S, P, cfg.lanes)
    # the NumPy model's operand checks (Inf/NaN, range) and messages
    decode_bf16(S3)
    decode_bf16(P3)
    M, G, L = S3.shape
    N = P3.shape[0]
    R, C = cfg.rows, cfg.cols
    nb, cb = -(-N // R), -(-M // C)
    # the parallel operand decoded once (every serial row reuses it), zero rows padded
    ef = (P3 >> 7) & 0xFF
    ebP = np.zeros((nb * R, G, L), dtype=np.int32)
    ebP[:N] = ef - 127
    mag = 128 + (P3 & 0x7F)
    sgbP = np.zeros((nb * R, G, L), dtype=np.int32)
    sgbP[:N] = np.where((P3 >> 15) & 1 == 1, -mag, mag)
    zb = np.ones((nb * R, G, L), dtype=np.int64)
    zb[:N] = ef == 0
    zmP = (zb << np.arange(L, dtype=np.int64)).sum(axis=2)   # disjoint bits: sum = OR
    del ef, mag, zb
    Mp = cb * C
    Sp = np.zeros((Mp, G, L), dtype=np.int32)
    Sp[:M] = S3
    n_inst = nb * Mp
    pe = cfg.pe
    zero = np.zeros(n_inst * R, dtype=np.bool_)
    sign = np.zeros(n_inst * R, dtype=np.int64)
    exp = np.zeros(n_inst * R, dtype=np.int64)
    sig = np.zeros(n_inst * R, dtype=np.int64)
    gc = np.zeros((n_inst, G), dtype=np.int64)
    cnt = np.zeros((n_inst, len(_COUNTS)), dtype=np.int64)
    rec = RECODE[cfg.encoding]
    rec_rem = np.ascontiguousarray(rec[:, 0])
    rec_negm = np.ascontiguousarray(rec[:, 1])

    def block(lo):
        # writes only the outputs of instances lo .. hi - 1: blocks are independent
        hi = min(n_inst, lo + chunk)
        kernel(Sp, ebP, sgbP, zmP, Mp, R, cfg.share_exp, cfg.exp_mode == "group", pe.frac_bits,
               pe.keep_bits, pe.kmax, pe.dmax, cfg.min_cycles, cfg.pipeline, rec_rem,
               rec_negm, MSB9,
               lo, hi, zero, sign, exp, sig, gc, cnt)
        return hi

    blocks = range(0, n_inst, chunk)
    if threads == 1 or len(blocks) <= 1:
        for lo in blocks:
            hi = block(lo)
            if progress is not None:
                progress(hi, n_inst)
    else:
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(max_workers=threads) as pool:    # the kernel releases the GIL
            for hi in pool.map(block, blocks):
                if progress is not None:
                    progress(hi, n_inst)
    bits = read_out_bits(zero, sign, exp, sig, pe).reshape(nb, Mp, R)
    out = bits.transpose(0, 2, 1).reshape(nb * R, Mp)
    gct = gc.reshape(nb, cb, C, G).reshape(nb * cb, C, G)
    _, totals = schedule(gct, cfg.b_buffers)
    cycles = int(totals.sum())
    tot = cnt.sum(axis=0)
    counts = {k: int(tot[i]) for i, k in enumerate(_COUNTS)}
    stalls = {k: counts[k] for k in STALL_CAUSES if k != "inter_column"}
    stalls["inter_column"] = int((C * totals.sum() - gct.sum()) * R * L)
    res = GemmResult(out=np.ascontiguousarray(out[:N, :M]), cycles=cycles, tile_runs=nb * cb,
                     groups=G, macs=M * N * np.asarray(S).shape[1],
                     stalls={k: stalls[k] for k in STALL_CAUSES}, useful=counts["useful"],
                     lane_cycles=cycles * R * C * L)
    return res, gc.reshape(nb, Mp, G)


def tile_gemm_fast(S, P, cfg: TileConfig = TileConfig(), progress=None,
                   threads: int = 1) -> GemmResult:
    """:func:`golden.fpraker.tile.tile_gemm_numpy` on the compiled engine: the same
    :class:`~golden.fpraker.tile.GemmResult`, bit for bit and cycle for cycle.

    ``progress(done, total)`` is called after every block of column instances (``total`` =
    ``ceil(N / rows) * cols * ceil(M / cols)`` instances, ``done`` increasing).  ``threads > 1``
    runs blocks of instances on that many threads; every instance writes only its own outputs,
    so the result does not depend on ``threads``.

    Raises
    ------
    RuntimeError
        numba is not installed (:func:`available` is false).
    ValueError
        The operand errors of :func:`~golden.fpraker.tile.tile_gemm_numpy`.
    """
    return _run(S, P, cfg, progress, threads)[0]


# ----------------------------------------------------------------------------------------------
# benchmark

def _timed(f):
    """``(result, wall seconds, CPU seconds of this process)`` of ``f()``."""
    w, c = time.perf_counter(), time.process_time()
    r = f()
    return r, time.perf_counter() - w, time.process_time() - c


def bench_tile_gemm(scale: int = 1, seed: int = 0) -> str:
    """Markdown table: MACs/s of the compiled engine and of the NumPy model on a MiniLM-like
    layer (``S`` 128 x 384 ReLU activations, ``P`` 384 x 384 N(0,1) weights, default
    :class:`~golden.fpraker.tile.TileConfig`) under both column protocols (``sync`` =
    ``"lockstep"`` and ``"independent"``), plus the engine in step mode, sizes divided by
    ``scale``.  MACs/s are given per wall second and per CPU second of this process (one core:
    the engine runs on one thread here, as does the NumPy model; CPU time is the robust figure
    on a loaded machine).  The engine's first call (JIT compile, or loading numba's cache) is
    timed separately, and the two engines' results are compared under each protocol; the
    notes give each protocol's cycles per group and its lane-cycle breakdown."""
    from .pe import random_operands
    from .tile import SYNCS, tile_gemm_numpy
    rng = np.random.default_rng(seed)
    M, K, N = max(1, 128 // scale), max(1, 384 // scale), max(1, 384 // scale)
    S, _ = random_operands(rng, M, K, "relu")
    P, _ = random_operands(rng, N, K, "normal")
    cfgs = {sync: TileConfig(sync=sync) for sync in SYNCS}
    kernels = [_compiled(sync) for sync in SYNCS]
    misses = sum(sum(k.stats.cache_misses.values()) for k in kernels)
    _, t_first, _ = _timed(lambda: [tile_gemm_fast(S[:1, :8], P[:1, :8], c)
                                    for c in cfgs.values()])
    how = ("JIT compile" if sum(sum(k.stats.cache_misses.values()) for k in kernels) > misses
           else "loaded from numba's cache")
    rows, notes = [], []
    for sync, cfg in cfgs.items():
        (fast, gc), w_fast, c_fast = _timed(lambda: _run(S, P, cfg))
        _, w_step, c_step = _timed(lambda: _run(S, P, TileConfig(sync=sync, exp_mode="step")))
        ref, w_np, c_np = _timed(lambda: tile_gemm_numpy(S, P, cfg))
        same = (np.array_equal(fast.out, ref.out) and fast.cycles == ref.cycles
                and fast.stalls == ref.stalls and fast.useful == ref.useful)
        macs = fast.macs
        for name, w, c in ((f"numba tile_gemm_fast (warm), sync={sync}", w_fast, c_fast),
                           (f"numba tile_gemm_fast (warm), sync={sync}, exp_mode=step", w_step,
                            c_step),
                           (f"NumPy tile_gemm, sync={sync}", w_np, c_np)):
            rows.append(f"| {name} | {w:.3f} | {c:.3f} | {macs / w / 1e6:.2f} M | "
                        f"{macs / c / 1e6:.2f} M |")
        lane = fast.lane_cycles
        shares = ", ".join(f"{k} {v / lane:.1%}" for k, v in
                           [("useful", fast.useful), *fast.stalls.items()])
        notes += [f"- sync={sync}: mean cycles per column group {gc.mean():.3f}; tile cycles "
                  f"per group {fast.cycles / (fast.tile_runs * fast.groups):.3f}; lane-cycles: "
                  f"{shares}; results identical (out, cycles, stalls, useful): "
                  f"{'yes' if same else 'NO'}"]
    cfg = cfgs["lockstep"]
    lines = [
        f"tile_gemm on a MiniLM-like layer: S {M}x{K} (relu) by P {N}x{K} (normal), "
        f"TileConfig() ({cfg.rows}x{cfg.cols}x{cfg.lanes}, {cfg.exp_mode} mode); "
        f"{macs:,} MACs, {fast.tile_runs} tile runs of {fast.groups} groups",
        "",
        "| engine | wall s | CPU s | MACs/s (wall) | MACs/s (CPU) |",
        "|---|---:|---:|---:|---:|",
        *rows,
        "",
        f"- numba first calls ({how}): {t_first:.2f} s wall",
        *notes,
    ]
    return "\n".join(lines)


__all__ = ["available", "bench_tile_gemm", "tile_gemm_fast"]

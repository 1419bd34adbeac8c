"""Equinox request dispatcher + instruction dispatcher: the cycle model (spec ``docs/specs/equinox.md``
§3.2–§3.4, ambiguities A15–A21, test vectors TV16 and TV19).

The front end of Equinox gives inference priority over training at instruction granularity.  The
*request dispatcher* queues host requests per service (an inference FIFO of single requests, a
training FIFO of batch descriptors), forms inference batches of ``b_inf`` requests — issuing an
incomplete batch padded with null slots once its first request has waited ``t_batch`` cycles
(adaptive batching) — and starts a context's batch whenever that context has none executing.
The *instruction dispatcher* issues one instruction per cycle from the inference (``I``) or the
training (``T``) context: while more than ``thresh`` inference requests wait, only inference
issues (priority mode); otherwise the two contexts alternate (round robin).  The same cycle
model serves the RTL testbench (:mod:`tb.equinox.dispatcher`, every port every cycle) and the
latency study (:mod:`flows.studies.dispatch`).

Timing (registered semantics, §3.2): every decision at cycle ``t`` — batch starts, the issued
instruction, the mode, completion pulses, host ``ready`` — is a function of the state ``S_t``
(and of ``cmdq_full[t]`` for the issue); its effects are visible in ``S_{t+1}``.  So a request
accepted at cycle ``t`` is counted in ``waiting`` from ``t + 1``, a batch started at ``t``
issues its first instruction at ``t + 1`` at the earliest, and a context whose completion pulse
is at ``t`` can start its next batch at ``t + 1``.

Choices this model makes (spec [C] items and the places where the spec leaves room):

* **Arrivals.**  ``inf_arrivals`` lists one cycle per inference request, ``trn_arrivals`` one
  cycle per training batch descriptor (training requests arrive as batches and bypass batch
  formation, §3.1); both are sorted (request ``k`` is the ``k``-th earliest, ties in list
  order) and several may share a cycle.  The host offers its oldest pending request of each
  service from its arrival cycle on, one per service per cycle; the dispatcher accepts it when
  the target FIFO is not full in ``S_t`` (``ready = count < capacity``, a pop in the same cycle
  does not make room until ``t + 1``).  A full queue stalls the host; nothing is ever dropped.
  The accept cycle is the request's timestamp for the batch timer.  Requests are named by index:
  ``r0, r1, …`` and training batches ``0, 1, …``; the hardware carries them as
  :data:`ID_BITS`-bit tags (index mod ``2**ID_BITS``).
* **Time origin.**  The run starts at reset, at cycle ``t0 = min(0, earliest arrival)``, and
  ends at ``cycles - 1``.  An arrival before cycle 0 preloads a queue: TV16's training batch
  "available at cycle 0" is ``trn_arrivals=[-1]`` (offered in the cycle before 0, in the FIFO at
  cycle 0).  ``cmdq_full`` is indexed by cycle (``cmdq_full[t]`` for ``0 <= t < cycles``); it is
  low before cycle 0.
* **Batch start (§3.2, A19, A21).**  The inference batch starts at ``t`` when no inference batch
  is executing and ``waiting > 0`` and (``waiting >= b_inf`` or, with ``adaptive``,
  ``t - accept(head) >= t_batch``).  The head request is always the first request of the next
  batch, so the head's age is that batch's timer.  It takes ``k = min(waiting, b_inf)`` requests
  and pads ``b_inf - k`` null slots.  A training batch starts when no training batch executes and
  the training FIFO is not empty.  Both may start in one cycle.
* **Issue (§3.3, A15–A17, A20).**  ``eligible_c = active_c and pc_c < len_c and not
  cmdq_full[t]``.  ``policy="priority"``: priority mode (``"PRIO"``) exactly when
  ``waiting > threshold`` (strictly, A15); then only inference may issue and nothing issues when
  it is not eligible (A16).  Otherwise (``"RR"``) the eligible context not chosen last time if
  both are eligible, else the single eligible one (work-conserving, A17); after reset the
  "last" context is training, so inference goes first.  ``"fair"``: always round robin.
  ``"inf_only"``: the baseline without a training service: the training port is never ready,
  nothing trains, and the mode reads ``"PRIO"`` (every slot goes to inference).  One
  instruction per cycle.  An issue record is the context letter and that instruction's pc:
  ``"T5"``, ``"I0"``.
* **Command queues (TV19).**  The model holds no instruction contents, so there is one command
  queue for both contexts: ``cmdq_full[t]`` high means nothing issues at ``t`` and neither pc
  moves.  ``cmdq_depth`` (the downstream queue's depth) therefore changes no behaviour here; it
  bounds how many training instructions an inference instruction may find ahead of it after a
  switch to priority mode (``cmdq_depth + 1``, §3.3); it is validated and recorded with the
  configuration (§3.4 lists it), and the testbench's random ``cmdq_full`` stands in for the
  queue.  The RAW and BARRIER parts of TV19 concern instruction contents (an activation-buffer
  scoreboard and BARRIER decoding downstream); this unit never looks at an instruction, so
  they are out of its scope — issuing regardless of dependencies holds here by construction.
* **Defaults of the program lengths** [C]: ``inf_len = 32`` and ``trn_len = 128``
  instructions (the thesis gives no program lengths; a training batch of 128 samples, thesis §6.1.4,
  runs a program 4x an inference batch's).  ``done_lag = 1`` as in TV16.
* **Completion (§3.3, TV16).**  Retirement is a fixed latency: a context's completion pulse comes
  ``done_lag`` cycles after its last instruction issued (TV16: ``done_lag = 1``); the context is
  free from the next cycle.  Only valid slots complete: a null slot never produces a response.
* **Events.**  Per cycle, in this order: ``"done I[…]"``, ``"done T"``, ``"start I[…]"``,
  ``"start T"``, ``"arrive rK"`` (an inference request accepted this cycle).  A batch is written
  ``I[r0,r1]``, with ``null`` for padding slots: ``"start I[r4,null]"``.

Defaults (§3.4, A18): ``thresh = b_inf``, ``q_inf = 4·b_inf``, ``q_trn = cmdq_depth = 4`` and
``t_batch = 2 ×`` the service time, where the service time of an inference batch on an idle
unit is ``inf_len + done_lag`` cycles (start decision to completion pulse).  Back-to-back
batches start every ``service_time + 1`` cycles, so the inference-only capacity is
``b_inf / (service_time + 1)`` requests per cycle.
"""

from array import array
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from .. import ConfigError, check_bool, check_choice, check_int

#: issue policies (§3.3): Equinox's priority scheduler, the fair-share baseline, inference only
POLICIES = ("priority", "fair", "inf_only")
#: width of the host's request tags (inference requests and training batch descriptors)
ID_BITS = 16
#: per-cycle issue codes in :attr:`DispatchRun.issue`
NONE, INF, TRN = 0, 1, 2

_LIMIT = 1 << 16


@dataclass(frozen=True)
class DispatchConfig:
    """Configuration of the request + instruction dispatcher (spec §3.2–§3.4).

    ``None`` fields take the spec's default, which depends on other fields (so a copy with a
    different ``b_inf`` keeps following it); the properties give the values in force.
    """

    #: inference batch size B_INF (the array's n): requests per batch
    b_inf: int = 16
    #: priority threshold THRESH: priority mode while more than this many requests wait;
    #: ``None`` = ``b_inf`` (A18); ``0 .. inf_depth`` (``inf_depth`` = never priority)
    thresh: int | None = None
    #: adaptive batching timeout T_BATCH in cycles (``t - accept(head) >= t_batch`` starts an
    #: incomplete batch); ``None`` = 2 × :attr:`service_time` (§3.4)
    t_batch: int | None = None
    #: instructions in the inference program (one batch)
    inf_len: int = 32
    #: instructions in the training program (one training batch)
    trn_len: int = 128
    #: issue policy: ``"priority"`` (Equinox), ``"fair"`` (always round robin) or
    #: ``"inf_only"`` (no training service)
    policy: str = "priority"
    #: adaptive batching (``False``: static batching, only full batches start)
    adaptive: bool = True
    #: cycles from a context's last issued instruction to its completion pulse (>= 1)
    done_lag: int = 1
    #: inference FIFO capacity Q_INF, a multiple of ``b_inf``; ``None`` = ``4 * b_inf`` (A18)
    q_inf: int | None = None
    #: training FIFO capacity Q_TRN in batch descriptors
    q_trn: int = 4
    #: depth of the downstream command queue (seen only through ``cmdq_full``; see the module
    #: docstring)
    cmdq_depth: int = 4

    def __post_init__(self):
        name = type(self).__name__
        check_int(self, "b_inf", 1, 1024)
        check_int(self, "inf_len", 1, _LIMIT)
        check_int(self, "trn_len", 1, _LIMIT)
        check_choice(self, "policy", POLICIES)
        check_bool(self, "adaptive")
        check_int(self, "done_lag", 1, 1024)
        check_int(self, "q_trn", 1, 1024)
        check_int(self, "cmdq_depth", 1, 1024)
        if self.q_inf is not None:
            check_int(self, "q_inf", self.b_inf, 1024 * self.b_inf)
            if self.q_inf % self.b_inf:
                raise ConfigError(name, "q_inf", self.q_inf,
                                  f"a multiple of b_inf = {self.b_inf} (or None = 4 * b_inf)")
        if self.inf_depth > 4096:
            raise ConfigError(name, "q_inf", self.q_inf,
                              f"at most 4096 entries (b_inf = {self.b_inf} gives "
                              f"{self.inf_depth})")
        if self.thresh is not None:
            check_int(self, "thresh", 0, self.inf_depth)
        if self.t_batch is not None:
            check_int(self, "t_batch", 1, 1 << 24)

    @property
    def threshold(self) -> int:
        """THRESH in force: ``thresh``, or ``b_inf`` (one full batch waiting, A18)."""
        return self.b_inf if self.thresh is None else self.thresh

    @property
    def inf_depth(self) -> int:
        """Q_INF in force: ``q_inf``, or ``4 * b_inf``."""
        return 4 * self.b_inf if self.q_inf is None else self.q_inf

    @property
    def service_time(self) -> int:
        """Cycles from an inference batch's start decision to its completion pulse on an
        otherwise idle unit: ``inf_len + done_lag``."""
        return self.inf_len + self.done_lag

    @property
    def timeout(self) -> int:
        """T_BATCH in force: ``t_batch``, or twice the service time (§3.4, thesis §6.2.7)."""
        return 2 * self.service_time if self.t_batch is None else self.t_batch

    @property
    def capacity(self) -> float:
        """Inference-only throughput in requests per cycle: full batches back to back, one
        every ``service_time + 1`` cycles."""
        return self.b_inf / (self.service_time + 1)


class DispatchInputError(ConfigError):
    """An input of the cycle model outside its contract (arrival lists, cycle counts,
    ``cmdq_full``)."""

    def __init__(self, what: str, value, allowed: str):
        ValueError.__init__(self, f"{what} = {value!r} is invalid: allowed {allowed}")
        self.cls_name, self.field, self.value, self.allowed = "dispatch", what, value, allowed


@dataclass(frozen=True, slots=True)
class DispatchRecord:
    """One cycle of the dispatcher: the decisions taken at ``cycle`` from the state ``S_t``.

    ``cycle``, ``waiting``, ``mode``, ``issue`` and ``events`` are TV16's columns; the other
    fields are the same information per port, as the RTL shows it.
    """

    #: cycle number
    cycle: int
    #: inference requests waiting in the request dispatcher (the inference FIFO's count)
    waiting: int
    #: ``"PRIO"`` (only inference may issue) or ``"RR"`` (round robin)
    mode: str
    #: the issued instruction, ``"I3"`` / ``"T5"`` (context letter and pc), or ``None``
    issue: str | None
    #: completions, batch starts and accepted inference requests (module docstring's order)
    events: tuple
    #: inference request port ready (FIFO not full)
    inf_ready: bool
    #: training request port ready
    trn_ready: bool
    #: index of the inference request accepted this cycle, or ``None``
    inf_accept: int | None
    #: index of the training batch accepted this cycle, or ``None``
    trn_accept: int | None
    #: inference batch started this cycle: ``b_inf`` request indices, ``None`` for null slots
    inf_start: tuple | None
    #: training batch started this cycle, or ``None``
    trn_start: int | None
    #: inference batch completing this cycle (as ``inf_start``), or ``None``
    inf_done: tuple | None
    #: training batch completing this cycle, or ``None``
    trn_done: int | None
    #: a batch executes in the inference / training context (``S_t``)
    inf_busy: bool
    trn_busy: bool
    #: the inference and training contexts' pcs in ``S_t`` (unchanged while nothing issues)
    inf_pc: int
    trn_pc: int
    #: ``cmdq_full`` as seen this cycle
    cmdq_full: bool


@dataclass
class DispatchRun:
    """Result of :func:`dispatch_run`.

    Per-request arrays are indexed by request (sorted arrival order) and hold ``-1`` for an
    event that did not happen before the run ended.  Per-cycle arrays cover cycles
    ``start .. cycles - 1`` (index ``t - start``).
    """

    cfg: DispatchConfig
    #: first cycle (reset) and end (exclusive)
    start: int
    cycles: int
    #: inference requests: host arrival, FIFO accept, batch start, completion pulse cycles
    inf_arrival: np.ndarray
    inf_accept: np.ndarray
    inf_start: np.ndarray
    inf_done: np.ndarray
    #: training batches: the same four cycles
    trn_arrival: np.ndarray
    trn_accept: np.ndarray
    trn_start: np.ndarray
    trn_done: np.ndarray
    #: per cycle: issued context (:data:`NONE`, :data:`INF`, :data:`TRN`), priority mode (1)
    #: and ``waiting``
    issue: np.ndarray
    mode: np.ndarray
    waiting: np.ndarray
    #: per-cycle records (:func:`dispatch_trace`), or ``None``
    records: list | None = field(default=None, repr=False)

    def issued(self, context: int, lo: int | None = None, hi: int | None = None) -> int:
        """Instructions of ``context`` (:data:`INF` / :data:`TRN`) issued in cycles
        ``lo .. hi - 1`` (default: the whole run)."""
        lo = self.start if lo is None else max(lo, self.start)
        hi = self.cycles if hi is None else min(hi, self.cycles)
        return int(np.count_nonzero(self.issue[lo - self.start:hi - self.start] == context))

    def latency(self) -> np.ndarray:
        """Per inference request: completion pulse minus host arrival, in cycles (``-1`` for a
        request not completed within the run)."""
        return np.where(self.inf_done >= 0, self.inf_done - self.inf_arrival, -1)


def _arrivals(name: str, values) -> list:
    arr = np.asarray(values if values is not None else [])
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise DispatchInputError(name, values if arr.size <= 8 else f"array {arr.shape} "
                                 f"{arr.dtype}", "a 1-D sequence of integer cycles")
    return sorted(int(v) for v in arr)


def _batch_text(slots) -> str:
    return "I[" + ",".join("null" if k is None else f"r{k}" for k in slots) + "]"


def dispatch_run(cfg: DispatchConfig, inf_arrivals, trn_arrivals, cycles: int, cmdq_full=None,
                 *, records: bool = False) -> DispatchRun:
    """Run the dispatcher from reset to cycle ``cycles - 1``.

    Parameters
    ----------
    cfg : DispatchConfig
    inf_arrivals, trn_arrivals : sequence of int
        Host arrival cycle of each inference request and of each training batch descriptor
        (module docstring: "Arrivals", "Time origin").  For training that is always available
        (the thesis's co-location setting) see :func:`training_always`.
    cycles : int
        The run ends after cycle ``cycles - 1``.
    cmdq_full : sequence of bool, optional
        ``cmdq_full[t]`` for cycles ``0 .. cycles - 1`` (default: never full).
    records : bool
        Also build one :class:`DispatchRecord` per cycle (slower).

    Returns
    -------
    DispatchRun
        Per-request accept/start/completion cycles, per-cycle issue, mode and waiting, and the
        records when asked.

    Raises
    ------
    DispatchInputError
        Non-integer arrival lists, a negative ``cycles``, a ``cmdq_full`` shorter than
        ``cycles``.
    """
    if not isinstance(cfg, DispatchConfig):
        raise DispatchInputError("cfg", cfg, "a golden.equinox.DispatchConfig")
    if isinstance(cycles, bool) or not isinstance(cycles, (int, np.integer)) or cycles < 0:
        raise DispatchInputError("cycles", cycles, "an integer >= 0")
    cycles = int(cycles)
    inf_arr = _arrivals("inf_arrivals", inf_arrivals)
    trn_arr = _arrivals("trn_arrivals", trn_arrivals)
    if cmdq_full is None:
        full = bytes(cycles)
    else:
        f = np.asarray(cmdq_full)
        if f.ndim != 1 or f.size < cycles or (f.size and f.dtype.kind not in "biu"):
            raise DispatchInputError("cmdq_full", f"array {f.shape} {f.dtype}",
                                     f"a 1-D sequence of at least {cycles} flags (0/1)")
        full = bytes((f[:cycles] != 0).astype(np.uint8))
    t0 = min([0] + inf_arr[:1] + trn_arr[:1])

    b, q, qt = cfg.b_inf, cfg.inf_depth, cfg.q_trn
    li, lt, lag = cfg.inf_len, cfg.trn_len, cfg.done_lag
    thr, tmo, adaptive = cfg.threshold, cfg.timeout, cfg.adaptive
    inf_only = cfg.policy == "inf_only"
    priority = cfg.policy == "priority"
    n_inf, n_trn = len(inf_arr), len(trn_arr)
    i_acc, i_start, i_done = [-1] * n_inf, [-1] * n_inf, [-1] * n_inf
    t_acc, t_start, t_done = [-1] * n_trn, [-1] * n_trn, [-1] * n_trn
    n_cyc = cycles - t0
    issue_log, mode_log, wait_log = bytearray(n_cyc), bytearray(n_cyc), array("l")
    recs = [] if records else None

    infq, trnq = deque(), deque()
    hi = ht = 0                        # next request / batch the host offers
    ia = ta = False                    # a batch executes in the context
    ipc = tpc = 0
    itail = ttail = 0                  # cycles left before the completion pulse, after the end
    ibatch = ()                        # executing batch: request indices (valid slots)
    islots = ()                        # the same with null padding (for records)
    tbatch = -1
    last_t = True                      # last issued context: training (inference goes first)
    for t in range(t0, cycles):
        waiting = len(infq)
        prio = inf_only or (priority and waiting > thr)
        idone = ia and ipc == li and itail == 0
        tdone = ta and tpc == lt and ttail == 0
        istart = (not ia and waiting > 0
                  and (waiting >= b or (adaptive and t - i_acc[infq[0]] >= tmo)))
        tstart = not ta and len(trnq) > 0
        blocked = t >= 0 and full[t]
        ei = ia and ipc < li and not blocked
        et = ta and tpc < lt and not blocked
        if prio:
            sel = INF if ei else NONE
        elif ei and et:
            sel = INF if last_t else TRN
        else:
            sel = INF if ei else TRN if et else NONE
        iacc = hi if (hi < n_inf and inf_arr[hi] <= t and waiting < q) else None
        tacc = ht if (not inf_only and ht < n_trn and trn_arr[ht] <= t and len(trnq) < qt) \
            else None
        k = t - t0
        issue_log[k] = sel
        mode_log[k] = prio
        wait_log.append(waiting)

        if records:
            events = []
            if idone:
                events.append("done " + _batch_text(islots))
            if tdone:
                events.append("done T")
            new_slots = None
            if istart:
                take = [infq[j] for j in range(min(waiting, b))]
                new_slots = tuple(take) + (None,) * (b - len(take))
                events.append("start " + _batch_text(new_slots))
            if tstart:
                events.append("start T")
            if iacc is not None:
                events.append(f"arrive r{iacc}")
            recs.append(DispatchRecord(
                cycle=t, waiting=waiting, mode="PRIO" if prio else "RR",
                issue=None if sel == NONE else f"I{ipc}" if sel == INF else f"T{tpc}",
                events=tuple(events), inf_ready=waiting < q,
                trn_ready=not inf_only and len(trnq) < qt, inf_accept=iacc, trn_accept=tacc,
                inf_start=new_slots, trn_start=trnq[0] if tstart else None,
                inf_done=islots if idone else None, trn_done=tbatch if tdone else None,
                inf_busy=ia, trn_busy=ta, inf_pc=ipc, trn_pc=tpc, cmdq_full=bool(blocked)))

        # ---- next state S_{t+1}
        if idone:
            ia = False
            for r in ibatch:
                i_done[r] = t
        elif istart:
            n = min(waiting, b)
            ibatch = tuple(infq.popleft() for _ in range(n))
            if records:
                islots = ibatch + (None,) * (b - n)
            for r in ibatch:
                i_start[r] = t
            ia, ipc = True, 0
        if tdone:
            ta = False
            t_done[tbatch] = t
        elif tstart:
            tbatch = trnq.popleft()
            t_start[tbatch] = t
            ta, tpc = True, 0
        ipc, itail = _step_program(sel == INF, ia, ipc, li, itail, lag)
        tpc, ttail = _step_program(sel == TRN, ta, tpc, lt, ttail, lag)
        if sel != NONE:
            last_t = sel == TRN
        if iacc is not None:
            infq.append(iacc)
            i_acc[iacc] = t
            hi += 1
        if tacc is not None:
            trnq.append(tacc)
            t_acc[tacc] = t
            ht += 1

    def a(x):
        return np.asarray(x, dtype=np.int64)

    return DispatchRun(cfg=cfg, start=t0, cycles=cycles,
                       inf_arrival=a(inf_arr), inf_accept=a(i_acc), inf_start=a(i_start),
                       inf_done=a(i_done), trn_arrival=a(trn_arr), trn_accept=a(t_acc),
                       trn_start=a(t_start), trn_done=a(t_done),
                       issue=np.frombuffer(bytes(issue_log), dtype=np.uint8),
                       mode=np.frombuffer(bytes(mode_log), dtype=np.uint8),
                       waiting=np.asarray(wait_log, dtype=np.int64), records=recs)


def _step_program(issued: bool, active: bool, pc: int, length: int, tail: int, lag: int):
    """One cycle of a stream's program counter and completion tail: an issued instruction
    advances ``pc``, and the program's last one starts the ``lag - 1`` cycles of tail, which
    count down while the stream is active and issues nothing.  Returns ``(pc, tail)``."""
    if issued:
        pc += 1
        if pc == length:
            tail = lag - 1
    elif active and pc == length and tail:
        tail -= 1
    return pc, tail


def dispatch_trace(cfg: DispatchConfig, inf_arrivals, trn_arrivals, cycles: int,
                   cmdq_full=None) -> list:
    """The dispatcher's per-cycle records (:class:`DispatchRecord`) from reset to cycle
    ``cycles - 1``; the parameters are :func:`dispatch_run`'s (its module docstring fixes the
    arrival representation, the time origin and the event order).

    TV16 is ``dispatch_trace(DispatchConfig(b_inf=2, thresh=2, t_batch=6, inf_len=4,
    trn_len=12), range(2, 8), [-1], 28)``: the records of cycles 0..27 are the spec's table.
    """
    return dispatch_run(cfg, inf_arrivals, trn_arrivals, cycles, cmdq_full, records=True).records


def poisson_arrivals(rate: float, cycles: int, gen: np.random.Generator,
                     start: int = 0) -> np.ndarray:
    """Inference arrival cycles of a Poisson process: ``Poisson(rate)`` requests in each cycle
    ``start .. cycles - 1`` (``rate`` in requests per cycle)."""
    if not rate >= 0:
        raise DispatchInputError("rate", rate, "a request rate >= 0 per cycle")
    counts = gen.poisson(rate, max(cycles - start, 0))
    return np.repeat(np.arange(start, max(cycles, start), dtype=np.int64), counts)


def training_always(cfg: DispatchConfig, cycles: int, start: int = 0) -> np.ndarray:
    """Training arrivals that keep the host offering a training batch in every cycle of a run
    ending at ``cycles`` (thesis §6.1.4: "training requests are always available"): more descriptors,
    all arriving at ``start``, than the run can accept."""
    n = max(cycles - start, 0) // (cfg.trn_len + cfg.done_lag + 1) + cfg.q_trn + 3
    return np.full(n, start, dtype=np.int64)


# NONE / INF / TRN stay module attributes (golden.equinox.dispatcher.INF): short names that
# would crowd the family's namespace
__all__ = ["DispatchConfig", "DispatchRecord", "DispatchRun", "DispatchInputError", "POLICIES",
           "ID_BITS", "dispatch_run", "dispatch_trace", "poisson_arrivals", "training_always"]

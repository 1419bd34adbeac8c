"""Equinox request dispatcher + instruction dispatcher (registry unit ``equinox.dispatcher``;
spec ``docs/specs/equinox.md`` §3.2–§3.4, A15–A21).

Cycle-accurate against :func:`golden.equinox.dispatch_trace`: every output at cycle ``t`` is the
golden record of cycle ``t`` (decisions from the registered state ``S_t``; ``cmdq_full`` is the
only input that acts in the same cycle, on the issue), and every decision takes effect at
``t + 1``.  The module docstring of :mod:`golden.equinox.dispatcher` fixes the behaviour; this
one describes the structure and the hardware choices.

Structure
---------
* **Inference FIFO**: ``inf_depth`` registers of (tag, timestamp), a shift register with the
  head at entry 0.  A batch start either shifts it by ``b_inf`` (full batch) or empties it
  (partial batch: ``count < b_inf`` entries, all taken), so each entry chooses between
  holding, its neighbour ``b_inf`` places behind, and the host's request: a 3-way multiplexer
  per entry instead of a ``b_inf``-way shifter, and the batch's slots are entries
  ``0 .. b_inf - 1`` without a read multiplexer.
* **Adaptive timer** [C]: the golden rule is ``t - accept(head) >= timeout``.  A free-running
  ``W``-bit cycle counter (``W = bits_for(timeout)``) stamps each accepted request.  Entries
  expire in FIFO order (they were accepted in distinct cycles, in order), so one register
  ``expired`` counts the expired entries from the head, and each cycle one comparator checks
  the first entry not yet counted: ``(now - stamp) mod 2**W >= timeout``.  That entry's true
  age never exceeds ``timeout`` (it was checked every cycle since its predecessor expired), so
  the ``W``-bit difference is exact however long requests wait (a held ``cmdq_full`` or static
  batching never wraps a timer) — the saturating behaviour of per-request age counters with
  one comparator instead of ``inf_depth`` counters.  The head has waited ``timeout`` cycles
  exactly when at least one entry is expired.  With ``adaptive = False`` neither the stamps
  nor the counter exist.
* **Training FIFO**: :class:`amaranth.lib.fifo.SyncFIFO` of ``q_trn`` descriptor tags.
* **Contexts**: per context a busy flag, a pc, a completion countdown (``done_lag - 1``
  cycles after the last issue, absent for ``done_lag = 1``) and the executing batch's tags
  (inference: ``b_inf`` tags and a valid mask; training: one tag).
* **Issue**: priority mode ``count > threshold`` (policy ``priority``), constant round robin
  (``fair``) or constant priority (``inf_only``, whose training port is tied not-ready); a
  one-bit "last issued was training" register (reset 1) for round robin.
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import fifo, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for

from golden.equinox import ID_BITS, DispatchConfig


class IssueSignature(wiring.Signature):
    """One issued instruction: ``valid``, ``ctx`` (0 inference, 1 training) and its ``pc``."""

    def __init__(self, cfg: DispatchConfig):
        super().__init__({"valid": Out(1), "ctx": Out(1),
                          "pc": Out(bits_for(max(cfg.inf_len, cfg.trn_len) - 1))})


class BatchSignature(wiring.Signature):
    """An inference batch event: ``valid``, ``mask`` (bit ``i`` = slot ``i`` holds a request)
    and ``id`` (``b_inf`` request tags; 0 in null slots)."""

    def __init__(self, cfg: DispatchConfig):
        super().__init__({"valid": Out(1), "mask": Out(cfg.b_inf),
                          "id": Out(ID_BITS).array(cfg.b_inf)})


class TrainSignature(wiring.Signature):
    """A training batch event: ``valid`` and the batch descriptor's tag ``id``."""

    def __init__(self):
        super().__init__({"valid": Out(1), "id": Out(ID_BITS)})


def _context(m, name: str, length: int, lag: int):
    """A context's busy flag, pc and completion countdown; returns them and its ``done``."""
    busy = Signal(name=f"{name}_busy")
    pc = Signal(range(length + 1), name=f"{name}_pc")
    at_end = Signal(name=f"{name}_at_end")
    m.d.comb += at_end.eq(pc == length)
    done = Signal(name=f"{name}_done")
    if lag > 1:
        tail = Signal(range(lag), name=f"{name}_tail")
        m.d.comb += done.eq(busy & at_end & (tail == 0))
    else:
        tail = None
        m.d.comb += done.eq(busy & at_end)
    return busy, pc, at_end, tail, done


def _advance(m, busy, pc, at_end, tail, done, start, issued, length: int, lag: int):
    """Next state of a context: start, completion, issue, countdown."""
    with m.If(done):
        m.d.sync += busy.eq(0)
    with m.Elif(start):
        m.d.sync += [busy.eq(1), pc.eq(0)]
    with m.If(issued):
        m.d.sync += pc.eq(pc + 1)
        if tail is not None:
            with m.If(pc == length - 1):
                m.d.sync += tail.eq(lag - 1)
    if tail is not None:
        with m.Elif(busy & at_end & (tail != 0)):
            m.d.sync += tail.eq(tail - 1)


class Dispatcher(wiring.Component):
    """The request dispatcher and instruction dispatcher of Equinox as one unit: host request
    queues, adaptive batch formation with null padding, and one instruction issued per cycle
    from the inference or training context under the configured policy (module docstring:
    structure and choices; :mod:`golden.equinox.dispatcher`: the behaviour).

    Latency: a request accepted at ``t`` is in ``waiting`` at ``t + 1``; a batch started at ``t``
    issues from ``t + 1``; its completion pulse comes ``done_lag`` cycles after its last issue;
    the context can start again one cycle after the pulse.  Throughput: one instruction per cycle
    and one request per service per cycle.  Null slots carry mask bit 0 and tag 0 on
    ``inf_start`` and ``inf_done``; every batch output is all-zero while its ``valid`` is low.

    Parameters
    ----------
    cfg : golden.equinox.DispatchConfig

    Ports
    -----
    inf_req : In(stream of ID_BITS)
        Host inference requests, payload = the request's tag; ``ready`` is low while the
        inference FIFO is full (the host holds the request).
    trn_req : In(stream of ID_BITS)
        Host training batch descriptors (their tags); ``ready`` low while the training FIFO is
        full, and always with ``policy = "inf_only"``.
    cmdq_full : In(1)
        The downstream command queue is full: nothing issues this cycle.
    waiting : Out(range(inf_depth + 1))
        Inference requests waiting (the FIFO count, the instruction dispatcher's input).
    mode : Out(1)
        1 = priority mode (only inference may issue), 0 = round robin.
    issue : Out(:class:`IssueSignature`)
        ``valid``, ``ctx`` (0 inference, 1 training), ``pc`` of the instruction issued this cycle.
    inf_start, inf_done : Out(:class:`BatchSignature`)
        An inference batch starts / completes (the host's responses): ``valid``, ``mask`` (valid
        slots), ``id`` (``b_inf`` tags, 0 in null slots).
    trn_start, trn_done : Out(:class:`TrainSignature`)
        A training batch starts / completes: ``valid`` and its descriptor tag ``id``.
    """

    #: reset value of the round-robin register "the last issue was training": 1, so that
    #: inference goes first when both contexts first become eligible together (golden model)
    LAST_RESET = 1

    def __init__(self, cfg: DispatchConfig = DispatchConfig()):
        self.cfg = cfg
        super().__init__({
            "inf_req": In(stream.Signature(ID_BITS)),
            "trn_req": In(stream.Signature(ID_BITS)),
            "cmdq_full": In(1),
            "waiting": Out(range(cfg.inf_depth + 1)),
            "mode": Out(1),
            "issue": Out(IssueSignature(cfg)),
            "inf_start": Out(BatchSignature(cfg)),
            "inf_done": Out(BatchSignature(cfg)),
            "trn_start": Out(TrainSignature()),
            "trn_done": Out(TrainSignature()),
        })

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        b, q = cfg.b_inf, cfg.inf_depth

        # ---- inference FIFO (shift register, head at entry 0)
        count = Signal(range(q + 1))
        tags = [Signal(ID_BITS, name=f"tag{i}") for i in range(q)]
        accept_i = Signal()
        m.d.comb += [self.inf_req.ready.eq(count != q),
                     accept_i.eq(self.inf_req.valid & self.inf_req.ready),
                     self.waiting.eq(count)]

        # ---- inference context and batch start
        i_busy, i_pc, i_end, i_tail, i_done = _context(m, "inf", cfg.inf_len, cfg.done_lag)
        due = Signal()
        start_i = Signal()
        full_batch = Signal()
        m.d.comb += [full_batch.eq(count >= b),
                     start_i.eq(~i_busy & (count != 0) & (full_batch | due))]

        if cfg.adaptive:
            w = bits_for(cfg.timeout)
            now = Signal(w)
            stamps = [Signal(w, name=f"stamp{i}") for i in range(q)]
            expired = Signal(range(q + 1))
            front_age = Signal(w)
            newly = Signal()
            expired_now = Signal(range(q + 1))
            m.d.sync += now.eq(now + 1)
            m.d.comb += [
                front_age.eq(now - Array(stamps)[expired]),
                newly.eq((count > expired) & (front_age >= cfg.timeout)),
                expired_now.eq(expired + newly),
                due.eq(expired_now != 0),
            ]
            with m.If(start_i):
                m.d.sync += expired.eq(Mux(full_batch & (expired_now > b), expired_now - b, 0))
            with m.Else():
                m.d.sync += expired.eq(expired_now)
        else:
            stamps = []
            m.d.comb += due.eq(0)

        # the FIFO's next state: shift by b_inf or empty on a start, then push
        popped = Signal(range(q + 1))
        m.d.comb += popped.eq(Mux(start_i, Mux(full_batch, b, count), 0))
        slot = Signal(range(q + 1))           # where the accepted request goes
        m.d.comb += slot.eq(count - popped)
        m.d.sync += count.eq(count - popped + accept_i)
        for i in range(q):
            entries = [(tags, self.inf_req.payload)]
            if stamps:
                entries.append((stamps, now))
            for regs, new in entries:
                with m.If(accept_i & (slot == i)):
                    m.d.sync += regs[i].eq(new)
                with m.Elif(start_i & full_batch):
                    m.d.sync += regs[i].eq(regs[i + b] if i + b < q else 0)

        # inference batch: start outputs from the FIFO head, the executing batch's registers
        b_tags = [Signal(ID_BITS, name=f"batch_tag{i}") for i in range(b)]
        b_mask = Signal(b)
        start_mask = Signal(b)
        m.d.comb += start_mask.eq(Cat(start_i & (count > i) for i in range(b)))
        m.d.comb += [self.inf_start.valid.eq(start_i), self.inf_start.mask.eq(start_mask)]
        m.d.comb += [self.inf_start.id[i].eq(Mux(start_mask[i], tags[i], 0)) for i in range(b)]
        with m.If(start_i):
            m.d.sync += b_mask.eq(start_mask)
            m.d.sync += [b_tags[i].eq(Mux(start_mask[i], tags[i], 0)) for i in range(b)]
        m.d.comb += [self.inf_done.valid.eq(i_done),
                     self.inf_done.mask.eq(Mux(i_done, b_mask, 0))]
        m.d.comb += [self.inf_done.id[i].eq(Mux(i_done & b_mask[i], b_tags[i], 0))
                     for i in range(b)]

        # ---- training FIFO and context
        t_busy, t_pc, t_end, t_tail, t_done = _context(m, "trn", cfg.trn_len, cfg.done_lag)
        start_t = Signal()
        t_tag = Signal(ID_BITS)
        if cfg.policy == "inf_only":
            m.d.comb += [self.trn_req.ready.eq(0), start_t.eq(0)]
        else:
            m.submodules.trn_fifo = tq = fifo.SyncFIFO(width=ID_BITS, depth=cfg.q_trn)
            m.d.comb += [tq.w_data.eq(self.trn_req.payload), tq.w_en.eq(self.trn_req.valid),
                         self.trn_req.ready.eq(tq.w_rdy),
                         start_t.eq(~t_busy & tq.r_rdy), tq.r_en.eq(start_t),
                         self.trn_start.id.eq(Mux(start_t, tq.r_data, 0))]
            with m.If(start_t):
                m.d.sync += t_tag.eq(tq.r_data)
        m.d.comb += [self.trn_start.valid.eq(start_t), self.trn_done.valid.eq(t_done),
                     self.trn_done.id.eq(Mux(t_done, t_tag, 0))]

        # ---- instruction dispatcher
        prio = Signal()
        if cfg.policy == "priority":
            m.d.comb += prio.eq(count > cfg.threshold)
        else:
            m.d.comb += prio.eq(Const(int(cfg.policy == "inf_only"), 1))
        el_i, el_t, sel_i, sel_t = Signal(), Signal(), Signal(), Signal()
        last_t = Signal(init=self.LAST_RESET)
        m.d.comb += [
            el_i.eq(i_busy & ~i_end & ~self.cmdq_full),
            el_t.eq(t_busy & ~t_end & ~self.cmdq_full),
            sel_i.eq(el_i & (prio | ~el_t | last_t)),
            sel_t.eq(~prio & el_t & (~el_i | ~last_t)),
            self.mode.eq(prio),
            self.issue.valid.eq(sel_i | sel_t),
            self.issue.ctx.eq(sel_t),
            self.issue.pc.eq(Mux(sel_i, i_pc, Mux(sel_t, t_pc, 0))),
        ]
        with m.If(sel_i | sel_t):
            m.d.sync += last_t.eq(sel_t)
        _advance(m, i_busy, i_pc, i_end, i_tail, i_done, start_i, sel_i, cfg.inf_len,
                 cfg.done_lag)
        _advance(m, t_busy, t_pc, t_end, t_tail, t_done, start_t, sel_t, cfg.trn_len,
                 cfg.done_lag)
        return m


__all__ = ["Dispatcher", "IssueSignature", "BatchSignature", "TrainSignature"]

"""Testbench of the Equinox request + instruction dispatcher (``equinox.dispatcher``) against
:func:`golden.equinox.dispatch_run`, cycle by cycle.

A host model drives the two request ports — from each request's arrival cycle it offers the
oldest pending request of each service, tagged with its index mod ``2**ID_BITS``, and holds it
until the dispatcher is ready — and ``cmdq_full`` from a per-cycle list.  Every cycle the
testbench reads ``waiting``, ``mode``, the issue port, both ``ready``s and the four batch
ports and compares them with the golden record of that cycle; it rebuilds the record's event
strings (``"start I[r4,null]"``, ``"arrive r7"``, …) from the ports, naming each request by
the tag the host sent, so starts, completions, padding and host acceptance are all checked.
Independently of the golden model it checks that every request completes at most once and only
after it started, that null slots carry no tag (no host response), that nothing issues while
``cmdq_full`` is high, and at the end that every accepted request has completed or is still
counted in the dispatcher (nothing dropped; a full queue stalls the host).

Tests: ``tv16`` (TV16's stimulus; at TV16's configuration the golden trace is the spec's table,
``tests/test_golden_equinox_dispatch.py``), ``tv19`` (``cmdq_full`` held high in a window and
for long enough to fill the queues), and ``load`` (the effort's test size in cycles, split
evenly over Poisson inference loads 0.2, 0.6, 0.9 and 1.2 of the inference-only capacity, each
with always-available or Poisson training batches and bursty random ``cmdq_full``).
"""

import cocotb
import numpy as np
from cocotb.triggers import FallingEdge, ReadOnly

from golden.equinox import (
    ID_BITS,
    DispatchConfig,
    dispatch_run,
    poisson_arrivals,
    training_always,
)

from ..common import config_from_env, idle, reset, rng, start, test_size, uint

TAG = (1 << ID_BITS) - 1
#: offered inference load of the load test, as fractions of the inference-only capacity
LOADS = (0.2, 0.6, 0.9, 1.2)


class Ports:
    """The unit's port handles (read every cycle, so looked up once)."""

    def __init__(self, dut, cfg):
        def g(name):
            return getattr(dut, name)

        self.inf_valid, self.inf_payload, self.inf_ready = (
            g("inf_req__valid"), g("inf_req__payload"), g("inf_req__ready"))
        self.trn_valid, self.trn_payload, self.trn_ready = (
            g("trn_req__valid"), g("trn_req__payload"), g("trn_req__ready"))
        self.cmdq_full = g("cmdq_full")
        self.waiting, self.mode = g("waiting"), g("mode")
        self.issue = (g("issue__valid"), g("issue__ctx"), g("issue__pc"))
        self.batch = {name: (g(f"{name}__valid"), g(f"{name}__mask"),
                             [g(f"{name}__id__{i}") for i in range(cfg.b_inf)])
                      for name in ("inf_start", "inf_done")}
        self.train = {name: (g(f"{name}__valid"), g(f"{name}__id"))
                      for name in ("trn_start", "trn_done")}


class Driver:
    """One input port: writes only when the value changes (port writes cost time)."""

    def __init__(self, handle):
        self.handle, self.value = handle, None

    def set(self, value: int) -> None:
        if value != self.value:
            self.handle.value = value
            self.value = value


class Bookkeeping:
    """What the testbench learns from the ports alone, over a whole run."""

    def __init__(self):
        self.sent = {}             # tag -> request index, accepted and not yet started
        self.executing = {}        # tag -> request index, in the executing batch
        self.completed = []        # request indices in completion order
        self.trn_sent = {}         # training tag -> batch index
        self.trn_started = []
        self.trn_completed = []
        self.accepted = 0
        self.trn_accepted = 0


def _read_batch(ports, name, b_inf, where):
    """``(mask bits, tags)`` of an inference batch port whose ``valid`` is high; a null slot
    must carry tag 0 (no host response)."""
    _, mask_h, ids = ports.batch[name]
    mask = uint(mask_h)
    tags = [uint(ids[i]) for i in range(b_inf)]
    for i in range(b_inf):
        if not (mask >> i) & 1:
            assert tags[i] == 0, f"{where}: {name} null slot {i} carries tag {tags[i]}"
    return mask, tags


def _batch_slots(ports, name, b_inf, where, pool, what):
    """The requests of an inference batch port whose ``valid`` is high, each slot's tag taken
    out of ``pool`` (tag -> request; a tag not in it fails with ``what``).  Returns the
    ``[(tag, request)]`` of the filled slots and every slot's name (``r<k>`` or ``null``), as
    the golden events spell them."""
    mask, tags = _read_batch(ports, name, b_inf, where)
    taken, names = [], []
    for i in range(b_inf):
        if (mask >> i) & 1:
            k = pool.pop(tags[i], None)
            assert k is not None, f"{where}: {what} tag {tags[i]}"
            taken.append((tags[i], k))
            names.append(f"r{k}")
        else:
            names.append("null")
    return taken, names


async def replay(dut, cfg, inf, trn, cycles, full=None, where=""):
    """Reset, then drive the host and ``cmdq_full`` for the golden run of these arrivals and
    compare every cycle; returns the :class:`Bookkeeping` (after its end-of-run checks) and
    the golden :class:`~golden.equinox.DispatchRun`."""
    run = dispatch_run(cfg, inf, trn, cycles, full, records=True)
    inf, trn = run.inf_arrival.tolist(), run.trn_arrival.tolist()
    full = [0] * cycles if full is None else [int(bool(x)) for x in full[:cycles]]
    p = Ports(dut, cfg)
    drv = {name: Driver(getattr(p, name)) for name in
           ("inf_valid", "inf_payload", "trn_valid", "trn_payload", "cmdq_full")}
    idle(dut)
    for d in drv.values():
        d.value = 0
    await reset(dut)
    book = Bookkeeping()
    b = cfg.b_inf
    hi = ht = 0
    issue_v, issue_c, issue_pc = p.issue
    for rec in run.records:
        t = rec.cycle
        at = f"{where}cycle {t}"
        offer_i = hi < len(inf) and inf[hi] <= t
        offer_t = ht < len(trn) and trn[ht] <= t
        drv["inf_valid"].set(int(offer_i))
        if offer_i:
            drv["inf_payload"].set(hi & TAG)
        drv["trn_valid"].set(int(offer_t))
        if offer_t:
            drv["trn_payload"].set(ht & TAG)
        blocked = full[t] if t >= 0 else 0
        drv["cmdq_full"].set(blocked)
        await ReadOnly()

        got_mode = "PRIO" if uint(p.mode) else "RR"
        waiting = uint(p.waiting)
        assert (waiting, got_mode) == (rec.waiting, rec.mode), \
            f"{at}: waiting/mode {waiting}/{got_mode}, golden {rec.waiting}/{rec.mode}"
        issue = None
        if uint(issue_v):
            issue = f"{'T' if uint(issue_c) else 'I'}{uint(issue_pc)}"
            assert not blocked, f"{at}: issued {issue} while cmdq_full is high"
        assert issue == rec.issue, f"{at}: issue {issue}, golden {rec.issue}"
        ready_i, ready_t = uint(p.inf_ready), uint(p.trn_ready)
        assert (ready_i, ready_t) == (int(rec.inf_ready), int(rec.trn_ready)), \
            f"{at}: ready inf/trn {ready_i}/{ready_t}, golden {rec.inf_ready}/{rec.trn_ready}"

        events = []
        if uint(p.batch["inf_done"][0]):
            taken, names = _batch_slots(p, "inf_done", b, at, book.executing,
                                        "completion of a request not executing,")
            book.completed += [k for _, k in taken]
            assert not book.executing, f"{at}: batch completed without {book.executing}"
            events.append(f"done I[{','.join(names)}]")
        if uint(p.train["trn_done"][0]):
            tag = uint(p.train["trn_done"][1])
            assert book.trn_started and book.trn_started[-1][1] == tag, \
                f"{at}: training completion of tag {tag}, started {book.trn_started[-1:]}"
            book.trn_completed.append(book.trn_started[-1][0])
            events.append("done T")
        if uint(p.batch["inf_start"][0]):
            taken, names = _batch_slots(p, "inf_start", b, at, book.sent,
                                        "batch starts a request never accepted,")
            book.executing.update(taken)
            events.append(f"start I[{','.join(names)}]")
        if uint(p.train["trn_start"][0]):
            tag = uint(p.train["trn_start"][1])
            k = book.trn_sent.pop(tag, None)
            assert k is not None, f"{at}: training batch tag {tag} starts, never accepted"
            book.trn_started.append((k, tag))
            events.append("start T")
        if offer_i and ready_i:
            book.sent[hi & TAG] = hi
            events.append(f"arrive r{hi}")
            hi += 1
            book.accepted += 1
        if offer_t and ready_t:
            book.trn_sent[ht & TAG] = ht
            ht += 1
            book.trn_accepted += 1
        assert tuple(events) == rec.events, f"{at}: events {events}, golden {rec.events}"
        await FallingEdge(dut.clk)

    # nothing dropped: every accepted request completed, waits in the FIFO or executes
    assert len(book.completed) == len(set(book.completed)), f"{where}a request completed twice"
    queued = int(np.count_nonzero(run.inf_accept >= 0) - np.count_nonzero(run.inf_start >= 0))
    assert len(book.sent) == uint(p.waiting) == queued, \
        f"{where}end: {len(book.sent)} sent and not started, waiting {uint(p.waiting)}, " \
        f"golden {queued}"
    assert book.accepted == len(book.completed) + len(book.sent) + len(book.executing)
    assert sorted(book.completed) == np.flatnonzero(run.inf_done >= 0).tolist()
    assert book.trn_accepted == len(book.trn_sent) + len(book.trn_started)
    idle(dut)
    return book, run


def tv16_stimulus():
    """TV16: a training batch in the queue at cycle 0, requests at cycles 2..7."""
    return list(range(2, 8)), [-1]


@cocotb.test()
async def tv16(dut):
    """TV16's stimulus, every port every cycle, until every request that can complete has
    (static batching never starts the last partial batch; inference-only never trains)."""
    cfg = config_from_env(DispatchConfig)
    await start(dut)
    inf, trn = tv16_stimulus()
    horizon = 28 + 4 * (cfg.timeout + cfg.service_time + cfg.trn_len)
    book, _ = await replay(dut, cfg, inf, trn, horizon, where="tv16: ")
    # adaptive batching completes all six; static batching only whole batches
    n = 6 if cfg.adaptive else 6 // cfg.b_inf * cfg.b_inf
    assert sorted(book.completed) == list(range(n)), f"TV16: completed {book.completed}"
    assert book.trn_completed == ([] if cfg.policy == "inf_only" else [0])


@cocotb.test()
async def first_competition(dut):
    """Both contexts become eligible in the same cycle straight after reset: one full inference
    batch arriving from cycle 0, a training batch arriving at each offset in turn (one run from
    reset per offset), so that some runs make round robin choose before either context has
    issued — the choice that depends on the round-robin register's reset value."""
    cfg = config_from_env(DispatchConfig)
    await start(dut)
    inf = list(range(cfg.b_inf))
    horizon = cfg.b_inf + 4 * (cfg.service_time + cfg.trn_len + cfg.done_lag)
    for offset in range(cfg.b_inf + 3):
        await replay(dut, cfg, inf, [offset], horizon, where=f"training at {offset}: ")


@cocotb.test()
async def tv19(dut):
    """TV19: ``cmdq_full`` high stops every issue and freezes the pcs; held long enough, the
    queues fill and the host is stalled, and every request completes once it drops."""
    cfg = config_from_env(DispatchConfig)
    await start(dut)
    r = rng("tv19")
    inf, trn = tv16_stimulus()
    span = 28 + 4 * (cfg.timeout + cfg.service_time + cfg.trn_len)
    full = np.zeros(span, dtype=bool)
    full[5:15] = True
    await replay(dut, cfg, inf, trn, span, full, where="tv19 window: ")
    # a long stall under arrivals at 1.5x capacity: the FIFO fills, then everything drains
    hold = 3 * cfg.inf_depth * max(1, int(1 / cfg.capacity)) + 50
    gen = np.random.default_rng(r.getrandbits(64))
    inf = poisson_arrivals(1.5 * cfg.capacity, hold, gen)
    if not cfg.adaptive:                 # static batching leaves a partial batch waiting
        inf = inf[:len(inf) // cfg.b_inf * cfg.b_inf]
    cycles = hold + (len(inf) // cfg.b_inf + 2) * (cfg.service_time + 1) * 2 + cfg.timeout + \
        4 * (cfg.trn_len + cfg.done_lag + 1)
    full = np.zeros(cycles, dtype=bool)
    full[:hold] = True
    book, _ = await replay(dut, cfg, inf, [0, 0, 1, 1, 2, 2], cycles, full,
                           where="tv19 hold: ")
    assert book.accepted == len(inf) and sorted(book.completed) == list(range(len(inf)))


def _bursty(gen, cycles, p_on):
    """A ``cmdq_full`` pattern: high about ``p_on`` of the time, in runs of 1..8 cycles."""
    full = np.zeros(cycles, dtype=bool)
    t = 0
    while t < cycles and p_on > 0:
        gap = int(gen.geometric(p_on / 4.5)) if p_on < 1 else 0
        run = int(gen.integers(1, 9))
        full[t + gap:t + gap + run] = True
        t += gap + run
    return full


@cocotb.test()
async def load(dut):
    """Poisson inference at 0.2, 0.6, 0.9 and 1.2 of the inference-only capacity, training
    always available or in Poisson batches, bursty cmdq_full: the effort's test size in
    cycles in total, each load from reset."""
    cfg = config_from_env(DispatchConfig)
    await start(dut)
    r = rng("load")
    gen = np.random.default_rng(r.getrandbits(64))
    per_load = max(test_size() // len(LOADS), 200)
    total = completed = 0
    prio = 0
    for n, rho in enumerate(LOADS):
        inf = poisson_arrivals(rho * cfg.capacity, per_load, gen)
        if n % 2 == 0:
            trn = training_always(cfg, per_load)
        else:
            mean_gap = (cfg.trn_len + cfg.done_lag + 1) * 1.5
            trn = np.cumsum(gen.geometric(1 / mean_gap, per_load // int(mean_gap) + 1)) - 1
        full = _bursty(gen, per_load, float(gen.choice([0.05, 0.2])))
        where = f"load {rho}: "
        book, run = await replay(dut, cfg, inf, trn, per_load, full, where=where)
        total += per_load
        completed += len(book.completed)
        prio += int(np.count_nonzero(run.mode))
        cocotb.log.info("%s%d cycles, %d requests offered, %d accepted, %d completed, "
                        "%d training batches completed", where, per_load, len(inf),
                        book.accepted, len(book.completed), len(book.trn_completed))
    assert completed > 0 and total == per_load * len(LOADS)
    if cfg.policy == "priority" and cfg.threshold < cfg.inf_depth:
        assert prio > 0, "the load test never reached priority mode"

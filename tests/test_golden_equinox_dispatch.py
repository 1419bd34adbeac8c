"""The golden Equinox dispatcher (golden.equinox.dispatcher): TV16 row by row, TV19's back-pressure,
configuration and input errors, and the scheduling rules of spec §3.2–§3.3 / A15–A21 as
properties of random traffic under every policy."""

import dataclasses

import numpy as np
import pytest

from golden import ConfigError
from golden.equinox import (
    DispatchConfig,
    DispatchInputError,
    dispatch_run,
    dispatch_trace,
    poisson_arrivals,
    training_always,
)
from golden.equinox.dispatcher import INF, TRN

TV16_CFG = DispatchConfig(b_inf=2, thresh=2, t_batch=6, inf_len=4, trn_len=12)

# spec §7 TV16, as printed: cycle, waiting, mode, issue, events ("" = no event, "–" = no issue)
TV16_TABLE = """
0  | 0 | RR   | –   | start T
1  | 0 | RR   | T0  |
2  | 0 | RR   | T1  | arrive r0
3  | 1 | RR   | T2  | arrive r1
4  | 2 | RR   | T3  | start I[r0,r1]; arrive r2
5  | 1 | RR   | I0  | arrive r3
6  | 2 | RR   | T4  | arrive r4
7  | 3 | PRIO | I1  | arrive r5
8  | 4 | PRIO | I2  |
9  | 4 | PRIO | I3  |
10 | 4 | PRIO | –   | done I[r0,r1]
11 | 4 | PRIO | –   | start I[r2,r3]
12-19 | 2 | RR | T5 I0 T6 I1 T7 I2 T8 I3 |
20 | 2 | RR   | T9  | done I[r2,r3]
21 | 2 | RR   | T10 | start I[r4,r5]
22 | 0 | RR   | I0  |
23 | 0 | RR   | T11 |
24 | 0 | RR   | I1  | done T
25 | 0 | RR   | I2  |
26 | 0 | RR   | I3  |
27 | 0 | RR   | –   | done I[r4,r5]
"""


def _tv16_rows():
    """The table expanded to one (cycle, waiting, mode, issue, events) row per cycle."""
    rows = []
    for line in TV16_TABLE.strip().splitlines():
        cyc, waiting, mode, issue, events = (c.strip() for c in line.split("|"))
        lo, _, hi = cyc.partition("-")
        span = range(int(lo), int(hi or lo) + 1)
        issues = issue.split() if len(span) > 1 else [issue]
        assert len(issues) == len(span), line
        ev = tuple(e.strip() for e in events.split(";")) if events else ()
        for c, i in zip(span, issues):
            rows.append((c, int(waiting), mode, None if i == "–" else i, ev))
    return rows


def test_tv16_table_expands_to_28_cycles():
    rows = _tv16_rows()
    assert [r[0] for r in rows] == list(range(28))


def test_tv16_trace_row_by_row():
    """TV16: a training batch in the queue at cycle 0 (offered at -1), r0..r5 at cycles 2..7."""
    trace = dispatch_trace(TV16_CFG, range(2, 8), [-1], 28)
    assert trace[0].cycle == -1 and trace[0].events == () and trace[0].issue is None
    got = [(r.cycle, r.waiting, r.mode, r.issue, r.events) for r in trace[1:]]
    want = _tv16_rows()
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g == w, f"cycle {w[0]}: got {g}, TV16 {w}"


def test_tv16_request_and_port_view():
    """TV16's requests through the per-request arrays and the per-port record fields."""
    run = dispatch_run(TV16_CFG, range(2, 8), [-1], 28, records=True)
    assert run.start == -1 and len(run.records) == 29
    assert run.inf_accept.tolist() == [2, 3, 4, 5, 6, 7]
    assert run.inf_start.tolist() == [4, 4, 11, 11, 21, 21]
    assert run.inf_done.tolist() == [10, 10, 20, 20, 27, 27]
    assert run.latency().tolist() == [8, 7, 16, 15, 21, 20]
    assert (run.trn_accept.tolist(), run.trn_start.tolist(), run.trn_done.tolist()) == \
        ([-1], [0], [24])
    assert run.issued(TRN) == 12 and run.issued(INF) == 12
    rec = {r.cycle: r for r in run.records}
    assert rec[4].inf_start == (0, 1) and rec[10].inf_done == (0, 1)
    assert rec[0].trn_start == 0 and rec[24].trn_done == 0
    assert rec[-1].trn_accept == 0 and rec[-1].trn_ready and rec[0].trn_busy is False
    assert all(r.inf_ready for r in run.records)          # at most 4 of 8 slots used


def test_tv16_threshold_equality_is_round_robin():
    """A15: waiting == THRESH (cycles 4, 6, 12-21) is round robin; one more request is PRIO.
    With THRESH = 4 the 4 requests waiting at cycles 8-11 no longer block training."""
    trace = {r.cycle: r for r in dispatch_trace(TV16_CFG, range(2, 8), [-1], 28)}
    assert all(trace[c].mode == "RR" for c in (4, 6, 12, 21)) and trace[7].mode == "PRIO"
    higher = dataclasses.replace(TV16_CFG, thresh=4)
    trace = {r.cycle: r for r in dispatch_trace(higher, range(2, 8), [-1], 28)}
    assert all(r.mode == "RR" for r in trace.values())
    assert [trace[c].issue for c in (7, 8, 9)] == ["I1", "T5", "I2"]


def test_tv16_partial_batch_after_timeout():
    """A19: one request alone starts a padded batch when it has waited t_batch cycles; with
    static batching it never starts."""
    cfg = DispatchConfig(b_inf=2, thresh=2, t_batch=6, inf_len=4, trn_len=12)
    trace = {r.cycle: r for r in dispatch_trace(cfg, [3], [], 20)}
    starts = [c for c, r in trace.items() if r.inf_start is not None]
    assert starts == [3 + 6]
    assert trace[9].events == ("start I[r0,null]",) and trace[9].inf_start == (0, None)
    assert trace[9 + 4 + 1].events == ("done I[r0,null]",)
    static = dataclasses.replace(cfg, adaptive=False)
    assert all(r.inf_start is None for r in dispatch_trace(static, [3], [], 60))


def test_tv19_cmdq_full_freezes_issue():
    """TV19: with cmdq_full high nothing issues and the pcs stay; issue resumes where it
    stopped."""
    full = np.zeros(40, dtype=bool)
    full[5:15] = True
    trace = {r.cycle: r for r in dispatch_trace(TV16_CFG, range(2, 8), [-1], 40, full)}
    free = {r.cycle: r for r in dispatch_trace(TV16_CFG, range(2, 8), [-1], 40)}
    for c in range(5, 15):
        assert trace[c].issue is None and trace[c].cmdq_full
        assert (trace[c + 1].inf_pc, trace[c + 1].trn_pc) == (trace[5].inf_pc, trace[5].trn_pc)
    # the frozen instruction streams continue in order, and the pcs at the stall match the
    # unstalled run's at cycle 5
    assert (trace[5].inf_pc, trace[5].trn_pc) == (free[5].inf_pc, free[5].trn_pc)
    assert trace[15].issue == free[5].issue
    issued = [r.issue for r in trace.values() if r.issue]
    assert [i for i in issued if i[0] == "T"] == [f"T{k}" for k in range(12)]
    # waiting climbs above THRESH during the stall: priority mode, still no issue
    assert trace[9].mode == "PRIO" and trace[9].issue is None


def test_tv19_cmdq_full_forever_stalls_host_without_drops():
    """cmdq_full always high: no batch ever completes, the inference FIFO fills, the host is
    stalled (ready low), and every request is still there when the queue frees."""
    cfg = DispatchConfig(b_inf=2, thresh=2, t_batch=6, inf_len=4, trn_len=12, q_inf=4)
    arrivals = list(range(20))
    run = dispatch_run(cfg, arrivals, [0], 60, np.ones(60, dtype=bool), records=True)
    assert run.issued(INF) == run.issued(TRN) == 0
    assert (run.inf_done < 0).all()
    # 2 requests in the executing batch + 4 in the queue, the rest held by the host
    assert (run.inf_accept >= 0).sum() == 6 and run.waiting.max() == 4
    assert not run.records[-1].inf_ready
    stall = np.zeros(200, dtype=bool)
    stall[:60] = True
    run = dispatch_run(cfg, arrivals, [0], 200, stall)
    assert (run.inf_done >= 0).all() and len(set(run.inf_accept.tolist())) == 20


@pytest.mark.parametrize("changes, field", [
    ({"policy": "roundrobin"}, "policy"),
    ({"b_inf": 0}, "b_inf"),
    ({"b_inf": 4, "q_inf": 6}, "q_inf"),
    ({"b_inf": 4, "q_inf": 2}, "q_inf"),
    ({"inf_len": 0}, "inf_len"),
    ({"trn_len": -3}, "trn_len"),
    ({"done_lag": 0}, "done_lag"),
    ({"t_batch": 0}, "t_batch"),
    ({"q_trn": 0}, "q_trn"),
    ({"cmdq_depth": 0}, "cmdq_depth"),
    ({"thresh": -1}, "thresh"),
    ({"thresh": 65}, "thresh"),                     # above q_inf = 4 * 16
    ({"adaptive": 1}, "adaptive"),
    ({"b_inf": True}, "b_inf"),
    ({"inf_len": 2.0}, "inf_len"),
    ({"b_inf": 1024, "q_inf": 8192}, "q_inf"),
])
def test_config_errors_name_field_value_and_range(changes, field):
    with pytest.raises(ConfigError) as e:
        DispatchConfig(**changes)
    assert e.value.field == field
    text = str(e.value)
    assert text.startswith(f"DispatchConfig.{field} = {changes[field]!r} is invalid: allowed")


def test_config_defaults_and_positional_order():
    cfg = DispatchConfig()
    assert (cfg.threshold, cfg.inf_depth, cfg.q_trn, cfg.cmdq_depth) == (16, 64, 4, 4)
    assert cfg.timeout == 2 * (cfg.inf_len + cfg.done_lag) == 2 * cfg.service_time
    assert cfg.capacity == cfg.b_inf / (cfg.service_time + 1)
    pos = DispatchConfig(2, 3, 6, 4, 12, "fair", False, 2, 8, 1, 2)
    assert (pos.b_inf, pos.thresh, pos.t_batch, pos.inf_len, pos.trn_len, pos.policy,
            pos.adaptive, pos.done_lag, pos.q_inf, pos.q_trn, pos.cmdq_depth) == \
        (2, 3, 6, 4, 12, "fair", False, 2, 8, 1, 2)
    # None fields follow the fields they derive from
    small = dataclasses.replace(cfg, b_inf=4)
    assert (small.threshold, small.inf_depth) == (4, 16)


@pytest.mark.parametrize("args, what", [
    (([1.5, 2], [], 10), "inf_arrivals"),
    (([], [[1, 2]], 10), "trn_arrivals"),
    (([], [], -1), "cycles"),
    (([], [], 10, [0] * 5), "cmdq_full"),
])
def test_input_errors(args, what):
    with pytest.raises(DispatchInputError, match=what):
        dispatch_run(TV16_CFG, *args)


def test_cfg_must_be_a_dispatch_config():
    with pytest.raises(DispatchInputError, match="cfg"):
        dispatch_run({"b_inf": 2}, [], [], 10)


# ---------------------------------------------------------------------------------------------
# properties on random traffic

CONFIGS = {
    "priority": DispatchConfig(b_inf=4, inf_len=6, trn_len=10),
    "fair": DispatchConfig(b_inf=4, inf_len=6, trn_len=10, policy="fair"),
    "inf_only": DispatchConfig(b_inf=4, inf_len=6, trn_len=10, policy="inf_only"),
    "static": DispatchConfig(b_inf=4, inf_len=6, trn_len=10, adaptive=False),
    "b1": DispatchConfig(b_inf=1, thresh=2, inf_len=3, trn_len=5, t_batch=4),
    "lag3-small-queues": DispatchConfig(b_inf=3, inf_len=5, trn_len=7, done_lag=3, q_inf=3,
                                        q_trn=1, thresh=1, t_batch=9),
    "fair-lag2": DispatchConfig(b_inf=2, inf_len=1, trn_len=3, done_lag=2, policy="fair",
                                thresh=0, t_batch=1),
    "thresh0": DispatchConfig(b_inf=5, thresh=0, inf_len=4, trn_len=4),
}


def _traffic(cfg, seed, cycles=3000):
    gen = np.random.default_rng(seed)
    parts, t = [], 0
    while t < cycles:                    # bursts and lulls: loads from 0.1 to 1.6 of capacity
        span = int(gen.integers(50, 400))
        parts.append(poisson_arrivals(cfg.capacity * gen.uniform(0.1, 1.6), min(t + span, cycles),
                                      gen, t))
        t += span
    inf = np.concatenate(parts)
    trn = np.sort(gen.integers(-3, cycles, int(gen.integers(5, 40))))
    full = gen.random(cycles) < gen.choice([0.0, 0.1, 0.4])
    return inf, trn, full


def _check_properties(cfg, inf, trn, full, cycles):
    run = dispatch_run(cfg, inf, trn, cycles, full, records=True)
    recs = run.records
    b, q, lag = cfg.b_inf, cfg.inf_depth, cfg.done_lag
    n = len(inf)
    assert [r.cycle for r in recs] == list(range(run.start, cycles))

    # host side: accepted in order, one per cycle, never before arrival, never dropped;
    # the host is stalled only while the FIFO is full
    acc = run.inf_accept
    taken = acc[acc >= 0]
    assert (acc[:len(taken)] >= 0).all() and (acc[len(taken):] < 0).all()
    assert (np.diff(taken) >= 1).all() and (taken >= run.inf_arrival[:len(taken)]).all()
    rec = {r.cycle: r for r in recs}
    for k, t in enumerate(taken):
        earliest = max(run.inf_arrival[k], taken[k - 1] + 1 if k else run.start)
        assert all(not rec[c].inf_ready for c in range(earliest, t)), f"r{k} held needlessly"
    if len(taken) < n:                                   # the next request is being held
        k = len(taken)
        lo = max(run.inf_arrival[k], taken[-1] + 1 if len(taken) else run.start)
        assert all(not rec[c].inf_ready for c in range(lo, cycles))

    # FIFO: waiting counts accepted-not-started requests, within capacity
    for r in recs:
        assert 0 <= r.waiting <= q
        assert r.inf_ready == (r.waiting < q)
        started = np.count_nonzero((run.inf_start >= 0) & (run.inf_start < r.cycle))
        accepted = np.count_nonzero((acc >= 0) & (acc < r.cycle))
        assert r.waiting == accepted - started
    starts = run.inf_start[run.inf_start >= 0]
    assert (np.diff(starts) >= 0).all()                  # FIFO order
    assert (run.inf_start[:len(starts)] >= 0).all()
    assert (starts > acc[:len(starts)]).all()

    # every started request completes exactly once, with its batch, nulls never complete
    done_ids = [k for r in recs if r.inf_done for k in r.inf_done if k is not None]
    assert len(done_ids) == len(set(done_ids))
    assert sorted(done_ids) == np.flatnonzero(run.inf_done >= 0).tolist()
    assert (run.inf_done[run.inf_start < 0] < 0).all()
    batches = [r for r in recs if r.inf_start is not None]
    for r in batches:
        valid = [k for k in r.inf_start if k is not None]
        assert len(r.inf_start) == b and r.inf_start[:len(valid)] == tuple(valid)
        assert len(valid) == min(r.waiting, b) and not r.inf_busy
        if len(valid) < b:                               # padded: only after the timeout
            assert cfg.adaptive and r.cycle - acc[valid[0]] >= cfg.timeout
    # a batch waits only for the context, for a full batch or for its timer
    for r in recs:
        head = np.count_nonzero((run.inf_start >= 0) & (run.inf_start < r.cycle))
        due = r.waiting >= b or (cfg.adaptive and r.waiting > 0
                                 and r.cycle - acc[head] >= cfg.timeout)
        assert (r.inf_start is not None) == (not r.inf_busy and due), f"cycle {r.cycle}"

    # policy: mode and issue rules (A15-A17), cmdq_full, program lengths, completion lag
    last = TRN
    for r in recs:
        if cfg.policy == "priority":
            assert (r.mode == "PRIO") == (r.waiting > cfg.threshold)
        else:
            assert r.mode == ("RR" if cfg.policy == "fair" else "PRIO")
        ei = r.inf_busy and r.inf_pc < cfg.inf_len and not r.cmdq_full
        et = r.trn_busy and r.trn_pc < cfg.trn_len and not r.cmdq_full
        ctx = None if r.issue is None else r.issue[0]
        if r.cmdq_full:
            assert ctx is None
        if r.mode == "PRIO":
            assert ctx == ("I" if ei else None)
        elif ei and et:
            assert ctx == ("I" if last == TRN else "T")
        else:
            assert ctx == ("I" if ei else "T" if et else None)
        if ctx:
            assert r.issue[1:] == str(r.inf_pc if ctx == "I" else r.trn_pc)
            last = INF if ctx == "I" else TRN
    if cfg.policy == "inf_only":
        assert run.issued(TRN) == 0 and (run.trn_accept < 0).all()
        assert not any(r.trn_ready or r.trn_busy for r in recs)
    # each batch issues its whole program in order; its completion pulse comes done_lag
    # cycles after its last instruction
    for letter, length, begin, end in (("I", cfg.inf_len, "inf_start", "inf_done"),
                                       ("T", cfg.trn_len, "trn_start", "trn_done")):
        issued, began, last_cycle = [], None, None
        for r in recs:
            if getattr(r, end) is not None:
                assert began is not None and len(issued) == length
                assert issued == [f"{letter}{k}" for k in range(length)]
                assert r.cycle - lag == last_cycle
                issued, began = [], None
            if getattr(r, begin) is not None:
                assert began is None and not issued
                began = r.cycle
            if r.issue and r.issue[0] == letter:
                assert began is not None and began < r.cycle
                issued.append(r.issue)
                last_cycle = r.cycle
    # training: FIFO order, one batch at a time, every started batch done or still running
    ts = run.trn_start[run.trn_start >= 0]
    assert (np.diff(ts) > 0).all()
    td = run.trn_done[run.trn_done >= 0]
    assert (td[:-1] < ts[1:len(td)]).all() if len(td) else True
    assert all(r.waiting <= q for r in recs)
    return run


@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_properties_on_random_traffic(name, seed):
    cfg = CONFIGS[name]
    inf, trn, full = _traffic(cfg, seed + 100 * list(CONFIGS).index(name))
    run = _check_properties(cfg, inf, trn, full, 3000)
    assert (run.inf_done >= 0).sum() > 20             # the traffic exercised the unit
    if cfg.policy == "priority":
        assert (run.mode == 1).any() and (run.mode == 0).any()


@pytest.mark.parametrize("policy", ["priority", "fair", "inf_only"])
def test_properties_with_training_always_available(policy):
    cfg = DispatchConfig(b_inf=4, inf_len=8, trn_len=16, policy=policy)
    gen = np.random.default_rng(7)
    inf = poisson_arrivals(0.8 * cfg.capacity, 4000, gen)
    run = _check_properties(cfg, inf, training_always(cfg, 4000), None, 4000)
    if policy != "inf_only":
        # the host still holds training batches at the end: training never ran dry
        assert (run.trn_accept < 0).any() and run.issued(TRN) > 0


def test_priority_blocks_training_and_round_robin_shares():
    """Under a sustained spike, priority mode gives every issue slot to inference (A16), the
    fair-share policy keeps alternating, and inference-only issues no training."""
    cfg = DispatchConfig(b_inf=4, inf_len=8, trn_len=16)
    inf = np.repeat(np.arange(0, 2000, 10), 4)          # 0.4 req/cycle, above capacity 4/10
    trn = training_always(cfg, 2000)
    prio = dispatch_run(cfg, inf, trn, 2000)
    fair = dispatch_run(dataclasses.replace(cfg, policy="fair"), inf, trn, 2000)
    only = dispatch_run(dataclasses.replace(cfg, policy="inf_only"), inf, trn, 2000)
    assert (prio.issue[prio.mode == 1] != TRN).all() and (prio.mode[1000:] == 1).all()
    assert prio.issued(TRN, 1000, 2000) == 0 and fair.issued(TRN, 1000, 2000) > 400
    assert prio.issued(INF, 1000) == only.issued(INF, 1000) > fair.issued(INF, 1000)


def test_results_consistent_with_trace():
    """dispatch_run without records computes the same run (one implementation)."""
    cfg = CONFIGS["lag3-small-queues"]
    inf, trn, full = _traffic(cfg, 9, 1500)
    a = dispatch_run(cfg, inf, trn, 1500, full)
    b = dispatch_run(cfg, inf, trn, 1500, full, records=True)
    for name in ("inf_accept", "inf_start", "inf_done", "trn_start", "trn_done", "issue",
                 "mode", "waiting"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert [r.waiting for r in b.records] == b.waiting.tolist()
    assert [{"I": INF, "T": TRN}[r.issue[0]] if r.issue else 0 for r in b.records] == \
        b.issue.tolist()

# amaranth: UnusedElaboratable=no
"""The FPRaker PE's interleaved dot products (``PEConfig.pipeline``): the cycle model
:class:`golden.fpraker.pe.PESlots` against the one-context model, the cut table and the
tile's own ``pipeline`` (the range is checked with every pipelined unit's).

Expectations are derived independently of :class:`PESlots`' code paths: each context's groups
run through :func:`pe_group` on their own (the one-context PE), and the schedule a PE at full
rate must follow is written out from the turn arithmetic (context ``c`` serves every ``C``-th
cycle, a group taken in a turn starts in the context's next turn).
"""

import numpy as np
import pytest

from golden import ConfigError
from golden.fpraker import PEConfig, PESlots, TileConfig, pe_group
from golden.fpraker.pe import (ACC_ZERO, MAX_PIPELINE, STEP_CUTS, control_lag,
                               pe_dot_batch_acc, random_operands)
from hdl.fpraker import PE


def _groups(rows: int, per_row: int, lanes: int, seed: int):
    A, B = random_operands(np.random.default_rng(seed), rows, per_row * lanes, "mix")
    return A, B


@pytest.mark.parametrize("pipeline", [1, 3, 5, 8])
@pytest.mark.parametrize("slot", [0, 2])
def test_every_context_runs_the_one_context_pe_on_its_own_groups(pipeline, slot):
    cfg = PEConfig(lanes=3, int_bits=4, pipeline=pipeline)
    C, u, L = pipeline + 1, control_lag(cfg), cfg.lanes
    slot = slot % C
    rows, per_row = 2 * C, 3
    A, B = _groups(rows, per_row, L, seed=pipeline)
    # the one-context PE per context: each context's rows one after the other
    queues = [[] for _ in range(C)]
    steps = [[] for _ in range(C)]
    ends = [set() for _ in range(C)]       # per context: the steps that end a group
    for row in range(rows):
        c = (slot + row) % C
        acc = ACC_ZERO
        for g in range(per_row):
            a = A[row, g * L:(g + 1) * L].tolist()
            b = B[row, g * L:(g + 1) * L].tolist()
            queues[c].append((a, b, g == 0, None))
            acc, _, trace = pe_group(acc, a, b, cfg)
            steps[c] += trace
            ends[c].add(len(steps[c]) - 1)
    model = PESlots(cfg, slot=slot)
    first_turn = [None] * C
    done = [0] * C
    t = 0
    while any(done[c] < len(steps[c]) for c in range(C)) or not model.idle:
        c = (slot + t) % C
        offer = queues[c][0] if queues[c] else None
        out = model.cycle(offer)
        assert out.slot == c and out.acc_slot == (c + u) % C
        if first_turn[c] is None:
            # an idle context takes the first group offered to it in its first turn
            assert out.ready and not out.busy
            first_turn[c] = t
        else:
            k = (t - first_turn[c]) // C - 1       # its steps run in consecutive turns
            if k < len(steps[c]):
                assert out.busy and out.trace == steps[c][k], (t, c, k)
                assert out.last == (k in ends[c]) == out.ready, (t, c, k)
                done[c] += 1
            else:
                assert not out.busy
        if offer is not None and out.ready:
            queues[c].pop(0)
        t += 1
        assert t < 10_000
    # each dot product's result is the batch model's
    accs, _ = pe_dot_batch_acc(A, B, cfg)
    for c in range(C):
        last_row = max(row for row in range(rows) if (slot + row) % C == c)
        assert model.final[c] == accs[last_row]


def test_the_accumulator_shown_is_the_context_read_with_its_finished_steps():
    cfg = PEConfig(lanes=2, int_bits=4, pipeline=5)
    C, u = 6, control_lag(cfg)
    assert u == 2
    model = PESlots(cfg)
    # one group of one step (1.0 x 1.0) for context 0, offered in cycle 0
    out = model.cycle(([0x3F80], [0x3F80], True, None))
    assert out.ready and out.slot == 0
    acc, cycles, _ = pe_group(ACC_ZERO, [0x3F80], [0x3F80], cfg)
    assert cycles == 1
    # its step's turn is cycle C; its state was read in cycle C - u; the result is visible
    # in the cycle after the loop's C registers, C - u + C, when context 0 is read again
    shown = {}
    for t in range(1, 3 * C):
        out = model.cycle()
        if out.acc_slot == 0:
            shown[t] = out.acc
    assert shown[C - u] == ACC_ZERO and shown[2 * C - u] == acc


def test_the_eligible_mask_is_read_at_the_steps_exponent_stage():
    cfg = PEConfig(lanes=2, encoding="binary", kmax=1023, pipeline=5)
    C, u = 6, control_lag(cfg)
    model = PESlots(cfg)
    masks = [0b01, 0b10, 0b00]
    model.cycle(([0x3FC0, 0x3FC0], [0x3F80, 0x3F80], True, masks))
    seen = {}
    for t in range(1, 4 * C):
        seen[t] = model.next_mask()
        model.cycle()
    # the context's steps have turns C, 2C, 3C: their masks are read u cycles earlier
    assert [seen[k * C - u] for k in (1, 2, 3)] == masks
    assert all(v == 0b11 for t, v in seen.items() if t not in (C - u, 2 * C - u, 3 * C - u))


def test_the_cut_table():
    order = ("exponent", "offsets", "control", "reduce", "align", "add", "normalize",
             "increment")
    assert set(STEP_CUTS) == set(range(MAX_PIPELINE + 1))
    for p, cuts in STEP_CUTS.items():
        assert len(cuts) == p and len(set(cuts)) == p
        assert list(cuts) == [c for c in order if c in cuts]
        if p:
            assert cuts[0] == "exponent"
        # the state must come round before the step's control reads it again
        assert control_lag(PEConfig(pipeline=p)) < p + 1


def test_the_tiles_pipeline_is_its_own_and_its_pes_keep_one_context():
    assert TileConfig(pipeline=1).pe.pipeline == 0
    assert TileConfig(pipeline=0).pe == TileConfig().pe
    with pytest.raises(ConfigError, match="pipeline"):
        TileConfig(pipeline=2)


def test_slots_model_refuses_one_context_and_bad_slots():
    with pytest.raises(ValueError, match="one context"):
        PESlots(PEConfig())
    with pytest.raises(ValueError, match="slot"):
        PESlots(PEConfig(pipeline=2), slot=3)


@pytest.mark.parametrize("pipeline", [0, 1, 5])
def test_the_pe_has_slot_ports_only_when_interleaved(pipeline):
    pe = PE(PEConfig(lanes=2, int_bits=4, pipeline=pipeline))
    members = dict(pe.signature.members)
    assert ("slot" in members) == (pipeline > 0)
    assert ("acc_slot" in members) == (pipeline > 0)

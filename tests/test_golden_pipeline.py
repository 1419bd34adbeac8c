"""The ``pipeline`` fields of the configurations and the MAC baselines' cycle models.

``pipeline`` changes only when results appear, never what they are: the configurations of
every pipelined unit accept 0 up to the unit's maximum depth and refuse anything else naming
the field, the range and the class;
``mac16_cycles`` is ``mac16_run`` delayed by ``pipeline`` cycles, with idle cycles anywhere.
With interleaved sums (``contexts``), ``mac16_cycles`` and ``bf16_pe_cycles`` are the
one-context arithmetic over each sum's own groups, shown in rotation with the latency the
docstrings state.
"""

import numpy as np
import pytest

from flows import registry
from flows.eda.close import max_depth, pipelined_units
from golden import ConfigError
from golden.baseline import MAC16Config, mac16_cycles, mac16_run


#: every unit with a ``pipeline`` field and its deepest depth (``trainfab close`` tries 0..max)
MAX_DEPTHS = {"common.round": 3, "common.fp_add": 5, "baseline.mac16": 2, "baseline.bf16_pe": 3,
              "baseline.bf16_tile": 3, "fast.converter": 4, "fast.fmac": 3, "fast.array": 3,
              "equinox.quantizer": 4, "gecko.compressor": 2, "gecko.decompressor": 2,
              "gecko.loopback": 2, "fpraker.tile": 1, "fpraker.pe": 8}


def test_the_pipelined_units_and_their_depths():
    assert set(pipelined_units()) == set(MAX_DEPTHS)
    for name, top in MAX_DEPTHS.items():
        assert max_depth(registry.get(name).make_config()) == top, name


@pytest.mark.parametrize("name", sorted(MAX_DEPTHS))
def test_pipeline_range(name):
    cls = registry.get(name).config_class()
    top = MAX_DEPTHS[name]
    assert cls().pipeline == 0
    for depth in range(top + 1):
        assert cls(pipeline=depth).pipeline == depth
    for bad in (-1, top + 1, 1.0, True, "1"):
        with pytest.raises(ConfigError) as e:
            cls(pipeline=bad)
        assert e.value.field == "pipeline"
        assert f"pipeline = {bad!r} is invalid: allowed an integer in 0..{top}" in str(e.value)
        assert cls.__name__ in str(e.value)


def _groups(cfg, n, gen):
    fmt = cfg.format
    out = []
    for k in range(n):
        a = gen.integers(0, 1 << fmt.width, cfg.lanes)
        b = gen.integers(0, 1 << fmt.width, cfg.lanes)
        out.append((a, b, k % 7 == 0))
    return out


@pytest.mark.parametrize("fmt", ["bf16", "int8"])
@pytest.mark.parametrize("depth", [0, 1, 2])
def test_mac16_cycles_is_mac16_run_delayed(fmt, depth):
    cfg = MAC16Config(fmt=fmt, lanes=3, pipeline=depth)
    gen = np.random.default_rng(depth)
    groups = _groups(cfg, 40, gen)
    want = mac16_run(cfg, groups)
    # back to back: group k shows after edge k + depth
    got = mac16_cycles(cfg, groups + [None] * depth)
    zero = np.zeros(cfg.lanes, dtype=np.int64)
    for t, acc in enumerate(got):
        expect = want[t - depth] if t >= depth else zero
        assert np.array_equal(acc, expect), (t, acc, expect)
    # with idle cycles: the accumulators change exactly `depth` cycles after a group
    cycles, when = [], []
    for g in groups:
        cycles += [None] * int(gen.integers(0, 3))
        when.append(len(cycles))
        cycles.append(g)
    cycles += [None] * depth
    got = mac16_cycles(cfg, cycles)
    for k, t in enumerate(when):
        assert np.array_equal(got[t + depth], want[k])
        if t + depth >= 1 and k:
            assert np.array_equal(got[t + depth - 1], want[k - 1])


def test_mac16_cycles_starts_from_given_accumulators():
    cfg = MAC16Config(fmt="int8", lanes=2, pipeline=1)
    got = mac16_cycles(cfg, [(np.array([2, 3]), np.array([5, 7]), False), None],
                       acc=[100, 200])
    assert [list(map(int, a)) for a in got] == [[100, 200], [110, 221]]


@pytest.mark.parametrize("contexts, depth", [(2, 0), (3, 2), (4, 1), (6, 2)])
def test_mac16_cycles_interleaves_independent_sums(contexts, depth):
    """With ``contexts`` sums, the group of cycle ``t`` joins sum ``(slot + t) mod contexts``;
    each sum is the one-context model (``mac16_run``) over its own groups, and cycle ``t``
    shows sum ``(slot + t - depth) mod contexts`` with its groups up to cycle
    ``t - contexts - depth``."""
    cfg = MAC16Config(fmt="bf16", lanes=2, pipeline=depth, contexts=contexts)
    gen = np.random.default_rng(contexts)
    groups = _groups(cfg, 60, gen)
    cycles = [g if gen.random() < 0.8 else None for g in groups] + [None] * (contexts + depth)
    slot = int(gen.integers(0, contexts))
    got = mac16_cycles(cfg, cycles, slot=slot)
    for t in range(1, len(cycles) + 1):          # entry t - 1 is what cycle t shows
        c = (slot + t - depth) % contexts
        mine = [g for u, g in enumerate(cycles[:max(t - contexts - depth + 1, 0)])
                if g is not None and (slot + u) % contexts == c]
        want = mac16_run(cfg, mine)[-1] if mine else np.zeros(cfg.lanes, dtype=np.int64)
        assert np.array_equal(got[t - 1], want), (t, c)


def test_mac16_one_context_per_cycle_is_the_single_sum():
    """Every group offered ``contexts`` times in a row: every sum is the one-context sum."""
    gen = np.random.default_rng(7)
    one = MAC16Config(fmt="fp16", lanes=3)
    groups = _groups(one, 30, gen)
    want = mac16_run(one, groups)[-1]
    cfg = MAC16Config(fmt="fp16", lanes=3, contexts=3, pipeline=1)
    cycles = [g for g in groups for _ in range(3)] + [None] * 4
    got = mac16_cycles(cfg, cycles + [None] * 3, slot=2)
    for shown in got[-3:]:
        assert np.array_equal(shown, want)


def test_mac16_contexts_range_and_starting_sums():
    for bad in (0, 7, True):
        with pytest.raises(ConfigError) as e:
            MAC16Config(contexts=bad)
        assert e.value.field == "contexts"
    with pytest.raises(ConfigError, match="contexts = 2 is invalid: allowed 1 with the integer"):
        MAC16Config(fmt="int8", contexts=2)
    cfg = MAC16Config(fmt="bf16", lanes=1, contexts=2)
    with pytest.raises(ValueError, match="slots 0..1"):
        mac16_cycles(cfg, [None], slot=2)
    with pytest.raises(ValueError, match=r"\(contexts, lanes\) = \(2, 1\)"):
        mac16_cycles(cfg, [None], acc=[0])
    # the given sums, shown in rotation while nothing is offered
    got = mac16_cycles(cfg, [None] * 4, acc=[[0x3F800000], [0x40000000]], slot=1)
    assert [int(a[0]) for a in got] == [0x3F800000, 0x40000000, 0x3F800000, 0x40000000]


@pytest.mark.parametrize("contexts, depth", [(2, 1), (4, 3), (6, 1)])
def test_bf16_pe_cycles_interleaves_independent_dot_products(contexts, depth):
    """The bit-parallel PE with ``contexts`` dot products: the group of cycle ``t`` joins dot
    product ``(slot + t) mod contexts``; each is the one-context PE's chain
    (``baseline_group``) over its own groups, and cycle ``t`` shows dot product
    ``(slot + t - depth) mod contexts`` with its groups up to cycle ``t - contexts - depth``."""
    from golden.baseline import Acc, BaselineConfig, baseline_group, bf16_pe_cycles
    from golden.fpraker.pe import random_operands
    cfg = BaselineConfig(lanes=3, int_bits=4, pipeline=depth, contexts=contexts)
    gen = np.random.default_rng(contexts)
    A, B = random_operands(gen, 50, cfg.lanes, "mix")
    cycles = [(A[k].tolist(), B[k].tolist(), k % 6 == 0) if gen.random() < 0.8 else None
              for k in range(50)] + [None] * (contexts + depth)
    slot = int(gen.integers(0, contexts))
    got = bf16_pe_cycles(cfg, cycles, slot=slot)
    for t in range(1, len(cycles) + 1):          # entry t - 1 is what cycle t shows
        c = (slot + t - depth) % contexts
        acc = Acc.ZERO
        for u, g in enumerate(cycles[:max(t - contexts - depth + 1, 0)]):
            if g is not None and (slot + u) % contexts == c:
                acc = baseline_group(Acc.ZERO if g[2] else acc, g[0], g[1], cfg)[0]
        assert got[t - 1] == acc, (t, c)


def test_bf16_pe_contexts_need_the_pipelined_pe():
    from golden.baseline import Acc, BaselineConfig, BaselineTileConfig, bf16_pe_cycles
    with pytest.raises(ConfigError, match="contexts = 2 is invalid: allowed 1 with pipeline = 0"):
        BaselineConfig(contexts=2)
    with pytest.raises(ConfigError, match="BaselineTileConfig.contexts = 2 is invalid"):
        BaselineTileConfig(contexts=2)
    for bad in (0, 7):
        with pytest.raises(ConfigError) as e:
            BaselineConfig(pipeline=1, contexts=bad)
        assert e.value.field == "contexts"
    assert BaselineTileConfig(pipeline=1, contexts=3).pe.contexts == 3
    with pytest.raises(ValueError, match="2 states for 3 contexts"):
        bf16_pe_cycles(BaselineConfig(pipeline=1, contexts=3), [None], acc=[Acc.ZERO] * 2)


@pytest.mark.parametrize("contexts, depth", [(3, 1), (6, 3)])
def test_bf16_tile_cycles_are_the_pes_interleaved(contexts, depth):
    """The tile with ``contexts`` interleaved output tiles: every PE's read-out in every cycle
    is the PE model's (``bf16_pe_cycles`` over the PE's own column A, row B and column clear),
    and ``busy`` stays up ``pipeline + contexts - 1`` cycles after each group."""
    from golden.baseline import (BaselineTileConfig, bf16_pe_cycles, bf16_tile_busy,
                                 bf16_tile_cycles)
    from golden.common.accumulator import read_out
    from golden.fpraker.pe import random_operands
    cfg = BaselineTileConfig(rows=2, cols=3, lanes=2, int_bits=4, pipeline=depth,
                             contexts=contexts)
    gen = np.random.default_rng(contexts + depth)
    n = 30
    A = [random_operands(gen, n, cfg.lanes, "mix")[0] for _ in range(cfg.cols)]
    B = [random_operands(gen, n, cfg.lanes, "mix")[1] for _ in range(cfg.rows)]
    cycles, when = [], []
    for g in range(n):
        if gen.random() < 0.3:
            cycles.append(None)
        clear = gen.random(cfg.cols) < 0.2
        when.append(len(cycles))
        cycles.append((np.array([A[c][g] for c in range(cfg.cols)]),
                       np.array([B[r][g] for r in range(cfg.rows)]), clear))
    cycles += [None] * (depth + contexts)
    slot = int(gen.integers(0, contexts))
    got = bf16_tile_cycles(cfg, cycles, slot=slot)
    for r in range(cfg.rows):
        for c in range(cfg.cols):
            mine = [None if it is None else (it[0][c], it[1][r], bool(it[2][c]))
                    for it in cycles]
            want = bf16_pe_cycles(cfg.pe, mine, slot=slot)
            assert [int(o.out[r, c]) for o in got] == [read_out(a, cfg.pe) for a in want]
    assert [o.busy for o in got] == bf16_tile_busy(cfg, when, len(cycles))
    assert bf16_tile_busy(cfg, [0], depth + contexts + 1) == \
        [True] * (depth + contexts) + [False]

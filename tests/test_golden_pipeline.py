"""The ``pipeline`` fields of the configurations and the MAC baseline's cycle model.

``pipeline`` changes only when results appear, never what they are: the configurations of
every pipelined unit accept 0 up to the unit's maximum depth and refuse anything else naming
the field, the range and the class;
``mac16_cycles`` is ``mac16_run`` delayed by ``pipeline`` cycles, with idle cycles anywhere.
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
              "gecko.loopback": 2, "fpraker.tile": 1}


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

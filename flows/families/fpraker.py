"""FPRaker (``docs/specs/fpraker.md``): the term encoder and the term-serial bfloat16 PE.

Declares the units, the PE core the paper reports without its encoders, the paper's Table III
area ratios against the bit-parallel baseline PE, and the benchmark of the PE's golden model
(speed beside the baseline's, mean cycles per group of the four encoder/out-of-bounds variants).
"""

import functools
import time

from ..bench import Bench
from ..registry import Unit
from ..report import Comparison, OwnClock, Part
from ..studies import bdc
from ..studies.tensors import TensorAnalysis
from ..eda.timing import ClockTarget

ORDER = 10

UNITS = (
    Unit(name="fpraker.encoder",
         summary="FPRaker term encoder: bf16 significands to signed power-of-two terms",
         config="EncoderConfig", component="TermEncoder", preset="fpraker-paper",
         extra_configs=({"lanes": 3, "encoding": "binary"},),
         test_sizes={"quick": 400, "standard": 6000, "full": 30000},
         synth_overrides={"lanes": 2},
         paper="≈202 µm²/lane at 65 nm (12,950 µm² for 64 lanes, Table III)"),
    Unit(name="fpraker.pe",
         summary="FPRaker PE: 8 term-serial bf16 MAC lanes into a 1.9 accumulator",
         config="PEConfig", component="PE", preset="fpraker-paper",
         extra_configs=({"keep_bits": 6, "kmax": 9},
                        {"lanes": 2, "encoding": "binary", "kmax": 1023},
                        {"dmax": 12}, {"lanes": 4, "int_bits": 4}, {"out_round": "rne"},
                        {"lanes": 1, "dmax": 0, "frac_bits": 14, "int_bits": 2},
                        {"lanes": 3, "int_bits": 4, "pipeline": 3},
                        {"lanes": 2, "encoding": "binary", "pipeline": 8}),
         # without OB every term is taken: 8 lanes take about 3x the cycles of the others;
         # make test runs binary terms on 2 lanes
         full_configs=({"encoding": "binary", "kmax": 1023}, {"encoding": "binary"}),
         test_sizes={"quick": 300, "standard": 600, "full": 20000},
         synth_overrides={"lanes": 2},
         # beside the bit-parallel PE at the same 2 lanes (baseline.bf16_pe)
         demo_config={"lanes": 2},
         breakdown_by="flows.families.fpraker:pe_blocks"),
    Unit(name="fpraker.tile",
         summary="FPRaker tile: rows x cols term-serial PEs (group exponent mode), one term "
                 "encoder per column, one exponent block per 2 PEs, B buffers, stream inputs",
         config="TileConfig", component="Tile", preset="fpraker-paper",
         extra_configs=({"rows": 2, "cols": 2},
                        {"rows": 3, "cols": 2, "share_exp": False, "b_buffers": 0},
                        {"rows": 2, "cols": 3, "b_buffers": 2, "encoding": "binary",
                         "int_bits": 6, "kmax": 1023},
                        {"rows": 2, "cols": 2, "sync": "independent"},
                        {"rows": 3, "cols": 2, "sync": "independent", "encoding": "binary",
                         "int_bits": 6, "kmax": 9},
                        {"rows": 2, "cols": 2, "pipeline": 1},
                        {"rows": 3, "cols": 2, "sync": "independent", "pipeline": 1}),
         # the lock-step 2x4 and 4x4, and the independent 4x4
         full_configs=({"rows": 2, "cols": 4}, {"rows": 4, "cols": 4},
                       {"rows": 4, "cols": 4, "sync": "independent", "b_buffers": 2}),
         # make test: 150 random groups per configuration (4-12 s each on Icarus); the full
         # effort runs 2,500 per configuration and the paper's 8x8 on Verilator
         test_sizes={"quick": 100, "standard": 150, "full": 2500},
         synth_overrides={"rows": 2, "cols": 1, "lanes": 2},
         paper_test_effort="full",
         breakdown=("pe*.lanes", "pe*.accumulator", "col*.encoder", "xb*", "bbuf*"),
         breakdown_table="flows.families.fpraker:table_iii", synth_share=False,
         cslow_field="contexts",
         demo_overrides={"rows": 4, "cols": 4},
         paper="317,068 µm² at 65 nm: PE array 304,118 + term encoders 12,950 (Table III)"),
    Unit(name="fpraker.bdc_encoder",
         summary="FPRaker base-delta compression encoder: a bf16 value per cycle to packed "
                 "words (double-buffered groups)",
         config="BDCConfig", component="BDCEncoder", preset="fpraker-paper",
         extra_configs=({"group": 5, "word": 19}, {"group": 2, "word": 64}),
         test_sizes={"quick": 40, "standard": 600, "full": 5000},
         synth_overrides={"group": 4}),
    Unit(name="fpraker.bdc_decoder",
         summary="FPRaker base-delta compression decoder: packed words to a bf16 value per "
                 "cycle, sticky stream error",
         config="BDCConfig", component="BDCDecoder", preset="fpraker-paper",
         extra_configs=({"group": 5, "word": 19}, {"group": 2, "word": 64}),
         test_sizes={"quick": 40, "standard": 600, "full": 5000},
         synth_overrides={"group": 4}),
    Unit(name="fpraker.bdc_loopback",
         summary="FPRaker BDC encoder feeding a decoder (end-to-end check)",
         config="BDCConfig", component="BDCLoopback", preset="fpraker-paper",
         extra_configs=({"group": 7, "word": 24},),
         test_sizes={"quick": 40, "standard": 600, "full": 5000},
         synth_overrides={"group": 4}),
)

PARTS = (
    Part(name="fpraker.pe/core", unit="fpraker.pe", component="PECore",
         summary="the PE without its encoder lanes (the paper's per-PE figure excludes encoders)",
         paper="4,752 µm² per PE at 65 nm (Table III)"),
    Part(name="fpraker.pe/p6", unit="fpraker.pe", overrides={"pipeline": 6},
         summary="the PE with its step cut six times and seven interleaved dot products (its "
                 "200 MHz depth)",
         paper="— (not in the paper: the PE C-slowed)"),
)

#: FPRaker Table III: PE 4,752 µm², 64 encoder lanes 12,950 µm², bit-parallel PE 22,212 µm²
COMPARISONS = (
    Comparison(label="FPRaker tile with its encoders / bit-parallel bf16 tile of the same size",
               numerator="fpraker.tile", denominator="baseline.bf16_tile",
               paper_ratio=317068 / 1421579,
               source="FPRaker Table III: 317,068 vs 1,421,579 µm² (65 nm)"),
    Comparison(label="FPRaker PE without encoders / bit-parallel bf16 PE",
               numerator="fpraker.pe/core", denominator="baseline.bf16_pe",
               paper_ratio=4752 / 22212,
               source="FPRaker Table III per PE: 4,752 vs 22,212 µm² (65 nm)"),
    Comparison(label="FPRaker PE with its 8 encoder lanes / bit-parallel bf16 PE",
               numerator="fpraker.pe", denominator="baseline.bf16_pe",
               paper_ratio=(4752 + 12950 / 8) / 22212,
               source="FPRaker Table III: (4,752 + 12,950/8) vs 22,212 µm² (65 nm)"),
)


#: the off-chip footprint under base-delta compression (spec §7) of tensor files and captures
TENSOR_ANALYSES = (
    TensorAnalysis(name="bdc", summary="footprint under FPRaker's base-delta exponent "
                   "compression (bits per value, header histogram, escapes)",
                   run=bdc.bdc_stats, markdown=bdc.bdc_markdown, options=bdc.OPTIONS),
)


#: FPRaker Table III (65 nm, post-layout): PE array, term encoders, total
TABLE_III = {"fpraker.tile": (304_118, 12_950, 317_068), "baseline.bf16_tile": (1_421_579, None,
                                                                                1_421_579)}
#: the tile units of Table III and their blocks: label -> breakdown labels summed
TILE_BLOCKS = {
    "fpraker.tile": (
        ("term encoders (one per column)", ("col*.encoder",)),
        ("exponent blocks (one per 2 PEs)", ("xb*",)),
        ("B buffers (per row)", ("bbuf*",)),
        ("PEs: Block 2 shift-and-reduce", ("pe*.lanes",)),
        ("PEs: Block 3 accumulation (group-sum adder, sum/accumulator registers, normalize, "
         "read-out)", ("pe*.accumulator",)),
        ("PEs: control (k = δ + t, OB, base and window, δ/done/taken registers; term "
         "selectors when independent)", ("pe* (rest)",)),
        ("column control (A registers, group counters)", ("col* (rest)",)),
        ("tile control (synchronization)", ("(top)",)),
    ),
    "baseline.bf16_tile": (
        ("PEs: products (multipliers, exponent adders)", ("pe*.products",)),
        ("PEs: Block 2 alignment and reduction", ("pe*.lanes",)),
        ("PEs: exponent max tree", ("pe*.exponent",)),
        ("PEs: Block 3 accumulation", ("pe*.accumulator",)),
        ("PEs: rest", ("pe* (rest)",)),
        ("tile control", ("(top)",)),
    ),
}


def _area_json(unit: str):
    import json

    from .. import build_dir

    path = build_dir() / "area" / unit / "area.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def table_iii(report: dict, reports: dict | None = None, header: bool = True) -> str:
    """Table III of the FPRaker paper beside ours, for a tile's ``area --breakdown`` report: PE
    array (everything but the term encoders), term encoders and total, and the blocks.  The
    other tile's figures come from ``reports`` (name -> area report, as ``report``/``demo``
    hold them) or else from its own last report in ``build/area/<unit>/`` (the ratio needs
    both); areas in µm² and gate equivalents (÷ the liberty's NAND2)."""
    unit = report["unit"]
    other = "baseline.bf16_tile" if unit == "fpraker.tile" else "fpraker.tile"
    reports = {unit: report,
               other: (reports or {}).get(other) or _area_json(other)}
    ge = report.get("ge_um2")

    def fmt(um2):
        if um2 is None:
            return "N/A"
        return f"{um2:,.0f} ({um2 / ge:,.0f} GE)" if ge else f"{um2:,.0f}"

    def split(r):
        blocks = {b["block"]: b["area_um2"] for b in r.get("breakdown", [])}
        enc = blocks.get("col*.encoder")
        total = r["area_um2"]
        hier = r.get("hierarchical_area_um2", total)
        return (None if enc is None else total - enc * total / hier,
                None if enc is None else enc * total / hier, total)

    lib = str(report.get("liberty", "")).rsplit("/", 1)[-1]
    lines = [f"## FPRaker Table III: tile area ({lib}, {report.get('clock_ns')} ns)",
             "", "| tile | PE array µm² | term encoders µm² | total µm² | normalized | "
             "paper (65 nm): PE array / encoders / total | paper normalized |",
             "|---|---|---|---|---|---|---|"]
    base = reports["baseline.bf16_tile"]
    for name in ("fpraker.tile", "baseline.bf16_tile"):
        r = reports[name]
        p = TABLE_III[name]
        paper = " / ".join(f"{x:,}" if x else "N/A" for x in p)
        pnorm = f"{p[2] / TABLE_III['baseline.bf16_tile'][2]:.2f}×"
        if r is None:
            lines.append(f"| {name} | not measured (run `trainfab area {name} --breakdown`) "
                         f"| | | | {paper} | {pnorm} |")
            continue
        cfg = r.get("config", {})
        pe_arr, enc, total = split(r)
        if pe_arr is None:
            pe_arr = total
        same = base is not None and all(cfg.get(k) == base.get("config", {}).get(k)
                                        for k in ("rows", "cols", "lanes"))
        norm = (f"{total / base['area_um2']:.2f}×" if same else
                "n/a (tile sizes differ)" if base is not None else "n/a")
        size = f"{cfg.get('rows')}×{cfg.get('cols')}"
        lines.append(f"| {name} {size} | {fmt(pe_arr)} | {fmt(enc)} | {fmt(total)} | {norm} | "
                     f"{paper} | {pnorm} |")
    lines += ["", "PE array = total − term encoders; the encoders' share is the hierarchical "
              "run's, applied to the flattened total.", ""]
    if not header:
        lines = []
    lines += [f"### Blocks of {unit} (hierarchical synthesis)", "",
              "| block | µm² | GE | % | flip-flops |", "|---|---|---|---|---|"]
    blocks = {b["block"]: b for b in report.get("breakdown", [])}
    hier = report.get("hierarchical_area_um2") or 1.0
    for label, keys in TILE_BLOCKS.get(unit, ()):
        area = sum(blocks[k]["area_um2"] for k in keys if k in blocks)
        ffs = sum(blocks[k]["flip_flops"] for k in keys if k in blocks)
        g = f"{area / ge:,.0f}" if ge else "n/a"
        lines.append(f"| {label} | {area:,.0f} | {g} | {100 * area / hier:.1f} | {ffs} |")
    return "\n".join(lines)


def variants() -> tuple:
    """The four PE variants of spec §3.5 / TV18, in the expected order of mean cycles per group."""
    from golden.fpraker.pe import KMAX_LIMIT, PEConfig

    return (
        ("CSD + OB", PEConfig()),
        ("CSD, no OB", PEConfig(kmax=KMAX_LIMIT)),
        ("binary + OB", PEConfig(encoding="binary")),
        ("binary, no OB", PEConfig(encoding="binary", kmax=KMAX_LIMIT)),
    )


#: data sets of the cycle statistics
DATA = ("N(0,1)", "50% zeros")


def _data(rng, n, K, kind):
    import numpy as np

    from golden.fpraker.pe import random_operands

    A, B = random_operands(rng, n, K, "normal")
    if kind == "50% zeros":
        A = np.where(rng.random(A.shape) < 0.5, 0, A).astype(np.uint16)
    return A, B


def bench_fpraker_pe(n: int = 100_000, K: int = 64, n_cycles: int = 100_000, seed: int = 0):
    """Measure the FPRaker PE golden model.

    Parameters
    ----------
    n, K : int
        Rows and row length of the speed run (default PE config, N(0,1) data).
    n_cycles : int
        Groups per variant for the cycle statistics (each one group of 8 pairs from acc = 0,
        the setting of spec §3.5's prototype numbers).
    seed : int

    Returns
    -------
    dict
        ``mac_per_s`` of the FPRaker and baseline batch models, and ``cycles`` mapping
        (data, variant) to the mean cycles per 8-MAC group.
    """
    import numpy as np

    from golden.baseline import BaselineConfig, baseline_dot_batch
    from golden.fpraker.pe import PEConfig, pe_dot_batch, random_operands

    rng = np.random.default_rng(seed)
    A, B = random_operands(rng, n, K, "normal")
    t0 = time.perf_counter()
    pe_dot_batch(A, B, PEConfig())
    t1 = time.perf_counter()
    baseline_dot_batch(A, B, BaselineConfig())
    t2 = time.perf_counter()
    result = {"mac_per_s": {"fpraker.pe": n * K / (t1 - t0), "baseline.bf16_pe": n * K / (t2 - t1)},
              "cycles": {}}
    for kind in DATA:
        A, B = _data(rng, n_cycles, 8, kind)
        for name, cfg in variants():
            result["cycles"][(kind, name)] = float(pe_dot_batch(A, B, cfg)[1].mean())
    return result


def pe_tables(scale: int = 1, seed: int = 0) -> str:
    """``trainfab bench``'s tables: MAC/s of both PE models, mean cycles per group."""
    r = bench_fpraker_pe(n=100_000 // scale, n_cycles=100_000 // scale, seed=seed)
    names = [name for name, _ in variants()]
    lines = ["| golden model | MAC/s |", "|---|---|"]
    lines += [f"| {unit} | {speed:,.0f} |" for unit, speed in r["mac_per_s"].items()]
    lines += ["", "| data | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    lines += [f"| {kind} | " + " | ".join(f"{r['cycles'][(kind, name)]:.3f}" for name in names)
              + " |" for kind in DATA]
    return "\n".join(lines)


def tile_tables(scale: int = 1, seed: int = 0) -> str:
    """``trainfab bench``'s tile table: MAC/s of the tile GEMM model's two engines on a
    MiniLM-sized layer (:func:`golden.fpraker.tile_batch.bench_tile_gemm`)."""
    from golden.fpraker.tile_batch import bench_tile_gemm

    return bench_tile_gemm(scale=scale, seed=seed)


def exp_mode_tables(scale: int = 1, seed: int = 0) -> str:
    """``trainfab bench``'s comparison of the PE's two exponent modes (spec §3.3 step E, the
    paper's once-per-group Block 1): on random dot products of K = 64 per operand kind, the
    share of results within the spec's TV18 tolerance ``2**-7 * sum|a*b|`` of the exact sum
    (``math.fsum`` of the exact float64 products), the largest and mean error as a fraction of
    that tolerance, and the mean cycles per 8-MAC group (standalone PE, no tile stalls)."""
    import math

    import numpy as np

    from golden.common import bf16_to_float
    from golden.fpraker.pe import PEConfig, pe_dot_batch, random_operands

    rng = np.random.default_rng(seed)
    n = max(200, 20_000 // scale)
    lines = ["| operands | exponent mode | within 2^-7·Σ|ab| | max error / bound | "
             "mean error / bound | cycles per group |", "|---|---|---|---|---|---|"]
    data = [(kind, *random_operands(rng, n, 64, kind))
            for kind in ("normal", "relu", "wide", "cancel")]
    real = _minilm_pairs(max(1, 16 // scale))
    if real is not None:
        data.append(real)
    for kind, A, B in data:
        prod = bf16_to_float(A).astype(np.float64) * bf16_to_float(B).astype(np.float64)
        exact = np.array([math.fsum(r) for r in prod])
        bound = np.abs(prod).sum(axis=1) / 128
        for mode in ("step", "group"):
            out, cyc = pe_dot_batch(A, B, PEConfig(exp_mode=mode))
            err = np.abs(bf16_to_float(out).astype(np.float64) - exact)
            rel = np.where(bound > 0, err / np.where(bound > 0, bound, 1), 0.0)
            lines.append(f"| {kind} | {mode} | {np.mean(err <= bound):.3%} | {rel.max():.3f} | "
                         f"{rel.mean():.4f} | {cyc.mean() / (A.shape[1] / 8):.3f} |")
    if real is None:
        lines.append("\n(MiniLM rows appear once `trainfab speedup --model minilm` or "
                     "`make demo` has fetched the model into build/models.)")
    return "\n".join(lines)


def _minilm_pairs(rows: int):
    """``("MiniLM …", A, B)``: every token of the study's sentences against the first ``rows``
    output features of MiniLM's first FFN output layer (K = 1536), bf16 — when the model is
    already in ``build/models`` (the bench does not fetch); else None."""
    import numpy as np

    from golden.common import float_to_bf16

    from ..studies import models

    if not (models.models_dir() / "minilm").is_dir():
        return None
    x, W = models.layer_operands("minilm", say=lambda msg: None)
    bits = lambda v: float_to_bf16(np.ascontiguousarray(v, dtype=np.float32))
    A = np.repeat(bits(x), rows, axis=0)
    B = np.tile(bits(W[:rows]), (x.shape[0], 1))
    return (f"MiniLM {models.POWER_LAYER} (K = {x.shape[1]})", A, B)


#: the operands the own-clock comparison counts the FPRaker designs' cycles on (seed 0): a
#: MiniLM-sized layer (ReLU'd 128 × 384 activations against 384 × 384 N(0,1) weights, the
#: tile bench's) and N(0,1) both
OWN_CLOCK_OPERANDS = {"MiniLM-sized layer (ReLU × N(0,1))": ("relu", 128, 384, 384),
                      "random N(0,1)": ("normal", 128, 384, 384)}


def _golden_config(cls, config: dict):
    import dataclasses

    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in config.items() if k in names})


def tile_work(config: dict) -> list:
    """MACs per tile cycle of the FPRaker tile at ``config`` on :data:`OWN_CLOCK_OPERANDS`
    (the tile GEMM model's cycle count: every stall of the tile included; computed once per
    configuration and process)."""
    return list(_tile_work(tuple(sorted(config.items()))))


@functools.cache
def _tile_work(items: tuple) -> tuple:
    import numpy as np

    from golden.fpraker.pe import random_operands
    from golden.fpraker.tile import TileConfig
    from golden.fpraker.tile_batch import tile_gemm_fast

    cfg = _golden_config(TileConfig, dict(items))
    out = []
    for label, (kind, M, K, N) in OWN_CLOCK_OPERANDS.items():
        rng = np.random.default_rng(0)
        S, _ = random_operands(rng, M, K, kind)
        P, _ = random_operands(rng, N, K, "normal")
        r = tile_gemm_fast(S, P, cfg)
        out.append((label, float(r.macs / r.cycles)))
    return tuple(out)


def pe_work(config: dict) -> list:
    """MACs per cycle of the standalone FPRaker PE at ``config`` on :data:`OWN_CLOCK_OPERANDS`
    (dot products of K = 384 from a cleared accumulator, the golden model's cycles).  An
    interleaved PE (``pipeline >= 1``) takes one step per cycle over its dot products, each
    with the one-context cycle count, so the figure holds for it too."""
    import numpy as np

    from golden.fpraker.pe import PEConfig, pe_dot_batch, random_operands

    cfg = _golden_config(PEConfig, config)
    out = []
    for label, (kind, M, K, _) in OWN_CLOCK_OPERANDS.items():
        A, B = random_operands(np.random.default_rng(0), M, K, kind)
        cycles = pe_dot_batch(A, B, cfg)[1].sum()
        out.append((label, float(M * K / cycles)))
    return out


def _lanes_per_cycle(config: dict) -> list:
    return [("any", config["rows"] * config["cols"] * config["lanes"] if "rows" in config
             else config["lanes"])]


OWN_CLOCKS = (
    OwnClock(label="FPRaker Table III tile", unit="fpraker.tile",
             baseline="baseline.bf16_tile", work=tile_work, baseline_work=_lanes_per_cycle,
             source="FPRaker Table III (both at 600 MHz in the paper)"),
    OwnClock(label="FPRaker PE", unit="fpraker.pe", baseline="baseline.bf16_pe",
             work=pe_work, baseline_work=_lanes_per_cycle,
             source="FPRaker §V (PE without tile stalls)"),
    # both sides C-slowed to their 200 MHz depths: the like-for-like pair at high clocks
    OwnClock(label="FPRaker PE, interleaved", unit="fpraker.pe/p6",
             baseline="baseline.bf16_pe/c6", work=pe_work, baseline_work=_lanes_per_cycle,
             source="not in the paper: both PEs with interleaved dot products"),
)

BENCHES = (
    Bench(name="fpraker.pe", summary="FPRaker and baseline PE batch models: MAC/s and cycles "
          "per 8-MAC group", run=pe_tables),
    Bench(name="fpraker.tile", summary="FPRaker tile GEMM model (numba and NumPy engines): "
          "MAC/s on a 128x384x384 layer, cycles per group", run=tile_tables),
    Bench(name="fpraker.exp_modes", summary="FPRaker PE step vs group exponent mode: error "
          "against exact sums (TV18 bound) and cycles per group", run=exp_mode_tables),
)

def pe_blocks(cfg) -> tuple[str, ...]:
    """The FPRaker PE's blocks for ``area --breakdown``: the encoder and the core's operand
    registers, exponent path, lanes and accumulator; the interleaved PE (``pipeline > 0``)
    holds its encoder lanes and control in rings at its top, beside the lanes and the
    accumulator."""
    if cfg.pipeline:
        return ("lanes", "accumulator")
    return ("encoder", "core.operands", "core.exponent", "core.lanes", "core.accumulator")


#: the configurations that close the FPRaker units' timing (``trainfab timing``): 200 MHz for
#: the PE, 150 MHz for the 8 x 8 tile
TIMING = (
    ClockTarget(unit="fpraker.pe", overrides={"pipeline": 6},
                note="the step cut six times, seven interleaved dot products"),
    ClockTarget(unit="fpraker.tile", overrides={"pipeline": 1, "contexts": 4},
                target_mhz=150.0, large=True,
                note="four interleaved GEMMs (the C-slow tile, retimed by synthesis), the "
                     "exponent blocks' outputs registered"),
)

__all__ = ["UNITS", "TIMING", "PARTS", "pe_blocks", "COMPARISONS", "OWN_CLOCKS", "BENCHES", "tile_work", "pe_work", "TABLE_III", "TILE_BLOCKS", "table_iii",
           "variants", "bench_fpraker_pe", "pe_tables", "tile_tables", "exp_mode_tables"]

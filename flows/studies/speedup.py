"""``trainfab speedup``: FPRaker's speedup over the iso-area bit-parallel baseline on real GEMMs.

Usage::

    trainfab speedup FILE... [--orientation given|swapped|both] [--max-rows N] [--quick]
    trainfab speedup CAPTURE_DIR... [--max-rows N] [--quick]
    trainfab speedup --model minilm|minilm-l3 [--layers L] [--max-rows N] [--quick]
    common: [--area-ratio X] [--set FIELD=VALUE ...] [--output/-o DIR]

What is studied
---------------
Every GEMM ``out[r][c] = Σ_k B_r[k]·A_c[k]`` (spec ``docs/specs/fpraker.md`` §5.1, §6) is run on the
golden cycle model :func:`golden.fpraker.gemm.tile_gemm`: the **serial** operand ``S`` (M, K),
term-encoded, one row per tile column; the **parallel** operand ``P`` (N, K), bit-parallel, one
row per tile row; the reduction index k walked in groups of 8 (the lanes), zero-padded to whole
groups.  Operands are bfloat16 (float32 data is rounded to bf16 with round-to-nearest-even).
The tile time is that of ONE tile doing every tile-run of the GEMM one after another.

Sources of GEMMs
~~~~~~~~~~~~~~~~
* ``FILE...`` — ``.npz`` / ``.safetensors`` (or ``.npy``) tensor files, read with the bounded
  readers of :mod:`flows.studies.tensors`.  **Naming rule**: a GEMM ``G`` is a pair of 2-D tensors in
  the same file, either ``G.serial`` (M, K) + ``G.parallel`` (N, K), or ``G.act`` (M, K) +
  ``G.weight`` (N, K) — the forward pass A×W, activations serial (§5.1: activations per tile
  column, weights per tile row).  Both operands hold the reduction index k on their last axis
  (an ``nn.Linear`` weight ``(out, in)`` and activations ``(tokens, in)`` as they are).  Every
  tensor must belong to a pair; a tensor without its partner, a name outside the rule, a tensor
  that is not 2-D or empty, different K, NaN/Inf values or an unreadable file stop the run with
  one line (exit status 2).  ``--orientation`` (default ``given``) also or instead runs the swap
  (serial ↔ parallel).  Fortran-order ``.npy`` members are read in storage order: save C-order
  arrays.
* ``--model NAME`` — fetches a real transformer (:mod:`flows.studies.models`: ``minilm`` =
  all-MiniLM-L6-v2, ``minilm-l3`` = paraphrase-MiniLM-L3-v2) with pip into ``build/models``,
  runs its own float32 forward pass in NumPy on eight fixed English sentences
  (:data:`flows.studies.models.SENTENCES`) and studies every linear layer (Q, K, V, attention output,
  FFN intermediate, FFN output of each encoder layer) as it is computed, first with serial =
  activations, parallel = weights (§5.1), then the reverse (``--orientation``, default
  ``both``; ``given`` = activations serial).  Attention's score and context products (Q·Kᵀ,
  P·V) are not linear layers and are not studied.
* ``CAPTURE_DIR...`` — training captures (:mod:`flows.studies.captures`, written by ``trainfab
  train --capture DIR``): a folder holding ``manifest.json``, or a folder of such folders (one
  per format, ``DIR/<format>/manifest.json``), several allowed; each capture is reported on its
  own.  Every captured GEMM (one mini-batch per epoch; every layer with weights in the phases
  ``fwd``, ``bwd_data`` and ``wgrad``) is read from its epoch file with the FILE reader and run
  in both orientations: serial = the first operand ``x`` of the engine's ``x @ y`` (``given``:
  activations A in ``fwd``, gradients G in ``bwd_data``, activations A.T in ``wgrad``) and
  serial = the second (``swapped``: weights W.T, weights W, gradients G.T).  **Serial operand
  choice** (FPRaker processes either operand serially and picks it per layer): one choice per
  layer *and phase* (the three GEMMs of a layer have different operands, and the choice is a
  per-GEMM configuration of the tile array), fixed for the whole run: the orientation with
  fewer FPRaker cycles summed over all captured epochs (ties: ``given``).  The ``best`` figures
  use it; ``best_each_epoch`` (JSON only) re-chooses per GEMM and epoch, an upper bound.  Files
  and capture folders are not mixed in one run; ``--orientation`` does not apply.  A missing
  epoch file, a broken manifest, or a file that does not hold the GEMMs its manifest lists stop
  the run with one line.

Sampling and size
~~~~~~~~~~~~~~~~~
``--max-rows N`` keeps at most N rows of the *activation* operand for ``--model`` (tokens,
evenly spaced over the batch: rows ``i·M//N``; weights stay whole; default 64 of the 154
tokens, :data:`MODEL_ROWS`; ``--max-rows 1000`` keeps all) and of *each* operand for tensor
files and captures (default: all); the report gives the studied shapes and MACs.  ``--layers L``
runs the first L encoder layers only.  ``--quick`` is a small run: ``--model`` → first encoder
layer, 16 tokens, the first 64 output features of each weight; files and captures → 16 rows per
operand.  Only one GEMM's
operands are in memory at a time (the forward pass hands each layer over as it computes it).

Per-GEMM numbers
~~~~~~~~~~~~~~~~
* FPRaker cycles: ``tile_gemm(...).cycles``.  Baseline cycles: the bit-parallel tile takes one
  cycle per group, ``tile_runs × groups``.
* Iso-area speedup, paper ratio: 36 FPRaker tiles in the area of 8 baseline tiles (§10.1:
  36 × 317,068 µm² ≈ 8 × 1,421,579 µm²), ``(baseline_cycles / 8) / (fpraker_cycles / 36)``;
  the work is assumed to spread evenly over the tiles.
* Iso-area speedup, our ratio: ``R · baseline_cycles / fpraker_cycles`` with ``R`` = area of
  ``baseline.bf16_tile`` / area of ``fpraker.tile`` (``area_um2`` of
  ``build/area/<unit>/area.json``, as ``trainfab area`` writes them), or ``--area-ratio R``
  (which wins); "not measured" when neither exists.  The report says which was used.
* Eq. 4 ideal (spec §10.4, A17 reading "#terms if all 8 positions processed / #non-zero
  terms"): ``8 · (#serial values) / Σ CSD terms of the serial values`` (terms from
  :func:`golden.fpraker.encoder.term_counts` with the tile's encoding; zero/denormal values have
  no terms; padding is not counted).  In a GEMM every serial value is used N times, so this is
  also the MAC-weighted figure.  It is the ideal from skipping zero terms only: no
  out-of-bounds skipping, no stalls, and not iso-area.
* Lane-cycle breakdown (Fig. 15 analogue): ``useful / lane_cycles`` and ``stalls[cause] /
  lane_cycles`` per cause.

Breakdown (``--breakdown``; on for files and captures, off for ``--model``): per GEMM the
cycles of two ablations, :func:`ablation_configs` (zero values only: the serial operand through
:func:`zero_value_operand`, binary, no OB; and no OB), and the off-chip bytes of both operands
and the bf16 result, in bf16 and under BDC (:func:`bdc_bits`).  :func:`speedup_split` turns
them into the iso-area speedups of each step and the additive split the paper reports
(:data:`PAPER_SPLIT`), with the memory model of :data:`CLOCK_HZ` and :data:`DRAM_BYTES_PER_S`.

Model-level summary, per orientation: the total-time speedup ``(Σ baseline / 8) /
(Σ fpraker / 36)`` (the MAC-weighted harmonic mean of the layer speedups, since baseline time is
proportional to padded MACs), beside the paper's 1.5× average; the ideal over all layers
``8 Σ(values·N) / Σ(terms·N)``; the lane-cycle breakdown over all layers.

Captures add, per capture, the same summary (:func:`summarize`, per orientation ``given``,
``swapped`` and ``best``) over the GEMMs of each phase (``phases``), of each epoch
(``epochs``: all phases, and per phase), of each layer (``layers``) and of the whole run
(``total``), beside the paper's 1.5× average and its per-model figures (ResNet18-Q 2.04×, SNLI
1.8×).  Each GEMM counts as captured: one mini-batch stands for its epoch, and every epoch
weighs by its captured MACs (the same in every epoch).

Outputs (``--output``, default ``build/speedup``), through :func:`flows.runs.staged`:
``speedup.md``, ``speedup.json``, ``speedup.csv``, ``speedup.png``.  For captures the JSON also
holds ``captures`` (per capture: ``meta``, ``choice``, ``total``, ``phases``, ``epochs``,
``layers``, ``best_each_epoch``) and, over every studied capture, ``phases``
(``{"fwd": {"given": ..., "swapped": ..., "best": ...}, ...}``), ``epochs`` and ``layers``; the
CSV adds the columns ``capture``, ``epoch``, ``layer``, ``phase`` and ``chosen``; the PNG shows
the per-epoch speedup per phase and the lane-cycle breakdown per phase.
"""

import csv
import dataclasses
import io
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

from .. import FlowError, build_dir, shown

HELP = ("FPRaker tile cycles vs the iso-area bit-parallel baseline on real GEMMs: tensor-file "
        "pairs (G.serial/G.parallel or G.act/G.weight), training captures (trainfab train "
        "--capture DIR) or a fetched transformer (--model)")

#: the paper's iso-area tile counts (§10.1): 36 FPRaker tiles vs 8 baseline tiles
PAPER_TILES = (36, 8)
#: the paper's average iso-area speedup (§10.2) and its largest stall cause (Fig. 15)
PAPER_SPEEDUP = 1.5
#: the paper's iso-area speedups of two of its models, quoted beside a training capture
PAPER_MODELS = {"ResNet18-Q": 2.04, "SNLI": 1.8}
PAPER_NO_TERM = 0.328
#: term positions of a bit-parallel (or non-skipping) significand, spec A17
POSITIONS = 8
#: the paper's additive split of its 1.5x (§10.2): zero-term skipping, out-of-bounds skipping,
#: base-delta compression of the off-chip traffic
PAPER_SPLIT = {"zero terms": 0.09, "out-of-bounds": 0.352, "BDC": 0.058}
#: the memory model of the breakdown: the paper's clock (600 MHz, both designs) and off-chip
#: memory, LPDDR4-3200 with 4 channels of 16 bits: 4 x 2 bytes x 3.2e9 transfers/s
CLOCK_HZ = 600e6
DRAM_BYTES_PER_S = 4 * 2 * 3.2e9
#: the ``--area-ratio`` values accepted (the baseline tile's area over FPRaker's)
AREA_RATIO_RANGE = (0.001, 1000.0)
#: area units whose ``area.json`` gives our tile-area ratio
AREA_UNITS = ("baseline.bf16_tile", "fpraker.tile")
#: naming rule: suffix -> (pair kind, role)
SUFFIXES = {".serial": ("serial/parallel", "serial"), ".parallel": ("serial/parallel", "parallel"),
            ".act": ("act/weight", "serial"), ".weight": ("act/weight", "parallel")}
QUICK_ROWS = 16
#: --model's default --max-rows: token rows per layer (the 8 sentences have 154 tokens; all of
#: them take the 2-core machine about 40 minutes, 64 about 17)
MODEL_ROWS = 64
QUICK_WEIGHT_ROWS = 64
OUTPUTS = ("speedup.md", "speedup.json", "speedup.csv", "speedup.png")
STALL_ORDER = ("no_term", "shift_range", "exponent_block", "inter_column", "lock_step",
               "column_wait")


# --- the cycle model


def _tile_model():
    """``(TileConfig, tile_gemm)`` of the golden tile model (tests substitute a stand-in)."""
    from golden.fpraker.gemm import tile_gemm
    from golden.fpraker.tile import TileConfig

    return TileConfig, tile_gemm


def _encoding(cfg) -> str:
    for attr in ("encoding",):
        if hasattr(cfg, attr):
            return getattr(cfg, attr)
    pe = getattr(cfg, "pe", None)
    return getattr(pe, "encoding", "csd")


# --- operands


def to_bf16(x: np.ndarray, where: str) -> np.ndarray:
    """float32 values or FP32 (uint32) / bf16 (uint16) bit patterns → bf16 bits; refuses
    NaN/Inf."""
    from golden.common import float_to_bf16, fp32_to_bf16_rne

    x = np.asarray(x)
    if x.dtype == np.uint16:
        b = x
    elif x.dtype == np.uint32:
        b = fp32_to_bf16_rne(x)
    else:
        b = float_to_bf16(x.astype(np.float32))
    b = np.asarray(b, dtype=np.uint16)
    if b.size and (((b >> 7) & 0xFF) == 0xFF).any():
        raise FlowError(f"{where}: holds NaN or Inf values (after rounding to bfloat16); the "
                        "tile model takes finite values only")
    return b


def serial_terms(S: np.ndarray, encoding: str = "csd") -> int:
    """Σ of the term counts of the bf16 values ``S`` (zero/denormal: no terms)."""
    from golden.fpraker.encoder import term_counts

    S = np.asarray(S, dtype=np.int64)
    exp, man = (S >> 7) & 0xFF, S & 0x7F
    sig = np.where(exp == 0, 0, 128 + man)
    return int(term_counts(sig, encoding).sum())


def ideal_eq4(S: np.ndarray, encoding: str = "csd") -> float:
    """Spec A17: ``8 · #values / #non-zero terms`` of the serial operand (``inf`` if it has no
    term at all)."""
    terms = serial_terms(S, encoding)
    n = int(np.asarray(S).size)
    return POSITIONS * n / terms if terms else math.inf


def sample_rows(M: int, limit: int | None) -> np.ndarray:
    """Row indices kept by ``--max-rows``: all, or ``i·M//limit`` for i < limit."""
    if limit is None or limit >= M:
        return np.arange(M)
    return np.arange(limit, dtype=np.int64) * M // limit


def _read_rows(t, rows: np.ndarray, where: str) -> np.ndarray:
    """The bf16 bits of rows ``rows`` of a 2-D tensor, read chunk by chunk."""
    from .tensors import CHUNK_ROWS

    M, K = t.shape
    want = np.zeros(M, bool)
    want[rows] = True
    per = max(1, CHUNK_ROWS * 8 // max(K, 1))  # whole rows per chunk
    out, r0 = [], 0
    for chunk in t.chunks(per * K):
        n = chunk.size // K
        block = chunk.reshape(n, K)
        sel = want[r0:r0 + n]
        if sel.any():
            out.append(to_bf16(block[sel], where))
        r0 += n
    return np.concatenate(out) if out else np.zeros((0, K), np.uint16)


def file_pairs(paths) -> list[dict]:
    """The GEMMs of the tensor files: ``[{name, serial: Tensor, parallel: Tensor, rule,
    file}]`` in file order; one-line :class:`FlowError` for any tensor outside the rule."""
    from .tensors import read_tensors

    gemms = []
    many = len(paths) > 1
    for path in paths:
        tensors = read_tensors(path)
        found = {}
        for t in tensors:
            stem, dot, suffix = t.name.rpartition(".")
            if not dot or f".{suffix}" not in SUFFIXES or not stem:
                raise FlowError(f"{path}: tensor {t.name!r} does not follow the naming rule: "
                                "G.serial + G.parallel or G.act + G.weight")
            rule, role = SUFFIXES[f".{suffix}"]
            slot = found.setdefault((stem, rule), {})
            slot[role] = t
        for (stem, rule), slot in found.items():
            if len(slot) != 2:
                have, = slot.values()
                role, = slot
                other = {"serial/parallel": ("parallel", "serial"),
                         "act/weight": ("weight", "act")}[rule][role == "parallel"]
                raise FlowError(f"{path}: tensor {have.name!r} has no partner {stem}.{other} "
                                f"(pairs are G.serial + G.parallel or G.act + G.weight)")
            for t in slot.values():
                if len(t.shape) != 2:
                    raise FlowError(f"{path}: tensor {t.name!r} has shape {tuple(t.shape)}; a "
                                    "GEMM operand must be 2-D (rows, K)")
                if 0 in t.shape:
                    raise FlowError(f"{path}: tensor {t.name!r} is empty (shape "
                                    f"{tuple(t.shape)})")
            s, q = slot["serial"], slot["parallel"]
            if s.shape[1] != q.shape[1]:
                raise FlowError(f"{path}: GEMM {stem}: cannot multiply {s.name} {tuple(s.shape)} "
                                f"by {q.name} {tuple(q.shape)}: both need the reduction index "
                                f"on their last axis, and {s.shape[1]} != {q.shape[1]}")
            name = f"{Path(path).stem}:{stem}" if many else stem
            gemms.append({"name": name, "serial": s, "parallel": q, "rule": rule,
                          "file": str(path)})
    names = [g["name"] for g in gemms]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup:
        raise FlowError(f"GEMM {dup!r} appears twice (as G.serial/G.parallel and G.act/G.weight)")
    return gemms


# --- one GEMM


def zero_value_operand(S: np.ndarray) -> np.ndarray:
    """``S`` as a design that skips zero values but no zero bits sees it: every non-zero value's
    significand made all ones (its sign and exponent kept), so that with binary encoding and no
    out-of-bounds skipping every one of its 8 positions is a term; zeros (and denormals, which
    have no terms) stay zero."""
    S = np.asarray(S, dtype=np.uint16)
    return np.where((S & 0x7F80) != 0, S | 0x7F, S).astype(np.uint16)


def ablation_configs(cfg) -> dict:
    """The tile configurations of the breakdown's ablations: ``zero_value`` (binary encoding,
    no out-of-bounds skipping, run on :func:`zero_value_operand`; its adder as wide as binary
    terms need, which changes no cycle of the group-mode schedule) and ``no_ob`` (the tile's
    encoding without out-of-bounds skipping, ``kmax`` at its limit)."""
    from golden.fpraker.pe import KMAX_LIMIT, required_int_bits

    need = required_int_bits(cfg.lanes, cfg.frac_bits, cfg.keep_bits, cfg.dmax, cfg.exp_mode,
                             "binary")
    return {"zero_value": dataclasses.replace(cfg, encoding="binary", kmax=KMAX_LIMIT,
                                              int_bits=max(cfg.int_bits, need)),
            "no_ob": dataclasses.replace(cfg, kmax=KMAX_LIMIT)}


def bdc_bits(values: np.ndarray) -> int:
    """Bits of ``values`` (bf16 patterns, compressed as stored: row-major, groups of 32
    consecutive values) under FPRaker's base-delta compression (:mod:`golden.fpraker.bdc`)."""
    from golden.fpraker import bdc

    return bdc.footprint(np.ascontiguousarray(values, dtype=np.uint16).ravel()).bits


def study_gemm(name: str, orientation: str, S: np.ndarray, P: np.ndarray, cfg,
               area_ratio: float | None = None, progress=None, breakdown: bool = False) -> dict:
    """Run one GEMM on the tile model and derive its numbers (see the module docstring); with
    ``breakdown`` also the ablations' cycles (:func:`ablation_configs`) and the off-chip
    traffic in bf16 and under BDC (the serial and parallel operands read, the bf16 result
    written)."""
    _, tile_gemm = _tile_model()
    M, K = S.shape
    N = P.shape[0]
    t0 = time.monotonic()
    r = tile_gemm(S, P, cfg, progress=progress)
    seconds = time.monotonic() - t0
    fpr = int(r.cycles)
    base = int(r.tile_runs) * int(r.groups)
    if int(r.macs) != M * N * K:
        raise FlowError(f"internal: tile_gemm reports {r.macs} MACs for {M}x{K} by {N}x{K}")
    terms = serial_terms(S, _encoding(cfg))
    a, b = PAPER_TILES
    lane = int(r.lane_cycles)
    # the stall cause the other synchronization protocol has (always zero here) is left out
    other = "lock_step" if getattr(cfg, "sync", "lockstep") == "independent" else "column_wait"
    stalls = {k: int(v) for k, v in r.stalls.items() if k != other}
    rec = {
        "name": name, "orientation": orientation, "M": M, "N": N, "K": K,
        "macs": M * N * K, "tile_runs": int(r.tile_runs), "groups": int(r.groups),
        "fpraker_cycles": fpr, "baseline_cycles": base,
        "speedup_same_tiles": base / fpr if fpr else math.inf,
        "speedup_paper": (base / b) / (fpr / a) if fpr else math.inf,
        "speedup_ours": (area_ratio * base / fpr if fpr else math.inf) if area_ratio else None,
        "serial_values": M * K, "serial_terms": terms,
        "serial_zero_fraction": float((((S >> 7) & 0xFF) == 0).mean()),
        "ideal_eq4": POSITIONS * M * K / terms if terms else math.inf,
        "lane_cycles": lane, "useful": int(r.useful), "stalls": stalls,
        "useful_fraction": int(r.useful) / lane if lane else 0.0,
        "stall_fractions": {k: v / lane if lane else 0.0 for k, v in stalls.items()},
        "seconds": seconds,
    }
    if breakdown:
        ab = ablation_configs(cfg)
        rec["cycles_zero_value"] = int(tile_gemm(zero_value_operand(S), P, ab["zero_value"]).cycles)
        rec["cycles_no_ob"] = int(tile_gemm(S, P, ab["no_ob"]).cycles)
        rec["offchip_bytes"] = 2 * (M * K + N * K + M * N)
        rec["offchip_bdc_bytes"] = (bdc_bits(S) + bdc_bits(P) + bdc_bits(r.out)) / 8
        rec["seconds"] = time.monotonic() - t0
    return rec


def speedup_split(rs: list[dict]) -> dict | None:
    """The breakdown of the iso-area (36:8) speedup over records with ablations (None if some
    have none): compute-only speedups of the ablations (``zero_value``: zero values skipped,
    every bit of the others processed; ``no_ob``: zero terms skipped too; ``full``: and
    out-of-bounds terms), then with the memory model (:data:`CLOCK_HZ`,
    :data:`DRAM_BYTES_PER_S`; per GEMM the time is the larger of the compute time, spread over
    the tiles, and the off-chip transfer time, which overlap) without (``memory``) and with
    BDC (``memory_bdc``, FPRaker's traffic compressed, the baseline's not), and the additive
    ``split`` the paper reports: zero terms = no_ob − zero_value, out-of-bounds = full − no_ob,
    BDC = memory_bdc − memory."""
    if not rs or any("cycles_no_ob" not in r for r in rs):
        return None
    a, b = PAPER_TILES
    base = sum(r["baseline_cycles"] for r in rs) / b

    def iso(key):
        c = sum(r[key] for r in rs) / a
        return base / c if c else math.inf

    def timed(cycles, tiles, nbytes):
        return max(cycles / tiles / CLOCK_HZ, nbytes / DRAM_BYTES_PER_S)

    t_base = sum(timed(r["baseline_cycles"], b, r["offchip_bytes"]) for r in rs)
    t_fpr = sum(timed(r["fpraker_cycles"], a, r["offchip_bytes"]) for r in rs)
    t_bdc = sum(timed(r["fpraker_cycles"], a, r["offchip_bdc_bytes"]) for r in rs)
    out = {"zero_value": iso("cycles_zero_value"), "no_ob": iso("cycles_no_ob"),
           "full": iso("fpraker_cycles"), "memory": t_base / t_fpr, "memory_bdc": t_base / t_bdc,
           "memory_bound": sum(r["offchip_bytes"] / DRAM_BYTES_PER_S
                               > r["fpraker_cycles"] / a / CLOCK_HZ for r in rs) / len(rs),
           "bdc_ratio": sum(r["offchip_bdc_bytes"] for r in rs)
           / sum(r["offchip_bytes"] for r in rs)}
    out["split"] = {"zero terms": out["no_ob"] - out["zero_value"],
                    "out-of-bounds": out["full"] - out["no_ob"],
                    "BDC": out["memory_bdc"] - out["memory"]}
    return out


def summarize(records: list[dict], area_ratio: float | None) -> dict:
    """Per orientation: totals, total-time speedups, ideal, lane-cycle breakdown."""
    out = {}
    a, b = PAPER_TILES
    for o in dict.fromkeys(r["orientation"] for r in records):
        rs = [r for r in records if r["orientation"] == o]
        fpr = sum(r["fpraker_cycles"] for r in rs)
        base = sum(r["baseline_cycles"] for r in rs)
        macs = sum(r["macs"] for r in rs)
        lane = sum(r["lane_cycles"] for r in rs)
        terms_used = sum(r["serial_terms"] * r["N"] for r in rs)
        causes = sorted({k for r in rs for k in r["stalls"]},
                        key=lambda k: (STALL_ORDER.index(k) if k in STALL_ORDER else 99, k))
        out[o] = {
            "gemms": len(rs), "macs": macs, "fpraker_cycles": fpr, "baseline_cycles": base,
            "speedup_same_tiles": base / fpr if fpr else math.inf,
            "speedup_paper": (base / b) / (fpr / a) if fpr else math.inf,
            "speedup_ours": (area_ratio * base / fpr if fpr else math.inf) if area_ratio else None,
            "speedup_paper_mac_mean": sum(r["speedup_paper"] * r["macs"] for r in rs) / macs,
            "ideal_eq4": POSITIONS * macs / terms_used if terms_used else math.inf,
            "useful_fraction": sum(r["useful"] for r in rs) / lane if lane else 0.0,
            "stall_fractions": {k: sum(r["stalls"].get(k, 0) for r in rs) / lane if lane else 0.0
                                for k in causes},
        }
        split = speedup_split(rs)
        if split is not None:
            out[o]["breakdown"] = split
    return out


# --- area ratio


def area_ratio(override: float | None, tile=None) -> tuple[float | None, str]:
    """``(R, how)``: ``--area-ratio``, else the measured ``area.json`` pair, else ``None``.

    The measured pair is used only when both tiles are of one size and, given ``tile`` (the
    cycle model's configuration), of that size too: the area ratio of two 2 × 2 tiles is not
    the ratio of the 8 × 8 tiles the cycles are counted on (each encoder, exponent block and B
    buffer serves fewer PEs), so ``how`` then says why "ours" is not given."""
    if override is not None:
        lo, hi = AREA_RATIO_RANGE
        if not (math.isfinite(override) and lo <= override <= hi):
            raise FlowError(f"--area-ratio {override}: give the tiles' area ratio, a number "
                            f"from {lo:g} to {hi:g}")
        return override, f"--area-ratio {override:g} (given on the command line)"
    areas, configs = {}, {}
    for unit in AREA_UNITS:
        path = build_dir() / "area" / unit / "area.json"
        if not path.is_file():
            return None, ("not measured (no " + " / ".join(
                shown(build_dir() / "area" / u / "area.json") for u in AREA_UNITS)
                + "; run `trainfab area` for both units, or give --area-ratio)")
        try:
            data = json.loads(path.read_text())
            areas[unit] = float(data["area_um2"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise FlowError(f"{path}: no readable area_um2 ({e})") from None
        configs[unit] = data.get("config")
        if not areas[unit] > 0:
            raise FlowError(f"{path}: area_um2 {areas[unit]} is not positive")
    shape = lambda c: tuple((c or {}).get(k) for k in ("rows", "cols", "lanes"))
    if shape(configs[AREA_UNITS[0]]) != shape(configs[AREA_UNITS[1]]):
        return None, (f"not measured (the area reports are of different tile sizes: "
                      f"{AREA_UNITS[0]} {shape(configs[AREA_UNITS[0]])}, {AREA_UNITS[1]} "
                      f"{shape(configs[AREA_UNITS[1]])} (rows, cols, lanes); run `trainfab "
                      "area` for both at one size, or give --area-ratio)")
    if tile is not None:
        model = (tile.rows, tile.cols, tile.lanes)
        measured = shape(configs[AREA_UNITS[0]])
        if measured != model:
            return None, (f"not measured at the cycle model's size (the area reports are of "
                          f"{measured[0]} x {measured[1]} tiles of {measured[2]} lanes, the "
                          f"cycle model's tile is {model[0]} x {model[1]} of {model[2]}: run "
                          f"`trainfab area` for both tiles at that size, or give --area-ratio)")
    R = areas[AREA_UNITS[0]] / areas[AREA_UNITS[1]]
    how = (f"measured: {AREA_UNITS[0]} {areas[AREA_UNITS[0]]:,.0f} µm² / {AREA_UNITS[1]} "
           f"{areas[AREA_UNITS[1]]:,.0f} µm² = {R:.3f} (build/area/*/area.json)")
    return R, how


# --- reports


def _f(v, fmt="{:.2f}") -> str:
    if v is None:
        return "not measured"
    if isinstance(v, float) and math.isinf(v):
        return "unbounded"
    return fmt.format(v)


def _x(v) -> str:
    """A ratio as ``1.23x``; ``unbounded`` where its denominator is zero (a serial operand
    without a non-zero term: no cycle of work), ``not measured`` without a value."""
    if v is None:
        return "not measured"
    if isinstance(v, float) and math.isinf(v):
        return "unbounded (no non-zero serial term)"
    return f"{v:.2f}x"


def markdown(res: dict) -> str:
    src = res["source"]
    lines = ["# FPRaker speedup over the iso-area bit-parallel baseline", ""]
    if src["kind"] == "model":
        lines += [f"Model: **{src['title']}** (`{src['package']}=={src['version']}` from PyPI, "
                  f"{src['licence']}); float32 NumPy forward pass on {src['sentences']} fixed "
                  f"English sentences ({src['tokens']} tokens; studied token rows per layer: "
                  f"{src['token_rows']}), encoder layers studied: {src['layers']}."]
    elif src["kind"] == "captures":
        lines += ["Training captures (one mini-batch per epoch, every layer with weights in the "
                  "phases fwd, bwd_data, wgrad): " + "; ".join(
                      f"`{c['dir']}` ({_meta_text(c['meta'])}; {c['gemms']} GEMMs"
                      + ("" if c["complete"] else ", incomplete: the run was interrupted or is "
                         "still going") + ")" for c in src["captures"])
                  + (f". Rows kept per operand: {src['max_rows']}." if src["max_rows"] else ".")]
    else:
        lines += ["Tensor files: " + ", ".join(f"`{f}`" for f in src["files"]) + "."]
    lines += [
        "",
        f"Cycle model: `golden.fpraker.gemm.tile_gemm`, configuration {res['tile_config']}. "
        "Operands rounded to bfloat16 (RNE). Baseline: the bit-parallel 8×8×8 tile, one cycle "
        "per group (`tile_runs × groups`). One tile does all tile-runs of a GEMM in turn.",
        "",
        "* **iso-area 36:8** = (baseline cycles / 8) / (FPRaker cycles / 36), the paper's tile "
        "counts (§10.1).",
        f"* **iso-area ours** = R × baseline / FPRaker cycles, R = {res['area_ratio_source']}.",
        "* **Eq. 4 ideal** = 8 × #serial values / #non-zero CSD terms of the serial values "
        "(spec A17 reading: all 8 positions vs the non-zero terms); zero-term skipping only, "
        "not iso-area.",
        "* Lane-cycle columns: fraction of all PE-lane cycles that processed a term (useful) or "
        "stalled for each cause (the paper's Fig. 15).",
        "",
        "## Summary (all studied GEMMs; total-time speedup = MAC-weighted harmonic mean)",
        "",
        "| serial operand | GEMMs | MACs | FPRaker cycles | baseline cycles | iso-area 36:8 | "
        "iso-area ours | MAC-weighted mean 36:8 | Eq. 4 ideal | paper |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for o, s in res["summary"].items():
        lines.append(f"| {_label(o, res)} | {s['gemms']} | {s['macs']:,} | "
                     f"{s['fpraker_cycles']:,} | {s['baseline_cycles']:,} | "
                     f"{_x(s['speedup_paper'])} | {_x(s['speedup_ours'])} | "
                     f"{_x(s['speedup_paper_mac_mean'])} | {_x(s['ideal_eq4'])} | "
                     f"{PAPER_SPEEDUP}x (average over its models) |")
    causes = list(dict.fromkeys(k for s in res["summary"].values() for k in s["stall_fractions"]))
    lines += ["", "| serial operand | useful | " + " | ".join(causes) + " |",
              "|---|---|" + "---|" * len(causes)]
    for o, s in res["summary"].items():
        lines.append(f"| {_label(o, res)} | {s['useful_fraction']:.1%} | "
                     + " | ".join(f"{s['stall_fractions'].get(c, 0):.1%}" for c in causes) + " |")
    lines += ["", f"Paper (Fig. 15): cross-lane term imbalance (\"no term\") is the largest stall "
              f"source, {PAPER_NO_TERM:.1%} of lane cycles on average (up to 55 % for NCF); "
              "shift-range stalls are few, exponent-block and inter-PE stalls rare.", ""]
    if any("breakdown" in v for v in res["summary"].values()):
        lines += _split_intro() + [
            _split_header(), *(_split_row(_label(o, res), v["breakdown"])
                               for o, v in res["summary"].items() if "breakdown" in v), ""]
    if src["kind"] == "captures":
        lines += _capture_markdown(res)
    captured = src["kind"] == "captures"
    for o in res["orientations"]:
        rs = [r for r in res["records"] if r["orientation"] == o]
        causes = list(dict.fromkeys(k for r in rs for k in r["stalls"]))
        lines += [f"## Per GEMM, serial = {_label(o, res)}", "",
                  "| GEMM | M×K (serial) | N×K (parallel) | FPRaker cycles | baseline cycles | "
                  "iso-area 36:8 | iso-area ours | Eq. 4 ideal | serial zeros | useful | "
                  + " | ".join(causes) + " |" + (" chosen |" if captured else ""),
                  "|---|---|---|---|---|---|---|---|---|---|" + "---|" * len(causes)
                  + ("---|" if captured else "")]
        for r in rs:
            ours = _x(r["speedup_ours"])
            lines.append(
                f"| {r['name']} | {r['M']}×{r['K']} | {r['N']}×{r['K']} | "
                f"{r['fpraker_cycles']:,} | {r['baseline_cycles']:,} | "
                f"{_x(r['speedup_paper'])} | {ours} | {_x(r['ideal_eq4'])} | "
                f"{r['serial_zero_fraction']:.1%} | {r['useful_fraction']:.1%} | "
                + " | ".join(f"{r['stall_fractions'].get(c, 0):.1%}" for c in causes) + " |"
                + ((" yes |" if r["chosen"] else " |") if captured else ""))
        lines.append("")
    lines.append(f"Run time {res['seconds']:.0f} s.")
    return "\n".join(lines) + "\n"


def _split_intro() -> list[str]:
    return [
        "## Where the speedup comes from (iso-area 36:8)", "",
        "Ablations on the same operands: **zero values only** skips zero serial values but "
        "processes all 8 significand positions of every other (the serial operand's non-zero "
        "significands made all ones, binary encoding, no out-of-bounds skipping); **+ zero "
        "terms** is the tile's encoding without out-of-bounds skipping; **+ out-of-bounds** the "
        "tile as configured (compute only). **Memory** adds off-chip traffic: per GEMM the "
        "time is the larger of the compute time (the tiles at 600 MHz, the paper's clock) "
        "and the time to read both operands and write the result over 4-channel LPDDR4-3200 "
        "(25.6 GB/s), in bf16 for both designs, then with FPRaker's traffic under base-delta "
        "compression (BDC, groups of 32 consecutive values as stored). The split is "
        "additive, as the paper's: zero terms = (+ zero terms) − (zero values only), "
        "out-of-bounds = (+ out-of-bounds) − (+ zero terms), BDC = (memory, BDC) − (memory, "
        "bf16).", ""]


def _split_header() -> str:
    return ("| serial operand | zero values only | + zero terms | + out-of-bounds | memory, bf16 "
            "| memory, BDC | BDC traffic / bf16 | memory-bound GEMMs | split: zero terms / "
            "out-of-bounds / BDC | paper |\n|---|---|---|---|---|---|---|---|---|---|")


def _split_row(label: str, b: dict) -> str:
    sp = b["split"]
    paper = " / ".join(f"+{v:.1%}" for v in PAPER_SPLIT.values())
    return (f"| {label} | {_x(b['zero_value'])} | {_x(b['no_ob'])} | {_x(b['full'])} | "
            f"{_x(b['memory'])} | {_x(b['memory_bdc'])} | {b['bdc_ratio']:.3f} | "
            f"{b['memory_bound']:.0%} | "
            + " / ".join(f"{v:+.1%}" for v in sp.values())
            + f" | {paper} (1.5x) |")


def _label(o: str, res: dict) -> str:
    if res["source"]["kind"] == "model":
        return {"given": "activations", "swapped": "weights"}[o]
    if res["source"]["kind"] == "captures":
        return {"given": "x (A in fwd, G in bwd_data, A.T in wgrad)",
                "swapped": "y (W.T in fwd, W in bwd_data, G.T in wgrad)",
                "best": "chosen per layer and phase"}[o]
    return {"given": "as named", "swapped": "swapped"}[o]


def _meta_text(meta: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in meta.items()) or "no run details"


def _ours(s: dict) -> str:
    return _x(s["speedup_ours"])


def _capture_markdown(res: dict) -> list[str]:
    """The per-capture sections: serial choice, per phase, per epoch, per layer, run total."""
    paper = (f"paper: {PAPER_SPEEDUP}x average over its models; "
             + ", ".join(f"{m} {v}x" for m, v in PAPER_MODELS.items()))
    lines = ["Serial operand: chosen once per layer and phase for the whole run, the orientation "
             "with fewer FPRaker cycles summed over the captured epochs (A, G, W: activations, "
             "output gradients, weights of the engine's GEMMs; their transposes are not "
             "written). \"best\" columns use the chosen operand, \"x\"/\"y\" columns always "
             "the engine's first/second operand.", ""]
    for cap in res["captures"]:
        t = cap["total"]
        if not t:
            continue
        b = t["best"]
        each = cap["best_each_epoch"]
        lines += [f"## Capture {cap['label']}: {_meta_text(cap['meta'])}", "",
                  f"Whole run ({b['gemms']} GEMMs, {b['macs']:,} MACs): iso-area speedup "
                  f"**{_x(b['speedup_paper'])}** (36:8), ours {_ours(b)}, Eq. 4 ideal "
                  f"{_x(b['ideal_eq4'])}, useful lane cycles {b['useful_fraction']:.1%}; "
                  f"serial always x {_x(t['given']['speedup_paper'])}, always y "
                  f"{_x(t['swapped']['speedup_paper'])}; re-chosen per GEMM and epoch "
                  f"{_x(each['speedup_paper'])} ({paper}).", ""]
        for s in cap["skipped"]:
            lines.append(f"* not captured: epoch {s.get('epoch')} {s.get('layer')}."
                         f"{s.get('phase')}: {s.get('reason')}")
        if cap["skipped"]:
            lines.append("")
        phases = list(cap["phases"])
        causes = list(dict.fromkeys(k for v in cap["phases"].values()
                                    for k in v["best"]["stall_fractions"]))
        choice = cap["choice"]
        lines += ["### Per phase", "",
                  "| phase | serial chosen | GEMMs | MACs | iso-area 36:8 best | x serial | "
                  "y serial | iso-area ours best | Eq. 4 ideal best | useful | "
                  + " | ".join(causes) + " |",
                  "|---|---|---|---|---|---|---|---|---|---|" + "---|" * len(causes)]
        for p, v in [*cap["phases"].items(), ("all phases", t)]:
            picked = ", ".join(f"{c['layer']}: {c['serial_operand']}" for c in choice.values()
                               if c["phase"] == p) or "per phase"
            vb = v["best"]
            lines.append(f"| {p} | {picked} | {vb['gemms']} | {vb['macs']:,} | "
                         f"{_x(vb['speedup_paper'])} | {_x(v['given']['speedup_paper'])} | "
                         f"{_x(v['swapped']['speedup_paper'])} | {_ours(vb)} | "
                         f"{_x(vb['ideal_eq4'])} | {vb['useful_fraction']:.1%} | "
                         + " | ".join(f"{vb['stall_fractions'].get(c, 0):.1%}" for c in causes)
                         + " |")
        lines += ["", f"Paper, iso-area 36:8: {PAPER_SPEEDUP}x average over its models; "
                  + ", ".join(f"{m} {v}x" for m, v in PAPER_MODELS.items()) + ".", ""]
        if "breakdown" in t["best"]:
            lines += ["### Where the speedup comes from, per phase (chosen serial operand)", "",
                      _split_header().replace("serial operand", "phase", 1),
                      *(_split_row(p, v["best"]["breakdown"])
                        for p, v in [*cap["phases"].items(), ("all phases", t)]), ""]
        lines += ["### Per epoch (iso-area 36:8, chosen serial operand)", "",
                  "| epoch | " + " | ".join(phases) + " | all phases | iso-area ours | "
                  "Eq. 4 ideal | useful |", "|---|" + "---|" * (len(phases) + 4)]
        for e in cap["epochs"]:
            eb = e["total"]["best"]
            cells = [_x(e["phases"][p]["best"]["speedup_paper"]) if p in e["phases"]
                     else "-" for p in phases]
            lines.append(f"| {e['epoch']} | " + " | ".join(cells)
                         + f" | {_x(eb['speedup_paper'])} | {_ours(eb)} | "
                           f"{_x(eb['ideal_eq4'])} | {eb['useful_fraction']:.1%} |")
        lines += ["", "### Per layer (all phases, all epochs)", "",
                  "| layer | serial chosen | iso-area 36:8 best | x serial | y serial | "
                  "Eq. 4 ideal best | useful |", "|---|---|---|---|---|---|---|"]
        for lay, v in cap["layers"].items():
            picked = ", ".join(f"{c['phase']}: {c['serial_operand']}" for c in choice.values()
                               if c["layer"] == lay)
            vb = v["best"]
            lines.append(f"| {lay} | {picked} | {_x(vb['speedup_paper'])} | "
                         f"{_x(v['given']['speedup_paper'])} | "
                         f"{_x(v['swapped']['speedup_paper'])} | {_x(vb['ideal_eq4'])} | "
                         f"{vb['useful_fraction']:.1%} |")
        lines += ["", "### Serial operand choice (FPRaker cycles summed over the epochs)", "",
                  "| GEMM | x serial | y serial | chosen |", "|---|---|---|---|"]
        for name, c in choice.items():
            cy = c["fpraker_cycles"]
            lines.append(f"| {name} | {cy['given']:,} | {cy['swapped']:,} | "
                         f"{c['serial_operand']} ({'x' if c['serial'] == 'given' else 'y'}) |")
        lines.append("")
    return lines


CSV_FIELDS = ("name", "orientation", "M", "N", "K", "macs", "tile_runs", "groups",
              "fpraker_cycles", "baseline_cycles", "speedup_same_tiles", "speedup_paper",
              "speedup_ours", "serial_values", "serial_terms", "serial_zero_fraction",
              "ideal_eq4", "lane_cycles", "useful", "useful_fraction")


#: the extra CSV columns of captured GEMMs
CSV_CAPTURE_FIELDS = ("capture", "epoch", "layer", "phase", "serial_operand", "chosen")


def to_csv(res: dict) -> str:
    causes = list(dict.fromkeys(k for r in res["records"] for k in r["stalls"]))
    fields = CSV_FIELDS + (CSV_CAPTURE_FIELDS if res["source"]["kind"] == "captures" else ())
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([*fields, *(f"stall_{c}" for c in causes),
                *(f"stall_fraction_{c}" for c in causes)])
    for r in res["records"]:
        w.writerow([("" if r[f] is None else r[f]) for f in fields]
                   + [r["stalls"].get(c, 0) for c in causes]
                   + [r["stall_fractions"].get(c, 0.0) for c in causes])
    return buf.getvalue()


def plot(res: dict, path: Path) -> None:
    """Per-GEMM iso-area speedup (36:8) with the Eq. 4 ideal, and the lane-cycle breakdown
    (captures: :func:`plot_captures`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if res["source"]["kind"] == "captures":
        return plot_captures(res, path)

    orients = list(res["summary"])
    fig, axes = plt.subplots(2, len(orients), figsize=(max(7, 6 * len(orients)), 8),
                             squeeze=False)
    for j, o in enumerate(orients):
        rs = [r for r in res["records"] if r["orientation"] == o]
        x = np.arange(len(rs))
        names = [_short_name(r["name"]) for r in rs]
        ax = axes[0][j]
        ax.bar(x, [r["speedup_paper"] for r in rs], color="tab:blue", label="iso-area 36:8")
        if res["area_ratio"] is not None:
            ax.plot(x, [r["speedup_ours"] for r in rs], "s", color="tab:green", ms=4,
                    label=f"iso-area ours (R={res['area_ratio']:.2f})")
        ideal = [r["ideal_eq4"] if math.isfinite(r["ideal_eq4"]) else np.nan for r in rs]
        ax.plot(x, ideal, "_", color="tab:red", ms=10, mew=2, label="Eq. 4 ideal")
        ax.axhline(PAPER_SPEEDUP, color="k", ls="--", lw=1, label="paper average 1.5x")
        ax.axhline(1.0, color="grey", lw=0.8)
        s = res["summary"][o]
        ax.set(title=f"serial = {_label(o, res)}: total {s['speedup_paper']:.2f}x (36:8)",
               ylabel="speedup over iso-area baseline")
        ax.set_xticks(x, names, rotation=90, fontsize=6)
        ax.legend(fontsize=7)
        ax.grid(axis="y", alpha=0.3)
        ax = axes[1][j]
        causes = list(dict.fromkeys(k for r in rs for k in r["stalls"]))
        bottom = np.array([r["useful_fraction"] for r in rs])
        ax.bar(x, bottom, color="tab:green", label="useful")
        colors = plt.get_cmap("tab10")
        for i, c in enumerate(causes):
            v = np.array([r["stall_fractions"].get(c, 0.0) for r in rs])
            ax.bar(x, v, bottom=bottom, color=colors(i % 10 if i != 2 else 9), label=c)
            bottom = bottom + v
        ax.set(ylabel="fraction of lane cycles", ylim=(0, 1.22), yticks=np.linspace(0, 1, 6),
               title="where lane cycles go (Fig. 15 analogue)")
        ax.set_xticks(x, names, rotation=90, fontsize=6)
        ax.legend(fontsize=7, loc="upper center", ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_captures(res: dict, path: Path) -> None:
    """Per capture: the iso-area speedup (36:8, chosen serial operand) per epoch and phase, and
    the lane-cycle breakdown per phase."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    caps = [c for c in res["captures"] if c["total"]]
    fig, axes = plt.subplots(2, max(1, len(caps)), figsize=(max(7, 5.5 * len(caps)), 8),
                             squeeze=False)
    colors = plt.get_cmap("tab10")
    for j, cap in enumerate(caps):
        ax = axes[0][j]
        epochs = [e["epoch"] for e in cap["epochs"]]
        for i, p in enumerate(cap["phases"]):
            ys = [e["phases"][p]["best"]["speedup_paper"] if p in e["phases"] else np.nan
                  for e in cap["epochs"]]
            ax.plot(epochs, ys, "o-", color=colors(i), ms=3, label=p)
        ax.plot(epochs, [e["total"]["best"]["speedup_paper"] for e in cap["epochs"]], "s-",
                color="k", ms=4, label="all phases")
        ax.axhline(PAPER_SPEEDUP, color="k", ls="--", lw=1, label="paper average 1.5x")
        for (m, v), ls in zip(PAPER_MODELS.items(), (":", "-.")):
            ax.axhline(v, color="grey", ls=ls, lw=1, label=f"paper {m} {v}x")
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set(title=f"{cap['label']}: run {cap['total']['best']['speedup_paper']:.2f}x "
                     "(36:8, chosen serial)", xlabel="epoch",
               ylabel="speedup over iso-area baseline")
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
        ax = axes[1][j]
        views = {**{p: v["best"] for p, v in cap["phases"].items()},
                 "all": cap["total"]["best"]}
        x = np.arange(len(views))
        causes = list(dict.fromkeys(k for v in views.values() for k in v["stall_fractions"]))
        bottom = np.array([v["useful_fraction"] for v in views.values()])
        ax.bar(x, bottom, color="tab:green", label="useful")
        for i, c in enumerate(causes):
            h = np.array([v["stall_fractions"].get(c, 0.0) for v in views.values()])
            ax.bar(x, h, bottom=bottom, color=colors(i % 10 if i != 2 else 9), label=c)
            bottom = bottom + h
        ax.set(ylabel="fraction of lane cycles", ylim=(0, 1.22), yticks=np.linspace(0, 1, 6),
               title="where lane cycles go (Fig. 15 analogue)")
        ax.set_xticks(x, list(views))
        ax.legend(fontsize=7, loc="upper center", ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _short_name(name: str) -> str:
    return (name.replace("encoder.layer.", "L").replace(".attention.self.", ".")
            .replace(".attention.output.dense", ".att_out").replace(".intermediate.dense", ".ffn1")
            .replace(".output.dense", ".ffn2"))


def write(res: dict, outdir: Path) -> dict:
    from ..runs import staged

    with staged(outdir, names=OUTPUTS, last=("speedup.json",)) as work:
        (work / "speedup.md").write_text(markdown(res))
        (work / "speedup.csv").write_text(to_csv(res))
        plot(res, work / "speedup.png")
        # JSON has no infinity: an unbounded ratio (no non-zero serial term) is null there
        (work / "speedup.json").write_text(json.dumps(_finite(res), indent=2, default=_json)
                                           + "\n")
    return {Path(n).suffix[1:]: outdir / n for n in OUTPUTS}


def _finite(obj):
    """``obj`` with every infinite or NaN float as ``None``."""
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    if isinstance(obj, (float, np.floating)) and not math.isfinite(obj):
        return None
    return obj


def _json(v):
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    return str(v)


# --- the run


class _Progress:
    """A line per GEMM on stderr; the tile model's progress as a live line on a terminal, and
    at most every 15 s otherwise."""

    def __init__(self, quiet: bool = False):
        self.quiet = quiet
        self.tty = sys.stderr.isatty()
        self.start = time.monotonic()
        self.last = 0.0
        self.label = ""

    def say(self, text: str) -> None:
        if not self.quiet:
            print(("\r\x1b[K" if self.tty else "") + text, file=sys.stderr, flush=True)

    def tile(self, *args, **kwargs) -> None:
        if self.quiet:
            return
        now = time.monotonic()
        if not self.tty and now - self.last < 15:
            return
        self.last = now
        nums = [a for a in args if isinstance(a, (int, np.integer))]
        what = (f"{nums[0]}/{nums[1]}" if len(nums) >= 2
                else " ".join(str(a) for a in args) or "")
        text = f"speedup: {self.label}: tile model {what} ({now - self.start:.0f} s)"
        if self.tty:
            print("\r\x1b[K" + text, end="", file=sys.stderr, flush=True)
        else:
            print(text, file=sys.stderr, flush=True)


@dataclasses.dataclass(frozen=True)
class SpeedupOptions:
    """What one ``trainfab speedup`` run studies (the CLI builds it from its arguments; library
    callers build it directly)."""

    #: tensor files, or capture folders of ``trainfab train --capture``
    files: tuple = ()
    #: a fetched transformer (``minilm``, ``minilm-l3``) instead of files
    model: str | None = None
    #: ``given``, ``swapped`` or ``both`` (None: the source's default)
    orientation: str | None = None
    #: rows kept per operand (None: the source's default)
    max_rows: int | None = None
    #: ``--model``: the first encoder layers only
    layers: int | None = None
    #: a small run
    quick: bool = False
    #: baseline-tile area / FPRaker-tile area (None: from ``build/area``)
    area_ratio: float | None = None
    #: the ablations and memory model of the speedup's split (None: on for files and
    #: captures, off for ``--model``)
    breakdown: bool | None = None
    #: the FPRaker tile's configuration (:class:`golden.fpraker.tile.TileConfig`; None: its
    #: defaults, the paper's 8 x 8 tile)
    tile: object = None
    #: output folder (None: ``build/speedup``)
    output: str | None = None



def _source_kind(args) -> str:
    """``model``, ``files`` or ``captures`` (every FILE a folder), after checking the options."""
    if args.model and args.files:
        raise FlowError("give tensor FILEs or --model, not both")
    if not args.model and not args.files:
        raise FlowError("nothing to study: give tensor FILEs, capture folders or --model NAME")
    if args.model:
        return "model"
    dirs = [f for f in args.files if Path(f).is_dir()]
    if not dirs:
        return "files"
    if len(dirs) != len(args.files):
        raise FlowError(f"give tensor files or capture folders, not both ({dirs[0]} is a "
                        "folder)")
    if args.orientation is not None:
        raise FlowError(f"--orientation {args.orientation}: does not apply to captures (a "
                        "capture is run in both orientations and the serial operand picked "
                        "per layer and phase)")
    return "captures"


def _check_options(args) -> str:
    kind = _source_kind(args)
    if args.max_rows is not None and args.max_rows < 1:
        raise FlowError(f"--max-rows {args.max_rows}: must be at least 1")
    if args.layers is not None:
        if not args.model:
            raise FlowError("--layers applies to --model only")
        if args.layers < 1:
            raise FlowError(f"--layers {args.layers}: must be at least 1")
    return kind


def run(args, quiet: bool = False) -> dict:
    """Study the GEMMs ``args`` names; returns the result dict (not yet written)."""
    kind = _check_options(args)
    cfg = args.tile if args.tile is not None else _tile_model()[0]()
    ratio, ratio_how = area_ratio(args.area_ratio, cfg)
    prog = _Progress(quiet)
    orientation = args.orientation or ("given" if kind == "files" else "both")
    orients = ("given", "swapped") if orientation == "both" else (orientation,)
    breakdown = args.breakdown if args.breakdown is not None else kind != "model"
    records: list[dict] = []
    t0 = time.monotonic()

    def one(name, o, S, P, k, total, serial=None):
        prog.label = f"[{k}/{total}] {name}"
        rec = study_gemm(name, o, S, P, cfg, ratio, progress=prog.tile, breakdown=breakdown)
        records.append(rec)
        prog.say(f"speedup: [{k}/{total}] {name} serial={serial or _label(o, res)} "
                 f"{rec['M']}x{rec['K']} by {rec['N']}x{rec['K']}: {rec['fpraker_cycles']:,} vs "
                 f"{rec['baseline_cycles']:,} baseline cycles, iso-area 36:8 "
                 f"{_x(rec['speedup_paper'])}, Eq.4 ideal {_x(rec['ideal_eq4'])} "
                 f"({rec['seconds']:.1f} s)")
        return rec

    res: dict = {"tile_config": _cfg_text(cfg), "area_ratio": ratio,
                 "area_ratio_source": ratio_how, "paper_tiles": list(PAPER_TILES),
                 "paper_speedup": PAPER_SPEEDUP, "orientations": list(orients),
                 "breakdown": breakdown,
                 "source": {"kind": kind}}
    if kind == "model":
        res["source"] = _run_model(args, orients, one, prog)
    elif kind == "captures":
        res["source"] = _run_captures(args, one)
    else:
        limit = QUICK_ROWS if args.quick and args.max_rows is None else args.max_rows
        gemms = file_pairs(args.files)
        total, k = len(gemms) * len(orients), 0
        res["source"] = {"kind": "files", "files": [str(f) for f in args.files],
                         "max_rows": limit, "rule": [g["rule"] for g in gemms]}
        for g in gemms:
            s, q = g["serial"], g["parallel"]
            S = _read_rows(s, sample_rows(s.shape[0], limit), f"{g['file']}: {s.name}")
            P = _read_rows(q, sample_rows(q.shape[0], limit), f"{g['file']}: {q.name}")
            for o in orients:
                k += 1
                one(g["name"], o, *((S, P) if o == "given" else (P, S)), k, total)
            del S, P
    res["records"] = records
    if kind == "captures":
        _capture_results(res, ratio)
    else:
        res["summary"] = summarize(records, ratio)
    res["seconds"] = time.monotonic() - t0
    return res


def _cfg_text(cfg) -> str:
    try:
        return ", ".join(f"{f.name}={getattr(cfg, f.name)}" for f in dataclasses.fields(cfg))
    except TypeError:
        return repr(cfg)


def _run_model(args, orients, one, prog) -> dict:
    from . import models

    spec = models.get_spec(args.model)
    model = models.load(args.model, say=prog.say)
    layers = 1 if args.quick and args.layers is None else args.layers
    n_layers = model.layers if layers is None else min(layers, model.layers)
    sentences = models.SENTENCES
    ids, mask = models.batch(model, sentences)
    tokens = int(mask.sum())
    limit = args.max_rows or (QUICK_ROWS if args.quick else MODEL_ROWS)
    wrows = QUICK_WEIGHT_ROWS if args.quick else None
    total = 6 * n_layers * len(orients)
    count = [0]

    def on_linear(name, x, W):
        X = to_bf16(x[sample_rows(x.shape[0], limit)], f"{name} activations")
        Wb = to_bf16(W[:wrows] if wrows else W, f"{name}.weight")
        for o in orients:
            count[0] += 1
            one(name, o, *((X, Wb) if o == "given" else (Wb, X)), count[0], total)

    prog.say(f"speedup: {spec.title}: {len(sentences)} sentences, {tokens} tokens, "
             f"{n_layers} encoder layers, {total} GEMM runs")
    models.forward(model, ids, mask, on_linear=on_linear, layers=n_layers)
    return {"kind": "model", "model": spec.name, "title": spec.title, "package": spec.package,
            "version": spec.version, "licence": spec.licence, "sentences": len(sentences),
            "tokens": tokens, "token_rows": min(tokens, limit) if limit else tokens,
            "weight_rows": wrows, "layers": n_layers}


# --- training captures

#: the operands of a captured phase, serial in ``given`` / ``swapped`` order (engine names)
CAPTURE_OPERANDS = {"fwd": ("A", "W"), "bwd_data": ("G", "W"), "wgrad": ("A", "G")}
#: orientations of a capture's summaries: as captured, swapped, and the chosen serial operand
CAPTURE_VIEWS = ("given", "swapped", "best")


def _run_captures(args, one) -> dict:
    """Run every GEMM of the capture folders ``args.files`` in both orientations through
    ``one``; the records get ``capture``, ``epoch``, ``layer``, ``phase`` and
    ``serial_operand``.  Returns the ``source`` entry."""
    from . import captures

    limit = QUICK_ROWS if args.quick and args.max_rows is None else args.max_rows
    caps = [(d, captures.read_manifest(d)) for d in captures.find_captures(args.files)]
    labels = captures.capture_labels(caps)
    total = 2 * sum(len(m["gemms"]) for _, m in caps)
    if not total:
        raise FlowError(f"no GEMM in the capture{'s' if len(caps) > 1 else ''} "
                        + ", ".join(str(d) for d, _ in caps)
                        + " (the run stopped before its first epoch was written)")
    k = 0
    for (d, man), label in zip(caps, labels):
        prefix = f"{label}/" if len(caps) > 1 else ""
        by_file: dict[str, list] = {}
        for g in man["gemms"]:
            by_file.setdefault(g["file"], []).append(g)
        for file, entries in by_file.items():
            path = d / file
            pairs = {p["name"]: p for p in file_pairs([path])}
            for g in entries:
                p = pairs.get(g["name"])
                if p is None or p["rule"] != "serial/parallel":
                    raise captures.CaptureError(
                        f"{path}: the manifest lists {g['name']}, but the file has no "
                        f"{g['name']}.serial + {g['name']}.parallel pair")
                s, q = p["serial"], p["parallel"]
                if [list(s.shape), list(q.shape)] != [g["serial"], g["parallel"]]:
                    raise captures.CaptureError(
                        f"{path}: {g['name']} is {list(s.shape)} by {list(q.shape)} in the "
                        f"file, {g['serial']} by {g['parallel']} in the manifest")
                S = _read_rows(s, sample_rows(s.shape[0], limit), f"{path}: {s.name}")
                P = _read_rows(q, sample_rows(q.shape[0], limit), f"{path}: {q.name}")
                for o in ("given", "swapped"):
                    k += 1
                    operand = CAPTURE_OPERANDS[g["phase"]][o == "swapped"]
                    rec = one(f"{prefix}e{g['epoch']:03d}:{g['name']}", o,
                              *((S, P) if o == "given" else (P, S)), k, total, serial=operand)
                    rec.update(capture=label, epoch=g["epoch"], layer=g["layer"],
                               phase=g["phase"], serial_operand=operand)
                del S, P
    return {"kind": "captures", "files": [str(f) for f in args.files], "max_rows": limit,
            "captures": [{"dir": str(d), "label": label, "meta": captures.meta_of(m),
                          "complete": m.get("complete"), "epochs": m.get("epochs"),
                          "gemms": len(m["gemms"]), "skipped": m["skipped"]}
                         for (d, m), label in zip(caps, labels)]}


def choose_serial(records: list[dict]) -> dict:
    """The serial operand per capture, layer and phase: the orientation with fewer FPRaker
    cycles summed over the captured epochs (ties: ``given``).  Sets every record's ``chosen``;
    returns ``{capture: {"<layer>.<phase>": {layer, phase, serial, serial_operand,
    fpraker_cycles: {given, swapped}}}}``."""
    cycles: dict = {}
    for r in records:
        key = (r["capture"], r["layer"], r["phase"])
        c = cycles.setdefault(key, {"given": 0, "swapped": 0})
        c[r["orientation"]] += r["fpraker_cycles"]
    out: dict = {}
    for (cap, layer, phase), c in cycles.items():
        o = "swapped" if c["swapped"] < c["given"] else "given"
        out.setdefault(cap, {})[f"{layer}.{phase}"] = {
            "layer": layer, "phase": phase, "serial": o,
            "serial_operand": CAPTURE_OPERANDS[phase][o == "swapped"], "fpraker_cycles": c}
    for r in records:
        r["chosen"] = out[r["capture"]][f"{r['layer']}.{r['phase']}"]["serial"] == r["orientation"]
    return out


def capture_views(records: list[dict], ratio: float | None) -> dict:
    """:func:`summarize` of captured records (both orientations, ``chosen`` set) per
    orientation ``given``, ``swapped`` and ``best`` (the chosen ones)."""
    best = [dict(r, orientation="best") for r in records if r["chosen"]]
    return summarize([*records, *best], ratio)


def _capture_report(recs: list[dict], ratio: float | None) -> dict:
    """``total``, ``phases``, ``epochs``, ``layers`` and ``best_each_epoch`` of a set of
    captured records."""
    phases = [p for p in CAPTURE_OPERANDS if any(r["phase"] == p for r in recs)]
    epochs = sorted({r["epoch"] for r in recs})
    layers = list(dict.fromkeys(r["layer"] for r in recs))
    pairs: dict = {}
    for r in recs:
        pairs.setdefault((r["capture"], r["epoch"], r["layer"], r["phase"]), []).append(r)
    each = [dict(min(p, key=lambda r: (r["fpraker_cycles"], r["orientation"] != "given")),
                 orientation="best_each_epoch") for p in pairs.values()]

    def views(sel):
        return capture_views(sel, ratio)

    return {
        "total": views(recs),
        "phases": {p: views([r for r in recs if r["phase"] == p]) for p in phases},
        "epochs": [{"epoch": e,
                    "total": views([r for r in recs if r["epoch"] == e]),
                    "phases": {p: views([r for r in recs if r["epoch"] == e and r["phase"] == p])
                               for p in phases
                               if any(r["epoch"] == e and r["phase"] == p for r in recs)}}
                   for e in epochs],
        "layers": {lay: views([r for r in recs if r["layer"] == lay]) for lay in layers},
        "best_each_epoch": summarize(each, ratio).get("best_each_epoch"),
    }


def _capture_results(res: dict, ratio: float | None) -> None:
    """Choose the serial operands and add the capture summaries to ``res``."""
    records = res["records"]
    choice = choose_serial(records)
    res["orientations"] = ["given", "swapped"]
    res["summary"] = capture_views(records, ratio)
    res["captures"] = []
    for cap in res["source"]["captures"]:
        recs = [r for r in records if r["capture"] == cap["label"]]
        res["captures"].append({"label": cap["label"], "dir": cap["dir"], "meta": cap["meta"],
                                "complete": cap["complete"], "skipped": cap["skipped"],
                                "choice": choice.get(cap["label"], {}),
                                **_capture_report(recs, ratio)})
    overall = _capture_report(records, ratio)
    for key in ("phases", "epochs", "layers"):
        res[key] = overall[key]


__all__ = ["run", "study_gemm", "summarize", "area_ratio",
           "choose_serial", "capture_views", "plot_captures", "PAPER_MODELS",
           "ideal_eq4", "serial_terms", "sample_rows", "file_pairs", "to_bf16",
           "markdown", "to_csv", "plot", "write", "PAPER_TILES", "POSITIONS", "PAPER_SPLIT",
           "CLOCK_HZ", "DRAM_BYTES_PER_S", "zero_value_operand", "ablation_configs", "bdc_bits",
           "speedup_split"]

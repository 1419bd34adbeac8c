"""The cycle-model study of one GEMM and its summaries: the paper's figures, the golden tile
model, the serial operand's terms and the Eq. 4 ideal, the breakdown's ablations and memory
model, the per-orientation summaries and the tiles' area ratio."""

import dataclasses
import json
import math
import time

import numpy as np

from ... import FlowError, build_dir, shown

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
STALL_ORDER = ("no_term", "shift_range", "exponent_block", "inter_column", "lock_step",
               "column_wait")


# --- the cycle model


def _tile_model():
    """``(TileConfig, tile_gemm)`` of the golden tile model (tests substitute a stand-in here:
    :func:`study_gemm` and the run look it up in this module)."""
    from golden.fpraker.gemm import tile_gemm
    from golden.fpraker.tile import TileConfig

    return TileConfig, tile_gemm


def _encoding(cfg) -> str:
    for attr in ("encoding",):
        if hasattr(cfg, attr):
            return getattr(cfg, attr)
    pe = getattr(cfg, "pe", None)
    return getattr(pe, "encoding", "csd")


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


def operand_floor(S: np.ndarray, N: int, cfg) -> int:
    """The **operand floor** of a GEMM with serial rows ``S`` (bf16 patterns, (M, K)) and ``N``
    parallel rows on tile ``cfg``: the cycles of a tile whose PEs need only the serial
    operand's terms, one term per lane per cycle, and nothing else — per column and group the
    largest term count among its lanes (at least one cycle, the bit-parallel tile's), each
    column running its groups without waiting for the others, each tile run as long as its
    slowest column, ``ceil(N / rows)`` row blocks.  The tile's cycles above it are the
    protocol's (shared exponent blocks, lock-step pops, shift windows, columns waiting for one
    another); out-of-bounds skipping can take the tile below it, as it drops terms."""
    from golden.common.tile import gemm_groups
    from golden.fpraker.encoder import term_counts

    S3, _ = gemm_groups(np.asarray(S), np.zeros((1, np.asarray(S).shape[1]), np.int64),
                        cfg.lanes)
    exp, man = (S3 >> 7) & 0xFF, S3 & 0x7F
    terms = term_counts(np.where(exp == 0, 0, 128 + man), _encoding(cfg))
    per_row = np.maximum(terms.max(axis=2), 1).sum(axis=1)         # (M,)
    M = per_row.shape[0]
    cols = cfg.cols
    padded = np.zeros(-(-M // cols) * cols, dtype=np.int64)
    padded[:M] = per_row
    runs = padded.reshape(-1, cols).max(axis=1)
    return int(runs.sum()) * -(-N // cfg.rows)


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
    """Run one GEMM on the tile model and derive its numbers (see the package docstring); with
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
        "floor_cycles": operand_floor(S, N, cfg),
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
        no_ob = tile_gemm(S, P, ab["no_ob"])
        rec["cycles_no_ob"] = int(no_ob.cycles)
        # the terms out-of-bounds skipping drops: useful lane-cycles without it, less with it
        rec["useful_no_ob"] = int(no_ob.useful)
        rec["stalls_no_ob"] = {k: int(v) for k, v in no_ob.stalls.items() if k != other}
        rec["lane_cycles_no_ob"] = int(no_ob.lane_cycles)
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


#: a record's counts that :func:`weighted` scales to the whole GEMM
_COUNTS = ("fpraker_cycles", "baseline_cycles", "macs", "lane_cycles", "useful", "floor_cycles",
           "tile_runs", "serial_values", "serial_terms", "cycles_zero_value", "cycles_no_ob",
           "useful_no_ob", "lane_cycles_no_ob", "offchip_bytes", "offchip_bdc_bytes")


def weighted(r: dict) -> dict:
    """Record ``r`` standing for its whole GEMM: when only some rows of its operands were
    studied (``weight`` = the whole GEMM's MACs over the studied ones, set by ``--max-rows``
    sampling), its cycle, lane-cycle, MAC and byte counts multiplied by ``weight`` (rounded),
    so that sums over GEMMs weigh each by its real size; its ratios are unchanged.  The result
    has ``weight`` 1, so weighting it again is the identity."""
    w = r.get("weight", 1)
    if w == 1:
        return r
    out = dict(r, weight=1)     # scaled once: weighting the result again changes nothing
    for k in _COUNTS:
        if k in r:
            out[k] = int(round(r[k] * w))
    for k in ("stalls", "stalls_no_ob"):
        if k in r:
            out[k] = {c: int(round(v * w)) for c, v in r[k].items()}
    return out


#: the stall causes of synchronization between lanes, PEs and columns (Fig. 16's overhead)
SYNC_STALLS = ("no_term", "lock_step", "inter_column", "column_wait")


def ob_summary(rs: list[dict]) -> dict:
    """Out-of-bounds skipping over records with the ``no_ob`` ablation: ``ob_term_share``, the
    share of the terms the tile would process without it that it drops (the paper's Fig. 13);
    ``cycles_no_ob``; and ``sync_cycles`` / ``sync_cycles_no_ob``, the synchronization stalls
    (:data:`SYNC_STALLS`) in lane-cycles with and without it (Fig. 16: how much of that
    overhead the skipping removes)."""
    rs = [weighted(r) for r in rs]
    useful = sum(r["useful"] for r in rs)
    useful_no = sum(r["useful_no_ob"] for r in rs)
    sync = sum(r["stalls"].get(k, 0) for r in rs for k in SYNC_STALLS)
    sync_no = sum(r["stalls_no_ob"].get(k, 0) for r in rs for k in SYNC_STALLS)
    return {"ob_term_share": 1 - useful / useful_no if useful_no else 0.0,
            "cycles_no_ob": sum(r["cycles_no_ob"] for r in rs),
            "sync_cycles": sync, "sync_cycles_no_ob": sync_no,
            "sync_cut": 1 - sync / sync_no if sync_no else 0.0}


def summarize(records: list[dict], area_ratio: float | None) -> dict:
    """Per orientation: totals, total-time speedups, ideal, lane-cycle breakdown."""
    out = {}
    a, b = PAPER_TILES
    records = [weighted(r) for r in records]
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
        floor = sum(r.get("floor_cycles", 0) for r in rs)
        out[o]["floor_cycles"] = floor
        out[o]["floor_share"] = floor / fpr if fpr else 0.0
        groups = sum(r["tile_runs"] * r["groups"] for r in rs)
        out[o]["cycles_per_group"] = fpr / groups if groups else 0.0
        out[o]["floor_per_group"] = floor / groups if groups else 0.0
        split = speedup_split(rs)
        if split is not None:
            out[o]["breakdown"] = split
            out[o].update(ob_summary(rs))
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

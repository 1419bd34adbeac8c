"""The tables of ``trainfab speedup``'s markdown report (``speedup.md``) and the ratio and
label texts the command's summary lines share."""

import math

from .gemm import (PAPER_MODELS, PAPER_NO_TERM, PAPER_SPEEDUP, PAPER_SPLIT, PAPER_TILES,
                   SYNC_STALLS, ob_summary, weighted)


def _x(v) -> str:
    """A ratio as ``1.23x``; ``unbounded`` where its denominator is zero (a serial operand
    without a non-zero term: no cycle of work), ``not measured`` without a value."""
    if v is None:
        return "not measured"
    if isinstance(v, float) and math.isinf(v):
        return "unbounded (no non-zero serial term)"
    return f"{v:.2f}x"


def markdown(res: dict) -> str:
    """``speedup.md``: the source, the definitions, the summary tables, the split of the
    speedup, the captures' sections and a table of the GEMMs per orientation."""
    lines = ["# FPRaker speedup over the iso-area bit-parallel baseline", "",
             _source_text(res["source"])]
    lines += _summary_markdown(res)
    if res["source"]["kind"] == "captures":
        lines += _capture_markdown(res)
    for o in res["orientations"]:
        lines += _gemm_table(res, o)
    lines.append(f"Run time {res['seconds']:.0f} s.")
    return "\n".join(lines) + "\n"


def _source_text(src: dict) -> str:
    """The paragraph saying what was studied: the model, the captures or the tensor files."""
    if src["kind"] == "model":
        return (f"Model: **{src['title']}** (`{src['package']}=={src['version']}` from PyPI, "
                f"{src['licence']}); float32 NumPy forward pass on {src['sentences']} fixed "
                f"English sentences ({src['tokens']} tokens; studied token rows per layer: "
                f"{src['token_rows']}), encoder layers studied: {src['layers']}.")
    if src["kind"] == "captures":
        return ("Training captures (one mini-batch per epoch, every layer with weights in the "
                "phases fwd, bwd_data, wgrad): " + "; ".join(
                    f"`{c['dir']}` ({_meta_text(c['meta'])}; {c['gemms']} GEMMs"
                    + ("" if c["complete"] else ", incomplete: the run was interrupted or is "
                       "still going") + ")" for c in src["captures"])
                + (f". Rows kept per operand: {src['max_rows']}." if src["max_rows"] else "."))
    return "Tensor files: " + ", ".join(f"`{f}`" for f in src["files"]) + "."


def _summary_markdown(res: dict) -> list[str]:
    """The definitions, the summary per orientation, its lane-cycle breakdown beside the
    paper's and, with the breakdown, where the speedup comes from."""
    lines = [
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
    return lines


def _gemm_table(res: dict, o: str) -> list[str]:
    """The table of every GEMM studied with serial operand ``o`` (captures: whether it is the
    chosen one)."""
    captured = res["source"]["kind"] == "captures"
    rs = [r for r in res["records"] if r["orientation"] == o]
    causes = list(dict.fromkeys(k for r in rs for k in r["stalls"]))
    lines = [f"## Per GEMM, serial = {_label(o, res)}", "",
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
    return lines


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
    lines = ["Serial operand: chosen once per layer and phase for the whole run, the orientation "
             "with fewer FPRaker cycles summed over the captured epochs (A, G, W: activations, "
             "output gradients, weights of the engine's GEMMs; their transposes are not "
             "written). \"best\" columns use the chosen operand, \"x\"/\"y\" columns always "
             "the engine's first/second operand.", ""]
    for cap in res["captures"]:
        if not cap["total"]:
            continue
        recs = [r for r in res["records"] if r.get("capture") == cap["label"] and r["chosen"]]
        lines += (_capture_head(cap) + _capture_phases(cap) + _capture_floor(cap, recs)
                  + _capture_epochs(cap) + _capture_layers(cap) + _capture_choice(cap))
    return lines


def _capture_head(cap: dict) -> list[str]:
    """A capture's heading, its whole-run figures and the GEMMs it could not capture."""
    paper = (f"paper: {PAPER_SPEEDUP}x average over its models; "
             + ", ".join(f"{m} {v}x" for m, v in PAPER_MODELS.items()))
    t = cap["total"]
    b = t["best"]
    each = cap["best_each_epoch"]
    lines = [f"## Capture {cap['label']}: {_meta_text(cap['meta'])}", "",
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
    return lines


def _capture_phases(cap: dict) -> list[str]:
    """A capture's table per phase, beside the paper, and (with the breakdown) the split of
    the speedup per phase."""
    t = cap["total"]
    causes = list(dict.fromkeys(k for v in cap["phases"].values()
                                for k in v["best"]["stall_fractions"]))
    choice = cap["choice"]
    lines = ["### Per phase", "",
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
    return lines


#: the K ranges of the K table (lower bounds; the last is open)
K_BOUNDS = (1, 64, 256, 1024, 4096)


def _k_range(k: int) -> str:
    lo = max(b for b in K_BOUNDS if b <= k)
    i = K_BOUNDS.index(lo)
    return f"{lo:,}–{K_BOUNDS[i + 1] - 1:,}" if i + 1 < len(K_BOUNDS) else f"≥ {lo:,}"


def _capture_floor(cap: dict, recs: list[dict]) -> list[str]:
    """Per phase: the tile's cycles against the operand floor (operand- and protocol-limited
    parts), cycles per group and, with the ablations, the out-of-bounds term share and the
    synchronization stalls with and without the skipping; then the same against K."""
    t = cap["total"]
    has_ob = "ob_term_share" in t["best"]
    lines = ["### Operand floor, out-of-bounds skipping and K (chosen serial operand)", "",
             "**Operand floor**: the cycles of a tile that needs only the serial operand's "
             "terms (per column and group its largest lane term count, at least one cycle; "
             "columns not waiting for one another): the tile's cycles split into the "
             "operand-limited part (the floor) and the protocol-limited rest. Out-of-bounds "
             "skipping drops terms, so the tile can go below the floor."
             + (" **OB term share**: the share of the terms the tile processes without "
                "out-of-bounds skipping that it drops with it (the paper's Fig. 13). **Sync "
                "stalls**: lane-cycles of " + ", ".join(f"`{k}`" for k in SYNC_STALLS)
                + " without and with the skipping, and the share it removes (Fig. 16)."
                if has_ob else ""), "",
             "| phase | tile cycles | operand floor | operand-limited | protocol-limited | "
             "cycles per group | floor per group |"
             + (" OB term share | sync stalls without OB | with OB | cut |" if has_ob else ""),
             "|---|---|---|---|---|---|---|" + ("---|---|---|---|" if has_ob else "")]
    for p, v in [*cap["phases"].items(), ("all phases", t)]:
        b = v["best"]
        row = (f"| {p} | {b['fpraker_cycles']:,} | {b['floor_cycles']:,} | "
               f"{b['floor_share']:.1%} | {1 - b['floor_share']:.1%} | "
               f"{b['cycles_per_group']:.2f} | {b['floor_per_group']:.2f} |")
        if has_ob:
            row += (f" {b['ob_term_share']:.1%} | {b['sync_cycles_no_ob']:,} | "
                    f"{b['sync_cycles']:,} | {b['sync_cut']:.1%} |")
        lines.append(row)
    lines += ["", "Against K (every chosen GEMM of the run, by its reduction length):", "",
              "| K | GEMMs | MACs | cycles per group | floor per group | iso-area 36:8 |"
              + (" OB term share | speedup OB adds |" if has_ob else ""),
              "|---|---|---|---|---|---|" + ("---|---|" if has_ob else "")]
    buckets: dict = {}
    for r in sorted((weighted(r) for r in recs), key=lambda r: r["K"]):
        buckets.setdefault(_k_range(r["K"]), []).append(r)
    a, b_ = PAPER_TILES
    for label, rs in buckets.items():
        groups = sum(r["tile_runs"] * r["groups"] for r in rs)
        fpr = sum(r["fpraker_cycles"] for r in rs)
        base = sum(r["baseline_cycles"] for r in rs)
        row = (f"| {label} | {len(rs)} | {sum(r['macs'] for r in rs):,} | "
               f"{fpr / groups:.2f} | {sum(r['floor_cycles'] for r in rs) / groups:.2f} | "
               f"{_x((base / b_) / (fpr / a) if fpr else math.inf)} |")
        if has_ob:
            ob = ob_summary(rs)
            no_ob = ob["cycles_no_ob"]
            row += (f" {ob['ob_term_share']:.1%} | "
                    f"{(no_ob / fpr - 1) if fpr else 0:+.1%} |")
        lines.append(row)
    return lines + [""]


def _capture_epochs(cap: dict) -> list[str]:
    """A capture's table per epoch: the speedup of each phase and of all phases."""
    phases = list(cap["phases"])
    lines = ["### Per epoch (iso-area 36:8, chosen serial operand)", "",
             "| epoch | " + " | ".join(phases) + " | all phases | iso-area ours | "
             "Eq. 4 ideal | useful |", "|---|" + "---|" * (len(phases) + 4)]
    for e in cap["epochs"]:
        eb = e["total"]["best"]
        cells = [_x(e["phases"][p]["best"]["speedup_paper"]) if p in e["phases"]
                 else "-" for p in phases]
        lines.append(f"| {e['epoch']} | " + " | ".join(cells)
                     + f" | {_x(eb['speedup_paper'])} | {_ours(eb)} | "
                       f"{_x(eb['ideal_eq4'])} | {eb['useful_fraction']:.1%} |")
    return lines


def _capture_layers(cap: dict) -> list[str]:
    """A capture's table per layer, over all phases and epochs."""
    lines = ["", "### Per layer (all phases, all epochs)", "",
             "| layer | serial chosen | iso-area 36:8 best | x serial | y serial | "
             "Eq. 4 ideal best | useful |", "|---|---|---|---|---|---|---|"]
    for lay, v in cap["layers"].items():
        picked = ", ".join(f"{c['phase']}: {c['serial_operand']}" for c in cap["choice"].values()
                           if c["layer"] == lay)
        vb = v["best"]
        lines.append(f"| {lay} | {picked} | {_x(vb['speedup_paper'])} | "
                     f"{_x(v['given']['speedup_paper'])} | "
                     f"{_x(v['swapped']['speedup_paper'])} | {_x(vb['ideal_eq4'])} | "
                     f"{vb['useful_fraction']:.1%} |")
    return lines


def _capture_choice(cap: dict) -> list[str]:
    """A capture's serial operand choice per GEMM, with the cycles it was chosen on."""
    lines = ["", "### Serial operand choice (FPRaker cycles summed over the epochs)", "",
             "| GEMM | x serial | y serial | chosen |", "|---|---|---|---|"]
    for name, c in cap["choice"].items():
        cy = c["fpraker_cycles"]
        lines.append(f"| {name} | {cy['given']:,} | {cy['swapped']:,} | "
                     f"{c['serial_operand']} ({'x' if c['serial'] == 'given' else 'y'}) |")
    lines.append("")
    return lines

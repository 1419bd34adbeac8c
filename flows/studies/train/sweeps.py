"""The sensitivity sweeps of ``make training-sweeps``, as tables: HBFP's mantissa width against
block size with and without the wide weight storage (the HBFP thesis's Fig. 3.3 design space),
FAST's Algorithm 1 constants alpha against beta, and FAST's fixed width against group size
(the paper's Fig. 20).

Each table reads one ``trainfab train`` run (``train.json``) whose formats are the parametric
variants :func:`flows.studies.train.formats.variant` names (``hbfp<m>-t<T>[-w<W>]``,
``fast-a<alpha>-b<beta>``, ``bfp-m<m>-g<g>``) beside an ``fp32`` run of the same schedule.
"""

from __future__ import annotations

import re

#: the HBFP thesis's design-space figures (Fig. 3.3, WideResNet-28-10 on CIFAR-100)
HBFP_PAPER = ("HBFP thesis Fig. 3.3 (WRN-28-10, CIFAR-100): mantissas wider than 8 bits end "
              "within 1 % of fp32, 4-bit ones have 4.1 % more error; 16-bit weight storage "
              "improves the 8- and 12-bit models by 0.21 and 0.43 points")
#: FAST's choice of Algorithm 1's constants
FAST_PAPER = "FAST §VI: alpha = 0.6, beta = 0.3 for all DNNs"

_HBFP = re.compile(r"hbfp(\d+)-t(\d+)(?:-w(\d+))?(-rne)?")
_FAST = re.compile(r"fast-a(\d+(?:\.\d+)?)-b(\d+(?:\.\d+)?)")
_BFP = re.compile(r"bfp-m(\d+)-g(\d+)")
#: FAST's group-size and width sensitivity (Fig. 20, ResNet-18 on ImageNet)
BFP_PAPER = ("FAST Fig. 20 (ResNet-18): g in {8, 16, 32} x m in {2, 3, 4, 5}; smaller groups "
             "are more accurate, and g = 16, m = 4 is chosen as the baseline")


def _acc(rec) -> float | None:
    if rec is None or rec.get("diverged_at") is not None:
        return None
    return rec.get("final_test_accuracy")


def _grid(doc: dict, pattern, key) -> tuple[dict, float | None]:
    """The run's formats whose names ``pattern`` matches, as ``{key(match): record}``, and the
    fp32 run's final accuracy."""
    fmts = doc["formats"]
    cells = {}
    for name, rec in fmts.items():
        m = pattern.fullmatch(name)
        if m:
            cells[key(m)] = rec
    return cells, _acc(fmts.get("fp32"))


def _pct(v, ref=None) -> str:
    if v is None:
        return "diverged"
    return f"{100 * v:.2f} %" + ("" if ref is None else f" ({100 * (v - ref):+.2f})")


def hbfp_table(doc: dict) -> list[str]:
    """Mantissa width (rows) x block size (columns): final accuracy with the 16-bit weight
    storage, without it (the weights stored as the dot products read them), and the storage's
    gain in points; empty when the run has no HBFP variants."""
    fmts = doc["formats"]
    cells: dict = {}
    rounding = set()
    for name, rec in fmts.items():
        m = _HBFP.fullmatch(name)
        if m:
            mm, t = int(m[1]), int(m[2])
            narrow = m[3] is not None and int(m[3]) == mm
            cells.setdefault((mm, t), {})["narrow" if narrow else "wide"] = _acc(rec)
            rounding.add("round to nearest (ties to even)" if m[4] else "Equinox's floor")
    if not cells:
        return []
    ms = sorted({k[0] for k in cells})
    ts = sorted({k[1] for k in cells})
    ref = _acc(fmts.get("fp32"))
    lines = [f"fp32: {_pct(ref)}. Quantizer rounding: {' and '.join(sorted(rounding))}. Each "
             "cell: final test accuracy with the 16-bit weight storage / with the weights "
             "stored at the mantissa width (no wide storage), and the wide storage's gain in "
             "points.", "",
             "| mantissa bits | " + " | ".join(f"T = {t}" for t in ts) + " |",
             "|---|" + "---|" * len(ts)]
    for mm in ms:
        row = []
        for t in ts:
            c = cells.get((mm, t), {})
            w, n = c.get("wide"), c.get("narrow")
            gain = (f" ({100 * (w - n):+.2f})" if w is not None and n is not None else "")
            row.append(("—" if "wide" not in c else _pct(w)) + " / "
                       + ("—" if "narrow" not in c else _pct(n)) + gain)
        lines.append(f"| {mm} | " + " | ".join(row) + " |")
    return lines + ["", f"Paper: {HBFP_PAPER}."]


def _share4(summary: dict) -> float | None:
    widths = summary.get("widths") or {}
    s = "".join(v for per in widths.values() for v in per.values())
    n = sum(c.isdigit() for c in s)
    return s.count("4") / n if n else None


def _work(summary: dict) -> float | None:
    """fMAC rounds over HighBFP's (4 rounds per group pair), the run's GEMM time on the fMAC
    array against fixed 4-bit widths."""
    rounds, pairs = summary.get("fmac_rounds") or {}, summary.get("group_pairs") or {}
    total = sum(pairs.values())
    return sum(rounds.values()) / (4 * total) if total else None


def fast_table(doc: dict) -> list[str]:
    """alpha (rows) x beta (columns): final accuracy (change against fp32), the share of 4-bit
    tensor choices and the fMAC work against HighBFP; empty without FAST variants."""
    cells, ref = _grid(doc, _FAST, lambda m: (float(m[1]), float(m[2])))
    if not cells:
        return []
    alphas = sorted({k[0] for k in cells})
    betas = sorted({k[1] for k in cells})
    lines = [f"fp32: {_pct(ref)}. Each cell: final test accuracy (change against fp32, in "
             "points); share of 4-bit tensor choices over the run; fMAC rounds against "
             "HighBFP's (the run's GEMM time on the fMAC array against fixed 4-bit widths).",
             "", "| alpha | " + " | ".join(f"beta = {b:g}" for b in betas) + " |",
             "|---|" + "---|" * len(betas)]
    for a in alphas:
        row = []
        for b in betas:
            rec = cells.get((a, b))
            if rec is None:
                row.append("—")
                continue
            summ = rec.get("format") or {}
            s4, work = _share4(summ), _work(summ)
            row.append(f"{_pct(_acc(rec), ref)}; "
                       f"{'—' if s4 is None else f'{100 * s4:.0f} %'} 4-bit; "
                       f"{'—' if work is None else f'{work:.2f}x'}")
        lines.append(f"| {a:g} | " + " | ".join(row) + " |")
    return lines + ["", f"Paper: {FAST_PAPER}."]


def bfp_table(doc: dict) -> list[str]:
    """Magnitude width (rows) x group size (columns): final accuracy (change against fp32);
    empty without ``bfp-m<m>-g<g>`` variants."""
    cells, ref = _grid(doc, _BFP, lambda m: (int(m[1]), int(m[2])))
    if not cells:
        return []
    ms = sorted({k[0] for k in cells})
    gs = sorted({k[1] for k in cells})
    lines = [f"fp32: {_pct(ref)}. Each cell: final test accuracy (change against fp32, in "
             "points) at fixed m-bit magnitudes in groups of g (FAST's converter: truncation, "
             "SR gradients; odd widths padded in the fMAC).", "",
             "| m | " + " | ".join(f"g = {g}" for g in gs) + " |", "|---|" + "---|" * len(gs)]
    for mm in ms:
        row = [_pct(_acc(cells[(mm, g)]), ref) if (mm, g) in cells else "—" for g in gs]
        lines.append(f"| {mm} | " + " | ".join(row) + " |")
    return lines + ["", f"Paper: {BFP_PAPER}."]


__all__ = ["HBFP_PAPER", "FAST_PAPER", "BFP_PAPER", "hbfp_table", "fast_table", "bfp_table"]

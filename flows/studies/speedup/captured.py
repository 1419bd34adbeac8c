"""Training captures in ``trainfab speedup``: every captured GEMM run in both orientations,
the serial operand chosen per layer and phase, and the summaries per phase, epoch, layer and
run."""

from ... import FlowError
from .gemm import summarize
from .operands import QUICK_ROWS, _read_rows, file_pairs, sample_rows

#: the operands of a captured phase, serial in ``given`` / ``swapped`` order (engine names)
CAPTURE_OPERANDS = {"fwd": ("A", "W"), "bwd_data": ("G", "W"), "wgrad": ("A", "G")}
#: orientations of a capture's summaries: as captured, swapped, and the chosen serial operand
CAPTURE_VIEWS = ("given", "swapped", "best")


def _run_captures(args, one) -> dict:
    """Run every GEMM of the capture folders ``args.files`` in both orientations through
    ``one``; the records get ``capture``, ``epoch``, ``layer``, ``phase`` and
    ``serial_operand``.  Returns the ``source`` entry."""
    from .. import captures

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
                key = f"{label}:{g['epoch']}:{g['name']}"
                S = _read_rows(s, sample_rows(s.shape[0], limit, key + ".serial"),
                               f"{path}: {s.name}")
                P = _read_rows(q, sample_rows(q.shape[0], limit, key + ".parallel"),
                               f"{path}: {q.name}")
                for o in ("given", "swapped"):
                    k += 1
                    operand = CAPTURE_OPERANDS[g["phase"]][o == "swapped"]
                    rec = one(f"{prefix}e{g['epoch']:03d}:{g['name']}", o,
                              *((S, P) if o == "given" else (P, S)), k, total, serial=operand)
                    rec.update(capture=label, epoch=g["epoch"], layer=g["layer"],
                               phase=g["phase"], serial_operand=operand,
                               weight=(s.shape[0] * q.shape[0]) / (S.shape[0] * P.shape[0]))
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

"""FPRaker's Table III beside ours: the tiles' area split into PE array and term encoders, and
their blocks (``trainfab area fpraker.tile --breakdown``, ``make paper``)."""


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

    from . import build_dir

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


__all__ = ["TABLE_III", "TILE_BLOCKS", "table_iii"]

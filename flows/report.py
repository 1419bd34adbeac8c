"""Summary runs: ``trainfab demo`` (generate + quick regression + area for every unit) and
``trainfab report`` (area/timing at every paper preset, with ratios beside the papers' numbers).

Our numbers come from yosys + OSU 0.18 µm cells; the papers report 65/45/28 nm layouts, so
only *ratios* between units built with the same flow are comparable, never absolute µm².
"""

import json
from dataclasses import dataclass

from . import BUILD, FlowError, registry
from .config import load_config


@dataclass(frozen=True)
class Comparison:
    """An area ratio the papers state: area(numerator) / area(denominator)."""

    label: str
    numerator: str
    denominator: str
    paper_ratio: float
    source: str


#: ratios the papers publish; a row appears once both of its units are registered
COMPARISONS: list[Comparison] = [
    Comparison("FPRaker PE / bit-parallel bf16 PE", "fpraker.pe", "baseline.bf16_pe",
               4752 / 22212, "FPRaker Table III, per PE: 4,752 vs 22,212 µm² at 65 nm"),
    Comparison("Gecko decompressor / compressor", "gecko.decompressor", "gecko.compressor",
               37133.28 / 31575.60, "Schrödinger's FP Table III: 37,133.28 vs 31,575.60 µm² at 65 nm"),
]

#: the papers' own figure for a unit, shown beside ours
PAPER_FIGURES = {
    "fpraker.encoder": "≈202 µm² per lane at 65 nm (12,950 µm² for 64 lanes; FPRaker Table III)",
}


def _per_lane(unit_name: str, report: dict) -> str:
    lanes = report["config"].get("lanes")
    return f"{report['area_um2'] / lanes:.0f} µm²/lane" if lanes else ""


def _area_row(unit, r) -> str:
    fmax = f"{r['fmax_mhz']:.0f}" if r.get("fmax_mhz") else "n/a"
    return (f"| {unit.name} | {r['area_um2']:.0f} | {_per_lane(unit.name, r)} | {r['cells']} | "
            f"{r['flip_flops']} | {r['transistors_estimate']} | {fmax} | "
            f"{PAPER_FIGURES.get(unit.name, '')} |")


AREA_HEADER = ("| unit | area µm² | per lane | cells | flip-flops | transistors (est.) | fmax MHz "
               "| paper |\n|---|---|---|---|---|---|---|---|")


def _ratio_rows(areas: dict) -> list[str]:
    rows = []
    for c in COMPARISONS:
        if c.numerator in areas and c.denominator in areas:
            ours = areas[c.numerator] / areas[c.denominator]
            rows.append(f"| {c.label} | {ours:.3f} | {c.paper_ratio:.3f} | {c.source} |")
    return rows


def _ratio_section(areas: dict) -> str:
    rows = _ratio_rows(areas)
    if not rows:
        return ""
    return ("\n## Area ratios (same flow) beside the papers'\n\n| comparison | ours | paper | source |"
            "\n|---|---|---|---|\n" + "\n".join(rows) + "\n")


def report(liberty: str = "osu018", clock_ns: float = 10.0) -> int:
    """Area/timing for every unit at its paper preset; writes build/report/report.{md,json}."""
    from .synth import area

    out = BUILD / "report"
    out.mkdir(parents=True, exist_ok=True)
    units = list(registry.UNITS.values())
    results, rows = {}, []
    for k, unit in enumerate(units, 1):
        print(f"[{k}/{len(units)}] {unit.name}: synthesizing …", flush=True)
        r = area(unit, load_config(unit), liberty=liberty, clock_ns=clock_ns,
                 outdir=out / unit.name)
        results[unit.name] = r
        rows.append(_area_row(unit, r))
    areas = {n: r["area_um2"] for n, r in results.items()}
    text = ("# trainfab report: every unit at its paper configuration\n\n" + AREA_HEADER + "\n"
            + "\n".join(rows) + "\n" + _ratio_section(areas))
    (out / "report.md").write_text(text)
    (out / "report.json").write_text(json.dumps(results, indent=2) + "\n")
    print(text)
    print(f"written: {out / 'report.md'}, {out / 'report.json'}")
    return 0


def demo(seed: int = 1, sim: str = "icarus") -> int:
    """Generate, quick-regress and measure every registered unit at its paper configuration."""
    from .generate import generate
    from .simulate import failure_details, run_testbench
    from .synth import area

    out = BUILD / "demo"
    out.mkdir(parents=True, exist_ok=True)
    units = list(registry.UNITS.values())
    summary, rows, failed = {}, [], 0
    for k, unit in enumerate(units, 1):
        tag = f"[{k}/{len(units)}] {unit.name}"
        cfg = load_config(unit)
        man = generate(unit, cfg, out / "verilog")
        print(f"{tag}: Verilog {man['verilog']}", flush=True)
        tb = run_testbench(unit, cfg, seed=seed, sim=sim, effort="quick")
        print(f"{tag}: {tb.summary()}", flush=True)
        if not tb.passed:
            failed += 1
            print(failure_details(tb))
        try:
            r = area(unit, cfg, outdir=out / "area" / unit.name)
        except FlowError as e:
            raise FlowError(f"{unit.name}: {e}") from None
        print(f"{tag}: {r['area_um2']:.0f} µm², fmax {r.get('fmax_mhz')} MHz", flush=True)
        summary[unit.name] = {"verilog": man["verilog"], "sha256": man["verilog_sha256"],
                              "regression": tb.summary(), "passed": tb.passed, "area": r}
        state = "pass" if tb.passed else "FAIL"
        rows.append(_area_row(unit, r).replace(f"| {unit.name} |",
                                               f"| {unit.name} | {state} {tb.tests - tb.failed}/{tb.tests} |", 1))
    areas = {n: s["area"]["area_um2"] for n, s in summary.items()}
    header = AREA_HEADER.replace("| unit |", "| unit | quick regression |", 1).replace(
        "|---|", "|---|---|", 1)
    text = ("# trainfab demo: paper configurations\n\n" + header + "\n" + "\n".join(rows) + "\n"
            + _ratio_section(areas)
            + "\nOSU 0.18 µm cells (yosys + OpenSTA); compare ratios, not absolute µm², with the "
              "papers' 65/45/28 nm figures.\n")
    (out / "summary.md").write_text(text)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    print()
    print(text)
    print(f"written: {out / 'summary.md'}, {out / 'summary.json'}, Verilog in {out / 'verilog'}")
    return 1 if failed else 0


__all__ = ["Comparison", "COMPARISONS", "PAPER_FIGURES", "report", "demo"]

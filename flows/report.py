"""Summary runs: ``trainfab demo`` (generate + quick regression + area for every unit) and
``trainfab report`` (area/timing at every paper preset, with ratios beside the papers' numbers).

Units, the parts the papers report separately, the papers' own figures and the ratios they
state are declared by the family modules (:mod:`flows.families`).

Our numbers come from yosys + OSU 0.18 µm cells; the papers report 65/45/28 nm layouts, so
only *ratios* between units built with the same flow are comparable, never absolute µm².
"""

import json
from dataclasses import dataclass, field

from . import FlowError, build_dir, families, registry
from .config import load_config
from .registry import config_label


@dataclass(frozen=True, kw_only=True)
class Part:
    """A sub-block of a unit that the papers report separately (synthesized on its own)."""

    #: name in reports, ``unit/part``
    name: str
    unit: str
    summary: str
    #: ``module:Class`` built from the part's configuration (default: the unit's component)
    component: str = ""
    #: field overrides of the unit's configuration (a variant the paper reports, e.g. another
    #: operand format)
    overrides: dict = field(default_factory=dict)
    #: the paper's own figure for this part, shown beside ours
    paper: str = ""
    #: also synthesize it hierarchically and show its area by block (the unit's breakdown
    #: paths), as the paper reports it
    breakdown: bool = False


@dataclass(frozen=True, kw_only=True)
class Comparison:
    """An area ratio the papers state: area(numerator) / area(denominator)."""

    label: str
    #: unit or part names
    numerator: str
    denominator: str
    paper_ratio: float
    source: str
    #: instances of the denominator (a larger structure built from a measured block)
    denominator_count: int = 1
    #: the numerator's share of (numerator + denominator) rather than their ratio
    share: bool = False

    def ours(self, areas: dict) -> float:
        den = self.denominator_count * areas[self.denominator]
        num = areas[self.numerator]
        return num / (den + num) if self.share else num / den


@dataclass(frozen=True, kw_only=True)
class Scaling:
    """Area against a size measure of the configuration (e.g. an array's N²W MACs), over the
    unit and parts named in ``members``, with a least-squares line ``area = slope * size +
    intercept`` and its R² (a paper's linear area model, e.g. Equinox's m·n²·w·a_alu)."""

    label: str
    #: unit or part names whose configurations differ in size
    members: tuple
    #: ``size(config dict) -> number``
    size: object
    #: what the size counts, for the table header
    size_label: str
    paper: str = ""

    def fit(self, results: dict):
        """``(points, slope, intercept, r2)`` over the members present in ``results``
        (``points``: ``(name, size, area)``); ``None`` with fewer than two points."""
        pts = [(n, float(self.size(results[n]["config"])), results[n]["area_um2"])
               for n in self.members if n in results]
        if len(pts) < 2 or len({x for _, x, _ in pts}) < 2:
            return None
        xs = [x for _, x, _ in pts]
        ys = [y for _, _, y in pts]
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        sxx = sum((x - mx) ** 2 for x in xs)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
        intercept = my - slope * mx
        ss_tot = sum((y - my) ** 2 for y in ys)
        ss_res = sum((y - slope * x - intercept) ** 2 for x, y in zip(xs, ys))
        return pts, slope, intercept, (1 - ss_res / ss_tot) if ss_tot else 1.0


def _scaling_section(results: dict) -> str:
    text = ""
    for s in families.scalings():
        fitted = s.fit(results)
        if fitted is None:
            continue
        pts, slope, intercept, r2 = fitted
        rows = "\n".join(f"| {n} | {x:g} | {a:.0f} | {slope * x + intercept:.0f} | "
                         f"{100 * (a - slope * x - intercept) / a:+.1f} % |" for n, x, a in pts)
        text += (f"\n## {s.label}\n\n| configuration | {s.size_label} | area µm² | fit µm² | "
                 f"residual |\n|---|---|---|---|---|\n{rows}\n\narea ≈ {slope:.1f} µm² × "
                 f"{s.size_label} {'-' if intercept < 0 else '+'} {abs(intercept):.0f} µm², "
                 f"R² = {r2:.4f} ({len(pts)} points)"
                 + (f"; {s.paper}" if s.paper else "") + "\n")
    return text


def paper_figures() -> dict[str, str]:
    """The papers' own figure for each unit and part that has one, by report name."""
    entries = list(registry.units().values()) + families.parts()
    return {e.name: e.paper for e in entries if e.paper}


AREA_HEADER = ("| unit | area µm² | area GE | per lane | cells | flip-flops | transistors (est.) "
               "| fmax MHz | paper |\n|---|---|---|---|---|---|---|---|---|")


def _area_row(name: str, r: dict, papers: dict) -> str:
    lanes = r["config"].get("lanes")
    per_lane = f"{r['area_um2'] / lanes:.0f}" if lanes else ""
    fmax = f"{r['fmax_mhz']:.0f}" if r.get("fmax_mhz") else "n/a"
    ge = f"{r['area_ge']:.0f}" if r.get("area_ge") else "n/a"
    return (f"| {name} | {r['area_um2']:.0f} | {ge} | {per_lane} | {r['cells']} | {r['flip_flops']} | "
            f"{r['transistors_estimate']} | {fmax} | {papers.get(name, '')} |")


def _ratio_section(areas: dict) -> str:
    rows = [f"| {c.label} | {c.ours(areas):.3f} | "
            f"{c.paper_ratio:.3f} | {c.source} |"
            for c in families.comparisons() if c.numerator in areas and c.denominator in areas]
    if not rows:
        return ""
    return ("\n## Area ratios (same flow) beside the papers'\n\n| comparison | ours | paper | source |"
            "\n|---|---|---|---|\n" + "\n".join(rows) + "\n")


def _blocks(name: str, r: dict) -> str:
    from .eda.synth import breakdown_markdown

    return "\n" + breakdown_markdown(r).replace("## Area by block", f"## {name}: area by block", 1)


def _measure(unit, cfg, outdir, liberty: str, clock_ns: float) -> dict:
    """Area reports of a unit and of its parts, keyed by report name."""
    from .eda.synth import area

    try:
        results = {unit.name: area(unit, cfg, liberty=liberty, clock_ns=clock_ns,
                                   outdir=outdir / unit.name,
                                   breakdown=bool(unit.breakdown_table))}
        for part in families.parts():
            if part.unit == unit.name:
                factory = registry.resolve(part.component) if part.component else None
                results[part.name] = area(unit, unit.make_config(cfg, **part.overrides),
                                          liberty=liberty, clock_ns=clock_ns,
                                          outdir=outdir / part.name.replace("/", "-"),
                                          factory=factory, breakdown=part.breakdown)
    except FlowError as e:
        raise FlowError(f"{unit.name}: {e}") from None
    return results


def _tables(results: dict, first_column: dict | None = None) -> str:
    header, rows, papers = AREA_HEADER, [], paper_figures()
    if first_column is not None:
        header = header.replace("| unit |", "| unit | quick regression |", 1).replace(
            "|---|", "|---|---|", 1)
    for name, r in results.items():
        row = _area_row(name, r, papers)
        if first_column is not None:
            row = row.replace(f"| {name} |", f"| {name} | {first_column.get(name, '')} |", 1)
        rows.append(row)
    areas = {n: r["area_um2"] for n, r in results.items()}
    blocks = "".join(_blocks(name, r) for name, r in results.items() if r.get("breakdown"))
    tables = "".join(
        "\n" + registry.resolve(registry.get(name).breakdown_table)(r, results, header=k == 0)
        + "\n" for k, (name, r) in enumerate(
            (n, r) for n, r in results.items()
            if n in registry.UNITS and registry.get(n).breakdown_table and r.get("breakdown")))
    return (header + "\n" + "\n".join(rows) + "\n" + _ratio_section(areas)
            + _scaling_section(results) + blocks + tables
            + "\nOSU 0.18 µm cells (yosys + OpenSTA); compare ratios, not absolute µm², with the "
              "papers' 65/45/28 nm figures.\n")


def report(liberty: str = "osu018", clock_ns: float = 10.0) -> int:
    """Area/timing for every unit at its paper preset; writes build/report/report.{md,json}."""
    from .runs import ensure_dir, exclusive, write_atomic

    units = list(registry.UNITS.values())
    results = {}
    # one report run at a time per folder: report.md and the unit folders come from one run
    with exclusive(build_dir() / "report", "report") as out:
        ensure_dir(out)
        for k, unit in enumerate(units, 1):
            print(f"[{k}/{len(units)}] {unit.name}: synthesizing …", flush=True)
            results.update(_measure(unit, load_config(unit), out, liberty, clock_ns))
        text = "# trainfab report: every unit at its paper configuration\n\n" + _tables(results)
        write_atomic(out / "report.json", json.dumps(results, indent=2) + "\n")
        write_atomic(out / "report.md", text)
    print(text)
    print(f"written: {out / 'report.md'}, {out / 'report.json'}")
    return 0


#: tile size of the demo's power runs (gate-level simulation of the mapped netlist)
POWER_TILE = {"rows": 2, "cols": 2}


def _fpraker_studies(out, results: dict) -> str:
    """The demo's FPRaker tile studies: the power of both tiles on real MiniLM operands
    (:data:`POWER_TILE` tiles; gate-level activity) and the speedup study on MiniLM with the
    demo's own measured tile-area ratio.  Returns their markdown sections."""
    from .eda import power
    from .studies import speedup
    from .cli import build_parser

    text = ["\n## FPRaker tile power (real MiniLM operands)\n"]
    mw = {}
    for name in ("fpraker.tile", "baseline.bf16_tile"):
        unit = registry.get(name)
        cfg = unit.make_config(load_config(unit), **POWER_TILE)
        print(f"demo: power of {name} {POWER_TILE['rows']}x{POWER_TILE['cols']} on MiniLM "
              "operands …", flush=True)
        r = power.power(unit, cfg, outdir=out / "power" / name, operands="minilm")
        mw[name] = r
        text.append(f"- `{name}` {POWER_TILE['rows']}×{POWER_TILE['cols']}: "
                    f"{r['total_mw']:.2f} mW at {r['clock_ns']:g} ns, "
                    f"{r['energy_per_group_pj']:.1f} pJ per group "
                    f"({out / 'power' / name / 'power.md'})")
    f, b = mw["fpraker.tile"], mw["baseline.bf16_tile"]
    text.append(f"- power ratio FPRaker / baseline: **{f['total_mw'] / b['total_mw']:.2f}** "
                f"(paper, Table III PE power: 0.23); energy per group: "
                f"{f['energy_per_group_pj'] / b['energy_per_group_pj']:.2f}")
    ratio = None
    if "fpraker.tile" in results and "baseline.bf16_tile" in results:
        ratio = results["baseline.bf16_tile"]["area_um2"] / results["fpraker.tile"]["area_um2"]
    argv = ["speedup", "--model", "minilm", "-o", str(out / "speedup")]
    if ratio is not None:
        argv += ["--area-ratio", f"{ratio:.6f}"]
    args = build_parser().parse_args(argv)
    print("demo: speedup study on MiniLM …", flush=True)
    res = speedup.run(args)
    paths = speedup.write(res, (out / "speedup").resolve())
    text.append("\n## FPRaker speedup study (MiniLM, iso-area)\n")
    for o, s_ in res["summary"].items():
        ours = f"{s_['speedup_ours']:.2f}×" if s_.get("speedup_ours") is not None else "n/a"
        text.append(f"- serial = {speedup._label(o, res)}: {s_['gemms']} GEMMs, {s_['macs']:,} MACs: iso-area "
                    f"speedup {s_['speedup_paper']:.2f}× with the paper's 36:8 tiles, "
                    f"{ours} with our area ratio; Eq. 4 ideal {s_['ideal_eq4']:.2f}×; "
                    f"useful lane-cycles {s_['useful_fraction']:.1%}, "
                    + ", ".join(f"{k} {v:.1%}" for k, v in s_["stall_fractions"].items()))
    text.append(f"- paper: 1.5× average; report {paths['md']}")
    return "\n".join(text) + "\n"


def demo(seed: int = 1, sim: str | None = None) -> int:
    """Generate, quick-regress and measure every registered unit at its paper configuration
    (``sim=None``: each unit's own simulator).  One demo run at a time per build folder: a
    second waits for the first."""
    from .runs import exclusive

    with exclusive(build_dir() / "demo", "demo") as out:
        return _demo(out, seed, sim)


def _demo(out, seed: int, sim: str | None) -> int:
    from .eda.generate import generate
    from .runs import ensure_dir, write_atomic
    from .eda.simulate import failure_details, run_testbench

    ensure_dir(out)
    units = list(registry.UNITS.values())
    summary, results, states, failed = {}, {}, {}, 0
    for k, unit in enumerate(units, 1):
        tag = f"[{k}/{len(units)}] {unit.name}"
        cfg = load_config(unit)
        if unit.demo_overrides:
            cfg = unit.make_config(cfg, **unit.demo_overrides)
            print(f"{tag}: at {config_label(unit.demo_overrides)} (the paper configuration: "
                  f"`trainfab area {unit.name} --breakdown`)", flush=True)
        man = generate(unit, cfg, out / "verilog")
        print(f"{tag}: Verilog {man['verilog']}", flush=True)
        tb = run_testbench(unit, cfg, seed=seed, sim=sim, effort="quick")
        print(f"{tag}: {tb.summary()}", flush=True)
        if not tb.passed:
            failed += 1
            print(failure_details(tb))
        measured = _measure(unit, cfg, out / "area", "osu018", 10.0)
        for name, r in measured.items():
            print(f"{tag}: {name} {r['area_um2']:.0f} µm², fmax {r.get('fmax_mhz')} MHz", flush=True)
        results.update(measured)
        states[unit.name] = f"{'pass' if tb.passed else 'FAIL'} {tb.tests - tb.failed}/{tb.tests}"
        summary[unit.name] = {"verilog": man["verilog"], "sha256": man["verilog_sha256"],
                              "regression": tb.summary(), "passed": tb.passed,
                              "area": measured}
    text = "# trainfab demo: paper configurations\n\n" + _tables(results, states)
    text += _fpraker_studies(out, results)
    write_atomic(out / "summary.json", json.dumps(summary, indent=2, default=str) + "\n")
    write_atomic(out / "summary.md", text)
    print()
    print(text)
    print(f"written: {out / 'summary.md'}, {out / 'summary.json'}, Verilog in {out / 'verilog'}")
    return 1 if failed else 0


__all__ = ["Part", "Comparison", "Scaling", "paper_figures", "report", "demo"]

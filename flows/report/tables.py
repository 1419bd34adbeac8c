"""What every summary run shares, and ``trainfab report``: the area tables (units, parts, the
papers' figures, ratios, scalings, designs at their own clocks), the stamped results page, the
measuring of a unit with its parts and the generate-regress-measure step of ``demo`` and
``paper``.

Our numbers come from yosys + OSU 0.18 µm cells; the papers report 65/45/28 nm layouts, so
only *ratios* between units built with the same flow are comparable, never absolute µm².
"""

import json

from .. import FlowError, build_dir, families, progress, registry, shown
from ..config import load_config
from ..declare import OwnClock, resolve
from ..layout import DEFAULT_CLOCK_NS, DEFAULT_LIBERTY


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
    figures = {u.name: u.showcase.paper for u in registry.units().values()}
    figures.update({p.name: p.paper for p in families.parts()})
    return {name: text for name, text in figures.items() if text}


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


def own_clock_rows(results: dict, aliases: dict | None = None,
                   work: dict | None = None) -> list[dict]:
    """The :class:`OwnClock` comparisons between reports of ``results`` (name → area report with
    ``fmax_mhz``; ``aliases`` maps part names to the report that stands for them): one row per
    operand set of the design, with MACs per cycle, M MAC/s per mm² at its own fmax and the
    ratio to the baseline's at its own fmax (``own``) and at one clock (``same``).  ``work``
    (design name → ``[(operands, MACs per cycle)]``) adds measured rows, e.g. a study's real
    operands."""
    names = {n: n for n in results} | dict(aliases or {})
    rows = []
    for c in families.own_clocks():
        u, b = names.get(c.unit), names.get(c.baseline)
        if u is None or b is None or u == b:
            continue
        ru, rb = results[u], results[b]
        if not (ru.get("fmax_mhz") and rb.get("fmax_mhz")):
            continue
        [(_, b_mpc)] = OwnClock.macs_per_cycle(c.baseline_work, rb["config"])
        b_density = b_mpc * rb["fmax_mhz"] / (rb["area_um2"] * 1e-6)   # M MAC/s per mm²
        measured = (OwnClock.macs_per_cycle(c.work, ru["config"])
                    + list((work or {}).get(c.unit, ())))
        for operands, mpc in measured:
            density = mpc * ru["fmax_mhz"] / (ru["area_um2"] * 1e-6)
            rows.append({
                "label": c.label, "unit": u, "baseline": b, "operands": operands,
                "macs_per_cycle": mpc, "fmax_mhz": ru["fmax_mhz"], "area_um2": ru["area_um2"],
                "density": density, "baseline_macs_per_cycle": b_mpc,
                "baseline_fmax_mhz": rb["fmax_mhz"], "baseline_area_um2": rb["area_um2"],
                "baseline_density": b_density, "own": density / b_density,
                "same": (mpc / ru["area_um2"]) / (b_mpc / rb["area_um2"]),
                "source": c.source})
    return rows


def energy_at(power: dict, clock_ns: float, macs_per_group: int) -> float:
    """Energy per MAC (pJ) of a ``trainfab power`` report re-timed to ``clock_ns``: the
    dynamic (internal + switching) energy of the run does not depend on the period (OpenSTA's
    power is energy per transition × transitions per second), the leakage energy is leakage
    power × the run's cycles × the period."""
    cycles = power["activity_source"]["cycles"]
    groups = power["activity_source"]["operands"]["groups"]
    dynamic_j = (power["internal_mw"] + power["switching_mw"]) * 1e-3 * cycles \
        * power["clock_ns"] * 1e-9
    leakage_j = power["leakage_mw"] * 1e-3 * cycles * clock_ns * 1e-9
    return (dynamic_j + leakage_j) / (groups * macs_per_group) * 1e12


def own_clock_section(rows: list[dict], power: dict | None = None) -> str:
    """Markdown of :func:`own_clock_rows`, and with ``power`` (name → ``trainfab power``
    report, both units of a pair) the energy per MAC of each at its own fmax and at the power
    run's clock."""
    if not rows:
        return ""
    fmt = lambda v: f"{v:,.0f}" if v >= 100 else f"{v:.3g}"
    lines = ["\n## At each design's own clock\n",
             "Work per area is MACs per cycle × fmax ÷ area; the bit-parallel baselines do their "
             "MACs every cycle, the term-serial and precision-serial designs take several cycles "
             "per group on the operands named. *Own clocks* compares each design at its own "
             "fmax, *one clock* at a common clock (the ratio every area comparison above "
             "assumes).\n",
             "| comparison | design | fmax MHz | operands | MACs per cycle | M MAC/s per mm² | "
             "baseline: fmax MHz, M MAC/s per mm² | against the baseline, own clocks | "
             "one clock |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['label']} | {r['unit']} ({r['area_um2']:,.0f} µm²) | "
                     f"{r['fmax_mhz']:.1f} | {r['operands']} | {r['macs_per_cycle']:.3g} | "
                     f"{fmt(r['density'])} | {r['baseline']}: {r['baseline_fmax_mhz']:.1f}, "
                     f"{fmt(r['baseline_density'])} | {r['own']:.3f}× | {r['same']:.3f}× |")
    text = "\n".join(lines) + "\n"
    pairs = {(r["unit"], r["baseline"]) for r in rows}
    power = power or {}
    energy = []
    for u, b in dict.fromkeys(sorted(pairs)):
        if u not in power or b not in power:
            continue
        cells = []
        for name in (u, b):
            p = power[name]
            cfg = p["config"]
            macs = _macs_per_group(p)
            fmax = (p.get("timing") or {}).get("fmax_mhz")
            one = energy_at(p, p["clock_ns"], macs)
            own = energy_at(p, 1000 / fmax, macs) if fmax else None
            cells.append((name, cfg, p["clock_ns"], fmax, one, own))
        (nu, cu, ck, fu, eu1, euo), (nb, cb, _, fb, eb1, ebo) = cells
        size = lambda c: "×".join(str(c[k]) for k in ("rows", "cols") if k in c) or \
            (f"{c['lanes']} lanes" if "lanes" in c else f"groups of {c.get('group')}")
        own = (f"{euo:.2f} pJ at {fu:.1f} MHz / {ebo:.2f} pJ at {fb:.1f} MHz = "
               f"**{euo / ebo:.2f}×**" if euo and ebo else "n/a (no fmax)")
        energy.append(f"| {nu} {size(cu)}{_power_facts(power[u])} / {nb} {size(cb)} | {own} | "
                      f"{eu1:.2f} / {eb1:.2f} pJ = {eu1 / eb1:.2f}× at {ck:g} ns |")
    if energy:
        text += ("\nEnergy per MAC from `trainfab power` (gate-level activity on the power "
                 "run's operands), at each netlist's own fmax and at the run's clock. The "
                 "dynamic energy of a run does not depend on the period; only the leakage, "
                 "over the longer cycle, does.\n\n| power run | energy per MAC, own clocks | "
                 "one clock |\n|---|---|---|\n" + "\n".join(energy) + "\n")
    return text


def _blocks(name: str, r: dict) -> str:
    from ..eda.synth import breakdown_markdown

    return "\n" + breakdown_markdown(r).replace("## Area by block", f"## {name}: area by block", 1)


def _measure(unit, cfg, outdir, liberty: str, clock_ns: float) -> dict:
    """Area reports of a unit and of its parts, keyed by report name."""
    from ..eda.synth import area

    try:
        results = {unit.name: area(unit, cfg, liberty=liberty, clock_ns=clock_ns,
                                   outdir=outdir / unit.name,
                                   breakdown=bool(unit.synth.breakdown_table))}
        for part in families.parts():
            if part.unit == unit.name:
                factory = part.component_factory()
                results[part.name] = area(unit, unit.make_config(cfg, **part.overrides),
                                          liberty=liberty, clock_ns=clock_ns,
                                          outdir=outdir / part.name.replace("/", "-"),
                                          factory=factory, breakdown=part.breakdown)
    except FlowError as e:
        raise FlowError(f"{unit.name}: {e}") from None
    return results


def _tables(results: dict, first_column: dict | None = None, work: dict | None = None,
            power: dict | None = None) -> str:
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
        "\n" + resolve(registry.get(name).synth.breakdown_table)(r, results, header=k == 0)
        + "\n" for k, (name, r) in enumerate(
            (n, r) for n, r in results.items()
            if n in registry.UNITS and registry.get(n).synth.breakdown_table and r.get("breakdown")))
    return (header + "\n" + "\n".join(rows) + "\n" + _ratio_section(areas)
            + own_clock_section(own_clock_rows(results, work=work), power)
            + _scaling_section(results) + blocks + tables
            + "\nOSU 0.18 µm cells (yosys + OpenSTA); compare ratios, not absolute µm², with the "
              "papers' 65/45/28 nm figures.\n")


def check_markdown_path(path):
    """Check, before a long run, that the results page ``path`` can be written (its folder
    exists and is writable, ``path`` is not a folder); returns it as a :class:`~pathlib.Path`."""
    from ..runs import check_target_file

    return check_target_file(path)


def results_page(markdown: str, command: str, build: str) -> str:
    """A run's summary ``markdown`` as the generated results page (``docs/results.md``):
    stamped with the command, the commit, the date, the machine and every tool's version;
    headings one level down under the page's title; plots left out and links into the run's
    build folder ``build`` written as plain paths (the page lives outside it)."""
    import re
    import time

    from ..eda.tools import versions
    from ..host import commit, machine

    v = versions()
    tools = ", ".join(f"{k} {v[k]}" for k in ("yosys", "opensta", "iverilog", "amaranth",
                                              "cocotb", "numpy"))
    body = []
    for line in markdown.splitlines():
        if line.startswith("!["):
            continue
        if line.startswith("#"):
            line = "#" + line
        body.append(re.sub(r"\[([^\]]*)\]\((?![a-z][a-z0-9+.-]*:|/|#)([^)]+)\)",
                           rf"\1 (`{build}/\2`)", line))
    body = _without_empty_sections(body)
    return "\n".join([
        "# Results",
        "",
        f"<!-- generated by `{command}`; do not edit -->",
        "",
        f"Generated by `{command}` at commit {commit()} on {time.strftime('%Y-%m-%d')}, on "
        f"{machine()}. Tools: {tools}. Areas are OSU 0.18 µm cells (yosys + ABC, OpenSTA "
        "timing); compare ratios, not absolute µm², with the papers' 65/45/28 nm figures. "
        "yosys/ABC results move 2–5 % from run to run. Each paper's claims beside these, with "
        "the reason for every difference: [papers.md](papers.md).",
        "",
        *body,
    ]).rstrip() + "\n"


def _without_empty_sections(lines: list[str]) -> list[str]:
    """``lines`` of markdown without the headings whose section holds nothing (a plots
    heading once its images are left out): a heading followed, blank lines apart, by a heading
    of the same or a higher level, or by the end."""
    def level(line: str) -> int:
        return len(line) - len(line.lstrip("#")) if line.startswith("#") else 0

    kept = []
    for k, line in enumerate(lines):
        if level(line):
            following = next((x for x in lines[k + 1:] if x.strip()), None)
            if following is None or 0 < level(following) <= level(line):
                continue
        kept.append(line)
    return kept


def report(liberty: str = DEFAULT_LIBERTY, clock_ns: float = DEFAULT_CLOCK_NS, markdown=None,
           units=None) -> int:
    """Area/timing for every unit (or ``units``) at its paper preset; writes
    build/report/report.{md,json}, and with ``markdown`` also the stamped results page
    (:func:`results_page`) there."""
    from ..runs import exclusive, staged, write_atomic

    if markdown is not None:
        markdown = check_markdown_path(markdown)

    units = list(units or registry.UNITS.values())
    results = {}
    # one report run at a time per folder, written privately and moved into place whole:
    # report.md and the unit folders come from one run
    with exclusive(build_dir() / "report", "report") as final, \
            staged(final, names=("report.json", "report.md"), last=("report.md",)) as out, \
            progress.bar(len(units), "report", "units") as bar:
        for k, unit in enumerate(units, 1):
            progress.echo(f"[{k}/{len(units)}] {unit.name}: synthesizing …")
            results.update(_measure(unit, load_config(unit), out, liberty, clock_ns))
            bar.update()
        text = "# trainfab report: every unit at its paper configuration\n\n" + _tables(results)
        (out / "report.json").write_text(json.dumps(results, indent=2) + "\n")
        (out / "report.md").write_text(text)
    if markdown is not None:
        write_atomic(markdown, results_page(text.replace(str(out), str(final)),
                                            "trainfab report", shown(final)))
    print(text.replace(str(out), str(final)))
    print(f"written: {final / 'report.md'}, {final / 'report.json'}"
          + (f", {markdown}" if markdown is not None else ""))
    return 0


def _build_unit(unit, cfg, out, tag: str, seed: int, sim: str | None, measure) -> tuple:
    """Generate ``unit`` at ``cfg`` into ``out/verilog``, run its quick regression, then
    ``measure()`` (area reports by name).  Returns the manifest, the regression's result and
    the reports; prints one line per step."""
    from ..eda.generate import generate
    from ..eda.simulate import failure_details, run_testbench

    from ..runs import public

    man = generate(unit, cfg, out / "verilog")
    progress.echo(f"{tag}: Verilog {public(man['verilog'])}")
    tb = run_testbench(unit, cfg, seed=seed, sim=sim, effort="quick")
    progress.echo(f"{tag}: {tb.summary()}")
    if not tb.passed:
        progress.echo(failure_details(tb))
    measured = measure()
    for name, r in measured.items():
        fmax = f"{r['fmax_mhz']:.0f} MHz" if r.get("fmax_mhz") else "n/a"
        progress.echo(f"{tag}: {name} {r['area_um2']:.0f} µm², fmax {fmax}")
    return man, tb, measured


def _state(tb) -> str:
    return f"{'pass' if tb.passed else 'FAIL'} {tb.tests - tb.failed}/{tb.tests}"


def _about(seconds: float) -> str:
    """An estimate's duration: ``2 h``, ``2 h 35 min``, ``40 min`` (5-minute steps from half an
    hour), ``12 min``, ``under a minute``."""
    minutes = seconds / 60
    if minutes < 1:
        return "under a minute"
    minutes = 5 * round(minutes / 5) if minutes >= 30 else round(minutes)
    hours, rest = divmod(minutes, 60)
    return (f"{hours} h" + (f" {rest} min" if rest else "")) if hours else f"{rest} min"


def _duration(seconds: float) -> str:
    """``1 h 58 min``, ``12 min``, ``40 s``."""
    seconds = max(0, round(seconds))
    if seconds < 90:
        return f"{seconds} s"
    minutes = round(seconds / 60)
    return f"{minutes // 60} h {minutes % 60} min" if minutes >= 60 else f"{minutes} min"


def _macs_per_group(power: dict) -> int:
    """MACs in one operand group of a power run: the tile's rows × cols × lanes, a PE's or the
    MACs' lanes, or the fMAC's BFP ``group`` (a group pair)."""
    cfg = power["config"]
    return cfg.get("rows", 1) * cfg.get("cols", 1) * (cfg.get("lanes") or cfg.get("group", 1))


def _power_facts(power: dict) -> str:
    """The power run's operand facts worth naming beside its energy (mantissa widths)."""
    facts = power["activity_source"].get("testbench_facts", {})
    bits = facts.get("mantissa_bits")
    return f", {bits}-bit mantissas" if bits else ""

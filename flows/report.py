"""Summary runs: ``trainfab demo`` (``make demo``: one unit of each family at a small
configuration, generated, quick-regressed and measured in a few minutes, with a table, the
papers' ratios and a plot), ``make paper`` (:func:`paper`: every unit at its paper
configuration with its parts, ratios and scalings, the tiles' power and speedup studies, a
sweep and the 8 × 8 tiles; about 1 h 20 min on 2 cores) and ``trainfab report`` (area/timing at
every paper preset, with ratios beside the papers' numbers).

Units, the parts the papers report separately, the papers' own figures and the ratios they
state are declared by the family modules (:mod:`flows.families`).

Our numbers come from yosys + OSU 0.18 µm cells; the papers report 65/45/28 nm layouts, so
only *ratios* between units built with the same flow are comparable, never absolute µm².
"""

import json

from . import FlowError, build_dir, families, progress, registry, shown
from .config import load_config
from .declare import OwnClock, config_label, resolve


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
    from .eda.synth import breakdown_markdown

    return "\n" + breakdown_markdown(r).replace("## Area by block", f"## {name}: area by block", 1)


def _measure(unit, cfg, outdir, liberty: str, clock_ns: float) -> dict:
    """Area reports of a unit and of its parts, keyed by report name."""
    from .eda.synth import area

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
    from .runs import check_target_file

    return check_target_file(path)


def results_page(markdown: str, command: str, build: str) -> str:
    """A run's summary ``markdown`` as the generated results page (``docs/results.md``):
    stamped with the command, the commit, the date, the machine and every tool's version;
    headings one level down under the page's title; plots left out and links into the run's
    build folder ``build`` written as plain paths (the page lives outside it)."""
    import re
    import time

    from .eda.tools import versions
    from .host import commit, machine

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


def report(liberty: str = "osu018", clock_ns: float = 10.0, markdown=None, units=None) -> int:
    """Area/timing for every unit (or ``units``) at its paper preset; writes
    build/report/report.{md,json}, and with ``markdown`` also the stamped results page
    (:func:`results_page`) there."""
    from .runs import exclusive, staged, write_atomic

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


#: tile size of the paper run's power runs (gate-level simulation of the mapped netlist)
POWER_TILE = {"rows": 2, "cols": 2}


def _model_work(results: dict, work: dict) -> dict:
    """``work`` (the speedup study's MACs per cycle of the FPRaker tile) when the measured
    ``fpraker.tile`` is the cycle model's configuration, else nothing."""
    import dataclasses

    from golden.fpraker.tile import TileConfig

    r = results.get("fpraker.tile")
    model = dataclasses.asdict(TileConfig())
    if r is None or any(model.get(k) != v for k, v in r["config"].items() if k in model):
        return {}
    return work


def named_config(name: str):
    """The unit and configuration that a unit or part name stands for: the unit's paper
    configuration, with a part's field overrides.  A part with a component of its own (a
    sub-block) is not a configuration of its unit: :class:`FlowError`."""
    for part in families.parts():
        if part.name == name:
            if part.component:
                raise FlowError(f"{name} is a sub-block of {part.unit}, not a configuration "
                                "of it")
            unit = registry.get(part.unit)
            return unit, unit.make_config(load_config(unit), **part.overrides)
    unit = registry.get(name)
    return unit, load_config(unit)


def _own_clock_power(out) -> tuple[str, dict]:
    """The paper run's power runs of the :class:`OwnClock` pairs declared with ``power``:
    each design and baseline at its paper configuration on the power run's synthetic
    operands, into ``out/power/<name>``.  Returns the markdown section and the power reports
    by unit or part name (for :func:`own_clock_section`'s energy table)."""
    from .eda import power

    names = list(dict.fromkeys(n for c in families.own_clocks() if c.power
                               for n in (c.unit, c.baseline)))
    if not names:
        return "", {}
    text = ["\n## Energy per MAC of the designs and their baselines (synthetic operands)\n"]
    runs = {}
    for name in names:
        unit, cfg = named_config(name)
        progress.echo(f"paper: power of {name} on synthetic operands …")
        folder = out / "power" / name.replace("/", "-")
        r = power.power(unit, cfg, outdir=folder)
        runs[name] = r
        text.append(f"- `{name}`: {r['total_mw']:.2f} mW at {r['clock_ns']:g} ns, "
                    f"{r['energy_per_group_pj']:.1f} pJ per group of {_macs_per_group(r)} MACs"
                    f"{_power_facts(r)} ({shown(folder / 'power.md')})")
    return "\n".join(text) + "\n", runs


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


def _fpraker_studies(out, results: dict) -> tuple[str, dict, dict]:
    """The paper run's FPRaker tile studies: the power of both tiles on real MiniLM operands
    (:data:`POWER_TILE` tiles; gate-level activity) and the speedup study on MiniLM with the
    run's own measured tile-area ratio.  Returns their markdown sections, the power reports by
    unit and the FPRaker tile's MACs per cycle on the study's GEMMs (``{"fpraker.tile":
    [(operands, MACs per cycle)]}``, for the cycle model's tile configuration)."""
    from .eda import power
    from .studies import speedup

    text = ["\n## FPRaker tile power (real MiniLM operands)\n"]
    mw = {}
    for name in ("fpraker.tile", "baseline.bf16_tile"):
        unit = registry.get(name)
        cfg = unit.make_config(load_config(unit), **POWER_TILE)
        progress.echo(f"paper: power of {name} {POWER_TILE['rows']}x{POWER_TILE['cols']} on "
                      "MiniLM operands …")
        r = power.power(unit, cfg, outdir=out / "power" / name, operands="minilm")
        mw[name] = r
        text.append(f"- `{name}` {POWER_TILE['rows']}×{POWER_TILE['cols']}: "
                    f"{r['total_mw']:.2f} mW at {r['clock_ns']:g} ns, "
                    f"{r['energy_per_group_pj']:.1f} pJ per group "
                    f"({shown(out / 'power' / name / 'power.md')})")
    f, b = mw["fpraker.tile"], mw["baseline.bf16_tile"]
    text.append(f"- power ratio FPRaker / baseline: **{f['total_mw'] / b['total_mw']:.2f}** "
                f"(paper, Table III PE power: 0.23); energy per group: "
                f"{f['energy_per_group_pj'] / b['energy_per_group_pj']:.2f}")
    # the measured tiles' area ratio applies to the cycle model only at the model's tile size
    # (the run measures its tiles at their demo size); otherwise speedup reports "ours" as not
    # measured and says why
    from golden.fpraker.tile import TileConfig

    model = TileConfig()
    ratio = None
    if "fpraker.tile" in results and "baseline.bf16_tile" in results:
        shapes = {tuple(results[u]["config"].get(k) for k in ("rows", "cols", "lanes"))
                  for u in ("fpraker.tile", "baseline.bf16_tile")}
        if shapes == {(model.rows, model.cols, model.lanes)}:
            ratio = (results["baseline.bf16_tile"]["area_um2"]
                     / results["fpraker.tile"]["area_um2"])
    opts = speedup.SpeedupOptions(model="minilm", output=str(out / "speedup"),
                                  area_ratio=None if ratio is None else round(ratio, 6))
    progress.echo("paper: speedup study on MiniLM …")
    res = speedup.run(opts)
    paths = speedup.write(res, (out / "speedup").resolve())
    text.append("\n## FPRaker speedup study (MiniLM, iso-area)\n")
    for o, s_ in res["summary"].items():
        ours = f"{s_['speedup_ours']:.2f}×" if s_.get("speedup_ours") is not None else "n/a"
        text.append(f"- serial = {speedup._label(o, res)}: {s_['gemms']} GEMMs, {s_['macs']:,} MACs: iso-area "
                    f"speedup {s_['speedup_paper']:.2f}× with the paper's 36:8 tiles, "
                    f"{ours} with our area ratio; Eq. 4 ideal {s_['ideal_eq4']:.2f}×; "
                    f"useful lane-cycles {s_['useful_fraction']:.1%}, "
                    + ", ".join(f"{k} {v:.1%}" for k, v in s_["stall_fractions"].items()))
    text.append(f"- paper: 1.5× average; report {shown(paths['md'])}")
    work = [(f"MiniLM GEMMs, serial = {speedup._label(o, res)}",
             s_["macs"] / s_["fpraker_cycles"]) for o, s_ in res["summary"].items()
            if s_["fpraker_cycles"]]
    return "\n".join(text) + "\n", mw, {"fpraker.tile": work}


# --------------------------------------------------------------------------------------------
# the steps a summary run takes per unit


def _build_unit(unit, cfg, out, tag: str, seed: int, sim: str | None, measure) -> tuple:
    """Generate ``unit`` at ``cfg`` into ``out/verilog``, run its quick regression, then
    ``measure()`` (area reports by name).  Returns the manifest, the regression's result and
    the reports; prints one line per step."""
    from .eda.generate import generate
    from .eda.simulate import failure_details, run_testbench

    from .runs import public

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


# --------------------------------------------------------------------------------------------
# make demo: one small unit per family, in minutes


def demo_units() -> list:
    """The units ``make demo`` builds, in family order: those with a
    :attr:`flows.declare.Showcase.demo`."""
    return [u for u in registry.UNITS.values() if u.showcase.demo is not None]


def _same_as_unit(unit, cfg) -> list[str]:
    """The names of ``unit``'s parts that are the unit itself at ``cfg``: parts built from the
    unit's own component whose field overrides ``cfg`` already has (``fast.fmac/m4`` for the
    fMAC at ``m_max=4``), so that the papers' ratios naming them apply to the unit's report."""
    from golden import config_dict

    fields = config_dict(cfg)
    return [p.name for p in families.parts() if p.unit == unit.name and not p.component
            and all(fields.get(k) == v for k, v in p.overrides.items())]


def demo_ratios(results: dict, aliases: dict | None = None) -> list[dict]:
    """The papers' area ratios (:class:`Comparison`) between two units of ``results`` (name →
    area report): ``unit``/``other`` names, ``ours``, ``paper`` and ``source``, and
    ``baseline`` true when ``other`` is a baseline unit (a ratio against a baseline is always
    the unit over its baseline).  ``aliases`` maps part names to the unit whose report stands
    for them.  Shares and ratios against a multiple of a block are left out (the small
    configurations do not make those structures)."""
    def family(name: str) -> str:
        return registry.get(name).family

    names = {n: n for n in results} | dict(aliases or {})
    rows, seen = [], set()
    for c in families.comparisons():
        num, den = names.get(c.numerator), names.get(c.denominator)
        if c.share or c.denominator_count != 1 or num is None or den is None or num == den:
            continue
        ours, paper = results[num]["area_um2"] / results[den]["area_um2"], c.paper_ratio
        if family(num) == "baseline" and family(den) != "baseline":
            num, den, ours, paper = den, num, 1 / ours, 1 / paper
        if (num, den) in seen:
            continue
        seen.add((num, den))
        rows.append({"unit": num, "other": den, "baseline": family(den) == "baseline",
                     "ours": ours, "paper": paper, "source": c.source})
    return rows


DEMO_HEADER = ("| unit | configuration | quick regression | area µm² | gate equivalents | "
               "flip-flops | fmax MHz | area against its baseline (paper) |\n"
               "|---|---|---|---|---|---|---|---|")


def demo_markdown(summary: dict, ratios: list[dict], plot: str | None,
                  own: list[dict] | None = None) -> str:
    """The demo's ``summary.md``: the table of the units, the papers' ratios, the designs
    beside their baselines at each one's own clock (``own``: :func:`own_clock_rows`) and the
    plot."""
    against = {r["unit"]: r for r in ratios if r["baseline"]}
    rows = []
    for name, s in summary.items():
        r = against.get(name)
        vs = (f"{r['ours']:.2f} × {r['other']} (paper: {r['paper']:.2f} ×)" if r else "")
        ge = f"{s['area_ge']:,.0f}" if s.get("area_ge") else "n/a"
        fmax = f"{s['fmax_mhz']:.0f}" if s.get("fmax_mhz") else "n/a"
        rows.append(f"| {name} | {s['configuration'] or 'paper'} | {s['regression_state']} | "
                    f"{s['area_um2']:,.0f} | {ge} | {s['flip_flops']} | {fmax} | {vs} |")
    text = ("# trainfab demo: one unit of each family at a small configuration\n\n"
            "Each unit was generated, regressed against its golden model (quick effort) and "
            "synthesized (yosys + OpenSTA, OSU 0.18 µm, 10 ns clock constraint).\n\n"
            + DEMO_HEADER + "\n" + "\n".join(rows) + "\n")
    if ratios:
        text += ("\n## Area ratios beside the papers'\n\n| ratio | ours | paper | source |\n"
                 "|---|---|---|---|\n"
                 + "\n".join(f"| {r['unit']} ({summary[r['unit']]['configuration']}) / "
                             f"{r['other']} ({summary[r['other']]['configuration']}) | "
                             f"{r['ours']:.3f} | {r['paper']:.3f} | {r['source']} |"
                             for r in ratios)
                 + "\n\nThe papers' ratios are at their own configurations (8-lane PEs, 16 "
                   "MACs, 65/45 nm layouts); ours are at the small configurations above, where "
                   "the blocks every design has once (accumulators, control) weigh more, so "
                   "they are this size's ratios, not the papers'. `make paper` measures the "
                   "paper configurations.\n")
    text += own_clock_section(own or [])
    if plot:
        text += f"\n![area and fmax of each unit; the ratios beside the papers']({plot})\n"
    return text + "\n" + NEXT_STEPS


#: the demo's closing paragraph
NEXT_STEPS = """## Where to go next

- `make paper`: every unit at its paper configuration with the parts, area ratios and scalings
  the papers report, the two 8 × 8 tiles of FPRaker's Table III, tile power and the speedup
  study on MiniLM operands, and a 24-point term-encoder sweep, into `build/paper/` (about 1 h
  20 min on 2 cores; it prints its estimate first).
- `trainfab list` names every unit; `trainfab area UNIT [--set FIELD=VALUE] [--breakdown]`
  measures one at its paper configuration (or yours), with its area by block.
- `trainfab regress UNIT --effort full` runs a unit's long random regression;
  `trainfab sweep UNIT --grid FIELD=V1,V2` explores a design space.
- `trainfab train --model cnn` trains a network with every number format on the golden models
  (`make training` runs the whole training study).
- `README.md` and `docs/` (`cli.md`: every command; `units.md`: every unit; `papers.md`: the
  papers' headlines beside ours) explain what the numbers mean.
"""


def demo_plot(summary: dict, ratios: list[dict], path) -> None:
    """``path`` (PNG): area against fmax of every unit and, beside it, the papers' ratios next
    to ours."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    panels = 2 if ratios else 1
    fig, axes = plt.subplots(1, panels, figsize=(6.4 * panels, 4.6), layout="constrained",
                             squeeze=False)
    ax = axes[0][0]
    shown = [(name, s) for name, s in summary.items() if s.get("fmax_mhz")]
    for k, (name, s) in enumerate(shown):
        ax.scatter(s["fmax_mhz"], s["area_um2"], s=40, marker="os^Dv<>p"[k % 8],
                   label=f"{name} ({s['configuration'] or 'paper'})")
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.yaxis.set_minor_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.tick_params(axis="y", which="minor", labelsize=7)
    ax.set(xlabel="fmax (MHz)", ylabel="area (µm², OSU 0.18 µm)",
           title="area and fmax per unit")
    ax.grid(True, which="both", alpha=0.3)
    if shown:
        ax.legend(fontsize=7)
    if ratios:
        ax = axes[0][1]
        ys = range(len(ratios))
        for shift, key, label in ((-0.2, "ours", "ours (the configurations measured)"),
                                  (0.2, "paper", "paper (its configuration)")):
            bars = ax.barh([y + shift for y in ys], [r[key] for r in ratios], height=0.4,
                           label=label)
            ax.bar_label(bars, fmt="%.2f", fontsize=7, padding=2)
        ax.set_yticks(list(ys), [f"{r['unit']} /\n{r['other']}" for r in ratios], fontsize=7)
        ax.axvline(1.0, color="grey", lw=0.8)
        ax.invert_yaxis()
        ax.set(xlabel="area ratio", title="area ratios (same flow) beside the papers'")
        ax.legend(fontsize=7)
        ax.grid(True, axis="x", alpha=0.3)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def demo(seed: int = 1, sim: str | None = None) -> int:
    """``make demo``: generate, quick-regress and measure one small unit of each family
    (:func:`demo_units`), then write ``summary.md``, ``summary.json`` and ``demo.png`` into
    ``build/demo/`` and print the table and where to go next (``sim=None``: each unit's own
    simulator).  One demo run at a time per build folder: a second waits for the first."""
    from .runs import exclusive, staged

    # written privately and moved into place whole when the demo ends
    with exclusive(build_dir() / "demo", "demo") as final:
        with staged(final, names=("summary.json", "summary.md", "demo.png"),
                    last=("summary.md", "summary.json")) as out:
            code, text = _demo(out, seed, sim)
            text = text.replace(str(out), str(final))
        print()
        print(text)
        print(f"written: {final / 'summary.md'}, {final / 'summary.json'}, "
              f"{final / 'demo.png'}, Verilog in {final / 'verilog'}")
        return code


def _demo(out, seed: int, sim: str | None) -> tuple[int, str]:
    """The demo's units into the private folder ``out``: the exit status and the summary."""
    import time

    from .eda.synth import area

    start = time.monotonic()
    units = demo_units()
    summary, results, aliases, failed = {}, {}, {}, 0
    bar = progress.bar(len(units), "demo", "units")
    for k, unit in enumerate(units, 1):
        tag = f"[{k}/{len(units)}] {unit.name}"
        cfg = unit.make_config(**unit.showcase.demo)
        label = config_label(unit.showcase.demo)
        progress.echo(f"{tag}: at {label or 'its paper configuration'}")
        try:
            man, tb, measured = _build_unit(
                unit, cfg, out, tag, seed, sim,
                lambda: {unit.name: area(unit, cfg, outdir=out / "area" / unit.name)})
        except BaseException:
            bar.close()
            raise
        bar.update()
        failed += not tb.passed
        r = measured[unit.name]
        results[unit.name] = r
        aliases.update(dict.fromkeys(_same_as_unit(unit, cfg), unit.name))
        summary[unit.name] = {
            "family": unit.family, "configuration": label, "config": r.get("config"),
            "verilog": man["verilog"], "sha256": man["verilog_sha256"],
            "regression": tb.summary(), "regression_state": _state(tb), "passed": tb.passed,
            **{key: r.get(key) for key in ("area_um2", "area_ge", "cells", "flip_flops",
                                           "transistors_estimate", "fmax_mhz",
                                           "critical_path_ns", "seconds")},
            "area_report": f"{r.get('outdir', out / 'area' / unit.name)}/area.md"}
    bar.close()
    ratios = demo_ratios(results, aliases)
    plot = out / "demo.png"
    demo_plot(summary, ratios, plot)
    own = own_clock_rows(results, aliases)
    text = demo_markdown(summary, ratios, plot.name, own)
    (out / "summary.json").write_text(json.dumps({"units": summary, "ratios": ratios,
                                                  "own_clock": own, "plot": str(plot)},
                                                 indent=2, default=str) + "\n")
    (out / "summary.md").write_text(text)
    progress.echo(f"demo: {_duration(time.monotonic() - start)}")
    return (1 if failed else 0), text


# --------------------------------------------------------------------------------------------
# make paper: every table at the papers' configurations


#: the paper run's design-space sweep (``trainfab sweep`` arguments): the term encoder over
#: lanes, encoding and clock constraint, 24 points
PAPER_SWEEP = ("fpraker.encoder", "--grid", "lanes=1,2,4,8", "--grid", "encoding=csd,binary",
               "--grid", "clock_ns=0.5,1,2")
#: the paper run's record of its steps' times (seconds by step), read by the next run's estimate
PAPER_TIMES = "times.json"
#: minutes of each step when no run has recorded it, from a 2-core machine (the run of
#: 2026-11-25): the units with their parts and the 4 × 4 tiles 25; the studies (tile power and
#: the speedup study on MiniLM, 5, and the power runs of FAST's fMAC and its three MAC
#: baselines, about 5 more); the term-encoder sweep under 1; the 8 × 8 tiles with their
#: breakdowns 19 (FPRaker) and 46 (baseline), synthesized at once: about 1 h 20 min in all
#: (1 h 40 min with the tiles one after the other)
PAPER_DEFAULT_MINUTES = {"units": 25, "studies": 10, "sweep": 1,
                         "paper-size:fpraker.tile": 19, "paper-size:baseline.bf16_tile": 46}
#: a unit measured at its paper size not listed above
PAPER_DEFAULT_SIZE_MINUTES = 30

STUDIES_STEP = "studies"
SWEEP_STEP = "sweep"


def paper_steps() -> list[str]:
    """The steps of ``make paper`` in order: ``unit:NAME`` per unit (generate, quick regression,
    area of the unit and its parts; the tiles at their reduced size), ``studies`` (tile power
    and the speedup study), ``sweep``, then ``paper-size:NAME`` per unit measured smaller in its
    ``unit:`` step (:attr:`flows.declare.Showcase.paper_run_small`; synthesis with breakdown)."""
    units = list(registry.UNITS.values())
    return ([f"unit:{u.name}" for u in units] + [STUDIES_STEP, SWEEP_STEP]
            + [f"paper-size:{u.name}" for u in units if u.showcase.paper_run_small])


def _recorded_times(path) -> dict:
    """Seconds by step from a paper run's ``times.json`` (empty if missing or unreadable)."""
    from pathlib import Path

    try:
        steps = json.loads(Path(path).read_text()).get("steps", {})
        return {k: float(v) for k, v in steps.items() if isinstance(v, (int, float))}
    except (OSError, ValueError, AttributeError, TypeError):
        return {}


def _area_run_seconds(name: str) -> float | None:
    """Seconds of the last ``trainfab area NAME --breakdown`` at the paper configuration
    (``build/area/NAME/area.json``), if there is one."""
    try:
        unit = registry.get(name)
        r = json.loads((build_dir() / "area" / name / "area.json").read_text())
        if "breakdown" not in r or r.get("config") != unit.hardware_config(load_config(unit)):
            return None
        return float(sum(r["seconds"].values()))
    except (OSError, ValueError, AttributeError, TypeError, KeyError, FlowError):
        return None


def _default_seconds(step: str, units: int) -> float:
    if step.startswith("unit:"):
        return 60 * PAPER_DEFAULT_MINUTES["units"] / max(units, 1)
    if step.startswith("paper-size:"):
        return 60 * PAPER_DEFAULT_MINUTES.get(step, PAPER_DEFAULT_SIZE_MINUTES)
    return 60 * PAPER_DEFAULT_MINUTES.get(step, 1)


def paper_estimate(times_path, workers: int = 1) -> tuple[float, str]:
    """``make paper``'s expected time and the line saying so: each step's time from the last
    paper run's ``times_path`` when recorded there; for a paper-size synthesis not recorded,
    the last ``trainfab area UNIT --breakdown`` at the paper configuration; else the defaults
    of :data:`PAPER_DEFAULT_MINUTES` (about 1 h 40 min on 2 cores one after the other).  The
    paper-size syntheses run ``workers`` at a time: they count as the longest of them or their
    sum over ``workers``, whichever is more."""
    steps = paper_steps()
    units = sum(s.startswith("unit:") for s in steps)
    recorded = _recorded_times(times_path)
    total, timed, sources, sized = 0.0, 0, [], []
    for step in steps:
        seconds = recorded.get(step)
        if seconds is not None:
            sources.append(str(times_path))
        elif step.startswith("paper-size:"):
            name = step.split(":", 1)[1]
            seconds = _area_run_seconds(name)
            if seconds is not None:
                sources.append(str(build_dir() / "area" / name / "area.json"))
        if seconds is None:
            seconds = _default_seconds(step, units)
        else:
            timed += 1
        if step.startswith("paper-size:"):
            sized.append(seconds)
        else:
            total += seconds
    if sized:
        total += max(max(sized), sum(sized) / max(workers, 1))
    where = " and ".join(dict.fromkeys(sources))
    if not timed:
        how = ("from no recorded run: the times measured on a 2-core machine, where the two "
               "8 × 8 tile syntheses take about 65 min one after the other"
               + (f", {workers} at a time here" if workers > 1 else ""))
    elif timed == len(steps) and where == str(times_path):
        how = f"from the last run's times in {where}"
    else:
        how = (f"with {timed} of {len(steps)} steps as earlier runs took them ({where}) and the "
               "others at a 2-core machine's times")
    return total, (f"make paper: estimated time about {_about(total)}, {how}. "
                   f"The summary grows in {build_dir() / 'paper'}/summary.md as the steps "
                   "finish; Ctrl-C stops the run and leaves the sections already written.")


def _record_time(path, step: str, seconds: float) -> None:
    """Add ``step``'s time to the paper run's record (the other steps' times are kept)."""
    steps = _recorded_times(path)
    steps[step] = round(seconds, 1)
    _record_times(path, steps)


def _record_times(path, steps: dict) -> None:
    import os
    import time

    from .runs import write_atomic

    write_atomic(path, json.dumps({"steps": steps, "cpus": os.cpu_count(),
                                   "updated": time.strftime("%Y-%m-%d %H:%M:%S")}, indent=2)
                 + "\n")


def paper(seed: int = 1, sim: str | None = None, jobs: int | None = None,
          markdown=None) -> int:
    """``make paper``: every unit at its paper configuration (generate, quick regression, area
    and timing of the unit and the parts the papers report; the tiles at 4 × 4), the papers'
    ratios and scalings, the tiles' power and the speedup study on MiniLM operands, the
    term-encoder sweep (``jobs`` local processes, default one per CPU), then the units measured
    smaller at their paper configuration with their breakdowns (the 8 × 8 tiles of FPRaker's
    Table III).  Prints its estimated time first (:func:`paper_estimate`); records each step's
    time for the next estimate; rewrites ``build/paper/summary.md`` as steps finish.  Exit
    status 1 when a regression or a sweep point failed.  One paper run at a time per build
    folder: a second waits for the first.  With ``markdown`` (``make paper``:
    ``docs/results.md``) the finished summary is also written there as the stamped results
    page (:func:`results_page`); a run that failed or was interrupted leaves the page as it
    was."""
    from .runs import exclusive, staged, write_atomic

    if markdown is not None:
        markdown = check_markdown_path(markdown)
    sized = sum(1 for u in registry.UNITS.values() if u.showcase.paper_run_small)
    print(paper_estimate(build_dir() / "paper" / PAPER_TIMES,
                         paper_workers(jobs, sized))[1], flush=True)
    with exclusive(build_dir() / "paper", "paper") as final:
        # written privately and moved into place whole when the run ends (an interrupted run
        # leaves the earlier run's folder whole); the step times carry over
        with staged(final, names=("summary.json", "summary.md", PAPER_TIMES),
                    last=("summary.md", "summary.json")) as out:
            old_times = _recorded_times(final / PAPER_TIMES)
            if old_times:
                _record_times(out / PAPER_TIMES, old_times)
            code = _paper(out, seed, sim, jobs)
            summary_md = (out / "summary.md").read_text().replace(str(out), str(final))
        if markdown is not None and code == 0:
            write_atomic(markdown, results_page(summary_md, "make paper", shown(final)))
            print(f"written: {markdown}")
        elif markdown is not None:
            print(f"not written: {markdown} (a regression or a sweep point failed)")
        return code


def _paper_sweep(out, jobs: int | None) -> int:
    """The paper run's term-encoder sweep into ``out`` (``trainfab sweep``, from scratch)."""
    import argparse

    from . import sweep

    parser = argparse.ArgumentParser(prog="trainfab sweep")
    sweep.add_arguments(parser)
    argv = [*PAPER_SWEEP, "--fresh", "-o", str(out)] + (["-j", str(jobs)] if jobs else [])
    return sweep.cmd_sweep(parser.parse_args(argv))


def _demoted(markdown: str, folder: str) -> str:
    """``markdown`` of a file in ``folder`` (relative to the summary) to sit inside the summary:
    every heading one level deeper, relative links into ``folder``."""
    import re

    text = "\n".join("#" + line if line.startswith("#") else line
                     for line in markdown.splitlines()) + "\n"
    return re.sub(r"\]\((?![a-z][a-z0-9+.-]*:|/|#)([^)]+)\)", rf"]({folder}/\1)", text)


def _paper(out, seed: int, sim: str | None, jobs: int | None) -> int:
    units = list(registry.UNITS.values())
    steps = len(units) + 2 + sum(1 for u in units if u.showcase.paper_run_small)
    with progress.bar(steps, "paper", "steps") as bar:
        return _paper_steps(out, seed, sim, jobs, bar)


def paper_workers(jobs: int | None, sized: int) -> int:
    """How many paper-size syntheses ``make paper`` runs at a time: ``jobs`` (default one per
    CPU), at most one per unit measured at its paper size."""
    import os

    return max(1, min(sized, jobs or os.cpu_count() or 1))


def _paper_steps(out, seed: int, sim: str | None, jobs: int | None, bar) -> int:
    """:func:`_paper`'s steps (units, studies, sweep, paper-size units, :func:`paper_workers`
    of those at a time), each moving ``bar`` on when it finished."""
    import concurrent.futures
    import contextlib
    import time

    from .runs import write_atomic

    start = time.monotonic()
    times = out / PAPER_TIMES

    @contextlib.contextmanager
    def timed(step: str):
        t0 = time.monotonic()
        yield
        _record_time(times, step, time.monotonic() - t0)  # finished steps only

    units = list(registry.UNITS.values())
    summary, results, states, failed = {}, {}, {}, 0
    sections = {}

    def write():
        text = "# trainfab paper: every unit at its paper configuration\n\n" + "".join(
            sections.values())
        write_atomic(out / "summary.json", json.dumps(summary, indent=2, default=str) + "\n")
        write_atomic(out / "summary.md", text)
        return text

    for k, unit in enumerate(units, 1):
        with timed(f"unit:{unit.name}"):
            tag = f"[{k}/{len(units)}] {unit.name}"
            cfg = load_config(unit)
            if unit.showcase.paper_run_small:
                cfg = unit.make_config(cfg, **unit.showcase.paper_run_small)
                progress.echo(f"{tag}: at {config_label(unit.showcase.paper_run_small)} here; its paper "
                              "configuration is synthesized at the end")
            man, tb, measured = _build_unit(
                unit, cfg, out, tag, seed, sim,
                lambda: _measure(unit, cfg, out / "area", "osu018", 10.0))
        failed += not tb.passed
        results.update(measured)
        states[unit.name] = _state(tb)
        summary[unit.name] = {"verilog": man["verilog"], "sha256": man["verilog_sha256"],
                              "regression": tb.summary(), "passed": tb.passed,
                              "area": measured}
        bar.update()
    smaller = [f"`{u.name}` at {config_label(u.showcase.paper_run_small)}" for u in units
               if u.showcase.paper_run_small]
    intro = ("Measured smaller in this section: " + ", ".join(smaller) + "; their paper "
             "configurations are in the last section.\n\n" if smaller else "")
    sections["units"] = intro + _tables(results, states)
    write()
    with timed(STUDIES_STEP):
        sections["studies"], power_runs, study_work = _fpraker_studies(out, results)
        energy, fast_power = _own_clock_power(out)
        sections["studies"] += energy
        power_runs = {**power_runs, **fast_power}
    # the units' tables again, now with the energy per MAC of the pairs measured
    sections["units"] = intro + _tables(results, states, power=power_runs)
    bar.update()
    write()
    with timed(SWEEP_STEP):
        code = _paper_sweep(out / "sweep", jobs)
    bar.update()
    failed += code != 0
    sweep_md = out / "sweep" / "sweep.md"
    sections["sweep"] = "\n" + (_demoted(sweep_md.read_text(), "sweep") if sweep_md.exists()
                                else "")
    write()
    big = {}
    sized = [u for u in units if u.showcase.paper_run_small]
    workers = paper_workers(jobs, len(sized))

    def measure(unit):
        t0 = time.monotonic()
        measured = _measure(unit, load_config(unit), out / "paper-size", "osu018", 10.0)
        return measured, time.monotonic() - t0

    progress.echo(f"paper: {', '.join(u.name for u in sized)} at their paper configuration "
                  f"(with breakdown), {workers} at a time …")
    with concurrent.futures.ThreadPoolExecutor(max(workers, 1)) as pool:
        running = [(unit, pool.submit(measure, unit)) for unit in sized]
        for unit, future in running:
            measured, seconds = future.result()
            _record_time(times, f"paper-size:{unit.name}", seconds)
            r = measured[unit.name]
            progress.echo(f"paper: {unit.name} {r['area_um2']:.0f} µm², fmax "
                          f"{r.get('fmax_mhz')} MHz")
            bar.update()
            big.update(measured)
            summary.setdefault("paper_size", {}).update(measured)
            sections["paper-size"] = ("\n# Units at their paper configuration (measured "
                                      "smaller above)\n\n"
                                      + _tables(big, work=_model_work(big, study_work),
                                                power=power_runs))
            write()
    text = write()
    bar.close()
    from .runs import public

    print()
    print(text.replace(str(out), public(out)))

    print(f"written: {public(out / 'summary.md')}, {public(out / 'summary.json')}, Verilog in "
          f"{public(out / 'verilog')}, step times in {public(times)} "
          f"({_duration(time.monotonic() - start)})")
    return 1 if failed else 0


__all__ = ["own_clock_rows",
           "own_clock_section", "energy_at", "paper_figures", "report", "results_page",
           "check_markdown_path", "demo", "demo_units",
           "demo_ratios", "paper", "paper_steps", "paper_estimate"]

"""``trainfab demo`` (``make demo``): one unit of each family at a small configuration,
generated, quick-regressed and measured in a few minutes, with a table, the papers' ratios
and a plot."""

import json

from .. import build_dir, families, progress, registry
from ..declare import config_label
from .tables import (_build_unit, _duration, _state, own_clock_rows, own_clock_section)


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
    from ..runs import exclusive, staged

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

    from ..eda.synth import area

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

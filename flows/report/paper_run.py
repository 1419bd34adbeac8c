"""``make paper`` (``trainfab paper``): every unit at its paper configuration with its parts,
ratios and scalings, the tiles' power and speedup studies, a sweep and the 8 × 8 tiles (about
1 h 20 min on 2 cores), and its time estimate."""

import json

from .. import FlowError, build_dir, families, progress, registry, shown
from ..config import load_config
from ..declare import config_label
from ..layout import DEFAULT_CLOCK_NS, DEFAULT_LIBERTY
from .tables import (_about, _build_unit, _duration, _macs_per_group, _measure, _power_facts,
                     _state, _tables, check_markdown_path, results_page)


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
    from ..eda import power

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


def _fpraker_studies(out, results: dict) -> tuple[str, dict, dict]:
    """The paper run's FPRaker tile studies: the power of both tiles on real MiniLM operands
    (:data:`POWER_TILE` tiles; gate-level activity) and the speedup study on MiniLM with the
    run's own measured tile-area ratio.  Returns their markdown sections, the power reports by
    unit and the FPRaker tile's MACs per cycle on the study's GEMMs (``{"fpraker.tile":
    [(operands, MACs per cycle)]}``, for the cycle model's tile configuration)."""
    from ..eda import power
    from ..studies import speedup

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

    from ..runs import write_atomic

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
    from ..runs import exclusive, staged, write_atomic

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

    from .. import sweep

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


class _PaperRun:
    """The paper run's state as its steps fill it in: the summary (JSON) and its sections
    (Markdown), rewritten into ``out`` after every step, and each step's time recorded in
    :data:`PAPER_TIMES` for the next run's estimate."""

    def __init__(self, out):
        self.out = out
        self.times = out / PAPER_TIMES
        self.summary, self.results, self.states, self.sections = {}, {}, {}, {}
        self.failed = 0
        self.power_runs, self.study_work = {}, {}

    def timed(self, step: str):
        import contextlib
        import time

        @contextlib.contextmanager
        def block():
            t0 = time.monotonic()
            yield
            _record_time(self.times, step, time.monotonic() - t0)  # finished steps only

        return block()

    def write(self) -> str:
        from ..runs import write_atomic

        text = "# trainfab paper: every unit at its paper configuration\n\n" + "".join(
            self.sections.values())
        write_atomic(self.out / "summary.json",
                     json.dumps(self.summary, indent=2, default=str) + "\n")
        write_atomic(self.out / "summary.md", text)
        return text


def _paper_steps(out, seed: int, sim: str | None, jobs: int | None, bar) -> int:
    """:func:`_paper`'s steps (units, studies, sweep, paper-size units, :func:`paper_workers`
    of those at a time), each moving ``bar`` on when it finished."""
    import time

    from ..runs import public

    start = time.monotonic()
    run = _PaperRun(out)
    intro = _paper_units(run, seed, sim, bar)
    with run.timed(STUDIES_STEP):
        run.sections["studies"], power_runs, run.study_work = _fpraker_studies(out, run.results)
        energy, fast_power = _own_clock_power(out)
        run.sections["studies"] += energy
        run.power_runs = {**power_runs, **fast_power}
    # the units' tables again, now with the energy per MAC of the pairs measured
    run.sections["units"] = intro + _tables(run.results, run.states, power=run.power_runs)
    bar.update()
    run.write()
    with run.timed(SWEEP_STEP):
        code = _paper_sweep(out / "sweep", jobs)
    bar.update()
    run.failed += code != 0
    sweep_md = out / "sweep" / "sweep.md"
    run.sections["sweep"] = "\n" + (_demoted(sweep_md.read_text(), "sweep")
                                    if sweep_md.exists() else "")
    run.write()
    _paper_size(run, jobs, bar)
    text = run.write()
    bar.close()
    print()
    print(text.replace(str(out), public(out)))
    print(f"written: {public(out / 'summary.md')}, {public(out / 'summary.json')}, Verilog in "
          f"{public(out / 'verilog')}, step times in {public(run.times)} "
          f"({_duration(time.monotonic() - start)})")
    return 1 if run.failed else 0


def _paper_units(run: _PaperRun, seed: int, sim: str | None, bar) -> str:
    """Every unit generated, quick-regressed and measured with its parts (the tiles smaller
    than their paper size); returns the units section's introduction."""
    units = list(registry.UNITS.values())
    for k, unit in enumerate(units, 1):
        with run.timed(f"unit:{unit.name}"):
            tag = f"[{k}/{len(units)}] {unit.name}"
            cfg = load_config(unit)
            small = unit.showcase.paper_run_small
            if small:
                cfg = unit.make_config(cfg, **small)
                progress.echo(f"{tag}: at {config_label(small)} here; its paper "
                              "configuration is synthesized at the end")
            man, tb, measured = _build_unit(
                unit, cfg, run.out, tag, seed, sim,
                lambda: _measure(unit, cfg, run.out / "area", DEFAULT_LIBERTY,
                                 DEFAULT_CLOCK_NS))
        run.failed += not tb.passed
        run.results.update(measured)
        run.states[unit.name] = _state(tb)
        run.summary[unit.name] = {"verilog": man["verilog"], "sha256": man["verilog_sha256"],
                                  "regression": tb.summary(), "passed": tb.passed,
                                  "area": measured}
        bar.update()
    smaller = [f"`{u.name}` at {config_label(u.showcase.paper_run_small)}" for u in units
               if u.showcase.paper_run_small]
    intro = ("Measured smaller in this section: " + ", ".join(smaller) + "; their paper "
             "configurations are in the last section.\n\n" if smaller else "")
    run.sections["units"] = intro + _tables(run.results, run.states)
    run.write()
    return intro


def _paper_size(run: _PaperRun, jobs: int | None, bar) -> None:
    """The units measured smaller above, at their paper configuration with their breakdowns
    (:func:`paper_workers` at a time)."""
    import concurrent.futures
    import time

    sized = [u for u in registry.UNITS.values() if u.showcase.paper_run_small]
    workers = paper_workers(jobs, len(sized))

    def measure(unit):
        t0 = time.monotonic()
        measured = _measure(unit, load_config(unit), run.out / "paper-size", DEFAULT_LIBERTY,
                            DEFAULT_CLOCK_NS)
        return measured, time.monotonic() - t0

    progress.echo(f"paper: {', '.join(u.name for u in sized)} at their paper configuration "
                  f"(with breakdown), {workers} at a time …")
    big = {}
    with concurrent.futures.ThreadPoolExecutor(max(workers, 1)) as pool:
        running = [(unit, pool.submit(measure, unit)) for unit in sized]
        for unit, future in running:
            measured, seconds = future.result()
            _record_time(run.times, f"paper-size:{unit.name}", seconds)
            r = measured[unit.name]
            progress.echo(f"paper: {unit.name} {r['area_um2']:.0f} µm², fmax "
                          f"{r.get('fmax_mhz')} MHz")
            bar.update()
            big.update(measured)
            run.summary.setdefault("paper_size", {}).update(measured)
            run.sections["paper-size"] = ("\n# Units at their paper configuration (measured "
                                          "smaller above)\n\n"
                                          + _tables(big, work=_model_work(big, run.study_work),
                                                    power=run.power_runs))
            run.write()

"""Area and timing: yosys synthesis onto a liberty, then OpenSTA on the mapped netlist.

Recipe (DESIGN.md; checked with Debian's yosys 0.23 and OpenSTA 2.0.17):
``read_verilog`` → ``synth -flatten`` → ``dfflegalize`` to plain D flip-flops (so that yosys'
``stat -tech cmos`` transistor estimate counts every cell) → ``rename -wire`` (each flip-flop
named after the register bit it drives, ``core.acc__exp[9]_reg``, so that critical paths name
registers rather than ``_2317_``; area and timing are unchanged) → ``dfflibmap`` → ``abc -liberty`` with
the clock period as delay target and ABC's buffering and gate sizing (without them one minimum
inverter drives hundreds of flip-flop enables and a 10 ns design times at 500 ns) →
``splitnets``, hide internal names, ``opt_clean -purge`` (OpenSTA's Verilog reader rejects the
constant concatenations yosys writes otherwise) → ``stat -liberty`` (µm²) → ``write_verilog``.

Timing: one clock on ``clk`` with the requested period, every other input and every output
constrained at 0 ns against it, so register→register, input→register, register→output and
input→output paths all count.  The critical path is ``period - worst slack``; fmax is its inverse.
Combinational units (no ``clk``) get a virtual clock.

Gate equivalents: cell area divided by the liberty's two-input NAND (``NAND2X1``, or
``NAND2_X1``) area.

Breakdown (``area(..., breakdown=True)``, ``trainfab area UNIT --breakdown``): the same recipe
without ``-flatten``, area per block of the hierarchy (:mod:`flows.eda.breakdown`).

Progress: yosys' phases read from its log as it grows (:mod:`flows.eda.yosys_phases`).
"""

import dataclasses
import errno
import functools
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path


from .. import FlowError, build_dir
from ..layout import DEFAULT_CLOCK_NS, DEFAULT_LIBERTY
from ..options import check_clock
from .breakdown import _breakdown, _flops, _is_pattern, check_breakdown_paths, group_blocks
from .generate import convert, manifest
from ..registry import Unit
from .tools import liberty as find_liberty
from .tools import require, versions
from .yosys_phases import YosysPhases, _LogWatch



#: ABC mapping script: yosys' default liberty flow plus buffering and up/down-sizing to {D}
ABC_SCRIPT = ("+strash;&get,-n;&fraig,-x;&put;scorr;dc2;dretime;strash;&get,-n;&dch,-f;&nf,{D};"
              "&put;buffer,-p;upsize,{D};dnsize,{D};stime,-p")


def yosys_script(top: str, source: Path, lib: Path, netlist: Path, generic_json: Path,
                 mapped_json: Path, clock_ns: float = 10.0, flatten: bool = True,
                 share: bool = True) -> str:
    return "\n".join([
        f"read_verilog {source}",
        f"synth {'-flatten ' if flatten else ''}{'' if share else '-noshare '}-top {top}",
        "dfflegalize -cell $_DFF_P_ 01",
        # name each flip-flop after the register bit it drives (OpenSTA's start/endpoints); on
        # the generic cells, before dfflibmap, which keeps the name
        "rename -wire -suffix _reg t:$_DFF_P_",
        *_mapping(lib, netlist, generic_json, mapped_json, clock_ns),
    ])


def _mapping(lib: Path, netlist: Path, generic_json: Path, mapped_json: Path,
             clock_ns: float) -> list[str]:
    """The recipe from generic cells with plain D flip-flops to the written netlist."""
    return [
        f"tee -q -o {generic_json} stat -json -tech cmos",
        f"dfflibmap -liberty {lib}",
        f"abc -D {round(clock_ns * 1000)} -liberty {lib} -script {ABC_SCRIPT}",
        "splitnets",
        "rename -hide w:*.*",
        "opt_clean -purge",
        f"tee -q -o {mapped_json} stat -json -liberty {lib}",
        f"stat -liberty {lib}",
        # output bits tied to each other or to constants: single-bit assigns, not the
        # concatenations OpenSTA's Verilog reader rejects
        f"write_verilog -noattr -noexpr -simple-lhs {netlist}",
        "",
    ]


#: random cycles of the co-simulation that checks a retimed netlist (:mod:`flows.eda.cosim`)
RETIME_CHECK_CYCLES = 300

#: ABC's retiming of a flattened design (:func:`retime_scripts`): minimum-delay retiming,
#: forward and backward (``retime -M 4``), on the and-inverter graph
ABC_RETIME = "read {aig}; strash; retime -M 4; strash; &get; &w {out}"


def retime_scripts(top: str, source: Path, lib: Path, netlist: Path, generic_json: Path,
                   mapped_json: Path, clock_ns: float = 10.0, share: bool = True) -> tuple:
    """The retiming recipe, in three steps: a yosys script to the and-inverter graph
    (``synth -flatten``, plain D flip-flops, ``aigmap``, ``write_aiger``), ABC's
    :data:`ABC_RETIME` on it, and a yosys script from the retimed graph to the liberty (the
    ports' names restored from the first step's symbol map, whose flip-flop entries are
    dropped: retiming makes new ones) that ends as :func:`yosys_script` does.  The flip-flops
    have no names afterwards (``_1234_``).  Returns ``(before, abc, after)``."""
    before = "\n".join([
        f"read_verilog {source}",
        f"synth -flatten {'' if share else '-noshare '}-top {top}",
        "dfflegalize -cell $_DFF_P_ 01",
        "aigmap",
        "opt_clean",
        f"write_aiger -zinit -map {top}.aig.map {top}.aig",
        "",
    ])
    abc = ABC_RETIME.format(aig=f"{top}.aig", out=f"{top}.retimed.aig")
    after = "\n".join([
        f"read_aiger -wideports -module_name {top} -clk_name clk -map {top}.ports.map "
        f"{top}.retimed.aig",
        f"hierarchy -top {top}",
        # an output the symbol map left unnamed (a second bit of a net, restored by name below)
        "delete -output o:$*",
        "simplemap",
        "opt_clean",
        "dfflegalize -cell $_DFF_P_ 01",
        *_mapping(lib, netlist, generic_json, mapped_json, clock_ns),
    ])
    return before, abc, after


def aiger_body(data: bytes) -> bytes:
    """An AIGER file (binary ``aig``) cut after its and-gates: without the symbol table,
    comments and the extension sections ABC's ``&w`` appends, which yosys' reader rejects."""
    end = data.index(b"\n")
    header = data[:end].split()
    if len(header) < 6 or header[0] != b"aig":
        raise FlowError(f"ABC wrote no binary AIGER file (header {data[:40]!r})")
    _m, _i, latches, outputs, ands = map(int, header[1:6])
    pos = end + 1
    for _ in range(latches + outputs):
        pos = data.index(b"\n", pos) + 1
    for _ in range(2 * ands):
        while data[pos] & 0x80:
            pos += 1
        pos += 1
    return b" ".join(header[:6]) + b"\n" + data[end + 1:pos]


def port_symbols(symbol_map: str) -> tuple[str, list[str]]:
    """yosys' AIGER symbol map reduced to the ports (``input`` and ``output`` lines), and the
    yosys commands that restore the output bits it merged.

    ``write_aiger`` names output bits driven by one net with one output's index, and leaves
    another output unnamed (the recipe drops it as a port); ``read_aiger`` keeps one name.  The map keeps each output's first name, and
    every other bit gets ``connect -set name[bit] first[bit]`` (after ``add -output`` for a
    port none of whose bits was kept)."""
    kept, first, aliases, widths = [], {}, [], {}
    for line in symbol_map.splitlines():
        parts = line.split(" ", 3)
        if parts[0] not in ("input", "output") or len(parts) != 4:
            continue
        kind, index, bit, name = parts
        if kind == "output":
            widths[name] = max(widths.get(name, 0), int(bit) + 1)
            if index in first:
                aliases.append((name, int(bit), *first[index]))
                continue
            first[index] = (name, int(bit))
        kept.append(line + "\n")
    primary = {}
    for line in kept:
        kind, _index, bit, name = line.split(" ", 3)
        name = name.rstrip("\n")
        primary[name] = max(primary.get(name, 0), int(bit) + 1)
    commands = []
    for name in sorted({a[0] for a in aliases} - set(primary)):
        commands.append(f"add -output {name} {widths[name]}")
    for name, bit, other, other_bit in aliases:
        if name in primary and bit >= primary[name]:
            raise FlowError(f"retiming: output {name}[{bit}] is the same net as {other}"
                            f"[{other_bit}] and lies beyond {name}'s other bits; yosys' AIGER "
                            "reader cannot restore it")
        commands.append(f"connect -set {name}[{bit}] {other}[{other_bit}]")
    return "".join(kept), commands


#: two-input NAND cells that define a gate equivalent, by library naming convention
NAND2_CELLS = ("NAND2X1", "NAND2_X1")


@functools.cache
def liberty_cell_areas(lib: Path) -> dict[str, float]:
    """Cell name → area of every cell of a liberty file that states one."""
    text = Path(lib).read_text(errors="replace")
    starts = [(m.start(), m.group(1)) for m in re.finditer(r'\bcell\s*\(\s*"?([^\s")]+)"?\s*\)', text)]
    areas = {}
    for (begin, name), (end, _) in zip(starts, starts[1:] + [(len(text), None)]):
        found = re.search(r"\barea\s*:\s*([0-9.eE+-]+)", text[begin:end])
        if found:
            areas[name] = float(found.group(1))
    return areas


def nand2_area(lib: Path) -> float | None:
    """Area of the liberty's two-input NAND (one gate equivalent); ``None`` if it has none."""
    areas = liberty_cell_areas(Path(lib))
    return next((areas[c] for c in NAND2_CELLS if c in areas), None)


def _ge(area_um2: float, ge_um2: float | None) -> float | None:
    return round(area_um2 / ge_um2, 1) if ge_um2 else None


def sta_script(top: str, netlist: Path, lib: Path, clock_ns: float, has_clock: bool) -> str:
    clock = (f"create_clock -name clk -period {clock_ns} [get_ports clk]\n"
             "set inputs [delete_from_list [all_inputs] [get_ports clk]]\n") if has_clock else (
             f"create_clock -name clk -period {clock_ns}\nset inputs [all_inputs]\n")
    return (f"read_liberty {lib}\nread_verilog {netlist}\nlink_design {top}\n{clock}"
            "set_input_delay 0 -clock clk $inputs\n"
            "set_output_delay 0 -clock clk [all_outputs]\n"
            "report_checks -path_delay max -digits 3\n"
            "exit\n")


def _run(cmd, log: Path, what: str, timeout: float = 3600) -> str:
    """Run a tool inside ``log``'s folder (OpenSTA leaves a ``.history_sta`` file in its working
    directory); its output goes to ``log``.  A failure is one line: the tool's first error
    message, or its last line."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=log.parent)
    except subprocess.TimeoutExpired:
        raise FlowError(f"{what} did not finish within {timeout:.0f} s") from None
    out = proc.stdout + proc.stderr
    log.write_text(out)
    if proc.returncode in (-signal.SIGINT, -signal.SIGTERM):
        raise KeyboardInterrupt  # Ctrl-C reached the tool too (its process group)
    if proc.returncode != 0:
        raise FlowError(f"{what} failed (exit {proc.returncode}): {tool_error(out)}")
    return out


def tool_error(text: str) -> str:
    """The one line that says why a tool failed: its first ``ERROR``/``Error`` line (yosys,
    OpenSTA, ABC), else its last non-empty line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    found = next((line for line in lines if re.match(r"(ERROR|Error|error)\b", line)), None)
    return (found or (lines[-1] if lines else "no output"))[:400]


def parse_sta(text: str, clock_ns: float) -> dict:
    """Worst path of an OpenSTA ``report_checks`` (``slack`` is relative to ``clock_ns``)."""
    if re.search(r"^Error", text, re.M):
        raise FlowError("OpenSTA reported errors: " + tool_error(text))
    slack = re.search(r"^\s*(-?[\d.]+)\s+slack", text, re.M)
    if slack is None:
        return {"critical_path_ns": None, "fmax_mhz": None, "startpoint": None, "endpoint": None,
                "note": "no constrained timing path"}
    path_ns = clock_ns - float(slack.group(1))
    start = re.search(r"^Startpoint: (\S+)", text, re.M)
    end = re.search(r"^Endpoint: (\S+)", text, re.M)
    return {
        "critical_path_ns": round(path_ns, 4),
        "fmax_mhz": round(1000.0 / path_ns, 2) if path_ns > 0 else None,
        "slack_ns": float(slack.group(1)),
        "startpoint": start.group(1) if start else None,
        "endpoint": end.group(1) if end else None,
    }


def read_stat_json(path: Path) -> dict:
    """A ``stat -json`` document.  yosys 0.23 writes the instance counts of a nested hierarchy's
    submodules into the ``design`` section as text lines (``  name   1``), which are dropped."""
    text = Path(path).read_text()
    return json.loads(re.sub(r'^[ \t]*[^\s"{}\[\],:]+[ \t]+\d+[ \t]*\n', "", text, flags=re.M))


#: the last run's time of each unit's syntheses (:class:`flows.progress.Timings`), in the
#: build folder
TIMES = "synth_times.json"


def _timings():
    from ..progress import Timings

    try:
        return Timings(build_dir() / TIMES)
    except FlowError:  # an unusable build folder: no estimate
        return None


def _retime(yosys: str, top: str, source: str, lib: Path, outdir: Path, clock_ns: float,
            share: bool = True, phases=None) -> dict:
    """:func:`_synthesize` with :func:`retime_scripts` (files ``synth_aig.ys``,
    ``retime.abc``, ``synth.ys`` and their logs)."""
    netlist = f"{top}.mapped.v"
    before, abc, after = retime_scripts(top, source, lib, netlist, "stat_generic.json",
                                        "stat_mapped.json", clock_ns, share)
    (outdir / "synth_aig.ys").write_text(before)
    (outdir / "retime.abc").write_text(abc + "\n")
    (outdir / "synth.ys").write_text(after)
    t0 = time.monotonic()
    if phases is not None:
        phases.start("yosys synth to an and-inverter graph")
    _run([yosys, "-q", "-l", "yosys_aig.log", "-s", "synth_aig.ys"], outdir / "yosys_aig.out",
         "yosys")
    symbols, restore = port_symbols((outdir / f"{top}.aig.map").read_text())
    (outdir / f"{top}.ports.map").write_text(symbols)
    if restore:
        anchor = "delete -output o:$*\n"
        after = after.replace(anchor, anchor + "\n".join(restore) + "\n", 1)
        (outdir / "synth.ys").write_text(after)
    if phases is not None:
        phases.start("ABC retiming")
    _run([require("berkeley-abc"), "-f", "retime.abc"], outdir / "retime.log", "ABC retiming")
    retimed = outdir / f"{top}.retimed.aig"
    retimed.write_bytes(aiger_body(retimed.read_bytes()))
    if phases is not None:
        phases.start("yosys mapping of the retimed graph")
    _run([yosys, "-q", "-l", "yosys.log", "-s", "synth.ys"], outdir / "yosys.out", "yosys")
    return {"script": "\n".join([before, f"# berkeley-abc -f retime.abc: {abc}", "", after]),
            "log": (outdir / "yosys.log").read_text(), "log_path": outdir / "yosys.log",
            "netlist": netlist,
            "generic": _stat_json(outdir / "stat_generic.json", "yosys.log"),
            "mapped": _stat_json(outdir / "stat_mapped.json", "yosys.log"),
            "seconds": time.monotonic() - t0}


def _synthesize(yosys: str, top: str, source: str, lib: Path, outdir: Path, clock_ns: float,
                flatten: bool = True, share: bool = True, phases=None) -> dict:
    """Run the yosys recipe on ``source`` (a file name in ``outdir``) inside ``outdir``:
    flattened (files ``synth.ys``, ``yosys.log``, ``stat_*.json``, ``<top>.mapped.v``) or
    hierarchical (the same names with ``_hier``/``.hier``).  The script names files relative to
    ``outdir``, so it stays valid wherever the folder is moved.  Returns the script, the log
    text, both ``stat -json`` documents and the seconds taken.  With ``phases``
    (:class:`flows.progress.Phases`), yosys' phases are announced as its log grows."""
    tag = "" if flatten else "_hier"
    netlist = f"{top}{'' if flatten else '.hier'}.mapped.v"
    generic_json, mapped_json = f"stat_generic{tag}.json", f"stat_mapped{tag}.json"
    script = yosys_script(top, source, lib, netlist, generic_json, mapped_json, clock_ns, flatten,
                          share)
    (outdir / f"synth{tag}.ys").write_text(script)
    t0 = time.monotonic()
    cmd = [yosys, "-q", "-l", f"yosys{tag}.log", "-s", f"synth{tag}.ys"]
    if phases is None:
        _run(cmd, outdir / f"yosys{tag}.out", "yosys")
    else:
        parser = YosysPhases("" if flatten else "hierarchical ")
        phases.start(*parser.feed("1. Executing Verilog-2005 frontend\n"))
        with _LogWatch(outdir / f"yosys{tag}.log", phases, parser):
            _run(cmd, outdir / f"yosys{tag}.out", "yosys")
    return {"script": script, "log": (outdir / f"yosys{tag}.log").read_text(),
            "log_path": outdir / f"yosys{tag}.log", "netlist": netlist,
            "generic": _stat_json(outdir / generic_json, f"yosys{tag}.log"),
            "mapped": _stat_json(outdir / mapped_json, f"yosys{tag}.log"),
            "seconds": time.monotonic() - t0}


def _stat_json(path: Path, log: str) -> dict:
    """:func:`read_stat_json` of a file yosys has just written.  A missing or cut file is a
    full disk (an ``OSError`` ENOSPC, which :func:`flows.runs.staged` reports naming the output
    folder) when the file system has no space left, else a :class:`FlowError` naming it."""
    from ..runs import no_space

    try:
        return read_stat_json(path)
    except (OSError, ValueError) as e:
        if no_space(path.parent):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path)) from None
        why = e.strerror if isinstance(e, OSError) else f"not JSON: {str(e)[:120]}"
        raise FlowError(f"yosys wrote no readable {path.name} ({why}); see {log}") from None


#: files every area run writes into its output folder (for ``<top>``): checked before the
#: synthesis (a file of the user's of one of these names stops the run at once)
def _area_files(top: str) -> tuple[str, ...]:
    return (f"{top}.v", f"{top}.mapped.v", "synth.ys", "yosys.log", "stat_generic.json",
            "stat_mapped.json", "timing.tcl", "timing.log", "area.json", "area.md")


@dataclasses.dataclass
class _AreaRun:
    """What the steps of one :func:`area` run share: the unit at its configuration and its
    Verilog, the tools, the settled options, and the run's progress."""

    unit: Unit
    cfg: object
    text: str                        #: the unit's Verilog
    fields: dict                     #: its ports' bit fields (:func:`flows.eda.generate.convert`)
    lib: Path
    clock_ns: float
    yosys: str
    sta: str
    final: Path                      #: the output folder
    paths: tuple[str, ...] | None    #: the breakdown's blocks (:func:`check_breakdown_paths`)
    breakdown: bool
    retime: bool
    max_fanout: int | None
    progress: bool
    phases: object                   #: :class:`flows.progress.Phases`
    timings: object                  #: :class:`flows.progress.Timings`, ``None`` if unusable
    key: str                         #: this run's entry in ``timings``

    @property
    def source(self) -> str:
        """The Verilog's file name in the run's folder."""
        return f"{self.unit.top}.v"

    @property
    def watch(self):
        """The phases yosys' steps are announced on; ``None`` without progress."""
        return self.phases if self.progress else None


def _prepare(unit: Unit, cfg, liberty: str, clock_ns: float, outdir: Path | None, factory,
             breakdown: bool, progress: bool, max_fanout: int | None,
             retime: bool | None) -> _AreaRun:
    """What :func:`area` settles before any tool runs: the checks of its arguments, the tools
    and the liberty, the output folder, the Verilog and the breakdown's blocks (in this order,
    which decides the error a bad call gets), and the progress display with its estimate."""
    from ..progress import Phases, config_key
    from ..runs import precheck

    from .fanout import check_max_fanout

    clock_ns = check_clock(clock_ns)
    check_max_fanout(max_fanout)
    yosys, sta = require("yosys"), require("sta")
    lib = find_liberty(liberty).resolve()
    final = precheck(outdir or build_dir() / "area" / unit.name, _area_files(unit.top))
    text, fields = convert(unit, cfg, factory)
    paths = check_breakdown_paths(unit, text, cfg) if breakdown else None
    if retime is None:
        retime = unit.retimes(cfg)
    timings = _timings()
    key = config_key({"config": unit.hardware_config(cfg), "clock_ns": clock_ns,
                      "liberty": str(lib), "breakdown": breakdown,
                      "component": getattr(factory, "__qualname__", None),
                      **({"max_fanout": max_fanout} if max_fanout is not None else {}),
                      **({"retime": True} if retime else {})})
    estimate = timings.estimate(unit.name, key)[0] if timings is not None else None
    phases = Phases(unit.name, estimate=estimate, enabled=progress)
    return _AreaRun(unit, cfg, text, fields, lib, clock_ns, yosys, sta, final, paths, breakdown,
                    retime, max_fanout, progress, phases, timings, key)


def _synthesis(run: _AreaRun, work: Path) -> dict:
    """The flattened synthesis in ``work``: :func:`_retime` with ``retime``, else
    :func:`_synthesize`.  Returns the latter's dict with ``chip`` (yosys' chip area lines) and
    the top module's ``stat -json`` entries, ``top_generic`` and ``top_mapped``."""
    (work / run.source).write_text(run.text)
    if run.retime:
        flat = _retime(run.yosys, run.unit.top, run.source, run.lib, work, run.clock_ns,
                       share=run.unit.synth.share, phases=run.watch)
    else:
        flat = _synthesize(run.yosys, run.unit.top, run.source, run.lib, work, run.clock_ns,
                           share=run.unit.synth.share, phases=run.watch)
    chip = re.findall(r"Chip area for module .*?:\s*([\d.]+)", flat["log"])
    if not chip:
        raise FlowError("yosys printed no chip area")
    return {**flat, "chip": chip,
            "top_generic": next(iter(flat["generic"]["modules"].values())),
            "top_mapped": next(iter(flat["mapped"]["modules"].values()))}


def _check_retimed(run: _AreaRun, work: Path, flat: dict) -> dict:
    """The retimed netlist co-simulated against the Verilog (:func:`flows.eda.cosim.cosim`);
    :class:`FlowError` when an output differs."""
    # retimed registers match none of the design's: the netlist is checked by
    # co-simulation against the Verilog instead
    from .cosim import cosim

    run.phases.start("co-simulation of the retimed netlist")
    # the reset runs through each register chain (a cycle per context) and through
    # the registers retiming moved: twice the contexts, at least 16 cycles
    unit = run.unit
    contexts = getattr(run.cfg, unit.synth.cslow_field, 1) if unit.synth.cslow_field else 1
    check = cosim(run.text, (work / flat["netlist"]).read_text(), unit.top, run.lib,
                  cycles=RETIME_CHECK_CYCLES, reset_cycles=max(16, 2 * contexts),
                  workdir=work)
    if check["mismatches"]:
        raise FlowError(f"the retimed netlist differs from the design in "
                        f"{check['mismatches']} outputs over {check['cycles']} random "
                        f"cycles (first: {'; '.join(check['first'][:3])})")
    return check


def _buffer_trees(run: _AreaRun, work: Path, flat: dict) -> dict:
    """Buffer trees on the mapped netlist's nets of more than ``max_fanout`` loads
    (:func:`flows.eda.fanout.buffer_fanout`), the netlist as mapped kept beside it; returns
    what was added."""
    from .fanout import buffer_fanout

    run.phases.start("fanout buffer trees")
    mapped_v = work / flat["netlist"]
    original = mapped_v.read_text()
    (work / f"{run.unit.top}.unbuffered.mapped.v").write_text(original)
    buffered, buffering = buffer_fanout(original, run.lib, run.max_fanout)
    mapped_v.write_text(buffered)
    return buffering


def _timing(run: _AreaRun, work: Path, flat: dict) -> tuple[str, dict, float]:
    """OpenSTA on the mapped netlist: its script, the worst path (:func:`parse_sta`) and the
    seconds it took."""
    has_clock = bool(re.search(r"^\s*input\s+clk\s*;", run.text, re.M))
    sta_tcl = sta_script(run.unit.top, flat["netlist"], run.lib, run.clock_ns, has_clock)
    (work / "timing.tcl").write_text(sta_tcl)
    run.phases.start("OpenSTA timing")
    t0 = time.monotonic()
    sta_out = _run([run.sta, "-no_splash", "-exit", "timing.tcl"], work / "timing.log",
                   "OpenSTA")
    sta_s = time.monotonic() - t0
    return sta_tcl, parse_sta(sta_out, run.clock_ns), sta_s


def _report(run: _AreaRun, flat: dict, check: dict | None, buffering: dict | None,
            sta: tuple[str, dict, float]) -> dict:
    """The area report of the flattened synthesis, the retiming check, the buffer trees and
    the timing (:func:`_timing`'s result), in the report's order of keys."""
    unit, cfg = run.unit, run.cfg
    sta_tcl, timing, sta_s = sta
    man = manifest(unit, cfg, run.text, run.fields)
    ge_um2 = nand2_area(run.lib)
    generic, mapped = flat["top_generic"], flat["top_mapped"]
    cell_area, cells, by_type = float(flat["chip"][-1]), mapped["num_cells"], \
        dict(mapped["num_cells_by_type"])
    if buffering is not None:
        cell_area = round(cell_area + buffering["area_um2"], 3)
        cells += buffering["buffers"]
        if buffering["buffers"]:
            by_type[buffering["buffer"]] = by_type.get(buffering["buffer"], 0) \
                + buffering["buffers"]
    report = {
        "unit": unit.name,
        "config": unit.hardware_config(cfg),
        "area_um2": cell_area,
        "area_ge": _ge(cell_area, ge_um2),
        "ge_um2": ge_um2,
        "cells": cells,
        "cells_by_type": by_type,
        "flip_flops": _flops(generic["num_cells_by_type"]),
        "transistors_estimate": int(generic["estimated_num_transistors"]),
        "generic_cells": generic["num_cells"],
        "clock_ns": run.clock_ns,
        **timing,
        "liberty": str(run.lib),
        "tools": versions(),
        "verilog_sha256": man["verilog_sha256"],
        "yosys_script": flat["script"],
        "sta_script": sta_tcl,
        "seconds": {"synthesis": round(flat["seconds"], 2), "timing": round(sta_s, 2)},
    }
    if run.retime:
        report["retimed"] = True
        report["retime_check"] = {k: check[k] for k in ("cycles", "mismatches", "changes")}
    if buffering is not None:
        report["fanout_buffers"] = {**buffering, "max_fanout": run.max_fanout}
        report["area_um2_as_mapped"] = float(flat["chip"][-1])
    if unit.runtime_fields:  # run-time inputs: not part of the hardware's configuration
        report["runtime_fields"] = list(unit.runtime_fields)
    return report


def _add_breakdown(run: _AreaRun, work: Path, report: dict) -> None:
    """The hierarchical synthesis in ``work`` and its blocks (:mod:`flows.eda.breakdown`),
    added to ``report``."""
    unit = run.unit
    hier = _synthesize(run.yosys, unit.top, run.source, run.lib, work, run.clock_ns,
                       flatten=False, share=unit.synth.share, phases=run.watch)
    total, blocks = _breakdown(unit.top, hier, run.paths)
    if any(_is_pattern(p) for p in unit.breakdown_paths(run.cfg)):
        blocks = group_blocks(blocks)
    report.update({"hierarchical_area_um2": total,
                   "breakdown": [{**b, "area_ge": _ge(b["area_um2"], report["ge_um2"])}
                                 for b in blocks],
                   "yosys_script_hierarchical": hier["script"]})
    report["seconds"]["hierarchical_synthesis"] = round(hier["seconds"], 2)


def _write_report(run: _AreaRun, work: Path, report: dict) -> None:
    """``area.md`` and ``area.json`` in ``work``, after the report's list of the run's files."""
    report["files"] = sorted([p.name for p in work.iterdir()
                              if p.is_file() and not p.name.startswith(".")]
                             + ["area.json", "area.md"])
    text = markdown(report)
    if run.breakdown and run.unit.synth.breakdown_table:
        from ..registry import resolve
        text += "\n" + resolve(run.unit.synth.breakdown_table)(report) + "\n"
    (work / "area.md").write_text(text)
    (work / "area.json").write_text(json.dumps(report, indent=2) + "\n")


def area(unit: Unit, cfg, *, liberty: str = DEFAULT_LIBERTY, clock_ns: float = DEFAULT_CLOCK_NS,
         outdir: Path | None = None, factory=None, breakdown: bool = False,
         progress: bool = True, max_fanout: int | None = None,
         retime: bool | None = None) -> dict:
    """Synthesize ``unit`` at ``cfg`` and time it; write ``area.json``/``area.md``; return the report.

    With ``breakdown``, also synthesize hierarchically and add ``hierarchical_area_um2`` and
    ``breakdown`` (area, cells and flip-flops per block; see :mod:`flows.eda.breakdown`).

    With ``retime`` (default: :meth:`flows.declare.Unit.retimes`, the C-slow configurations
    of a unit that has them), the flattened synthesis goes through ABC's retiming
    (:func:`retime_scripts`): its registers move into its logic, the clock gets faster and the
    flip-flops lose their names; ``retimed`` in the report says so.  The retimed netlist is
    co-simulated against the Verilog on :data:`RETIME_CHECK_CYCLES` random cycles
    (:func:`flows.eda.cosim.cosim`, ``retime_check`` in the report); a difference is a
    :class:`FlowError`.  The breakdown is not retimed.

    The tools run in a private folder whose files move into ``outdir`` (default
    ``build/area/<unit>``) only when everything succeeded (:func:`flows.runs.staged`):
    concurrent runs into one folder do not mix, and a failed run leaves it as it was.

    With ``progress``, each phase (yosys' steps, ABC, OpenSTA) is announced on standard output
    as it starts, with the time so far and the last run's time of the unit (at this
    configuration if it ran at it) from :data:`TIMES` in the build folder
    (:class:`flows.progress.Phases`); every finished run records its time there.

    With ``max_fanout``, every net a cell drives into more than ``max_fanout`` cell inputs gets
    a buffer tree before timing (:func:`flows.eda.fanout.buffer_fanout`; yosys + ABC leave the
    nets flip-flops drive unbuffered): the report's area, cells and timing are the buffered
    netlist's, ``fanout_buffers`` says what was added and ``area_um2_as_mapped`` keeps the
    netlist's area before; the mapped netlist as yosys wrote it stays beside it as
    ``<top>.unbuffered.mapped.v``.  The breakdown stays the hierarchical netlist's, unbuffered.

    The steps, in order: :func:`_prepare` (the checks, the Verilog, the progress display), then
    inside the staged folder :func:`_synthesis` (the plain recipe or the retiming one),
    :func:`_check_retimed` (with ``retime``), :func:`_buffer_trees` (with ``max_fanout``),
    :func:`_timing` (OpenSTA), :func:`_report`, :func:`_add_breakdown` (with ``breakdown``) and
    :func:`_write_report`.

    Raises :class:`FlowError` when yosys, OpenSTA or the liberty is missing, the clock period is
    unusable, ``max_fanout`` is outside 2 to 10,000, a tool fails, or a breakdown path is not an
    instance of the design.
    """
    from ..runs import staged

    run = _prepare(unit, cfg, liberty, clock_ns, outdir, factory, breakdown, progress,
                   max_fanout, retime)
    started = time.monotonic()
    with run.phases, staged(run.final, last=("area.md", "area.json")) as work:
        flat = _synthesis(run, work)
        check = _check_retimed(run, work, flat) if run.retime else None
        buffering = _buffer_trees(run, work, flat) if max_fanout is not None else None
        report = _report(run, flat, check, buffering, _timing(run, work, flat))
        if breakdown:
            _add_breakdown(run, work, report)
        _write_report(run, work, report)
    if run.timings is not None:
        run.timings.record(unit.name, run.key, time.monotonic() - started)
    report["outdir"] = str(run.final)
    return report


def breakdown_markdown(r: dict) -> str:
    """The breakdown table of an area report (empty without one)."""
    if "breakdown" not in r:
        return ""
    total = r["hierarchical_area_um2"]
    rows = "\n".join(
        f"| {b['block']} | {b['area_um2']:.1f} | {100 * b['area_um2'] / total if total else 0:.1f} | "
        f"{b['area_ge'] if b.get('area_ge') is not None else 'n/a'} | {b['cells']} | "
        f"{b['flip_flops']} |" for b in r["breakdown"])
    return f"""## Area by block (hierarchical synthesis)

| block | µm² | % of total | gate equivalents | cells | flip-flops |
|---|---|---|---|---|---|
{rows}
| total | {total:.1f} | 100.0 | {_ge(total, r.get('ge_um2')) or 'n/a'} | | |

Synthesized without `-flatten`: nothing is optimized across module boundaries and ABC maps each
module on its own, so the total differs from the flattened area ({r['area_um2']:.1f} µm²), which
remains the unit's figure.
"""


def _fanout_line(r: dict) -> str:
    b = r.get("fanout_buffers")
    if b is None:
        return ""
    return (f"| fanout buffer trees (`--max-fanout {b['max_fanout']}`) | {b['buffers']} "
            f"{b['buffer']} on {b['nets']} nets, {b['area_um2']:,.1f} µm² (area as mapped "
            f"{r['area_um2_as_mapped']:.1f} µm²) |\n")


def _retime_line(r: dict) -> str:
    if not r.get("retimed"):
        return ""
    c = r["retime_check"]
    return (f"\nRetimed (ABC `retime -M 4` on the and-inverter graph; the flip-flops have no "
            f"names): co-simulated against the Verilog on {c['cycles']} random cycles, "
            f"{c['mismatches']} mismatches ({c['changes']} output changes).\n")


def markdown(r: dict) -> str:
    cfg = ", ".join(f"{k}={v}" for k, v in r["config"].items())
    if r.get("runtime_fields"):
        cfg += (f" (run-time inputs, not hardware parameters: {', '.join(r['runtime_fields'])})")
    fmax = f"{r['fmax_mhz']:.1f} MHz" if r.get("fmax_mhz") else "n/a"
    path = f"{r['critical_path_ns']:.3f} ns" if r.get("critical_path_ns") else "n/a"
    tools = "\n".join(f"| {k} | {v} |" for k, v in r["tools"].items())
    nand2 = f"{r['ge_um2']:g} µm² NAND2" if r.get("ge_um2") else "NAND2"
    ge = f"{r['area_ge']:,.1f}" if r.get("area_ge") is not None else "n/a (no NAND2 cell in the liberty)"
    breakdown = breakdown_markdown(r)
    return f"""# Area and timing: {r['unit']}

Configuration: {cfg}

| metric | value |
|---|---|
| cell area | {r['area_um2']:.1f} µm² |
| gate equivalents (cell area / {nand2}) | {ge} |
| cells (mapped) | {r['cells']} |
| flip-flops | {r['flip_flops']} |
| transistors (yosys `stat -tech cmos` estimate) | {r['transistors_estimate']} |
| critical path | {path} ({r.get('startpoint')} → {r.get('endpoint')}) |
| fmax | {fmax} |
| clock constraint | {r['clock_ns']} ns |
{_fanout_line(r)}{_retime_line(r)}
{breakdown + chr(10) if breakdown else ""}Liberty: `{r['liberty']}`

| tool | version |
|---|---|
{tools}

Verilog sha256 `{r['verilog_sha256']}`.

yosys script:
```
{r['yosys_script']}```

OpenSTA script:
```
{r['sta_script']}```
"""


__all__ = ["tool_error", "NAND2_CELLS", "area", "markdown", "parse_sta", "yosys_script",
           "sta_script", "read_stat_json", "liberty_cell_areas", "nand2_area",
           "breakdown_markdown", "TIMES"]

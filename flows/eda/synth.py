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
without ``-flatten`` maps every module on its own (Amaranth writes one module per submodule
instance, named by its hierarchical path: instance ``core`` of ``fpraker_pe`` is module
``fpraker_pe.core``), and ``stat -liberty`` gives each module's own cell area.  Blocks are the
unit's :attr:`flows.declare.SynthPlan.breakdown` paths, else the top's child instances; a block's
area includes its descendants, and every ancestor of a block (the top included) gets a
``(rest)`` entry with its own cells and its other children, so the entries sum to the
hierarchical total.  That total differs from the flattened area (nothing is optimized across
module boundaries, and ABC maps each module on its own); the flattened numbers stay the unit's
figures.
"""

import errno
import fnmatch
import functools
import json
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path


from .. import FlowError, build_dir
from ..layout import DEFAULT_CLOCK_NS, DEFAULT_LIBERTY
from ..options import check_clock
from .generate import convert, manifest
from ..registry import Unit
from .tools import liberty as find_liberty
from .tools import require, versions



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


# --------------------------------------------------------------------------------------------
# progress: yosys' phases from its log as it grows

#: yosys passes inside ``synth`` → the phase they belong to; phases only move forward (the
#: ``opt`` passes between later steps do not take a run back to "coarse")
SYNTH_STAGES = (("elaborate", ("HIERARCHY", "PROC")), ("flatten", ("FLATTEN",)),
                ("coarse", ("OPT", "OPT_EXPR", "OPT_CLEAN", "CHECK", "FSM", "WREDUCE", "PEEPOPT",
                            "ALUMACC", "SHARE")),
                ("memory", ("MEMORY", "MEMORY_MAP")), ("techmap", ("TECHMAP",)),
                ("abc -fast", ("ABC",)))
#: top-level passes of :func:`yosys_script` → the phase they start
TOP_STAGES = (("yosys read", ("VERILOG-2005", "VERILOG")), ("yosys synth", ("SYNTH",)),
              ("flip-flop mapping", ("DFFLEGALIZE", "DFFLIBMAP")), ("abc mapping", ("ABC",)),
              ("yosys netlist", ("SPLITNETS", "OPT_CLEAN", "STATISTICS", "VERILOG BACKEND")))

_HEADER = re.compile(r"^(\d+(?:\.\d+)*)\. (?:Executing (\S+)(?: (backend))?|Printing (statistics))",
                     re.M)


def _rank(stages, name: str) -> int | None:
    return next((i for i, (_, names) in enumerate(stages) if name in names), None)


class YosysPhases:
    """The phase a yosys run of :func:`yosys_script` is in, from the pass headers of its log
    (``2.3. Executing FLATTEN pass``, ``5. Executing ABC pass``).  :meth:`feed` takes the log's
    text as it grows (any pieces) and returns the phase, ``(label, detail)``, when it changed."""

    def __init__(self, prefix: str = ""):
        self.prefix, self.top, self.sub = prefix, None, None
        self.rest = ""

    def phase(self) -> tuple[str, str | None] | None:
        if self.top is None:
            return None
        label = self.prefix + TOP_STAGES[self.top][0]
        detail = (SYNTH_STAGES[self.sub][0] if TOP_STAGES[self.top][0] == "yosys synth"
                  and self.sub is not None else None)
        return label, detail

    def feed(self, text: str) -> tuple[str, str | None] | None:
        before = self.phase()
        text, cut = self.rest + text, None
        if not text.endswith("\n"):
            cut = text.rfind("\n") + 1
            text, self.rest = text[:cut], text[cut:]
        else:
            self.rest = ""
        for m in _HEADER.finditer(text):
            level = m.group(1).count(".") + 1
            name = (m.group(2) or "").upper()
            if m.group(3):
                name += " BACKEND"
            elif m.group(4):
                name = "STATISTICS"
            if level == 1:
                rank = _rank(TOP_STAGES, name)
                if rank is not None and (self.top is None or rank > self.top):
                    self.top, self.sub = rank, None
            elif level == 2 and self.top is not None and TOP_STAGES[self.top][0] == "yosys synth":
                rank = _rank(SYNTH_STAGES, name)
                if rank is not None and (self.sub is None or rank > self.sub):
                    self.sub = rank
        now = self.phase()
        return now if now != before else None


class _LogWatch:
    """While a tool runs, a thread that reads its growing log every ``interval`` seconds and
    announces its phases on ``phases`` (:class:`flows.progress.Phases`); ticks in between."""

    def __init__(self, log: Path, phases, parser: YosysPhases, interval: float = 1.0):
        self.log, self.phases, self.parser, self.interval = log, phases, parser, interval
        self.offset, self.stop = 0, threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def poll(self) -> None:
        try:
            with open(self.log, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:
            data = b""
        self.offset += len(data)
        got = self.parser.feed(data.decode(errors="replace")) if data else None
        if got is not None:
            self.phases.start(*got)
        else:
            self.phases.tick()

    def _loop(self) -> None:
        while not self.stop.wait(self.interval):
            self.poll()

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()
        return False


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


def _flops(cells_by_type: dict) -> int:
    return sum(n for cell, n in cells_by_type.items() if "DFF" in cell)


#: files every area run writes into its output folder (for ``<top>``): checked before the
#: synthesis (a file of the user's of one of these names stops the run at once)
def _area_files(top: str) -> tuple[str, ...]:
    return (f"{top}.v", f"{top}.mapped.v", "synth.ys", "yosys.log", "stat_generic.json",
            "stat_mapped.json", "timing.tcl", "timing.log", "area.json", "area.md")


def area(unit: Unit, cfg, *, liberty: str = DEFAULT_LIBERTY, clock_ns: float = DEFAULT_CLOCK_NS,
         outdir: Path | None = None, factory=None, breakdown: bool = False,
         progress: bool = True, max_fanout: int | None = None,
         retime: bool | None = None) -> dict:
    """Synthesize ``unit`` at ``cfg`` and time it; write ``area.json``/``area.md``; return the report.

    With ``breakdown``, also synthesize hierarchically and add ``hierarchical_area_um2`` and
    ``breakdown`` (area, cells and flip-flops per block; see the module docstring).

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

    Raises :class:`FlowError` when yosys, OpenSTA or the liberty is missing, the clock period is
    unusable, ``max_fanout`` is outside 2 to 10,000, a tool fails, or a breakdown path is not an
    instance of the design.
    """
    from ..progress import Phases, config_key
    from ..runs import precheck, staged

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
    started = time.monotonic()
    with phases, staged(final, last=("area.md", "area.json")) as work:
        source = f"{unit.top}.v"
        (work / source).write_text(text)
        if retime:
            flat = _retime(yosys, unit.top, source, lib, work, clock_ns, share=unit.synth.share,
                           phases=phases if progress else None)
        else:
            flat = _synthesize(yosys, unit.top, source, lib, work, clock_ns,
                               share=unit.synth.share, phases=phases if progress else None)
        chip = re.findall(r"Chip area for module .*?:\s*([\d.]+)", flat["log"])
        if not chip:
            raise FlowError("yosys printed no chip area")
        generic = next(iter(flat["generic"]["modules"].values()))
        mapped = next(iter(flat["mapped"]["modules"].values()))
        has_clock = bool(re.search(r"^\s*input\s+clk\s*;", text, re.M))
        check = None
        if retime:
            # retimed registers match none of the design's: the netlist is checked by
            # co-simulation against the Verilog instead
            from .cosim import cosim

            phases.start("co-simulation of the retimed netlist")
            # the reset runs through each register chain (a cycle per context) and through
            # the registers retiming moved: twice the contexts, at least 16 cycles
            contexts = getattr(cfg, unit.synth.cslow_field, 1) if unit.synth.cslow_field else 1
            check = cosim(text, (work / flat["netlist"]).read_text(), unit.top, lib,
                          cycles=RETIME_CHECK_CYCLES, reset_cycles=max(16, 2 * contexts),
                          workdir=work)
            if check["mismatches"]:
                raise FlowError(f"the retimed netlist differs from the design in "
                                f"{check['mismatches']} outputs over {check['cycles']} random "
                                f"cycles (first: {'; '.join(check['first'][:3])})")
        buffering = None
        if max_fanout is not None:
            from .fanout import buffer_fanout

            phases.start("fanout buffer trees")
            mapped_v = work / flat["netlist"]
            original = mapped_v.read_text()
            (work / f"{unit.top}.unbuffered.mapped.v").write_text(original)
            buffered, buffering = buffer_fanout(original, lib, max_fanout)
            mapped_v.write_text(buffered)
        sta_tcl = sta_script(unit.top, flat["netlist"], lib, clock_ns, has_clock)
        (work / "timing.tcl").write_text(sta_tcl)
        phases.start("OpenSTA timing")
        t0 = time.monotonic()
        sta_out = _run([sta, "-no_splash", "-exit", "timing.tcl"], work / "timing.log", "OpenSTA")
        sta_s = time.monotonic() - t0
        timing = parse_sta(sta_out, clock_ns)
        man = manifest(unit, cfg, text, fields)
        ge_um2 = nand2_area(lib)
        cell_area, cells, by_type = float(chip[-1]), mapped["num_cells"], \
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
            "clock_ns": clock_ns,
            **timing,
            "liberty": str(lib),
            "tools": versions(),
            "verilog_sha256": man["verilog_sha256"],
            "yosys_script": flat["script"],
            "sta_script": sta_tcl,
            "seconds": {"synthesis": round(flat["seconds"], 2), "timing": round(sta_s, 2)},
        }
        if retime:
            report["retimed"] = True
            report["retime_check"] = {k: check[k] for k in ("cycles", "mismatches", "changes")}
        if buffering is not None:
            report["fanout_buffers"] = {**buffering, "max_fanout": max_fanout}
            report["area_um2_as_mapped"] = float(chip[-1])
        if unit.runtime_fields:  # run-time inputs: not part of the hardware's configuration
            report["runtime_fields"] = list(unit.runtime_fields)
        if breakdown:
            hier = _synthesize(yosys, unit.top, source, lib, work, clock_ns, flatten=False,
                               share=unit.synth.share, phases=phases if progress else None)
            total, blocks = _breakdown(unit.top, hier, paths)
            if any(_is_pattern(p) for p in unit.breakdown_paths(cfg)):
                blocks = group_blocks(blocks)
            report.update({"hierarchical_area_um2": total,
                           "breakdown": [{**b, "area_ge": _ge(b["area_um2"], ge_um2)}
                                         for b in blocks],
                           "yosys_script_hierarchical": hier["script"]})
            report["seconds"]["hierarchical_synthesis"] = round(hier["seconds"], 2)
        report["files"] = sorted([p.name for p in work.iterdir()
                                  if p.is_file() and not p.name.startswith(".")]
                                 + ["area.json", "area.md"])
        text = markdown(report)
        if breakdown and unit.synth.breakdown_table:
            from ..registry import resolve
            text += "\n" + resolve(unit.synth.breakdown_table)(report) + "\n"
        (work / "area.md").write_text(text)
        (work / "area.json").write_text(json.dumps(report, indent=2) + "\n")
    if timings is not None:
        timings.record(unit.name, key, time.monotonic() - started)
    report["outdir"] = str(final)
    return report


# --------------------------------------------------------------------------------------------
# area per block of a hierarchical synthesis


def module_names(verilog_text: str) -> list[str]:
    """Names of the modules of a Verilog text, in order (escaped names without the ``\\``)."""
    return re.findall(r"^module\s+\\?([^\s(]+)", verilog_text, re.M)


def _is_pattern(path: str) -> bool:
    return any(ch in path for ch in "*?[")


def block_label(block: str) -> str:
    """The label a breakdown entry is summed under when the unit lists patterns: instance
    indices become ``*`` (``pe3_1.lanes`` → ``pe*.lanes``, ``col2 (rest)`` → ``col* (rest)``)."""
    return re.sub(r"(?<=[A-Za-z])\d+(_\d+)*", "*", block)


def group_blocks(blocks: list[dict]) -> list[dict]:
    """Breakdown entries summed per :func:`block_label`, in order of first appearance."""
    out: dict[str, dict] = {}
    for b in blocks:
        label = block_label(b["block"])
        g = out.setdefault(label, {"block": label, "area_um2": 0.0, "cells": 0, "flip_flops": 0,
                                   "instances": 0})
        for k in ("area_um2", "cells", "flip_flops"):
            g[k] += b[k]
        g["instances"] += 1
    for g in out.values():
        g["area_um2"] = round(g["area_um2"], 6)
    return list(out.values())


def check_breakdown_paths(unit: Unit, verilog_text: str, cfg=None) -> tuple[str, ...] | None:
    """The unit's breakdown paths for ``cfg`` (:meth:`flows.declare.Unit.breakdown_paths`;
    ``None``: the top's children), each checked to be an instance of the design and none inside
    another; :class:`FlowError` naming the first that is not.  Glob patterns (``pe*.lanes``)
    expand to every matching instance."""
    paths = (unit.breakdown_paths(cfg) if cfg is not None else unit.synth.breakdown) or None
    if paths is None:
        return None
    prefix = unit.top + "."
    instances = [name[len(prefix):] for name in module_names(verilog_text) if name.startswith(prefix)]
    expanded = []
    for path in paths:
        if _is_pattern(path):
            hits = [i for i in instances if fnmatch.fnmatchcase(i, path)]
            if not hits:
                raise FlowError(f"{unit.name}: breakdown pattern {path!r} matches no instance of "
                                "the design")
            expanded += hits
        else:
            expanded.append(path)
    paths = expanded
    for path in paths:
        if path not in instances:
            shown = ", ".join(instances[:24]) + (", …" if len(instances) > 24 else "")
            raise FlowError(f"{unit.name}: breakdown block {path!r} is not an instance of the "
                            f"design; instances: {shown or 'none'}")
        inner = [p for p in paths if p.startswith(path + ".")]
        if inner:
            raise FlowError(f"{unit.name}: breakdown blocks {path!r} and {inner[0]!r} are nested; "
                            f"list one of them")
    return tuple(paths)


def hierarchy(top: str, hier: dict) -> dict[str, dict]:
    """Per module of a hierarchical run: its own ``area_um2``, ``cells`` and ``flip_flops``
    (submodule instances excluded) and ``children`` (submodule name → instance count)."""
    own_area = {name.lstrip("\\"): float(a) for name, a in
                re.findall(r"Chip area for module '(.*?)':\s*([\d.]+)", hier["log"])}
    generic = {n.lstrip("\\"): m for n, m in hier["generic"]["modules"].items()}
    mapped = {n.lstrip("\\"): m for n, m in hier["mapped"]["modules"].items()}
    if top not in mapped or not own_area:
        raise FlowError(f"yosys printed no per-module area for {top}; see {hier['log_path'].name}")
    modules = {}
    for name, m in mapped.items():
        by_type = m["num_cells_by_type"]
        children = {t: n for t, n in by_type.items() if t in mapped}
        leaf_generic = {t: n for t, n in generic.get(name, {}).get("num_cells_by_type", {}).items()
                        if t not in mapped}
        modules[name] = {"area_um2": own_area.get(name, 0.0),
                         "cells": sum(n for t, n in by_type.items() if t not in children),
                         "flip_flops": _flops(leaf_generic), "children": children}
    return modules


_FIGURES = ("area_um2", "cells", "flip_flops")


def breakdown_blocks(modules: dict[str, dict], top: str,
                     paths: tuple[str, ...] | None = None) -> list[dict]:
    """Blocks of a hierarchy (see :func:`hierarchy`) whose figures sum to the top's inclusive ones.

    ``paths`` are instance paths below ``top`` (default: its children); each gets the figures of
    its instance with all descendants.  Every ancestor of a listed block gets a ``"<path>
    (rest)"`` entry (the top: ``"(top)"``) with its own cells and the children that neither are
    listed nor contain a listed block.  Listed blocks come first, in the given order; then the
    rest entries, innermost first.  A listed block that synthesis removed gets zeros.
    """
    def path(name):
        return name[len(top) + 1:] if name != top else ""

    @functools.cache
    def inclusive(name) -> tuple:
        m = modules[name]
        return tuple(m[f] + sum(n * inclusive(c)[k] for c, n in m["children"].items())
                     for k, f in enumerate(_FIGURES))

    if paths is None:
        paths = tuple(path(c) for c in modules[top]["children"])
    listed = set(paths)

    @functools.cache
    def holds_listed(name) -> bool:
        return any(path(c) in listed or holds_listed(c) for c in modules[name]["children"])

    found, rests = {}, []

    def visit(name):
        own = [modules[name][f] for f in _FIGURES]
        for child, n in modules[name]["children"].items():
            if path(child) in listed:
                found[path(child)] = [n * x for x in inclusive(child)]
            elif holds_listed(child):
                visit(child)
            else:
                own = [a + n * b for a, b in zip(own, inclusive(child))]
        rests.append((f"{path(name)} (rest)" if name != top else "(top)", own))

    visit(top)
    entries = [(p, found.get(p, [0.0, 0, 0])) for p in paths] + rests
    return [{"block": block, "area_um2": round(float(figures[0]), 6), "cells": int(figures[1]),
             "flip_flops": int(figures[2])} for block, figures in entries]


def _breakdown(top: str, hier: dict, paths) -> tuple[float, list[dict]]:
    """The hierarchical total (yosys' figure for the top) and its blocks, checked to sum to it."""
    total = re.findall(r"Chip area for top module '.*?':\s*([\d.]+)", hier["log"])
    modules = hierarchy(top, hier)
    blocks = breakdown_blocks(modules, top, paths)
    total = float(total[-1]) if total else modules[top]["area_um2"]
    summed = sum(b["area_um2"] for b in blocks)
    if abs(summed - total) > 1e-6 * max(total, 1.0) + 1e-3:
        raise FlowError(f"{top}: the breakdown's blocks sum to {summed:.3f} µm² but yosys reports "
                        f"{total:.3f} µm² for the hierarchy; see {hier['log_path'].name}")
    return total, blocks


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
           "sta_script", "read_stat_json", "liberty_cell_areas", "nand2_area", "module_names", "check_breakdown_paths",
           "hierarchy", "breakdown_blocks", "breakdown_markdown", "block_label", "group_blocks",
           "YosysPhases", "TIMES"]

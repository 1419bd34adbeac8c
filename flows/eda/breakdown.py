"""Area per block of a hierarchical synthesis: ``area(..., breakdown=True)`` of
:mod:`flows.eda.synth`, ``trainfab area UNIT --breakdown``.

The synthesis recipe without ``-flatten`` maps every module on its own (Amaranth writes one
module per submodule instance, named by its hierarchical path: instance ``core`` of
``fpraker_pe`` is module ``fpraker_pe.core``), and ``stat -liberty`` gives each module's own cell
area.  Blocks are the unit's :attr:`flows.declare.SynthPlan.breakdown` paths, else the top's
child instances; a block's area includes its descendants, and every ancestor of a block (the top
included) gets a ``(rest)`` entry with its own cells and its other children, so the entries sum
to the hierarchical total.  That total differs from the flattened area (nothing is optimized
across module boundaries, and ABC maps each module on its own); the flattened numbers stay the
unit's figures.
"""

import fnmatch
import functools
import re

from .. import FlowError
from ..registry import Unit


def _flops(cells_by_type: dict) -> int:
    """The flip-flops among cells counted by type (the cells whose name has ``DFF``)."""
    return sum(n for cell, n in cells_by_type.items() if "DFF" in cell)


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


__all__ = ["module_names", "block_label", "group_blocks", "check_breakdown_paths", "hierarchy",
           "breakdown_blocks"]

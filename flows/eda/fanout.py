"""Buffer trees on the high-fanout nets of a mapped netlist (``--max-fanout N``).

yosys + ABC map logic without placement: ABC buffers the nets *inside* the logic it maps
(``buffer -p``), but the nets a flip-flop drives are inputs of ABC's network and stay as
yosys connected them.  A register that selects a wide multiplexer (a buffer read pointer, a
valid bit, a mode) then drives hundreds or thousands of cell pins from one small flip-flop,
and OpenSTA times that flip-flop's output at tens of nanoseconds.  A placement-aware flow would
insert a buffer tree there.  :func:`buffer_fanout` does the same on the netlist text: every net
driven by a cell output with more than ``max_fanout`` cell-input loads gets a tree of the
liberty's strongest buffer (:func:`strongest_buffer`), each buffer driving at most
``max_fanout`` pins, the tree ``ceil(log_max_fanout(loads))`` levels deep.  Nets driven by
top-level inputs (ideal drivers in the timing script) and the clock are left alone.

``trainfab area`` and ``close`` report the netlist as mapped unless given ``--max-fanout N``;
``trainfab paths --max-fanout N`` times the same register pairs on both netlists, to show how
much of a path is the missing buffering rather than the design.  Wire capacitance is not
modelled in either (no placement), so the buffered figure is what the cells alone allow.

The netlist is ``write_verilog -noattr -noexpr -simple-lhs`` output: one cell instance per
``TYPE NAME (`` line, one ``.PIN(NET)`` connection per line, no ``assign``.
"""

from __future__ import annotations

import re
from pathlib import Path

from .. import FlowError

_INSTANCE = re.compile(r"^\s*([A-Za-z_][\w$]*)\s+(\\\S+|[A-Za-z_][\w$]*)\s*\(\s*$")
_PIN = re.compile(r"^(\s*\.)(\w+)\((.*)\)(,?)\s*$")


#: ``--max-fanout`` range
MAX_FANOUT_RANGE = (2, 10_000)


def check_max_fanout(max_fanout) -> None:
    """``max_fanout``: ``None`` (no buffer trees) or an integer in :data:`MAX_FANOUT_RANGE`
    (:class:`FlowError` otherwise)."""
    lo, hi = MAX_FANOUT_RANGE
    if max_fanout is not None and (isinstance(max_fanout, bool) or not isinstance(max_fanout, int)
                                   or not lo <= max_fanout <= hi):
        raise FlowError(f"--max-fanout {max_fanout}: must be an integer from {lo} to {hi:,}")


def strongest_buffer(cells: dict) -> tuple[str, str, str, float]:
    """``(cell, input pin, output pin, area)`` of the largest non-clock buffer (one input, one
    output whose function is that input) of ``cells``
    (:func:`flows.eda.power_cells.cell_summaries`)."""
    best = None
    for name, cell in cells.items():
        pins = cell["pins"]
        ins = [p for p, (d, _) in pins.items() if d == "input"]
        outs = [p for p, (d, _) in pins.items() if d == "output"]
        if ("CLK" in name.upper() or len(ins) != 1 or len(outs) != 1
                or pins[outs[0]][1] != ins[0]):
            continue
        if best is None or cell["area"] > best[3]:
            best = (name, ins[0], outs[0], cell["area"])
    if best is None:
        raise FlowError("the liberty has no buffer cell")
    return best


def buffer_fanout(netlist: str, lib: Path, max_fanout: int,
                  keep: tuple[str, ...] = ("clk",)) -> tuple[str, dict]:
    """``netlist`` with a buffer tree on every cell-driven net of more than ``max_fanout``
    cell-input loads (nets in ``keep`` untouched), and what was added: ``buffer`` (cell),
    ``nets`` (nets buffered), ``buffers`` (cells added), ``area_um2`` (their area) and
    ``largest_fanout`` (the most loads a net had before)."""
    from .power_cells import cell_summaries

    check_max_fanout(max_fanout)
    if "_fanout_buf" in netlist:
        raise FlowError("the netlist already has fanout buffer trees")
    lines = netlist.splitlines()
    cells = set()
    for line in lines:
        m = _INSTANCE.match(line)
        if m:
            cells.add(m.group(1))
    if not cells:
        raise FlowError("the netlist has no cell instances")
    library = cell_summaries(lib)
    missing = sorted(cells - set(library))
    if missing:
        raise FlowError(f"liberty {lib} has no cell {missing[0]} (used by the netlist)")
    buf, buf_in, buf_out, buf_area = strongest_buffer(library)
    directions = {c: {p: d for p, (d, _) in library[c]["pins"].items()} for c in cells}
    loads: dict[str, list[int]] = {}
    driven: set[str] = set()
    first_instance, current = None, None
    for k, line in enumerate(lines):
        m = _INSTANCE.match(line)
        if m:
            current = m.group(1)
            first_instance = k if first_instance is None else first_instance
            continue
        p = _PIN.match(line)
        if p is None or current is None:
            continue
        net = p.group(3).strip()
        if not net or "'" in net:          # constants
            continue
        direction = directions[current].get(p.group(2))
        if direction == "input":
            loads.setdefault(net, []).append(k)
        elif direction == "output":
            driven.add(net)
    used = set(re.findall(r"_fanout\d+_", netlist))
    added, wires, nets, count, levels = [], [], 0, 0, 0
    largest = max((len(v) for v in loads.values()), default=0)
    for net, pins in loads.items():
        if net in keep or net not in driven or len(pins) <= max_fanout:
            continue
        nets += 1
        level = pins                        # line numbers (or new buffers) still to drive
        depth = 0
        while len(level) > max_fanout:
            depth += 1
            parents = []
            for start in range(0, len(level), max_fanout):
                count += 1
                wire = f"_fanout{count}_"
                while wire in used:
                    count += 1
                    wire = f"_fanout{count}_"
                wires.append(f"  wire {wire};")
                for item in level[start:start + max_fanout]:
                    if isinstance(item, int):
                        p = _PIN.match(lines[item])
                        lines[item] = f"{p.group(1)}{p.group(2)}({wire}){p.group(4)}"
                    else:
                        item["in"] = wire
                node = {"out": wire, "in": None}
                added.append(node)
                parents.append(node)
            level = parents
        levels = max(levels, depth)
        for item in level:
            if not isinstance(item, int):
                item["in"] = net
    if not added:
        return netlist, {"buffer": buf, "nets": 0, "buffers": 0, "area_um2": 0.0,
                         "largest_fanout": largest, "levels": 0}
    end = max(k for k, line in enumerate(lines) if line.strip() == "endmodule")
    # an escaped identifier ends at white space
    name = lambda net: net + " " if net.startswith("\\") else net
    instances = [f"  {buf} _fanout_buf{k}_ (\n    .{buf_in}({name(node['in'])}),\n"
                 f"    .{buf_out}({node['out']})\n  );" for k, node in enumerate(added, 1)]
    out = lines[:first_instance] + wires + lines[first_instance:end] + instances + lines[end:]
    return "\n".join(out) + "\n", {
        "buffer": buf, "nets": nets, "buffers": len(added),
        "area_um2": round(len(added) * buf_area, 3), "largest_fanout": largest,
        "levels": levels}


__all__ = ["MAX_FANOUT_RANGE", "check_max_fanout", "strongest_buffer", "buffer_fanout"]

"""Simulation models of standard cells, generated from a liberty file's logic functions, and
the cell instances of a mapped netlist (:func:`power_netlist`).

:func:`cell_models` writes one behavioural Verilog module per cell a mapped netlist uses, from
the liberty's own description of the cell: each output pin's ``function`` (and
``three_state``), ``ff`` groups (``next_state``, ``clocked_on``, ``clear``, ``preset``) and
``latch`` groups (``data_in``, ``enable``, ``clear``, ``preset``).  The models have no delays:
a gate-level simulation with them is zero-delay, so it shows every functional transition of
every net, and no glitches.  They are the same logic the synthesis tools mapped onto (yosys'
``abc -liberty`` and ``dfflibmap`` read these functions), work with Icarus and Verilator
alike, and work for any liberty given with ``--liberty``.

Liberty expressions: ``!x`` and ``x'`` (not), ``^`` (xor), ``&``, ``*`` or a space (and),
``|`` or ``+`` (or), parentheses, ``0``/``1``; precedence in that order, highest first.
A cell with bus or bundle pins, or an output without a function, cannot be modelled
(:class:`~flows.FlowError` naming it).
"""

import re
from pathlib import Path

from .. import FlowError

_TOKEN = re.compile(r"\s*(?:([A-Za-z_][\w\[\].]*)|(\d)|(.))")


def _strip(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"\\\s*\n", " ", text)


def _body(text: str, start: int) -> tuple[str, int]:
    """The text between the brace at or after ``start`` and its match, and the end index."""
    open_at = text.index("{", start)
    depth, i = 0, open_at
    in_string = False
    while i < len(text):
        ch = text[i]
        if ch == '"':
            in_string = not in_string
        elif not in_string:
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    return text[open_at + 1:i], i + 1
        i += 1
    raise FlowError("liberty file: unbalanced braces")


def _groups(body: str, kind: str):
    """``(argument text, body)`` of every ``kind (...) { ... }`` group directly in ``body``."""
    found, pos = [], 0
    pattern = re.compile(r"\b" + kind + r"\s*\(([^)]*)\)\s*\{")
    while True:
        m = pattern.search(body, pos)
        if m is None:
            return found
        inner, end = _body(body, m.end() - 1)
        found.append((m.group(1).strip().strip('"'), inner))
        pos = end


def _top_level(body: str) -> str:
    """``body`` without its nested groups (only its own attributes)."""
    out, depth = [], 0
    for ch in body:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def _attr(body: str, name: str) -> str | None:
    m = re.search(r"\b" + name + r"\s*:\s*(\"[^\"]*\"|[^;]*);", _top_level(body))
    return m.group(1).strip().strip('"') if m else None


def expression(text: str, names: set[str]) -> str:
    """A liberty boolean function as a Verilog expression over ``names``."""
    tokens = []
    for ident, digit, other in _TOKEN.findall(text):
        tokens.append(ident or digit or other)
    tokens = [t for t in tokens if t.strip()]
    pos = 0

    def peek():
        return tokens[pos] if pos < len(tokens) else None

    def take():
        nonlocal pos
        if pos >= len(tokens):
            raise ValueError("unexpected end")
        pos += 1
        return tokens[pos - 1]

    def primary():
        t = take() if peek() is not None else None
        if t == "(":
            e = or_()
            if take() != ")":
                raise ValueError("missing )")
            node = f"({e})"
        elif t == "!":
            node = f"(~{primary()})"
        elif t in ("0", "1"):
            node = f"1'b{t}"
        elif t is not None and re.match(r"[A-Za-z_]", t):
            if t not in names:
                raise ValueError(f"unknown pin {t}")
            node = t
        else:
            raise ValueError(f"unexpected {t!r}")
        while peek() == "'":
            take()
            node = f"(~{node})"
        return node

    def xor_():
        e = primary()
        while peek() == "^":
            take()
            e = f"({e} ^ {primary()})"
        return e

    def and_():
        e = xor_()
        while peek() is not None and (peek() in ("&", "*", "(", "!", "0", "1")
                                      or re.match(r"[A-Za-z_]", peek())):
            if peek() in ("&", "*"):
                take()
            e = f"({e} & {xor_()})"
        return e

    def or_():
        e = and_()
        while peek() in ("|", "+"):
            take()
            e = f"({e} | {and_()})"
        return e

    result = or_()
    if pos != len(tokens):
        raise ValueError(f"unexpected {tokens[pos]!r}")
    return result


def _cell_bodies(text: str):
    """``(name, body)`` of every ``cell`` group of a liberty's comment-stripped ``text``."""
    for m in re.finditer(r"\bcell\s*\(\s*\"?([^\s\")]+)\"?\s*\)\s*\{", text):
        yield m.group(1), _body(text, m.end() - 1)[0]


def cell_summaries(lib: Path) -> dict[str, dict]:
    """Every cell of the liberty: ``area`` (0 when missing) and ``pins`` (name → ``(direction,
    function)``; bus and bundle pins are not listed)."""
    text = _strip(Path(lib).read_text(errors="replace"))
    cells = {}
    for name, body in _cell_bodies(text):
        pins = {}
        for names, pin in _groups(body, "pin"):
            for one in (n.strip().strip('"') for n in names.split(",")):
                pins[one] = (_attr(pin, "direction"), _attr(pin, "function"))
        cells[name] = {"area": float(_attr(body, "area") or 0), "pins": pins}
    return cells


def parse_cells(lib: Path, wanted: set[str]) -> dict[str, dict]:
    """The pins (name → direction, function, three_state) and storage groups of the cells
    named in ``wanted``; :class:`FlowError` for a cell the liberty lacks."""
    text = _strip(Path(lib).read_text(errors="replace"))
    cells = {}
    for cell, body in _cell_bodies(text):
        if cell not in wanted:
            continue
        if _groups(body, "bus") or _groups(body, "bundle"):
            raise FlowError(f"cell {cell} has bus or bundle pins, which the power flow's "
                            f"cell models do not support")
        pins = {}
        for name, pin in _groups(body, "pin"):
            for one in (n.strip().strip('"') for n in name.split(",")):
                pins[one] = {"direction": _attr(pin, "direction"),
                             "function": _attr(pin, "function"),
                             "three_state": _attr(pin, "three_state")}
        storage = []
        for kind in ("ff", "latch"):
            for args, group in _groups(body, kind):
                names = [a.strip().strip('"') for a in args.split(",")]
                storage.append({"kind": kind, "vars": names, **{
                    k: _attr(group, k) for k in ("next_state", "clocked_on", "data_in",
                                                 "enable", "clear", "preset")}})
        cells[cell] = {"pins": pins, "storage": storage}
    missing = sorted(wanted - set(cells))
    if missing:
        raise FlowError(f"liberty {lib} has no cell {missing[0]} (used by the netlist)")
    return cells


def _model(name: str, cell: dict) -> str:
    pins = cell["pins"]
    ports = list(pins)
    lines = [f"module {name} ({', '.join(ports)});"]
    for p in ports:
        direction = pins[p]["direction"]
        if direction not in ("input", "output", "inout"):
            raise FlowError(f"cell {name}: pin {p} has direction {direction!r}")
        lines.append(f"  {direction} {p};")
    names = set(ports)
    for s in cell["storage"]:
        names |= {v for v in s["vars"] if v}
    try:
        for k, s in enumerate(cell["storage"]):
            q, qn = (s["vars"] + [None, None])[:2]
            lines.append(f"  reg {q};")
            if qn:
                lines.append(f"  wire {qn} = ~{q};")
            clr = expression(s["clear"], names) if s["clear"] else None
            pre = expression(s["preset"], names) if s["preset"] else None
            if clr:
                lines.append(f"  wire tf_clr{k} = {clr};")
            if pre:
                lines.append(f"  wire tf_pre{k} = {pre};")
            if s["kind"] == "ff":
                lines.append(f"  wire tf_clk{k} = {expression(s['clocked_on'], names)};")
                lines.append(f"  wire tf_d{k} = {expression(s['next_state'], names)};")
                edges = [f"posedge tf_clk{k}"] + ([f"posedge tf_clr{k}"] if clr else []) + (
                    [f"posedge tf_pre{k}"] if pre else [])
                body = (f"if (tf_clr{k}) {q} <= 1'b0; else " if clr else "") + (
                    f"if (tf_pre{k}) {q} <= 1'b1; else " if pre else "") + f"{q} <= tf_d{k};"
                lines.append(f"  always @({' or '.join(edges)}) {body}")
            else:
                lines.append(f"  wire tf_en{k} = {expression(s['enable'], names)};")
                lines.append(f"  wire tf_d{k} = {expression(s['data_in'], names)};")
                body = (f"if (tf_clr{k}) {q} = 1'b0; else " if clr else "") + (
                    f"if (tf_pre{k}) {q} = 1'b1; else " if pre else "") + \
                    f"if (tf_en{k}) {q} = tf_d{k};"
                lines.append(f"  always @* begin {body} end")
        for p in ports:
            if pins[p]["direction"] == "input":
                continue
            func = pins[p]["function"]
            if func is None:
                raise FlowError(f"cell {name}: output {p} has no function to simulate")
            value = expression(func, names)
            if pins[p]["three_state"]:
                value = f"({expression(pins[p]['three_state'], names)}) ? 1'bz : {value}"
            lines.append(f"  assign {p} = {value};")
    except ValueError as e:
        raise FlowError(f"cell {name}: cannot read its liberty function ({e})") from None
    lines.append("endmodule\n")
    return "\n".join(lines)


def cell_models(lib: Path, cells: set[str]) -> tuple[str, dict[str, dict]]:
    """Verilog models of ``cells`` (``timescale 1ns/1ps``) and their parsed descriptions."""
    parsed = parse_cells(lib, set(cells))
    text = "`timescale 1ns/1ps\n// cell models generated by trainfab from " + \
        f"{Path(lib).name}\n\n" + "\n".join(_model(n, parsed[n]) for n in sorted(parsed))
    return text, parsed


# the cell instances of a mapped netlist (the power flow's and the co-simulation's)
_INSTANCE = re.compile(r"^\s*([A-Za-z_]\w*)\s+(\\\S+|[A-Za-z_][\w$]*)\s*\((.*?)\);", re.M | re.S)
_PIN = re.compile(r"\.(\w+)\s*\(\s*([^()]*?)\s*\)")


def power_netlist(text: str) -> tuple[str, list[dict]]:
    """The mapped netlist with every escaped instance name (``\\core.acc[3]_reg``) replaced by
    a plain one (``tf_ff0``), so that the VCD and OpenSTA name instances alike; and its cell
    instances (``cell``, ``name``, ``original``, ``pins``: pin → net)."""
    used = set(re.findall(r"[A-Za-z_]\w*", text))
    instances, out, pos, k = [], [], 0, 0
    for m in _INSTANCE.finditer(text):
        cell, name, body = m.groups()
        if cell in ("module", "input", "output", "wire", "assign", "inout", "reg"):
            continue
        new = name
        if name.startswith("\\"):
            while f"tf_ff{k}" in used:
                k += 1
            new, k = f"tf_ff{k}", k + 1
            out.append(text[pos:m.start(2)] + new)
            pos = m.end(2)
        instances.append({"cell": cell, "name": new, "original": name.lstrip("\\"),
                          "pins": dict(_PIN.findall(body))})
    out.append(text[pos:])
    return "".join(out), instances


__all__ = ["cell_models", "parse_cells", "cell_summaries", "expression", "power_netlist"]

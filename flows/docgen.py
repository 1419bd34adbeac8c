"""The documentation's tables, generated from the declarations (``trainfab docs``, ``make docs``).

The hand-written pages hold markers where a table belongs::

    <!-- trainfab docs: fields fpraker.pe -->
    …the generated table…
    <!-- end trainfab docs -->

and :func:`regenerate` replaces what lies between them with what the registry says today: the
README's unit table (``units``), the overview of ``docs/units.md`` (``overview``), each unit's
configuration fields with their defaults, allowed values and meaning (from the configuration
class: its defaults and validation, its ``#:`` field comments) and the configurations its tests
run (``fields UNIT[,UNIT…]``), and the ports of every unit at its paper configuration (from
the component's signature; ``ports``).  A test fails when a page is not what this module
generates, so the tables never drift from the code.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from . import FlowError, registry
from .declare import config_label

#: the pages that hold generated tables, relative to the repository
PAGES = ("README.md", "docs/units.md", "docs/interfaces.md")
_BLOCK = re.compile(r"(<!-- trainfab docs: (?P<key>[^>]*?) -->\n)(?P<body>.*?)"
                    r"(<!-- end trainfab docs -->)", re.S)


def _value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "none"
    if isinstance(v, str):
        return f'"{v}"'
    return str(v)


def units_table() -> str:
    lines = ["| unit | what it is |", "|---|---|"]
    for u in registry.units().values():
        lines.append(f"| `{u.name}` | {u.summary} |")
    return "\n".join(lines)


def overview_table() -> str:
    lines = ["| unit | summary (`trainfab list`) | configuration class | preset |",
             "|---|---|---|---|"]
    for u in registry.units().values():
        module, _, cls = u.config_path.partition(":")
        lines.append(f"| `{u.name}` | {u.summary} | `{cls}` (`{module}`) | "
                     f"{'`' + u.preset + '`' if u.preset else '—'} |")
    return "\n".join(lines)


def fields_table(names: list[str]) -> str:
    """The configuration fields of the first unit of ``names`` (they share a configuration
    class), then each unit's test configurations and demo configuration."""
    from .config import field_allowed, field_docs

    units = [registry.get(n) for n in names]
    unit = units[0]
    cls = unit.config_class()
    cfg = cls()
    docs = field_docs(cls)
    runtime = set(unit.runtime_fields)
    module, _, name = unit.config_path.partition(":")
    lines = [f"Configuration `{name}` (`{module}`); the defaults are the paper's:", "",
             "| field | default | allowed | meaning |", "|---|---|---|---|"]
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        allowed = field_allowed(cfg, f.name) or ""
        meaning = docs.get(f.name, "")
        if f.name in runtime:
            meaning += " *(run-time input of the hardware: the testbench's default)*"
        lines.append(f"| `{f.name}` | {_value(getattr(cfg, f.name))} | {allowed} | "
                     f"{meaning.replace('|', '/')} |")
    for u in units:
        lines.append("")
        label = f"`{u.name}` " if len(units) > 1 else ""
        tests = [f"`{config_label(c)}`" for c in u.tests.configs]
        full = [f"`{config_label(c)}`" for c in u.tests.full_configs]
        text = (f"{label}Regressed at the paper configuration"
                + (" (at `--effort full` only)" if u.tests.paper_effort == "full" else "")
                + (" and at " + ", ".join(tests) if tests else "")
                + ("; at `--effort full` also " + ", ".join(full) if full else "")
                + f". Synthesized in `make test` at `{config_label(u.synth.small) or 'its '}"
                + ("`" if u.synth.small else "paper configuration`") + ".")
        if u.showcase.demo is not None:
            text += f" `make demo` measures it at `{config_label(u.showcase.demo)}`."
        lines.append(text)
    return "\n".join(lines)


def _collapse(path: tuple) -> str:
    return "__".join("<i>" if isinstance(p, int) else str(p) for p in path)


def ports_tables() -> str:
    """Every unit's ports at its paper configuration: name (indexed members collapsed to
    ``<i>`` with their count), direction, width and, for struct-typed ports, the fields."""
    from amaranth.hdl import Shape
    from amaranth.lib import data
    from amaranth.lib.wiring import In

    from .config import load_config

    out = []
    for u in registry.units().values():
        component = u.component_factory()(load_config(u))
        rows: dict[tuple, int] = {}
        for path, member, _ in component.signature.flatten(component):
            shape = member.shape
            fields = ""
            if isinstance(shape, data.Layout):
                fields = ", ".join(str(name) for name, _ in shape)
            key = (_collapse(path), "in" if member.flow == In else "out",
                   Shape.cast(shape).width, fields)
            rows[key] = rows.get(key, 0) + 1
        out += [f"### `{u.name}` (`{u.top}`)", "", "| port | direction | bits | fields |",
                "|---|---|---|---|"]
        for (name, flow, width, fields), count in rows.items():
            shown = f"`{name}`" + (f" ×{count}" if count > 1 else "")
            out.append(f"| {shown} | {flow} | {width} | {fields} |")
        out.append("")
    return "\n".join(out).rstrip()


def block(key: str) -> str:
    """The generated text of one marker."""
    what, _, arg = key.partition(" ")
    if what == "units":
        return units_table()
    if what == "overview":
        return overview_table()
    if what == "fields":
        return fields_table(arg.split(","))
    if what == "ports":
        return ports_tables()
    raise FlowError(f"unknown generated table {key!r}")


def render(text: str) -> str:
    """``text`` with every marked block regenerated."""
    return _BLOCK.sub(lambda m: m.group(1) + block(m.group("key").strip()) + "\n" + m.group(4),
                      text)


def regenerate(root: Path, check: bool = False) -> list[str]:
    """Regenerate the pages under ``root`` (or, with ``check``, only compare); returns the
    pages that were (or would be) changed."""
    from .runs import write_atomic

    changed = []
    for page in PAGES:
        path = root / page
        text = path.read_text()
        if not _BLOCK.search(text):
            raise FlowError(f"{path}: no generated table (<!-- trainfab docs: … --> markers)")
        new = render(text)
        if new != text:
            changed.append(page)
            if not check:
                write_atomic(path, new)
    return changed


__all__ = ["PAGES", "units_table", "overview_table", "fields_table", "ports_tables", "block",
           "render", "regenerate"]

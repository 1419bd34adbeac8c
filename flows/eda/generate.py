"""Verilog generation: a unit and a configuration → Verilog text, port list and manifest."""

import hashlib
import json
import re
from pathlib import Path

from golden import config_dict

from .. import FlowError, build_dir
from ..registry import Unit
from .tools import versions


def build_component(unit: Unit, cfg, factory=None):
    """The Amaranth component of ``unit`` for ``cfg`` (``factory`` overrides the registry's).

    A component that refuses a valid configuration raises ``ValueError`` in its constructor
    (a golden-model option the RTL does not implement); that becomes a one-line
    :class:`FlowError`."""
    try:
        return (factory or unit.component_factory())(cfg)
    except ValueError as e:
        msg = str(e)
        prefix = f"{unit.name}: "
        raise FlowError(msg if msg.startswith(prefix) else prefix + msg) from None


def convert(unit: Unit, cfg, factory=None) -> tuple[str, dict]:
    """Verilog for ``unit`` at ``cfg`` and the bit fields of its struct-typed ports
    (:func:`port_fields`), from one build of the component."""
    from amaranth.back import verilog

    component = build_component(unit, cfg, factory)
    fields = _port_fields(component)
    return verilog.convert(component, name=unit.top, emit_src=False), fields


def to_verilog(unit: Unit, cfg, factory=None) -> str:
    """Verilog for ``unit`` at ``cfg``; the same configuration gives byte-identical text."""
    return convert(unit, cfg, factory)[0]


_PORT = re.compile(r"^\s*(input|output|inout)\s+(?:\[(\d+):(\d+)\]\s+)?\\?([\w$.]+)\s*;", re.M)


def ports(verilog_text: str, top: str) -> list[dict]:
    """Ports of module ``top`` as ``{"name", "direction", "width"}``, in declaration order."""
    start = verilog_text.index(f"module {top}(")
    body = verilog_text[start:verilog_text.index("endmodule", start)]
    return [{"name": name, "direction": d, "width": (int(hi) - int(lo) + 1) if hi else 1}
            for d, hi, lo, name in _PORT.findall(body)]


def _fields(layout) -> dict:
    """Field name → ``{"offset", "width"}`` (and nested ``fields`` / ``signed``) of a layout."""
    from amaranth.hdl import Shape
    from amaranth.lib import data

    out = {}
    for name, field in layout:
        entry = {"offset": field.offset, "width": field.width}
        if isinstance(field.shape, data.Layout):
            entry["fields"] = _fields(field.shape)
        elif Shape.cast(field.shape).signed:
            entry["signed"] = True
        out[str(name)] = entry
    return out


def _port_fields(component) -> dict:
    from amaranth.lib import data

    return {"__".join(map(str, path)): _fields(member.shape)
            for path, member, _ in component.signature.flatten(component)
            if isinstance(member.shape, data.Layout)}


def port_fields(unit: Unit, cfg, factory=None) -> dict:
    """Port name → the bit fields of every struct-typed port (``grp__payload``: ``a``, ``b``,
    ``clear`` …), from the component's signature: what a Verilog user needs to drive a payload
    port without reading the Amaranth source."""
    return convert(unit, cfg, factory)[1]


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def manifest(unit: Unit, cfg, verilog_text: str, fields: dict) -> dict:
    """The JSON description of a generated unit: configuration, ports (with the bit ``fields``
    of struct-typed ports, from :func:`convert`), tool versions and the Verilog's sha256."""
    port_list = ports(verilog_text, unit.top)
    for port in port_list:
        if port["name"] in fields:
            port["fields"] = fields[port["name"]]
    return {
        "unit": unit.name,
        "top": unit.top,
        "config_class": unit.config_path,
        "config": config_dict(cfg),
        "ports": port_list,
        "tools": versions(),
        "verilog_sha256": sha256(verilog_text),
    }


def default_outdir(unit: Unit) -> Path:
    return build_dir() / "generate" / unit.name


def generate(unit: Unit, cfg, outdir: Path | None = None) -> dict:
    """Write ``<top>.v`` and ``<top>.json`` (the manifest) into ``outdir``; return the manifest."""
    from ..runs import check_output, precheck, staged

    outdir = check_output(outdir or default_outdir(unit))
    names = (f"{unit.top}.v", f"{unit.top}.json")
    precheck(outdir, names)
    text, fields = convert(unit, cfg)
    man = manifest(unit, cfg, text, fields)
    # both files move in together: concurrent runs never leave a manifest beside other
    # Verilog; a folder may collect several units' Verilog
    with staged(outdir, names=names, last=names[1:], collection=True) as work:
        (work / f"{unit.top}.v").write_text(text)
        (work / f"{unit.top}.json").write_text(json.dumps(man, indent=2) + "\n")
    man["verilog"] = str(outdir / f"{unit.top}.v")
    return man


__all__ = ["build_component", "convert", "to_verilog", "ports", "port_fields", "sha256", "manifest",
           "generate"]

"""Configuration presets (``flows/configs/*.toml``) and ``--set field=value`` overrides.

A preset file holds one table per unit, keyed by the unit's dotted name::

    [fpraker.encoder]
    lanes = 8
    encoding = "csd"

Keys that are not fields of the unit's configuration class are errors, never ignored.  A file
that is not UTF-8 TOML, is nested too deeply for the parser or is a directory is an error of one
line naming the file.
"""

import dataclasses
import inspect
import re
import tomllib
from pathlib import Path

from golden import ConfigError

from . import HERE, FlowError
from .registry import Unit

CONFIG_DIR = HERE / "configs"


def presets() -> dict[str, Path]:
    """Preset name → file, for every ``flows/configs/*.toml``."""
    return {p.stem: p for p in sorted(CONFIG_DIR.glob("*.toml"))}


def preset_path(name_or_path: str) -> Path:
    """A preset name (``fpraker-paper``) or a path to a TOML file."""
    known = presets()
    if name_or_path in known:
        return known[name_or_path]
    path = Path(name_or_path)
    try:
        if path.is_dir():
            raise FlowError(f"{path} is a directory, not a TOML configuration file")
        if path.is_file():
            return path
    except OSError as e:
        raise FlowError(f"{path}: cannot read: {e.strerror or e}") from None
    raise FlowError(f"no configuration file or preset {name_or_path!r}; "
                    f"presets: {', '.join(known) or 'none'}")


#: dotted keys of more parts than this are refused before parsing: ``tomllib`` takes time and
#: memory quadratic in the number of parts of a key at the start of a line (a 100,000-part key,
#: a 200 kB file, needs tens of GB); configuration keys have one to three parts
MAX_KEY_PARTS = 100
_KEY_PART = r"""(?:[A-Za-z0-9_-]++|"(?:[^"\\\n]|\\.)*+"|'[^'\n]*+')"""
_LONG_DOTTED_KEY = re.compile(rf"^[ \t]*+(?:{_KEY_PART}[ \t]*+\.[ \t]*+){{{MAX_KEY_PARTS}}}",
                              re.MULTILINE)


def _parse_toml(text: str) -> dict:
    """``tomllib.loads``, raising ``ValueError`` (with a one-line reason) for anything it
    cannot parse: malformed TOML, nesting too deep for its recursive parser, integers of more
    than 4300 digits, overlong dotted keys."""
    long_key = _LONG_DOTTED_KEY.search(text)
    if long_key:
        line = text.count("\n", 0, long_key.start()) + 1
        raise ValueError(f"a dotted key of more than {MAX_KEY_PARTS} parts (line {line})")
    try:
        return tomllib.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except MemoryError:
        raise ValueError("too large to parse") from None


def read_toml(path: Path) -> dict:
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise FlowError(f"{path}: cannot read: {e.strerror or e}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise FlowError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start}); TOML files are "
                        "UTF-8") from None
    try:
        return _parse_toml(text)
    except ValueError as e:  # tomllib.TOMLDecodeError is a ValueError
        lines = str(e).splitlines() or [type(e).__name__]
        raise FlowError(f"{path}: malformed TOML: {lines[0]}") from None


def unit_table(doc: dict, unit: Unit, source=None):
    """The unit's table of a parsed TOML file (``[fpraker.encoder]``), ``None`` when the file
    has none; :class:`FlowError` (naming ``source``, the file) when a key on the way is a value,
    not a table (``fpraker.encoder = 3``)."""
    table, path = doc, []
    for part in unit.name.split("."):
        if part not in table:
            return None
        table = table[part]
        path.append(part)
        if not isinstance(table, dict):
            key = ".".join(path)
            where = f"{source}: " if source else ""
            raise FlowError(f"{where}{key} is a key with the value {_short(table)}, not a table: "
                            f"write the fields of {unit.name} under a [{unit.name}] table")
    return table


def parse_set(item: str) -> tuple[str, object]:
    """``field=value`` with a TOML value (``lanes=3``, ``sign_en=false``); bare words are strings."""
    key, sep, text = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise FlowError(f"--set {_short(item)}: expected field=value")
    try:
        value = _parse_toml(f"v = {text.strip()}")["v"]
    except (ValueError, KeyError):  # not a TOML value: a bare word
        value = text.strip()
    return key, value


def load_config(unit: Unit, config: str | None = None, sets=()):
    """Build the unit's configuration object.

    Starts from the class defaults (the paper's configuration), applies the unit's table from
    ``config`` (a preset name or TOML path; if ``None``, the unit's own preset when it has a
    table for the unit), then ``sets`` (``field=value`` strings).  Raises :class:`FlowError` for
    unknown fields, malformed files and invalid values.
    """
    cls = unit.config_class()
    names = [f.name for f in dataclasses.fields(cls)]
    values: dict = {}
    if config is not None:
        path = preset_path(config)
        table = unit_table(read_toml(path), unit, path)
        if table is None:
            raise FlowError(f"{path} has no [{unit.name}] table")
        source = str(path)
        values.update(table)
    else:
        path = presets().get(unit.preset)
        table = unit_table(read_toml(path), unit, path) if path else None
        source = str(path) if table is not None else "defaults"
        values.update(table or {})
    for key in values:
        if key not in names:
            raise FlowError(f"{source}: unknown field {_short(key)} for {unit.name}; "
                            f"fields: {', '.join(names)}")
    from_sets: dict[str, str] = {}
    for item in sets:
        key, value = parse_set(item)
        if key not in names:
            raise FlowError(f"--set {_label(key)}: unknown field for {unit.name}; "
                            f"fields: {', '.join(names)}")
        if key in from_sets:
            raise FlowError(f"--set {_label(key)}: given twice ({_label(from_sets[key])} and "
                            f"{_label(item.strip())}); set each field once")
        values[key] = value
        from_sets[key] = item.strip()
    try:
        return cls(**values)
    except ConfigError as e:
        # where the offending value came from, and the value cut to one short line
        where = f"--set {e.field}" if e.field in from_sets else source
        raise FlowError(f"{where}: {e.cls_name}.{e.field} = {_short(e.value)} is invalid: "
                        f"allowed {e.allowed}") from None


def refuse_runtime_sets(unit: Unit, sets, what: str) -> None:
    """``--set`` of a run-time input (a port of the hardware, not a parameter) cannot change
    ``what`` ("the area"): refuse it rather than report identical numbers as if it had."""
    for item in sets:
        key = parse_set(item)[0]
        if key in unit.runtime_fields:
            raise FlowError(f"--set {key}: {key} is a run-time input of {unit.name} (a port of the "
                            f"hardware), not a hardware parameter: it cannot change {what}")


def field_docs(cls) -> dict[str, str]:
    """Field name → its documentation: the ``#:`` comment lines right above the field in the
    class's source (of the class or a dataclass it extends), or, for a tile's fields
    (:func:`golden.common.tile.pe_tile_base`), the tile's ``__field_docs__`` and its PE class's
    comments; ``""`` when it has none."""
    names = {f.name for f in dataclasses.fields(cls)}
    docs: dict[str, str] = {}
    for klass in cls.__mro__:
        for name, text in vars(klass).get("__field_docs__", {}).items():
            docs.setdefault(name, text)
        pe = vars(klass).get("__pe_class__")
        if pe is not None:
            for name, text in field_docs(pe).items():
                if name in names and text:
                    docs.setdefault(name, text)
        if not dataclasses.is_dataclass(klass):
            continue
        try:
            lines = inspect.getsource(klass).splitlines()
        except (OSError, TypeError):
            continue
        pending: list[str] = []
        in_string = False
        for line in lines[1:]:
            text = line.strip()
            quotes = text.count('"""') + text.count("'''")
            if in_string or quotes:
                in_string = in_string != (quotes % 2 == 1)
                pending = []
                continue
            if text.startswith("#:"):
                pending.append(text[2:].strip())
                continue
            field = re.match(r"(\w+)\s*:(?!=)", text)
            if field and field.group(1) in names and field.group(1) not in docs:
                docs[field.group(1)] = " ".join(pending)
            pending = []
    return {name: docs.get(name, "") for name in names}


_NOT_A_VALUE = object()


def field_allowed(cfg, name: str) -> str | None:
    """What the configuration class's own validation allows for field ``name`` at ``cfg``'s
    other values ("an integer in 1..64", "one of 'csd', 'binary'"), found by offering it a
    value no field accepts; ``None`` when the class does not say."""
    for probe in (_NOT_A_VALUE, "\0"):
        try:
            dataclasses.replace(cfg, **{name: probe})
        except ConfigError as e:
            return e.allowed if e.field == name else None
        except Exception:  # a check that does not raise ConfigError for this value
            continue
        return None
    return None


def _toml_value(value) -> str:
    """A value as ``--set`` takes it: ``true``, ``8``, ``csd``; ``(none)`` for None."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "(none)"
    return str(value)


def _type_name(tp) -> str:
    return tp.__name__ if isinstance(tp, type) else str(tp).replace("typing.", "")


def describe_fields(unit: Unit) -> str:
    """``trainfab list UNIT``: the unit's configuration fields, each with its type, default
    (the unit's preset over the class defaults), allowed values and meaning."""
    cls = unit.config_class()
    cfg = load_config(unit)
    path = presets().get(unit.preset)
    source = (f"preset {unit.preset} ({path})" if path and unit_table(read_toml(path), unit)
              is not None else f"the defaults of {cls.__name__}")
    docs = field_docs(cls)
    lines = [f"{unit.name}: {unit.summary}",
             f"configuration {unit.config_path}; defaults: {source}",
             f"fields (set with --set FIELD=VALUE, or in a [{unit.name}] table of a --config "
             "file):"]
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        allowed = field_allowed(cfg, f.name)
        head = f"  {f.name} ({_type_name(f.type)}, default {_toml_value(getattr(cfg, f.name))})"
        if allowed:
            head += f": {allowed}"
        if f.name in unit.runtime_fields:
            head += " [run-time input of the hardware: the testbench's default value]"
        lines.append(head)
        if docs.get(f.name):
            lines.append(f"      {docs[f.name]}")
    return "\n".join(lines)


def _label(text: str) -> str:
    """A name as is when printable and short, else its (cut) repr."""
    return text if text.isprintable() and len(text) <= 80 else _short(text)


def _short(value, limit: int = 80) -> str:
    """``repr(value)`` on one line, cut to about ``limit`` characters."""
    try:
        text = repr(value)
    except (RecursionError, ValueError):  # deep nesting; an int of more than 4300 digits
        return f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[:limit - 1] + "…"


__all__ = ["CONFIG_DIR", "presets", "preset_path", "read_toml", "unit_table", "parse_set",
           "load_config", "refuse_runtime_sets", "field_docs", "field_allowed", "describe_fields"]

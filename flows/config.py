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


def unit_table(doc: dict, unit: Unit):
    table = doc
    for part in unit.name.split("."):
        if not isinstance(table, dict) or part not in table:
            return None
        table = table[part]
    return table if isinstance(table, dict) else None


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
        table = unit_table(read_toml(path), unit)
        if table is None:
            raise FlowError(f"{path} has no [{unit.name}] table")
        source = str(path)
        values.update(table)
    else:
        path = presets().get(unit.preset)
        table = unit_table(read_toml(path), unit) if path else None
        source = str(path) if table is not None else "defaults"
        values.update(table or {})
    for key in values:
        if key not in names:
            raise FlowError(f"{source}: unknown field {_short(key)} for {unit.name}; "
                            f"fields: {', '.join(names)}")
    from_sets = set()
    for item in sets:
        key, value = parse_set(item)
        if key not in names:
            raise FlowError(f"--set {_label(key)}: unknown field for {unit.name}; "
                            f"fields: {', '.join(names)}")
        values[key] = value
        from_sets.add(key)
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
           "load_config", "refuse_runtime_sets"]

"""Configuration presets (``flows/configs/*.toml``) and ``--set field=value`` overrides.

A preset file holds one table per unit, keyed by the unit's dotted name::

    [fpraker.encoder]
    lanes = 8
    encoding = "csd"

Keys that are not fields of the unit's configuration class are errors, never ignored.
"""

import dataclasses
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
    if path.is_file():
        return path
    raise FlowError(f"no configuration file or preset {name_or_path!r}; "
                    f"presets: {', '.join(known) or 'none'}")


def read_toml(path: Path) -> dict:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise FlowError(f"{path}: malformed TOML: {e}") from None
    except OSError as e:
        raise FlowError(f"{path}: cannot read: {e.strerror}") from None


def _unit_table(doc: dict, unit: Unit):
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
        raise FlowError(f"--set {item!r}: expected field=value")
    try:
        value = tomllib.loads(f"v = {text.strip()}")["v"]
    except tomllib.TOMLDecodeError:
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
        table = _unit_table(read_toml(path), unit)
        if table is None:
            raise FlowError(f"{path} has no [{unit.name}] table")
        source = str(path)
        values.update(table)
    else:
        path = presets().get(unit.preset)
        table = _unit_table(read_toml(path), unit) if path else None
        source = str(path) if table is not None else "defaults"
        values.update(table or {})
    for key in values:
        if key not in names:
            raise FlowError(f"{source}: unknown field {key!r} for {unit.name}; "
                            f"fields: {', '.join(names)}")
    for item in sets:
        key, value = parse_set(item)
        if key not in names:
            raise FlowError(f"--set {key}: unknown field for {unit.name}; fields: {', '.join(names)}")
        values[key] = value
    try:
        return cls(**values)
    except ConfigError as e:
        raise FlowError(str(e)) from None


__all__ = ["CONFIG_DIR", "presets", "preset_path", "read_toml", "parse_set", "load_config"]

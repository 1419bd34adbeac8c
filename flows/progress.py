"""Progress of long runs: bars with the time left, phase lines, elapsed times, and the last
run's time as an estimate.

- :func:`bar` — a tqdm bar on standard error (``with bar(total, desc, unit) as b: b.update()``),
  silent when the stream is not a terminal, so logs and pipes get no carriage-return noise.
- :func:`echo` — a log line on standard output that leaves any bar on the terminal intact.
- :class:`Phases` — the phases of one long step (``fpraker.tile: abc mapping (3 min; last time
  31 min) …``): one plain line per phase; on a terminal the current line's elapsed time ticks.
- :func:`elapsed` — ``12 s``, ``31 min``, ``1 h 5 min``.
- :class:`Timings` — the last run's time of a task, by a key and a configuration, in a small
  JSON file (the estimate printed by the next run).

Every clock and stream can be injected (tests use fake ones; nothing depends on wall time).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import time
from pathlib import Path

#: the width of bars when the terminal reports none (a bare pty says 0 columns)
DEFAULT_COLUMNS = 100
#: bars never get wider than this
MAX_COLUMNS = 120


def interactive(stream=None) -> bool:
    """Whether ``stream`` (default standard error) is a terminal."""
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # no isatty, or a closed stream
        return False


def columns() -> int:
    """The bar width: the terminal's, :data:`DEFAULT_COLUMNS` when it reports 0 columns."""
    cols = shutil.get_terminal_size((DEFAULT_COLUMNS, 24)).columns or DEFAULT_COLUMNS
    return min(cols, MAX_COLUMNS)


def elapsed(seconds: float) -> str:
    """A duration for people: ``12 s`` (under 90 s), ``31 min``, ``1 h 5 min``."""
    seconds = max(0, round(seconds))
    if seconds < 90:
        return f"{seconds} s"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{minutes} min"
    hours, rest = divmod(minutes, 60)
    return f"{hours} h" + (f" {rest} min" if rest else "")


# --------------------------------------------------------------------------------------------
# bars

#: the bars currently shown (so that :func:`echo` and :class:`Phases` write around them)
_LIVE: list = []

DEFAULT_FORMAT = "{desc} {percentage:3.0f}%|{bar:20}| {n_fmt}/{total_fmt} {unit} [{elapsed}<{remaining}]{postfix}"


class Bar:
    """A progress bar (tqdm) or, when disabled, an object that does nothing.  A context
    manager; :meth:`close` is idempotent."""

    def __init__(self, total, desc: str = "", unit: str = "it", *, stream=None,
                 enabled: bool = True, position: int | None = None, bar_format: str | None = None,
                 leave: bool = True):
        self.stream = sys.stderr if stream is None else stream
        self.enabled = enabled and interactive(self.stream)
        self.bar = None
        if self.enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc=desc, unit=unit, file=self.stream, leave=leave,
                            position=position, ncols=columns(), dynamic_ncols=False,
                            bar_format=bar_format or DEFAULT_FORMAT)
            _LIVE.append(self)

    @property
    def n(self) -> float:
        return self.bar.n if self.bar is not None else 0

    def update(self, n: float = 1) -> None:
        if self.bar is not None:
            self.bar.update(n)

    def set(self, n: float, postfix: str | None = None) -> None:
        """Move to ``n`` (a fraction of a unit is fine) with ``postfix`` after the bar."""
        if self.bar is not None:
            self.bar.n = n
            if postfix is not None:
                self.bar.set_postfix_str(postfix, refresh=False)
            self.bar.refresh()

    def set_total(self, total) -> None:
        """Change the bar's total (a run that learns its size once it has started)."""
        if self.bar is not None and self.bar.total != total:
            self.bar.total = total
            self.bar.refresh()

    def set_postfix(self, text: str | None = None, **fields) -> None:
        """The text after the bar: ``text``, or ``key=value`` pairs."""
        if self.bar is not None:
            if text is not None:
                self.bar.set_postfix_str(text)
            else:
                self.bar.set_postfix(**fields)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
            if self in _LIVE:
                _LIVE.remove(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def bar(total, desc: str = "", unit: str = "it", **kwargs) -> Bar:
    """A :class:`Bar` of ``total`` ``unit`` s on standard error (or ``stream=``); silent when
    that stream is not a terminal or ``enabled=False``."""
    return Bar(total, desc, unit, **kwargs)


def bars_shown() -> bool:
    return bool(_LIVE)


def echo(line: str = "", stream=None) -> None:
    """Print ``line`` (standard output by default) and flush; with a bar on the terminal, the
    line goes above the bars (tqdm's ``write``) so neither is cut."""
    stream = sys.stdout if stream is None else stream
    if _LIVE:
        from tqdm import tqdm

        tqdm.write(line, file=stream)
        stream.flush()
    else:
        print(line, file=stream, flush=True)


def phase(label: str, stream=None) -> None:
    """One line for a long single step: ``label …``."""
    echo(f"{label} …", stream)


class Phases:
    """The phases of one long step, each announced as it starts with the time since the step
    began (and the last run's time, when known): ``PREFIX: LABEL (DETAIL, 12 s; last time 31
    min) …``.  Not a terminal (or a bar on it): one plain line per phase.  A terminal: the same
    lines, the current one rewritten in place by :meth:`tick` as the time goes by."""

    def __init__(self, prefix: str, *, estimate: float | None = None, stream=None,
                 clock=time.monotonic, enabled: bool = True):
        self.prefix, self.estimate, self.clock, self.enabled = prefix, estimate, clock, enabled
        self.stream = sys.stdout if stream is None else stream
        self.start_time = clock()
        self.current: tuple | None = None
        self.open = False            # a terminal line without its newline yet

    def _line(self) -> str:
        label, detail = self.current
        when = elapsed(self.clock() - self.start_time)
        if self.estimate is not None:
            when += f"; last time {elapsed(self.estimate)}"
        return f"{self.prefix}: {label} ({detail + ', ' if detail else ''}{when}) …"

    def _live(self) -> bool:
        return interactive(self.stream) and not _LIVE

    def start(self, label: str, detail: str | None = None) -> None:
        """Announce a phase (nothing when it is the current one)."""
        if not self.enabled or (label, detail) == self.current:
            return
        self._end_line()
        self.current = (label, detail)
        if self._live():
            self.stream.write("\r\x1b[K" + self._line())
            self.stream.flush()
            self.open = True
        else:
            echo(self._line(), self.stream)

    def tick(self) -> None:
        """On a terminal, rewrite the current phase's line with the time now."""
        if self.enabled and self.open and self.current is not None and self._live():
            self.stream.write("\r\x1b[K" + self._line())
            self.stream.flush()

    def _end_line(self) -> None:
        if self.open:
            self.stream.write("\n")
            self.stream.flush()
            self.open = False

    def close(self) -> None:
        self._end_line()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


# --------------------------------------------------------------------------------------------
# the last run's time


def config_key(obj) -> str:
    """A short stable key of a JSON-able configuration (sorted keys; 16 hex digits)."""
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class Timings:
    """The last run's seconds of each task, in ``path``:

    ``{"version": 1, "tasks": {NAME: {"last": {"config": KEY, "seconds": S},
    "configs": {KEY: S, …}}}}``

    :meth:`estimate` prefers the same configuration's time, else the task's last run at any
    configuration.  An unreadable file counts as empty; a file that cannot be written is
    skipped (an estimate is never worth failing a run)."""

    VERSION = 1
    #: configurations kept per task (the oldest go first)
    KEEP = 64

    def __init__(self, path):
        self.path = Path(path)

    def read(self) -> dict:
        try:
            data = json.loads(self.path.read_text())
            if isinstance(data, dict) and data.get("version") == self.VERSION \
                    and isinstance(data.get("tasks"), dict):
                return data
        except (OSError, ValueError):
            pass
        return {"version": self.VERSION, "tasks": {}}

    def estimate(self, name: str, key: str) -> tuple[float | None, bool]:
        """``(seconds, same_configuration)``; ``(None, False)`` for a task never run."""
        task = self.read()["tasks"].get(name)
        if not isinstance(task, dict):
            return None, False
        same = task.get("configs", {}).get(key)
        if isinstance(same, (int, float)):
            return float(same), True
        last = task.get("last", {}).get("seconds")
        return (float(last), False) if isinstance(last, (int, float)) else (None, False)

    def record(self, name: str, key: str, seconds: float) -> None:
        from . import FlowError
        from .runs import write_atomic

        data = self.read()
        task = data["tasks"].setdefault(name, {})
        if not isinstance(task, dict):
            task = data["tasks"][name] = {}
        configs = task.get("configs") if isinstance(task.get("configs"), dict) else {}
        configs.pop(key, None)
        configs[key] = round(float(seconds), 2)
        while len(configs) > self.KEEP:
            configs.pop(next(iter(configs)))
        task["configs"] = configs
        task["last"] = {"config": key, "seconds": round(float(seconds), 2)}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(self.path, json.dumps(data, indent=1, sort_keys=True) + "\n")
        except (OSError, FlowError):
            pass


__all__ = ["interactive", "columns", "elapsed", "Bar", "bar", "bars_shown", "echo", "phase",
           "Phases", "config_key", "Timings", "DEFAULT_COLUMNS"]

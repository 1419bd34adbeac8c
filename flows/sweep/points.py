"""One point of a sweep, the same function locally and on Dask workers, and the resumable
store of finished points (``results.jsonl``)."""

import json
import os
import socket
import time
from pathlib import Path

from .. import FlowError
from .plan import MEASURES, SYNTH_MEASURES

# --------------------------------------------------------------------------------------------
# one point: the same function locally and on Dask workers


def compute_point(task: dict) -> dict:
    """Measure one point; returns its record (never raises for a failing point: the error goes
    into the record).  ``task`` holds only plain data: ``unit`` (name), ``config`` (dict),
    ``clock_ns``, ``liberty``, ``measures``, ``seed``, ``effort``, ``outdir``, ``hash``."""
    from .. import registry

    start = time.monotonic()
    rec = {"hash": task["hash"], "measures": {}, "error": None}
    try:
        unit = registry.get(task["unit"])
        cfg = unit.make_config(None, **task["config"])
        outdir = Path(task["outdir"])
        outdir.mkdir(parents=True, exist_ok=True)
        if any(m in SYNTH_MEASURES for m in task["measures"]):
            from ..eda.synth import area

            r = area(unit, cfg, liberty=task["liberty"], clock_ns=task["clock_ns"], outdir=outdir,
                     progress=False)   # the sweep's own lines and bar say where it is
            for m in SYNTH_MEASURES:
                if m in task["measures"]:
                    rec["measures"].update({c: r.get(c) for c in MEASURES[m]})
            rec["verilog_sha256"] = r["verilog_sha256"]
            rec["tools"] = r["tools"]
        if "regress" in task["measures"]:
            from ..eda.simulate import run_testbench

            res = run_testbench(unit, cfg, seed=task["seed"], effort=task["effort"],
                                build_root=outdir)
            rec["measures"].update(passed=res.passed, tests=res.tests, failed=res.failed)
            rec["log"] = str(res.log)
    except Exception as e:  # recorded in the point's row; the sweep goes on
        rec["error"] = str(e) if isinstance(e, FlowError) else f"{type(e).__name__}: {e}"
    rec["seconds"] = round(time.monotonic() - start, 2)
    rec["host"] = socket.gethostname()
    rec["pid"] = os.getpid()
    return rec


# --------------------------------------------------------------------------------------------
# results.jsonl


def read_results(path: Path) -> dict[str, dict]:
    """Point hash → its last record in ``results.jsonl``; unreadable lines (a truncated last
    line from a killed run) are ignored."""
    done = {}
    try:
        text = path.read_text()
    except FileNotFoundError:
        return done
    for line in text.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and "hash" in rec:
            done[rec["hash"]] = rec
    return done


class ResultLog:
    """Appends one JSON line per finished point, durably (flush + fsync)."""

    def __init__(self, path: Path):
        # cut a truncated last line, so that the next record starts on a line of its own
        if path.exists():
            data = path.read_bytes()
            if data and not data.endswith(b"\n"):
                with open(path, "r+b") as f:
                    f.truncate(data.rfind(b"\n") + 1)
        self.path = path
        try:  # never through a symbolic link
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        except OSError as e:
            raise FlowError(f"cannot write {path}: {e.strerror or e}") from None
        self.f = os.fdopen(fd, "a", encoding="utf-8")

    def append(self, rec: dict) -> None:
        try:
            self.f.write(json.dumps(rec, ensure_ascii=False, default=str) + "\n")
            self.f.flush()
            os.fsync(self.f.fileno())
        except OSError as e:
            raise FlowError(f"cannot write {self.path}: {e.strerror or e}") from None

    def close(self) -> None:
        self.f.close()

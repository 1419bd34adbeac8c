"""Progress of a yosys run: its phases from its log as it grows (:func:`flows.eda.synth.area`
announces them on :class:`flows.progress.Phases`)."""

import re
import threading
from pathlib import Path


#: yosys passes inside ``synth`` → the phase they belong to; phases only move forward (the
#: ``opt`` passes between later steps do not take a run back to "coarse")
SYNTH_STAGES = (("elaborate", ("HIERARCHY", "PROC")), ("flatten", ("FLATTEN",)),
                ("coarse", ("OPT", "OPT_EXPR", "OPT_CLEAN", "CHECK", "FSM", "WREDUCE", "PEEPOPT",
                            "ALUMACC", "SHARE")),
                ("memory", ("MEMORY", "MEMORY_MAP")), ("techmap", ("TECHMAP",)),
                ("abc -fast", ("ABC",)))
#: top-level passes of :func:`flows.eda.synth.yosys_script` → the phase they start
TOP_STAGES = (("yosys read", ("VERILOG-2005", "VERILOG")), ("yosys synth", ("SYNTH",)),
              ("flip-flop mapping", ("DFFLEGALIZE", "DFFLIBMAP")), ("abc mapping", ("ABC",)),
              ("yosys netlist", ("SPLITNETS", "OPT_CLEAN", "STATISTICS", "VERILOG BACKEND")))

_HEADER = re.compile(r"^(\d+(?:\.\d+)*)\. (?:Executing (\S+)(?: (backend))?|Printing (statistics))",
                     re.M)


def _rank(stages, name: str) -> int | None:
    return next((i for i, (_, names) in enumerate(stages) if name in names), None)


class YosysPhases:
    """The phase a yosys run of :func:`flows.eda.synth.yosys_script` is in, from the pass
    headers of its log (``2.3. Executing FLATTEN pass``, ``5. Executing ABC pass``).
    :meth:`feed` takes the log's text as it grows (any pieces) and returns the phase,
    ``(label, detail)``, when it changed."""

    def __init__(self, prefix: str = ""):
        self.prefix, self.top, self.sub = prefix, None, None
        self.rest = ""

    def phase(self) -> tuple[str, str | None] | None:
        if self.top is None:
            return None
        label = self.prefix + TOP_STAGES[self.top][0]
        detail = (SYNTH_STAGES[self.sub][0] if TOP_STAGES[self.top][0] == "yosys synth"
                  and self.sub is not None else None)
        return label, detail

    def feed(self, text: str) -> tuple[str, str | None] | None:
        before = self.phase()
        text, cut = self.rest + text, None
        if not text.endswith("\n"):
            cut = text.rfind("\n") + 1
            text, self.rest = text[:cut], text[cut:]
        else:
            self.rest = ""
        for m in _HEADER.finditer(text):
            level = m.group(1).count(".") + 1
            name = (m.group(2) or "").upper()
            if m.group(3):
                name += " BACKEND"
            elif m.group(4):
                name = "STATISTICS"
            if level == 1:
                rank = _rank(TOP_STAGES, name)
                if rank is not None and (self.top is None or rank > self.top):
                    self.top, self.sub = rank, None
            elif level == 2 and self.top is not None and TOP_STAGES[self.top][0] == "yosys synth":
                rank = _rank(SYNTH_STAGES, name)
                if rank is not None and (self.sub is None or rank > self.sub):
                    self.sub = rank
        now = self.phase()
        return now if now != before else None


class _LogWatch:
    """While a tool runs, a thread that reads its growing log every ``interval`` seconds and
    announces its phases on ``phases`` (:class:`flows.progress.Phases`); ticks in between."""

    def __init__(self, log: Path, phases, parser: YosysPhases, interval: float = 1.0):
        self.log, self.phases, self.parser, self.interval = log, phases, parser, interval
        self.offset, self.stop = 0, threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def poll(self) -> None:
        try:
            with open(self.log, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:
            data = b""
        self.offset += len(data)
        got = self.parser.feed(data.decode(errors="replace")) if data else None
        if got is not None:
            self.phases.start(*got)
        else:
            self.phases.tick()

    def _loop(self) -> None:
        while not self.stop.wait(self.interval):
            self.poll()

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()
        return False


__all__ = ["YosysPhases", "SYNTH_STAGES", "TOP_STAGES"]

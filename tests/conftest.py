"""Shared pytest options: ``--seed`` reproduces a testbench run, ``--sim`` picks the simulator
(default: each unit's own), ``--effort`` sizes the testbenches and picks the synthesized
configurations (``standard`` for ``make test``, ``full`` for ``make test-full``)."""

import os
from pathlib import Path

# The suite's artefacts (simulator builds, area runs of the CLI tests) go to build/tests, or to
# $TRAINFAB_TEST_BUILD, never into the folders of a user's own runs; set before flows is imported
os.environ["TRAINFAB_BUILD"] = (os.environ.get("TRAINFAB_TEST_BUILD")
                                or str(Path(__file__).resolve().parent.parent / "build" / "tests"))

# the data-safety suite's folder for this pytest run, shared by the xdist workers (they start
# after this module is imported, and inherit the environment); older runs' folders go
if "TRAINFAB_SAFETY_DIR" not in os.environ:
    import shutil
    import time

    _safety = Path(os.environ["TRAINFAB_BUILD"]) / "data-safety"
    if _safety.is_dir():
        for _old in _safety.glob("run-*"):
            if time.time() - _old.stat().st_mtime > 3600:
                shutil.rmtree(_old, ignore_errors=True)
    os.environ["TRAINFAB_SAFETY_DIR"] = str(_safety / f"run-{int(time.time())}-{os.getpid()}")

import pytest  # noqa: E402

from flows.registry import EFFORTS  # noqa: E402
from flows.eda.simulate import SIMULATORS  # noqa: E402


def pytest_addoption(parser):
    parser.addoption("--seed", type=int, default=1, help="seed passed to every cocotb testbench")
    parser.addoption("--sim", default=None, choices=SIMULATORS,
                     help="simulator for the cocotb testbenches (default: each unit's own)")
    parser.addoption("--waves", action="store_true", help="dump waveforms of testbench runs")
    parser.addoption("--effort", default="standard", choices=EFFORTS,
                     help="testbench size and synthesized configurations: quick, standard "
                          "(make test) or full (make test-full: long random runs, paper-size "
                          "synthesis)")


@pytest.fixture
def passing_testbenches(monkeypatch):
    """Every testbench run passes at once, without a simulator: returns the list of
    ``(unit, cfg)`` the runs were asked for, in order."""
    import flows.eda.simulate

    seen = []

    class Passed:
        passed, tests, failed = True, 1, 0

        def summary(self):
            return "PASS"

    monkeypatch.setattr(flows.eda.simulate, "run_testbench",
                        lambda unit, cfg, **kw: (seen.append((unit, cfg)), Passed())[1])
    return seen


@pytest.fixture
def tb_options(request):
    return {"seed": request.config.getoption("--seed"), "sim": request.config.getoption("--sim"),
            "waves": request.config.getoption("--waves")}


@pytest.fixture
def effort(request) -> str:
    """The ``--effort`` level of this pytest run."""
    return request.config.getoption("--effort")


def pytest_collection_modifyitems(config, items):
    """With ``--dist worksteal`` (``make test``), run the cocotb testbenches first: they are the
    longest tests, and a long test started last keeps one worker busy while the other idles.
    (Under xdist's default ``load`` scheduling the first tests are dealt out round-robin in one
    batch, which would give one worker most of the long ones.)"""
    if config.getoption("dist", "no") == "worksteal":
        items.sort(key=lambda item: item.path.name != "test_testbenches.py")


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """The data-safety suite's matrix: commands × faults, and how many cases held."""
    import json

    results = Path(os.environ["TRAINFAB_SAFETY_DIR"]) / "results"
    records = [json.loads(p.read_text()) for p in sorted(results.glob("*.json"))] \
        if results.is_dir() else []
    if not records:
        return
    records.sort(key=lambda r: r.get("order", [0, 0]))
    faults = sorted(dict.fromkeys(r["fault"] for r in records),
                    key=lambda f: next(r["order"][1] for r in records if r["fault"] == f))
    commands = list(dict.fromkeys(r["command"] for r in records))
    held = {(r["command"], r["fault"]): r["held"] for r in records}
    width = max(len(c) for c in commands)
    write = terminalreporter.write_line
    write("")
    write("data safety: commands x faults (ok: no user file changed, the folder old or new "
          "and whole, documented exit status, one-line error)")
    write(" " * width + "  " + "  ".join(faults))
    for c in commands:
        cells = []
        for f in faults:
            mark = {True: "ok", False: "FAIL", None: "-"}[held.get((c, f))]
            cells.append(mark.center(len(f)))
        write(c.ljust(width) + "  " + "  ".join(cells))
    n_ok = sum(1 for v in held.values() if v)
    write(f"data safety: {n_ok} of {len(held)} cases held")

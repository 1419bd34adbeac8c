"""Shared pytest options: ``--seed`` reproduces a testbench run, ``--sim`` picks the simulator
(default: each unit's own), ``--effort`` sizes the testbenches and picks the synthesized
configurations (``standard`` for ``make test``, ``full`` for ``make test-full``)."""

import os
from pathlib import Path

# The suite's artefacts (simulator builds, area runs of the CLI tests) go to build/tests, or to
# $TRAINFAB_TEST_BUILD, never into the folders of a user's own runs; set before flows is imported
os.environ["TRAINFAB_BUILD"] = (os.environ.get("TRAINFAB_TEST_BUILD")
                                or str(Path(__file__).resolve().parent.parent / "build" / "tests"))

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

"""cocotb regressions: build a unit's Verilog for a configuration and run its testbench.

Builds are cached under ``build/sim/<unit>/<simulator>-<sha256 of the Verilog>/``, so a
configuration is compiled once however many runs use it; the unit's manifest (ports, config,
tool versions; :func:`flows.generate.manifest`) is written beside the Verilog as ``<top>.json``.
Each run gets its own directory for its log and results.

The testbench reads its run parameters from the environment: ``TRAINFAB_CONFIG`` (the
configuration as JSON), ``TRAINFAB_SEED``, ``TRAINFAB_EFFORT``, ``TRAINFAB_TEST_SIZE`` (the size
of its random part at this effort, from :attr:`flows.registry.Unit.test_sizes`) and
``TRAINFAB_MANIFEST`` (the manifest's path).
"""

import fcntl
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from golden import config_dict

from . import BUILD, FlowError
from .generate import convert, manifest, sha256
from .registry import EFFORTS, Unit, get
from .tools import require, verilator_env

SIMULATORS = ("icarus", "verilator")
#: Amaranth's Verilog trips Verilator lint warnings that are harmless (width extension etc.)
VERILATOR_ARGS = ["-Wno-fatal", "-Wno-WIDTH", "-Wno-UNOPTFLAT", "-Wno-CASEINCOMPLETE",
                  # one output file: avoids a precompiled-header build failure (verilator#5698)
                  "--output-split", "0"]


def _quiet_cached_builds(record) -> bool:
    """Drop the runner's warning about reusing a build: here a cached build is the normal case."""
    return not record.getMessage().startswith("Skipping compilation")


@dataclass
class TbResult:
    """Outcome of one testbench run."""

    unit: str
    config: dict
    sim: str
    seed: int
    tests: int
    failed: int
    seconds: float
    log: Path
    results_xml: Path

    @property
    def passed(self) -> bool:
        return self.tests > 0 and self.failed == 0

    def summary(self) -> str:
        state = "PASS" if self.passed else "FAIL"
        cfg = ", ".join(f"{k}={v}" for k, v in self.config.items())
        return (f"{state} {self.unit} [{cfg}] sim={self.sim} seed={self.seed}: "
                f"{self.tests - self.failed}/{self.tests} tests passed in {self.seconds:.1f} s "
                f"(log: {self.log})")


def _config_tag(cfg) -> str:
    return sha256(json.dumps(config_dict(cfg), sort_keys=True))[:12]


def run_testbench(unit: Unit | str, cfg=None, *, seed: int = 1, sim: str | None = None,
                  effort: str = "standard", waves: bool = False, factory=None,
                  testcase: str | None = None, build_root: Path | None = None) -> TbResult:
    """Run ``unit``'s cocotb testbench against the Verilog generated for ``cfg``.

    Parameters
    ----------
    unit : Unit or str
        The unit (or its registry name).
    cfg : config object, optional
        Defaults to the configuration class's defaults (the paper's configuration).
    seed : int
        Passed to the testbench (``TRAINFAB_SEED``) and to cocotb.
    sim : {"icarus", "verilator"}, optional
        Defaults to the unit's own simulator (:attr:`~flows.registry.Unit.sim`).
    effort : {"quick", "standard", "full"}
        Size of the random parts of the testbench (``TRAINFAB_TEST_SIZE`` from the unit's
        :attr:`~flows.registry.Unit.test_sizes`).
    waves : bool
        Dump waveforms into the run directory.
    factory : callable, optional
        Build the component with this instead of the registry's factory (used to check that
        testbenches catch broken designs).
    testcase : str, optional
        Run only this cocotb test.
    """
    from cocotb_tools.runner import get_results, get_runner

    unit = get(unit) if isinstance(unit, str) else unit
    cfg = cfg if cfg is not None else unit.config_class()()
    sim = sim or unit.sim
    if effort not in EFFORTS:
        raise FlowError(f"unknown effort {effort!r}; choose one of {', '.join(EFFORTS)}")
    if sim not in SIMULATORS:
        raise FlowError(f"unknown simulator {sim!r}; choose one of {', '.join(SIMULATORS)}")
    if sim == "icarus":
        require("iverilog")
        build_args = []
    else:
        os.environ.update(verilator_env())
        build_args = VERILATOR_ARGS

    text, fields = convert(unit, cfg, factory)
    digest = sha256(text)[:16]
    root = Path(build_root or BUILD) / "sim" / unit.name
    build_dir = root / f"{sim}-{digest}{'-waves' if waves else ''}"
    build_dir.mkdir(parents=True, exist_ok=True)
    source = build_dir / f"{unit.top}.v"
    man_path = build_dir / f"{unit.top}.json"
    runner = get_runner(sim)
    if _quiet_cached_builds not in runner.log.filters:
        runner.log.addFilter(_quiet_cached_builds)
    # several pytest-xdist workers may ask for the same build: one builds, the others wait
    with open(build_dir / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not source.exists() or source.read_text() != text:
            source.write_text(text)
        # configurations that differ only in run-time defaults share the build (and the ports):
        # replace the manifest whole, so that a reader never sees a partial file
        man_text = json.dumps(manifest(unit, cfg, text, fields), indent=2) + "\n"
        if not man_path.exists() or man_path.read_text() != man_text:
            tmp = man_path.with_name(f".{man_path.name}.{os.getpid()}")
            tmp.write_text(man_text)
            os.replace(tmp, man_path)
        try:
            runner.build(sources=[source], hdl_toplevel=unit.top, build_dir=build_dir,
                         build_args=build_args, timescale=("1ns", "1ps"), waves=waves,
                         log_file=build_dir / "build.log")
        except (RuntimeError, SystemExit) as e:
            raise FlowError(f"{sim} could not build {unit.name} ({e}); "
                            f"see {build_dir / 'build.log'}") from None
    run_dir = root / "runs" / f"{sim}-{_config_tag(cfg)}-seed{seed}-{effort}-{os.getpid()}"
    run_dir.mkdir(parents=True, exist_ok=True)
    results = run_dir / "results.xml"
    log = run_dir / "sim.log"
    results.unlink(missing_ok=True)
    env = {
        "TRAINFAB_CONFIG": json.dumps(config_dict(cfg)),
        "TRAINFAB_SEED": str(seed),
        "TRAINFAB_EFFORT": effort,
        "TRAINFAB_MANIFEST": str(man_path),
    }
    if effort in unit.test_sizes:
        env["TRAINFAB_TEST_SIZE"] = str(unit.test_sizes[effort])
    start = time.monotonic()
    try:
        runner.test(test_module=unit.testbench, hdl_toplevel=unit.top, build_dir=build_dir,
                    test_dir=run_dir, results_xml=str(results), extra_env=env, seed=seed,
                    waves=waves, testcase=testcase, log_file=log, timescale=("1ns", "1ps"))
    except (RuntimeError, SystemExit):
        pass  # failing tests or a crashed simulator: the results file (or its absence) tells
    seconds = time.monotonic() - start
    tests, failed = get_results(results) if results.exists() else (0, 0)
    return TbResult(unit.name, config_dict(cfg), sim, seed, tests, failed, seconds, log, results)


def failed_tests(result: TbResult) -> list[str]:
    """Names of the cocotb tests that failed in a run (from its JUnit results file)."""
    import xml.etree.ElementTree as ET

    if not result.results_xml.exists():
        return []
    root = ET.parse(result.results_xml).getroot()
    return sorted(case.get("name") for case in root.iter("testcase")
                  if case.find("failure") is not None or case.find("error") is not None)


def failure_details(result: TbResult, limit: int = 4000) -> str:
    """The failing part of a run's log, for assertion messages."""
    try:
        text = result.log.read_text(errors="replace")
    except OSError:
        return ""
    marks = [i for i in (text.find("AssertionError"), text.find("FAIL")) if i >= 0]
    start = max(0, min(marks) - 1500) if marks else max(0, len(text) - limit)
    return text[start:start + limit]


__all__ = ["SIMULATORS", "TbResult", "run_testbench", "failed_tests", "failure_details"]

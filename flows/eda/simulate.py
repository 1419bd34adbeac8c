"""cocotb regressions: build a unit's Verilog for a configuration and run its testbench.

Builds are cached under ``build/sim/<unit>/<simulator>-<sha256 of the Verilog>/``, so a
configuration is compiled once however many runs use it; the unit's manifest (ports, config,
tool versions; :func:`flows.eda.generate.manifest`) is written beside the Verilog as ``<top>.json``.
Each run gets its own directory for its log and results.

The testbench reads its run parameters from the environment: ``TRAINFAB_CONFIG`` (the
configuration as JSON), ``TRAINFAB_SEED``, ``TRAINFAB_EFFORT``, ``TRAINFAB_TEST_SIZE`` (the size
of its random part at this effort, from :attr:`flows.declare.TestPlan.sizes`) and
``TRAINFAB_MANIFEST`` (the manifest's path).
"""

import fcntl
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from golden import config_dict

from .. import FlowError, build_dir
from .generate import convert, manifest, sha256
from ..registry import EFFORTS, Unit, get
from ..options import SIMULATORS
from ..runs import ensure_dir, prune, write_atomic
from .tools import require, verilator_env

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
    #: the run's waveform file (runs with ``waves``)
    waves: Path | None = None

    @property
    def passed(self) -> bool:
        return self.tests > 0 and self.failed == 0

    def summary(self) -> str:
        state = "PASS" if self.passed else "FAIL"
        cfg = ", ".join(f"{k}={v}" for k, v in self.config.items())
        outcome = (f"{self.tests - self.failed}/{self.tests} tests passed" if self.tests else
                   "the simulator ended without results (it crashed or could not start)")
        waves = f", waves: {self.waves}" if self.waves else ""
        return (f"{state} {self.unit} [{cfg}] sim={self.sim} seed={self.seed}: "
                f"{outcome} in {self.seconds:.1f} s (log: {self.log}{waves})")


def _config_tag(cfg) -> str:
    return sha256(json.dumps(config_dict(cfg), sort_keys=True))[:12]


def run_testbench(unit: Unit | str, cfg=None, *, seed: int = 1, sim: str | None = None,
                  effort: str = "standard", waves: bool = False, factory=None,
                  testcase: str | None = None, build_root: Path | None = None,
                  sources: dict[str, str] | None = None, extra_env: dict | None = None,
                  vcd: bool = False) -> TbResult:
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
        Defaults to the unit's own simulator (:attr:`flows.declare.TestPlan.sim`).
    effort : {"quick", "standard", "full"}
        Size of the random parts of the testbench (``TRAINFAB_TEST_SIZE`` from the unit's
        :attr:`flows.declare.TestPlan.sizes`).
    waves : bool
        Dump waveforms into the run directory.
    factory : callable, optional
        Build the component with this instead of the registry's factory (used to check that
        testbenches catch broken designs).
    testcase : str, optional
        Run only this cocotb test.
    sources : dict, optional
        Verilog to simulate instead of the unit's generated Verilog: file name → text (e.g. a
        mapped netlist and its cell models, for ``trainfab power``); the top module keeps the
        unit's name and ports.  The build is cached by the hash of all the texts.
    extra_env : dict, optional
        More environment variables for the testbench.
    vcd : bool
        Dump a VCD of the whole design (every level) into the run directory as
        :attr:`TbResult.waves` (Icarus: ``<top>.vcd``; Verilator: ``dump.vcd``).
    """
    from cocotb_tools.runner import get_results, get_runner

    unit = get(unit) if isinstance(unit, str) else unit
    cfg = cfg if cfg is not None else unit.config_class()()
    sim = sim or unit.tests.sim
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
    if sources:
        digest = "gl-" + sha256("".join(f"{n}\0{t}\0" for n, t in sorted(sources.items())))[:16]
    waves = waves or vcd
    root = Path(build_root or build_dir()) / "sim" / unit.name
    build = ensure_dir(root / f"{sim}-{digest}{'-waves' if waves else ''}", "simulator build folder")
    source = build / f"{unit.top}.v"
    man_path = build / f"{unit.top}.json"
    runner = get_runner(sim)
    if _quiet_cached_builds not in runner.log.filters:
        runner.log.addFilter(_quiet_cached_builds)
    # several pytest-xdist workers may ask for the same build: one builds, the others wait
    with open(build / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not source.exists() or source.read_text() != text:
            source.write_text(text)
        for name, body in (sources or {}).items():
            if not (build / name).exists() or (build / name).read_text() != body:
                (build / name).write_text(body)
        build_sources = [build / name for name in sources] if sources else [source]
        # configurations that differ only in run-time defaults share the build (and the ports):
        # replace the manifest whole, so that a reader never sees a partial file
        man_text = json.dumps(manifest(unit, cfg, text, fields), indent=2) + "\n"
        if not man_path.exists() or man_path.read_text() != man_text:
            write_atomic(man_path, man_text)
        artefact = build / (_SIM_FILES[sim].format(top=unit.top))
        stamp = build / ".built"
        fresh = _build_is_valid(artefact, stamp)
        if not fresh:  # never built, interrupted, or damaged since: build from scratch
            stamp.unlink(missing_ok=True)
            artefact.unlink(missing_ok=True)
        try:
            runner.build(sources=build_sources, hdl_toplevel=unit.top, build_dir=build,
                         build_args=build_args, timescale=("1ns", "1ps"), waves=waves,
                         log_file=build / "build.log", always=not fresh)
        except (RuntimeError, SystemExit) as e:
            raise FlowError(f"{sim} could not build {unit.name} ({e}); "
                            f"see {build / 'build.log'}") from None
        if not fresh:
            if not artefact.is_file():
                raise FlowError(f"{sim} built {unit.name} but wrote no {artefact.name}; "
                                f"see {build / 'build.log'}")
            write_atomic(stamp, json.dumps(_fingerprint(artefact)))
    runs = root / "runs"
    prune(runs, keep=RUNS_KEPT)
    run_dir = ensure_dir(runs / (f"{sim}-{_config_tag(cfg)}-seed{seed}-{effort}-"
                                 f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"))
    results = run_dir / "results.xml"
    log = run_dir / "sim.log"
    wave_file = run_dir / _WAVE_FILES[sim].format(top=unit.top) if waves else None
    if vcd and sim == "icarus":
        wave_file = run_dir / f"{unit.top}.vcd"   # without -fst, Icarus writes a VCD
    env = {
        "TRAINFAB_CONFIG": json.dumps(config_dict(cfg)),
        "TRAINFAB_SEED": str(seed),
        "TRAINFAB_EFFORT": effort,
        "TRAINFAB_MANIFEST": str(man_path),
    }
    if effort in unit.tests.sizes:
        env["TRAINFAB_TEST_SIZE"] = str(unit.tests.sizes[effort])
    env.update(extra_env or {})
    # Icarus dumps where the build's dump module says unless told otherwise: into this run's
    # folder, not the shared build folder (Verilator writes dump.vcd into its working folder,
    # the run folder)
    plusargs = [f"+dumpfile_path={wave_file}"] if waves and sim == "icarus" else []
    if vcd and sim == "icarus":
        _dump_vcd(runner)
    start = time.monotonic()
    try:
        runner.test(test_module=unit.testbench_module, hdl_toplevel=unit.top, build_dir=build,
                    test_dir=run_dir, results_xml=str(results), extra_env=env, seed=seed,
                    waves=waves and not (vcd and sim == "icarus"), testcase=testcase,
                    log_file=log, timescale=("1ns", "1ps"),
                    plusargs=plusargs)
    except (RuntimeError, SystemExit):
        pass  # failing tests or a crashed simulator: the results file (or its absence) tells
    seconds = time.monotonic() - start
    tests, failed = get_results(results) if results.exists() else (0, 0)
    return TbResult(unit.name, config_dict(cfg), sim, seed, tests, failed, seconds, log, results,
                    wave_file if wave_file is not None and wave_file.exists() else None)


def _dump_vcd(runner) -> None:
    """Make an Icarus runner's test step write VCD: cocotb passes ``-fst`` with waves and
    ``-none`` without; this run's command gets ``-vcd`` instead of ``-none``."""
    test_command = runner._test_command

    def with_vcd():
        return [[("-vcd" if arg == "-none" else arg) for arg in cmd] for cmd in test_command()]

    runner._test_command = with_vcd


#: the simulator executable each build produces (checked against its fingerprint before reuse)
_SIM_FILES = {"icarus": "sim.vvp", "verilator": "{top}"}
#: the waveform file of a run with ``waves``
_WAVE_FILES = {"icarus": "{top}.fst", "verilator": "dump.vcd"}
#: run folders kept per unit (older ones are deleted when a new run starts)
RUNS_KEPT = 50


def _fingerprint(path: Path) -> dict:
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return {"file": path.name, "size": path.stat().st_size, "sha256": digest.hexdigest()}


def _build_is_valid(artefact: Path, stamp: Path) -> bool:
    """Whether a cached build finished and is undamaged: its executable matches the
    fingerprint written when the build completed."""
    try:
        return artefact.is_file() and json.loads(stamp.read_text()) == _fingerprint(artefact)
    except (OSError, ValueError):
        return False


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

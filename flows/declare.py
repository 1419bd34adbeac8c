"""What a family declares: its units and their plans, and what the papers report about them.

A family file (``flows/families/<family>.py``) is made of these declarations and nothing else:
it imports this module only, and names the classes and functions it refers to by
``module:attribute`` strings that are resolved when used (:func:`resolve`), so that reading the
declarations imports no hardware, no study and no flow.

``Unit`` is a unit's identity (name, configuration class, component, testbench) with three
plans: how it is tested (:class:`TestPlan`), how it is synthesized (:class:`SynthPlan`) and how
it is shown (:class:`Showcase`: the paper's figure, the demo).  The other declarations are what
the reports and commands gather from every family: sub-blocks the papers report on their own
(:class:`Part`), the papers' area ratios (:class:`Comparison`), area scalings
(:class:`Scaling`), designs beside their baselines at each one's clock (:class:`OwnClock`), the
configurations that close timing (:class:`ClockTarget`), tensor statistics
(:class:`TensorAnalysis`) and benchmarks (:class:`Bench`).
"""

from __future__ import annotations

import dataclasses
import importlib
import math
from dataclasses import dataclass, field

from golden import ConfigError

from . import FlowError

#: effort levels of a testbench run: ``quick`` (demo), ``standard`` (``make test``, the CLI's
#: default) and ``full`` (``make test-full``)
EFFORTS = ("quick", "standard", "full")


def config_label(overrides: dict) -> str:
    """``key=value,key=value``: the name of a configuration in test ids and progress lines."""
    return ",".join(f"{key}={value}" for key, value in overrides.items())


def resolve(path: str):
    """The object named by ``module:attribute``."""
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


def in_module(module: str, name: str) -> str:
    """``module:attribute`` for ``name``: itself when it already names a module, else the
    attribute ``name`` of ``module``."""
    return name if ":" in name else f"{module}:{name}"


def _resolve_layout(family: str, stem: str, kind: str, name: str) -> str:
    """Where ``name`` lives under the layout ``<kind>/<family>/<stem>.py``: that module when it
    defines it, else the family package (``<kind>.<family>``, which may export it)."""
    if ":" in name:
        return name
    module = f"{kind}.{family}.{stem}"
    try:
        found = importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name != module:
            raise
        found = None
    if found is not None and hasattr(found, name):
        return f"{module}:{name}"
    return f"{kind}.{family}:{name}"


# --------------------------------------------------------------------------------------------
# units


@dataclass(frozen=True, kw_only=True)
class TestPlan:
    """How the test suite and ``trainfab regress`` exercise a unit."""

    #: size of the testbench's random part per effort level (``TRAINFAB_TEST_SIZE``); the
    #: testbench documents what the number counts
    sizes: dict[str, int] = field(default_factory=dict)
    #: non-default configurations (field overrides) regressed besides the paper configuration
    configs: tuple[dict, ...] = ()
    #: further configurations regressed only at ``--effort full`` (large ones, whose runs take
    #: a minute or more on Icarus), after :attr:`configs`
    full_configs: tuple[dict, ...] = ()
    #: default simulator of the unit's testbench (``--sim`` overrides it)
    sim: str = "icarus"
    #: lowest effort at which the test suite regresses the paper configuration itself (large
    #: arrays: "full"); below it only :attr:`configs` run
    paper_effort: str = "quick"
    #: simulator of the test suite's paper-configuration run (default: :attr:`sim`)
    paper_sim: str | None = None


@dataclass(frozen=True, kw_only=True)
class SynthPlan:
    """How a unit is synthesized."""

    #: field overrides of the small configuration ``make test`` synthesizes
    small: dict = field(default_factory=dict)
    #: yosys' SAT-based resource sharing (``synth`` without ``-noshare``); off for arrays of
    #: identical PEs, where its pairwise search across PEs runs for hours and finds nothing
    #: worth sharing between independent datapaths
    share: bool = True
    #: instance paths ``trainfab area --breakdown`` reports as blocks (default: the top's
    #: children)
    breakdown: tuple[str, ...] = ()
    #: ``module:function`` giving the breakdown paths of a configuration, for a unit whose
    #: blocks depend on it (default: :attr:`breakdown` for every configuration)
    breakdown_by: str = ""
    #: ``module:function`` turning an area report with a breakdown into an extra markdown
    #: table (``trainfab area --breakdown``; the FPRaker Table III layout for the tiles)
    breakdown_table: str = ""
    #: a configuration field naming the unit's interleaved contexts when its RTL is the C-slow
    #: transformation of the one-context design (:func:`hdl.common.cslow.c_slow`): synthesis
    #: retimes the configurations where it is above 1, which place the extra registers
    #: nowhere themselves
    cslow_field: str = ""


@dataclass(frozen=True, kw_only=True)
class Showcase:
    """How a unit appears in the summaries: the paper's figure, ``make demo``, ``make
    paper``."""

    #: the paper's own figure for this unit, shown beside ours in reports
    paper: str = ""
    #: field overrides (of the configuration class's defaults) of the small configuration
    #: ``make demo`` generates, quick-regresses and measures, chosen to synthesize in seconds;
    #: ``None``: the unit is not in the demo (every family has at least one unit in it; a
    #: family's baseline is measured at the same size, so that their ratio is meaningful)
    demo: dict | None = None
    #: field overrides of the configuration ``make paper`` regresses and measures first in
    #: place of the paper's (the 8x8 tiles: their paper-size synthesis takes tens of minutes
    #: and comes at the end of the run)
    paper_run_small: dict = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Unit:
    """A generatable unit: its identity and its plans.

    The configuration class and the component are class names under the layout
    ``golden|hdl/<family>/<unit>.py`` (or the family package, or ``module:Class``), resolved
    when used; the testbench is ``tb/<family>/<unit>.py`` unless named."""

    #: dotted unit name, ``family.unit``
    name: str
    #: one line for ``trainfab list``
    summary: str
    #: the frozen configuration dataclass (its defaults are the paper's configuration)
    config: str
    #: the Amaranth component built from a configuration object
    component: str
    #: cocotb test module (default ``tb.<family>.<unit>``)
    testbench: str = ""
    #: a preset (``flows/configs/<preset>.toml``) that writes the paper's configuration out
    #: with the paper's sections beside each value (it must equal the class defaults)
    preset: str = ""
    tests: TestPlan = field(default_factory=TestPlan)
    synth: SynthPlan = field(default_factory=SynthPlan)
    showcase: Showcase = field(default_factory=Showcase)

    @property
    def family(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def stem(self) -> str:
        return self.name.split(".", 1)[1]

    @property
    def top(self) -> str:
        """Verilog module name of the generated top level."""
        return self.name.replace(".", "_")

    @property
    def config_path(self) -> str:
        """``module:Class`` of the configuration class."""
        return _resolve_layout(self.family, self.stem, "golden", self.config)

    @property
    def component_path(self) -> str:
        """``module:callable`` of the component."""
        return _resolve_layout(self.family, self.stem, "hdl", self.component)

    @property
    def testbench_module(self) -> str:
        """The cocotb test module: :attr:`testbench`, or ``tb.<family>.<unit>``."""
        return self.testbench or f"tb.{self.name}"

    def config_class(self):
        return resolve(self.config_path)

    def component_factory(self):
        return resolve(self.component_path)

    @property
    def runtime_fields(self) -> tuple[str, ...]:
        """Configuration fields that are run-time inputs of the hardware (ports), used only as
        the testbench's default values (``field(metadata={"runtime": True})`` on the class):
        the Verilog does not depend on them, so area reports list them apart, ``area --set``
        and sweeps refuse them."""
        return tuple(f.name for f in dataclasses.fields(self.config_class())
                     if f.metadata.get("runtime"))

    def retimes(self, cfg) -> bool:
        """Whether synthesis retimes ``cfg`` (its C-slow field above 1)."""
        return bool(self.synth.cslow_field) and getattr(cfg, self.synth.cslow_field) > 1

    def hardware_config(self, cfg) -> dict:
        """The configuration fields that shape the hardware (all but the run-time inputs)."""
        from golden import config_dict

        runtime = self.runtime_fields
        return {k: v for k, v in config_dict(cfg).items() if k not in runtime}

    def breakdown_paths(self, cfg) -> tuple[str, ...]:
        """The instance paths ``area --breakdown`` reports for ``cfg``."""
        if self.synth.breakdown_by:
            return tuple(resolve(self.synth.breakdown_by)(cfg))
        return self.synth.breakdown

    def make_config(self, base=None, **overrides):
        """``base`` with ``overrides``, or without ``base`` the configuration class built from
        ``overrides`` (the paper's configuration elsewhere); :class:`FlowError` naming the unit
        if the result is invalid."""
        try:
            return self._build_config(base, overrides)
        except (ConfigError, TypeError) as e:
            raise FlowError(f"{self.name}: configuration {config_label(overrides)}: {e}") from None

    def _build_config(self, base, overrides: dict):
        if base is None:
            return self.config_class()(**overrides)
        return dataclasses.replace(base, **overrides)

    def test_configs(self, base=None, effort: str = "standard") -> list[tuple[str, object]]:
        """The labelled configurations a regression at ``effort`` runs: ``base`` first (label
        ``default``), then ``base`` with each of the plan's configurations and, at ``full``
        effort, its full ones, leaving out any equal to one already listed."""
        return self.user_test_configs(base, effort=effort)[0]

    def user_test_configs(self, base=None, fixed=(), effort: str = "standard"
                          ) -> tuple[list[tuple[str, object]], list[str]]:
        """:meth:`test_configs` around a user's configuration whose fields ``fixed`` were set
        explicitly (``--set``, ``--config``): extra configurations that would change a fixed
        field, or that are invalid combined with ``base``, are left out.  Returns the labelled
        configurations and one line per configuration left out, saying why."""
        configs, skipped = [("default", self.make_config(base))], []
        extra = self.tests.configs + (self.tests.full_configs if effort == "full" else ())
        for overrides in extra:
            label = config_label(overrides)
            clash = [k for k in overrides if k in fixed and getattr(base, k) != overrides[k]]
            if clash:
                skipped.append(f"{label}: changes {', '.join(clash)}, which you set")
                continue
            if not fixed:
                cfg = self.make_config(base, **overrides)
            else:
                try:
                    cfg = self._build_config(base, overrides)
                except (ConfigError, TypeError) as e:
                    skipped.append(f"{label}: invalid with your settings ({e})")
                    continue
            if all(cfg != seen for _, seen in configs):
                configs.append((label, cfg))
        return configs, skipped


# --------------------------------------------------------------------------------------------
# what the papers report


@dataclass(frozen=True, kw_only=True)
class Part:
    """A sub-block of a unit that the papers report separately (synthesized on its own)."""

    #: name in reports, ``unit/part``
    name: str
    unit: str
    summary: str
    #: the component built from the part's configuration, a class name under the unit's
    #: layout or ``module:Class`` (default: the unit's component)
    component: str = ""
    #: field overrides of the unit's configuration (a variant the paper reports, e.g. another
    #: operand format)
    overrides: dict = field(default_factory=dict)
    #: the paper's own figure for this part, shown beside ours
    paper: str = ""
    #: also synthesize it hierarchically and show its area by block (the unit's breakdown
    #: paths), as the paper reports it
    breakdown: bool = False

    def component_factory(self):
        """The part's own component, or None for the unit's."""
        if not self.component:
            return None
        family, stem = self.unit.split(".", 1)
        return resolve(_resolve_layout(family, stem, "hdl", self.component))


@dataclass(frozen=True, kw_only=True)
class Comparison:
    """An area ratio the papers state: area(numerator) / area(denominator)."""

    label: str
    #: unit or part names
    numerator: str
    denominator: str
    paper_ratio: float
    source: str
    #: instances of the denominator (a larger structure built from a measured block)
    denominator_count: int = 1
    #: the numerator's share of (numerator + denominator) rather than their ratio
    share: bool = False

    def ours(self, areas: dict) -> float:
        den = self.denominator_count * areas[self.denominator]
        num = areas[self.numerator]
        return num / (den + num) if self.share else num / den


def _product(fields: tuple[str, ...], config: dict) -> float:
    """The product of the named fields of ``config`` that it has (1 for none)."""
    return math.prod(config[f] for f in fields if f in config)


@dataclass(frozen=True, kw_only=True)
class OwnClock:
    """A design beside the baseline a paper compares it with, each at its own clock: work per
    area (MACs per cycle × fmax ÷ area, M MAC/s per mm²) and, given power runs of the pair,
    energy per MAC at each one's fmax, beside the same figures at one clock."""

    label: str
    #: unit or part names (their area reports give area and fmax)
    unit: str
    baseline: str
    #: the unit's work per cycle at full rate: ``module:function`` taking the configuration
    #: dict and giving ``[(operands, MACs per cycle)]`` measured (or counted) on the operands
    #: named, or a tuple of fields whose product is the MACs per cycle whatever the operands
    work: str | tuple[str, ...]
    #: the same for the baseline (bit-parallel designs: a product of fields)
    baseline_work: str | tuple[str, ...]
    source: str = ""
    #: ``make paper`` measures both designs' energy per MAC with ``trainfab power`` on its
    #: synthetic operands (the unit or part's configuration, the power run's default operands)
    power: bool = False

    @staticmethod
    def macs_per_cycle(work, config: dict) -> list[tuple[str, float]]:
        """``[(operands, MACs per cycle)]`` of a :attr:`work` declaration at ``config``."""
        if isinstance(work, str):
            return list(resolve(work)(config))
        return [("any", _product(work, config))]


@dataclass(frozen=True, kw_only=True)
class Scaling:
    """Area against a size measure of the configuration (e.g. an array's N²W MACs), over the
    unit and parts named in ``members``, with a least-squares line ``area = slope * size +
    intercept`` and its R² (a paper's linear area model, e.g. Equinox's m·n²·w·a_alu)."""

    label: str
    #: unit or part names whose configurations differ in size
    members: tuple
    #: the fields whose product is the size (``("n", "n", "w")``: N²W)
    size: tuple[str, ...]
    #: what the size counts, for the table header
    size_label: str
    paper: str = ""

    def fit(self, results: dict):
        """``(points, slope, intercept, r2)`` over the members present in ``results``
        (``points``: ``(name, size, area)``); ``None`` with fewer than two points."""
        pts = [(n, float(_product(self.size, results[n]["config"])), results[n]["area_um2"])
               for n in self.members if n in results]
        if len(pts) < 2 or len({x for _, x, _ in pts}) < 2:
            return None
        xs = [x for _, x, _ in pts]
        ys = [y for _, _, y in pts]
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        sxx = sum((x - mx) ** 2 for x in xs)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
        intercept = my - slope * mx
        ss_tot = sum((y - my) ** 2 for y in ys)
        ss_res = sum((y - slope * x - intercept) ** 2 for x, y in zip(xs, ys))
        return pts, slope, intercept, (1 - ss_res / ss_tot) if ss_tot else 1.0


@dataclass(frozen=True)
class ClockTarget:
    """A unit's configuration that meets (or is the closest to) a clock target."""

    #: the unit, measured at its paper configuration
    unit: str
    #: field overrides of the paper configuration: the stages (and contexts) that close timing
    overrides: dict = field(default_factory=dict)
    #: the clock to meet, MHz (the period ABC targets is ``1000 / target_mhz`` ns)
    target_mhz: float = 200.0
    #: what the configuration is, in a few words (the table's last column)
    note: str = ""
    #: the row's name when a unit has several targets (default: the unit's)
    label: str = ""
    #: a synthesis that takes tens of minutes: started first under ``-j``
    large: bool = False

    @property
    def name(self) -> str:
        return self.label or self.unit

    @property
    def clock_ns(self) -> float:
        return round(1000.0 / self.target_mhz, 3)


@dataclass(frozen=True, kw_only=True)
class TensorAnalysis:
    """A statistic over every tensor of a file (``trainfab tensor-stats --analysis NAME``)."""

    name: str
    summary: str
    #: ``module:function``: ``run(path, progress=None, **options)`` → a JSON-serializable dict;
    #: ``progress`` is ``None`` or called as ``progress(tensor_name, values_done,
    #: values_total)``
    run: str
    #: ``module:function``: ``markdown(result)`` → the report printed and written beside the
    #: JSON
    markdown: str
    #: command-line options: ``(flags, argparse keyword arguments)``, whose ``dest`` is the
    #: keyword ``run`` takes; a ``type`` is a ``module:function`` string or a builtin
    options: tuple[tuple[tuple[str, ...], dict], ...] = ()
    #: the analysis ``tensor-stats`` runs without ``--analysis`` (at most one declares it;
    #: without one, the first in family order)
    default: bool = False


@dataclass(frozen=True, kw_only=True)
class Bench:
    """One benchmark of ``trainfab bench``."""

    name: str
    summary: str
    #: ``module:function``: ``run(scale=…, seed=…)`` → Markdown table(s); run sizes are divided
    #: by ``scale`` (10 for ``--quick``)
    run: str


__all__ = ["EFFORTS", "config_label", "resolve", "in_module", "TestPlan", "SynthPlan",
           "Showcase", "Unit", "Part", "Comparison", "OwnClock", "Scaling", "ClockTarget",
           "TensorAnalysis", "Bench"]

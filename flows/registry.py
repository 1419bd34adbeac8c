"""The unit registry: one entry per generatable unit, used by the CLI and the tests.

Units are declared by the family modules (:mod:`flows.families`); ``UNITS`` collects them, in
the families' order.  Entries name their configuration class and component by class name only:
the module paths follow the layout ``golden|hdl|tb/<family>/<unit>.py`` (a family package
exports its units' classes, so ``fast.fmac`` with ``config="FMACConfig"`` and
``component="FMAC"`` resolves to ``golden.fast:FMACConfig`` and ``hdl.fast:FMAC``, and its
testbench is ``tb.fast.fmac``).  Names are resolved only when used, so listing units imports
nothing heavy, and ``hdl`` never imports ``tb``.
"""

import dataclasses
import importlib
from dataclasses import dataclass, field

from golden import ConfigError

from . import FlowError

#: effort levels of a testbench run: ``quick`` (demo), ``standard`` (``make test``, the CLI's
#: default) and ``full`` (``make test-full``)
EFFORTS = ("quick", "standard", "full")


def config_label(overrides: dict) -> str:
    """``key=value,key=value``: the name of a configuration in test ids and progress lines."""
    return ",".join(f"{key}={value}" for key, value in overrides.items())


@dataclass(frozen=True, kw_only=True)
class Unit:
    """A generatable unit."""

    #: dotted unit name, ``family.unit``
    name: str
    #: one line for ``trainfab list``
    summary: str
    #: the frozen configuration dataclass: a class name the family package ``golden.<family>``
    #: exports (or ``module:Class`` for one outside the layout)
    config: str
    #: the Amaranth component built from a configuration object: a name the family package
    #: ``hdl.<family>`` exports (or ``module:callable``)
    component: str
    #: cocotb test module (default ``tb.<family>.<unit>``, the layout's place for it)
    testbench: str = ""
    #: preset (``flows/configs/<preset>.toml``) holding the paper's configuration of this unit
    preset: str
    #: non-default configurations (field overrides) regressed besides the paper configuration
    extra_configs: tuple[dict, ...] = ()
    #: further configurations regressed only at ``--effort full`` (large ones, whose runs take
    #: a minute or more on Icarus), after :attr:`extra_configs`
    full_configs: tuple[dict, ...] = ()
    #: default simulator of the unit's testbench (``--sim`` overrides it)
    sim: str = "icarus"
    #: size of the testbench's random part per effort level (``TRAINFAB_TEST_SIZE``)
    test_sizes: dict[str, int] = field(default_factory=dict)
    #: field overrides of the small configuration ``make test`` synthesizes
    synth_overrides: dict = field(default_factory=dict)
    #: instance paths ``trainfab area --breakdown`` reports as blocks (default: the top's children)
    breakdown: tuple[str, ...] = ()
    #: ``module:function`` giving the breakdown paths of a configuration, for a unit whose
    #: blocks depend on it (default: :attr:`breakdown` for every configuration)
    breakdown_by: str = ""
    #: the paper's own figure for this unit, shown beside ours in reports
    paper: str = ""
    #: configuration fields that are run-time inputs of the hardware (ports), used only as the
    #: testbench's default values: the Verilog does not depend on them, so area reports list
    #: them apart from the configuration, ``area --set`` and sweeps refuse them
    runtime_fields: tuple[str, ...] = ()
    #: lowest effort at which the test suite regresses the paper configuration itself (large
    #: arrays: "full"); below it only :attr:`extra_configs` run
    paper_test_effort: str = "quick"
    #: simulator of the test suite's paper-configuration run (default: :attr:`sim`)
    paper_test_sim: str | None = None
    #: ``module:function`` turning an area report with a breakdown into an extra markdown
    #: table (``trainfab area --breakdown``; the FPRaker Table III layout for the tiles)
    breakdown_table: str = ""
    #: yosys' SAT-based resource sharing (``synth`` without ``-noshare``); off for arrays of
    #: identical PEs, where its pairwise search across PEs runs for hours and finds nothing
    #: worth sharing between independent datapaths
    synth_share: bool = True
    #: field overrides of the configuration ``make demo`` regresses and measures instead of the
    #: paper's (the 8x8 tiles: their paper-size synthesis takes tens of minutes; ``trainfab
    #: area UNIT`` measures the paper configuration)
    demo_overrides: dict = field(default_factory=dict)
    #: field overrides (of the configuration class's defaults, as :attr:`synth_overrides`) of
    #: the small configuration ``make demo`` (``trainfab demo``) generates, quick-regresses and
    #: measures, chosen to synthesize in seconds; ``None``: the unit is not in the demo (every
    #: family has at least one unit in it; a family's baseline is measured at the same size, so
    #: that the ratio between them is meaningful)
    demo_config: dict | None = None
    #: a configuration field naming the unit's interleaved contexts when its RTL is the C-slow
    #: transformation of the one-context design (:func:`hdl.common.cslow.c_slow`): synthesis
    #: retimes the configurations where it is above 1 (:meth:`retimes`), which place the
    #: extra registers nowhere themselves
    cslow_field: str = ""

    def retimes(self, cfg) -> bool:
        """Whether synthesis retimes ``cfg`` (:attr:`cslow_field` above 1)."""
        return bool(self.cslow_field) and getattr(cfg, self.cslow_field) > 1

    def hardware_config(self, cfg) -> dict:
        """The configuration fields that shape the hardware (all but :attr:`runtime_fields`)."""
        from golden import config_dict

        return {k: v for k, v in config_dict(cfg).items() if k not in self.runtime_fields}

    def breakdown_paths(self, cfg) -> tuple[str, ...]:
        """The instance paths ``area --breakdown`` reports for ``cfg`` (:attr:`breakdown_by`
        of the configuration, else :attr:`breakdown`; empty: the top's children)."""
        if self.breakdown_by:
            return tuple(resolve(self.breakdown_by)(cfg))
        return self.breakdown

    @property
    def family(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def top(self) -> str:
        """Verilog module name of the generated top level."""
        return self.name.replace(".", "_")

    @property
    def config_path(self) -> str:
        """``module:Class`` of the configuration class (:attr:`config` under the layout)."""
        return in_package(f"golden.{self.family}", self.config)

    @property
    def component_path(self) -> str:
        """``module:callable`` of the component (:attr:`component` under the layout)."""
        return in_package(f"hdl.{self.family}", self.component)

    @property
    def testbench_module(self) -> str:
        """The cocotb test module: :attr:`testbench`, or ``tb.<family>.<unit>``."""
        return self.testbench or f"tb.{self.name}"

    def config_class(self):
        return resolve(self.config_path)

    def component_factory(self):
        return resolve(self.component_path)

    def make_config(self, base=None, **overrides):
        """``base`` with ``overrides``, or without ``base`` the configuration class built from
        ``overrides`` (the paper's configuration elsewhere); :class:`FlowError` naming the unit
        if the result is invalid."""
        try:
            return self._build_config(base, overrides)
        except (ConfigError, TypeError) as e:
            raise FlowError(f"{self.name}: configuration {config_label(overrides)}: {e}") from None

    def _build_config(self, base, overrides: dict):
        """:meth:`make_config` raising the configuration class's own error."""
        if base is None:
            return self.config_class()(**overrides)
        return dataclasses.replace(base, **overrides)

    def test_configs(self, base=None, effort: str = "standard") -> list[tuple[str, object]]:
        """The labelled configurations a regression at ``effort`` runs: ``base`` first (label
        ``default``), then ``base`` with each of :attr:`extra_configs` (label ``key=value,…``)
        and, at ``full`` effort, each of :attr:`full_configs`, leaving out any equal to one
        already listed."""
        return self.user_test_configs(base, effort=effort)[0]

    def user_test_configs(self, base=None, fixed=(), effort: str = "standard"
                          ) -> tuple[list[tuple[str, object]], list[str]]:
        """:meth:`test_configs` around a user's configuration whose fields ``fixed`` were set
        explicitly (``--set``, ``--config``): extra configurations that would change a fixed
        field, or that are invalid combined with ``base``, are left out.  Returns the labelled
        configurations and one line per configuration left out, saying why."""
        configs, skipped = [("default", self.make_config(base))], []
        extra = self.extra_configs + (self.full_configs if effort == "full" else ())
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


def in_package(package: str, name: str) -> str:
    """``module:attribute`` for ``name``: itself when it already names a module, else the
    attribute ``name`` of ``package`` (a family package of the layout)."""
    return name if ":" in name else f"{package}:{name}"


def resolve(path: str):
    """The object named by ``module:attribute``."""
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


def units() -> dict[str, Unit]:
    """Every unit of every family, by name."""
    from . import families

    return {u.name: u for u in families.units()}


def __getattr__(name):
    # UNITS is collected on use: the family modules import this module for Unit
    if name == "UNITS":
        return units()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def get(name: str) -> Unit:
    """The unit called ``name``; :class:`FlowError` listing the known units otherwise."""
    known = units()
    try:
        return known[name]
    except KeyError:
        raise FlowError(f"unknown unit {name!r}; known units: {', '.join(sorted(known))}") from None


__all__ = ["EFFORTS", "Unit", "UNITS", "config_label", "get", "resolve", "units"]

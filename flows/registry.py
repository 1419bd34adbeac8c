"""The unit registry: one entry per generatable unit, used by the CLI and the tests.

Entries name their configuration class, component factory and testbench module by import path,
so that listing units imports nothing heavy and ``hdl`` never imports ``tb``.
"""

import importlib
from dataclasses import dataclass, field

from . import FlowError


@dataclass(frozen=True)
class Unit:
    """A generatable unit."""

    #: dotted unit name, ``family.unit``
    name: str
    #: one line for ``trainfab list``
    summary: str
    #: ``module:Class`` of the frozen configuration dataclass (in golden/)
    config: str
    #: ``module:callable`` building the Amaranth component from a configuration object
    component: str
    #: cocotb test module
    testbench: str
    #: preset (``flows/configs/<preset>.toml``) holding the paper's configuration of this unit
    preset: str
    #: non-default configurations (field overrides) the test suite also regresses
    test_configs: tuple = field(default_factory=tuple)

    @property
    def family(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def top(self) -> str:
        """Verilog module name of the generated top level."""
        return self.name.replace(".", "_")

    def config_class(self):
        return _resolve(self.config)

    def component_factory(self):
        return _resolve(self.component)


def _resolve(path: str):
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


UNITS = {u.name: u for u in [
    Unit("common.round", "Rounding block: a raw significand and exponent to a float or integer format",
         "golden.common.rounding:RoundConfig", "hdl.common.rounding:Round", "tb.common.round",
         "common-paper", test_configs=(
             {"fmt": "fp32", "in_width": 48, "frac": 46, "mode": "rto"},
             {"fmt": "e10m9", "in_width": 18, "signed": True, "frac": 12, "exp_width": 12,
              "overflow": "wrap"},
             {"fmt": "bf16", "in_width": 10, "frac": 9, "normalized": True, "mode": "rtz"},
             {"fmt": "e4m3", "in_width": 12, "frac": 8, "exp_width": 6, "mode": "sr",
              "rand_bits": 4, "overflow": "saturate"},
             {"fmt": "uint4", "in_width": 24, "frac": 23, "exp_width": 9, "mode": "sr",
              "overflow": "saturate"},
             {"fmt": "int8", "in_width": 20, "signed": True, "frac": 10, "exp_width": 6,
              "mode": "rdn", "overflow": "saturate"},
             {"fmt": "e10m9", "in_width": 16, "frac": 15, "exp_width": 6},
             {"fmt": "e10m9", "in_width": 6, "signed": True, "frac": 0, "exp_width": 3,
              "overflow": "wrap"},
             {"fmt": "e5m2", "in_width": 5, "frac": 4, "exp_width": 6, "mode": "sr",
              "rand_bits": 6},
             {"fmt": "fp16", "in_width": 16, "frac": 10, "exp_width": 7, "mode": "rup"},
             {"fmt": "hfp8", "in_width": 8, "frac": 4, "exp_width": 5, "mode": "rna"},
         )),
    Unit("fpraker.encoder", "FPRaker term encoder: bf16 significands to signed power-of-two terms",
         "golden.fpraker:EncoderConfig", "hdl.fpraker:TermEncoder", "tb.fpraker.encoder",
         "fpraker-paper", test_configs=({"lanes": 3, "encoding": "binary"},)),
    Unit("fpraker.pe", "FPRaker PE: 8 term-serial bf16 MAC lanes into a 1.9 accumulator",
         "golden.fpraker:PEConfig", "hdl.fpraker:PE", "tb.fpraker.pe", "fpraker-paper",
         test_configs=({"keep_bits": 6, "kmax": 9}, {"encoding": "binary", "kmax": 1023},
                       {"dmax": 12}, {"lanes": 4, "int_bits": 4}, {"out_round": "rne"},
                       {"encoding": "binary"},
                       {"lanes": 1, "dmax": 0, "frac_bits": 14, "int_bits": 2})),
    Unit("baseline.bf16_pe", "Bit-parallel bf16 PE: 8 multipliers, same 1.9 accumulator",
         "golden.baseline:BaselineConfig", "hdl.baseline:BF16PE", "tb.baseline", "baseline-paper",
         test_configs=({"keep_bits": 6}, {"lanes": 4, "int_bits": 4, "out_round": "rne"},
                       {"frac_bits": 16})),
    Unit("gecko.compressor", "Gecko compressor: a row of FP32/bf16 values per cycle to lane words",
         "golden.gecko:GeckoConfig", "hdl.gecko:GeckoCompressor", "tb.gecko.compressor",
         "gecko-paper", test_configs=({"fmt": "bf16", "man_width": 3, "sign_en": False},
                                      {"lanes": 3, "man_width": 5, "fixed_width": 4})),
    Unit("gecko.decompressor", "Gecko decompressor: lane words + metadata to a row of values per cycle",
         "golden.gecko:GeckoConfig", "hdl.gecko:GeckoDecompressor", "tb.gecko.decompressor",
         "gecko-paper", test_configs=({"fmt": "bf16", "man_width": 2},
                                      {"lanes": 3, "man_width": 5, "fixed_width": 4})),
    Unit("gecko.loopback", "Gecko compressor feeding a decompressor (end-to-end check)",
         "golden.gecko:GeckoConfig", "hdl.gecko:GeckoLoopback", "tb.gecko.loopback",
         "gecko-paper", test_configs=({"fmt": "bf16", "man_width": 4},
                                      {"lanes": 3, "man_width": 5, "fixed_width": 4})),
]}


def get(name: str) -> Unit:
    """The unit called ``name``; :class:`FlowError` listing the known units otherwise."""
    try:
        return UNITS[name]
    except KeyError:
        raise FlowError(f"unknown unit {name!r}; known units: {', '.join(sorted(UNITS))}") from None


__all__ = ["Unit", "UNITS", "get"]

"""The ``trainfab`` commands: one module each, with ``add_arguments(parser)`` and
``run(args) -> exit status``.

:data:`COMMANDS` names each command's module and its one-line help; the parser
(:mod:`flows.cli`) imports a command's module only when that command runs, so ``trainfab
--help`` and a command load only what they use.
"""

import importlib

#: command → (module of this package, one-line help), in the order ``trainfab --help`` lists
COMMANDS = {
    "list": ("listing", "units and presets; with a UNIT, its configuration fields (type, "
                        "default, allowed values, meaning)"),
    "generate": ("generate", "Verilog and a JSON manifest for one unit"),
    "regress": ("regress", "cocotb regressions against the golden models"),
    "area": ("area", "yosys area and OpenSTA timing for one unit"),
    "close": ("close", "the smallest pipeline depth of a unit that meets a clock period"),
    "timing": ("timing", "every pipelined unit at the configuration that closes its timing "
                         "(the clock table)"),
    "sweep": ("sweep", "area, timing or regressions of one unit over a grid of "
                       "configurations, on local processes or a Dask cluster"),
    "power": ("power", "power from gate-level simulation activity (yosys + cocotb + OpenSTA) "
                       "for one unit"),
    "paths": ("paths", "worst register-to-register paths between cell groups of a "
                       "synthesized unit (OpenSTA on an area run's netlist)"),
    "speedup": ("speedup", "FPRaker tile cycles vs the iso-area bit-parallel baseline on real "
                           "GEMMs: tensor-file pairs, a fetched model or training captures"),
    "report": ("report", "area/timing of every unit at its paper preset, with ratios"),
    "tensor-stats": ("tensor_stats", "statistics of a tensor file (.npy, .npz, .safetensors) "
                                     "or of a training capture folder (per epoch and kind)"),
    "bench": ("bench", "speed of the golden models and cycle statistics"),
    "study": ("study", "studies: 'dispatch' = Equinox scheduler p99 latency and training "
                       "throughput vs inference load, per policy; 'hbfp' = HBFP dot-product "
                       "error vs mantissa, block and accumulator width; 'fast-time' = FAST's "
                       "training time and width map of a `trainfab train` run; 'fpraker-rows' "
                       "= FPRaker tile cycles per group for 1, 2, 4 and 8 rows under both "
                       "column synchronizations"),
    "train": ("train", "train a small network in every number format (accuracy beside the "
                       "papers' claims); optionally capture the training GEMMs' operands"),
    "demo": ("demo", "generate, quick-regress and measure one small unit of each family, "
                     "with a comparison table and a plot (make demo)"),
    "paper": ("paper", "every unit at its paper configuration with its parts, the papers' "
                       "ratios and scalings, tile power and speedup on MiniLM, the term-encoder "
                       "sweep and the 8 x 8 tiles (make paper; about 1 h 20 min on 2 cores, "
                       "its estimate printed first)"),
    "docs": ("docs", "regenerate the documentation's tables from the declarations (units, "
                     "fields, ports), or check that they are current (make docs)"),
}


def load(name: str):
    """The module of command ``name``."""
    return importlib.import_module(f"{__name__}.{COMMANDS[name][0]}")


__all__ = ["COMMANDS", "load"]

"""Golden models: the trainfab specification written as bit-level NumPy/Python code.

Every hardware unit in :mod:`hdl` has a model here that takes the same frozen configuration
object and computes the same bits.  Models use integer arithmetic on bit patterns (``uint16``
bfloat16, ``uint32`` FP32); they never use floating point as a shortcut for the arithmetic being
specified.  This package imports NumPy only; numba (:mod:`golden.common.jit`), when it is
installed, only behind the fast kernels that stand beside the models and are property-tested
against them bit for bit: the FPRaker tile GEMM's engine (:mod:`golden.fpraker.gemm`), the
HBFP GEMM (:mod:`golden.equinox.hbfp_kernel`), FAST's GEMM and converter
(:mod:`golden.fast.gemm_kernel`) and the bfloat16 rounding (:mod:`golden.common.bf16_kernel`).  The training formats use the kernels; the models stay the
specification.
"""

from dataclasses import field as _field
from dataclasses import fields as _fields


class ConfigError(ValueError):
    """An invalid unit configuration.

    The message names the field, the offending value and the allowed range, so that the CLI
    can show it to the user as one line.
    """

    def __init__(self, cls_name: str, field: str, value, allowed: str):
        self.cls_name = cls_name
        self.field = field
        self.value = value
        self.allowed = allowed
        super().__init__(f"{cls_name}.{field} = {value!r} is invalid: allowed {allowed}")


def check_int(cfg, name: str, lo: int, hi: int | None = None) -> None:
    """Raise :class:`ConfigError` unless ``cfg.<name>`` is an ``int`` in ``lo..hi``."""
    value = getattr(cfg, name)
    allowed = f"an integer in {lo}..{hi}" if hi is not None else f"an integer >= {lo}"
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(type(cfg).__name__, name, value, allowed)
    if value < lo or (hi is not None and value > hi):
        raise ConfigError(type(cfg).__name__, name, value, allowed)


def check_choice(cfg, name: str, choices) -> None:
    """Raise :class:`ConfigError` unless ``cfg.<name>`` is one of ``choices``."""
    value = getattr(cfg, name)
    if isinstance(value, bool) or value not in tuple(choices):
        allowed = "one of " + ", ".join(repr(c) for c in choices)
        raise ConfigError(type(cfg).__name__, name, value, allowed)


def check_bool(cfg, name: str) -> None:
    """Raise :class:`ConfigError` unless ``cfg.<name>`` is a ``bool``."""
    value = getattr(cfg, name)
    if not isinstance(value, bool):
        raise ConfigError(type(cfg).__name__, name, value, "true or false")


def runtime(default):
    """A configuration field that is a run-time input of the hardware (a port), not a
    parameter: its value is only the testbench's default, and the Verilog does not depend on
    it (``field(default=…, metadata={"runtime": True})``)."""
    return _field(default=default, metadata={"runtime": True})


def config_dict(cfg) -> dict:
    """The fields of a configuration dataclass as a plain ``dict`` (for manifests and JSON)."""
    return {f.name: getattr(cfg, f.name) for f in _fields(cfg)}


__all__ = ["ConfigError", "check_int", "check_choice", "check_bool", "runtime", "config_dict"]

"""Every registered unit synthesizes and meets timing at some clock, with figures that add up.

At ``--effort standard`` (``make test``) each unit is synthesized at its small configuration
(:attr:`flows.declare.SynthPlan.small`); at ``--effort full`` (``make test-full``) at its
paper configuration.  The flip-flop counts are derived from the RTL where its registers are few
and regular; the cell area must be the sum of the liberty areas of the mapped cells, and the
report must describe the Verilog that was synthesized.
"""

import math
import re

import pytest

from flows import registry
from flows.config import load_config
from flows.eda.generate import sha256, to_verilog
from flows.eda.synth import area, liberty_cell_areas, nand2_area
from flows.eda.tools import OSU018
from golden import config_dict


def _encoder_lane_flops(encoding: str, hidden_bit_known: bool = False) -> int:
    """Flip-flops of one term-encoder lane after synthesis (hdl/fpraker/encoder.py).

    ``rem`` has 9 digit bits, but a binary significand has 8 bits, so binary's digit 8 is
    constant 0; ``negm`` is 9 bits for CSD, whose digits 7 and 8 can never be negative (``n`` has
    no bits 8 and 9, so ``~x3 & n`` is 0 there), and constant 0 for binary; the sticky ``error``
    is one bit, constant when the loader always sets the hidden bit (the PE does).
    """
    rem, negm = (9, 7) if encoding == "csd" else (8, 0)
    return rem + negm + (0 if hidden_bit_known else 1)


def _accumulator_flops(cfg) -> int:
    """acc_zero, acc_sign, the 10-bit exponent and the keep_bits + 1 significand."""
    return 1 + 1 + 10 + cfg.keep_bits + 1


#: flip-flop count per unit as a function of its configuration, where the RTL makes it plain
FLIP_FLOPS = {
    "fpraker.encoder": lambda c: c.lanes * _encoder_lane_flops(c.encoding),
    # PECore per lane: abe (10) + manb (7) + psgn + mana (7) + done; plus busy and fresh
    "fpraker.pe": lambda c: (c.lanes * (26 + _encoder_lane_flops(c.encoding, True)) + 2
                             + _accumulator_flops(c)),
    "baseline.bf16_pe": _accumulator_flops,
    # stage 1: per lane exponent, significand, sign (+ noise and LFSR for stoch), the shared
    # exponent and valid; output block, valid; the sticky error
    "equinox.quantizer": lambda c: (c.w * (c.in_format.exp_bits + c.in_format.man_bits + 2
                                           + (c.rbits + 16 if c.rounding == "stoch" else 0))
                                    + 9 + 8 + c.w * c.m + 1 + 1),
    # two group buffers of 16-bit values; per bank full, count, header, final; fill side
    # wb, wi, base, dmax; write-out rb, rk; accumulator, fill, flush; output register
    "fpraker.bdc_encoder": lambda c: (2 * c.group * 16 + 2 * (1 + _bits(c.group + 1) + 3 + 1)
                                      + 1 + _bits(c.group) + 8 + 3 + 1 + _bits(c.group)
                                      + c.word + _bits(c.word) + 1 + 1 + c.word + 1),
    # active, left (32), k, header, base, bit buffer, avail, cur_last; output register; error
    "fpraker.bdc_decoder": lambda c: (1 + 32 + _bits(c.group) + 3 + 8 + c.word + _bits(c.word)
                                      + 1 + 1 + 17 + 1),
}


def _bits(n: int) -> int:
    """Bits of a counter over 0..n-1 (``ceil(log2(n))``)."""
    return (n - 1).bit_length()


def _config(unit, effort):
    return load_config(unit) if effort == "full" else unit.make_config(**unit.synth.small)


@pytest.mark.parametrize("unit_name", sorted(registry.UNITS))
def test_area_and_timing(unit_name, effort, tmp_path):
    unit = registry.get(unit_name)
    cfg = _config(unit, effort)
    r = area(unit, cfg, outdir=tmp_path)
    assert r["area_um2"] > 0 and r["cells"] > 0 and r["transistors_estimate"] > 0
    assert r["fmax_mhz"] and r["fmax_mhz"] > 0
    assert (tmp_path / "area.json").exists() and (tmp_path / "area.md").exists()

    # the report describes the Verilog of this configuration
    text = to_verilog(unit, cfg)
    assert r["verilog_sha256"] == sha256(text)
    assert (tmp_path / f"{unit.top}.v").read_text() == text
    assert r["config"] == {k: getattr(cfg, k) for k in r["config"]}

    # the figures add up: cells by type, their liberty areas, gate equivalents
    cell_areas = liberty_cell_areas(OSU018)
    assert sum(r["cells_by_type"].values()) == r["cells"]
    assert sum(n * cell_areas[c] for c, n in r["cells_by_type"].items()) == \
        pytest.approx(r["area_um2"], abs=0.01)
    # area_ge is rounded to one decimal
    assert r["area_ge"] == pytest.approx(r["area_um2"] / nand2_area(OSU018), abs=0.0501)
    flops = sum(n for c, n in r["cells_by_type"].items() if c.startswith("DFF"))
    assert flops == r["flip_flops"]
    # every unit but the combinational rounding block has registers
    assert (flops > 0) == ("input clk" in text), (flops, unit_name)
    if unit_name in FLIP_FLOPS:
        assert r["flip_flops"] == FLIP_FLOPS[unit_name](cfg), r["flip_flops"]

    # run-time inputs (ports) are listed apart from the hardware's configuration
    assert set(r["config"]).isdisjoint(unit.runtime_fields)
    assert set(r["config"]) | set(unit.runtime_fields) == set(config_dict(cfg))
    # every file the report lists is beside it, and the critical path names registers or
    # ports, not anonymous cells
    assert all((tmp_path / name).is_file() for name in r["files"]), r["files"]
    for end in (r["startpoint"], r["endpoint"]):
        assert end and not re.fullmatch(r"_\d+_", end), (r["startpoint"], r["endpoint"])


def test_flip_flop_formulas_at_the_paper_configuration():
    """The formulas give the published figures (README: 136, 360, 22 and 347 flip-flops; the
    BDC encoder's 1,141 and decoder's 106 at groups of 32 and 32-bit words)."""
    paper = {name: registry.get(name).make_config() for name in FLIP_FLOPS}
    assert {name: f(paper[name]) for name, f in FLIP_FLOPS.items()} == {
        "fpraker.encoder": 136, "fpraker.pe": 360, "baseline.bf16_pe": 22,
        "equinox.quantizer": 347, "fpraker.bdc_encoder": 1141, "fpraker.bdc_decoder": 106}


def _size(cfg) -> int:
    """What a small configuration shrinks: lanes, an array's cells or MACs, the group or block,
    the inference batch, or (the adder) the format."""
    for attrs in (("lanes",), ("rows", "cols", "group"), ("group",), ("n", "n", "w"), ("w",),
                  ("b_inf",)):
        if all(hasattr(cfg, a) for a in attrs):
            return math.prod(getattr(cfg, a) for a in attrs)
    return cfg.format.width


def test_synth_overrides_are_smaller_than_the_paper_configuration():
    for unit in registry.UNITS.values():
        if unit.name == "common.round":
            continue        # a single rounding step: its default configuration is small already
        small, paper = unit.make_config(**unit.synth.small), unit.make_config()
        assert unit.synth.small and small != paper, unit.name
        assert _size(small) < _size(paper), unit.name

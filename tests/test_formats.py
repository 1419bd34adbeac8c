"""Number formats: the golden descriptions, the RTL layouts built from them, and the testbench
packer that reads and writes words through those layouts."""

import numpy as np
import pytest
from amaranth.hdl import Shape
from amaranth.lib import data

from golden.common import BF16, FORMATS, FP32, BFPFormat, fields, format_named, pack
from hdl.common.formats import group_layout, layout
from tb.common.layouts import field, pack as pack_layout, unpack


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_layout_width_is_the_format_width(name):
    fmt = FORMATS[name]
    shape = layout(fmt)
    width = shape.size if isinstance(shape, data.Layout) else Shape.cast(shape).width
    assert width == fmt.width


@pytest.mark.parametrize("fmt", [BF16, FP32, format_named("e4m3"), format_named("hfp8")],
                         ids=lambda f: f.name)
def test_float_fields_agree_with_the_golden_bit_helpers(fmt):
    """Every code (a spread of 5,592 for FP32) unpacks to the golden (sign, exponent, mantissa) fields
    and packs back to itself."""
    codes = range(0, 1 << fmt.width, 1 if fmt.width <= 16 else 7919 * 97)
    lay = layout(fmt)
    for code in codes:
        s, e, m = (int(v) for v in fields(code, fmt))
        assert unpack(lay, code) == {"sign": s, "exp": e, "man": m}
        assert pack_layout(lay, {"sign": s, "exp": e, "man": m}) == int(pack(s, e, m, fmt))


def test_bfp_blocks_of_both_element_kinds():
    fast = BFPFormat("fast-bfp4", exp_bits=8, man_bits=4, block=16, sign_magnitude=True)
    hbfp = BFPFormat("hbfp8", exp_bits=8, man_bits=8, block=4)
    lf, lh = layout(fast), layout(hbfp)
    assert lf.size == fast.width == 8 + 16 * 5 and lh.size == hbfp.width == 8 + 4 * 8
    word = pack_layout(lf, {"exp": 130, "man": [{"mag": 9, "sign": 1}] + [{"mag": 3}] * 15})
    assert field(lf, word, "exp") == 130
    assert field(lf, word, "man", 0) == {"mag": 9, "sign": 1}
    assert field(lf, word, "man", 15, "mag") == 3
    word = pack_layout(lh, {"exp": 127, "man": [-128, 127, -1, 0]})
    assert unpack(lh, word) == {"exp": 127, "man": [-128, 127, -1, 0]}
    assert word >> 8 & 0xFF == 0x80            # element 0, two's complement, right after exp


def test_group_layout_and_packing_errors():
    g = group_layout(BF16, 3)
    assert g.size == 2 * 3 * 16 + 1
    word = pack_layout(g, {"a": [0x3F80, 0x4000], "b": [0xBF80], "clear": 1})
    assert unpack(g, word) == {"a": [{"man": 0, "exp": 127, "sign": 0},
                                     {"man": 0, "exp": 128, "sign": 0},
                                     {"man": 0, "exp": 0, "sign": 0}],
                               "b": [{"man": 0, "exp": 127, "sign": 1},
                                     {"man": 0, "exp": 0, "sign": 0},
                                     {"man": 0, "exp": 0, "sign": 0}],
                               "clear": 1}
    with pytest.raises(ValueError, match="4 elements"):
        pack_layout(g, {"a": [0] * 4})
    with pytest.raises(KeyError, match="colour"):
        pack_layout(g, {"colour": 1})
    with pytest.raises(ValueError, match="does not fit"):
        pack_layout(g, {"clear": 2})
    with pytest.raises(ValueError, match="does not fit"):
        pack_layout(layout(BF16), 1 << 16)


def test_integer_formats():
    assert Shape.cast(layout("int12")) == Shape(12, signed=True)
    assert Shape.cast(layout("uint4")) == Shape(4, signed=False)
    assert unpack(layout("int8"), 0xFF) == -1 and pack_layout(layout("int8"), -128) == 0x80
    assert np.iinfo(format_named("int12").dtype).max >= 4095

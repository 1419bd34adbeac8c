"""The baseline tile's Verilog (``baseline.bf16_tile``): the :class:`TileSignature` ports the
shared tile driver (tb/common/tile.py) relies on, one ``pe<r>_<c>`` instance per PE with the
baseline PE's blocks, and breakdown patterns that match them at every size."""

import pytest

from flows import registry
from flows.eda.generate import ports, to_verilog
from flows.eda.breakdown import block_label, check_breakdown_paths, module_names


@pytest.mark.parametrize("rows, cols", [(1, 1), (2, 3)])
def test_ports_and_instances(rows, cols):
    unit = registry.get("baseline.bf16_tile")
    cfg = unit.make_config(rows=rows, cols=cols, lanes=2)
    text = to_verilog(unit, cfg)
    got = {p["name"]: (p["direction"], p["width"]) for p in ports(text, unit.top)}
    want = {"clk": ("input", 1), "rst": ("input", 1), "busy": ("output", 1),
            "error": ("output", 1)}
    for c in range(cols):
        want.update({f"a__{c}__valid": ("input", 1), f"a__{c}__ready": ("output", 1),
                     f"a__{c}__payload": ("input", 2 * 16 + 1)})
    for r in range(rows):
        want.update({f"b__{r}__valid": ("input", 1), f"b__{r}__ready": ("output", 1),
                     f"b__{r}__payload": ("input", 2 * 16)})
        want.update({f"out__{r}__{c}": ("output", 16) for c in range(cols)})
    assert got == want
    modules = set(module_names(text))
    for r in range(rows):
        for c in range(cols):
            for block in ("products", "exponent", "lanes", "accumulator"):
                assert f"{unit.top}.pe{r}_{c}.{block}" in modules
    assert f"{unit.top}.pe{rows}_0" not in modules
    blocks = check_breakdown_paths(unit, text)
    assert sorted(blocks) == sorted(f"pe{r}_{c}.{block}" for r in range(rows)
                                    for c in range(cols)
                                    for block in ("products", "exponent", "lanes", "accumulator"))
    # the labels the breakdown is summed under (flows.tile_tables.TILE_BLOCKS)
    assert {block_label(b) for b in blocks} == {"pe*.products", "pe*.exponent", "pe*.lanes",
                                                "pe*.accumulator"}

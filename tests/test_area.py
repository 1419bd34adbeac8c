"""Every registered unit synthesizes at its paper configuration and meets timing at some clock."""

import pytest

from flows import registry
from flows.config import load_config
from flows.synth import area


@pytest.mark.parametrize("unit_name", sorted(registry.UNITS))
def test_area_and_timing_at_paper_config(unit_name, tmp_path):
    unit = registry.get(unit_name)
    r = area(unit, load_config(unit), outdir=tmp_path)
    assert r["area_um2"] > 0 and r["cells"] > 0 and r["transistors_estimate"] > 0
    assert r["fmax_mhz"] and r["fmax_mhz"] > 0
    assert (tmp_path / "area.json").exists() and (tmp_path / "area.md").exists()

"""The LFSR bank on its own (``common.lfsr``): its draws against the scalar LFSR step, its
period and seeds, and its configuration's validation."""

import pytest

from golden import ConfigError
from golden.common.lfsr import PERIOD, LFSRConfig, lane_seeds, lfsr16_step


def test_draws_are_the_bits_the_steps_shift_in():
    """Draw k of lane i: the top ``bits`` bits after (k + 1) * bits scalar steps from the
    lane's seed, for widths that split and that do not split the 16-bit state."""
    for bits in (1, 5, 8, 16):
        cfg = LFSRConfig(lanes=3, bits=bits)
        draws = cfg.rng().draws(20)
        for lane, seed in enumerate(lane_seeds(3)):
            s = seed
            for k in range(20):
                for _ in range(bits):
                    s = lfsr16_step(s)
                assert int(draws[k, lane]) == s >> (16 - bits), (bits, lane, k)


def test_the_lfsr_is_maximal_and_the_seeds_distinct():
    s, seen = 1, set()
    for _ in range(PERIOD):
        seen.add(s)
        s = lfsr16_step(s)
    assert s == 1 and len(seen) == PERIOD
    seeds = lane_seeds(64)
    assert len(set(seeds)) == 64 and all(seeds)


@pytest.mark.parametrize("field, value", [("lanes", 0), ("lanes", 65), ("bits", 0),
                                          ("bits", 17), ("bits", True)])
def test_bad_configurations_name_the_field(field, value):
    with pytest.raises(ConfigError, match=field):
        LFSRConfig(**{field: value})

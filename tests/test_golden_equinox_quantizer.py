"""golden.equinox.quantizer: the quantizer unit's model over streams of blocks (LFSR draws,
injected noise, bf16 inputs, Inf/NaN blocks) and its configuration errors."""

import numpy as np
import pytest

from golden import ConfigError
from golden.common.lfsr import LaneRNG, lane_seeds, lfsr16_step
from golden.equinox import QuantizerConfig, quantize_stream
from golden.equinox.hbfp import bfp_quantize, f32_to_bf16


def test_lfsr_draws_are_the_stepped_states():
    """A draw of ``bits`` steps every lane ``bits`` times and returns the top ``bits`` bits."""
    for bits in (5, 8, 16):
        rng = LaneRNG(lanes=3, bits=bits)
        states = list(lane_seeds(3))
        for _ in range(20):
            got = rng.draw()
            for lane in range(3):
                for _ in range(bits):
                    states[lane] = lfsr16_step(states[lane])
                assert got[lane] == states[lane] >> (16 - bits)
            assert rng.state.tolist() == states


def test_stream_uses_lfsr_only_when_not_injected():
    cfg = QuantizerConfig(w=4, rounding="stoch")
    gen = np.random.default_rng(1)
    x = gen.standard_normal((6, 4)).astype(np.float32)
    inj = [None, gen.integers(0, 1 << 16, 4), None, None, gen.integers(0, 1 << 16, 4), None]
    got = quantize_stream(cfg, x.view(np.uint32), inj)
    ref = LaneRNG(lanes=4, bits=16)
    for t in range(6):
        R = ref.draw() if inj[t] is None else inj[t]
        e, M = bfp_quantize(x[t], 8, "stoch", np.asarray(R, dtype=np.int64), 16)
        assert got[t] == (e, tuple(int(v) for v in M))


def test_bf16_inputs_and_nonfinite_blocks():
    cfg = QuantizerConfig(w=3, in_fmt="bf16", rounding="rne")
    x = np.array([[1.5, -0.3, 0.001], [1.0, 2.0, 3.0]], dtype=np.float32)
    bits = f32_to_bf16(x).astype(np.int64)
    bits[1, 2] = 0x7F80                                   # +Inf
    got = quantize_stream(cfg, bits)
    e, M = bfp_quantize((bits[0].astype(np.uint32) << 16).view(np.float32), 8, "rne")
    assert got[0] == (e, tuple(int(v) for v in M)) and got[1] is None


@pytest.mark.parametrize("field, value", [("w", 0), ("w", 65), ("m", 1), ("m", 17),
                                          ("in_fmt", "fp16"), ("rounding", "nearest"),
                                          ("rbits", 0), ("rbits", 17), ("pipeline", -1),
                                          ("pipeline", 5)])
def test_config_errors(field, value):
    with pytest.raises(ConfigError, match=f"QuantizerConfig.{field}"):
        QuantizerConfig(**{field: value})

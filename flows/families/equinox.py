"""Equinox/HBFP (``seed-equinox.md``): the weight-stationary BFP systolic array, the BFP
quantizer and the priority request/instruction dispatcher.
"""

from ..registry import Unit

ORDER = 50

UNITS = (
    Unit(name="equinox.quantizer",
         summary="Equinox FP32/bf16 -> hbfp8 block quantizer: max exponent, floor/rne/rtz/"
                 "stochastic rounding (LFSR or injected random bits), one block per cycle",
         config="golden.equinox:QuantizerConfig", component="hdl.equinox:Quantizer",
         testbench="tb.equinox.quantizer", preset="equinox-paper",
         extra_configs=({"rounding": "rne"}, {"rounding": "rtz"}, {"rounding": "stoch"},
                        {"in_fmt": "bf16", "rounding": "rne", "w": 3, "m": 4},
                        {"rounding": "stoch", "rbits": 5, "m": 16, "w": 1},
                        {"in_fmt": "bf16", "rounding": "stoch", "rbits": 8, "m": 12}),
         test_sizes={"quick": 500, "standard": 10000, "full": 100000},
         synth_overrides={"w": 4}),
)

__all__ = ["UNITS"]

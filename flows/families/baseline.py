"""The bit-parallel bfloat16 PE that FPRaker is compared with (``seed-fpraker.md`` §11.6, §14).

The ratios against it are FPRaker's and live in :mod:`flows.families.fpraker`.
"""

from ..registry import Unit

ORDER = 20

UNITS = (
    Unit(name="baseline.bf16_pe",
         summary="Bit-parallel bf16 PE: 8 multipliers, same 1.9 accumulator",
         config="golden.baseline:BaselineConfig", component="hdl.baseline:BF16PE",
         testbench="tb.baseline", preset="baseline-paper",
         extra_configs=({"keep_bits": 6}, {"lanes": 4, "int_bits": 4, "out_round": "rne"},
                        {"frac_bits": 16}),
         test_sizes={"quick": 500, "standard": 3000, "full": 20000},
         synth_overrides={"lanes": 2},
         paper="22,212 µm² per PE at 65 nm (FPRaker Table III)"),
)

__all__ = ["UNITS"]

"""Shared building blocks that are registry units of their own: the rounding block and the
floating-point adder.

``common.round`` (:class:`hdl.common.rounding.Round`, golden twin
:func:`golden.common.rounding.round_raw`) is regressed at its default (an FP32 significand
rounded to bfloat16 with RNE) and at configurations that sweep every rounding mode, float and
integer targets, two's complement and normalized inputs, the three exponent ranges, and the
accumulator normalizer and read-out the PEs instantiate.  ``common.fp_add``
(:class:`hdl.common.fp_add.FPAdder`, golden :func:`golden.common.fp_add.fp_add_bits`) is the FP32
adder of the accumulators, regressed in FP32 and in three narrower formats.  Both are also
regressed with register stages (``pipeline``), each output checked exactly ``pipeline`` cycles
after its input.
"""

from ..declare import ClockTarget, Showcase, SynthPlan, TestPlan, Unit

ORDER = 90

UNITS = (
    Unit(name="common.round",
         summary="Rounding block: a raw significand and exponent to a float or integer format",
         config="golden.common.rounding:RoundConfig", component="hdl.common.rounding:Round",
         testbench="tb.common.rounding", preset="common",
         tests=TestPlan(sizes={"quick": 300, "standard": 2000, "full": 30000}, configs=(
             # the FPRaker/baseline accumulator normalizer and read-out (golden.common.accumulator)
             {"fmt": "e10m9", "in_width": 18, "signed": True, "frac": 12, "exp_width": 12,
              "overflow": "wrap"},
             {"fmt": "bf16", "in_width": 10, "frac": 9, "normalized": True, "mode": "rtz"},
             # an FP32 adder's result rounding to odd
             {"fmt": "fp32", "in_width": 48, "frac": 46, "mode": "rto"},
             # stochastic rounding: FAST's element magnitudes, and a float with a random window
             # wider than the bits it rounds away
             {"fmt": "uint4", "in_width": 24, "frac": 23, "exp_width": 9, "mode": "sr",
              "overflow": "saturate"},
             {"fmt": "e4m3", "in_width": 12, "frac": 8, "exp_width": 6, "mode": "sr",
              "rand_bits": 4, "overflow": "saturate"},
             {"fmt": "e5m2", "in_width": 5, "frac": 4, "exp_width": 6, "mode": "sr",
              "rand_bits": 6},
             # two's complement floor into a two's complement integer (HBFP's quantizer)
             {"fmt": "int8", "in_width": 20, "signed": True, "frac": 10, "exp_width": 6,
              "mode": "rdn", "overflow": "saturate"},
             # narrow exponent inputs into a wide exponent (the bias exceeds the input range)
             {"fmt": "e10m9", "in_width": 16, "frac": 15, "exp_width": 6},
             {"fmt": "e10m9", "in_width": 6, "signed": True, "frac": 0, "exp_width": 3,
              "overflow": "wrap"},
             # the remaining modes and formats
             {"fmt": "fp16", "in_width": 16, "frac": 10, "exp_width": 7, "mode": "rup"},
             {"fmt": "hfp8", "in_width": 8, "frac": 4, "exp_width": 5, "mode": "rna"},
             # register stages (the latency is checked exactly): every depth, on a float and
             # an integer target, two's complement and stochastic inputs
             {"pipeline": 1},
             {"fmt": "e10m9", "in_width": 18, "signed": True, "frac": 12, "exp_width": 12,
              "overflow": "wrap", "pipeline": 3},
             {"fmt": "uint4", "in_width": 24, "frac": 23, "exp_width": 9, "mode": "sr",
              "overflow": "saturate", "pipeline": 2},
             {"fmt": "e4m3", "in_width": 12, "frac": 8, "exp_width": 6, "mode": "sr",
              "rand_bits": 4, "overflow": "saturate", "pipeline": 2},
         ))),
    Unit(name="common.fp_add",
         summary="Floating-point adder (RNE, DAZ/FTZ): the FP32 accumulators' adder",
         config="golden.common.fp_add:FPAddConfig", component="hdl.common.fp_add:FPAdder",
         testbench="tb.common.fp_add", preset="common",
         tests=TestPlan(sizes={"quick": 500, "standard": 5000, "full": 100000},
                        configs=({"fmt": "bf16"}, {"fmt": "fp16"}, {"fmt": "e5m2"},
                                 # register stages (the latency is checked exactly)
                                 {"pipeline": 1}, {"fmt": "bf16", "pipeline": 3},
                                 {"fmt": "fp16", "pipeline": 5})),
         synth=SynthPlan(small={"fmt": "bf16"}),
         showcase=Showcase(demo={"fmt": "bf16"})),
    Unit(name="common.lfsr",
         summary="LFSR bank: a 16-bit LFSR per lane, bits fresh random bits per lane and draw "
                 "(the converters' stochastic rounding)",
         config="LFSRConfig", component="LFSRBank",
         tests=TestPlan(sizes={"quick": 200, "standard": 1000, "full": 20000},
                        configs=({"lanes": 3, "bits": 5}, {"lanes": 1, "bits": 16})),
         synth=SynthPlan(small={"lanes": 2})),
)

#: the configurations that close the shared blocks' timing (``trainfab timing``)
TIMING = (
    ClockTarget(unit="common.round", note="the one-cycle block"),
    ClockTarget(unit="common.fp_add", overrides={"pipeline": 2},
                note="two register stages in the FP32 adder"),
)


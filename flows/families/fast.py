"""FAST (``docs/specs/fast.md``): BFP conversion with stochastic rounding, the variable-precision
fMAC and the BFP GEMM.

Declares the converter, fMAC and fMAC systolic-array units, the parts the reports measure on
their own (the fMAC with FAST's 2/4-bit registers, by block; one array cell), the Table IV area
ratios against the 16-MAC baselines (:mod:`flows.families.baseline`), the converter's share of a
16 x 16 array, the designs at each one's clock, the clock targets and the golden model's
benchmark.
"""

from ..declare import (Bench, ClockTarget, Comparison, OwnClock, Part, Showcase, SynthPlan,
                       TestPlan, Unit)

ORDER = 40

UNITS = (
    Unit(name="fast.converter",
         summary="FAST FP32 -> BFP converter: 16 lanes, LFSR stochastic rounding, 3 stages",
         config="ConverterConfig", component="Converter", preset="fast-paper",
         tests=TestPlan(sizes={"quick": 300, "standard": 1000, "full": 20000},
                        configs=({"m": 2}, {"group": 5, "m": 6},
                                 # register stages (every cycle checked against the model)
                                 {"group": 5, "m": 6, "pipeline": 2},
                                 {"group": 3, "pipeline": 4})),
         synth=SynthPlan(small={"group": 4}),
         showcase=Showcase(paper="4.56 % of the FAST system's area (Table III; the system "
                                 "includes the SRAMs)")),
    Unit(name="fast.fmac",
         summary="FAST fMAC: 16 2b x 2b multipliers, FP generator, FP32 accumulator; "
                 "(mx/2)(my/2) cycles per group pair",
         config="FMACConfig", component="FMAC", preset="fast-paper",
         tests=TestPlan(sizes={"quick": 12, "standard": 60, "full": 10000},
                        configs=({"m_max": 4}, {"group": 5, "m_max": 6},
                                 {"m_max": 4, "pipeline": 1},
                                 {"group": 5, "m_max": 6, "pipeline": 3},
                                 # interleaved dot products: the adder's stages inside the loop
                                 {"group": 5, "m_max": 6, "contexts": 3, "pipeline": 2},
                                 {"m_max": 4, "contexts": 5})),
         synth=SynthPlan(small={"group": 4, "m_max": 4},
                         breakdown=("multipliers.products", "multipliers.tree", "fp_gen",
                                    "fp_add")),
         # groups of 4 with FAST's 2/4-bit widths, beside 4 bf16 MACs (baseline.mac16)
         showcase=Showcase(paper="1x (Table IV: 0.885 mW; 16x INT-8 is 3.8x its area)",
                           demo={"group": 4, "m_max": 4})),
    Unit(name="fast.array",
         summary="FAST fMAC systolic array: rows x cols fMAC cells, FWD / BWD-DATA / WGRAD "
                 "dataflows at run time, input skew, output deskew",
         config="FMACArrayConfig", component="FMACArray", preset="fast-paper",
         tests=TestPlan(sizes={"quick": 4, "standard": 8, "full": 80},
                        configs=({"rows": 2, "cols": 2}, {"rows": 3, "cols": 2},
                                 {"rows": 1, "cols": 3, "group": 3, "m_max": 8},
                                 {"rows": 2, "cols": 1, "m_max": 2},
                                 {"rows": 2, "cols": 2, "group": 4, "pipeline": 2},
                                 {"rows": 1, "cols": 3, "group": 3, "m_max": 8, "pipeline": 3},
                                 # interleaved GEMMs: the adder's stages inside the cells' loops
                                 {"rows": 2, "cols": 2, "group": 4, "pipeline": 1,
                                  "contexts": 3}),
                        # make test's time: the second interleaved configuration at full effort
                        full_configs=({"rows": 1, "cols": 3, "group": 3, "m_max": 8,
                                       "contexts": 2},)),
         synth=SynthPlan(small={"rows": 1, "cols": 2, "group": 4}),
         showcase=Showcase(paper="256 x 64 fMACs at 500 MHz (§VII); no area of the array "
                                 "alone")),
)

#: the fMAC as FAST uses it: 2- and 4-bit operands (Table IV's fMAC); the fMAC and the array
#: interleaved to their 200 MHz depths; one cell of the array
PARTS = (
    Part(name="fast.fmac/m4", unit="fast.fmac", overrides={"m_max": 4},
         summary="the fMAC with operand registers for FAST's 2- and 4-bit widths",
         paper="1x (FAST Table IV, 0.885 mW)", breakdown=True),
    Part(name="fast.fmac/m4-c5", unit="fast.fmac",
         overrides={"m_max": 4, "contexts": 5, "pipeline": 3},
         summary="the fMAC/m4 with five interleaved dot products at pipeline 3 (its 200 MHz "
                 "depth)",
         paper="— (not in the paper: the fMAC C-slowed)"),
    Part(name="fast.array/c5", unit="fast.array", overrides={"contexts": 5, "pipeline": 3},
         summary="the fMAC array with five interleaved GEMMs at pipeline 3 (200 MHz at the "
                 "paper configuration)",
         paper="— (not in the paper: the array C-slowed)"),
    Part(name="fast.array/cell", unit="fast.array", component="ArrayCell",
         summary="one cell of the fMAC array: the fMAC datapath with its stationary, moving "
                 "and partial-sum registers"),
)

#: FAST Table IV: ASIC area of 16 MACs normalized to the fMAC
COMPARISONS = tuple(
    Comparison(label=f"16 x {name} MAC / fMAC", numerator=numerator, denominator="fast.fmac/m4",
               paper_ratio=ratio, source=f"FAST Table IV: 16x {name} = {ratio}x fMAC (45 nm)")
    for name, numerator, ratio in (("INT-8", "baseline.mac16/int8", 3.8),
                                   ("HFP8 (e4m2)", "baseline.mac16/hfp8", 4.1),
                                   ("INT-12", "baseline.mac16/int12", 5.6),
                                   ("bfloat16", "baseline.mac16", 9.6),
                                   ("FP16", "baseline.mac16/fp16", 10.6))
) + (
    Comparison(label="converter share of converter + 16 x 16 fMAC array (256 cells)",
               numerator="fast.converter", denominator="fast.array/cell",
               denominator_count=256, share=True, paper_ratio=0.0456,
               source="FAST Table III: 4.56 % of the whole system, whose SRAMs (3 x 128 banks x "
                      "16 kB) are not here; the array's skew/deskew registers are left out"),
)

OWN_CLOCKS = tuple(
    OwnClock(label=f"FAST Table IV: fMAC / 16 x {name} MACs", unit="fast.fmac/m4",
             baseline=baseline, work="flows.work:fmac_work", baseline_work=("lanes",),
             source="FAST Table IV (45 nm, one clock)", power=True)
    for name, baseline in (("INT-8", "baseline.mac16/int8"), ("bfloat16", "baseline.mac16"),
                           ("FP16", "baseline.mac16/fp16"))
) + (
    # both sides C-slowed to their 200 MHz depths: the like-for-like pair at high clocks
    OwnClock(label="FAST Table IV, interleaved: fMAC / 16 x bfloat16 MACs",
             unit="fast.fmac/m4-c5", baseline="baseline.mac16/c5", work="flows.work:fmac_work",
             baseline_work=("lanes",),
             source="not in the paper: both designs with five interleaved dot products"),
)

BENCHES = (
    Bench(name="fast", summary="FAST golden model: quantizer throughput and BFP GEMM time",
          run="flows.bench.fast:fast_table"),
)

#: the configurations that close the FAST units' timing (``trainfab timing``)
TIMING = (
    ClockTarget(unit="fast.converter", overrides={"pipeline": 2},
                note="two more stages in the converter"),
    ClockTarget(unit="fast.fmac", overrides={"contexts": 5, "pipeline": 3},
                note="five interleaved dot products, the FP32 adder's four stages inside the "
                     "loop, three stages before it"),
    ClockTarget(unit="fast.array", overrides={"contexts": 5, "pipeline": 3},
                note="five interleaved GEMMs, each cell's FP32 adder with four stages inside "
                     "its loop, three stages before it"),
)

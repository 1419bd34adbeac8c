"""The baselines the papers compare against: FPRaker's bit-parallel bfloat16 PE and tile
(``docs/specs/fpraker.md`` §11.6, §14) and FAST's Table IV 16-MAC designs (``docs/specs/fast.md``
§7).

The ratios against them are the papers' and live in the families that state them
(:mod:`flows.families.fpraker`, :mod:`flows.families.fast`).
"""

from ..declare import ClockTarget, Part, Showcase, SynthPlan, TestPlan, Unit

ORDER = 20

UNITS = (
    Unit(name="baseline.bf16_pe",
         summary="Bit-parallel bf16 PE: 8 multipliers, same 1.9 accumulator",
         config="BaselineConfig", component="BF16PE", preset="baseline-paper",
         tests=TestPlan(sizes={"quick": 500, "standard": 2000, "full": 20000},
                        configs=({"keep_bits": 6},
                                 {"lanes": 4, "int_bits": 4, "out_round": "rne"},
                                 {"frac_bits": 16},
                                 # stages before the accumulator (the latency checked exactly)
                                 {"lanes": 3, "int_bits": 4, "pipeline": 1},
                                 {"lanes": 2, "frac_bits": 16, "out_round": "rne",
                                  "pipeline": 3},
                                 # interleaved dot products: cuts inside the accumulation loop
                                 {"lanes": 3, "int_bits": 4, "pipeline": 1, "contexts": 6},
                                 {"lanes": 2, "frac_bits": 16, "pipeline": 2, "contexts": 3})),
         synth=SynthPlan(small={"lanes": 2}),
         # the size of fpraker.pe's demo configuration
         showcase=Showcase(paper="22,212 µm² per PE at 65 nm (FPRaker Table III)",
                           demo={"lanes": 2})),
    Unit(name="baseline.bf16_tile",
         summary="Bit-parallel bf16 baseline tile: rows x cols bf16 PEs, A down the columns, "
                 "B along the rows, joined streams, one group per cycle",
         config="BaselineTileConfig", component="Bf16Tile", preset="baseline-paper",
         tests=TestPlan(sizes={"quick": 300, "standard": 2000, "full": 20000},
                        configs=(
                            # the PEs' stages (busy, error and the results checked cycle by
                            # cycle)
                            {"rows": 2, "cols": 2, "lanes": 4, "int_bits": 4, "pipeline": 1},
                            {"rows": 1, "cols": 2, "lanes": 2, "pipeline": 3},
                            # interleaved output tiles (the PEs' contexts)
                            {"rows": 2, "cols": 2, "lanes": 2, "int_bits": 4, "pipeline": 1,
                             "contexts": 3}),
                        # 2x4: 17 s, 4x4: a minute on Icarus at the standard size
                        full_configs=({"rows": 2, "cols": 4}, {"rows": 4, "cols": 4}),
                        paper_effort="full"),
         synth=SynthPlan(small={"rows": 2, "cols": 1, "lanes": 2}, share=False,
                         breakdown=("pe*.products", "pe*.exponent", "pe*.lanes",
                                    "pe*.accumulator"),
                         breakdown_table="flows.tile_tables:table_iii"),
         showcase=Showcase(paper="1,421,579 µm² at 65 nm (FPRaker Table III)",
                           paper_run_small={"rows": 4, "cols": 4})),
    Unit(name="baseline.mac16",
         summary="FAST Table IV baseline: 16 MACs (int8/int12 with 32-bit accumulators; "
                 "hfp8/bf16/fp16 with FP32 accumulation)",
         config="MAC16Config", component="MAC16", preset="baseline-paper",
         tests=TestPlan(sizes={"quick": 200, "standard": 700, "full": 20000},
                        configs=({"fmt": "int8"}, {"fmt": "int12"}, {"fmt": "hfp8"},
                                 {"fmt": "fp16"}, {"fmt": "bf16", "lanes": 3},
                                 # stages before the accumulators (the latency checked exactly)
                                 {"lanes": 3, "pipeline": 1},
                                 {"fmt": "int8", "lanes": 3, "pipeline": 2},
                                 # interleaved sums: the adder's stages inside the loop
                                 {"fmt": "fp16", "lanes": 3, "pipeline": 2, "contexts": 3},
                                 {"fmt": "hfp8", "lanes": 2, "contexts": 5}),
                        full_configs=({"fmt": "fp16", "lanes": 3, "pipeline": 2},)),
         synth=SynthPlan(small={"lanes": 2}),
         # 4 bf16 MACs: one per value of fast.fmac's demo group of 4
         showcase=Showcase(paper="9.6x the fMAC (FAST Table IV, 16x bfloat16)",
                           demo={"lanes": 4})),
)

#: the other Table IV formats, measured beside the unit's bf16 preset
PARTS = tuple(
    Part(name=f"baseline.mac16/{fmt}", unit="baseline.mac16", overrides={"fmt": fmt},
         summary=f"16 {fmt} MACs (FAST Table IV)", paper=f"{ratio}x the fMAC (FAST Table IV)")
    for fmt, ratio in (("int8", 3.8), ("hfp8", 4.1), ("int12", 5.6), ("fp16", 10.6))
) + (
    Part(name="baseline.mac16/c5", unit="baseline.mac16",
         overrides={"contexts": 5, "pipeline": 2},
         summary="16 bf16 MACs with five interleaved sums per lane at pipeline 2 (their 200 MHz "
                 "depth)",
         paper="— (not in the paper: the MACs C-slowed)"),
    Part(name="baseline.bf16_pe/c6", unit="baseline.bf16_pe",
         overrides={"contexts": 6, "pipeline": 3},
         summary="the bit-parallel bf16 PE with six interleaved dot products at pipeline 3 (its "
                 "200 MHz depth)",
         paper="— (not in the paper: the PE C-slowed)"),
)

#: the configurations that close the baselines' timing (``trainfab timing``): 200 MHz for the
#: PE and the MACs, 150 MHz for the 8 x 8 tile
TIMING = (
    ClockTarget(unit="baseline.bf16_pe", overrides={"contexts": 6, "pipeline": 3},
                note="six interleaved dot products, five cuts inside the accumulation loop"),
    ClockTarget(unit="baseline.bf16_tile", overrides={"contexts": 6, "pipeline": 3},
                target_mhz=150.0, large=True,
                note="six interleaved output tiles (the PEs' contexts)"),
    ClockTarget(unit="baseline.mac16", overrides={"contexts": 5, "pipeline": 2},
                note="five interleaved sums per lane, the FP32 adder's four stages inside "
                     "the loop"),
)

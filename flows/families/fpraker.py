"""FPRaker (``docs/specs/fpraker.md``): the term encoder, the term-serial bfloat16 PE, the 8 × 8
tile and base-delta compression.

Declares the units, the PE core the paper reports without its encoders, the paper's Table III
area ratios against the bit-parallel baseline (:mod:`flows.families.baseline`), the designs
beside their baselines at each one's clock, the clock targets, the base-delta footprint of
tensor files and the golden models' benchmarks.
"""

from ..declare import (Bench, ClockTarget, Comparison, OwnClock, Part, Showcase, SynthPlan,
                       TensorAnalysis, TestPlan, Unit)

ORDER = 10

#: the base-delta compression units' random cases, test configurations and synthesis
_BDC_SIZES = {"quick": 40, "standard": 600, "full": 5000}
_BDC_TESTS = TestPlan(sizes=_BDC_SIZES,
                      configs=({"group": 5, "word": 19}, {"group": 2, "word": 64}))
_BDC_SYNTH = SynthPlan(small={"group": 4})

UNITS = (
    Unit(name="fpraker.encoder",
         summary="FPRaker term encoder: bf16 significands to signed power-of-two terms",
         config="EncoderConfig", component="TermEncoder", preset="fpraker-paper",
         tests=TestPlan(sizes={"quick": 400, "standard": 6000, "full": 30000},
                        configs=({"lanes": 3, "encoding": "binary"},)),
         synth=SynthPlan(small={"lanes": 2}),
         showcase=Showcase(paper="≈202 µm²/lane at 65 nm (12,950 µm² for 64 lanes, "
                                 "Table III)")),
    Unit(name="fpraker.pe",
         summary="FPRaker PE: 8 term-serial bf16 MAC lanes into a 1.9 accumulator",
         config="PEConfig", component="PE", preset="fpraker-paper",
         tests=TestPlan(sizes={"quick": 300, "standard": 600, "full": 20000},
                        configs=({"keep_bits": 6, "kmax": 9},
                                 {"lanes": 2, "encoding": "binary", "kmax": 1023},
                                 {"dmax": 12}, {"lanes": 4, "int_bits": 4},
                                 {"out_round": "rne"},
                                 {"lanes": 1, "dmax": 0, "frac_bits": 14, "int_bits": 2},
                                 {"lanes": 3, "int_bits": 4, "pipeline": 3},
                                 {"lanes": 2, "encoding": "binary", "pipeline": 8}),
                        # without OB every term is taken: 8 lanes take about 3x the cycles of
                        # the others; make test runs binary terms on 2 lanes
                        full_configs=({"encoding": "binary", "kmax": 1023},
                                      {"encoding": "binary"})),
         synth=SynthPlan(small={"lanes": 2}, breakdown_by="hdl.fpraker.pe:breakdown_blocks"),
         # beside the bit-parallel PE at the same 2 lanes (baseline.bf16_pe)
         showcase=Showcase(demo={"lanes": 2})),
    Unit(name="fpraker.tile",
         summary="FPRaker tile: rows x cols term-serial PEs (group exponent mode), one term "
                 "encoder per column, one exponent block per 2 PEs, B buffers, stream inputs",
         config="TileConfig", component="Tile", preset="fpraker-paper",
         tests=TestPlan(sizes={"quick": 100, "standard": 150, "full": 2500},
                        configs=({"rows": 2, "cols": 2},
                                 {"rows": 3, "cols": 2, "share_exp": False, "b_buffers": 0},
                                 {"rows": 2, "cols": 3, "b_buffers": 2, "encoding": "binary",
                                  "int_bits": 6, "kmax": 1023},
                                 {"rows": 2, "cols": 2, "sync": "independent"},
                                 {"rows": 3, "cols": 2, "sync": "independent",
                                  "encoding": "binary", "int_bits": 6, "kmax": 9},
                                 {"rows": 2, "cols": 2, "pipeline": 1},
                                 {"rows": 3, "cols": 2, "sync": "independent", "pipeline": 1}),
                        # the lock-step 2x4 and 4x4, and the independent 4x4
                        full_configs=({"rows": 2, "cols": 4}, {"rows": 4, "cols": 4},
                                      {"rows": 4, "cols": 4, "sync": "independent",
                                       "b_buffers": 2}),
                        paper_effort="full"),
         synth=SynthPlan(small={"rows": 2, "cols": 1, "lanes": 2}, share=False,
                         breakdown=("pe*.lanes", "pe*.accumulator", "col*.encoder", "xb*",
                                    "bbuf*"),
                         breakdown_table="flows.tile_tables:table_iii", cslow_field="contexts"),
         showcase=Showcase(paper="317,068 µm² at 65 nm: PE array 304,118 + term encoders "
                                 "12,950 (Table III)",
                           paper_run_small={"rows": 4, "cols": 4})),
    Unit(name="fpraker.bdc_encoder",
         summary="FPRaker base-delta compression encoder: a bf16 value per cycle to packed "
                 "words (double-buffered groups)",
         config="BDCConfig", component="BDCEncoder", preset="fpraker-paper",
         tests=_BDC_TESTS, synth=_BDC_SYNTH),
    Unit(name="fpraker.bdc_decoder",
         summary="FPRaker base-delta compression decoder: packed words to a bf16 value per "
                 "cycle, sticky stream error",
         config="BDCConfig", component="BDCDecoder", preset="fpraker-paper",
         tests=_BDC_TESTS, synth=_BDC_SYNTH),
    Unit(name="fpraker.bdc_loopback",
         summary="FPRaker BDC encoder feeding a decoder (end-to-end check)",
         config="BDCConfig", component="BDCLoopback", preset="fpraker-paper",
         tests=TestPlan(sizes=_BDC_SIZES, configs=({"group": 7, "word": 24},)),
         synth=_BDC_SYNTH),
)

PARTS = (
    Part(name="fpraker.pe/core", unit="fpraker.pe", component="PECore",
         summary="the PE without its encoder lanes (the paper's per-PE figure excludes encoders)",
         paper="4,752 µm² per PE at 65 nm (Table III)"),
    Part(name="fpraker.pe/p6", unit="fpraker.pe", overrides={"pipeline": 6},
         summary="the PE with its step cut six times and seven interleaved dot products (its "
                 "200 MHz depth)",
         paper="— (not in the paper: the PE C-slowed)"),
)

#: FPRaker Table III: PE 4,752 µm², 64 encoder lanes 12,950 µm², bit-parallel PE 22,212 µm²
COMPARISONS = (
    Comparison(label="FPRaker tile with its encoders / bit-parallel bf16 tile of the same size",
               numerator="fpraker.tile", denominator="baseline.bf16_tile",
               paper_ratio=317068 / 1421579,
               source="FPRaker Table III: 317,068 vs 1,421,579 µm² (65 nm)"),
    Comparison(label="FPRaker PE without encoders / bit-parallel bf16 PE",
               numerator="fpraker.pe/core", denominator="baseline.bf16_pe",
               paper_ratio=4752 / 22212,
               source="FPRaker Table III per PE: 4,752 vs 22,212 µm² (65 nm)"),
    Comparison(label="FPRaker PE with its 8 encoder lanes / bit-parallel bf16 PE",
               numerator="fpraker.pe", denominator="baseline.bf16_pe",
               paper_ratio=(4752 + 12950 / 8) / 22212,
               source="FPRaker Table III: (4,752 + 12,950/8) vs 22,212 µm² (65 nm)"),
)

#: MACs per cycle of the bit-parallel designs: one per lane of every PE
_LANES = ("rows", "cols", "lanes")

OWN_CLOCKS = (
    OwnClock(label="FPRaker Table III tile", unit="fpraker.tile",
             baseline="baseline.bf16_tile", work="flows.work:tile_work", baseline_work=_LANES,
             source="FPRaker Table III (both at 600 MHz in the paper)"),
    OwnClock(label="FPRaker PE", unit="fpraker.pe", baseline="baseline.bf16_pe",
             work="flows.work:pe_work", baseline_work=_LANES,
             source="FPRaker §V (PE without tile stalls)"),
    # both sides C-slowed to their 200 MHz depths: the like-for-like pair at high clocks
    OwnClock(label="FPRaker PE, interleaved", unit="fpraker.pe/p6",
             baseline="baseline.bf16_pe/c6", work="flows.work:pe_work", baseline_work=_LANES,
             source="not in the paper: both PEs with interleaved dot products"),
)

#: the off-chip footprint under base-delta compression (spec §7) of tensor files and captures
TENSOR_ANALYSES = (
    TensorAnalysis(name="bdc", summary="footprint under FPRaker's base-delta exponent "
                   "compression (bits per value, header histogram, escapes)",
                   run="flows.studies.bdc:bdc_stats", markdown="flows.studies.bdc:bdc_markdown",
                   options=((("--bdc-group",), {"dest": "group", "range": (2, 64),
                                                "default": 32,
                                                "help": "BDC values per group, 2 to 64 "
                                                        "(default 32)"}),)),
)

BENCHES = (
    Bench(name="fpraker.pe", summary="FPRaker and baseline PE batch models: MAC/s and cycles "
          "per 8-MAC group", run="flows.bench.fpraker:pe_tables"),
    Bench(name="fpraker.tile", summary="FPRaker tile GEMM model (numba and NumPy engines): "
          "MAC/s on a 128x384x384 layer, cycles per group", run="flows.bench.fpraker:tile_tables"),
    Bench(name="fpraker.exp_modes", summary="FPRaker PE step vs group exponent mode: error "
          "against exact sums (TV18 bound) and cycles per group",
          run="flows.bench.fpraker:exp_mode_tables"),
)

#: the configurations that close the FPRaker units' timing (``trainfab timing``): 200 MHz for
#: the PE, 150 MHz for the 8 x 8 tile
TIMING = (
    ClockTarget(unit="fpraker.pe", overrides={"pipeline": 6},
                note="the step cut six times, seven interleaved dot products"),
    ClockTarget(unit="fpraker.tile", overrides={"pipeline": 1, "contexts": 4},
                target_mhz=150.0, large=True,
                note="four interleaved GEMMs (the C-slow tile, retimed by synthesis), the "
                     "exponent blocks' outputs registered"),
)

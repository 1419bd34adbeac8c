"""Gecko / Schrödinger's FP (``docs/specs/gecko.md``): the exponent compressor and decompressor.

Declares the units, the paper's decompressor/compressor area ratio, the clock targets, the
Gecko footprint statistics of tensor files (``trainfab tensor-stats``) and their benchmark.
"""

from ..declare import (Bench, ClockTarget, Comparison, Showcase, SynthPlan, TensorAnalysis,
                       TestPlan, Unit)

ORDER = 30

#: a narrow, odd-lane fixed-width configuration every Gecko unit also regresses
_NARROW_FIXED = {"lanes": 3, "man_width": 5, "fixed_width": 4}
#: the register stages every Gecko unit also regresses: one stage (the depth that meets 200 MHz
#: in OSU 0.18 µm) on the small synthesis configuration, both on the narrow fixed-width one
_STAGED = ({"lanes": 2, "fmt": "bf16", "man_width": 7, "pipeline": 1},
           {**_NARROW_FIXED, "pipeline": 2})
#: every Gecko unit's testbench sizes and small synthesis
_SIZES = {"quick": 600, "standard": 5000, "full": 50000}
_SMALL = SynthPlan(small={"lanes": 2, "fmt": "bf16"})

UNITS = (
    Unit(name="gecko.compressor",
         summary="Gecko compressor: a row of FP32/bf16 values per cycle to lane words",
         config="GeckoConfig", component="GeckoCompressor", preset="gecko-paper",
         tests=TestPlan(sizes=_SIZES,
                        configs=({"fmt": "bf16", "man_width": 3, "sign_en": False},
                                 _NARROW_FIXED, *_STAGED)),
         synth=_SMALL,
         showcase=Showcase(paper="31,575.60 µm² at 65 nm, 500 MHz",
                           demo={"lanes": 2, "fmt": "bf16"})),
    Unit(name="gecko.decompressor",
         summary="Gecko decompressor: lane words + metadata to a row of values per cycle",
         config="GeckoConfig", component="GeckoDecompressor", preset="gecko-paper",
         tests=TestPlan(sizes=_SIZES,
                        configs=({"fmt": "bf16", "man_width": 2}, _NARROW_FIXED, *_STAGED)),
         synth=_SMALL,
         showcase=Showcase(paper="37,133.28 µm² at 65 nm, 500 MHz",
                           demo={"lanes": 2, "fmt": "bf16"})),
    Unit(name="gecko.loopback",
         summary="Gecko compressor feeding a decompressor (end-to-end check)",
         config="GeckoConfig", component="GeckoLoopback", preset="gecko-paper",
         tests=TestPlan(sizes=_SIZES,
                        configs=({"fmt": "bf16", "man_width": 4}, _NARROW_FIXED, _STAGED[1])),
         synth=_SMALL),
)

COMPARISONS = (
    Comparison(label="Gecko decompressor / compressor", numerator="gecko.decompressor",
               denominator="gecko.compressor", paper_ratio=37133.28 / 31575.60,
               source="Schrödinger's FP Table III: 37,133.28 vs 31,575.60 µm² (65 nm, 500 MHz)"),
)

TENSOR_ANALYSES = (
    TensorAnalysis(
        name="gecko", summary="footprint under mantissa truncation and Gecko exponent compression",
        run="flows.studies.gecko_stats:gecko_stats",
        markdown="flows.studies.gecko_stats:stats_markdown", default=True,
        options=((("--man-width",), {"dest": "man_width", "range": (0, 23), "default": None,
                                     "help": "mantissa bits kept, 0 to 23 for FP32 and 0 to 7 "
                                             "for bf16 tensors (default: the format's full "
                                             "mantissa)"}),
                 (("--no-sign",), {"dest": "sign_en", "action": "store_false",
                                   "help": "sign_en=false (non-negative tensors)"}),
                 (("--lanes",), {"dest": "lanes", "range": (1, 64), "default": 8,
                                  "help": "values per row, 1 to 64 (default 8)"}))),
)

BENCHES = (
    Bench(name="gecko", summary="tensor-stats throughput and golden compress() speed",
          run="flows.bench.gecko:gecko_table"),
)

#: the configurations that close the Gecko units' timing (``trainfab timing``)
TIMING = tuple(
    ClockTarget(unit=f"gecko.{name}", overrides={"pipeline": 1}, note="one register stage")
    for name in ("compressor", "decompressor", "loopback")
)

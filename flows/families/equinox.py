"""Equinox/HBFP (``docs/specs/equinox.md``): the weight-stationary BFP systolic array, the BFP
quantizer and the priority request/instruction dispatcher.

Declares the units, the PE and array sizes of the thesis's area model with its fits, the
dispatchers' share of the array, the clock targets, the HBFP error of tensor files and the golden
model's benchmark.
"""

from ..declare import (Bench, ClockTarget, Comparison, Part, Scaling, Showcase, SynthPlan,
                       TensorAnalysis, TestPlan, Unit)

ORDER = 50

UNITS = (
    Unit(name="equinox.array",
         summary="Equinox weight-stationary hbfp8 systolic array: n x n PEs of w 8-bit MACs, "
                 "input skew, exponent adder and FIFO, bf16 normalizers, just-in-time weight "
                 "reload",
         config="ArrayConfig", component="SystolicArray", preset="equinox-paper",
         tests=TestPlan(sizes={"quick": 200, "standard": 2000, "full": 20000},
                        configs=({"n": 2, "w": 2}, {"n": 3, "w": 8},
                                 {"n": 2, "w": 3, "conv_lat": 2})),
         synth=SynthPlan(small={"n": 2, "w": 2}),
         showcase=Showcase(demo={"n": 2, "w": 2})),
    Unit(name="equinox.quantizer",
         summary="Equinox FP32/bf16 -> hbfp8 block quantizer: max exponent, floor/rne/rtz/"
                 "stochastic rounding (LFSR or injected random bits), one block per cycle",
         config="QuantizerConfig", component="Quantizer", preset="equinox-paper",
         tests=TestPlan(sizes={"quick": 500, "standard": 3000, "full": 100000},
                        configs=({"rounding": "rne"}, {"rounding": "rtz"},
                                 {"rounding": "stoch"},
                                 {"in_fmt": "bf16", "rounding": "rne", "w": 3, "m": 4},
                                 {"rounding": "stoch", "rbits": 5, "m": 16, "w": 1},
                                 {"in_fmt": "bf16", "rounding": "stoch", "rbits": 8, "m": 12},
                                 # register stages (every cycle checked against the model)
                                 {"w": 3, "rounding": "stoch", "rbits": 5, "pipeline": 3},
                                 {"in_fmt": "bf16", "rounding": "rne", "w": 3, "m": 4,
                                  "pipeline": 4})),
         synth=SynthPlan(small={"w": 4})),
    Unit(name="equinox.dispatcher",
         summary="Equinox request + instruction dispatcher: inference/training queues, "
                 "adaptive batching with null padding, PRIORITY/FAIR/INF_ONLY issue policy",
         config="DispatchConfig", component="Dispatcher", preset="equinox-paper",
         tests=TestPlan(sizes={"quick": 4000, "standard": 25000, "full": 500000},
                        configs=(
                            # TV16 itself
                            {"b_inf": 2, "thresh": 2, "t_batch": 6, "inf_len": 4,
                             "trn_len": 12},
                            {"policy": "fair", "b_inf": 4, "done_lag": 3, "inf_len": 6,
                             "trn_len": 20},
                            {"policy": "inf_only", "b_inf": 1, "inf_len": 5, "q_inf": 3},
                            {"adaptive": False, "b_inf": 4, "q_inf": 4, "q_trn": 1,
                             "inf_len": 8, "trn_len": 16},
                            {"b_inf": 3, "thresh": 0, "t_batch": 1, "inf_len": 1, "trn_len": 2,
                             "done_lag": 2, "q_trn": 2})),
         synth=SynthPlan(small={"b_inf": 4})),
)


#: PE widths the thesis's area model is checked at (§2.3, TV20: PE area against w)
PE_WIDTHS = (1, 2, 4, 8, 16)
#: array shapes ``(n, w)`` measured beside the preset's 4 x 4 x 4 for the N²W fit (TV20)
ARRAY_SHAPES = ((2, 2), (4, 1), (2, 4), (4, 2), (8, 1))

PARTS = tuple(
    Part(name=f"equinox.array/pe-w{w}", unit="equinox.array",
         component="PE", overrides={"w": w},
         summary=f"one PE of w = {w}: {w} signed 8 x 8 multipliers, adder tree, 24-bit "
                 "accumulator adder, weight and psum registers")
    for w in PE_WIDTHS
) + tuple(
    Part(name=f"equinox.array/{n}x{n}x{w}", unit="equinox.array", overrides={"n": n, "w": w},
         summary=f"the array at n = {n}, w = {w} (N²W = {n * n * w}), for the area fit")
    for n, w in ARRAY_SHAPES
)

SCALINGS = (
    Scaling(label="Equinox PE area against w (TV20)",
            members=tuple(f"equinox.array/pe-w{w}" for w in PE_WIDTHS),
            size=("w",), size_label="w",
            paper="the thesis's a_alu is per w-wide MAC lane (Eq. 4.1)"),
    Scaling(label="Equinox array area against N²W (TV20)",
            members=("equinox.array",) + tuple(f"equinox.array/{n}x{n}x{w}"
                                               for n, w in ARRAY_SHAPES),
            size=("n", "n", "w"), size_label="N²W",
            paper="the thesis's area model is linear in m·n²·w (Eq. 4.1: m n² w a_alu)"),
)

COMPARISONS = (
    Comparison(label="dispatcher / 16 x 16 x 8 array (256 PEs of w = 8)",
               numerator="equinox.dispatcher", denominator="equinox.array/pe-w8",
               denominator_count=256, paper_ratio=(0.79 + 0.49) / 185.60,
               source="Equinox Table 6.4: request + instruction dispatchers (0.79 + 0.49 mm²) / "
                      "MMU (185.60 mm², m arrays of n = 143); the array's skew, exponent FIFO "
                      "and normalizers are left out of ours"),
)

TENSOR_ANALYSES = (
    TensorAnalysis(
        name="hbfp", summary="HBFP quantization error (RRMSE) and storage per tensor",
        run="flows.studies.hbfp_stats:hbfp_stats",
        markdown="flows.studies.hbfp_stats:hbfp_markdown",
        options=((("--hbfp-m",), {"dest": "m", "range": (2, 16), "default": 8,
                                  "help": "HBFP mantissa bits, two's complement, 2 to 16 "
                                          "(default 8)"}),
                 (("--hbfp-block",), {"dest": "block", "range": (1, 65536), "default": 64,
                                      "help": "values per shared exponent, 1 to 65,536 "
                                              "(default 64)"}),
                 (("--hbfp-rounding",), {"dest": "rounding", "default": "floor",
                                         "choices": ("floor", "rne", "rtz"),
                                         "help": "floor, rne or rtz (default floor)"}))),
)

BENCHES = (
    Bench(name="hbfp", summary="HBFP golden model: tiled hbfp_matmul time",
          run="flows.bench.equinox:hbfp_table"),
)


#: the configurations that close the quantizer's timing (``trainfab timing``); the Equinox
#: array keeps its single-cycle PE, as the thesis requires
TIMING = (
    ClockTarget(unit="equinox.quantizer", overrides={"pipeline": 2},
                note="floor rounding (the paper's), two stages"),
    ClockTarget(unit="equinox.quantizer", label="equinox.quantizer (stochastic)",
                overrides={"rounding": "stoch", "pipeline": 3},
                note="stochastic rounding, three stages"),
)

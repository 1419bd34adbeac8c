"""FAST's training time to accuracy against the iso-area arrays of other number formats.

:func:`fast_time_study` reads a finished ``trainfab train`` run (its ``train.json``), prices
every training iteration's GEMMs of the ``fast`` run (and ``fast-low`` / ``fast-high`` when they
were trained) on the paper's fMAC array and the same GEMMs on the iso-area arrays of the other
formats, and finds how long each takes to reach a target test accuracy.

Time model
----------
Everything runs at the paper's common clock of 500 MHz (:data:`CLOCK_HZ`), and every array is
taken at its throughput bound: a GEMM takes ``ceil(work / throughput)`` cycles, no fill, drain,
operand loading or partly used tiles (the paper's iso-area comparison of large networks; on the
digits networks' small GEMMs a real 256 x 64 array would leave most cells idle, and so would the
other arrays).

FAST
    256 x 64 fMAC cells (:data:`FAST_ARRAY`), each taking a pair of 16-element groups through
    ``rounds(mx, my) = (mx / 2) (my / 2)`` cycles (one 2-bit chunk pair per cycle,
    :func:`golden.fast.numerics.rounds`).  A GEMM ``C (M x N) = X (M x K) . Y (K x N)`` with
    widths ``mx`` (X) and ``my`` (Y) has ``M N ceil(K / 16)`` group pairs and takes
    ``ceil(M N ceil(K / 16) rounds(mx, my) / (256 * 64))`` cycles.  The widths are the ones the
    run chose in that iteration: ``fwd`` (A, W), ``bwd_data`` (G, W), ``wgrad`` (A, G).
Other formats
    An array of MACs, one multiply-accumulate per PE per cycle: ``ceil(M K N / PEs)`` cycles
    per GEMM.  Its size fits the FAST array's area:

    * from trainfab's own Table IV syntheses when they are given (``areas``: ``trainfab area``
      reports of the fMAC at ``m_max = 4`` and of ``baseline.mac16`` in the array's format,
      :data:`AREA_UNITS`): ``PEs = 256 * 64 * area(fMAC) / (area(16 MACs) / 16)``, the MACs
      that fit the fMAC array's area, MAC for MAC (the paper's arrays also hold converters
      and accumulators of their own, which these do not price);
    * the paper's sizes otherwise (:data:`ISO_AREA`: HFP8 245 x 245, MSFP-12 230 x 230,
      INT-12 210 x 210, bfloat16 180 x 180, FP16 150 x 150), and always for MSFP-12, which has
      no unit here.  Every row also gives the paper size's PEs and time to accuracy.

    FP32 has no figure in the paper; it is **assumed** to fit half the bfloat16 array's PEs
    (an FP32 MAC taken as twice a bfloat16 MAC's area).

Only the training GEMMs are priced (the forward, backward-data and weight-gradient GEMM of every
layer with weights, every mini-batch); test-set evaluation, the element-wise work and the
optimizer are not.  The GEMM shapes are the ``fast`` run's record (``gemm_shapes`` and
``shape_runs`` of its summary); every format trains the same model on the same mini-batches, so
they are every run's shapes.

Time to accuracy
----------------
The target is the ``fp32`` run's final test accuracy minus half a point (:data:`MARGIN`), so
that a format matching FP32 to within one or two test images of the 360 still counts.  A run's
time to accuracy is its cumulative GEMM time at the end of the first epoch whose test accuracy
reaches the target; a run that never reaches it is reported as such.  The FAST arrays use their
own runs' accuracies.  An array of another format uses the measured run of the closest format
that was trained (:data:`TRAJECTORY`, first present wins): each array's own format (``hfp8``,
``msfp12``, ``int12``, ``bf16``, ``fp16``, ``fp32``) when it was trained, else a stand-in: MSFP-12
→ ``fast-high`` (the same groups with 4-bit magnitudes: optimistic) or ``hbfp8``; the others →
``fp32`` (optimistic: credited with FP32's accuracy).  The table says which run each row uses.
The formats may come from more than one run (``extra_runs``: e.g. ``make training-baselines``'
run of FAST Table II's formats beside ``make training``'s), provided the runs trained the same
model on the same data, schedule and seed, so that every format saw the same mini-batches.

Outputs: ``fast_time.json`` (everything), ``fast_time.md`` (the tables with the paper's claims)
and ``widths.png`` (the ``fast`` run's width map: layers x iterations for W, A and G, the
analogue of the paper's Fig. 19).
"""

import json
import math
import os
from pathlib import Path

import numpy as np

from golden.fast.numerics import G as GROUP
from golden.fast.numerics import rounds

from .. import FlowError

#: the clock every array runs at (the paper's assumption)
CLOCK_HZ = 500e6
#: the paper's fMAC array, (rows, cols)
FAST_ARRAY = (256, 64)
#: iso-area arrays of the other formats: name → (PEs, where the size comes from)
ISO_AREA = {
    "HFP8": (245 * 245, "paper: 245 x 245"),
    "MSFP-12": (230 * 230, "paper: 230 x 230"),
    "INT-12": (210 * 210, "paper: 210 x 210"),
    "bfloat16": (180 * 180, "paper: 180 x 180"),
    "FP16": (150 * 150, "paper: 150 x 150"),
    "FP32": (180 * 180 // 2, "assumption: half the bfloat16 array's PEs (no paper figure)"),
}
#: the Table IV syntheses that size the iso-area arrays from trainfab's own areas: name → (unit,
#: configuration overrides of its paper configuration); "fMAC" is FAST's cell
AREA_UNITS = {
    "fMAC": ("fast.fmac", {"m_max": 4}),
    "HFP8": ("baseline.mac16", {"fmt": "hfp8"}),
    "INT-12": ("baseline.mac16", {"fmt": "int12"}),
    "bfloat16": ("baseline.mac16", {"fmt": "bf16"}),
    "FP16": ("baseline.mac16", {"fmt": "fp16"}),
}
#: MAC lanes of one ``baseline.mac16`` (Table IV: 16)
MAC_LANES = 16
#: the accuracy trajectory each iso-area array borrows: the first of these formats that was
#: trained
TRAJECTORY = {
    "HFP8": ("hfp8", "fp32"),
    "MSFP-12": ("msfp12", "fast-high", "hbfp8", "fp32"),
    "INT-12": ("int12", "fp32"),
    "bfloat16": ("bf16", "fp32"),
    "FP16": ("fp16", "fp32"),
    "FP32": ("fp32",),
}
#: the FAST runs priced on the fMAC array, in table order
FAST_FORMATS = ("fast", "fast-low", "fast-high")
#: the target is the fp32 run's final test accuracy minus this (half a point)
MARGIN = 0.005
#: the paper's claims, shown beside the measured numbers
PAPER = {
    "speedup": "FAST trains 2-6x faster than prior mixed-precision and BFP formats "
               "(iso-area arrays at 500 MHz)",
    "msfp12_tta": "FAST reaches ResNet-18's target accuracy more than 2x sooner than MSFP-12",
    "accuracy": "FAST within 0.1 points of FP32 on CNNs (ResNet-18 68.52 vs 68.60); "
                "LowBFP loses 3-5.6 points; HighBFP within 0.05",
}
_WIDTH_OF = {"fwd": ("a", "w"), "bwd_data": ("g", "w"), "wgrad": ("a", "g")}


class FastTimeError(FlowError, ValueError):
    """A run folder the study cannot use; the message is one line."""


# ----------------------------------------------------------------------------------------------
# reading the run


def load_run(run_dir: Path) -> dict:
    """``train.json`` of ``run_dir``, checked to hold a ``fast`` run with its width record.

    Raises
    ------
    FastTimeError
        No such folder, no readable ``train.json``, no ``formats`` in it, no ``fast`` run, or a
        ``fast`` run without the width record.
    """
    data, path = read_run(run_dir)
    fmts = data["formats"]
    if "fast" not in fmts:
        raise FastTimeError(f"{path}: no 'fast' run (trained: {', '.join(fmts) or 'none'})")
    for name in FAST_FORMATS:
        if name in fmts:
            _check_summary(path, name, fmts[name])
    return data


def read_run(run_dir: Path) -> tuple[dict, Path]:
    """``train.json`` of the ``trainfab train`` output folder ``run_dir`` and its path, checked
    to hold a ``formats`` table (:class:`FastTimeError` otherwise: no such folder, a file, a
    capture folder, no readable ``train.json``)."""
    run_dir = Path(run_dir)
    if os.path.lexists(run_dir) and not run_dir.is_dir():
        raise FastTimeError(f"{run_dir}: a file, not the output folder of `trainfab train`")
    if not run_dir.is_dir():
        raise FastTimeError(f"{run_dir}: no such run folder")
    path = run_dir / "train.json"
    if not path.is_file():
        from .captures import MANIFEST as CAPTURE_MANIFEST

        if (run_dir / CAPTURE_MANIFEST).is_file():
            raise FastTimeError(f"{run_dir}: a capture folder of `trainfab train --capture`; "
                                "give the run's output folder (-o of trainfab train)")
        raise FastTimeError(f"{path}: no such file (run trainfab train first)")
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise FastTimeError(f"{path}: not readable JSON ({str(e).splitlines()[0]})") from None
    fmts = data.get("formats") if isinstance(data, dict) else None
    if not isinstance(fmts, dict):
        raise FastTimeError(f"{path}: no 'formats' table")
    return data, path


def _check_summary(path, name, rec):
    s = rec.get("format") if isinstance(rec, dict) else None
    keys = ("layers", "iterations_per_epoch", "iterations", "widths", "gemm_shapes", "shape_runs")
    if not isinstance(s, dict) or any(k not in s for k in keys):
        raise FastTimeError(f"{path}: the '{name}' run has no width record (format.widths)")
    if not isinstance(rec.get("epochs"), list):
        raise FastTimeError(f"{path}: the '{name}' run has no 'epochs' list")


def iteration_tables(summary: dict) -> list:
    """The GEMM shape table of each recorded iteration, from ``gemm_shapes`` and
    ``shape_runs`` (:meth:`flows.studies.train.formats.fast.FAST.summary_record`)."""
    n = summary["iterations"]
    out = [None] * n
    runs = list(summary["shape_runs"]) + [[n, None]]
    for (start, t), (stop, _) in zip(runs, runs[1:]):
        for it in range(start, min(stop, n)):
            out[it] = summary["gemm_shapes"][t]
    return out


# ----------------------------------------------------------------------------------------------
# pricing


def fast_gemm_cycles(shape, mx: int, my: int, cells: int = FAST_ARRAY[0] * FAST_ARRAY[1]):
    """Cycles of one GEMM ``[M, K, N]`` on the fMAC array: ``ceil(M N ceil(K/16) rounds(mx,
    my) / cells)``; also returns the fMAC rounds (group pairs x rounds)."""
    M, K, N = (int(v) for v in shape)
    work = M * N * max(1, -(-K // GROUP)) * rounds(int(mx), int(my))
    return -(-work // cells), work


def mac_gemm_cycles(shape, pes: int) -> int:
    """Cycles of one GEMM ``[M, K, N]`` on an array of ``pes`` MACs: ``ceil(M K N / pes)``."""
    M, K, N = (int(v) for v in shape)
    return -(-(M * K * N) // pes)


def price_fast(summary: dict) -> dict:
    """Every recorded iteration of a FAST run priced on the fMAC array.

    Returns
    -------
    dict
        ``cycles``: list, one total per iteration; ``fmac_rounds``: ``{phase: total}``.

    Raises
    ------
    FastTimeError
        An iteration's GEMM whose width was not recorded.
    """
    widths = summary["widths"]
    cycles, work = [], {"fwd": 0, "bwd_data": 0, "wgrad": 0}
    for it, table in enumerate(iteration_tables(summary)):
        c = 0
        for layer, phases in (table or {}).items():
            for phase, shape in phases.items():
                tx, ty = _WIDTH_OF[phase]
                mx, my = widths[tx][layer][it], widths[ty][layer][it]
                if not (mx.isdigit() and my.isdigit()):
                    raise FastTimeError(f"iteration {it} of layer '{layer}': the {phase} GEMM "
                                        "has no recorded width")
                cyc, w = fast_gemm_cycles(shape, int(mx), int(my))
                c += cyc
                work[phase] += w
        cycles.append(c)
    return {"cycles": cycles, "fmac_rounds": work}


def price_mac(summary: dict, pes: int) -> list:
    """Every recorded iteration's GEMMs on an array of ``pes`` MACs: cycles per iteration."""
    return [sum(mac_gemm_cycles(shape, pes) for phases in (table or {}).values()
                for shape in phases.values())
            for table in iteration_tables(summary)]


def per_epoch(cycles: list, per: int) -> list:
    """Per-iteration cycles summed per epoch (``per`` iterations each; a last partial epoch,
    of a diverged run, is dropped)."""
    return [int(sum(cycles[e * per:(e + 1) * per])) for e in range(len(cycles) // per)]


def time_to_accuracy(epoch_cycles: list, epochs: list, target: float | None) -> dict:
    """The cumulative cycles at the end of the first epoch whose test accuracy reaches
    ``target``.

    Parameters
    ----------
    epoch_cycles : list of int
        Cycles of epoch 1, 2, … (at least as many as priced epochs).
    epochs : list of dict
        The run's epoch records (``epoch``, ``test_accuracy``).
    target : float or None

    Returns
    -------
    dict
        ``reached_epoch`` (None if never, or without a target), ``tta_cycles``,
        ``tta_seconds`` (None likewise), ``trajectory``: ``[{"epoch", "test_accuracy",
        "cumulative_cycles"}]``.
    """
    traj, total, hit = [], 0, None
    for rec in epochs:
        e = int(rec["epoch"])
        if e > len(epoch_cycles):
            break
        total = sum(epoch_cycles[:e])
        acc = rec.get("test_accuracy")
        traj.append({"epoch": e, "test_accuracy": acc, "cumulative_cycles": int(total)})
        if hit is None and target is not None and acc is not None and acc >= target - 1e-12:
            hit = (e, int(total))
    return {"reached_epoch": hit[0] if hit else None,
            "tta_cycles": hit[1] if hit else None,
            "tta_seconds": hit[1] / CLOCK_HZ if hit else None,
            "trajectory": traj}


# ----------------------------------------------------------------------------------------------
# areas


def area_commands() -> list[str]:
    """The ``trainfab area`` commands whose reports :func:`load_areas` reads."""
    out = []
    for name, (unit, over) in AREA_UNITS.items():
        sets = " ".join(f"--set {k}={v}" for k, v in over.items())
        tag = "-".join(map(str, over.values()))
        out.append(f"trainfab area {unit} {sets} -o DIR/{unit}-{tag}")
    return out


def load_areas(folder) -> dict:
    """The Table IV areas among the ``trainfab area`` reports (``area.json``, any depth) under
    ``folder``: ``{name: {"area_um2", "file"}}`` for each :data:`AREA_UNITS` entry whose unit and
    configuration (the unit's paper configuration with the overrides) a report holds.  A
    report of another configuration is not used.

    Raises
    ------
    FastTimeError
        ``folder`` is not a folder.
    """
    from .. import registry
    from ..config import load_config

    folder = Path(folder)
    if not folder.is_dir():
        raise FastTimeError(f"{folder}: no such folder of `trainfab area` reports")
    wanted = {}
    for name, (unit_name, over) in AREA_UNITS.items():
        unit = registry.get(unit_name)
        wanted[name] = (unit_name, unit.hardware_config(unit.make_config(load_config(unit),
                                                                           **over)))
    found: dict = {}
    for path in sorted(folder.rglob("area.json")):
        try:
            r = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            continue
        if not isinstance(r, dict) or not isinstance(r.get("area_um2"), (int, float)):
            continue
        for name, (unit_name, config) in wanted.items():
            if r.get("unit") == unit_name and r.get("config") == config and name not in found:
                found[name] = {"area_um2": float(r["area_um2"]), "file": str(path)}
    return found


def iso_pes(areas: dict) -> dict:
    """PEs of each MAC array that fit the 256 x 64 fMAC array's area, from :func:`load_areas`'
    result: ``{array: (PEs, source)}`` for the arrays whose MAC and the fMAC were measured (and
    FP32 at half the bfloat16 array's, when that one is)."""
    fmac = areas.get("fMAC")
    out = {}
    if fmac is None:
        return out
    cells = FAST_ARRAY[0] * FAST_ARRAY[1]
    for name in ISO_AREA:
        a = areas.get(name)
        if a is None:
            continue
        pes = int(cells * fmac["area_um2"] * MAC_LANES // a["area_um2"])
        out[name] = (pes, f"trainfab: 16 MACs {a['area_um2']:,.0f} µm² = "
                          f"{a['area_um2'] / fmac['area_um2']:.2f}x the fMAC")
    if "bfloat16" in out:
        out["FP32"] = (out["bfloat16"][0] // 2, "assumption: half the bfloat16 array's PEs "
                                                "(trainfab's areas)")
    return out


# ----------------------------------------------------------------------------------------------
# the study


#: the run settings that must agree between the runs one study combines
SAME_RUN_KEYS = ("model", "dataset", "epochs", "batch_size", "seed", "limit", "train_samples",
                 "test_samples", "hyperparameters")


def merge_runs(data: dict, run_dir: Path, extra_runs) -> dict:
    """``data`` (the main run's ``train.json``) with the formats of ``extra_runs`` (folders of
    ``trainfab train`` runs) that the main run lacks; each format's ``run`` says which folder it
    came from.  Runs of another model, data set, schedule or seed are refused (one line)."""
    fmts = {name: dict(rec, run=str(run_dir)) for name, rec in data["formats"].items()}
    config = data.get("config") or {}
    for extra in extra_runs or ():
        extra = Path(extra)
        other, _ = read_run(extra)
        oc = other.get("config") or {}
        diff = [k for k in SAME_RUN_KEYS if oc.get(k) != config.get(k)]
        if diff:
            k = diff[0]
            raise FastTimeError(f"{extra}: not comparable with {run_dir}: {k} "
                                f"{oc.get(k)!r} against {config.get(k)!r}")
        for name, rec in other["formats"].items():
            if name not in fmts:
                fmts[name] = dict(rec, run=str(extra))
    return dict(data, formats=fmts)


def fast_time_study(run_dir: Path, out_dir: Path, *, progress=None, extra_runs=(),
                    areas=None) -> dict:
    """:func:`_fast_time_study`, with a run whose records do not have the shapes they should
    (an edited or foreign ``train.json``) as one :class:`FastTimeError` naming it."""
    try:
        return _fast_time_study(run_dir, out_dir, progress=progress, extra_runs=extra_runs,
                                areas=areas)
    except FastTimeError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, ZeroDivisionError, StopIteration) as e:
        raise FastTimeError(f"{Path(run_dir) / 'train.json'}: the run's records cannot be "
                            f"priced ({type(e).__name__}: {e})") from None


def _fast_time_study(run_dir: Path, out_dir: Path, *, progress=None, extra_runs=(),
                     areas=None) -> dict:
    """Price a finished run's FAST training on the fMAC array and on the other formats'
    iso-area arrays, find each one's time to accuracy, and write ``fast_time.json``,
    ``fast_time.md`` and ``widths.png`` into ``out_dir`` (module docstring for the model).

    Parameters
    ----------
    run_dir : Path
        A ``trainfab train`` output folder holding ``train.json`` with a ``fast`` run.
    out_dir : Path
        Created if missing.
    progress : callable, optional
        ``progress(message)``, one line per step.
    extra_runs : sequence of Path
        Other runs of the same model, data, schedule and seed whose formats the main run lacks
        (:func:`merge_runs`).
    areas : Path, optional
        A folder of ``trainfab area`` reports (:func:`load_areas`) that sizes the iso-area
        arrays; without it, or for an array it lacks, the paper's size.

    Returns
    -------
    dict
        What ``fast_time.json`` holds: ``target`` (``accuracy``, ``fp32_final``, ``rule``, or
        None without an ``fp32`` run), ``rows`` (one per priced array: ``array``, ``kind``
        (``fmac``/``mac``), ``pes``, ``size_source``, ``format`` (whose accuracies it uses),
        ``format_note``, ``epoch_cycles``, ``cycles_per_epoch``, ``reached_epoch``,
        ``tta_cycles``, ``tta_seconds``, ``tta_speedup_fast`` (this row's time to accuracy over
        the ``fast`` row's), ``epoch_speedup_fast`` (its mean epoch time over ``fast``'s),
        ``trajectory``), ``fast_work`` (per FAST run: fMAC rounds per phase as priced and as the
        format counted them), ``paper``, ``model``, ``clock_hz``, ``files``.

    Raises
    ------
    FastTimeError
        See :func:`load_run`; also a ``fast`` run without one complete epoch.
    """
    say = progress or (lambda msg: None)
    data = merge_runs(load_run(run_dir), Path(run_dir), extra_runs)
    fmts = data["formats"]
    fast = fmts["fast"]["format"]
    per = int(fast["iterations_per_epoch"])
    if per < 1 or fast["iterations"] < per:
        raise FastTimeError(f"{Path(run_dir) / 'train.json'}: the 'fast' run has no complete "
                            "epoch to price")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)

    fp32 = fmts.get("fp32")
    fp32_final = fp32.get("final_test_accuracy") if isinstance(fp32, dict) else None
    target = None
    if fp32_final is not None:
        target = {"accuracy": fp32_final - MARGIN, "fp32_final": fp32_final,
                  "rule": f"fp32 final test accuracy - {100 * MARGIN:g} point"}
    tacc = target["accuracy"] if target else None

    rows, work = [], {}
    for name in FAST_FORMATS:
        if name not in fmts:
            continue
        say(f"pricing the {name} run on the {FAST_ARRAY[0]}x{FAST_ARRAY[1]} fMAC array")
        summ = fmts[name]["format"]
        priced = price_fast(summ)
        work[name] = {"fmac_rounds": priced["fmac_rounds"],
                      "format_fmac_rounds": summ.get("fmac_rounds"),
                      "matches": priced["fmac_rounds"] == summ.get("fmac_rounds")}
        ec = per_epoch(priced["cycles"], per)
        rows.append(_row(f"FAST {FAST_ARRAY[0]}x{FAST_ARRAY[1]} fMAC", "fmac",
                         FAST_ARRAY[0] * FAST_ARRAY[1], "paper: 256 x 64 fMACs",
                         name, "own run", ec, fmts[name]["epochs"], tacc))

    # every epoch has the same mini-batch shapes: price epoch 1 of the fast record
    first_epoch = dict(fast, iterations=per)
    measured_areas = load_areas(areas) if areas is not None else {}
    own = iso_pes(measured_areas)
    for array, (paper_pes, paper_source) in ISO_AREA.items():
        pes, source = own.get(array, (paper_pes, paper_source))
        present = [f for f in TRAJECTORY[array] if f in fmts]
        if not present:
            rows.append(_row(array, "mac", pes, source, None, "no trained format to borrow",
                             [], [], None))
            rows[-1].update(paper_pes=paper_pes, paper_tta_seconds=None)
            continue
        fname = present[0]
        say(f"pricing the {array} array ({pes} PEs) with the {fname} run's accuracies")
        one = sum(price_mac(first_epoch, pes))
        recs = fmts[fname].get("epochs") or []
        n_ep = max([int(r["epoch"]) for r in recs], default=0)
        note = "measured" if fname == TRAJECTORY[array][0] else "stand-in"
        rows.append(_row(array, "mac", pes, source, fname, note, [one] * n_ep, recs, tacc))
        at_paper = time_to_accuracy([sum(price_mac(first_epoch, paper_pes))] * n_ep, recs,
                                    tacc)
        rows[-1].update(paper_pes=paper_pes, paper_tta_cycles=at_paper["tta_cycles"],
                        paper_tta_seconds=at_paper["tta_seconds"])

    base = next(r for r in rows if r["format"] == "fast" and r["kind"] == "fmac")
    for r in rows:
        r["tta_speedup_fast"] = (r["tta_cycles"] / base["tta_cycles"]
                                 if r["tta_cycles"] and base["tta_cycles"] else None)
        r["epoch_speedup_fast"] = (r["cycles_per_epoch"] / base["cycles_per_epoch"]
                                   if r["cycles_per_epoch"] and base["cycles_per_epoch"]
                                   else None)
        r["paper_tta_speedup_fast"] = (r["paper_tta_cycles"] / base["tta_cycles"]
                                       if r.get("paper_tta_cycles") and base["tta_cycles"]
                                       else None)

    for r in rows:
        r["own_tta_speedup_fast"] = (r["own_tta_cycles"] / base["own_tta_cycles"]
                                     if r["own_tta_cycles"] and base["own_tta_cycles"]
                                     else None)
    res = {"run_dir": str(run_dir), "extra_runs": [str(r) for r in extra_runs or ()],
           "runs": {name: rec.get("run") for name, rec in fmts.items()},
           "areas": measured_areas, "areas_folder": str(areas) if areas is not None else None,
           "model": (data.get("config") or {}).get("model"),
           "clock_hz": CLOCK_HZ, "target": target, "rows": rows, "fast_work": work,
           "first_to_target": first_to_target(rows), "width_macs": width_work(fast),
           "paper": PAPER, "files": ["fast_time.json", "fast_time.md", "widths.png"]}
    say("drawing the width map")
    plot_widths(fast, out_dir / "widths.png")
    (out_dir / "fast_time.md").write_text(markdown(res))
    (out_dir / "fast_time.json").write_text(json.dumps(res, indent=1) + "\n")
    return res


def _row(array, kind, pes, source, fmt, note, epoch_cycles, epochs, target):
    tta = time_to_accuracy(epoch_cycles, epochs, target)
    # without the accuracy lag: the time to the run's own final accuracy less the margin
    finals = [r.get("test_accuracy") for r in epochs if r.get("test_accuracy") is not None]
    own_target = finals[-1] - MARGIN if finals else None
    own = time_to_accuracy(epoch_cycles, epochs, own_target)
    return {"array": array, "kind": kind, "pes": pes, "size_source": source, "format": fmt,
            "format_note": note, "epoch_cycles": list(epoch_cycles),
            "cycles_per_epoch": (sum(epoch_cycles) / len(epoch_cycles)
                                 if epoch_cycles else None),
            **tta, "own_target": own_target, "own_reached_epoch": own["reached_epoch"],
            "own_tta_cycles": own["tta_cycles"], "own_tta_seconds": own["tta_seconds"]}


def first_to_target(rows: list) -> list:
    """The rows that reach the target, fastest first: ``[(array, format, note, seconds)]``."""
    hit = [r for r in rows if r.get("tta_seconds") is not None]
    return [(r["array"], r["format"], r["format_note"], r["tta_seconds"])
            for r in sorted(hit, key=lambda r: (r["tta_seconds"], r["array"]))]


def width_work(summary: dict) -> dict:
    """The MACs a FAST run did at each pair of widths (``"mx x my"``, the GEMM's two operands'
    magnitudes), per layer and epoch: ``{layer: {epoch: {pair: MACs}}}``."""
    widths = summary["widths"]
    per = int(summary["iterations_per_epoch"])
    out: dict = {}
    for it, table in enumerate(iteration_tables(summary)):
        epoch = it // per + 1
        for layer, phases in (table or {}).items():
            cell = out.setdefault(layer, {}).setdefault(epoch, {})
            for phase, shape in phases.items():
                tx, ty = _WIDTH_OF[phase]
                pair = f"{widths[tx][layer][it]}x{widths[ty][layer][it]}"
                M, K, N = (int(v) for v in shape)
                cell[pair] = cell.get(pair, 0) + M * K * N
    return out


# ----------------------------------------------------------------------------------------------
# report


def _fmt(v, spec="{:.2f}", none="—"):
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return none
    return spec.format(v)


def markdown(res: dict) -> str:
    """``fast_time.md``: the time-to-accuracy table, the time model and the paper's claims."""
    t = res["target"]
    lines = [f"# FAST time to accuracy ({res['model'] or 'model ?'})", ""]
    if t:
        lines.append(f"Target: test accuracy ≥ {100 * t['accuracy']:.2f} % "
                     f"({t['rule']}; fp32 reached {100 * t['fp32_final']:.2f} %).")
    else:
        lines.append("No fp32 run: no target accuracy, so no time to accuracy.")
    lines += ["", "| array | PEs | size from | accuracies from | cycles / epoch | µs / epoch "
              "| epoch time vs FAST | target at epoch | time to accuracy (µs) "
              "| TTA vs FAST | paper's PEs | at the paper's size: time to accuracy (µs) "
              "(vs FAST) |",
              "|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in res["rows"]:
        src = f"`{r['format']}` ({r['format_note']})" if r["format"] else r["format_note"]
        reached = (r["reached_epoch"] if r["reached_epoch"] is not None
                   else ("not reached" if t and r["format"] else "—"))
        cpe = r["cycles_per_epoch"]
        paper_pes = r.get("paper_pes")
        lines.append(
            f"| {r['array']} | {r['pes']:,} | {r['size_source']} | {src} | {_fmt(cpe, '{:,.0f}')} "
            f"| {_fmt(cpe and cpe / res['clock_hz'] * 1e6, '{:.2f}')} "
            f"| {_fmt(r['epoch_speedup_fast'], '{:.2f}x')} | {reached} "
            f"| {_fmt(r['tta_seconds'] and r['tta_seconds'] * 1e6, '{:.2f}')} "
            f"| {_fmt(r['tta_speedup_fast'], '{:.2f}x')} "
            f"| {_fmt(paper_pes, '{:,}')} "
            f"| {_fmt(r.get('paper_tta_seconds') and r['paper_tta_seconds'] * 1e6, '{:.2f}')}"
            f" ({_fmt(r.get('paper_tta_speedup_fast'), '{:.2f}x')}) |")
    areas = res.get("areas") or {}
    lines += ["", "\"vs FAST\": the row's time over the adaptive `fast` run's on its fMAC array "
              "(above 1: FAST is faster). \"accuracies from\": the run whose per-epoch test "
              "accuracies the row uses (a stand-in when the array's own format was not "
              "trained). "
              + ("Sizes from trainfab's Table IV syntheses (fMAC at m_max = 4: "
                 f"{areas['fMAC']['area_um2']:,.0f} µm²) where measured, the paper's otherwise."
                 if "fMAC" in areas else
                 "Sizes: the paper's (no trainfab areas given: `--areas DIR` with the reports "
                 "of " + "; ".join(f"`{c}`" for c in area_commands()) + ")."), ""]
    first = res.get("first_to_target") or []
    if first:
        a, f, note, sec = first[0]
        lines += [f"**First to the target: {a}** with `{f}`'s accuracies ({note}), "
                  f"{sec * 1e6:.2f} µs; then " + ", ".join(
                      f"{a2} ({'stand-in ' if n2 == 'stand-in' else ''}`{f2}`, "
                      f"{s2 * 1e6:.2f} µs)" for a2, f2, n2, s2 in first[1:]) + ".", ""]
    elif t:
        lines += ["No array reaches the target.", ""]
    lines += ["Without the accuracy lag (each row's time to its own run's final accuracy "
              f"less {100 * MARGIN:g} point):", "",
              "| array | accuracies from | own target | at epoch | time (µs) | vs FAST |",
              "|---|---|---:|---:|---:|---:|"]
    for r in res["rows"]:
        if not r["format"]:
            continue
        lines.append(f"| {r['array']} | `{r['format']}` ({r['format_note']}) | "
                     f"{_fmt(r.get('own_target') and 100 * r['own_target'], '{:.2f} %')} | "
                     f"{_fmt(r.get('own_reached_epoch'), '{}')} | "
                     f"{_fmt(r.get('own_tta_seconds') and r['own_tta_seconds'] * 1e6)} | "
                     f"{_fmt(r.get('own_tta_speedup_fast'), '{:.2f}x')} |")
    lines.append("")
    wm = res.get("width_macs") or {}
    pairs = sorted({p for ep in wm.values() for c in ep.values() for p in c})
    if wm:
        lines += ["## MACs at each width (`fast`)", "",
                  "Share of each layer's training MACs (fwd, bwd_data, wgrad) per epoch done at "
                  "each pair of magnitude widths (the GEMM's two operands, mx x my bits):", "",
                  "| layer | epoch | MACs | " + " | ".join(pairs) + " |",
                  "|---|---:|---:|" + "---:|" * len(pairs)]
        for layer, eps in wm.items():
            for epoch, cell in eps.items():
                tot = sum(cell.values())
                lines.append(f"| {layer} | {epoch} | {tot:,} | " + " | ".join(
                    f"{cell.get(p, 0) / tot:.1%}" if tot else "—" for p in pairs) + " |")
        lines.append("")
    lines += ["## FAST work", "", "| run | fwd rounds | bwd_data rounds | wgrad rounds "
              "| equals the format's count |", "|---|---:|---:|---:|---|"]
    for name, w in res["fast_work"].items():
        fr = w["fmac_rounds"]
        lines.append(f"| `{name}` | {fr['fwd']:,} | {fr['bwd_data']:,} | {fr['wgrad']:,} "
                     f"| {'yes' if w['matches'] else 'NO'} |")
    lines += ["", "## Time model", "",
              f"All arrays at {res['clock_hz'] / 1e6:g} MHz, at their throughput bound "
              "(`ceil(work / throughput)` cycles per GEMM; no fill, drain, operand loading or "
              "partly used tiles), training GEMMs only (fwd, bwd_data, wgrad of every layer "
              "and mini-batch).",
              "FAST: 256 x 64 fMACs, a pair of 16-value groups with mx- and my-bit magnitudes "
              "takes (mx/2)(my/2) cycles of one fMAC; widths as the run chose them per layer, "
              "tensor and iteration.",
              "Other arrays: one MAC per PE per cycle, sized to the fMAC array's area by "
              "trainfab's syntheses of the fMAC and the 16-MAC units (MAC for MAC) where "
              "given, by the paper's sizes otherwise; the FP32 array's size (half the "
              "bfloat16 array's PEs) is an assumption.",
              "Arrays of formats that were not trained borrow the accuracies of the closest "
              "trained format (column \"accuracies from\"), which credits them with that "
              "format's accuracy.", "",
              "## Paper", ""]
    lines += [f"- {v}" for v in res["paper"].values()]
    lines += ["", "![width map](widths.png)", ""]
    return "\n".join(lines)


def width_matrix(summary: dict, tensor: str) -> np.ndarray:
    """A run's chosen widths of one tensor (``"w"``, ``"a"``, ``"g"``) as a float array of
    shape (layers, iterations); NaN where no width was chosen."""
    rows = []
    for layer in summary["layers"]:
        s = summary["widths"][tensor][layer]
        rows.append([float(c) if c.isdigit() else np.nan for c in s])
    return np.array(rows, dtype=float).reshape(len(summary["layers"]), -1)


def plot_widths(summary: dict, path: Path) -> None:
    """The width map: one panel per tensor (W, A, G), layers x iterations, 2-bit light and
    4-bit dark, epochs marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap

    layers = summary["layers"]
    per = max(1, int(summary["iterations_per_epoch"]))
    fig, axes = plt.subplots(3, 1, figsize=(10, 1.8 + 1.5 * len(layers)), sharex=True)
    cmap = ListedColormap(["#cfe3f5", "#1f4e8c"]).with_extremes(bad="#bbbbbb")
    for ax, t, title in zip(axes, ("w", "a", "g"), ("weights W", "activations A",
                                                    "output gradients G")):
        m = width_matrix(summary, t)
        im = ax.imshow(np.ma.masked_invalid(m), aspect="auto", interpolation="nearest",
                       cmap=cmap, vmin=2, vmax=4)
        ax.set_yticks(range(len(layers)), layers)
        ax.set_title(f"{title}: mantissa width per layer and iteration", fontsize=9)
        for e in range(per, m.shape[1], per):
            ax.axvline(e - 0.5, color="white", lw=0.6)
    axes[-1].set_xlabel(f"iteration ({per} per epoch; white lines: epoch boundaries)")
    cb = fig.colorbar(im, ax=list(axes), ticks=[2, 4], fraction=0.03)
    cb.set_label("bits")
    fig.suptitle("FAST width map (Algorithm 1)", fontsize=10)
    fig.savefig(path, dpi=110)
    plt.close(fig)


__all__ = ["CLOCK_HZ", "FAST_ARRAY", "ISO_AREA", "TRAJECTORY", "FAST_FORMATS", "MARGIN", "PAPER",
           "FastTimeError", "load_run", "iteration_tables", "fast_gemm_cycles", "mac_gemm_cycles",
           "price_fast", "price_mac", "per_epoch", "time_to_accuracy", "fast_time_study",
           "markdown", "width_matrix", "plot_widths"]

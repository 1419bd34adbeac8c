"""``trainfab train``: one training run per number format, in parallel processes, and its report.

Usage::

    trainfab train [--model mlp|cnn|cnn-q4|lenet|resnet] [--formats fp32,bf16,...|all]
                   [--epochs N] [--seed S] [-j N] [--dataset SET] [--limit N]
                   [--stop-after FORMAT=EPOCH] [--capture DIR] [-o DIR]

Every format trains the same model from the same initial weights on the same data order (one
seed): the only difference between two runs is the arithmetic of their GEMMs and the storage of
their stashed tensors (:mod:`flows.studies.train.formats`).  Formats run in parallel processes
(``-j``, default 2); a progress bar per format shows its epoch, loss, accuracy and time left
when standard error is a terminal.

Outputs (``-o``, default ``build/train/<model>``), moved into place when the run ends:

``train.json``
    ``{"config": {...}, "formats": {name: {"final_test_accuracy", "best_epoch",
    "diverged_at", "epochs": [{"epoch", "loss", "train_accuracy", "test_accuracy",
    "format": {...}}], "format": {...}}}}``: no times or host names, so one seed gives one
    file, byte for byte.
``train.md``
    the accuracy table (final test accuracy, change against fp32, best epoch, wall time, the
    paper's claim beside it) and each format's own tables (FAST's chosen widths, Schrödinger's FP
    footprints).
``train.csv``
    one row per format and epoch.
``accuracy.png``, ``loss.png``
    one line per format.
``widths-fast.png``, ``bitlengths-schrodinger.png``, ``bitlengths-bitwave.png``
    the chosen mantissa widths per layer and iteration; the learned bitlengths per epoch.

A format whose loss becomes NaN or infinite is reported as diverged at that epoch; the others
go on.  Ctrl-C stops every run and writes the records of the epochs that finished (``train.json``
then says ``"interrupted": true``).

``--capture DIR`` records, for the first mini-batch of every epoch, both operands of every GEMM
of every layer in the three phases, as bfloat16 bit patterns (:mod:`flows.studies.captures`),
one sub-folder per format: ``trainfab speedup DIR/<format>`` and ``trainfab tensor-stats
DIR/<format>`` read them.
"""

from __future__ import annotations

import csv
import io
import json
import math
import multiprocessing
import queue as queue_mod
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ... import FlowError

HELP = ("train a small network in every number format (accuracy beside the papers' claims); "
        "optionally capture the training GEMMs' operands")

#: bounds of the numeric options (the error names the option and the range)
EPOCHS_RANGE = (1, 1000)
BATCH_RANGE = (1, 4096)
JOBS_RANGE = (1, 64)
SEED_RANGE = (0, 2**32 - 1)
LIMIT_RANGE = (10, 10**7)


def _formats():
    """Every format ``--formats`` accepts: the paper formats, then the ablations (iterating
    lists these), and the parametric variants (``in`` and ``[]`` take them)."""
    from .formats import known

    return known()


def _unknown(name: str) -> FlowError:
    """The error for a format name ``--formats`` does not take: a variant's own message when
    the name has a variant's form with a parameter out of range."""
    from .formats import VARIANTS, variant

    try:
        variant(name)
    except ValueError as e:
        return FlowError(str(e))
    return FlowError(f"unknown format {name!r}; known formats: {', '.join(_formats())}; "
                     f"variants: {'; '.join(VARIANTS)}")


def _all_formats() -> tuple:
    """``--formats all``: the paper formats (the ablations only when named)."""
    from .formats import FORMATS

    return tuple(FORMATS)


def _models():
    from .models import MODELS

    return MODELS


@dataclass(frozen=True)
class TrainOptions:
    """The options of one ``trainfab train`` run (the CLI builds it from its arguments)."""

    #: model name (``mlp``, ``cnn``, ``cnn-q4``)
    model: str = "cnn"
    #: format names, in the order of the report
    formats: tuple[str, ...] = ()
    #: training epochs (None: the engine's default)
    epochs: int | None = None
    #: seed of the data split, the initialization, the data order and every format's randomness
    seed: int = 0
    #: parallel processes
    jobs: int = 2
    #: the data set: digits (None), fashion-mnist, a folder of IDX files or an ``.npz`` file
    dataset: str | None = None
    #: capture folder (None: no capture)
    capture: str | None = None
    #: output folder (None: ``build/train/<model>``)
    output: str | None = None
    #: mini-batch size (None: the engine's default)
    batch_size: int | None = None
    #: samples kept from the (shuffled) dataset before the split (None: all)
    limit: int | None = None
    #: formats that stop early: ``((name, epoch), ...)``, each ending its run after that epoch
    #: of the common schedule (``--stop-after``)
    stop_after: tuple[tuple[str, int], ...] = ()
    #: show progress: bars on a terminal, a line per format a minute otherwise
    progress: bool = True

    @property
    def run_epochs(self) -> int:
        """The length of the run's schedule: ``epochs``, or the engine's default."""
        from . import engine

        return self.epochs or engine.DEFAULTS["epochs"]

    def epochs_of(self, name: str) -> int:
        """The epochs format ``name`` trains (its ``--stop-after`` or the run's epochs)."""
        return dict(self.stop_after).get(name, self.run_epochs)


def _check_range(name: str, value, lo, hi) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise FlowError(f"{name} must be an integer in {lo}..{hi}, not {value!r}")


def parse_formats(text: str) -> tuple[str, ...]:
    """``--formats``: a comma-separated list of format names, or ``all``."""
    known = _formats()
    if text.strip() == "all":
        return _all_formats()
    names = [t.strip() for t in text.split(",") if t.strip()]
    if not names:
        raise FlowError("--formats is empty; known formats: " + ", ".join(known))
    for n in names:
        if n not in known:
            raise _unknown(n)
    seen = []
    for n in names:
        if n in seen:
            raise FlowError(f"format {n!r} is named twice in --formats")
        seen.append(n)
    return tuple(seen)


def parse_stop_after(text: str) -> tuple[tuple[str, int], ...]:
    """``--stop-after``: ``FORMAT=EPOCH[,FORMAT=EPOCH...]``."""
    out = []
    for item in (t.strip() for t in text.split(",")):
        if not item:
            continue
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not value.strip().isdigit():
            raise FlowError(f"--stop-after takes FORMAT=EPOCH items, not {item!r} "
                            "(e.g. --stop-after fpraker=1)")
        if name not in _formats():
            raise FlowError(f"--stop-after: {_unknown(name)}")
        if name in dict(out):
            raise FlowError(f"--stop-after names format {name!r} twice")
        out.append((name, int(value)))
    if not out:
        raise FlowError("--stop-after is empty (e.g. --stop-after fpraker=1)")
    return tuple(out)


def output_folder(opts: TrainOptions) -> Path:
    from ... import build_dir

    return Path(opts.output) if opts.output else build_dir() / "train" / opts.model


#: the files every run writes into its output folder (the format plots come on top)
OUTPUT_NAMES = ("train.json", "train.md", "train.csv", "accuracy.png", "loss.png")


def validate(opts: TrainOptions):
    """Every check that can fail before training: returns ``(formats, dataset, stages)``, the
    stages (:class:`flows.runs.Stage`) of the output folder and, with ``--capture``, of the
    capture folder, both checked (writable, manifests readable, no file of the user's where
    the run writes one)."""
    from ...runs import Stage, resolve
    from ..captures import MANIFEST as CAPTURE_MANIFEST
    from .data import DatasetError, load_dataset

    if opts.model not in _models():
        raise FlowError(f"unknown model {opts.model!r}; known models: {', '.join(_models())}")
    formats = opts.formats or _all_formats()
    for n in formats:
        if n not in _formats():
            raise _unknown(n)
    _check_range("--epochs", opts.epochs, *EPOCHS_RANGE)
    _check_range("--batch-size", opts.batch_size, *BATCH_RANGE)
    _check_range("-j/--jobs", opts.jobs, *JOBS_RANGE)
    _check_range("--seed", opts.seed, *SEED_RANGE)
    _check_range("--limit", opts.limit, *LIMIT_RANGE)
    epochs = opts.run_epochs
    for name, stop in opts.stop_after:
        if name not in formats:
            raise FlowError(f"--stop-after names format {name!r}, which is not trained "
                            "(see --formats)")
        _check_range(f"--stop-after {name}", stop, 1, epochs)
    out = output_folder(opts)
    if opts.capture and resolve(opts.capture, "capture folder") == resolve(out):
        raise FlowError(f"--capture {opts.capture} is the output folder; give the capture a "
                        "folder of its own (e.g. OUTPUT/capture)")
    stages = [Stage(out, names=OUTPUT_NAMES, last=("train.json",))]
    if opts.capture:
        # the capture folder holds one run's formats: the run replaces it whole
        stages.append(Stage(opts.capture, names=[f"{n}/{CAPTURE_MANIFEST}" for n in formats],
                            folders=formats, what="capture folder"))
    try:
        data = load_dataset(opts.dataset, opts.seed, limit=opts.limit)
    except DatasetError as e:
        raise FlowError(str(e)) from None
    from .models import build_model

    try:
        build_model(opts.model, data.input_shape, data.classes, opts.seed)
    except ValueError as e:
        raise FlowError(str(e)) from None
    return formats, data, stages


# --- one format, in a worker process


def _train_one(name: str, opts: TrainOptions, events) -> dict:
    """Train ``opts.model`` in format ``name``; progress goes to ``events`` (a queue)."""
    from . import engine, loop
    from .data import load_dataset

    data = load_dataset(opts.dataset, opts.seed, limit=opts.limit)
    cls = _formats()[name]
    writer = None
    if opts.capture:
        from ..captures import CaptureWriter

        writer = CaptureWriter(Path(opts.capture) / name,
                               {"model": opts.model, "format": name, "seed": opts.seed,
                                "batch_size": opts.batch_size or engine.DEFAULTS["batch_size"],
                                "dataset": data.name})
    start = time.monotonic()

    def on_batch(epoch, iteration, iterations, loss):
        events.put(("batch", name, epoch, iteration, iterations, float(loss)))

    def on_epoch(record):
        events.put(("epoch", name, _plain(record)))

    def capture(epoch, iteration, layer, phase, x, y):
        writer.add(epoch, layer, phase, x, y)

    kwargs = {}
    if opts.batch_size is not None:
        kwargs["batch_size"] = opts.batch_size
    finished = False
    try:
        epochs = opts.run_epochs
        stop = opts.epochs_of(name)
        result = loop.train(opts.model, cls, data, epochs,
                            stop_after=stop if stop < epochs else None,
                            seed=opts.seed, on_epoch=on_epoch,
                            on_batch=on_batch, capture=capture if writer else None, **kwargs)
        finished = True
    finally:
        if writer is not None:
            # an interrupted or failed run's capture holds its finished epochs, marked so
            writer.close(complete=finished)
    result = _plain(result)
    events.put(("done", name, result, time.monotonic() - start))
    return result


#: the signals a worker starts with blocked (:func:`_start`): it takes them only in
#: :func:`_worker`, where they end its run cleanly
_WORKER_SIGNALS = {signal.SIGINT, signal.SIGTERM}


def _start(ctx, name, opts, events, running: dict) -> None:
    """Start a format's worker process into ``running``.  Ctrl-C reaches every process of the
    terminal's job: the parent handles it (and stops the workers with SIGTERM), so a worker
    ignores it; both signals stay blocked until the worker's own code runs, so neither can
    interrupt it in Python's process start-up (with a traceback), and in the parent until the
    worker is in ``running``, where an interrupted run finds it to stop it (the parent's
    handlers note a signal and run it afterwards: another thread may take it)."""
    from ...runs.locks import _deferred_signals

    with _deferred_signals():
        old = signal.pthread_sigmask(signal.SIG_BLOCK, _WORKER_SIGNALS)
        try:
            p = ctx.Process(target=_worker, args=(name, opts, events), daemon=True)
            p.start()
            running[name] = p
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _stop(signum, frame):
    raise KeyboardInterrupt


def _worker(name, opts, events):
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, _stop)  # the parent stops a worker with SIGTERM
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _WORKER_SIGNALS)
        return _train_one(name, opts, events)
    except KeyboardInterrupt:  # SIGTERM from the parent
        return None
    except Exception as e:  # reported by the parent as one line
        import traceback

        events.put(("error", name, f"{type(e).__name__}: {e}", traceback.format_exc()))
        return None


def _plain(obj):
    """``obj`` with NumPy scalars and arrays turned into JSON values (floats kept exact)."""
    import numpy as np

    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _plain(obj.tolist())
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        obj = float(obj)
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


# --- progress


class _Progress:
    """Progress of every format: on a terminal, one bar per format (:mod:`flows.progress`);
    otherwise (a log, ``make``) one line per format when it starts, each minute while it runs
    and when an epoch ends, with the time it has left at its pace so far.

    ``epochs`` maps each format to the epochs it trains; ``clock`` and ``stream`` can be
    injected (a fake clock makes the lines a pure function of the events)."""

    FORMAT = ("{desc} {percentage:3.0f}%|{bar:20}| {n:.2f}/{total} epochs [{elapsed}<{remaining}]"
              "{postfix}")
    #: seconds between two lines of one format when standard error is not a terminal
    LINE_EVERY = 60.0

    def __init__(self, epochs: dict, enabled: bool, stream=None, clock=time.monotonic,
                 label: str = ""):
        from ... import progress

        self.stream = sys.stderr if stream is None else stream
        self.bars_on = enabled and progress.interactive(self.stream)
        self.lines_on = enabled and not self.bars_on
        self.epochs = dict(epochs)
        self.clock = clock
        self.label = f"{label} " if label else ""
        self.bars = {}
        self.started: dict = {}
        self.last_line: dict = {}
        if self.bars_on:
            width = max(len(n) for n in epochs)
            for i, (n, total) in enumerate(epochs.items()):
                self.bars[n] = progress.bar(total, n.ljust(width), "epoch", position=i,
                                            stream=self.stream, bar_format=self.FORMAT)

    def _line(self, name, done: float, text: str) -> None:
        from ... import progress

        now = self.clock()
        spent = now - self.started.setdefault(name, now)
        total = self.epochs[name]
        left = (f", about {progress.elapsed(spent * (total - done) / done)} left"
                if 0 < done < total else "")
        print(f"{self.label}{name}: {text} ({progress.elapsed(spent)}{left})",
              file=self.stream, flush=True)
        self.last_line[name] = now

    def start(self, name) -> None:
        if self.lines_on:
            self.started[name] = self.clock()
            n = self.epochs[name]
            self._line(name, 0, f"started, {n} epoch{'s' if n != 1 else ''}")

    def batch(self, name, epoch, iteration, iterations, loss):
        done = (epoch - 1) + (iteration + 1) / iterations
        bar = self.bars.get(name)
        if bar is not None:
            bar.set(done, f"loss {loss:.3f}")
        elif self.lines_on and self.clock() - self.last_line.get(name, 0.0) >= self.LINE_EVERY:
            self._line(name, done, f"epoch {done:.2f} of {self.epochs[name]}, loss {loss:.3f}")

    def epoch(self, name, record):
        acc = record.get("test_accuracy")
        text = (f"loss {record['loss']:.3f}, test "
                f"{'—' if acc is None else f'{100 * acc:.1f} %'}")
        bar = self.bars.get(name)
        if bar is not None:
            bar.set(record["epoch"], text)
        elif self.lines_on:
            self._line(name, record["epoch"],
                       f"epoch {record['epoch']} of {self.epochs[name]} done, {text}")

    def close(self):
        for bar in self.bars.values():
            bar.close()


# --- the run


@dataclass
class TrainRun:
    """What a run produced (the parent's view)."""

    options: TrainOptions
    formats: tuple[str, ...]
    results: dict = field(default_factory=dict)
    epochs: dict = field(default_factory=dict)
    wall: dict = field(default_factory=dict)
    errors: dict = field(default_factory=dict)
    interrupted: bool = False
    #: peak resident memory in bytes: ``{"parent": ..., "largest_worker": ...}``
    peak_rss: dict = field(default_factory=dict)


def train(opts: TrainOptions) -> TrainRun:
    """Run every format of ``opts`` (in ``opts.jobs`` processes) and write the outputs.

    Raises :class:`FlowError` for bad options before anything is written.  Returns the run;
    its outputs are in :func:`output_folder`.  The output folder and the capture folder are
    written privately and move into place together when the run ends (Ctrl-C included: the
    finished epochs, marked interrupted; the capture marked incomplete)."""
    import dataclasses

    from ...runs import staged_all

    formats, data, stages = validate(opts)
    with staged_all(stages) as works:
        private = opts if not opts.capture else dataclasses.replace(opts, capture=str(works[1]))
        run = _run_formats(private, formats)
        run.options = opts
        if run.interrupted and not any(run.epochs.values()):
            raise KeyboardInterrupt  # no epoch finished: nothing to keep, the folders stay
        write_outputs(run, data, works[0])
    return run


def _run_formats(opts: TrainOptions, formats) -> TrainRun:
    """Train every format (``opts.jobs`` processes at a time); Ctrl-C stops them all."""
    run = TrainRun(options=opts, formats=formats)
    run.epochs = {n: [] for n in formats}
    ctx = multiprocessing.get_context("fork")
    events = ctx.Queue()
    progress = _Progress({n: opts.epochs_of(n) for n in formats}, opts.progress,
                         label=opts.model)
    # the slowest first (longest-processing-time order), so the last format to start is a
    # short one and the processes end together; the report keeps the order of ``formats``
    cls = _formats()
    pending = sorted(formats, key=lambda n: -opts.epochs_of(n) * getattr(cls[n], "cost", 1.0))
    running = {}
    jobs = min(opts.jobs, len(formats))
    try:
        while pending or running:
            while pending and len(running) < jobs:
                name = pending.pop(0)
                _start(ctx, name, opts, events, running)
                progress.start(name)
            try:
                ev = events.get(timeout=0.5)
            except queue_mod.Empty:
                for name, p in list(running.items()):
                    if not p.is_alive() and name not in run.results:
                        p.join()
                        run.errors.setdefault(name, (f"the process exited with status "
                                                     f"{p.exitcode}", ""))
                        del running[name]
                continue
            kind, name = ev[0], ev[1]
            if kind == "batch":
                progress.batch(*ev[1:])
            elif kind == "epoch":
                run.epochs[name].append(ev[2])
                progress.epoch(name, ev[2])
            elif kind == "done":
                run.results[name], run.wall[name] = ev[2], ev[3]
                running.pop(name).join()
            elif kind == "error":
                run.errors[name] = (ev[2], ev[3])
                running.pop(name).join()
    except KeyboardInterrupt:
        from ...runs.locks import _deferred_signals

        run.interrupted = True
        with _deferred_signals():  # a second Ctrl-C cannot leave a worker writing
            for p in running.values():
                p.terminate()
            for p in running.values():
                p.join()
    finally:
        progress.close()
    run.peak_rss = _peak_rss()
    if opts.capture:
        _mark_unfinished_captures(Path(opts.capture), run)
    return run


def _peak_rss() -> dict:
    """The run's peak resident memory, in bytes: this process's and its largest joined
    worker's (Linux counts ``ru_maxrss`` in KiB)."""
    import resource

    return {"parent": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "largest_worker": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024}


def _mark_unfinished_captures(root: Path, run: TrainRun) -> None:
    """A format that did not finish (stopped, failed, killed before it could close its
    capture) has its capture marked incomplete."""
    from ..captures import MANIFEST as CAPTURE_MANIFEST

    for name in run.formats:
        path = root / name / CAPTURE_MANIFEST
        if name in run.results or not path.is_file():
            continue
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and doc.get("complete"):
            doc["complete"] = False
            path.write_text(json.dumps(doc, indent=1) + "\n")


def accuracy_at(result: dict | None, epoch: int):
    """A format's test accuracy at ``epoch`` (None without that epoch's record)."""
    return next((e.get("test_accuracy") for e in (result or {}).get("epochs", [])
                 if e["epoch"] == epoch), None)


def _partial_result(records: list) -> dict:
    """A format's result from the epochs that finished (an interrupted or failed run)."""
    tests = [r.get("test_accuracy") for r in records]
    best = max(range(len(records)), key=lambda i: tests[i] or -1.0) if records else None
    return {"final_test_accuracy": tests[-1] if records else None,
            "best_epoch": records[best]["epoch"] if records else None,
            "diverged_at": None, "epochs": records, "format": {}, "finished": False}


def results_of(run: TrainRun) -> dict:
    """Every format's result in the order of the run (finished or partial)."""
    out = {}
    for name in run.formats:
        if name in run.results:
            out[name] = dict(run.results[name], finished=True)
        else:
            out[name] = _partial_result(run.epochs.get(name, []))
            if name in run.errors:
                out[name]["error"] = run.errors[name][0]
    return out


def config_record(run: TrainRun, data) -> dict:
    from . import engine

    o = run.options
    return {"model": o.model, "formats": list(run.formats),
            "epochs": o.run_epochs,
            "batch_size": o.batch_size or engine.DEFAULTS["batch_size"],
            "stop_after": dict(o.stop_after),
            "seed": o.seed, "dataset": data.name, "train_samples": int(len(data.y_train)),
            "test_samples": int(len(data.y_test)), "limit": o.limit,
            "hyperparameters": {k: engine.DEFAULTS[k] for k in
                                ("lr", "momentum", "weight_decay", "schedule")}}


def write_outputs(run: TrainRun, data, work: Path) -> None:
    """Write train.json/md/csv and the plots into the run's private folder ``work``."""
    results = results_of(run)
    doc = {"config": config_record(run, data), "formats": results}
    if run.interrupted:
        doc["interrupted"] = True
    (work / "train.json").write_text(json.dumps(_plain(doc), indent=1) + "\n")
    (work / "train.csv").write_text(epochs_csv(results))
    (work / "train.md").write_text(markdown(run, results, doc["config"]))
    plots(work, results)


OUTPUTS = ("train.json", "train.md", "train.csv", "accuracy.png", "loss.png", "widths-fast.png",
           "bitlengths-schrodinger.png", "bitlengths-bitwave.png")


def epochs_csv(results: dict) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["format", "epoch", "loss", "train_accuracy", "test_accuracy"])
    for name, r in results.items():
        for e in r["epochs"]:
            w.writerow([name, e["epoch"], _num(e.get("loss")), _num(e.get("train_accuracy")),
                        _num(e.get("test_accuracy"))])
    return buf.getvalue()


def _num(v):
    return "" if v is None else repr(float(v))


def _pct(v) -> str:
    return "—" if v is None else f"{100 * v:.2f} %"


def markdown(run: TrainRun, results: dict, config: dict) -> str:
    cls = _formats()
    ref = results.get("fp32", {}).get("final_test_accuracy")
    lines = [f"# Training in every format: `{config['model']}` on {config['dataset']}", "",
             f"{config['train_samples']} training and {config['test_samples']} test samples, "
             f"{config['epochs']} epochs, batch {config['batch_size']}, seed {config['seed']}. "
             "Every format starts from the same weights and sees the same data order.", ""]
    if run.interrupted:
        lines += ["**Interrupted**: the records below are those of the epochs that finished.", ""]
    lines += ["| format | final test accuracy | vs fp32 | best epoch | wall time | paper's claim |",
              "|---|---|---|---|---|---|"]
    for name, r in results.items():
        acc = r.get("final_test_accuracy")
        ref_here, at = ref, ""
        if r.get("stopped_after") is not None:  # against fp32 at the same epoch
            at = f" (fp32 at epoch {r['stopped_after']})"
            ref_here = accuracy_at(results.get("fp32"), r["stopped_after"])
        delta = ("—" if acc is None or ref_here is None
                 else f"{100 * (acc - ref_here):+.2f} points{at}")
        status = ""
        if r.get("diverged_at") is not None:
            status = f" (diverged at epoch {r['diverged_at']})"
        elif r.get("error"):
            status = f" (failed: {r['error']})"
        elif r.get("stopped_after") is not None:
            status = f" (epoch {r['stopped_after']} of {config['epochs']}: --stop-after)"
        elif not r.get("finished", True):
            status = f" (stopped after {len(r['epochs'])} epochs)"
        wall = run.wall.get(name)
        lines.append(f"| {name} | {_pct(acc)}{status} | {delta} | {r.get('best_epoch') or '—'} | "
                     f"{'—' if wall is None else f'{wall:.0f} s'} | "
                     f"{getattr(cls.get(name), 'paper', '')} |")
    lines.append("")
    if run.peak_rss:
        jobs = min(run.options.jobs, len(run.formats))
        lines += [f"Peak resident memory: {run.peak_rss['largest_worker'] / 2**20:.0f} MiB for "
                  f"the largest format's process, {run.peak_rss['parent'] / 2**20:.0f} MiB for "
                  f"the parent ({jobs} format{'s' if jobs > 1 else ''} at once).", ""]
    lines += _same_epoch(results)
    for name, r in results.items():
        if name in cls and r.get("format"):
            text = cls[name].markdown(r)
            if text:
                lines += [f"## {name}", "", text.rstrip(), ""]
    return "\n".join(lines)





#: the formats a format stopped early is compared with, at its last epoch
SAME_EPOCH_REFERENCES = ("fp32", "bf16")


def _same_epoch(results: dict) -> list[str]:
    """A table for the formats that ``--stop-after`` ended early: their last epoch's test
    accuracy beside fp32's and bf16's at the same epoch of the same schedule (whose records
    equal what the stopped format would compare with had it gone on)."""
    stopped = {n: r for n, r in results.items() if r.get("stopped_after") is not None}
    if not stopped:
        return []
    refs = [n for n in SAME_EPOCH_REFERENCES if n in results and n not in stopped]
    lines = ["Formats stopped early (`--stop-after`), against " +
             (", ".join(refs) if refs else "no reference format") + " at the same epoch:", "",
             "| format | epoch | test accuracy |" + "".join(f" {r} |" for r in refs),
             "|---|---|---|" + "---|" * len(refs)]
    for name, r in stopped.items():
        epoch = r["stopped_after"]
        acc = accuracy_at(r, epoch)
        cells = []
        for ref in refs:
            other = accuracy_at(results[ref], epoch)
            delta = ("" if other is None or acc is None
                     else f" ({100 * (acc - other):+.2f} points)")
            cells.append(f"{_pct(other)}{delta}")
        lines.append(f"| {name} | {epoch} | {_pct(acc)} |" + "".join(f" {c} |" for c in cells))
    return lines + [""]


def plots(work: Path, results: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    for key, fname, label in (("test_accuracy", "accuracy.png", "test accuracy"),
                              ("loss", "loss.png", "training loss")):
        fig, ax = plt.subplots(figsize=(7, 4.5))
        lines = 0
        for name, r in results.items():
            xs = [e["epoch"] for e in r["epochs"] if e.get(key) is not None]
            ys = [e[key] for e in r["epochs"] if e.get(key) is not None]
            if xs:
                ax.plot(xs, ys, marker=".", label=name)
                lines += 1
        ax.set_xlabel("epoch")
        ax.set_ylabel(label)
        if key == "loss" and lines:
            ax.set_yscale("log")
        ax.grid(alpha=0.3)
        if lines:  # every format diverged before its first epoch: an empty plot, no legend
            ax.legend(fontsize=8)
        else:
            ax.text(0.5, 0.5, "no finite values", ha="center", va="center",
                    transform=ax.transAxes)
        fig.tight_layout()
        fig.savefig(work / fname, dpi=110)
        plt.close(fig)
    cls = _formats()
    for name, r in results.items():
        if name in cls and r.get("format"):
            cls[name].plot(r, work)


__all__ = ["HELP", "TrainOptions", "TrainRun", "parse_formats", "validate", "train",
           "output_folder", "write_outputs"]

"""Training-operand captures: the GEMM operands of one mini-batch per epoch of a training run.

``trainfab train --capture DIR`` records, for the first mini-batch (iteration 0) of every epoch,
both operands of every GEMM of every layer with weights, in the three training phases, exactly
as the number format's ``matmul`` receives them (after the format's ``stash``: Schrödinger's FP
quantized weights and activations, for instance).  ``trainfab speedup DIR`` runs them on the
FPRaker tile's cycle model and ``trainfab tensor-stats DIR`` runs a tensor analysis (the Gecko
footprint by default) over them.

Layout of a capture folder
--------------------------
``DIR/manifest.json``::

    {"kind": "trainfab-capture", "version": 1,
     "model": ..., "format": ..., "seed": ..., "batch_size": ..., "dataset": ...,   # the run
     "complete": true,            # false while the run goes on, or after it was interrupted
     "epochs": [1, 2, ...],       # epochs with a file
     "gemms": [{"name": "conv1.fwd", "epoch": 1, "iteration": 0, "layer": "conv1",
                "phase": "fwd", "file": "e001.npz", "serial": [rows, K],
                "parallel": [rows, K], "macs": ..., "serial_kind": "activation",
                "parallel_kind": "weight"}, ...],
     "skipped": [{"epoch", "layer", "phase", "reason"}, ...]}

and one ``DIR/e<epoch:03d>.npz`` per epoch.  A GEMM ``<layer>.<phase>`` is the pair of arrays
``<layer>.<phase>.serial`` and ``<layer>.<phase>.parallel``, both with the reduction index on
their last axis, as bfloat16 bit patterns (``uint16``, rounded from float32 with round to
nearest even by :func:`golden.common.float_to_bf16`), C order.  This is the naming rule of
``trainfab speedup`` and the bf16 convention of :mod:`flows.studies.tensors`, so ``trainfab
speedup DIR/e001.npz`` and ``trainfab tensor-stats DIR/e001.npz`` read an epoch file as it is.
The engine's phases (``x @ y``) map to the pair as follows (``serial = x``, ``parallel =
y.T``)::

    phase      x (engine)    y (engine)    .serial (rows, K)          .parallel (rows, K)
    fwd        A   (N, K)    W   (K, M)    A   (N, K)   activations   W.T (M, K)  weights
    bwd_data   G   (N, M)    W.T (M, K)    G   (N, M)   gradients     W   (K, M)  weights
    wgrad      A.T (K, N)    G   (N, M)    A.T (K, N)   activations   G.T (M, N)  gradients

For a convolution, A is the im2col matrix (rows = batch x output positions, columns = input
channels x kernel positions: each input value appears up to kernel-size times) and G is the
output gradient with one row per (image, output position) and one column per output channel.

Writing is interruption-safe: an epoch's file is written when the next epoch's first GEMM
arrives (or at :meth:`CaptureWriter.flush` / :meth:`CaptureWriter.close`), to a temporary name
and renamed into place, and the manifest is then rewritten the same way, so a killed run leaves a
readable capture of its finished epochs.  GEMMs with a NaN or Inf operand (after rounding to
bfloat16: a diverged run) are not written; the manifest lists them under ``skipped``.
"""

import json
import os
import re
import tempfile
import time
from pathlib import Path

import numpy as np

from .. import FlowError

KIND = "trainfab-capture"
VERSION = 1
MANIFEST = "manifest.json"
#: the GEMM phases, in the order a training iteration runs them (per layer)
PHASES = ("fwd", "bwd_data", "wgrad")
#: what each operand of a phase holds: phase -> (serial kind, parallel kind)
OPERAND_KINDS = {"fwd": ("activation", "weight"), "bwd_data": ("gradient", "weight"),
                 "wgrad": ("activation", "gradient")}
#: the kinds of tensor, in report order
KINDS = ("weight", "activation", "gradient")
#: where ``capture_stats`` counts each kind (weights and activations appear in two phases, the
#: gradients G in two: each is counted once, in the layout of the first GEMM that reads it)
COUNTED_FROM = {"weight": ("fwd", "parallel"), "activation": ("fwd", "serial"),
                "gradient": ("bwd_data", "serial")}
#: manifest keys the writer owns (the run's ``meta`` may not use them)
RESERVED = ("kind", "version", "complete", "epochs", "gemms", "skipped")
_EPOCH_FILE = re.compile(r"e\d{3,}\.npz")


class CaptureError(FlowError, ValueError):
    """A capture that cannot be written or read; the message is one line naming the problem."""


def _short(value) -> str:
    text = json.dumps(value)
    return text if len(text) <= 20 else text[:19] + "…"


def epoch_file(epoch: int) -> str:
    """The file name of an epoch's operands: ``e<epoch:03d>.npz``."""
    return f"e{epoch:03d}.npz"


def _bf16_rows(a: np.ndarray) -> np.ndarray:
    """float32 values → C-ordered bfloat16 bit patterns (RNE): C order, because the readers take
    ``.npy`` members in storage order."""
    from golden.common import float_to_bf16

    return np.ascontiguousarray(float_to_bf16(np.asarray(a, dtype=np.float32)), dtype=np.uint16)


def _non_finite(b: np.ndarray) -> bool:
    return bool(b.size and (((b >> 7) & 0xFF) == 0xFF).any())


def _write_atomic(path: Path, write) -> None:
    """``write(file)`` into a temporary file beside ``path``, then rename it into place."""
    # not mkstemp: its files are private (0600); this one gets the umask's permissions
    tmp = path.parent / f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    try:
        with open(tmp, "xb") as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


class CaptureWriter:
    """Writes a capture folder (see the module docstring), one ``.npz`` per epoch.

    Parameters
    ----------
    directory : path
        The capture folder, created if needed, without a ``manifest.json``: the writer never
        replaces or removes a file (``trainfab train`` writes its captures into a private
        folder that replaces the capture folder whole, :mod:`flows.runs`).
    meta : dict
        The run, copied into the manifest: ``model``, ``format``, ``seed``, ``batch_size``,
        ``dataset`` (any JSON values; the keys of :data:`RESERVED` are refused).

    Use it as ``capture`` callback of :func:`flows.studies.train.loop.train` directly
    (``writer(epoch, iteration, layer, phase, x, y)``), or call :meth:`add`; finish with
    :meth:`close` or a ``with`` block.  Epochs must come in increasing order; a (layer, phase)
    may appear once per epoch.
    """

    def __init__(self, directory, meta: dict):
        if not isinstance(meta, dict) or not all(isinstance(k, str) for k in meta):
            raise CaptureError("capture meta must be a dict with string keys")
        clash = [k for k in meta if k in RESERVED]
        if clash:
            raise CaptureError(f"capture meta key {clash[0]!r} is reserved for the manifest")
        try:
            json.dumps(meta)
        except (TypeError, ValueError) as e:
            raise CaptureError(f"capture meta is not JSON-serializable: {e}") from None
        from ..runs import ensure_dir

        self.directory = ensure_dir(Path(directory), "capture folder")
        self.meta = dict(meta)
        self.gemms: list[dict] = []
        self.epochs: list[int] = []
        self.skipped: list[dict] = []
        self.complete = False
        self._epoch: int | None = None
        self._pending: dict[str, np.ndarray] = {}
        self._pending_gemms: list[dict] = []
        self._seen: set = set()
        self._closed = False
        self._refuse_old()
        self._write_manifest()

    # --- the folder

    def _refuse_old(self) -> None:
        path = self.directory / MANIFEST
        if os.path.lexists(path):
            raise CaptureError(f"{path} exists: a capture is written into a new folder (trainfab "
                               "train replaces a capture folder whole, through its private "
                               "folder)")

    def _manifest(self) -> dict:
        return {"kind": KIND, "version": VERSION, **self.meta, "complete": self.complete,
                "epochs": list(self.epochs), "gemms": list(self.gemms),
                "skipped": list(self.skipped)}

    def _write_manifest(self) -> None:
        text = (json.dumps(self._manifest(), indent=1) + "\n").encode()
        _write_atomic(self.directory / MANIFEST, lambda f: f.write(text))

    # --- recording

    def __call__(self, epoch: int, iteration: int, layer: str, phase: str, x: np.ndarray,
                 y: np.ndarray) -> None:
        """The engine's ``capture`` callback: :meth:`add` with the iteration recorded."""
        self.add(epoch, layer, phase, x, y, iteration=iteration)

    def add(self, epoch: int, layer: str, phase: str, x: np.ndarray, y: np.ndarray,
            iteration: int = 0) -> None:
        """Record the GEMM ``x @ y`` of ``layer`` in ``phase`` (float32 operands, ``x`` (rows,
        K), ``y`` (K, cols)) as the pair ``serial = x``, ``parallel = y.T`` in bfloat16.

        A new epoch first writes the previous epoch's file and the manifest."""
        if self._closed:
            raise CaptureError(f"{self.directory}: the capture is closed")
        if isinstance(epoch, bool) or not isinstance(epoch, (int, np.integer)) or epoch < 1:
            raise CaptureError(f"capture epoch {epoch!r}: epochs are integers from 1")
        epoch = int(epoch)
        if phase not in PHASES:
            raise CaptureError(f"capture phase {phase!r}: expected one of {', '.join(PHASES)}")
        if not isinstance(layer, str) or not layer or not layer.isprintable():
            raise CaptureError(f"capture layer name {layer!r}: expected a printable name")
        x, y = np.asarray(x), np.asarray(y)
        if x.ndim != 2 or y.ndim != 2 or x.shape[1] != y.shape[0] or 0 in x.shape + y.shape:
            raise CaptureError(f"{layer}.{phase}: cannot capture {x.shape} @ {y.shape}: "
                               "expected non-empty (rows, K) @ (K, cols)")
        if self._epoch is not None and epoch < self._epoch:
            raise CaptureError(f"{layer}.{phase}: epoch {epoch} after epoch {self._epoch}: "
                               "captures go forward in epochs")
        if epoch != self._epoch:
            self.flush()
            self._epoch = epoch
        name = f"{layer}.{phase}"
        if (epoch, name) in self._seen:
            raise CaptureError(f"{name}: captured twice in epoch {epoch}")
        self._seen.add((epoch, name))
        S, P = _bf16_rows(x), _bf16_rows(y.T)
        bad = [what for what, b in (("x", S), ("y", P)) if _non_finite(b)]
        if bad:
            self.skipped.append({"epoch": epoch, "iteration": int(iteration), "layer": layer,
                                 "phase": phase, "reason": f"{' and '.join(bad)} hold NaN or Inf "
                                 "values (after rounding to bfloat16): not written"})
            return
        serial_kind, parallel_kind = OPERAND_KINDS[phase]
        self._pending[f"{name}.serial"] = S
        self._pending[f"{name}.parallel"] = P
        self._pending_gemms.append({
            "name": name, "epoch": epoch, "iteration": int(iteration), "layer": layer,
            "phase": phase, "file": epoch_file(epoch), "serial": list(S.shape),
            "parallel": list(P.shape), "macs": int(S.shape[0]) * int(P.shape[0]) * int(S.shape[1]),
            "serial_kind": serial_kind, "parallel_kind": parallel_kind})

    def flush(self) -> None:
        """Write the current epoch's file (if it holds a GEMM) and rewrite the manifest."""
        if self._pending:
            name = epoch_file(self._epoch)
            arrays = self._pending
            _write_atomic(self.directory / name, lambda f: np.savez_compressed(f, **arrays))
            self.gemms += self._pending_gemms
            if self._epoch not in self.epochs:
                self.epochs.append(self._epoch)
            self._pending, self._pending_gemms = {}, []
        self._write_manifest()

    def close(self, complete: bool = True) -> None:
        """Write what is pending and mark the manifest ``complete`` (``False``: the run was
        interrupted)."""
        if self._closed:
            return
        self.complete = complete
        self.flush()
        self._closed = True

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        # an interrupted run keeps what it captured: the manifest lists exactly what is written
        self.close(complete=exc_type is None)
        return False


# --- reading


def is_capture(path) -> bool:
    """Whether ``path`` is a capture folder (holds ``manifest.json``)."""
    return (Path(path) / MANIFEST).is_file()


def find_captures(paths) -> list[Path]:
    """The capture folders named by ``paths``: each a capture folder, or a folder whose direct
    sub-folders are (``trainfab train --capture DIR`` writes ``DIR/<format>/``), in name
    order.  One-line :class:`CaptureError` for a path that is neither."""
    found: list[Path] = []
    for p in map(Path, paths):
        if not p.is_dir():
            raise CaptureError(f"{p} is not a folder" if p.exists()
                               else f"capture folder {p} not found")
        if is_capture(p):
            found.append(p)
            continue
        try:
            subs = sorted(d for d in p.iterdir() if d.is_dir() and is_capture(d))
        except OSError as e:
            raise CaptureError(f"{p}: cannot list the folder: {e.strerror or e}") from None
        if not subs:
            raise CaptureError(f"{p}: not a capture folder (no {MANIFEST} in it or in its "
                               "sub-folders)")
        found += subs
    seen = set()
    for d in found:
        key = d.resolve()
        if key in seen:
            raise CaptureError(f"capture folder {d} is named twice")
        seen.add(key)
    return found


def _int(v, low: int = 0) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= low


def read_manifest(directory, check_files: bool = True) -> dict:
    """The checked manifest of a capture folder.

    Raises :class:`CaptureError` (one line naming the manifest) when it is missing, not JSON,
    not a capture's, of another version, or holds a malformed GEMM entry; with ``check_files``,
    also when an epoch file it lists is missing."""
    path = Path(directory) / MANIFEST
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise CaptureError(f"{directory}: not a capture folder (no {MANIFEST})") from None
    except (OSError, UnicodeDecodeError) as e:
        raise CaptureError(f"{path}: cannot read: {getattr(e, 'strerror', None) or e}") from None
    try:
        man = json.loads(text)
    except RecursionError:
        raise CaptureError(f"{path}: not a readable capture manifest (nested too deeply)") from None
    except ValueError as e:
        raise CaptureError(f"{path}: not a readable capture manifest ({str(e)[:120]})") from None
    if not isinstance(man, dict) or man.get("kind") != KIND:
        raise CaptureError(f"{path}: not a trainfab capture manifest (kind "
                           f"{str(man.get('kind') if isinstance(man, dict) else None)[:40]!r})")
    version = man.get("version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise CaptureError(f"{path}: capture version {_short(version)} is not a number (this "
                           f"trainfab reads version {VERSION})")
    if version != VERSION:
        raise CaptureError(f"{path}: capture version {version} is not supported (this "
                           f"trainfab reads version {VERSION})")
    gemms = man.get("gemms")
    if not isinstance(gemms, list):
        raise CaptureError(f"{path}: 'gemms' is not a list")
    seen = set()
    for i, g in enumerate(gemms):
        where = f"{path}: gemms[{i}]"
        if not isinstance(g, dict):
            raise CaptureError(f"{where} is not an object")
        for key in ("name", "layer", "phase", "file"):
            if not isinstance(g.get(key), str) or not g[key]:
                raise CaptureError(f"{where}: {key!r} is missing or not a string")
        if g["phase"] not in PHASES:
            raise CaptureError(f"{where}: phase {g['phase'][:40]!r} is not one of "
                               f"{', '.join(PHASES)}")
        if g["name"] != f"{g['layer']}.{g['phase']}":
            raise CaptureError(f"{where}: name {g['name'][:80]!r} is not <layer>.<phase>")
        if not _int(g.get("epoch"), 1):
            raise CaptureError(f"{where}: epoch {str(g.get('epoch'))[:20]} is not an integer >= 1")
        if not _EPOCH_FILE.fullmatch(g["file"]):
            raise CaptureError(f"{where}: file {g['file'][:80]!r} is not an epoch file "
                               "e<NNN>.npz of the capture folder")
        shapes = [g.get("serial"), g.get("parallel")]
        if not all(isinstance(s, list) and len(s) == 2 and all(_int(d, 1) for d in s)
                   for s in shapes):
            raise CaptureError(f"{where}: 'serial' and 'parallel' must be [rows, K] of positive "
                               "integers")
        if shapes[0][1] != shapes[1][1]:
            raise CaptureError(f"{where}: serial {shapes[0]} and parallel {shapes[1]} differ in K")
        if g.get("macs") != shapes[0][0] * shapes[1][0] * shapes[0][1]:
            raise CaptureError(f"{where}: macs {str(g.get('macs'))[:20]} is not serial rows x "
                               "parallel rows x K")
        if (g["epoch"], g["name"]) in seen:
            raise CaptureError(f"{where}: {g['name']} appears twice in epoch {g['epoch']}")
        seen.add((g["epoch"], g["name"]))
    if check_files:
        for name in dict.fromkeys(g["file"] for g in gemms):
            if not (Path(directory) / name).is_file():
                raise CaptureError(f"{directory}: the manifest lists {name}, which is missing "
                                   "(copy the whole capture folder)")
    skipped = man.setdefault("skipped", [])
    if not isinstance(skipped, list) or not all(isinstance(x, dict) for x in skipped):
        raise CaptureError(f"{path}: 'skipped' is not a list of objects")
    return man


def meta_of(man: dict) -> dict:
    """The run's fields of a manifest (everything the writer does not own)."""
    return {k: v for k, v in man.items() if k not in RESERVED}


def capture_labels(caps) -> list[str]:
    """Short names for captures ``[(directory, manifest)]``: each one's format (else its folder
    name), or the folder paths when those are not unique."""
    names = []
    for d, man in caps:
        fmt = man.get("format")
        names.append(fmt if isinstance(fmt, str) and fmt.isprintable() and fmt
                     else Path(d).name)
    if len(set(names)) < len(names):
        names = [str(d) for d, _ in caps]
    return names


# --- tensor statistics of a capture


def _read_array(tensor, where: str) -> np.ndarray:
    if tensor.fmt != "bf16":
        raise CaptureError(f"{where}: holds {tensor.source_dtype} values; a capture stores "
                           "bfloat16 bit patterns (uint16)")
    chunks = list(tensor.chunks(1 << 20))
    flat = np.concatenate(chunks) if chunks else np.zeros(0, np.uint16)
    return flat.reshape(tensor.shape)


def capture_stats(directory, analysis, options: dict, progress=None) -> dict:
    """Run a tensor analysis over the captured tensors, per epoch and kind of tensor.

    Parameters
    ----------
    directory : path
        A capture folder, or a folder of capture folders (one per format): every capture is
        analysed.
    analysis : flows.studies.tensors.TensorAnalysis
        The analysis (``gecko``: Gecko's footprint; ``hbfp``: HBFP quantization error; ``bdc``:
        FPRaker's base-delta compression footprint).
    options : dict
        Its keyword options (``{dest: value}`` of ``analysis.options``).
    progress : callable, optional
        ``progress(name, values_done, values_total)``, passed on to the analysis with ``name``
        = ``<capture>/e<epoch>/<kind>: <tensor>``.

    Returns
    -------
    dict
        ``{"kind": "trainfab-capture-stats", "path", "analysis", "options", "counted_from",
        "captures": [{"dir", "label", "meta", "complete", "skipped", "epochs": [{"epoch",
        "file", "kinds": {kind: analysis result}}]}]}``.  The analysis runs once per epoch and
        kind (weights, activations, gradients) on exactly the tensors of that kind, so its own
        ``total`` is the kind's total and its ``tensors`` rows the per-layer figures.

    Each tensor is counted once (:data:`COUNTED_FROM`): weights from the ``fwd`` parallel
    operand (W.T, rows = output features, K = input features), activations from the ``fwd``
    serial operand (A, the im2col matrix for a convolution), gradients from the ``bwd_data``
    serial operand (G, rows = batch x output positions, K = output features).  The other
    phases hold the same values in another layout (W, A.T, G.T), so an analysis whose blocks
    follow the storage order (Gecko's rows of ``lanes`` values, HBFP's blocks) sees the
    layout of the first GEMM that reads the tensor.  A kind missing from an epoch (a GEMM
    skipped as non-finite) has no entry in that epoch.
    """
    from .tensors import read_tensors

    from ..declare import resolve

    run = resolve(analysis.run)
    wanted = {f"{phase}.{operand}": kind for kind, (phase, operand) in COUNTED_FROM.items()}
    out = {"kind": "trainfab-capture-stats", "path": str(directory), "analysis": analysis.name,
           "options": dict(options),
           "counted_from": {k: f"{p}.{o}" for k, (p, o) in COUNTED_FROM.items()},
           "captures": []}
    t0 = time.monotonic()
    caps = [(d, read_manifest(d)) for d in find_captures([directory])]
    for (d, man), label in zip(caps, capture_labels(caps)):
        cap = {"dir": str(d), "label": label, "meta": meta_of(man),
               "complete": man.get("complete"), "skipped": man["skipped"], "epochs": []}
        listed: dict[str, dict[str, dict]] = {}
        for g in man["gemms"]:
            listed.setdefault(g["file"], {})[g["name"]] = g
        with tempfile.TemporaryDirectory(prefix="trainfab-capture-stats-") as tmp:
            for file, gemms in listed.items():
                path = d / file
                epoch = next(iter(gemms.values()))["epoch"]
                by_name = {t.name: t for t in read_tensors(path)}
                groups: dict[str, dict[str, np.ndarray]] = {}
                for g in gemms.values():
                    for operand in ("serial", "parallel"):
                        kind = wanted.get(f"{g['phase']}.{operand}")
                        if kind is None:
                            continue
                        tname = f"{g['name']}.{operand}"
                        t = by_name.get(tname)
                        if t is None:
                            raise CaptureError(f"{path}: the manifest lists {g['name']} but the "
                                               f"file has no {tname}")
                        if list(t.shape) != g[operand]:
                            raise CaptureError(f"{path}: {tname} has shape {list(t.shape)}, the "
                                               f"manifest says {g[operand]}")
                        groups.setdefault(kind, {})[tname] = _read_array(t, f"{path}:{tname}")
                rec = {"epoch": epoch, "file": file, "kinds": {}}
                for kind in KINDS:
                    if kind not in groups:
                        continue
                    part = Path(tmp) / f"{file[:-4]}-{kind}.npz"
                    np.savez(part, **groups[kind])
                    prefix = f"{label}/e{epoch:03d}/{kind}"
                    prog = ((lambda name, done, total, p=prefix: progress(f"{p}: {name}", done,
                                                                          total))
                            if progress else None)
                    try:
                        result = run(part, progress=prog, **options)
                    except FlowError as e:  # name the capture's file, not the private copy
                        raise FlowError(str(e).replace(str(part), f"{path} ({kind}s)")) \
                            from None
                    result["file"] = f"{path} ({kind}s)"
                    rec["kinds"][kind] = result
                    part.unlink()
                cap["epochs"].append(rec)
        cap["epochs"].sort(key=lambda r: r["epoch"])
        out["captures"].append(cap)
    out["seconds"] = round(time.monotonic() - t0, 3)
    return out


#: per analysis: the columns of a kind's total in the per-epoch table, (heading, function)
_COLUMNS = {
    "gecko": (("Gecko / FP32", lambda t: f"{t['gecko_ratio']:.3f}"),
              ("Gecko / uncompressed", lambda t: f"{t['gecko_bits'] / t['truncated_bits']:.3f}"
               if t["truncated_bits"] else "-"),
              ("Gecko bits/value", lambda t: f"{t['gecko_bits'] / t['values']:.2f}"
               if t["values"] else "-")),
    "bdc": (("BDC bits/value", lambda t: f"{t['bits_per_value']:.3f}"
             if t["values"] else "-"),
            ("BDC / bf16", lambda t: f"{t['ratio']:.3f}" if t["values"] else "-"),
            ("escape groups", lambda t: f"{100 * t['escape_share']:.1f} %"
             if t["groups"] else "-")),
    "hbfp": (("RRMSE", lambda t: f"{t['rrmse']:.2e}"),
             ("flushed to 0", lambda t: f"{100 * t['zeroed_share']:.2f} %")),
}


def _generic_columns(total: dict):
    return tuple((k, (lambda t, k=k: f"{t[k]:.4g}")) for k, v in total.items()
                 if isinstance(v, float))


def capture_stats_markdown(stats: dict) -> str:
    """The report of :func:`capture_stats`: per capture, a table of epochs by kind of tensor,
    then every counted tensor."""
    name = stats["analysis"]
    opts = ", ".join(f"{k}={v}" for k, v in stats["options"].items()) or "defaults"
    lines = [f"# {name} statistics of the training capture {stats['path']}", "",
             f"Analysis `{name}` ({opts}) per epoch on the tensors of one mini-batch (the "
             "epoch's first), bfloat16 as captured. Each tensor is counted once: weights from "
             f"`{stats['counted_from']['weight']}` (W.T), activations from "
             f"`{stats['counted_from']['activation']}` (A; the im2col matrix for a "
             f"convolution), gradients from `{stats['counted_from']['gradient']}` (G)."]
    if name == "gecko":
        lines[-1] += (" Uncompressed = sign, exponent and the kept mantissa bits of each value "
                      "(16 per bf16 value at the full mantissa).")
    for cap in stats["captures"]:
        meta = ", ".join(f"{k} {v}" for k, v in cap["meta"].items())
        lines += ["", f"## {cap['label']} ({meta})", "", f"Capture folder `{cap['dir']}`"
                  + ("" if cap["complete"] else " (incomplete: the run was interrupted or is "
                     "still going)") + "."]
        firsts = [r["kinds"][k]["total"] for r in cap["epochs"] for k in r["kinds"]
                  if r["kinds"][k].get("total")]
        cols = _COLUMNS.get(name) or (_generic_columns(firsts[0]) if firsts else ())
        kinds = [k for k in KINDS if any(k in r["kinds"] for r in cap["epochs"])]
        if not kinds:
            lines += ["", "No tensors were captured."]
        else:
            head = "| epoch | " + " | ".join(f"{k}s {c}" for k in kinds for c, _ in cols) + " |"
            lines += ["", head, "|---|" + "---|" * (len(kinds) * len(cols))]
            for r in cap["epochs"]:
                cells = []
                for k in kinds:
                    t = r["kinds"].get(k, {}).get("total")
                    cells += [f(t) if t else "-" for _, f in cols]
                lines.append(f"| {r['epoch']} | " + " | ".join(cells) + " |")
            lines += ["", "| epoch | kind | tensor | values | "
                      + " | ".join(c for c, _ in cols) + " |",
                      "|---|---|---|---|" + "---|" * len(cols)]
            for r in cap["epochs"]:
                for k in kinds:
                    for t in r["kinds"].get(k, {}).get("tensors", []):
                        lines.append(f"| {r['epoch']} | {k} | {t['name']} | {t['values']} | "
                                     + " | ".join(f(t) for _, f in cols) + " |")
        for s in cap["skipped"]:
            lines.append(f"\nSkipped: epoch {s.get('epoch')} {s.get('layer')}.{s.get('phase')}: "
                         f"{s.get('reason')}")
    lines += ["", f"{stats['seconds']} s"]
    return "\n".join(lines) + "\n"


__all__ = ["KIND", "VERSION", "MANIFEST", "PHASES", "OPERAND_KINDS", "KINDS", "COUNTED_FROM",
           "CaptureError", "CaptureWriter", "epoch_file", "is_capture", "find_captures",
           "read_manifest", "meta_of", "capture_labels", "capture_stats",
           "capture_stats_markdown"]

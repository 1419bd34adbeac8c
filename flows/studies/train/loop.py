"""Training a model in one number format (:func:`train`) and measuring its accuracy
(:func:`evaluate`).

:func:`train` runs a model in one format and returns its per-epoch records.  A run is
deterministic: the same arguments give the same records, bit for bit.  Epochs are counted from 1
and mini-batches (iterations) from 0, in the format hooks, the callbacks and the records alike.
"""

import contextlib
from functools import partial
from typing import Callable

import numpy as np

from .engine import DEFAULTS, SCHEDULES, SGD, Context, Model, softmax_cross_entropy
from .formats.base import Format, RunInfo
from .models import build_model

_F32 = np.float32


def evaluate(model: Model, fmt: Format, x: np.ndarray, y: np.ndarray, batch_size: int) -> float:
    """Accuracy in [0, 1] of ``model`` on (x, y), in mini-batches of ``batch_size``.

    The forward pass goes through the format's stashes and ``fwd`` GEMMs, as in training (a
    format quantizes inference too); no training hook (``begin_step``, ``stash_grad``,
    ``store_weight``, ``end_step``) is called.
    """
    if len(x) == 0:
        return float("nan")
    ctx = Context(fmt, training=False)
    correct = 0
    for i in range(0, len(x), batch_size):
        logits = model.forward(x[i:i + batch_size], ctx)
        correct += int(np.count_nonzero(logits.argmax(axis=1) == y[i:i + batch_size]))
    return correct / len(x)


def _one_blas_thread():
    """A context in which BLAS runs on one thread: the engine's GEMMs are small, and a
    multi-threaded BLAS spends far longer synchronizing its threads than computing (tens of
    times longer on a busy machine).  A no-op without threadpoolctl."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - installed with scikit-learn
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def _finite(model: Model) -> bool:
    return all(np.isfinite(p.value).all() for p in model.params())


def train(model_name: str, fmt_factory: Callable[[RunInfo], Format], data, epochs: int,
          batch_size: int = DEFAULTS["batch_size"], lr: float = DEFAULTS["lr"],
          momentum: float = DEFAULTS["momentum"], weight_decay: float = DEFAULTS["weight_decay"],
          seed: int = DEFAULTS["seed"], on_epoch: Callable | None = None,
          on_batch: Callable | None = None, capture: Callable | None = None,
          schedule: str = DEFAULTS["schedule"], stop_after: int | None = None) -> dict:
    """Train ``model_name`` on ``data`` in one number format.

    Each epoch visits the training set in a new order drawn from ``(seed, epoch)`` (the last
    mini-batch may be smaller), calling the format's hooks in the order of
    :mod:`flows.studies.train.formats.base`, then evaluates the test set through the same
    format.  A non-finite training loss, or non-finite parameters at the end of an epoch, stop
    the run: that epoch is reported as ``diverged_at`` and gets no record.

    Parameters
    ----------
    model_name : str
        One of :data:`MODELS`.
    fmt_factory : callable
        ``fmt_factory(run_info) -> Format``, called once with the run's :class:`RunInfo`.
    data : Dataset
        From :func:`flows.studies.train.data.load_dataset`.
    epochs : int
        Number of epochs (≥ 1).
    batch_size, lr, momentum, weight_decay : float
        Mini-batch size and SGD hyperparameters (:class:`SGD`); defaults in :data:`DEFAULTS`.
        ``lr`` is the initial learning rate.
    seed : int
        Seeds the initialization, the data order and the format (``RunInfo.seed``).
    on_epoch : callable, optional
        ``on_epoch(record)`` after each epoch's record is made.
    on_batch : callable, optional
        ``on_batch(epoch, iteration, iterations, loss)`` after each mini-batch (also the one
        whose loss diverged).
    capture : callable, optional
        ``capture(epoch, iteration, layer, phase, x, y)``, called for every GEMM of each epoch's
        first mini-batch (iteration 0) with the operands exactly as passed to ``fmt.matmul``.
    schedule : str
        The learning-rate schedule, one of :data:`SCHEDULES` (default cosine annealing to 0
        over the run).
    stop_after : int, optional
        Stop after this many epochs (1 to ``epochs``) of the ``epochs``-epoch run: the
        learning-rate schedule and the format's view of the run (``RunInfo.epochs``) stay those
        of the whole run, so its records equal the first ``stop_after`` records of the whole
        run's, bit for bit (a slow format compared with the others at the same epoch).

    Returns
    -------
    dict
        ``epochs``: one record per completed epoch, ``{"epoch", "loss" (mean training loss),
        "train_accuracy" (on the mini-batches as they were trained), "test_accuracy",
        "format" (what ``fmt.end_epoch`` returned)}``; ``final_test_accuracy``: the last
        epoch's test accuracy, None if the run diverged; ``best_epoch``: the epoch with the
        highest test accuracy (the first of equals), None without records; ``diverged_at``: the
        epoch the run diverged in, or None; ``stopped_after``: ``stop_after`` when it ended
        the run before its last epoch, else None; ``format``: ``fmt.summary_record()``.
        Accuracies are fractions in [0, 1].
    """
    if epochs < 1:
        raise ValueError(f"epochs must be at least 1, got {epochs}")
    if stop_after is not None and not 1 <= stop_after <= epochs:
        raise ValueError(f"stop_after must be in 1..{epochs}, got {stop_after}")
    if batch_size < 1:
        raise ValueError(f"batch size must be at least 1, got {batch_size}")
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown learning-rate schedule '{schedule}' "
                         f"(known: {', '.join(SCHEDULES)})")
    rate = SCHEDULES[schedule]
    model = build_model(model_name, data.input_shape, data.classes, seed)
    x_train = np.ascontiguousarray(data.x_train, dtype=_F32)
    y_train = np.asarray(data.y_train, dtype=np.intp)
    x_test = np.ascontiguousarray(data.x_test, dtype=_F32)
    y_test = np.asarray(data.y_test, dtype=np.intp)
    n = len(x_train)
    iterations = -(-n // batch_size)
    fmt = fmt_factory(RunInfo(layers=model.infos, epochs=epochs, iterations=iterations,
                              seed=seed))
    opt = SGD(lr, momentum, weight_decay)
    params = model.params()
    records: list[dict] = []
    diverged_at = None
    # a diverging low-precision run overflows on purpose; it is reported through diverged_at
    with _one_blas_thread(), np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for epoch in range(1, (stop_after or epochs) + 1):
            order = np.random.default_rng((seed, epoch)).permutation(n)
            loss_sum, correct = 0.0, 0
            for it in range(iterations):
                idx = order[it * batch_size:(it + 1) * batch_size]
                xb, yb = x_train[idx], y_train[idx]
                fmt.begin_step(epoch, it)
                cap = partial(capture, epoch, it) if capture is not None and it == 0 else None
                ctx = Context(fmt, training=True, capture=cap)
                logits = model.forward(xb, ctx)
                loss, dlogits = softmax_cross_entropy(logits, yb)
                if not np.isfinite(loss):
                    diverged_at = epoch
                    if on_batch is not None:
                        on_batch(epoch, it, iterations, loss)
                    break
                loss_sum += loss * len(idx)
                correct += int(np.count_nonzero(logits.argmax(axis=1) == yb))
                model.backward(dlogits, ctx)
                opt.lr = _F32(rate(lr, (epoch - 1) * iterations + it, epochs * iterations))
                opt.step(params)
                for layer in model.gemm_layers:
                    layer.w.value = fmt.store_weight(layer.w.value, layer.name)
                fmt.end_step(loss)
                if on_batch is not None:
                    on_batch(epoch, it, iterations, loss)
            if diverged_at is not None:
                break
            fmt_record = fmt.end_epoch(epoch)
            if not _finite(model):
                diverged_at = epoch
                break
            record = {"epoch": epoch, "loss": loss_sum / n, "train_accuracy": correct / n,
                      "test_accuracy": evaluate(model, fmt, x_test, y_test, batch_size),
                      "format": fmt_record}
            records.append(record)
            if on_epoch is not None:
                on_epoch(record)
    best = max(records, key=lambda r: r["test_accuracy"], default=None)
    return {
        "epochs": records,
        "final_test_accuracy": (records[-1]["test_accuracy"]
                                if records and diverged_at is None else None),
        "best_epoch": best["epoch"] if best is not None else None,
        "diverged_at": diverged_at,
        "stopped_after": stop_after if stop_after is not None and stop_after < epochs else None,
        "format": fmt.summary_record(),
    }


__all__ = ["evaluate", "train"]

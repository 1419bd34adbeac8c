"""Data sets of ``trainfab train``: the built-in 8x8 digits, or a user's ``.npz`` file.

Without a file, the data set is scikit-learn's handwritten digits (1797 grey-scale 8x8 images,
10 classes, shipped with scikit-learn, no download), as (N, 1, 8, 8) float32 images scaled to
[0, 1].  A user's ``.npz`` holds two arrays:

``x``
    float samples, either images (N, C, H, W) for every model or feature vectors (N, F) for
    ``mlp`` only; no NaN or infinity;
``y``
    integer class labels (N,), from 0; the number of classes is the largest label + 1.

The samples are shuffled with the run's seed and split 80/20 into training and test sets; each
set needs at least 2 samples.  A file that breaks one of these rules is refused with one line
naming the problem (:class:`DatasetError`).
"""

import math
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

#: share of the (shuffled) samples held out as the test set
TEST_FRACTION = 0.2
#: the most classes a data set may have (the output layer has one unit per class)
MAX_CLASSES = 10_000
#: the largest array of a data set file, in bytes as loaded (x as float32)
MAX_ARRAY_BYTES = 8 << 30


class DatasetError(ValueError):
    """A data set that cannot be used; the message is one line naming the problem."""


@dataclass(frozen=True)
class Dataset:
    """A classification data set split into training and test sets.

    Attributes
    ----------
    x_train, x_test : numpy.ndarray
        float32 samples, (N, C, H, W) or (N, F).
    y_train, y_test : numpy.ndarray
        int64 labels in 0 .. classes - 1, shape (N,).
    input_shape : tuple
        One sample's shape: (C, H, W) or (F,).
    classes : int
    name : str
        ``digits`` or the file's stem.
    """

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    input_shape: tuple
    classes: int
    name: str


def _digits():
    try:
        from sklearn.datasets import load_digits
    except ImportError as e:  # pragma: no cover - scikit-learn is a dependency
        raise DatasetError("the built-in digits data set needs scikit-learn "
                           "(pip install scikit-learn), or give an .npz file") from e
    d = load_digits()
    x = (d.images.astype(np.float32) / np.float32(16.0))[:, None, :, :]
    return x, d.target.astype(np.int64)


def _read_npz(path: Path):
    if not path.exists():
        raise DatasetError(f"{path}: no such file")
    if not path.is_file():
        raise DatasetError(f"{path}: not a file")
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError as e:
        raise DatasetError(f"{path}: cannot be read ({e.strerror})") from None
    if head not in (b"PK\x03\x04", b"PK\x05\x06"):
        raise DatasetError(f"{path}: not an .npz archive (NumPy's zip of .npy arrays, as "
                           "numpy.savez writes)")
    _check_sizes(path)
    try:
        f = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise DatasetError(f"{path}: not a readable .npz archive ({first})") from None
    if not isinstance(f, np.lib.npyio.NpzFile):
        raise DatasetError(f"{path}: not an .npz archive (a single .npy array?)")
    with f:
        names = list(f.files)
        for key in ("x", "y"):
            if key not in names:
                raise DatasetError(f"{path}: no array '{key}' (arrays: {', '.join(names) or 'none'}"
                                   "); expected x (samples) and y (labels)")
        try:
            x, y = f["x"], f["y"]
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise DatasetError(f"{path}: unreadable array in the archive ({first})") from None
    return x, y


def _check_sizes(path: Path) -> None:
    """Refuse, before anything is loaded, an array whose header declares more values than its
    member holds, or more than :data:`MAX_ARRAY_BYTES` once loaded."""
    from ... import FlowError
    from ..tensors import _check_fits, _npy_header

    try:
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                if info.filename not in ("x.npy", "y.npy"):
                    continue
                where = f"{path}:{info.filename[:-4]}"
                with archive.open(info) as f:
                    shape, dtype, offset = _npy_header(f, where, ".npy member")
                if dtype.hasobject:
                    raise DatasetError(f"{where}: an object array (pickled Python objects); "
                                       "give x as numbers and y as integer labels")
                count = _check_fits(shape, dtype.itemsize, info.file_size - offset, where,
                                    "member")
                loaded = count * max(dtype.itemsize, 4 if info.filename == "x.npy" else 8)
                if loaded > MAX_ARRAY_BYTES:
                    raise DatasetError(f"{where}: shape {tuple(shape)} is {loaded / 2**30:,.1f} "
                                       f"GiB once loaded; the limit is "
                                       f"{MAX_ARRAY_BYTES / 2**30:g} GiB")
    except FlowError as e:
        raise DatasetError(str(e)) from None
    except (OSError, zipfile.BadZipFile, EOFError, ValueError) as e:
        if isinstance(e, DatasetError):
            raise
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise DatasetError(f"{path}: not a readable .npz archive ({first})") from None


def _check(x: np.ndarray, y: np.ndarray, where: str):
    """Validated (float32 x, int64 y, classes)."""
    if x.dtype.kind not in "fiu":
        raise DatasetError(f"{where}: x must hold real numbers, got dtype {x.dtype}")
    if x.ndim not in (2, 4):
        raise DatasetError(f"{where}: x must be 4-D images (N, C, H, W) or 2-D features (N, F), "
                           f"got shape {x.shape}")
    if min(x.shape[1:]) < 1:
        raise DatasetError(f"{where}: x has an empty sample shape {x.shape[1:]}")
    if y.ndim != 1:
        raise DatasetError(f"{where}: y must be 1-D labels (N,), got shape {y.shape}")
    if len(x) != len(y):
        raise DatasetError(f"{where}: x has {len(x)} samples but y has {len(y)} labels")
    if x.dtype.kind == "f" and not np.isfinite(x).all():
        bad = int(np.count_nonzero(~np.isfinite(x)))
        raise DatasetError(f"{where}: x holds {bad} NaN or infinite value(s)")
    if y.dtype.kind == "f":
        if not np.isfinite(y).all() or (y != np.round(y)).any():
            raise DatasetError(f"{where}: y must be integer class labels, got non-integer values")
    elif y.dtype.kind not in "iu":
        raise DatasetError(f"{where}: y must be integer class labels, got dtype {y.dtype}")
    if len(y) and y.min() < 0:
        raise DatasetError(f"{where}: labels must be in 0 .. classes-1, got a negative label "
                           f"{int(y.min())}")
    if len(y) and int(y.max()) >= MAX_CLASSES:
        raise DatasetError(f"{where}: label {int(y.max())} would make {int(y.max()) + 1:,} "
                           f"classes; labels go from 0 to at most {MAX_CLASSES - 1:,}")
    classes = int(y.max()) + 1 if len(y) else 0
    if len(y) and classes < 2:
        raise DatasetError(f"{where}: every label is 0; a classifier needs at least 2 classes")
    return x.astype(np.float32), y.astype(np.int64), classes


def load_dataset(path: str | Path | None, seed: int, limit: int | None = None) -> Dataset:
    """Load, validate, shuffle and split a data set.

    Parameters
    ----------
    path : str, Path or None
        A ``.npz`` file with arrays ``x`` and ``y``; None for the built-in digits.
    seed : int
        Seeds the shuffle (``np.random.default_rng(seed).permutation``).
    limit : int, optional
        Keep only the first ``limit`` samples of the shuffled data, before the split.

    Returns
    -------
    Dataset
        The last ``ceil(N * TEST_FRACTION)`` shuffled samples form the test set (360 of the
        1797 digits).

    Raises
    ------
    DatasetError
        Missing or unreadable file, missing ``x`` or ``y``, x neither 2-D nor 4-D, lengths that
        differ, NaN or infinite samples, non-integer or negative labels, a bad ``limit``, or
        fewer than 2 samples in the training or test set.
    """
    if path is None:
        x, y = _digits()
        name, where = "digits", "digits"
        classes = 10
    else:
        p = Path(path)
        x, y = _read_npz(p)
        x, y, classes = _check(x, y, str(p))
        name, where = p.stem, str(p)
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, (int, np.integer))
                              or limit < 1):
        raise DatasetError(f"limit must be a positive number of samples, got {limit!r}")
    order = np.random.default_rng(seed).permutation(len(x))
    if limit is not None:
        order = order[:limit]
    x, y = x[order], y[order]
    n_test = math.ceil(len(x) * TEST_FRACTION)
    n_train = len(x) - n_test
    if n_train < 2 or n_test < 2:
        raise DatasetError(f"{where}: {len(x)} samples give {n_train} training and {n_test} test "
                           "samples; each set needs at least 2")
    return Dataset(x_train=np.ascontiguousarray(x[:n_train]), y_train=y[:n_train],
                   x_test=np.ascontiguousarray(x[n_train:]), y_test=y[n_train:],
                   input_shape=tuple(int(s) for s in x.shape[1:]), classes=classes, name=name)


__all__ = ["TEST_FRACTION", "DatasetError", "Dataset", "load_dataset"]

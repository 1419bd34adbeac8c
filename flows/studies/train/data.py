"""Data sets of ``trainfab train``: the built-in 8x8 digits, Fashion-MNIST, a folder of IDX
files, or a user's ``.npz`` file.

``--dataset`` takes (:func:`load_dataset`):

``digits`` (the default)
    scikit-learn's handwritten digits (1797 grey-scale 8x8 images, 10 classes, shipped with
    scikit-learn, no download), shuffled with the run's seed and split 80/20 into training and
    test sets.
``fashion-mnist``
    Zalando's Fashion-MNIST (60,000 training and 10,000 test images of 28x28 pixels, 10
    classes) from the Debian package ``dataset-fashion-mnist``: the four IDX files in
    :data:`FASHION_MNIST_DIR`, with the official split.
a folder
    The same four IDX files (``train-images-idx3-ubyte``, ``train-labels-idx1-ubyte``,
    ``t10k-images-idx3-ubyte``, ``t10k-labels-idx1-ubyte``, each gzipped (``.gz``) or not) in
    another folder, with their split.
a ``.npz`` file with two arrays:
    ``x``, float samples, either images (N, C, H, W) for every model or feature vectors (N, F)
    for ``mlp`` only, no NaN or infinity; ``y``, integer class labels (N,), from 0; the number
    of classes is the largest label + 1.  Shuffled and split 80/20 like the digits.

Images are float32 in [0, 1] (IDX pixels divided by 255).  Each set needs at least 2 samples.
With a sample limit, an official split keeps the first ``ceil(limit · TEST_FRACTION)`` samples
of its shuffled test set and the first ``limit`` minus those of its shuffled training set.  A
data set that breaks one of these rules is refused with one line naming the problem
(:class:`DatasetError`).
"""

import gzip
import math
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

#: share of the (shuffled) samples held out as the test set
TEST_FRACTION = 0.2
#: the most classes a data set may have (the output layer has one unit per class)
MAX_CLASSES = 10_000
#: the largest array of a data set file, in bytes as loaded (x as float32)
MAX_ARRAY_BYTES = 8 << 30
#: where Debian's ``dataset-fashion-mnist`` package puts the Fashion-MNIST IDX files
FASHION_MNIST_DIR = Path("/usr/share/datasets/fashion-mnist")
#: the data sets ``--dataset`` knows by name
NAMES = ("digits", "fashion-mnist")
#: the IDX files of a folder data set: (set, images file, labels file)
IDX_FILES = (("train", "train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
             ("test", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"))


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


def _read_idx(path: Path, ndim: int) -> np.ndarray:
    """An IDX file of unsigned bytes (``.gz`` or plain) with ``ndim`` dimensions, checked:
    magic number, type, dimension count, and exactly as many bytes as its header declares."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise DatasetError(f"{path}: cannot be read ({e.strerror or e})") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (EOFError, OSError, zlib.error) as e:   # gzip.BadGzipFile is an OSError
            raise DatasetError(f"{path}: a damaged or truncated gzip file ({e})") from None
    if len(raw) < 4 or raw[:2] != b"\x00\x00":
        raise DatasetError(f"{path}: not an IDX file (its first bytes are not an IDX magic "
                           "number)")
    if raw[2] != 0x08:
        raise DatasetError(f"{path}: IDX type 0x{raw[2]:02x}; images and labels must be "
                           "unsigned bytes (0x08)")
    if raw[3] != ndim:
        raise DatasetError(f"{path}: {raw[3]} dimensions; expected {ndim} "
                           f"({'images N x rows x columns' if ndim == 3 else 'labels N'})")
    head = 4 + 4 * ndim
    if len(raw) < head:
        raise DatasetError(f"{path}: truncated IDX header ({len(raw)} bytes)")
    shape = tuple(int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim))
    if ndim > 1 and min(shape[1:]) < 1:
        raise DatasetError(f"{path}: images of shape {shape[1:]}; every dimension must be at "
                           "least 1")
    want = math.prod(shape)
    if want > MAX_ARRAY_BYTES // 4:
        raise DatasetError(f"{path}: shape {shape} is too large; the limit is "
                           f"{MAX_ARRAY_BYTES / 2**30:g} GiB once loaded")
    if len(raw) - head != want:
        raise DatasetError(f"{path}: the header declares shape {shape} ({want:,} bytes) but "
                           f"{len(raw) - head:,} bytes follow it (a truncated or damaged file)")
    return np.frombuffer(raw, dtype=np.uint8, offset=head).reshape(shape)


def _idx_file(folder: Path, stem: str) -> Path:
    for name in (stem + ".gz", stem):
        if (folder / name).is_file():
            return folder / name
    raise DatasetError(f"{folder}: no {stem}.gz or {stem}; an IDX data set folder holds "
                       + ", ".join(f"{i}, {lab}" for _, i, lab in IDX_FILES) + " (.gz or not)")


def _read_idx_folder(folder: Path):
    """``{"train": (x, y), "test": (x, y)}`` from a folder's four IDX files: images as
    (N, 1, H, W) float32 in [0, 1], labels as int64."""
    sets = {}
    for which, images, labels in IDX_FILES:
        ipath, lpath = _idx_file(folder, images), _idx_file(folder, labels)
        x, y = _read_idx(ipath, 3), _read_idx(lpath, 1)
        if len(x) != len(y):
            raise DatasetError(f"{folder}: {ipath.name} holds {len(x):,} images but {lpath.name} "
                               f"{len(y):,} labels")
        sets[which] = (x[:, None, :, :].astype(np.float32) / np.float32(255.0), y)
    shapes = {x.shape[1:] for x, _ in sets.values()}
    if len(shapes) > 1:
        raise DatasetError(f"{folder}: training and test images differ in size "
                           f"({' and '.join(str(s[1:]) for s in sorted(shapes))})")
    return sets


def _fashion_mnist():
    if not FASHION_MNIST_DIR.is_dir():
        raise DatasetError("fashion-mnist needs the Debian package dataset-fashion-mnist "
                           "(apt-get install dataset-fashion-mnist, or make setup); or give "
                           "--dataset DIR with its four IDX files")
    return _read_idx_folder(FASHION_MNIST_DIR)


def _check_limit(limit) -> None:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, (int, np.integer))
                              or limit < 1):
        raise DatasetError(f"limit must be a positive number of samples, got {limit!r}")


def _source(dataset):
    """``(kind, path, name)``: what ``--dataset`` names (module docstring)."""
    if dataset is None or dataset == "digits":
        return "digits", None, "digits"
    if dataset == "fashion-mnist":
        return "idx", FASHION_MNIST_DIR, "fashion-mnist"
    p = Path(dataset)
    if p.is_dir():
        return "idx", p, p.resolve().name or str(p)
    if p.suffix == ".npz" or p.exists() or "/" in str(dataset):
        return "npz", p, p.stem
    raise DatasetError(f"unknown data set {dataset!r}: give {', '.join(NAMES)}, a folder of "
                       "IDX files or an .npz file")


def load_dataset(dataset: str | Path | None, seed: int, limit: int | None = None) -> Dataset:
    """Load, validate, shuffle and (unless the data set has its own) split a data set.

    Parameters
    ----------
    dataset : str, Path or None
        ``digits`` (or None), ``fashion-mnist``, a folder of IDX files, or a ``.npz`` file with
        arrays ``x`` and ``y`` (module docstring).
    seed : int
        Seeds the shuffles (``np.random.default_rng(seed).permutation``).
    limit : int, optional
        Keep only ``limit`` samples: of the shuffled data before an 80/20 split, or spread over
        an official split (module docstring).

    Returns
    -------
    Dataset
        With an 80/20 split, the last ``ceil(N * TEST_FRACTION)`` shuffled samples form the test
        set (360 of the 1797 digits).

    Raises
    ------
    DatasetError
        An unknown name; a missing package, folder or file; an unreadable, truncated or damaged
        file; missing ``x`` or ``y``, x neither 2-D nor 4-D, lengths that differ, NaN or
        infinite samples, non-integer or negative labels; a bad ``limit``; fewer than 2 samples
        in the training or test set.
    """
    kind, path, name = _source(dataset)
    _check_limit(limit)
    if kind == "idx":
        sets = _fashion_mnist() if dataset == "fashion-mnist" else _read_idx_folder(path)
        return _official_split(sets, seed, limit, str(path), name)
    if kind == "digits":
        x, y = _digits()
        where, classes = "digits", 10
    else:
        x, y = _read_npz(path)
        x, y, classes = _check(x, y, str(path))
        where = str(path)
    order = np.random.default_rng(seed).permutation(len(x))
    if limit is not None:
        order = order[:limit]
    x, y = x[order], y[order]
    n_test = math.ceil(len(x) * TEST_FRACTION)
    return _dataset(x[:len(x) - n_test], y[:len(x) - n_test], x[len(x) - n_test:],
                    y[len(x) - n_test:], classes, name, where)


def _official_split(sets: dict, seed: int, limit, where: str, name: str) -> Dataset:
    (xtr, ytr), (xte, yte) = sets["train"], sets["test"]
    classes = int(max(ytr.max(initial=0), yte.max(initial=0))) + 1
    if classes < 2:
        raise DatasetError(f"{where}: every label is 0; a classifier needs at least 2 classes")
    rng = np.random.default_rng(seed)
    tr, te = rng.permutation(len(xtr)), rng.permutation(len(xte))
    if limit is not None:
        n_test = math.ceil(limit * TEST_FRACTION)
        tr, te = tr[:limit - n_test], te[:n_test]
    return _dataset(xtr[tr], ytr[tr].astype(np.int64), xte[te], yte[te].astype(np.int64),
                    classes, name, where)


def _dataset(x_train, y_train, x_test, y_test, classes, name, where) -> Dataset:
    if len(x_train) < 2 or len(x_test) < 2:
        raise DatasetError(f"{where}: {len(x_train) + len(x_test)} samples give {len(x_train)} "
                           f"training and {len(x_test)} test samples; each set needs at least 2")
    return Dataset(x_train=np.ascontiguousarray(x_train), y_train=y_train,
                   x_test=np.ascontiguousarray(x_test), y_test=y_test,
                   input_shape=tuple(int(s) for s in x_train.shape[1:]), classes=classes,
                   name=name)


__all__ = ["TEST_FRACTION", "FASHION_MNIST_DIR", "NAMES", "DatasetError", "Dataset", "load_dataset"]

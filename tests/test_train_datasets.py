"""Named and IDX data sets of ``trainfab train``: Fashion-MNIST's official split, folders of IDX
files (gzipped or not), and one-line refusals of damaged files, unknown names and a missing
Debian package, with nothing written and an earlier run's results kept."""

import gzip
import json
import struct

import numpy as np
import pytest

import flows.studies.train.data as data
from flows.cli import main
from flows.studies.train.data import DatasetError, load_dataset

STEMS = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
         "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}


def idx_bytes(arr: np.ndarray) -> bytes:
    """An IDX file of unsigned bytes, as the format defines it: two zero bytes, type 0x08, the
    dimension count, each dimension as a big-endian 32-bit integer, then the values."""
    arr = np.asarray(arr, dtype=np.uint8)
    return (bytes([0, 0, 0x08, arr.ndim]) + b"".join(struct.pack(">I", d) for d in arr.shape)
            + arr.tobytes())


def idx_folder(folder, n_train=30, n_test=12, size=(5, 4), gz=True, seed=0):
    """A folder of four IDX files with random pixels and labels 0..2; returns the arrays."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    arrays = {}
    for which, n in (("train", n_train), ("test", n_test)):
        x = rng.integers(0, 256, (n, *size), dtype=np.uint8)
        y = (np.arange(n) % 3).astype(np.uint8)
        arrays[which] = (x, y)
        for stem, arr in zip(STEMS[which], (x, y)):
            raw = idx_bytes(arr)
            (folder / (stem + ".gz" if gz else stem)).write_bytes(gzip.compress(raw) if gz
                                                                  else raw)
    return arrays


@pytest.mark.parametrize("gz", [True, False])
def test_a_folder_of_idx_files_keeps_its_split(tmp_path, gz):
    arrays = idx_folder(tmp_path / "set", gz=gz)
    d = load_dataset(str(tmp_path / "set"), 3)
    assert d.name == "set" and d.classes == 3 and d.input_shape == (1, 5, 4)
    assert d.x_train.shape == (30, 1, 5, 4) and d.x_test.shape == (12, 1, 5, 4)
    assert d.x_train.dtype == np.float32 and d.y_train.dtype == np.int64
    # the official split: the training set is exactly the training file's images, shuffled
    order = np.random.default_rng(3).permutation(30)
    x, y = arrays["train"]
    np.testing.assert_array_equal(d.x_train[:, 0] * 255, x[order].astype(np.float32))
    np.testing.assert_array_equal(d.y_train, y[order])
    assert sorted(map(tuple, (d.x_test[:, 0] * 255).reshape(12, -1).astype(int).tolist())) == \
        sorted(map(tuple, arrays["test"][0].reshape(12, -1).astype(int).tolist()))
    assert d.x_train.max() <= 1 and d.x_train.min() >= 0


def test_a_limit_takes_a_fifth_from_the_test_set(tmp_path):
    idx_folder(tmp_path / "set")
    d = load_dataset(tmp_path / "set", 0, limit=11)
    assert (len(d.x_train), len(d.x_test)) == (8, 3)
    with pytest.raises(DatasetError, match="each set needs at least 2"):
        load_dataset(tmp_path / "set", 0, limit=3)


def _damage(folder, kind):
    f = folder / "train-images-idx3-ubyte.gz"
    raw = gzip.decompress(f.read_bytes())
    if kind == "truncated-gzip":
        f.write_bytes(gzip.compress(raw)[:-30])
    elif kind == "short-data":
        f.write_bytes(gzip.compress(raw[:-7]))
    elif kind == "long-data":
        f.write_bytes(gzip.compress(raw + b"\0"))
    elif kind == "magic":
        f.write_bytes(gzip.compress(b"\x01" + raw[1:]))
    elif kind == "type":
        f.write_bytes(gzip.compress(raw[:2] + b"\x0d" + raw[3:]))
    elif kind == "dims":
        f.write_bytes(gzip.compress(idx_bytes(np.zeros((30, 20), np.uint8))))
    elif kind == "header":
        f.write_bytes(gzip.compress(raw[:9]))
    elif kind == "crc":
        damaged = bytearray(gzip.compress(raw))
        damaged[-6] ^= 0xFF
        f.write_bytes(bytes(damaged))
    elif kind == "empty-images":
        f.write_bytes(gzip.compress(idx_bytes(np.zeros((30, 0, 4), np.uint8))))
    elif kind == "count":
        (folder / "train-labels-idx1-ubyte.gz").write_bytes(
            gzip.compress(idx_bytes(np.zeros(29, np.uint8))))
    elif kind == "sizes":
        f.write_bytes(gzip.compress(idx_bytes(np.zeros((30, 6, 4), np.uint8))))
    elif kind == "missing":
        f.unlink()
    elif kind == "one-class":
        for stem in ("train-labels-idx1-ubyte.gz", "t10k-labels-idx1-ubyte.gz"):
            n = 30 if stem.startswith("train") else 12
            (folder / stem).write_bytes(gzip.compress(idx_bytes(np.zeros(n, np.uint8))))


DAMAGE = [
    ("truncated-gzip", "damaged or truncated gzip"),
    ("short-data", "declares shape (30, 5, 4) (600 bytes) but 593 bytes follow"),
    ("long-data", "but 601 bytes follow"),
    ("magic", "not an IDX file"),
    ("type", "IDX type 0x0d"),
    ("dims", "2 dimensions; expected 3"),
    ("header", "truncated IDX header"),
    ("crc", "damaged or truncated gzip file (CRC check failed)"),
    ("empty-images", "images of shape (0, 4); every dimension must be at least 1"),
    ("count", "30 images but train-labels-idx1-ubyte.gz 29 labels"),
    ("sizes", "training and test images differ in size"),
    ("missing", "no train-images-idx3-ubyte.gz or train-images-idx3-ubyte"),
    ("one-class", "at least 2 classes"),
]


@pytest.mark.parametrize("kind, message", DAMAGE)
def test_damaged_idx_files_are_one_line_errors(tmp_path, kind, message):
    idx_folder(tmp_path / "set")
    _damage(tmp_path / "set", kind)
    with pytest.raises(DatasetError, match=message.replace("(", r"\(").replace(")", r"\)")) as e:
        load_dataset(tmp_path / "set", 0)
    assert "\n" not in str(e.value)


def test_unknown_names_and_a_missing_package(monkeypatch):
    with pytest.raises(DatasetError, match="unknown data set 'cifar10': give digits, "
                                           "fashion-mnist, a folder of IDX files or an .npz"):
        load_dataset("cifar10", 0)
    monkeypatch.setattr(data, "FASHION_MNIST_DIR", data.Path("/nonexistent/fashion-mnist"))
    with pytest.raises(DatasetError, match="needs the Debian package dataset-fashion-mnist"):
        load_dataset("fashion-mnist", 0)


@pytest.mark.skipif(not data.FASHION_MNIST_DIR.is_dir(),
                    reason="the Debian package dataset-fashion-mnist is not installed")
def test_fashion_mnist_from_the_debian_package():
    d = load_dataset("fashion-mnist", 0)
    assert d.name == "fashion-mnist" and d.classes == 10 and d.input_shape == (1, 28, 28)
    assert len(d.x_train) == 60_000 and len(d.x_test) == 10_000
    # the published class balance: 6,000 training and 1,000 test images per class
    assert np.bincount(d.y_train).tolist() == [6000] * 10
    assert np.bincount(d.y_test).tolist() == [1000] * 10
    assert d.x_train.dtype == np.float32 and d.x_train.max() == 1 and d.x_train.min() == 0


@pytest.mark.parametrize("kind, message", [
    ("truncated-gzip", "damaged or truncated gzip"),
    ("short-data", "declares shape (30, 8, 8) (1,920 bytes) but 1,913 bytes follow"),
    ("unknown", "unknown data set"),
])
def test_the_cli_refuses_a_bad_data_set_and_keeps_the_last_run(tmp_path, capsys, kind, message):
    out = tmp_path / "out"
    idx_folder(tmp_path / "set", size=(8, 8))
    args = ["train", "--model", "cnn", "--formats", "fp32", "--epochs", "1", "-o", str(out)]
    assert main([*args, "--dataset", str(tmp_path / "set")]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    assert json.loads(before["train.json"])["config"]["dataset"] == "set"
    capsys.readouterr()
    if kind == "unknown":
        dataset = "fashion_mnist"
    else:
        _damage(tmp_path / "set", kind)
        dataset = str(tmp_path / "set")
    assert main([*args, "--dataset", dataset]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and message in err, err
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    assert not list(tmp_path.glob("out.failed*"))

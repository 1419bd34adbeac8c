"""The NumPy training engine of ``trainfab train``: every layer's backward pass against central
finite differences, FP32 accuracy on the digits, determinism, the order of the format hooks, the
GEMM operands a format sees, divergence, and the data-set checks."""

import numpy as np
import pytest

from flows.studies.train.data import DatasetError, load_dataset
from flows.studies.train.engine import (
    DEFAULTS, PACT, AvgPool2d, Context, Conv2d, Flatten, GELU, Linear, MaxPool2d, ReLU,
    softmax_cross_entropy)
from flows.studies.train.loop import train
from flows.studies.train.models import MODELS, build_model
from flows.studies.train.formats import FORMATS
from flows.studies.train.formats.base import Format, RunInfo

RUN = RunInfo(layers=(), epochs=1, iterations=1, seed=0)


class F64(Format):
    """Float64 GEMMs, so that finite differences are accurate to ~1e-9."""

    def matmul(self, x, y, phase, layer):
        return np.matmul(x, y)


def _ctx(training=True):
    return Context(F64(RUN), training=training)


def grad_error(analytic, numeric) -> float:
    """Largest absolute difference relative to the largest numeric gradient entry."""
    analytic, numeric = np.asarray(analytic, np.float64), np.asarray(numeric, np.float64)
    assert analytic.shape == numeric.shape
    scale = max(float(np.abs(numeric).max()), 1e-12)
    return float(np.abs(analytic - numeric).max()) / scale


def close(analytic, numeric) -> bool:
    return grad_error(analytic, numeric) < 1e-6


def assert_grad(analytic, numeric):
    """The gradient matches, and the same comparison rejects one 10 % off."""
    assert close(analytic, numeric), grad_error(analytic, numeric)
    assert not close(1.1 * np.asarray(analytic), numeric)


def numeric_grad(f, x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """Central differences of the scalar f() with respect to x (perturbed in place)."""
    g = np.zeros_like(x, dtype=np.float64)
    flat, gflat = x.reshape(-1), g.reshape(-1)
    for i in range(flat.size):
        old = flat[i]
        flat[i] = old + eps
        up = f()
        flat[i] = old - eps
        down = f()
        flat[i] = old
        gflat[i] = (up - down) / (2 * eps)
    return g


def check_layer(layer, x, params=(), training=False):
    """Check dx and the gradients of the named parameter arrays of ``layer`` (float64).  The
    finite differences take the evaluation forward, or with ``training`` the training forward
    (batch normalization: batch statistics in training, running ones in evaluation)."""
    rng = np.random.default_rng(1)
    out = layer.forward(x, _ctx())
    r = rng.standard_normal(out.shape)
    gx = layer.backward(r, _ctx())
    grads = {p.name: p.grad for p in layer.params()}

    def loss():
        return float(np.sum(layer.forward(x, _ctx(training=training)) * r))

    assert_grad(gx, numeric_grad(loss, x))
    for p in layer.params():
        if p.name.split(".")[-1] in params:
            assert_grad(grads[p.name], numeric_grad(loss, p.value))


def _f64(layer):
    for p in layer.params():
        p.value = np.asarray(p.value, dtype=np.float64)
    return layer


def test_grad_error_rejects_wrong_gradients():
    g = np.array([1.0, -2.0, 3.0])
    assert close(g, g + 1e-9)
    assert not close(1.1 * g, g)
    assert not close(g[::-1], g)


def test_linear_gradients():
    rng = np.random.default_rng(0)
    layer = _f64(Linear("fc", rng.standard_normal((5, 3)), rng.standard_normal(3)))
    check_layer(layer, rng.standard_normal((4, 5)), params=("weight", "bias"))


@pytest.mark.parametrize("stride,padding", [(1, 1), (2, 0), (1, 0)])
def test_conv_gradients(stride, padding):
    rng = np.random.default_rng(0)
    c, k, oc = 2, 3, 3
    layer = _f64(Conv2d("conv", rng.standard_normal((c * k * k, oc)), rng.standard_normal(oc),
                        c, k, stride, padding))
    check_layer(layer, rng.standard_normal((2, c, 5, 5)), params=("weight", "bias"))


def test_conv_forward_matches_direct_convolution():
    rng = np.random.default_rng(2)
    n, c, h, w, k, oc, p = 2, 3, 6, 5, 3, 4, 1
    wm = rng.standard_normal((c * k * k, oc))
    b = rng.standard_normal(oc)
    x = rng.standard_normal((n, c, h, w))
    y = Conv2d("conv", wm, b, c, k, 1, p).forward(x, _ctx())
    kern = wm.T.reshape(oc, c, k, k)
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
    ref = np.zeros((n, oc, h, w))
    for i in range(h):
        for j in range(w):
            ref[:, :, i, j] = np.einsum("nckl,ockl->no", xp[:, :, i:i + k, j:j + k], kern) + b
    np.testing.assert_allclose(y, ref, rtol=1e-12, atol=1e-12)


def test_relu_gelu_flatten_gradients():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 7))
    x[np.abs(x) < 1e-3] = 0.5  # the kink of ReLU
    check_layer(ReLU(), x.copy())
    check_layer(GELU(), x.copy())
    check_layer(Flatten(), rng.standard_normal((2, 3, 2, 2)))


def test_gelu_is_the_tanh_approximation():
    x = np.array([-3.0, -1.0, 0.0, 0.5, 2.0])
    ref = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    np.testing.assert_allclose(GELU().forward(x, _ctx()), ref, rtol=1e-12)


@pytest.mark.parametrize("pool", [MaxPool2d, AvgPool2d])
@pytest.mark.parametrize("size", [4, 5])
def test_pool_gradients(pool, size):
    rng = np.random.default_rng(0)
    # distinct values: a window's maximum does not change under a 1e-6 perturbation
    x = rng.permutation(2 * 3 * size * size).reshape(2, 3, size, size) / 10.0
    check_layer(pool(2), x)


def test_pool_forward():
    x = np.arange(16.0).reshape(1, 1, 4, 4)
    np.testing.assert_array_equal(MaxPool2d(2).forward(x, _ctx())[0, 0], [[5, 7], [13, 15]])
    np.testing.assert_array_equal(AvgPool2d(2).forward(x, _ctx())[0, 0],
                                  [[2.5, 4.5], [10.5, 12.5]])


def _pact_input(alpha, rng):
    x = rng.uniform(-2, alpha + 2, size=(4, 9))
    # away from the clip edges, where the derivative jumps
    x[np.abs(x) < 0.05] = 0.3
    x[np.abs(x - alpha) < 0.05] = alpha + 0.3
    return x


def test_pact_clip_gradients():
    """Without quantization PACT is clip(x, 0, α): dx and dα are its true derivatives."""
    rng = np.random.default_rng(0)
    layer = _f64(PACT("act", alpha=2.0, bits=None))
    x = _pact_input(2.0, rng)
    assert (x >= 2.0).any() and ((x > 0) & (x < 2.0)).any() and (x < 0).any()
    check_layer(layer, x, params=("alpha",))


def test_pact_quantized_forward_and_straight_through_backward():
    rng = np.random.default_rng(1)
    alpha, bits = 2.0, 4
    x = _pact_input(alpha, rng)
    q, ref = _f64(PACT("act", alpha, bits)), _f64(PACT("ref", alpha, None))
    y = q.forward(x, _ctx())
    step = alpha / (2 ** bits - 1)
    levels = y / step
    np.testing.assert_allclose(levels, np.round(levels), atol=1e-9)
    assert y.min() >= 0 and y.max() <= alpha + 1e-12
    assert np.abs(y - np.clip(x, 0, alpha)).max() <= step / 2 + 1e-12
    assert len(np.unique(np.round(levels))) > 8
    # the rounding passes gradients straight through: the backward pass is the clip's
    g = rng.standard_normal(y.shape)
    ref.forward(x, _ctx())
    np.testing.assert_array_equal(q.backward(g, _ctx()), ref.backward(g, _ctx()))
    assert q.alpha.grad == pytest.approx(g[x >= alpha].sum())
    np.testing.assert_array_equal(q.alpha.grad, ref.alpha.grad)


def test_softmax_cross_entropy():
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((5, 4)) * 3
    labels = np.array([0, 3, 1, 1, 2])
    loss, d = softmax_cross_entropy(logits, labels)
    p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    assert loss == pytest.approx(-np.log(p[np.arange(5), labels]).mean(), rel=1e-12)
    assert_grad(d, numeric_grad(lambda: softmax_cross_entropy(logits, labels)[0], logits))
    # logits whose exponential overflows (e^1000 in float64, e^200 in float32): shifted by their
    # maximum first, nothing does
    big, dbig = softmax_cross_entropy(logits + 1000, labels)
    assert big == pytest.approx(loss, rel=1e-9) and np.allclose(dbig, d, atol=1e-9)
    big, dbig = softmax_cross_entropy((logits + 200).astype(np.float32), labels)
    assert big == pytest.approx(loss, rel=1e-4)
    assert dbig.dtype == np.float32 and np.allclose(dbig, d, atol=1e-4)


def test_float32_throughout():
    data = load_dataset(None, 0, limit=40)
    for name in MODELS:
        # lenet's two 5x5 convolutions and poolings need 12x12: the digits padded
        x = data.x_train[:8] if name != "lenet" else np.pad(data.x_train[:8],
                                                            ((0, 0), (0, 0), (2, 2), (2, 2)))
        model = build_model(name, x.shape[1:], data.classes, 0)
        ctx = Context(Format(RUN))
        logits = model.forward(x, ctx)
        assert logits.dtype == np.float32
        _, d = softmax_cross_entropy(logits, data.y_train[:8])
        model.backward(d, ctx)
        assert all(p.value.dtype == np.float32 and p.grad.dtype == np.float32
                   for p in model.params())


def test_models_layers_and_errors():
    m = build_model("mlp", (1, 8, 8), 10, 0)
    assert [(i.name, i.kind, i.weight_shape) for i in m.infos] == [
        ("fc1", "linear", (64, 256)), ("fc2", "linear", (256, 128)), ("fc3", "linear", (128, 10))]
    for name in ("cnn", "cnn-q4"):
        m = build_model(name, (1, 8, 8), 10, 0)
        assert [(i.name, i.kind, i.weight_shape) for i in m.infos] == [
            ("conv1", "conv", (9, 16)), ("conv2", "conv", (144, 32)), ("fc", "linear", (128, 10))]
    assert sum(isinstance(l, PACT) for l in build_model("cnn-q4", (1, 8, 8), 10, 0).layers) == 2
    with pytest.raises(ValueError, match="unknown model 'vgg'.*mlp, cnn, cnn-q4, lenet, resnet"):
        build_model("vgg", (1, 8, 8), 10, 0)
    with pytest.raises(ValueError, match="needs image data"):
        build_model("cnn", (64,), 10, 0)
    assert build_model("mlp", (64,), 10, 0).infos[0].weight_shape == (64, 256)
    assert FORMATS["fp32"] is Format


@pytest.fixture(scope="module")
def digits():
    return load_dataset(None, DEFAULTS["seed"])


@pytest.fixture(scope="module")
def small():
    return load_dataset(None, 0, limit=200)


@pytest.mark.parametrize("model,target", [("mlp", 0.95), ("cnn", 0.95), ("cnn-q4", 0.90)])
def test_fp32_accuracy_on_digits(digits, model, target):
    seen = []
    r = train(model, Format, digits, DEFAULTS["epochs"], on_epoch=seen.append)
    assert r["diverged_at"] is None
    assert [e["epoch"] for e in r["epochs"]] == list(range(1, DEFAULTS["epochs"] + 1))
    assert seen == r["epochs"]
    assert r["final_test_accuracy"] == r["epochs"][-1]["test_accuracy"] >= target
    assert r["epochs"][-1]["loss"] < r["epochs"][0]["loss"]
    assert r["epochs"][-1]["train_accuracy"] > 0.97
    best = max(e["test_accuracy"] for e in r["epochs"])
    assert r["epochs"][r["best_epoch"] - 1]["test_accuracy"] == best


def test_result_keys(small):
    r = train("mlp", Format, small, 1)
    assert set(r) == {"epochs", "final_test_accuracy", "best_epoch", "diverged_at",
                      "stopped_after", "format"}
    assert set(r["epochs"][0]) == {"epoch", "loss", "train_accuracy", "test_accuracy", "format"}
    assert r["format"] == {} and r["epochs"][0]["format"] == {}


@pytest.mark.parametrize("model", ["mlp", "cnn-q4"])
def test_deterministic(small, model):
    a = train(model, Format, small, 2, seed=3)
    assert a == train(model, Format, small, 2, seed=3)
    assert a != train(model, Format, small, 2, seed=4)


def test_stop_after_equals_the_first_epochs_of_the_whole_run(small):
    """A format stopped early follows the whole run's schedule: its records are the whole
    run's first ones, bit for bit (FAST's width schedule reads the run's length too)."""
    from flows.studies.train.formats import FORMATS

    for fmt in (Format, FORMATS["fast"]):
        whole = train("mlp", fmt, small, 3, seed=2)
        part = train("mlp", fmt, small, 3, seed=2, stop_after=2)
        assert part["epochs"] == whole["epochs"][:2] and part["stopped_after"] == 2
        assert whole["stopped_after"] is None
        assert train("mlp", fmt, small, 3, seed=2, stop_after=3) == whole
    # a shorter run is another schedule: its second epoch differs
    assert train("mlp", Format, small, 2, seed=2)["epochs"] != whole["epochs"][:2]
    for bad in (0, 4):
        with pytest.raises(ValueError, match="stop_after must be in 1..3"):
            train("mlp", Format, small, 3, stop_after=bad)


class Recording(Format):
    """FP32 that logs every hook call and checks the GEMMs use the stashed tensors."""

    def __init__(self, run):
        super().__init__(run)
        self.log = []
        self.stashed = {}
        self.infos = {i.name: i for i in run.layers}

    def begin_step(self, epoch, iteration):
        super().begin_step(epoch, iteration)
        self.log.append(("begin_step", epoch, iteration))

    def stash(self, x, kind, layer):
        assert x.dtype == np.float32
        self.log.append(("stash", kind, layer))
        self.stashed[kind, layer] = x.copy()
        return self.stashed[kind, layer]

    def matmul(self, x, y, phase, layer):
        assert x.dtype == y.dtype == np.float32 and x.ndim == y.ndim == 2
        k, m = self.infos[layer].weight_shape
        w, a = self.stashed["weight", layer], self.stashed["activation", layer]
        rows = a.shape[0]
        if phase == "fwd":
            assert x is a and y is w and x.shape == (rows, k) and y.shape == (k, m)
        elif phase == "bwd_data":
            assert y.base is w and x.shape == (rows, m) and y.shape == (m, k)
        else:
            assert x.base is a and x.shape == (k, rows) and y.shape == (rows, m)
        self.log.append(("matmul", phase, layer, x.shape, y.shape))
        self.last_operands = (x, y)
        return super().matmul(x, y, phase, layer)

    def stash_grad(self, g, kind, layer):
        shape = self.stashed[kind, layer].shape
        assert g.shape == shape and g.dtype == np.float32
        self.log.append(("stash_grad", kind, layer))
        return g

    def store_weight(self, w, layer):
        assert w.shape == self.infos[layer].weight_shape and w.dtype == np.float32
        self.log.append(("store_weight", layer))
        return w

    def end_step(self, loss):
        assert np.isfinite(loss)
        self.log.append(("end_step",))

    def end_epoch(self, epoch):
        self.log.append(("end_epoch", epoch))
        return {"calls": len(self.log)}

    def summary_record(self):
        self.log.append(("summary",))
        return {"layers": sorted(self.infos)}


def _expected_log(infos, epochs, n_train, n_test, batch, rows_per_sample):
    """The hook sequence of base.py for a whole run."""
    names = [i.name for i in infos]
    shape = {i.name: i.weight_shape for i in infos}

    def fwd(nb):
        out = []
        for l in names:
            k, m = shape[l]
            r = nb * rows_per_sample[l]
            out += [("stash", "weight", l), ("stash", "activation", l),
                    ("matmul", "fwd", l, (r, k), (k, m))]
        return out

    log = []
    iterations = -(-n_train // batch)
    for e in range(1, epochs + 1):
        for it in range(iterations):
            nb = min(batch, n_train - it * batch)
            log += [("begin_step", e, it)] + fwd(nb)
            for l in reversed(names):
                k, m = shape[l]
                r = nb * rows_per_sample[l]
                log += [("matmul", "bwd_data", l, (r, m), (m, k)),
                        ("matmul", "wgrad", l, (k, r), (r, m)),
                        ("stash_grad", "weight", l), ("stash_grad", "activation", l)]
            log += [("store_weight", l) for l in names] + [("end_step",)]
        log.append(("end_epoch", e))
        for i in range(0, n_test, batch):
            log += fwd(min(batch, n_test - i))
    return log + [("summary",)]


@pytest.mark.parametrize("model,rows", [
    ("mlp", {"fc1": 1, "fc2": 1, "fc3": 1}),
    ("cnn", {"conv1": 64, "conv2": 16, "fc": 1}),
    ("cnn-q4", {"conv1": 64, "conv2": 16, "fc": 1})])
def test_hook_order_and_gemm_shapes(small, model, rows):
    fmts, captured, batches = [], [], []

    def factory(run):
        assert run.epochs == 2 and run.iterations == 3 and run.seed == 5
        fmts.append(Recording(run))
        return fmts[-1]

    def capture(epoch, iteration, layer, phase, x, y):
        captured.append((epoch, iteration, layer, phase, x.shape, y.shape, x.copy(), y.copy()))

    r = train(model, factory, small, 2, batch_size=64, seed=5, capture=capture,
              on_batch=lambda *a: batches.append(a))
    fmt, = fmts
    infos = fmt.run.layers
    assert [i.name for i in infos] == list(rows)
    assert fmt.log == _expected_log(infos, 2, len(small.x_train), len(small.x_test), 64, rows)
    assert r["format"] == {"layers": sorted(rows)}
    assert [e["format"] for e in r["epochs"]] == [
        {"calls": fmt.log.index(("end_epoch", e)) + 1} for e in (1, 2)]
    assert [b[:3] for b in batches] == [(e, i, 3) for e in (1, 2) for i in range(3)]
    # the capture sees every GEMM of each epoch's first mini-batch, in order
    first = [(e, 0, m[2], m[1], m[3], m[4]) for e in (1, 2)
             for m in _expected_log(infos, 1, 64, 0, 64, rows) if m[0] == "matmul"]
    assert [c[:6] for c in captured] == first
    assert len(captured) == 2 * 3 * len(infos)
    assert all(c[6].dtype == c[7].dtype == np.float32 for c in captured)


def test_capture_gets_the_matmul_operands(small):
    seen = []

    class Check(Format):
        def matmul(self, x, y, phase, layer):
            if self.iteration == 0:
                assert seen[-1][:2] == (phase, layer) and seen[-1][2] is x and seen[-1][3] is y
            return super().matmul(x, y, phase, layer)

    def capture(epoch, iteration, layer, phase, x, y):
        seen.append((phase, layer, x, y))

    train("cnn", Check, small, 1, capture=capture)
    assert len(seen) == 9


class NaNFrom(Format):
    """FP32 until epoch 2, then every GEMM returns NaN."""

    calls = []

    def matmul(self, x, y, phase, layer):
        out = super().matmul(x, y, phase, layer)
        return out * np.float32("nan") if self.epoch >= 2 else out

    def end_epoch(self, epoch):
        NaNFrom.calls.append(epoch)
        return {}


def test_divergence_stops_the_run(small):
    NaNFrom.calls = []
    losses = []
    r = train("cnn", NaNFrom, small, 4, on_batch=lambda e, i, n, loss: losses.append((e, loss)))
    assert r["diverged_at"] == 2
    assert [e["epoch"] for e in r["epochs"]] == [1]
    assert r["final_test_accuracy"] is None and r["best_epoch"] == 1
    assert NaNFrom.calls == [1]
    assert losses[-1][0] == 2 and np.isnan(losses[-1][1])
    assert all(np.isfinite(l) for e, l in losses[:-1])


def test_non_finite_weights_count_as_divergence(small):
    class BadStore(Format):
        def store_weight(self, w, layer):
            last = self.iteration == self.run.iterations - 1
            return w * np.float32("inf") if self.epoch == 3 and last else w

    r = train("mlp", BadStore, small, 5)
    assert r["diverged_at"] == 3 and len(r["epochs"]) == 2


def test_train_refuses_bad_arguments(small):
    with pytest.raises(ValueError, match="unknown model"):
        train("vgg", Format, small, 1)
    with pytest.raises(ValueError, match="epochs"):
        train("mlp", Format, small, 0)
    with pytest.raises(ValueError, match="schedule"):
        train("mlp", Format, small, 1, schedule="step")


# ------------------------------------------------------------------------------------------------
# data sets


def test_digits():
    d = load_dataset(None, 0)
    assert d.name == "digits" and d.classes == 10 and d.input_shape == (1, 8, 8)
    assert d.x_train.shape == (1437, 1, 8, 8) and d.x_test.shape == (360, 1, 8, 8)
    assert d.x_train.dtype == np.float32 and 0 <= d.x_train.min() and d.x_train.max() == 1
    assert set(np.unique(d.y_train)) == set(range(10))
    again, other = load_dataset(None, 0), load_dataset(None, 1)
    np.testing.assert_array_equal(d.x_train, again.x_train)
    assert not np.array_equal(d.y_train, other.y_train)
    lim = load_dataset(None, 0, limit=200)
    assert (len(lim.x_train), len(lim.x_test)) == (160, 40)
    np.testing.assert_array_equal(lim.x_train, d.x_train[:160])


def test_user_npz(tmp_path):
    rng = np.random.default_rng(0)
    f = tmp_path / "blobs.npz"
    y = np.arange(60) % 3
    np.savez(f, x=(rng.standard_normal((60, 6)) + y[:, None] * 3).astype(np.float32), y=y)
    d = load_dataset(f, 0)
    assert d.name == "blobs" and d.classes == 3 and d.input_shape == (6,)
    assert (len(d.x_train), len(d.x_test)) == (48, 12)
    assert train("mlp", Format, d, 5)["final_test_accuracy"] > 0.9
    with pytest.raises(ValueError, match="needs image data"):
        train("cnn", Format, d, 1)
    g = tmp_path / "img.npz"
    np.savez(g, x=rng.random((20, 2, 8, 8)), y=(np.arange(20) % 2).astype(np.float64))
    d = load_dataset(g, 0)
    assert d.input_shape == (2, 8, 8) and d.y_train.dtype == np.int64
    assert train("cnn", Format, d, 1)["epochs"][0]["epoch"] == 1


def _bad(tmp_path, name="bad.npz", **arrays):
    p = tmp_path / name
    np.savez(p, **arrays)
    return p


def test_dataset_errors(tmp_path):
    x = np.zeros((20, 4), np.float32)
    y = np.arange(20) % 2
    txt = tmp_path / "notes.npz"
    txt.write_text("not an archive\n")
    npy = tmp_path / "x.npy"
    np.save(npy, x)
    nan, inf = x.copy(), x.copy()
    nan[3, 1] = np.nan
    inf[0, 0] = np.inf
    cases = [
        (tmp_path / "missing.npz", "no such file"),
        (txt, "not an .npz archive"),
        (npy, "not an .npz archive"),
        (_bad(tmp_path, "nox.npz", y=y), "no array 'x'"),
        (_bad(tmp_path, "noy.npz", x=x, labels=y), r"no array 'y' \(arrays: x, labels\)"),
        (_bad(tmp_path, "x3d.npz", x=np.zeros((20, 4, 4)), y=y), "4-D images .* or 2-D"),
        (_bad(tmp_path, "len.npz", x=x, y=y[:-1]), "20 samples but y has 19"),
        (_bad(tmp_path, "nan.npz", x=nan, y=y), "1 NaN or infinite"),
        (_bad(tmp_path, "inf.npz", x=inf, y=y), "NaN or infinite"),
        (_bad(tmp_path, "frac.npz", x=x, y=y + 0.5), "integer class labels"),
        (_bad(tmp_path, "str.npz", x=x, y=np.array(["a", "b"] * 10)), "integer class labels"),
        (_bad(tmp_path, "neg.npz", x=x, y=y - 1), "negative label -1"),
        (_bad(tmp_path, "one.npz", x=x, y=np.zeros(20, int)), "at least 2 classes"),
        (_bad(tmp_path, "few.npz", x=x[:5], y=y[:5]), "4 training and 1 test"),
        (_bad(tmp_path, "obj.npz", x=np.array([[1, "a"]] * 20, dtype=object), y=y),
         "an object array"),
    ]
    for path, message in cases:
        with pytest.raises(DatasetError, match=message) as e:
            load_dataset(path, 0)
        assert "\n" not in str(e.value), str(e.value)
        assert isinstance(e.value, ValueError)
    with pytest.raises(DatasetError, match="limit"):
        load_dataset(None, 0, limit=0)
    with pytest.raises(DatasetError, match="each set needs at least 2"):
        load_dataset(None, 0, limit=5)


def test_sgd_momentum_and_decay_on_weights_only():
    from flows.studies.train.engine import SGD, Param
    w = Param("fc.weight", np.array([1.0, -2.0], np.float32), decay=True)
    b = Param("fc.bias", np.array([1.0], np.float32), decay=False)
    a = Param("act.alpha", np.array(6.0, np.float32), decay=False)
    opt = SGD(lr=0.5, momentum=0.9, weight_decay=0.1)
    for p in (w, b, a):
        p.grad = np.zeros_like(p.value)
    opt.step([w, b, a])
    np.testing.assert_array_equal(w.value, np.float32([1 - 0.05, -2 + 0.1]))
    assert b.value[0] == 1 and a.value == 6
    w.grad = np.zeros(2, np.float32)
    b.grad = np.ones(1, np.float32)
    opt.step([w, b, a])
    # v = 0.9 v + (g + 0.1 w), w -= 0.5 v
    v = 0.9 * np.float32([0.1, -0.2]) + 0.1 * np.float32([0.95, -1.9])
    np.testing.assert_allclose(w.value, np.float32([0.95, -1.9]) - 0.5 * v, rtol=1e-6)
    assert b.value[0] == pytest.approx(0.5) and w.value.dtype == np.float32


# ------------------------------------------------------------------------------------------------
# residual models: batch normalization, residual blocks, global average pooling


def test_batch_norm_gradients_and_statistics():
    from flows.studies.train.blocks import BatchNorm2d

    rng = np.random.default_rng(0)
    bn = _f64(BatchNorm2d("bn", 3))
    bn.gamma.value = rng.standard_normal(3)
    bn.beta.value = rng.standard_normal(3)
    x = 2 + 3 * rng.standard_normal((4, 3, 3, 2))
    check_layer(bn, x, params=("gamma", "beta"), training=True)
    # the training output is normalized per channel; evaluation uses the running estimates
    bn2 = BatchNorm2d("bn2", 3)
    y = bn2.forward(x.astype(np.float32), _ctx())
    np.testing.assert_allclose(y.mean(axis=(0, 2, 3)), 0, atol=1e-5)
    np.testing.assert_allclose(y.std(axis=(0, 2, 3)), 1, atol=1e-3)
    n = x.size // 3
    np.testing.assert_allclose(bn2.mean, 0.1 * x.mean(axis=(0, 2, 3)), rtol=1e-5)
    np.testing.assert_allclose(bn2.var, 0.9 + 0.1 * x.var(axis=(0, 2, 3)) * n / (n - 1),
                               rtol=1e-5)
    ev = bn2.forward(x.astype(np.float32), _ctx(training=False))
    want = (x - bn2.mean[None, :, None, None]) / np.sqrt(bn2.var[None, :, None, None] + 1e-5)
    np.testing.assert_allclose(ev, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("down", [False, True])
def test_residual_block_gradients(down):
    from flows.studies.train.blocks import GlobalAvgPool, Residual

    rng = np.random.default_rng(3)
    c, oc = 2, 3 if down else 2
    main = [_f64(Conv2d("a", rng.standard_normal((c * 9, oc)), rng.standard_normal(oc), c, 3,
                        2 if down else 1, 1)), ReLU(),
            _f64(Conv2d("b", rng.standard_normal((oc * 9, oc)), rng.standard_normal(oc), oc, 3,
                        1, 1))]
    short = ([_f64(Conv2d("d", rng.standard_normal((c, oc)), rng.standard_normal(oc), c, 1, 2,
                          0))] if down else [])
    block = Residual("blk", main, short)
    assert block.sublayers() == main + short
    check_layer(block, rng.standard_normal((2, c, 5, 5)))
    check_layer(GlobalAvgPool(), rng.standard_normal((2, 3, 4, 5)))
    # the block is the sum of its branches
    x = rng.standard_normal((2, c, 5, 5))
    y, s = x, x
    for layer in main:
        y = layer.forward(y, _ctx())
    for layer in short:
        s = layer.forward(s, _ctx())
    np.testing.assert_allclose(block.forward(x, _ctx()), y + s)


def test_lenet_and_resnet_shapes():
    from flows.studies.train.models import gemm_shapes

    lenet = gemm_shapes("lenet", (1, 28, 28), 10)
    assert [(g["layer"], g["rows"], g["K"], g["N"]) for g in lenet] == [
        ("conv1", 784, 25, 6), ("conv2", 100, 150, 16), ("fc1", 1, 400, 120),
        ("fc2", 1, 120, 84), ("fc3", 1, 84, 10)]
    assert sum(p.value.size for p in build_model("lenet", (1, 28, 28), 10, 0).params()) == 61_706
    resnet = gemm_shapes("resnet", (1, 28, 28), 10)
    ks = [g["K"] for g in resnet]
    # ResNet-18's reductions: 9 C for C = 64, 128, 256, most GEMMs at K >= 576
    assert sorted(set(k for k in ks if k >= 576)) == [576, 1152, 2304]
    assert sum(k >= 576 for k in ks) == 12 and len(ks) == 16
    model = build_model("resnet", (1, 28, 28), 10, 0)
    assert [i.name for i in model.infos] == [g["layer"] for g in resnet]
    with pytest.raises(ValueError, match="at least 12x12"):
        build_model("lenet", (1, 8, 8), 10, 0)


def test_resnet_trains_on_digits():
    """A few epochs of the residual model on digits in FP32 learn (batch norm, blocks, the
    nested layers' parameters all updated)."""
    data = load_dataset(None, 0, limit=300)
    res = train("resnet", Format, data, 3, batch_size=32, seed=0)
    assert res["diverged_at"] is None and res["final_test_accuracy"] > 0.5

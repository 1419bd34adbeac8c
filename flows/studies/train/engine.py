"""The layers of the NumPy training engine of ``trainfab train``.

A model is a sequence of layers with a float32 forward and backward pass; a layer may hold
layers of its own (a residual block).  Every GEMM of the three training phases of a layer with
weights (``fwd``, ``bwd_data``, ``wgrad``) goes through the number format's
:meth:`~flows.studies.train.formats.base.Format.matmul`, and the tensors kept between passes go
through its storage hooks, in the order given in :mod:`flows.studies.train.formats.base`;
everything else (bias additions, activations, pooling, batch normalization, the loss and the
optimizer) is FP32.  A convolution is one GEMM on its im2col matrix, so a format sees 2-D
operands only.  Every layer with weights runs all three GEMMs, the first layer's data gradient
included, so that a format sees the complete set of GEMMs of a training iteration.

The models are built in :mod:`flows.studies.train.models` (residual blocks and batch
normalization in :mod:`flows.studies.train.blocks`); :func:`flows.studies.train.loop.train`
trains one in one format.
"""
from typing import Callable

import numpy as np

from .formats.base import Format, LayerInfo

#: the hyperparameters ``trainfab train`` uses unless told otherwise; with them every model
#: reaches its accuracy on the digits data set in a few seconds of FP32 training
DEFAULTS = {
    "epochs": 10,
    "batch_size": 32,
    "lr": 0.05,
    "momentum": 0.9,
    "weight_decay": 5e-4,
    "schedule": "cosine",
    "seed": 0,
}

#: learning-rate schedules: the rate of mini-batch t of T (counted over the whole run, from 0)
SCHEDULES = {
    "constant": lambda lr, t, total: lr,
    # cosine annealing from lr to 0 (Loshchilov and Hutter): the last epochs take small steps,
    # so the final accuracy does not depend on where in an oscillation the run stops
    "cosine": lambda lr, t, total: lr * 0.5 * (1.0 + np.cos(np.pi * t / total)),
}

#: PACT's defaults in ``cnn-q4``: activation bits and the clip level α it starts from
PACT_BITS = 4
PACT_ALPHA = 6.0

_F32 = np.float32


# ------------------------------------------------------------------------------------------------
# parameters and the GEMM context


class Param:
    """A trainable tensor, its gradient and whether weight decay applies to it.

    Parameters
    ----------
    name : str
        ``<layer>.weight``, ``<layer>.bias`` or ``<layer>.alpha``.
    value : numpy.ndarray
        The tensor (float32 in training).
    decay : bool
        True for GEMM weights; biases and PACT clip levels are not decayed.
    """

    def __init__(self, name: str, value: np.ndarray, decay: bool):
        self.name = name
        self.value = value
        self.grad: np.ndarray | None = None
        self.decay = decay


class Context:
    """What a layer's forward and backward pass need from the run: the number format, whether
    the pass trains (keeps what the backward pass reads), and an optional operand capture.

    Parameters
    ----------
    fmt : Format
        The number format every weight-layer GEMM and stash goes through.
    training : bool
        False in evaluation: nothing is kept for a backward pass.
    capture : callable, optional
        ``capture(layer, phase, x, y)``, called with both operands of every GEMM, exactly as
        they are passed to ``fmt.matmul``.
    """

    def __init__(self, fmt: Format, training: bool = True, capture: Callable | None = None):
        self.fmt = fmt
        self.training = training
        self.capture = capture

    def matmul(self, x: np.ndarray, y: np.ndarray, phase: str, layer: str) -> np.ndarray:
        """``fmt.matmul(x, y, phase, layer)``, shown to the capture first."""
        if self.capture is not None:
            self.capture(layer, phase, x, y)
        return self.fmt.matmul(x, y, phase, layer)


# ------------------------------------------------------------------------------------------------
# layers


class Layer:
    """A layer without weights: ``forward`` maps the input to the output, ``backward`` the
    output's gradient to the input's (using what ``forward`` kept in training)."""

    name = ""

    def params(self) -> list[Param]:
        return []

    def sublayers(self) -> list["Layer"]:
        """The layers this one runs (a block's); none for a plain layer."""
        return []

    def forward(self, x: np.ndarray, ctx: Context) -> np.ndarray:
        raise NotImplementedError

    def backward(self, g: np.ndarray, ctx: Context) -> np.ndarray:
        raise NotImplementedError


class _GemmLayer(Layer):
    """A layer whose weight is the right operand (K, M) of one GEMM per phase."""

    kind = ""

    def __init__(self, name: str, w: np.ndarray, b: np.ndarray):
        self.name = name
        self.w = Param(f"{name}.weight", w, decay=True)
        self.b = Param(f"{name}.bias", b, decay=False)
        self._a = self._wq = None

    @property
    def info(self) -> LayerInfo:
        return LayerInfo(self.name, self.kind, tuple(self.w.value.shape))

    def params(self) -> list[Param]:
        return [self.w, self.b]

    def _gemm_forward(self, a: np.ndarray, ctx: Context) -> np.ndarray:
        """``stash(w) ; stash(a) ; fwd GEMM`` plus the bias: (N, K) → (N, M)."""
        fmt = ctx.fmt
        w_used = fmt.stash(self.w.value, "weight", self.name)
        a_used = fmt.stash(a, "activation", self.name)
        y = ctx.matmul(a_used, w_used, "fwd", self.name)
        if ctx.training:
            self._a, self._wq = a_used, w_used
        return y + self.b.value

    def _gemm_backward(self, g: np.ndarray, ctx: Context) -> np.ndarray:
        """Both backward GEMMs of an (N, M) output gradient; sets the weight and bias gradients
        and returns the (N, K) gradient of the GEMM's left operand."""
        fmt = ctx.fmt
        g_a = ctx.matmul(g, self._wq.T, "bwd_data", self.name)
        g_w = ctx.matmul(self._a.T, g, "wgrad", self.name)
        self.w.grad = fmt.stash_grad(g_w, "weight", self.name)
        g_a = fmt.stash_grad(g_a, "activation", self.name)
        self.b.grad = g.sum(axis=0, dtype=g.dtype)
        self._a = self._wq = None
        return g_a


class Linear(_GemmLayer):
    """Fully connected layer ``y = x @ W + b``.

    Parameters
    ----------
    name : str
        Unique layer name (``fc1``, …).
    w : numpy.ndarray
        Weights, shape (in, out) = (K, M).
    b : numpy.ndarray
        Bias, shape (out,), added in FP32 after the GEMM.
    """

    kind = "linear"

    def forward(self, x, ctx):
        """(N, K) → (N, M)."""
        return self._gemm_forward(x, ctx)

    def backward(self, g, ctx):
        """(N, M) → (N, K); the bias gradient is the float32 sum of ``g`` over the batch."""
        return self._gemm_backward(g, ctx)


_IM2COL_CACHE: dict = {}


def _conv_geometry(h: int, w: int, kh: int, kw: int, stride: int, padding: int):
    oh = (h + 2 * padding - kh) // stride + 1
    ow = (w + 2 * padding - kw) // stride + 1
    if oh < 1 or ow < 1:
        raise ValueError(f"a {kh}x{kw} kernel with padding {padding} does not fit a {h}x{w} input")
    return oh, ow


def _im2col_index(c: int, hp: int, wp: int, kh: int, kw: int, stride: int, oh: int, ow: int):
    """Flat indices into one padded (C, Hp, Wp) image, shape (OH*OW, C*kh*kw): row = output
    position, column = (channel, kernel row, kernel column), the weight matrix's row order."""
    key = (c, hp, wp, kh, kw, stride, oh, ow)
    idx = _IM2COL_CACHE.get(key)
    if idx is None:
        ci, ki, kj = np.meshgrid(np.arange(c), np.arange(kh), np.arange(kw), indexing="ij")
        col = (ci * hp * wp + ki * wp + kj).reshape(-1)
        oi, oj = np.meshgrid(np.arange(oh) * stride, np.arange(ow) * stride, indexing="ij")
        row = (oi * wp + oj).reshape(-1)
        idx = (row[:, None] + col[None, :]).astype(np.intp)
        _IM2COL_CACHE[key] = idx
    return idx


class Conv2d(_GemmLayer):
    """2-D convolution as one GEMM on the im2col matrix.

    Input (N, C, H, W) is unfolded into A of shape (N*OH*OW, C*kh*kw), multiplied by the weight
    matrix W (C*kh*kw, OC), and the product (N*OH*OW, OC) is folded back to (N, OC, OH, OW).  The
    format's activation stash sees the im2col matrix A, the operand of the GEMM.

    Parameters
    ----------
    name : str
        Unique layer name (``conv1``, …).
    w : numpy.ndarray
        Weight matrix, shape (C*kh*kw, OC), rows ordered channel-major then kernel row, column.
    b : numpy.ndarray
        Bias, shape (OC,).
    in_channels, kernel : int
        C and the square kernel size kh = kw.
    stride, padding : int
        Stride and zero padding on each side.
    """

    kind = "conv"

    def __init__(self, name, w, b, in_channels: int, kernel: int = 3, stride: int = 1,
                 padding: int = 1):
        if w.shape[0] != in_channels * kernel * kernel:
            raise ValueError(f"{name}: weight rows {w.shape[0]} != C*kh*kw "
                             f"{in_channels * kernel * kernel}")
        super().__init__(name, w, b)
        self.c, self.k, self.stride, self.padding = in_channels, kernel, stride, padding
        self._shape = None

    def _unfold(self, x):
        n, c, h, w = x.shape
        p, k = self.padding, self.k
        oh, ow = _conv_geometry(h, w, k, k, self.stride, p)
        xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p))) if p else x
        idx = _im2col_index(c, h + 2 * p, w + 2 * p, k, k, self.stride, oh, ow)
        cols = xp.reshape(n, -1)[:, idx]
        return cols.reshape(n * oh * ow, c * k * k), oh, ow

    def forward(self, x, ctx):
        """(N, C, H, W) → (N, OC, OH, OW)."""
        if x.ndim != 4 or x.shape[1] != self.c:
            raise ValueError(f"{self.name}: expects (N, {self.c}, H, W) input, got {x.shape}")
        n = x.shape[0]
        cols, oh, ow = self._unfold(x)
        if ctx.training:
            self._shape = x.shape
        y = self._gemm_forward(cols, ctx)
        return y.reshape(n, oh, ow, -1).transpose(0, 3, 1, 2)

    def backward(self, g, ctx):
        """(N, OC, OH, OW) → (N, C, H, W): the im2col gradient is summed back onto the padded
        input (one strided slice per kernel position), then the padding is cut off."""
        n, oc, oh, ow = g.shape
        g2 = g.transpose(0, 2, 3, 1).reshape(n * oh * ow, oc)
        g_cols = self._gemm_backward(g2, ctx)
        _, c, h, w = self._shape
        k, s, p = self.k, self.stride, self.padding
        g6 = g_cols.reshape(n, oh, ow, c, k, k)
        gxp = np.zeros((n, c, h + 2 * p, w + 2 * p), dtype=g_cols.dtype)
        for i in range(k):
            for j in range(k):
                gxp[:, :, i:i + s * (oh - 1) + 1:s, j:j + s * (ow - 1) + 1:s] += (
                    g6[:, :, :, :, i, j].transpose(0, 3, 1, 2))
        self._shape = None
        return gxp[:, :, p:p + h, p:p + w] if p else gxp


class ReLU(Layer):
    """``max(x, 0)``; the gradient passes where x > 0."""

    def __init__(self):
        self._mask = None

    def forward(self, x, ctx):
        if ctx.training:
            self._mask = x > 0
        return np.maximum(x, 0)

    def backward(self, g, ctx):
        g = g * self._mask
        self._mask = None
        return g


_GELU_C = np.sqrt(2.0 / np.pi)


class GELU(Layer):
    """GELU in its tanh approximation (Hendrycks and Gimpel):
    ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``; the backward pass differentiates this
    approximation exactly."""

    def __init__(self):
        self._x = None

    def forward(self, x, ctx):
        c = x.dtype.type(_GELU_C)
        t = np.tanh(c * (x + x.dtype.type(0.044715) * x * x * x))
        if ctx.training:
            self._x, self._t = x, t
        return x.dtype.type(0.5) * x * (1 + t)

    def backward(self, g, ctx):
        x, t = self._x, self._t
        d = x.dtype.type
        du = d(_GELU_C) * (1 + d(3 * 0.044715) * x * x)
        grad = d(0.5) * (1 + t) + d(0.5) * x * (1 - t * t) * du
        self._x = self._t = None
        return g * grad


def _pool_windows(x, k):
    """(N, C, H, W) → (N, C, H//k, W//k, k*k) windows; rows and columns past the last whole
    window are dropped, as in the usual floor-mode pooling."""
    n, c, h, w = x.shape
    oh, ow = h // k, w // k
    if oh < 1 or ow < 1:
        raise ValueError(f"a {k}x{k} pooling window does not fit a {h}x{w} input")
    xc = x[:, :, :oh * k, :ow * k]
    return xc.reshape(n, c, oh, k, ow, k).transpose(0, 1, 2, 4, 3, 5).reshape(n, c, oh, ow, k * k)


def _unpool(gw, shape, k):
    """Inverse of :func:`_pool_windows` for gradients: (N, C, OH, OW, k*k) → (N, C, H, W), zero
    on the dropped rows and columns."""
    n, c, oh, ow, _ = gw.shape
    g = gw.reshape(n, c, oh, ow, k, k).transpose(0, 1, 2, 4, 3, 5).reshape(n, c, oh * k, ow * k)
    if g.shape == tuple(shape):
        return g
    out = np.zeros(shape, dtype=gw.dtype)
    out[:, :, :oh * k, :ow * k] = g
    return out


class MaxPool2d(Layer):
    """Max pooling with a k x k window and stride k; the gradient goes to the first maximum of
    each window."""

    def __init__(self, kernel: int = 2):
        self.k = kernel
        self._arg = None

    def forward(self, x, ctx):
        win = _pool_windows(x, self.k)
        arg = win.argmax(axis=-1)
        if ctx.training:
            self._arg, self._shape = arg, x.shape
        return np.take_along_axis(win, arg[..., None], axis=-1)[..., 0]

    def backward(self, g, ctx):
        gw = np.zeros(g.shape + (self.k * self.k,), dtype=g.dtype)
        np.put_along_axis(gw, self._arg[..., None], g[..., None], axis=-1)
        self._arg = None
        return _unpool(gw, self._shape, self.k)


class AvgPool2d(Layer):
    """Average pooling with a k x k window and stride k."""

    def __init__(self, kernel: int = 2):
        self.k = kernel

    def forward(self, x, ctx):
        if ctx.training:
            self._shape = x.shape
        return _pool_windows(x, self.k).mean(axis=-1, dtype=x.dtype)

    def backward(self, g, ctx):
        kk = self.k * self.k
        gw = np.broadcast_to((g / g.dtype.type(kk))[..., None], g.shape + (kk,))
        return _unpool(gw, self._shape, self.k)


class Flatten(Layer):
    """(N, ...) → (N, F)."""

    def forward(self, x, ctx):
        if ctx.training:
            self._shape = x.shape
        return x.reshape(x.shape[0], -1)

    def backward(self, g, ctx):
        return g.reshape(self._shape)


class PACT(Layer):
    """PACT activation (Choi et al., 2018): ``y = clip(x, 0, α)`` with a learned clip level α,
    quantized to ``2**bits - 1`` uniform steps of α / (2**bits - 1).

    Backward, with the straight-through estimator for the rounding: ``dx = g`` where
    0 ≤ x < α (0 elsewhere) and ``dα = sum(g where x ≥ α)``, as in the paper.

    Parameters
    ----------
    name : str
        Unique name; the clip level is the parameter ``<name>.alpha`` (no weight decay).
    alpha : float
        Initial clip level.
    bits : int or None
        Activation bits; None clips without quantizing.
    """

    def __init__(self, name: str, alpha: float = PACT_ALPHA, bits: int | None = PACT_BITS):
        self.name = name
        self.alpha = Param(f"{name}.alpha", np.array(alpha, dtype=_F32), decay=False)
        self.bits = bits
        self._x = None

    def params(self):
        return [self.alpha]

    def forward(self, x, ctx):
        a = self.alpha.value.astype(x.dtype)
        y = np.clip(x, 0, a)
        if self.bits is not None:
            levels = x.dtype.type(2 ** self.bits - 1)
            step = a / levels
            # a non-positive α (a diverging run) has no steps: everything clips to 0
            y = np.round(y / step) * step if step > 0 else np.zeros_like(y)
        if ctx.training:
            self._x = x
        return y

    def backward(self, g, ctx):
        x, a = self._x, self.alpha.value.astype(g.dtype)
        above = x >= a
        self.alpha.grad = np.asarray(g[above].sum(dtype=g.dtype), dtype=self.alpha.value.dtype)
        self._x = None
        return g * ((x >= 0) & ~above)


def softmax_cross_entropy(logits: np.ndarray, labels: np.ndarray) -> tuple[float, np.ndarray]:
    """Mean softmax cross-entropy of a batch and its gradient.

    Parameters
    ----------
    logits : numpy.ndarray
        Shape (N, classes).
    labels : numpy.ndarray
        Integer class labels, shape (N,).

    Returns
    -------
    loss : float
        Mean over the batch of ``logsumexp(logits) - logits[label]`` (the logits are shifted by
        their row maximum first, so large logits do not overflow).
    dlogits : numpy.ndarray
        ``(softmax(logits) - onehot(labels)) / N``, shape and dtype of ``logits``.
    """
    n = logits.shape[0]
    z = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(z)
    s = e.sum(axis=1, keepdims=True)
    rows = np.arange(n)
    logp = z[rows, labels] - np.log(s[:, 0])
    loss = float(-np.mean(logp, dtype=np.float64))
    d = e / s
    d[rows, labels] -= 1
    return loss, d / d.dtype.type(n)


# ------------------------------------------------------------------------------------------------
# model, initialization, optimizer


class Model:
    """A sequence of layers.

    Attributes
    ----------
    name : str
        The model name given to :func:`flows.studies.train.models.build_model`.
    layers : list of Layer
    gemm_layers : list
        The layers with weights (Linear, Conv2d), in forward order, those inside blocks
        included.
    infos : tuple of LayerInfo
        What a format knows about those layers.
    """

    def __init__(self, name: str, layers: list[Layer]):
        self.name = name
        self.layers = layers
        every = list(walk(layers))
        self.gemm_layers = [l for l in every if isinstance(l, _GemmLayer)]
        names = [l.name for l in every if l.name]
        if len(names) != len(set(names)):
            raise ValueError(f"duplicate layer names in {names}")
        self.infos = tuple(l.info for l in self.gemm_layers)
        self._params = [p for l in every for p in l.params()]

    def params(self) -> list[Param]:
        return self._params

    def forward(self, x: np.ndarray, ctx: Context) -> np.ndarray:
        """Input batch → logits (N, classes)."""
        for layer in self.layers:
            x = layer.forward(x, ctx)
        return x

    def backward(self, g: np.ndarray, ctx: Context) -> np.ndarray:
        """dlogits → gradient of the input; sets every parameter's ``grad``."""
        for layer in reversed(self.layers):
            g = layer.backward(g, ctx)
        return g


def walk(layers):
    """Every layer of ``layers`` and, after each, the layers it holds, in forward order."""
    for layer in layers:
        yield layer
        yield from walk(layer.sublayers())


def kaiming_uniform(rng: np.random.Generator, fan_in: int, shape: tuple) -> np.ndarray:
    """He initialization for ReLU networks, uniform form: U(-b, b), b = sqrt(6 / fan_in)."""
    bound = np.sqrt(6.0 / fan_in)
    return rng.uniform(-bound, bound, size=shape).astype(_F32)


class SGD:
    """SGD with momentum and L2 weight decay (on GEMM weights only), PyTorch's form:
    ``v = momentum v + (grad + weight_decay w)`` and ``w = w - lr v``, in float32."""

    def __init__(self, lr: float, momentum: float = 0.9, weight_decay: float = 0.0):
        self.lr, self.momentum, self.weight_decay = _F32(lr), _F32(momentum), _F32(weight_decay)
        self._v: dict[int, np.ndarray] = {}

    def step(self, params: list[Param]) -> None:
        for p in params:
            g = p.grad.astype(_F32, copy=False)
            if p.decay and self.weight_decay:
                g = g + self.weight_decay * p.value
            v = self._v.get(id(p))
            v = g if v is None else self.momentum * v + g
            self._v[id(p)] = v
            # a new array: the format may still hold the one it was given
            p.value = (p.value - self.lr * v).astype(_F32, copy=False)


__all__ = ["DEFAULTS", "SCHEDULES", "PACT_ALPHA", "PACT_BITS", "Param", "Context", "Layer",
           "Linear", "Conv2d", "ReLU", "GELU", "MaxPool2d", "AvgPool2d", "Flatten", "PACT",
           "softmax_cross_entropy", "Model", "walk", "kaiming_uniform", "SGD"]

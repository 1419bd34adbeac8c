"""The layers of the residual models: batch normalization, residual blocks and global average
pooling, all FP32 (the papers keep batch normalization in FP32; only the convolutions' GEMMs go
through the number format)."""

import numpy as np

from .engine import Context, Layer, Param

_F32 = np.float32


class BatchNorm2d(Layer):
    """Batch normalization over (N, H, W) per channel (Ioffe and Szegedy), FP32.

    Training normalizes with the batch's mean and (biased) variance and updates running
    estimates, ``r = (1 - momentum) r + momentum * batch`` (the unbiased variance, as PyTorch
    keeps it); evaluation normalizes with the running estimates.  ``y = γ x̂ + β`` with learned
    ``γ`` (from 1) and ``β`` (from 0), neither weight-decayed.

    Parameters
    ----------
    name : str
        Unique name; the parameters are ``<name>.gamma`` and ``<name>.beta``.
    channels : int
    momentum, eps : float
    """

    def __init__(self, name: str, channels: int, momentum: float = 0.1, eps: float = 1e-5):
        self.name = name
        self.gamma = Param(f"{name}.gamma", np.ones(channels, _F32), decay=False)
        self.beta = Param(f"{name}.beta", np.zeros(channels, _F32), decay=False)
        self.mean = np.zeros(channels, _F32)
        self.var = np.ones(channels, _F32)
        self.momentum, self.eps = _F32(momentum), _F32(eps)
        self._xhat = self._inv = None

    def params(self):
        return [self.gamma, self.beta]

    def forward(self, x, ctx: Context):
        """(N, C, H, W) → (N, C, H, W)."""
        shape = (1, -1, 1, 1)
        if ctx.training:
            mean = x.mean(axis=(0, 2, 3), dtype=x.dtype)
            var = x.var(axis=(0, 2, 3), dtype=x.dtype)
            n = x.size // x.shape[1]
            m = self.momentum
            self.mean = ((1 - m) * self.mean + m * mean).astype(_F32)
            self.var = ((1 - m) * self.var + m * var * _F32(n / max(n - 1, 1))).astype(_F32)
        else:
            mean, var = self.mean.astype(x.dtype), self.var.astype(x.dtype)
        inv = 1 / np.sqrt(var + x.dtype.type(self.eps))
        xhat = (x - mean.reshape(shape)) * inv.reshape(shape)
        if ctx.training:
            self._xhat, self._inv = xhat, inv
        return self.gamma.value.reshape(shape) * xhat + self.beta.value.reshape(shape)

    def backward(self, g, ctx: Context):
        """The batch-statistics gradient: ``dx = γ/σ (g - mean(g) - x̂ mean(g x̂))`` per
        channel."""
        xhat, inv = self._xhat, self._inv
        shape = (1, -1, 1, 1)
        self.gamma.grad = (g * xhat).sum(axis=(0, 2, 3), dtype=g.dtype)
        self.beta.grad = g.sum(axis=(0, 2, 3), dtype=g.dtype)
        gm = g.mean(axis=(0, 2, 3), dtype=g.dtype).reshape(shape)
        gxm = (g * xhat).mean(axis=(0, 2, 3), dtype=g.dtype).reshape(shape)
        self._xhat = self._inv = None
        return (self.gamma.value * inv).reshape(shape) * (g - gm - xhat * gxm)


class Residual(Layer):
    """``y = main(x) + shortcut(x)``: two sequences of layers on one input, their outputs
    added (an empty shortcut is the identity); the gradient goes back through both and the
    two input gradients are added.

    Parameters
    ----------
    name : str
        Unique name of the block.
    main, shortcut : list of Layer
    """

    def __init__(self, name: str, main: list[Layer], shortcut: list[Layer] = ()):
        self.name = name
        self.main, self.shortcut = list(main), list(shortcut)

    def sublayers(self):
        return [*self.main, *self.shortcut]

    def forward(self, x, ctx: Context):
        y, s = x, x
        for layer in self.main:
            y = layer.forward(y, ctx)
        for layer in self.shortcut:
            s = layer.forward(s, ctx)
        return y + s

    def backward(self, g, ctx: Context):
        gm, gs = g, g
        for layer in reversed(self.main):
            gm = layer.backward(gm, ctx)
        for layer in reversed(self.shortcut):
            gs = layer.backward(gs, ctx)
        return gm + gs


class GlobalAvgPool(Layer):
    """(N, C, H, W) → (N, C): the mean of each channel over the image."""

    def forward(self, x, ctx: Context):
        if ctx.training:
            self._shape = x.shape
        return x.mean(axis=(2, 3), dtype=x.dtype)

    def backward(self, g, ctx: Context):
        n, c, h, w = self._shape
        return np.broadcast_to((g / g.dtype.type(h * w))[:, :, None, None], self._shape).copy()


__all__ = ["BatchNorm2d", "Residual", "GlobalAvgPool"]

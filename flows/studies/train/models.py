"""The models of ``trainfab train`` (:data:`MODELS`, :func:`build_model`).

``mlp``
    flattened input → 256 → 128 → classes, ReLU (64-256-128-10 on 8x8 digits).
``cnn``
    two stages of 3x3 convolution (padding 1) + ReLU + 2x2 max pooling, 16 and 32 channels, then
    a linear classifier.
``cnn-q4``
    ``cnn`` with each ReLU replaced by PACT: activations clipped to a learned [0, α] and
    quantized to 4 bits.
``lenet``
    LeNet-5 (LeCun et al., 1998) with ReLU and max pooling: 5x5 convolution to 6 channels
    (padding 2) + 2x2 pooling, 5x5 convolution to 16 channels + 2x2 pooling, then 120 → 84 →
    classes.  On 28x28 Fashion-MNIST: 61,706 parameters, 0.42 million MACs per image.
``resnet``
    A ResNet for 28x28 images in the shape of ResNet-18's layers: a 3x3 stem convolution to 64
    channels with stride 2 (28x28 → 14x14), then three stages of two basic blocks (two 3x3
    convolutions with batch normalization, an identity or 1x1-convolution shortcut) at 64, 128
    and 256 channels (14x14, 7x7, 4x4), global average pooling and a linear head.  Its 3x3
    convolutions reduce over ``K = 9 C`` = 576, 1,152 and 2,304, ResNet-18's values; 12 of its
    16 GEMMs have ``K >= 576`` (:func:`gemm_shapes`): 88 million MACs per image forward, 2.78
    million parameters.  Batch normalization is FP32, as in the papers.
"""

import numpy as np

from .blocks import BatchNorm2d, GlobalAvgPool, Residual
from .engine import (PACT, PACT_ALPHA, PACT_BITS, Context, Conv2d, Flatten, Layer, Linear,
                     MaxPool2d, Model, ReLU, kaiming_uniform)
from .formats.base import Format

_F32 = np.float32


def _conv_stack(c, h, w, classes, rng, act):
    if h // 4 < 1 or w // 4 < 1:
        raise ValueError(f"the conv models need images of at least 4x4 pixels, got {h}x{w}")
    c1, c2 = 16, 32
    return [
        Conv2d("conv1", kaiming_uniform(rng, c * 9, (c * 9, c1)), np.zeros(c1, _F32), c, 3, 1, 1),
        act(1), MaxPool2d(2),
        Conv2d("conv2", kaiming_uniform(rng, c1 * 9, (c1 * 9, c2)), np.zeros(c2, _F32), c1, 3, 1, 1),
        act(2), MaxPool2d(2),
        Flatten(),
        Linear("fc", kaiming_uniform(rng, c2 * (h // 4) * (w // 4),
                                     (c2 * (h // 4) * (w // 4), classes)), np.zeros(classes, _F32)),
    ]


def _mlp(shape, classes, rng):
    f = int(np.prod(shape))
    dims = [f, 256, 128, classes]
    layers: list[Layer] = [Flatten()]
    for i in range(3):
        layers.append(Linear(f"fc{i + 1}", kaiming_uniform(rng, dims[i], (dims[i], dims[i + 1])),
                             np.zeros(dims[i + 1], _F32)))
        if i < 2:
            layers.append(ReLU())
    return layers


def _cnn(shape, classes, rng):
    return _conv_stack(*shape, classes, rng, lambda i: ReLU())


def _cnn_q4(shape, classes, rng):
    return _conv_stack(*shape, classes, rng, lambda i: PACT(f"act{i}", PACT_ALPHA, PACT_BITS))


def _lenet(shape, classes, rng):
    c, h, w = shape
    if (h // 2 - 4) // 2 < 1 or (w // 2 - 4) // 2 < 1:
        raise ValueError(f"lenet needs images of at least 12x12 pixels, got {h}x{w}")
    oh, ow = (h // 2 - 4) // 2, (w // 2 - 4) // 2
    flat = 16 * oh * ow
    return [
        Conv2d("conv1", kaiming_uniform(rng, c * 25, (c * 25, 6)), np.zeros(6, _F32), c, 5, 1, 2),
        ReLU(), MaxPool2d(2),
        Conv2d("conv2", kaiming_uniform(rng, 150, (150, 16)), np.zeros(16, _F32), 6, 5, 1, 0),
        ReLU(), MaxPool2d(2),
        Flatten(),
        Linear("fc1", kaiming_uniform(rng, flat, (flat, 120)), np.zeros(120, _F32)), ReLU(),
        Linear("fc2", kaiming_uniform(rng, 120, (120, 84)), np.zeros(84, _F32)), ReLU(),
        Linear("fc3", kaiming_uniform(rng, 84, (84, classes)), np.zeros(classes, _F32)),
    ]


def _conv(name, rng, cin, cout, kernel, stride):
    return Conv2d(name, kaiming_uniform(rng, cin * kernel * kernel, (cin * kernel * kernel, cout)),
                  np.zeros(cout, _F32), cin, kernel, stride, kernel // 2)


def _basic_block(name, rng, cin, cout, stride):
    """ResNet's basic block: two 3x3 convolutions with batch normalization, ReLU between them,
    the input added through the identity or a 1x1 convolution when the shape changes, then
    ReLU."""
    main = [_conv(f"{name}.conv1", rng, cin, cout, 3, stride), BatchNorm2d(f"{name}.bn1", cout),
            ReLU(), _conv(f"{name}.conv2", rng, cout, cout, 3, 1),
            BatchNorm2d(f"{name}.bn2", cout)]
    shortcut = ([] if stride == 1 and cin == cout else
                [_conv(f"{name}.down", rng, cin, cout, 1, stride),
                 BatchNorm2d(f"{name}.down_bn", cout)])
    return [Residual(name, main, shortcut), ReLU()]


#: the residual model's stages: (channels, stride of the first block), two blocks each
RESNET_STAGES = ((64, 1), (128, 2), (256, 2))


def _resnet(shape, classes, rng):
    c, h, w = shape
    if h < 8 or w < 8:
        raise ValueError(f"resnet needs images of at least 8x8 pixels, got {h}x{w}")
    layers = [_conv("stem", rng, c, 64, 3, 2), BatchNorm2d("stem_bn", 64), ReLU()]
    cin = 64
    for s, (cout, stride) in enumerate(RESNET_STAGES, 1):
        layers += _basic_block(f"s{s}b1", rng, cin, cout, stride)
        layers += _basic_block(f"s{s}b2", rng, cout, cout, 1)
        cin = cout
    return layers + [GlobalAvgPool(), Linear("fc", kaiming_uniform(rng, cin, (cin, classes)),
                                             np.zeros(classes, _F32))]


#: model name → (needs images (C, H, W), builder, one-line description)
MODELS = {
    "mlp": (False, _mlp, "flattened input → 256 → 128 → classes, ReLU"),
    "cnn": (True, _cnn, "2 x (conv3x3 + ReLU + 2x2 max pool), 16/32 channels, linear head"),
    "cnn-q4": (True, _cnn_q4, "cnn with PACT 4-bit activations (learned clip) for the ReLUs"),
    "lenet": (True, _lenet, "LeNet-5: conv5x5 6 + pool, conv5x5 16 + pool, 120 → 84 → "
                            "classes, ReLU"),
    "resnet": (True, _resnet, "ResNet-style: 3x3 stem (stride 2) + 3 stages of 2 basic blocks "
                              "(64/128/256 channels, batch norm in FP32), global average pool, "
                              "linear head"),
}


def build_model(name: str, input_shape: tuple, classes: int, seed: int) -> Model:
    """The named model with He-uniform weights drawn from ``np.random.default_rng(seed)``.

    Parameters
    ----------
    name : str
        One of :data:`MODELS`.
    input_shape : tuple
        One sample's shape: (C, H, W) images or (F,) feature vectors (``mlp`` only).
    classes : int
        Number of output classes.
    seed : int

    Raises
    ------
    ValueError
        An unknown model name (the message lists the known ones), or data the model cannot
        take (flat features for a conv model, images too small for two poolings).
    """
    if name not in MODELS:
        raise ValueError(f"unknown model '{name}' (known: {', '.join(MODELS)})")
    images, builder, _ = MODELS[name]
    shape = tuple(int(s) for s in input_shape)
    if images and len(shape) != 3:
        raise ValueError(f"model '{name}' needs image data (N, C, H, W); this data set has "
                         f"samples of shape {shape} (use mlp for flat feature vectors)")
    if classes < 2:
        raise ValueError(f"a classifier needs at least 2 classes, got {classes}")
    return Model(name, builder(shape, classes, np.random.default_rng(seed)))


def gemm_shapes(name: str, input_shape: tuple, classes: int) -> list[dict]:
    """Every GEMM of one image's forward pass through model ``name``: per layer with weights
    ``{"layer", "kind", "rows", "K", "N"}`` (rows = output positions of a convolution, 1 for a
    linear layer; ``K`` = the reduction, ``N`` = output channels or features).  A batch of
    ``B`` images has ``B x rows`` rows; ``bwd_data`` reduces over ``N`` and ``wgrad`` over the
    rows."""
    model = build_model(name, input_shape, classes, 0)
    shapes = []

    def record(layer, phase, x, y):
        kind = next(l.kind for l in model.gemm_layers if l.name == layer)
        shapes.append({"layer": layer, "kind": kind, "rows": int(x.shape[0]),
                       "K": int(x.shape[1]), "N": int(y.shape[1])})

    model.forward(np.zeros((1, *input_shape), _F32), Context(Format(None), training=False,
                                                           capture=record))
    return shapes


__all__ = ["MODELS", "RESNET_STAGES", "build_model", "gemm_shapes"]

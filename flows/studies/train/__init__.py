"""``trainfab train``: small networks trained with NumPy in each number format the generated
hardware implements, every GEMM of the forward, backward-data and weight-gradient passes going
through the format's arithmetic, to compare accuracy with FP32 training.

:mod:`.engine` holds the layers, :mod:`.blocks` the residual blocks and batch normalization,
:mod:`.models` the models, :mod:`.loop` the training loop, :mod:`.data` the data sets and
:mod:`.formats` the number formats.
"""

from .data import Dataset, DatasetError, load_dataset
from .engine import DEFAULTS
from .loop import train
from .models import MODELS, build_model

__all__ = ["DEFAULTS", "MODELS", "Dataset", "DatasetError", "build_model", "load_dataset", "train"]

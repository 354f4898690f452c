"""Composite differentiable functions (``ta.nn.functional``, also ``ta.F``), as in PyTorch."""

from ..ops import log_softmax, relu, softmax
from .activation import gelu
from .attention import scaled_dot_product_attention
from .dropout import dropout
from .linear import linear
from .loss import cross_entropy
from .normalization import layer_norm
from .sparse import embedding

__all__ = [
    "cross_entropy", "dropout", "embedding", "gelu", "layer_norm", "linear", "log_softmax",
    "relu", "scaled_dot_product_attention", "softmax",
]

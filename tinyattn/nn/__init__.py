"""Layers built only from tinyattn ops: ``Module`` and friends, with PyTorch's names and layouts."""

import sys

from .. import functional
from . import init, utils
from .activation import GELU, ReLU
from .attention import MultiHeadAttention, MultiHeadAttentionWrapper, SelfAttention
from .container import ModuleDict, ModuleList, Sequential
from .dropout import Dropout
from .linear import Linear
from .module import IncompatibleKeys, Module, Parameter, load
from .normalization import LayerNorm
from .sparse import Embedding
from .transformer import TransformerBlock

__all__ = [
    "GELU", "Dropout", "Embedding", "IncompatibleKeys", "LayerNorm", "Linear", "Module",
    "ModuleDict", "ModuleList", "MultiHeadAttention", "MultiHeadAttentionWrapper", "Parameter",
    "ReLU", "SelfAttention", "Sequential", "TransformerBlock", "functional", "init", "load",
    "utils",
]

# ``import tinyattn.nn.functional as F`` (PyTorch's path) finds the one functional package
sys.modules[__name__ + ".functional"] = functional

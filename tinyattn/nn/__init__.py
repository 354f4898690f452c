"""Layers built only from tinyattn ops: ``Module`` and friends, with PyTorch's names and layouts."""

import sys

from .. import functional
from . import init, utils
from .activation import GELU, Identity, LogSoftmax, ReLU, Sigmoid, SiLU, Softmax, Tanh
from .attention import MultiHeadAttention, MultiHeadAttentionWrapper, SelfAttention
from .checkpoint import load
from .container import ModuleDict, ModuleList, Sequential
from .dropout import Dropout
from .kv_cache import KVCache
from .linear import Linear
from .mlp import SwiGLU
from .module import IncompatibleKeys, Module, Parameter
from .multihead_attention import MultiheadAttention
from .normalization import LayerNorm
from .positional import ALiBi, RotaryEmbedding
from .rms_norm import RMSNorm
from .sparse import Embedding
from .transformer import TransformerBlock

__all__ = [
    "GELU", "ALiBi", "Dropout", "Embedding", "Identity", "IncompatibleKeys", "KVCache",
    "LayerNorm", "Linear", "LogSoftmax", "Module", "ModuleDict", "ModuleList",
    "MultiHeadAttention", "MultiHeadAttentionWrapper", "MultiheadAttention", "Parameter",
    "RMSNorm", "ReLU", "RotaryEmbedding", "SelfAttention", "Sequential", "SiLU", "Sigmoid",
    "Softmax", "SwiGLU", "Tanh", "TransformerBlock", "functional", "init", "load", "utils",
]

# ``import tinyattn.nn.functional as F`` (PyTorch's path) finds the one functional package
sys.modules[__name__ + ".functional"] = functional

"""Layers built only from tinyattn ops: ``Module`` and friends, with PyTorch's names and layouts."""

from .. import functional
from . import init, utils
from .activation import GELU, ReLU
from .attention import MultiHeadAttention, MultiHeadAttentionWrapper, SelfAttention
from .container import ModuleDict, ModuleList, Sequential
from .dropout import Dropout
from .kv_cache import KVCache
from .linear import Linear
from .mlp import SwiGLU
from .module import IncompatibleKeys, Module, Parameter, load
from .normalization import LayerNorm
from .positional import ALiBi, RotaryEmbedding
from .rms_norm import RMSNorm
from .sparse import Embedding
from .transformer import TransformerBlock

__all__ = [
    "GELU", "ALiBi", "Dropout", "Embedding", "IncompatibleKeys", "KVCache", "LayerNorm",
    "Linear", "Module", "ModuleDict", "ModuleList", "MultiHeadAttention",
    "MultiHeadAttentionWrapper", "Parameter", "RMSNorm", "ReLU", "RotaryEmbedding",
    "SelfAttention", "Sequential", "SwiGLU", "TransformerBlock", "functional", "init", "load",
    "utils",
]

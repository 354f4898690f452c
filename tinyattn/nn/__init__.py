"""Layers built only from tinyattn ops: ``Module`` and friends, with PyTorch's names and layouts."""

import sys

from .. import functional
from ..missing import missing as _missing
from . import init, parallel, utils
from .activation import GELU, Identity, LogSoftmax, ReLU, Sigmoid, SiLU, Softmax, Tanh
from .attention import MultiHeadAttention, MultiHeadAttentionWrapper, SelfAttention
from .checkpoint import load
from .container import ModuleDict, ModuleList, Sequential
from .dropout import Dropout
from .flatten import Flatten, Unflatten
from .kv_cache import KVCache
from .linear import Linear
from .loss import (
    BCELoss,
    BCEWithLogitsLoss,
    CrossEntropyLoss,
    HuberLoss,
    KLDivLoss,
    L1Loss,
    MSELoss,
    NLLLoss,
    SmoothL1Loss,
)
from .mlp import SwiGLU
from .module import IncompatibleKeys, Module, Parameter
from .multihead_attention import MultiheadAttention
from .normalization import LayerNorm
from .parallel import DataParallel
from .positional import ALiBi, RotaryEmbedding
from .rms_norm import RMSNorm
from .sparse import Embedding
from .transformer import TransformerBlock

__all__ = [
    "ALiBi", "BCELoss", "BCEWithLogitsLoss", "CrossEntropyLoss", "Dropout", "Embedding",
    "functional", "GELU", "HuberLoss", "Identity", "IncompatibleKeys", "init", "KLDivLoss",
    "KVCache", "L1Loss", "LayerNorm", "Linear", "load", "LogSoftmax", "Module", "ModuleDict",
    "ModuleList", "MSELoss", "MultiheadAttention", "MultiHeadAttention",
    "MultiHeadAttentionWrapper", "NLLLoss", "Parameter", "ReLU", "RMSNorm", "RotaryEmbedding",
    "SelfAttention", "Sequential", "Sigmoid", "SiLU", "SmoothL1Loss", "Softmax", "SwiGLU",
    "Tanh", "TransformerBlock", "utils",
]
__all__ += ["DataParallel", "Flatten", "parallel", "Unflatten"]

# ``import tinyattn.nn.functional as F`` (PyTorch's path) finds the one functional package
sys.modules[__name__ + ".functional"] = functional


def __getattr__(name: str) -> object:
    """A PyTorch layer that tinyattn does not have: say so clearly, naming the caller's line."""
    if name.startswith("__"):
        raise AttributeError(name)
    raise _missing(f"torch.nn.{name}", "tinyattn.nn covers the layers that attention and "
                                      "small-GPT code uses (see 'What runs unchanged' in the "
                                      "README)")

"""``ta.nn.functional`` (also ``ta.F``), as ``torch.nn.functional``: each function checks its
arguments, then composes recorded ops or applies one op of :mod:`tinyattn.ops` (where every
forward and backward rule lives)."""

from ..missing import missing as _missing
from .activation import gelu, log_softmax, relu, sigmoid, silu, softmax, tanh
from .attention import AttentionPath, choose_path, scaled_dot_product_attention
from .dropout import dropout
from .linear import linear
from .loss import (
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    cross_entropy,
    huber_loss,
    kl_div,
    l1_loss,
    mse_loss,
    nll_loss,
    smooth_l1_loss,
)
from .normalization import layer_norm
from .normalize import normalize
from .padding import pad
from .positional import alibi_bias, alibi_slopes
from .rms_norm import rms_norm
from .sparse import embedding, one_hot


def __getattr__(name: str) -> object:
    """A PyTorch function that tinyattn does not have: say so clearly, naming the caller's
    line."""
    if name.startswith("__"):
        raise AttributeError(name)
    raise _missing(f"torch.nn.functional.{name}", "see 'What runs unchanged' in the README for "
                                                 "what tinyattn.nn.functional covers")


__all__ = [
    "AttentionPath", "alibi_bias", "alibi_slopes", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "choose_path", "cross_entropy", "dropout", "embedding",
    "gelu", "huber_loss", "kl_div", "l1_loss", "layer_norm", "linear", "log_softmax",
    "mse_loss", "nll_loss", "normalize", "one_hot", "pad", "relu", "rms_norm",
    "scaled_dot_product_attention", "sigmoid", "silu", "smooth_l1_loss", "softmax", "tanh",
]

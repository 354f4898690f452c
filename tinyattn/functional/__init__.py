"""``ta.nn.functional`` (also ``ta.F``), as ``torch.nn.functional``: each function checks its
arguments, then composes recorded ops or applies one op of :mod:`tinyattn.ops` (where every
forward and backward rule lives)."""

from .activation import gelu, log_softmax, relu, sigmoid, silu, softmax, tanh
from .attention import AttentionPath, choose_path, scaled_dot_product_attention
from .dropout import dropout
from .linear import linear
from .loss import cross_entropy, mse_loss, nll_loss
from .normalization import layer_norm
from .normalize import normalize
from .padding import pad
from .positional import alibi_bias, alibi_slopes
from .rms_norm import rms_norm
from .sparse import embedding, one_hot


def __getattr__(name: str) -> object:
    """A PyTorch function that tinyattn does not have: say so clearly."""
    if name.startswith("__"):
        raise AttributeError(name)
    raise AttributeError(f"tinyattn has no torch.nn.functional.{name}: see 'What runs "
                         "unchanged' in the README for what tinyattn.nn.functional covers")


__all__ = [
    "AttentionPath", "alibi_bias", "alibi_slopes", "choose_path", "cross_entropy", "dropout",
    "embedding", "gelu", "layer_norm", "linear", "log_softmax", "mse_loss", "nll_loss",
    "normalize", "one_hot", "pad", "relu", "rms_norm", "scaled_dot_product_attention",
    "sigmoid", "silu", "softmax", "tanh",
]

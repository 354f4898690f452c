"""The pre-norm transformer block: GPT-2 style by default, Llama style by its options."""

from __future__ import annotations

from collections import OrderedDict

from ..functional.activation import GELU_APPROXIMATIONS
from ..tensor import Tensor
from ..validation import check_choice
from .activation import GELU
from .attention import MultiHeadAttention
from .container import Sequential
from .dropout import Dropout
from .hooks import HookPoint
from .kv_cache import KVCache
from .linear import Linear
from .mlp import SwiGLU
from .module import Module
from .normalization import LayerNorm
from .positional import RotaryEmbedding
from .rms_norm import RMSNorm

NORMS = ("layernorm", "rmsnorm")
MLPS = ("gelu", "swiglu")


def swiglu_hidden(embed_dim: int, mlp_ratio: int) -> int:
    """SwiGLU's hidden width ``⌊2 · mlp_ratio · C / 3⌋``: three matrices instead of two, so
    about as many weights as the GELU MLP of width ``mlp_ratio · C``."""
    return max(2 * mlp_ratio * embed_dim // 3, 1)


class TransformerBlock(Module):
    """``x + Dropout(MHA(norm₁(x)))``, then ``x + Dropout(MLP(norm₂(x)))``.

    The default MLP is ``Linear(C, mlp_ratio·C) → GELU → Linear(mlp_ratio·C, C)`` with
    submodules ``mlp.fc``, ``mlp.gelu``, ``mlp.proj``; ``mlp='swiglu'`` makes it a
    :class:`~tinyattn.nn.SwiGLU` (``mlp.gate``, ``mlp.fc``, ``mlp.proj``, hidden width
    :func:`swiglu_hidden`). The attention is ``attn``, a :class:`MultiHeadAttention` (with
    ``dropout`` on its weights as well), and the norms are ``ln_1`` and ``ln_2`` (LayerNorm or
    RMSNorm). Hook points: ``hook_resid_pre``, ``hook_attn_out``, ``hook_resid_mid``,
    ``hook_mlp_out``, ``hook_resid_post`` (and the attention's own).

    Parameters
    ----------
    embed_dim, num_heads : int
        Width ``C`` and number of attention heads (``C`` divisible by ``num_heads``).
    mlp_ratio : int
        Hidden width of the MLP relative to ``C``.
    dropout : float
        Dropout on the attention weights and on both residual branches while training.
    causal : bool
        Whether each position attends only to itself and earlier positions.
    impl : {'auto', 'composed', 'fused'}
        The attention path (see :class:`MultiHeadAttention`).
    bias : bool
        Biases in every Linear and LayerNorm (False: none anywhere).
    norm : {'layernorm', 'rmsnorm'}
    mlp : {'gelu', 'swiglu'}
    gelu_approximate : {'none', 'tanh'}
        The GELU of the ``'gelu'`` MLP (GPT-2 uses ``'tanh'``).
    num_kv_heads, window_size, rotary, alibi
        Passed to :class:`MultiHeadAttention`.

    Examples
    --------
    >>> import tinyattn as ta
    >>> block = ta.nn.TransformerBlock(16, num_heads=4)
    >>> block(ta.randn(2, 5, 16)).shape
    (2, 5, 16)
    """

    def __init__(self, embed_dim: int, num_heads: int, mlp_ratio: int = 4, dropout: float = 0.0,
                 causal: bool = True, impl: str = "auto", *, bias: bool = True,
                 norm: str = "layernorm", mlp: str = "gelu", gelu_approximate: str = "none",
                 num_kv_heads: int | None = None, window_size: int | None = None,
                 rotary: RotaryEmbedding | None = None, alibi: bool = False):
        super().__init__()
        name = "TransformerBlock"
        if isinstance(mlp_ratio, bool) or not isinstance(mlp_ratio, int) or mlp_ratio <= 0:
            raise ValueError(f"{name}: mlp_ratio must be a positive int, got {mlp_ratio!r}")
        check_choice(name, "norm", norm, NORMS)
        check_choice(name, "mlp", mlp, MLPS)
        check_choice(name, "gelu_approximate", gelu_approximate, GELU_APPROXIMATIONS)
        self.ln_1 = self._norm(norm, embed_dim, bias)
        self.attn = MultiHeadAttention(embed_dim, num_heads, dropout=dropout, bias=bias,
                                       causal=causal, impl=impl, num_kv_heads=num_kv_heads,
                                       window_size=window_size, rotary=rotary, alibi=alibi)
        self.ln_2 = self._norm(norm, embed_dim, bias)
        if mlp == "swiglu":
            self.mlp = SwiGLU(embed_dim, swiglu_hidden(embed_dim, mlp_ratio), bias=bias)
        else:
            hidden = mlp_ratio * embed_dim
            self.mlp = Sequential(OrderedDict(
                fc=Linear(embed_dim, hidden, bias=bias), gelu=GELU(gelu_approximate),
                proj=Linear(hidden, embed_dim, bias=bias),
            ))
        self.dropout = Dropout(dropout)
        self.hook_resid_pre, self.hook_attn_out = HookPoint(), HookPoint()
        self.hook_resid_mid, self.hook_mlp_out = HookPoint(), HookPoint()
        self.hook_resid_post = HookPoint()

    @staticmethod
    def _norm(norm: str, embed_dim: int, bias: bool) -> Module:
        return RMSNorm(embed_dim) if norm == "rmsnorm" else LayerNorm(embed_dim, bias=bias)

    def forward(self, x: Tensor, kv_cache: KVCache | None = None) -> Tensor:
        """``(B, T, C) -> (B, T, C)`` (or ``(T, C) -> (T, C)``); ``kv_cache`` for incremental
        decoding (see :class:`MultiHeadAttention`)."""
        x = self.hook_resid_pre(x)
        attn_out = self.attn(self.ln_1(x), kv_cache=kv_cache)
        x = self.hook_resid_mid(x + self.dropout(self.hook_attn_out(attn_out)))
        return self.hook_resid_post(x + self.dropout(self.hook_mlp_out(self.mlp(self.ln_2(x)))))

"""The pre-LayerNorm transformer block (GPT-2 style)."""

from __future__ import annotations

from collections import OrderedDict

from ..tensor import Tensor
from .activation import GELU
from .attention import MultiHeadAttention
from .container import Sequential
from .dropout import Dropout
from .hooks import HookPoint
from .linear import Linear
from .module import Module
from .normalization import LayerNorm


class TransformerBlock(Module):
    """``x + Dropout(MHA(LN₁(x)))``, then ``x + Dropout(MLP(LN₂(x)))``.

    The MLP is ``Linear(C, mlp_ratio·C) → GELU (exact, erf) → Linear(mlp_ratio·C, C)`` with
    submodules ``mlp.fc``, ``mlp.gelu``, ``mlp.proj``; the attention is ``attn``, a
    :class:`MultiHeadAttention` (with ``dropout`` on its weights as well), and the norms are
    ``ln_1`` and ``ln_2``. Hook points: ``hook_resid_pre``, ``hook_attn_out``,
    ``hook_resid_mid``, ``hook_mlp_out``, ``hook_resid_post`` (and the attention's own).

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

    Examples
    --------
    >>> import tinyattn as ta
    >>> block = ta.nn.TransformerBlock(16, num_heads=4)
    >>> block(ta.randn(2, 5, 16)).shape
    (2, 5, 16)
    """

    def __init__(self, embed_dim: int, num_heads: int, mlp_ratio: int = 4, dropout: float = 0.0,
                 causal: bool = True, impl: str = "auto"):
        super().__init__()
        if isinstance(mlp_ratio, bool) or not isinstance(mlp_ratio, int) or mlp_ratio <= 0:
            raise ValueError(f"TransformerBlock: mlp_ratio must be a positive int, got "
                             f"{mlp_ratio!r}")
        self.ln_1 = LayerNorm(embed_dim)
        self.attn = MultiHeadAttention(embed_dim, num_heads, dropout=dropout, causal=causal,
                                       impl=impl)
        self.ln_2 = LayerNorm(embed_dim)
        hidden = mlp_ratio * embed_dim
        self.mlp = Sequential(OrderedDict(
            fc=Linear(embed_dim, hidden), gelu=GELU(), proj=Linear(hidden, embed_dim),
        ))
        self.dropout = Dropout(dropout)
        self.hook_resid_pre, self.hook_attn_out = HookPoint(), HookPoint()
        self.hook_resid_mid, self.hook_mlp_out = HookPoint(), HookPoint()
        self.hook_resid_post = HookPoint()

    def forward(self, x: Tensor) -> Tensor:
        """``(B, T, C) -> (B, T, C)`` (or ``(T, C) -> (T, C)``)."""
        x = self.hook_resid_pre(x)
        x = self.hook_resid_mid(x + self.dropout(self.hook_attn_out(self.attn(self.ln_1(x)))))
        return self.hook_resid_post(x + self.dropout(self.hook_mlp_out(self.mlp(self.ln_2(x)))))

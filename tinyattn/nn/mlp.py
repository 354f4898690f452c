"""``SwiGLU``: the gated feed-forward layer of Llama-style transformer blocks."""

from __future__ import annotations

from ..functional import silu
from ..tensor import Tensor
from ..validation import check_int
from .linear import Linear
from .module import Module


class SwiGLU(Module):
    """``proj(silu(gate(x)) ⊙ fc(x))``: a SiLU-gated linear unit, then a projection back.

    Submodules ``gate`` and ``fc`` (each ``Linear(embed_dim, hidden)``) and ``proj``
    (``Linear(hidden, embed_dim)``). Backward, by the product rule:
    ``d fc(x) = g ⊙ silu(a)``, ``d a = g ⊙ fc(x) ⊙ σ(a)(1 + a(1 − σ(a)))`` with ``a = gate(x)``.

    Examples
    --------
    >>> import tinyattn as ta
    >>> ta.nn.SwiGLU(8, 12)(ta.randn(2, 3, 8)).shape
    (2, 3, 8)
    """

    def __init__(self, embed_dim: int, hidden: int, bias: bool = True):
        super().__init__()
        check_int("SwiGLU", "embed_dim", embed_dim, 1)
        check_int("SwiGLU", "hidden", hidden, 1)
        self.gate = Linear(embed_dim, hidden, bias=bias)
        self.fc = Linear(embed_dim, hidden, bias=bias)
        self.proj = Linear(hidden, embed_dim, bias=bias)

    def forward(self, x: Tensor) -> Tensor:
        """``(..., embed_dim) -> (..., embed_dim)``."""
        return self.proj(silu(self.gate(x)) * self.fc(x))

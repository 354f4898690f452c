"""Position layers for attention: :class:`RotaryEmbedding` (RoPE) and :class:`ALiBi`.

Neither has parameters (nothing is learned, nothing enters a state dict); the formulas are in
:mod:`tinyattn.functional.positional`.
"""

from __future__ import annotations

import numpy as np

from ..functional.positional import (
    alibi_bias,
    alibi_slopes,
    apply_rotary,
    check_rotary_input,
    rotary_angles,
)
from ..tensor import Tensor
from ..validation import check_int, check_number
from .module import Module


class RotaryEmbedding(Module):
    """Rotary position embedding of queries and keys, "rotate half" convention.

    Position ``p`` rotates features ``(x_i, x_{i + D/2})`` by ``p · base^(−2i/D)``; the
    cos/sin tables of positions ``0 … max_positions − 1`` are computed once (float64, cast to
    the input's dtype when used).

    Parameters
    ----------
    head_dim : int
        ``D``, the feature size of a query/key head; must be even.
    max_positions : int
        Number of positions with a table entry; asking for a position beyond is an error.
    base : float
        The frequency base (10000 in the RoPE paper and in Llama).

    Examples
    --------
    >>> import tinyattn as ta
    >>> rope = ta.nn.RotaryEmbedding(8, max_positions=16)
    >>> q, k = ta.randn(2, 4, 5, 8), ta.randn(2, 4, 5, 8)
    >>> q_rot, k_rot = rope(q, k)
    >>> q_rot.shape, bool(abs(q_rot[:, :, 0] - q[:, :, 0]).max().item() == 0)  # p = 0: identity
    ((2, 4, 5, 8), True)
    """

    def __init__(self, head_dim: int, max_positions: int, base: float = 10000.0):
        super().__init__()
        name = "RotaryEmbedding"
        self.head_dim = check_int(name, "head_dim", head_dim, 1)
        if head_dim % 2:
            raise ValueError(f"{name}: head_dim must be even (features are rotated in pairs), "
                             f"got {head_dim}")
        self.max_positions = check_int(name, "max_positions", max_positions, 1)
        self.base = check_number(name, "base", base, low=1.0)
        if self.base == 1.0:
            raise ValueError(f"{name}: base must be > 1, got {base}")
        angles = rotary_angles(head_dim, np.arange(max_positions), self.base)  # (P, D)
        self.cos_table, self.sin_table = np.cos(angles), np.sin(angles)

    def tables(self, offset: int, length: int, dtype: np.dtype) -> tuple[Tensor, Tensor]:
        """``cos``, ``sin`` ``(length, D)`` of positions ``offset … offset + length − 1``."""
        offset = check_int("RotaryEmbedding", "offset", offset, 0)
        if offset + length > self.max_positions:
            raise ValueError(f"RotaryEmbedding: positions {offset}..{offset + length - 1} "
                             f"exceed max_positions {self.max_positions}")
        rows = slice(offset, offset + length)
        return (Tensor(self.cos_table[rows].astype(dtype)),
                Tensor(self.sin_table[rows].astype(dtype)))

    def rotate(self, x: Tensor, offset: int = 0) -> Tensor:
        """``x (..., T, D)`` rotated at positions ``offset … offset + T − 1``."""
        check_rotary_input("RotaryEmbedding", "x", x, self.head_dim)
        cos, sin = self.tables(offset, x.shape[-2], x.dtype)
        return apply_rotary(x, cos, sin)

    def forward(self, q: Tensor, k: Tensor, offset: int = 0) -> tuple[Tensor, Tensor]:
        """Rotate queries ``(B, H, T, D)`` and keys ``(B, Hkv, T', D)``, each at positions
        ``offset, offset + 1, …`` (``offset``: tokens already in a key/value cache)."""
        check_rotary_input("RotaryEmbedding", "q", q, self.head_dim)
        check_rotary_input("RotaryEmbedding", "k", k, self.head_dim)
        return self.rotate(q, offset), self.rotate(k, offset)

    def extra_repr(self) -> str:
        return f"{self.head_dim}, max_positions={self.max_positions}, base={self.base:g}"


class ALiBi(Module):
    """Attention with linear biases: the score bias ``−m_h · (i − j)`` of
    :func:`~tinyattn.functional.alibi_bias`, with the slopes ``m_h`` of
    :func:`~tinyattn.functional.alibi_slopes` in ``slopes``.

    Examples
    --------
    >>> import tinyattn as ta
    >>> ta.nn.ALiBi(2)(3, 3).shape
    (2, 3, 3)
    """

    def __init__(self, num_heads: int):
        super().__init__()
        self.num_heads = check_int("ALiBi", "num_heads", num_heads, 1)
        self.slopes = alibi_slopes(num_heads)

    def forward(self, query_len: int, key_len: int, dtype: np.dtype | type = np.float32
                ) -> Tensor:
        """The bias ``(H, T, S)`` for ``T`` queries that are the last of ``S`` keys."""
        return alibi_bias(self.num_heads, query_len, key_len, dtype)

    def extra_repr(self) -> str:
        return f"num_heads={self.num_heads}"

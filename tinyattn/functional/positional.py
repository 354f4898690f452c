"""Relative position signals for attention: rotary embeddings (RoPE) and ALiBi biases.

* RoPE (Su et al., 2021) rotates each pair of features ``(x_i, x_{i + D/2})`` of a query or key
  at position ``p`` by the angle ``p · θ_i`` with ``θ_i = base^(−2i/D)`` (the "rotate half"
  pairing): ``rope(x) = x ⊙ cos + rotate_half(x) ⊙ sin`` with
  ``rotate_half(x) = (−x_{D/2:}, x_{:D/2})``. A rotation is orthogonal, so the score of query
  ``m`` and key ``n`` depends only on ``m − n``; its backward is the inverse rotation,
  ``dx = g ⊙ cos − rotate_half(g ⊙ sin)``.
* ALiBi (Press et al., 2022) adds ``−m_h · (i − j)`` to the score of query ``i`` and key ``j``
  in head ``h``; the slopes ``m_h`` form a geometric sequence (:func:`alibi_slopes`).
"""

from __future__ import annotations

import numpy as np

from ..ops import cat
from ..tensor import Tensor, check_float
from ..validation import check_int


def rotary_angles(head_dim: int, positions: np.ndarray, base: float = 10000.0) -> np.ndarray:
    """``(len(positions), D)`` angles ``p · θ_i``, ``θ_i = base^(−2i/D)``, each ``θ`` twice
    (for ``x_i`` and ``x_{i + D/2}``), in float64.

    Examples
    --------
    >>> rotary_angles(4, np.arange(2), base=100.0).tolist()
    [[0.0, 0.0, 0.0, 0.0], [1.0, 0.1, 1.0, 0.1]]
    """
    inv_freq = base ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)  # (D/2,)
    angles = np.asarray(positions, np.float64)[:, None] * inv_freq[None, :]  # (T, D/2)
    return np.concatenate([angles, angles], axis=-1)  # (T, D)


def rotate_half(x: Tensor) -> Tensor:
    """``(x_1, x_2) -> (−x_2, x_1)`` on the two halves of the last dim (a recorded op chain)."""
    half = x.shape[-1] // 2
    return cat([-x[..., half:], x[..., :half]], dim=-1)


def apply_rotary(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """``x ⊙ cos + rotate_half(x) ⊙ sin``: ``x (..., T, D)``, ``cos``/``sin`` ``(T, D)``."""
    return x * cos + rotate_half(x) * sin


def alibi_slopes(num_heads: int) -> np.ndarray:
    """The ALiBi slopes ``(H,)`` in float64.

    For ``H`` a power of two, ``m_h = 2^(−8(h+1)/H)``: the geometric sequence that starts at
    ``2^(−8/H)`` with that ratio. Otherwise, with ``P`` the largest power of two below ``H``,
    the ``P`` slopes of ``P`` heads followed by every other slope of ``2P`` heads
    (the odd-numbered ones), ``H − P`` of them.

    Examples
    --------
    >>> alibi_slopes(4).tolist()
    [0.25, 0.0625, 0.015625, 0.00390625]
    >>> [round(m, 4) for m in alibi_slopes(3).tolist()]
    [0.0625, 0.0039, 0.25]
    """
    num_heads = check_int("alibi_slopes", "num_heads", num_heads, 1)

    def geometric(n: int) -> np.ndarray:
        return 2.0 ** (-8.0 * np.arange(1, n + 1) / n)

    power = 1 << (num_heads.bit_length() - 1)  # the largest power of two <= H
    if power == num_heads:
        return geometric(num_heads)
    return np.concatenate([geometric(power), geometric(2 * power)[0::2][: num_heads - power]])


def alibi_bias(num_heads: int, query_len: int, key_len: int,
               dtype: np.dtype | type = np.float32) -> Tensor:
    """The ALiBi score bias ``(H, T, S)``: ``−m_h · |i′ − j|`` with ``i′ = i + S − T``.

    The queries are the last ``T`` of the ``S`` key positions (bottom-right aligned, as when
    decoding with a key/value cache), so query ``i`` sits at position ``i′``. For keys at or
    before the query this is the paper's ``−m_h · (i′ − j)``; keys after it (seen only without
    a causal mask) get the mirror image. Add it to the scores (``attn_mask`` of
    :func:`scaled_dot_product_attention`).

    Examples
    --------
    >>> import tinyattn as ta
    >>> ta.F.alibi_bias(2, 1, 3).tolist()
    [[[-0.125, -0.0625, -0.0]], [[-0.0078125, -0.00390625, -0.0]]]
    """
    op = "alibi_bias"
    num_heads = check_int(op, "num_heads", num_heads, 1)
    query_len = check_int(op, "query_len", query_len, 0)
    key_len = check_int(op, "key_len", key_len, 0)
    if query_len > key_len:
        raise ValueError(f"{op}: query_len {query_len} must be <= key_len {key_len} (the "
                         "queries are the last query_len of the key positions)")
    if np.dtype(dtype).kind != "f":
        raise TypeError(f"{op}: dtype must be a float dtype, got {np.dtype(dtype)}")
    query_pos = np.arange(key_len - query_len, key_len)[:, None]  # (T, 1)
    distance = np.abs(query_pos - np.arange(key_len)[None, :])  # (T, S)
    bias = -alibi_slopes(num_heads)[:, None, None] * distance  # (H, T, S)
    return Tensor(bias.astype(dtype))


def check_rotary_input(op: str, label: str, x: Tensor, head_dim: int) -> None:
    """``x`` must be a float Tensor ``(..., T, head_dim)``."""
    check_float(op, label, x)
    if x.ndim < 2 or x.shape[-1] != head_dim:
        raise ValueError(f"{op}: {label} must have shape (..., T, {head_dim}), got {x.shape}")

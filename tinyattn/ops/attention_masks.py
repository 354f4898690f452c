"""Attention masks, converted in one place.

PyTorch has two conventions, opposite to each other:

* ``F.scaled_dot_product_attention(attn_mask=...)``: boolean True means the query **may**
  attend the key; a float mask is added to the scores. Everything below the layers (the
  composed path, the fused kernel's bias) speaks this one.
* the layers (``nn.MultiheadAttention``, ``nn.MultiHeadAttention``): boolean True means the
  query may **not** attend the key; a float mask is added. They take ``key_padding_mask``
  ``(B, S)`` and ``attn_mask`` ``(T, S)`` or ``(B·H, T, S)`` (unbatched: ``(S,)`` and
  ``(T, S)`` or ``(H, T, S)``).

Bands (causal, sliding window) are boolean ``(T, S)`` arrays of the allowed keys; with a KV
cache the queries are the last ``T`` of ``S`` positions, so the band is aligned bottom-right.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import DTypeError, ShapeError
from ..tensor import Tensor, from_numpy
from .arithmetic import add
from .index import cat


def band(T: int, S: int, causal: bool, window: int | None, past: int = 0) -> np.ndarray | None:
    """``(T, S)`` bool, True where query ``i`` may see key ``j``; None when every query may see
    every key.

    The queries are positions ``past … past + T − 1`` of the ``S`` keys (``past = 0``: the
    first ``T``, top-left aligned as ``is_causal``; ``past = S − T``: the last ``T``, as in
    decoding with a cache). Causal: ``j <= i``; with a window also ``i − j < window`` (causal)
    or ``|i − j| < window`` (not causal).

    Examples
    --------
    >>> band(2, 3, causal=True, window=None).astype(int).tolist()
    [[1, 0, 0], [1, 1, 0]]
    >>> band(2, 3, causal=True, window=None, past=1).astype(int).tolist()
    [[1, 1, 0], [1, 1, 1]]
    """
    if not causal and window is None:
        return None
    i = np.arange(past, past + T)[:, None]
    j = np.arange(S)[None, :]
    allowed = np.ones((T, S), bool)
    if causal:
        allowed &= j <= i
    if window is not None:
        allowed &= (i - j < window) if causal else (np.abs(i - j) < window)
    return None if allowed.all() else allowed


def as_mask(op: str, label: str, mask: Any, dtype: np.dtype) -> Tensor:
    """A mask as a Tensor (a numpy array is wrapped): boolean, or of the query's float
    ``dtype``; else an error naming ``op`` and ``label``."""
    if isinstance(mask, np.ndarray):
        mask = from_numpy(mask)
    if not isinstance(mask, Tensor):
        raise TypeError(f"{op}: {label} must be a Tensor or numpy array, got "
                        f"{type(mask).__name__}")
    if mask.dtype != np.bool_ and mask.dtype != dtype:
        raise DTypeError(f"{op}: {label} must be boolean or have the query's dtype {dtype}, "
                         f"got {mask.dtype}")
    return mask


def sdpa_mask(op: str, attn_mask: Any, dtype: np.dtype,
              scores_shape: tuple[int, ...]) -> Tensor | None:
    """``attn_mask`` of SDPA checked: a Tensor (bool, or float of ``dtype``) that broadcasts
    to the scores ``(..., H, T, S)``."""
    if attn_mask is None:
        return None
    mask = as_mask(op, "attn_mask", attn_mask, dtype)
    try:
        joint = np.broadcast_shapes(mask.shape, scores_shape)
    except ValueError:
        joint = None
    if joint != scores_shape:
        raise ShapeError(f"{op}: attn_mask of shape {mask.shape} does not broadcast to the "
                         f"scores' shape (..., H, T, S) = {scores_shape}")
    return mask


def kernel_bias(mask: Tensor, scores_shape: tuple[int, ...], B: int) -> np.ndarray:
    """An SDPA mask as the fused kernel's additive 4-D bias, of sizes 1 or ``(B, H, T, S)``
    (``B``: the scores' leading dims before the heads, flattened)."""
    lead = scores_shape[:-2]
    bias = mask.numpy()
    if bias.dtype == np.bool_:
        bias = np.where(bias, np.zeros((), np.float64), np.full((), -np.inf))
    bias = bias.reshape((1,) * (len(scores_shape) - bias.ndim) + bias.shape)  # (..., T, S)
    if not lead:
        return bias.reshape(1, 1, *bias.shape)  # (1, 1, T, S)
    outer, rest = bias.shape[: len(lead) - 1], bias.shape[len(lead) - 1:]
    if all(n == 1 for n in outer):
        return bias.reshape(1, *rest)  # (1, H or 1, T or 1, S or 1)
    full = np.broadcast_to(bias, lead[:-1] + rest)
    return full.reshape(B, *rest)  # (B, H or 1, T or 1, S or 1)


def _layer_shaped(layer: str, label: str, mask: Any, dtype: np.dtype,
                  *shapes: tuple[int, ...]) -> Tensor:
    """A layer's mask as a Tensor, boolean or of the query's ``dtype``, of one of ``shapes``."""
    mask = as_mask(layer, label, mask, dtype)
    if mask.shape not in shapes:
        expected = " or ".join(str(shape) for shape in shapes)
        raise ShapeError(f"{layer}: {label} has shape {mask.shape}, expected {expected}")
    return mask


def layer_mask(layer: str, key_padding_mask: Any, attn_mask: Any, dtype: np.dtype, B: int,
               H: int, T: int, S: int, batched: bool, extra_keys: int = 0) -> Tensor | None:
    """The masks a layer was given (layer convention), checked and merged into one SDPA mask
    that broadcasts to ``(B, H, T, S + extra_keys)``; None when none was given.

    ``extra_keys`` key columns that every query may attend are appended (``add_bias_kv`` and
    ``add_zero_attn`` of ``nn.MultiheadAttention``).
    """
    masks = []
    if attn_mask is not None:
        mask = _layer_shaped(layer, "attn_mask", attn_mask, dtype,
                             (T, S), (B * H, T, S) if batched else (H, T, S))
        masks.append(mask if mask.ndim == 2 else mask.reshape(B, H, T, S))  # (B, H, T, S)
    if key_padding_mask is not None:
        mask = _layer_shaped(layer, "key_padding_mask", key_padding_mask, dtype,
                             (B, S) if batched else (S,))
        masks.append(mask.reshape(B, 1, 1, S))  # (B, 1, 1, S)
    if not masks:
        return None
    if all(mask.dtype == np.bool_ for mask in masks):
        blocked = masks[0].numpy()
        for mask in masks[1:]:
            blocked = blocked | mask.numpy()
        allowed = ~blocked
        if extra_keys:
            allowed = np.concatenate(
                [allowed, np.ones(allowed.shape[:-1] + (extra_keys,), bool)], axis=-1)
        return from_numpy(allowed)  # True = may attend
    merged = None
    for mask in masks:
        if mask.dtype == np.bool_:
            mask = from_numpy(np.where(mask.numpy(), -np.inf, 0.0).astype(dtype))
        merged = mask if merged is None else add(merged, mask)
    if extra_keys:  # a float mask may carry a gradient: extend it with a recorded op
        padding = np.zeros(merged.shape[:-1] + (extra_keys,), dtype)
        merged = cat([merged, from_numpy(padding)], dim=-1)
    return merged


def fold(mask: Tensor | None, allowed: np.ndarray | None, bias: np.ndarray | None,
         dtype: np.dtype) -> Tensor | None:
    """An SDPA ``mask`` with a band of ``allowed`` keys (bool ``(T, S)``) and an additive
    ``bias`` (such as ALiBi's ``(H, T, S)``) folded in; each may be None."""
    if bias is None:
        if allowed is None:
            return mask
        if mask is None:
            return from_numpy(allowed)
        if mask.dtype == np.bool_:
            return from_numpy(mask.numpy() & allowed)
        return add(mask, from_numpy(np.where(allowed, 0.0, -np.inf).astype(dtype)))
    if allowed is not None:
        bias = np.where(allowed, bias, -np.inf).astype(dtype)
    if mask is None:
        return from_numpy(bias)
    if mask.dtype == np.bool_:
        return from_numpy(np.where(mask.numpy(), bias, -np.inf).astype(dtype))
    return add(mask, from_numpy(bias))

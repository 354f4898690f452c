"""The masks of the attention layers: PyTorch's layer convention turned into SDPA's.

The layers take masks as ``torch.nn.MultiheadAttention`` does — boolean True means NOT
allowed, a float mask is added to the scores — as ``key_padding_mask`` ``(B, S)`` and
``attn_mask`` ``(T, S)`` or ``(B·H, T, S)`` (unbatched: ``(S,)`` and ``(T, S)`` or
``(H, T, S)``). :func:`layer_masks` checks and reshapes them to broadcast to ``(B, H, T, S)``;
:func:`merge_masks` folds them into one mask in the convention of
``scaled_dot_product_attention`` (True = may attend, or float added).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..tensor import Tensor, check_mask


def _check_shaped(layer: str, label: str, mask: Any, dtype: np.dtype,
                  *shapes: tuple[int, ...]) -> Tensor:
    """``mask`` as a Tensor, boolean or of the query's ``dtype``, of one of ``shapes``."""
    mask = check_mask(layer, label, mask, dtype)
    if mask.shape not in shapes:
        expected = " or ".join(str(shape) for shape in shapes)
        raise ValueError(f"{layer}: {label} has shape {mask.shape}, expected {expected}")
    return mask


def layer_masks(layer: str, key_padding_mask: Any, attn_mask: Any, dtype: np.dtype,
                B: int, H: int, T: int, S: int, batched: bool) -> list[Tensor]:
    """The given masks, checked, in the layer convention: ``attn_mask`` as ``(T, S)`` or
    ``(B, H, T, S)``, ``key_padding_mask`` as ``(B, 1, 1, S)``."""
    masks = []
    if attn_mask is not None:
        mask = _check_shaped(layer, "attn_mask", attn_mask, dtype,
                             (T, S), (B * H, T, S) if batched else (H, T, S))
        masks.append(mask if mask.ndim == 2 else mask.reshape(B, H, T, S))  # (B, H, T, S)
    if key_padding_mask is not None:
        mask = _check_shaped(layer, "key_padding_mask", key_padding_mask, dtype,
                             (B, S) if batched else (S,))
        masks.append(mask.reshape(B, 1, 1, S))  # (B, 1, 1, S)
    return masks


def merge_masks(masks: list[Tensor], dtype: np.dtype) -> Tensor:
    """One mask in the convention of ``scaled_dot_product_attention`` from masks in the layer
    convention (boolean True = NOT allowed, float = added); they broadcast together."""
    if all(mask.dtype == np.bool_ for mask in masks):
        blocked = masks[0].numpy()
        for mask in masks[1:]:
            blocked = blocked | mask.numpy()
        return Tensor(~blocked)  # True = may attend
    merged = None
    for mask in masks:
        if mask.dtype == np.bool_:
            mask = Tensor(np.where(mask.numpy(), -np.inf, 0.0).astype(dtype))
        merged = mask if merged is None else merged + mask
    return merged


def with_band_and_bias(mask: Tensor | None, allowed: np.ndarray | None,
                       bias: np.ndarray | None, dtype: np.dtype) -> Tensor | None:
    """An SDPA ``mask`` with a band of ``allowed`` keys (bool ``(T, S)``) and an additive
    ``bias`` (such as ALiBi's ``(H, T, S)``) folded in; either may be None."""
    if bias is None:
        if allowed is None:
            return mask
        if mask is None:
            return Tensor(allowed)
        if mask.dtype == np.bool_:
            return Tensor(mask.numpy() & allowed)
        return mask + Tensor(np.where(allowed, 0.0, -np.inf).astype(dtype))
    if allowed is not None:
        bias = np.where(allowed, bias, -np.inf).astype(dtype)
    if mask is None:
        return Tensor(bias)
    if mask.dtype == np.bool_:
        return Tensor(np.where(mask.numpy(), bias, -np.inf).astype(dtype))
    return mask + Tensor(bias)

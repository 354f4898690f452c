"""Plain-numpy twins of the fused attention kernels in ``attention`` (the test oracle).

They materialise the full ``(B, H, T, S)`` weights with numpy and take the softmax row term of
the backward directly, so they share no code with the kernels they check.
"""

from __future__ import annotations

import math

import numpy as np

from .counter_rng import dropout_keep_mask_numpy


def _weights_numpy(q, k, bias, is_causal, scale, dropout_p, seed):
    """Materialised ``(p, z, lse)`` of the plain-numpy twins."""
    B, H, T, D = q.shape
    S = k.shape[2]
    if scale is None:
        scale = 1.0 / math.sqrt(D) if D > 0 else 1.0
    scores = q.dtype.type(scale) * (q @ np.swapaxes(k, -1, -2))  # (B, H, T, S)
    if bias is not None:
        scores = scores + bias.astype(q.dtype)
    if is_causal:
        scores = np.where(np.tril(np.ones((T, S), dtype=bool)), scores, q.dtype.type(-np.inf))
    row_max = scores.max(axis=-1, keepdims=True) if S else np.full((B, H, T, 1), -np.inf)
    masked = np.isneginf(row_max)
    shifted = np.exp(scores - np.where(masked, 0, row_max).astype(q.dtype))
    row_sum = shifted.sum(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.where(masked, q.dtype.type(0), shifted / row_sum)
        lse = np.where(masked, -np.inf, row_max + np.log(row_sum))[..., 0].astype(q.dtype)
    if dropout_p > 0:
        keep = dropout_keep_mask_numpy(seed, B, H, T, S, dropout_p)
        keep_scale = 1.0 / (1.0 - dropout_p) if dropout_p < 1 else 0.0
        z = np.where(keep, q.dtype.type(keep_scale), q.dtype.type(0))
    else:
        z = np.ones_like(p)
    return p, z, lse


def attention_forward_numpy(q, k, v, bias=None, is_causal=False, scale=None, dropout_p=0.0,
                            seed=0) -> tuple[np.ndarray, np.ndarray]:
    """Plain-numpy twin of :func:`attention_forward`, materialising the ``(B, H, T, S)`` weights."""
    p, z, lse = _weights_numpy(q, k, bias, is_causal, scale, dropout_p, seed)
    return (p * z) @ v, lse


def attention_backward_numpy(q, k, v, out, lse, dout, bias=None, is_causal=False, scale=None,
                             dropout_p=0.0, seed=0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Plain-numpy twin of :func:`attention_backward`.

    It recomputes the full weights and takes the softmax row term as ``Σ_j p_ij dp_ij`` directly
    (not through ``out`` and ``lse``), so it also checks the identity the fused kernel relies on.
    """
    p, z, _ = _weights_numpy(q, k, bias, is_causal, scale, dropout_p, seed)
    D = q.shape[-1]
    if scale is None:
        scale = 1.0 / math.sqrt(D) if D > 0 else 1.0
    scale = q.dtype.type(scale)
    dv = np.swapaxes(p * z, -1, -2) @ dout  # (B, H, S, Dv)
    dp = (dout @ np.swapaxes(v, -1, -2)) * z  # (B, H, T, S)
    ds = p * (dp - (p * dp).sum(axis=-1, keepdims=True))
    return scale * (ds @ k), scale * (np.swapaxes(ds, -1, -2) @ q), dv

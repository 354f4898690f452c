"""Plain-numpy twins of the fused attention kernels in ``attention`` (the test oracle).

They repeat the key/value heads for grouped-query attention, materialise the full
``(B, H, T, S)`` weights with numpy and take the softmax row term of the backward directly, so
they share no code with the kernels they check.
"""

from __future__ import annotations

import math

import numpy as np

from .counter_rng import dropout_keep_mask_numpy


def _scale(q, scale):
    D = q.shape[-1]
    return q.dtype.type(scale if scale is not None else 1.0 / math.sqrt(D) if D > 0 else 1.0)


def _repeat_heads(x, n_heads):
    """``(B, Hkv, S, ·)`` → ``(B, H, S, ·)``: query head ``h`` reads key/value head ``h // G``."""
    return np.repeat(x, n_heads // x.shape[1], axis=1)


def _weights_numpy(q, k, bias, is_causal, scale, dropout_p, seed, window_size):
    """Materialised ``(p, z, lse)`` of the plain-numpy twins; ``k`` has all ``H`` heads."""
    B, H, T, D = q.shape
    S = k.shape[2]
    scores = _scale(q, scale) * (q @ np.swapaxes(k, -1, -2))  # (B, H, T, S)
    if bias is not None:
        scores = scores + bias.astype(q.dtype)
    offset = np.arange(T)[:, None] - np.arange(S)[None, :]  # i − j: (T, S)
    allowed = (offset >= 0) if is_causal else np.ones((T, S), dtype=bool)
    if window_size is not None:
        allowed &= np.abs(offset) < window_size
    scores = np.where(allowed, scores, q.dtype.type(-np.inf))
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
                            seed=0, window_size=None) -> tuple[np.ndarray, np.ndarray]:
    """Plain-numpy twin of :func:`attention_forward`, materialising the ``(B, H, T, S)`` weights."""
    k, v = _repeat_heads(k, q.shape[1]), _repeat_heads(v, q.shape[1])  # (B, H, S, D|Dv)
    p, z, lse = _weights_numpy(q, k, bias, is_causal, scale, dropout_p, seed, window_size)
    return (p * z) @ v, lse


def attention_backward_numpy(q, k, v, out, lse, dout, bias=None, is_causal=False, scale=None,
                             dropout_p=0.0, seed=0,
                             window_size=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Plain-numpy twin of :func:`attention_backward`.

    It recomputes the full weights and takes the softmax row term as ``Σ_j p_ij dp_ij`` directly
    (not through ``out`` and ``lse``), so it also checks the identity the fused kernel relies on.
    The gradients of the repeated key/value heads are summed back onto ``k`` and ``v``.
    """
    B, Hkv, S = k.shape[:3]
    group = q.shape[1] // Hkv
    k, v = _repeat_heads(k, q.shape[1]), _repeat_heads(v, q.shape[1])  # (B, H, S, D|Dv)
    p, z, _ = _weights_numpy(q, k, bias, is_causal, scale, dropout_p, seed, window_size)
    dv = np.swapaxes(p * z, -1, -2) @ dout  # (B, H, S, Dv)
    dp = (dout @ np.swapaxes(v, -1, -2)) * z  # (B, H, T, S)
    ds = p * (dp - (p * dp).sum(axis=-1, keepdims=True))
    dk = _scale(q, scale) * (np.swapaxes(ds, -1, -2) @ q)  # (B, H, S, D)
    dq = _scale(q, scale) * (ds @ k)
    # the gradient of a repeated key/value head is the sum over its group of query heads
    dk = dk.reshape(B, Hkv, group, S, dk.shape[-1]).sum(axis=2)  # (B, Hkv, S, D)
    dv = dv.reshape(B, Hkv, group, S, dv.shape[-1]).sum(axis=2)  # (B, Hkv, S, Dv)
    return dq, dk, dv

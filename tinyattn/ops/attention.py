"""Scaled dot-product attention in its two forms, side by side.

For queries ``q (..., H, T, D)``, keys ``k (..., Hkv, S, D)`` and values ``v (..., Hkv, S, Dv)``
(``Hkv`` divides ``H``: grouped-query attention shares one key/value head among ``H / Hkv``
query heads)::

    scores  = scale · q kᵀ  (+ a float mask, −inf where a boolean mask, causality or the
                             sliding window forbids)                          (..., H, T, S)
    weights = softmax(scores, dim=-1) ⊙ z     (z: inverted-dropout factors)
    output  = weights v                                                       (..., H, T, Dv)

:func:`attention_composed` records every step as its own op (so each intermediate can
``retain_grad()`` and the backward falls out of the engine); :class:`FusedAttention` is one op on
the flash-style kernel of :mod:`tinyattn.kernels.attention`, which never materialises the
``(T, S)`` weights and has a hand-derived backward (its numpy twin,
:mod:`tinyattn.kernels.attention_reference`, states it in a few lines). Both draw their dropout
mask from the same counter-based generator keyed by ``(seed, b, h, i, j)``, so with one seed
they drop the same weights and agree.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..autograd import Context, Function, grad
from ..kernels.attention import attention_backward, attention_forward
from ..kernels.counter_rng import dropout_keep_mask
from ..tensor import Tensor
from .dropout import keep_scale
from .masking import masked_fill
from .matmul import matmul
from .softmax import softmax


def default_scale(head_size: int) -> float:
    """The score scale ``1 / √D`` (1 for an empty head)."""
    return 1.0 / math.sqrt(head_size) if head_size else 1.0


def heads_layout(lead: tuple[int, ...]) -> tuple[int, int]:
    """The kernel's ``(B, H)`` for leading dims ``lead``: the last dim is H, the rest B."""
    if not lead:
        return 1, 1
    return math.prod(lead[:-1]), lead[-1]


def band_mask(T: int, S: int, is_causal: bool, window_size: int | None) -> np.ndarray | None:
    """``(T, S)`` bool, True where query ``i`` may see key ``j``: causal ``j <= i``; with a
    window also ``i − j < window_size`` (causal) or ``|i − j| < window_size`` (not causal)."""
    if not is_causal and window_size is None:
        return None
    i = np.arange(T)[:, None]
    j = np.arange(S)[None, :]
    allowed = np.ones((T, S), bool)
    if is_causal:
        allowed &= j <= i
    if window_size is not None:
        allowed &= (i - j < window_size) if is_causal else (np.abs(i - j) < window_size)
    return allowed


def attention_composed(q: Tensor, k: Tensor, v: Tensor, attn_mask: Tensor | None = None,
                       dropout_p: float = 0.0, is_causal: bool = False, scale: float = 1.0,
                       seed: int = 0, window_size: int | None = None,
                       scores_hook: Callable | None = None,
                       weights_hook: Callable | None = None) -> tuple[Tensor, Tensor]:
    """Every step a recorded op; returns ``(output, weights)`` (the weights after dropout).

    ``attn_mask``: bool (True = may attend) or float (added), broadcasting to the scores.
    ``scores_hook`` / ``weights_hook`` (e.g. hook points) see the masked scores and the
    softmax weights, and may replace them.
    """
    T, S = q.shape[-2], k.shape[-2]
    H, Hkv = (q.shape[-3], k.shape[-3]) if q.ndim > 2 else (1, 1)
    if Hkv != H:  # grouped-query: each key/value head serves H / Hkv query heads
        k = k.repeat_interleave(H // Hkv, dim=-3)  # (..., H, S, D)
        v = v.repeat_interleave(H // Hkv, dim=-3)  # (..., H, S, Dv)
    scores = matmul(q, k.transpose(-2, -1)) * scale  # (..., H, T, S)
    allowed = band_mask(T, S, is_causal, window_size)
    if attn_mask is not None and attn_mask.dtype == np.bool_:
        allowed = attn_mask.numpy() if allowed is None else allowed & attn_mask.numpy()
    elif attn_mask is not None:
        scores = scores + attn_mask
    if allowed is not None:
        scores = masked_fill(scores, Tensor(~allowed), -np.inf)
    if scores_hook is not None:
        scores = scores_hook(scores)
    weights = softmax(scores, dim=-1)  # (..., H, T, S)
    if weights_hook is not None:
        weights = weights_hook(weights)
    if dropout_p > 0.0:
        B, H = heads_layout(q.shape[:-2])
        keep = dropout_keep_mask(seed, B, H, T, S, dropout_p).reshape(weights.shape)
        weights = weights * Tensor(np.where(keep, keep_scale(dropout_p), 0.0).astype(q.dtype))
    return matmul(weights, v), weights  # (..., H, T, Dv), (..., H, T, S)


def _four_dims(q: np.ndarray, k: np.ndarray,
               v: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``q, k, v`` as the kernels' ``(B, H, T, D)``, ``(B, Hkv, S, D)``, ``(B, Hkv, S, Dv)``
    (views where the layout allows; the leading dims before the heads are flattened)."""
    B, H = heads_layout(q.shape[:-2])
    Hkv = k.shape[-3] if k.ndim > 2 else 1
    return (q.reshape(B, H, *q.shape[-2:]), k.reshape(B, Hkv, *k.shape[-2:]),
            v.reshape(B, Hkv, *v.shape[-2:]))


class FusedAttention(Function):
    """Attention as one op on the fused kernel; saves its inputs, ``out`` and the row ``lse``.

    Forward: ``s = scale · q kᵀ + bias`` (−inf outside the causal/window band),
    ``lse_i = log Σ_j e^(s_ij)``, ``out = (e^(s − lse) ⊙ z) v``.

    Backward: with ``p = e^(s − lse)`` recomputed block by block and ``δ_i = g_i · out_i``:
    ``dv = (p ⊙ z)ᵀ g``, ``ds = p ⊙ ((g vᵀ) ⊙ z − δ)``, ``dq = scale · ds k``,
    ``dk = scale · dsᵀ q`` (for grouped heads, ``dk`` and ``dv`` summed over the group).

    Under ``create_graph=True`` the backward is differentiated through a recorded
    recomputation on the composed path (same mask, same dropout seed), so second derivatives
    equal the composed path's.
    """

    @staticmethod
    def forward(ctx: Context, q: np.ndarray, k: np.ndarray, v: np.ndarray,
                bias: np.ndarray | None, mask: np.ndarray | None, is_causal: bool,
                scale: float, dropout_p: float, seed: int,
                window_size: int | None) -> np.ndarray:
        options = dict(bias=bias, is_causal=is_causal, scale=scale, dropout_p=dropout_p,
                       seed=seed, window_size=window_size)
        out, lse = attention_forward(*_four_dims(q, k, v), **options)
        # q, k, v themselves (not copies: the kernels read a projection's strided heads in place)
        ctx.save_for_backward(q, k, v, out, lse, options, mask)
        return out.reshape(*q.shape[:-1], v.shape[-1])  # (..., H, T, Dv)

    @staticmethod
    def backward(ctx: Context, grad_out: np.ndarray) -> tuple[np.ndarray, ...]:
        q, k, v, out, lse, options, _ = ctx.saved
        dout = grad_out.reshape(out.shape)  # (B, H, T, Dv)
        grads = attention_backward(*_four_dims(q, k, v), out, lse, dout, **options)
        return tuple(g.reshape(x.shape) for g, x in zip(grads, (q, k, v)))

    @staticmethod
    def differentiable_backward(ctx: Context, grad_out: Tensor) -> tuple[Tensor | None, ...]:
        q, k, v = ctx.inputs
        _, _, _, _, _, options, mask = ctx.saved
        attn_mask = None if mask is None else Tensor(mask)
        out, _ = attention_composed(q, k, v, attn_mask, options["dropout_p"],
                                    options["is_causal"], options["scale"], options["seed"],
                                    options["window_size"])
        wanted = [t for t, need in zip((q, k, v), ctx.needs_input_grad) if need]
        found = iter(grad(out, wanted, grad_out, create_graph=True, allow_unused=True))
        return tuple(next(found) if need else None for need in ctx.needs_input_grad)

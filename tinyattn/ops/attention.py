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

from ..autograd import Context, Function, is_grad_enabled
from ..kernels.attention import attention_backward, attention_forward
from ..kernels.counter_rng import dropout_keep_mask
from ..tensor import Tensor, from_numpy
from .attention_masks import band
from .dropout import keep_scale
from .masking import masked_fill
from .matmul import matmul
from .notation import factor, operand, transpose
from .softmax import softmax


def default_scale(head_size: int) -> float:
    """The score scale ``1 / √D`` (1 for an empty head)."""
    return 1.0 / math.sqrt(head_size) if head_size else 1.0


def heads_layout(lead: tuple[int, ...]) -> tuple[int, int]:
    """The kernel's ``(B, H)`` for leading dims ``lead``: the last dim is H, the rest B."""
    if not lead:
        return 1, 1
    return math.prod(lead[:-1]), lead[-1]


def attention_weights(q: Tensor, k: Tensor, attn_mask: Tensor | None = None,
                      is_causal: bool = False, scale: float = 1.0,
                      window_size: int | None = None,
                      scores_hook: Callable | None = None,
                      weights_hook: Callable | None = None) -> Tensor:
    """``P = softmax(scale · q kᵀ + mask)`` as recorded ops, ``(..., H, T, S)``; grouped key
    heads are repeated for their query heads. ``scores_hook`` / ``weights_hook`` (e.g. hook
    points) see the masked scores and the weights, and may replace them."""
    T, S = q.shape[-2], k.shape[-2]
    H, Hkv = (q.shape[-3], k.shape[-3]) if q.ndim > 2 else (1, 1)
    if Hkv != H:  # grouped-query: each key/value head serves H / Hkv query heads
        k = k.repeat_interleave(H // Hkv, dim=-3)  # (..., H, S, D)
    scores = matmul(q, k.transpose(-2, -1)) * scale  # (..., H, T, S)
    allowed = band(T, S, is_causal, window_size)
    if attn_mask is not None and attn_mask.dtype == np.bool_:
        allowed = attn_mask.numpy() if allowed is None else allowed & attn_mask.numpy()
    elif attn_mask is not None:
        scores = scores + attn_mask
    if allowed is not None:
        scores = masked_fill(scores, from_numpy(~allowed), -np.inf)
    if scores_hook is not None:
        scores = scores_hook(scores)
    weights = softmax(scores, dim=-1)  # (..., H, T, S)
    return weights if weights_hook is None else weights_hook(weights)


def dropout_factors(seed: int, shape: tuple[int, ...], p: float, dtype: np.dtype) -> Tensor:
    """The inverted-dropout factors ``z`` (``1/(1−p)`` kept, 0 dropped) of the weights of
    shape ``(..., H, T, S)``: the counter-based mask of the fused kernel, keyed by
    ``(seed, b, h, i, j)``."""
    B, H = heads_layout(shape[:-2])
    keep = dropout_keep_mask(seed, B, H, shape[-2], shape[-1], p).reshape(shape)
    return from_numpy(np.where(keep, keep_scale(p), 0.0).astype(dtype))


def attention_composed(q: Tensor, k: Tensor, v: Tensor, attn_mask: Tensor | None = None,
                       dropout_p: float = 0.0, is_causal: bool = False, scale: float = 1.0,
                       seed: int = 0, window_size: int | None = None,
                       scores_hook: Callable | None = None,
                       weights_hook: Callable | None = None) -> tuple[Tensor, Tensor]:
    """Every step a recorded op; returns ``(output, weights)`` (the weights after dropout).

    ``attn_mask``: bool (True = may attend) or float (added), broadcasting to the scores.
    """
    weights = attention_weights(q, k, attn_mask, is_causal, scale, window_size, scores_hook,
                                weights_hook)  # (..., H, T, S)
    H, Hkv = (q.shape[-3], v.shape[-3]) if q.ndim > 2 else (1, 1)
    if Hkv != H:
        v = v.repeat_interleave(H // Hkv, dim=-3)  # (..., H, S, Dv)
    if dropout_p > 0.0:
        weights = weights * dropout_factors(seed, weights.shape, dropout_p, q.dtype)
    return matmul(weights, v), weights  # (..., H, T, Dv), (..., H, T, S)


def _four_dims(q: np.ndarray, k: np.ndarray,
               v: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``q, k, v`` as the kernels' ``(B, H, T, D)``, ``(B, Hkv, S, D)``, ``(B, Hkv, S, Dv)``
    (views where the layout allows; the leading dims before the heads are flattened)."""
    if q.ndim == k.ndim == v.ndim == 4:  # (B, H, ·, ·) already, as a model passes them
        return q, k, v
    B, H = heads_layout(q.shape[:-2])
    Hkv = k.shape[-3] if k.ndim > 2 else 1
    return (q.reshape(B, H, *q.shape[-2:]), k.reshape(B, Hkv, *k.shape[-2:]),
            v.reshape(B, Hkv, *v.shape[-2:]))


class FusedAttention(Function):
    """Attention as one op on the fused kernel; saves its inputs, ``out`` and the row ``lse``.

    Forward: ``s = scale · q kᵀ + bias`` (−inf outside the causal/window band),
    ``lse_i = log Σ_j e^(s_ij)``, ``out = (e^(s − lse) ⊙ z) v``.

    Backward: with ``p = e^(s − lse)`` and ``δ_i = g_i · out_i``:
    ``dv = (p ⊙ z)ᵀ g``, ``ds = p ⊙ ((g vᵀ) ⊙ z − δ)``, ``dq = scale · ds k``,
    ``dk = scale · dsᵀ q`` (for grouped heads, ``dk`` and ``dv`` summed over the group). The
    kernel recomputes ``p`` block by block and never stores it; the rule in tensor ops
    (under ``create_graph``) materialises it, so its second derivatives are the composed
    path's.
    """

    named_gradient = True

    @staticmethod
    def forward(ctx: Context, q: Tensor, k: Tensor, v: Tensor, bias: np.ndarray | None,
                mask: np.ndarray | None, is_causal: bool, scale: float, dropout_p: float,
                seed: int, window_size: int | None) -> Tensor:
        options = dict(bias=bias, is_causal=is_causal, scale=scale, dropout_p=dropout_p,
                       seed=seed, window_size=window_size)
        qa, ka, va = q.numpy(), k.numpy(), v.numpy()
        out, lse = attention_forward(*_four_dims(qa, ka, va), **options)
        # q, k, v themselves (not copies: the kernels read a projection's strided heads in place)
        output = from_numpy(out.reshape(*qa.shape[:-1], va.shape[-1]))  # (..., H, T, Dv)
        ctx.save_for_backward(q, k, v, output)
        ctx.lse, ctx.options, ctx.mask = lse, options, mask
        return output

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> tuple[Tensor | None, ...]:
        q, k, v, out = ctx.saved_tensors
        options = ctx.options
        if not is_grad_enabled():  # fast path: the flash-style kernel, when no graph is built
            qa, ka, va, oa = q.numpy(), k.numpy(), v.numpy(), out.numpy()
            four = _four_dims(qa, ka, va)
            dout = grad.numpy().reshape(four[0].shape[:-1] + (va.shape[-1],))  # (B, H, T, Dv)
            grads = attention_backward(*four, oa.reshape(dout.shape), ctx.lse, dout, **options)
            return tuple(from_numpy(g.reshape(x.shape)) for g, x in zip(grads, (qa, ka, va))) \
                + (None,) * 7
        attn_mask = None if ctx.mask is None else from_numpy(ctx.mask)
        weights = attention_weights(q, k, attn_mask, options["is_causal"], options["scale"],
                                    options["window_size"])  # P, (..., H, T, S)
        H, Hkv = (q.shape[-3], k.shape[-3]) if q.ndim > 2 else (1, 1)
        group = H // Hkv
        keys = k.repeat_interleave(group, dim=-3) if group > 1 else k  # (..., H, S, D)
        values = v.repeat_interleave(group, dim=-3) if group > 1 else v  # (..., H, S, Dv)
        dweights = matmul(grad, values.transpose(-2, -1))  # dP = g vᵀ, (..., H, T, S)
        kept = weights
        if options["dropout_p"] > 0.0:
            factors = dropout_factors(options["seed"], weights.shape, options["dropout_p"],
                                      q.dtype)
            kept, dweights = weights * factors, dweights * factors
        dvalues = matmul(kept.transpose(-2, -1), grad)  # dv = (p ⊙ z)ᵀ g, (..., H, S, Dv)
        dscores = weights * (dweights - (dweights * weights).sum(-1, keepdim=True))  # dS
        dq = matmul(dscores, keys) * options["scale"]  # (..., H, T, D)
        dkeys = matmul(dscores.transpose(-2, -1), q) * options["scale"]  # (..., H, S, D)
        if group > 1:  # each key/value head served `group` query heads: sum their gradients
            dkeys = _sum_groups(dkeys, Hkv, group)
            dvalues = _sum_groups(dvalues, Hkv, group)
        return (dq, dkeys, dvalues) + (None,) * 7

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        return (f"s · dS · {x[1]}  with dS = P ⊙ ({factor(g)} · {transpose(x[2])} − δ), "
                f"P = softmax(s · {x[0]} · {transpose(x[1])}), δ = rowsum({operand(g)} ⊙ {out})",
                f"s · dSᵀ · {x[0]}  with dS as for {x[0]}", f"Pᵀ · {factor(g)}")[slot]


def _sum_groups(grad: Tensor, Hkv: int, group: int) -> Tensor:
    """``(..., Hkv · group, L, D)`` summed over each key/value head's group of query heads."""
    lead, (L, D) = grad.shape[:-3], grad.shape[-2:]
    return grad.reshape(*lead, Hkv, group, L, D).sum(-3)  # (..., Hkv, L, D)

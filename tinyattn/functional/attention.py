"""Scaled dot-product attention, composed from recorded ops or fused into one kernel call.

For queries ``Q (..., L, E)``, keys ``K (..., S, E)`` and values ``V (..., S, Ev)``::

    scores  = scale · Q Kᵀ (+ float mask, or −inf where a boolean mask forbids)   (..., L, S)
    weights = softmax(scores, dim=-1) ⊙ z           (z: inverted-dropout factors)
    output  = weights V                                                           (..., L, Ev)

The *composed* path records every step as its own op, so each intermediate can
``retain_grad()``; the *fused* path is one :class:`FusedAttention` Function on the flash-style
kernel, which never materialises the ``(L, S)`` weights. Both draw their dropout mask from the
same counter-based generator under one seed from :func:`tinyattn.random.draw_seed`, so with the
same ``ta.manual_seed`` they drop the same weights and agree.
"""

from __future__ import annotations

import math

import numpy as np

from ..autograd import Context, Function
from ..kernels.parallel import kernel_section
from ..ops import masked_fill, matmul, softmax
from ..random import draw_seed
from ..tensor import Tensor
from .dropout import check_probability

_IMPLS = ("auto", "composed", "fused")


def _heads_layout(lead: tuple[int, ...]) -> tuple[int, int]:
    """The kernel's ``(B, H)`` for leading dims ``lead``: the last dim is H, the rest B."""
    if not lead:
        return 1, 1
    return math.prod(lead[:-1]), lead[-1]


class FusedAttention(Function):
    """Fused attention on ``kernels.attention``; saves only ``out`` and the row ``lse``.

    Forward: ``s = scale · q kᵀ + bias`` (−inf above the diagonal if causal),
    ``lse_i = log Σ_j e^(s_ij)``, ``out = (e^(s − lse) ⊙ z) v``.

    Backward: with ``p = e^(s − lse)`` recomputed block by block and ``δ_i = g_i · out_i``:
    ``dv = (p ⊙ z)ᵀ g``, ``ds = p ⊙ ((g vᵀ) ⊙ z − δ)``, ``dq = scale · ds k``,
    ``dk = scale · dsᵀ q``.
    """

    @staticmethod
    def forward(ctx: Context, q: np.ndarray, k: np.ndarray, v: np.ndarray,
                bias: np.ndarray | None, is_causal: bool, scale: float, dropout_p: float,
                seed: int) -> np.ndarray:
        from ..kernels.attention import attention_forward

        B, H = _heads_layout(q.shape[:-2])
        q4 = q.reshape(B, H, *q.shape[-2:])  # (B, H, L, E)
        k4 = k.reshape(B, H, *k.shape[-2:])  # (B, H, S, E)
        v4 = v.reshape(B, H, *v.shape[-2:])  # (B, H, S, Ev)
        options = dict(bias=bias, is_causal=is_causal, scale=scale, dropout_p=dropout_p,
                       seed=seed)
        out, lse = attention_forward(q4, k4, v4, **options)
        ctx.save_for_backward(q4, k4, v4, out, lse, options, (q.shape, k.shape, v.shape))
        return out.reshape(*q.shape[:-1], v.shape[-1])  # (..., L, Ev)

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        from ..kernels.attention import attention_backward

        q4, k4, v4, out, lse, options, shapes = ctx.saved
        dout = np.ascontiguousarray(grad).reshape(out.shape)  # (B, H, L, Ev)
        grads = attention_backward(q4, k4, v4, out, lse, dout, **options)
        return tuple(g.reshape(shape) for g, shape in zip(grads, shapes))  # (..., L|S, E|Ev)


def _check_inputs(query: Tensor, key: Tensor, value: Tensor) -> None:
    name = "scaled_dot_product_attention"
    for label, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name}: {label} must be a Tensor, got {type(t).__name__}")
        if t.dtype.kind != "f":
            raise TypeError(f"{name}: {label} must be a float tensor, got dtype {t.dtype}")
        if t.ndim < 2:
            raise ValueError(f"{name}: {label} must have at least 2 dims (..., length, "
                             f"features), got shape {t.shape}")
    if not query.dtype == key.dtype == value.dtype:
        raise TypeError(f"{name}: query, key and value must share one dtype, got {query.dtype}, "
                        f"{key.dtype} and {value.dtype}")
    if not query.shape[:-2] == key.shape[:-2] == value.shape[:-2]:
        raise ValueError(f"{name}: query {query.shape}, key {key.shape} and value {value.shape} "
                         "must have the same leading (batch) dims")
    if key.shape[-1] != query.shape[-1]:
        raise ValueError(f"{name}: query (..., L, E) = {query.shape} and key (..., S, E) = "
                         f"{key.shape} must have the same feature size E")
    if value.shape[-2] != key.shape[-2]:
        raise ValueError(f"{name}: key (..., S, E) = {key.shape} and value (..., S, Ev) = "
                         f"{value.shape} must have the same length S")


def _check_mask(attn_mask: Tensor | np.ndarray | None, query: Tensor,
                scores_shape: tuple[int, ...]) -> Tensor | None:
    """``attn_mask`` as a Tensor (bool, or float of the query's dtype) that broadcasts to the
    scores ``(..., L, S)``."""
    name = "scaled_dot_product_attention"
    if attn_mask is None:
        return None
    if isinstance(attn_mask, np.ndarray):
        attn_mask = Tensor(attn_mask)
    if not isinstance(attn_mask, Tensor):
        raise TypeError(f"{name}: attn_mask must be a Tensor or numpy array, got "
                        f"{type(attn_mask).__name__}")
    if attn_mask.dtype != np.bool_ and attn_mask.dtype != query.dtype:
        raise TypeError(f"{name}: attn_mask must be boolean or have the query's dtype "
                        f"{query.dtype}, got {attn_mask.dtype}")
    try:
        joint = np.broadcast_shapes(attn_mask.shape, scores_shape)
    except ValueError:
        joint = None
    if joint != scores_shape:
        raise ValueError(f"{name}: attn_mask of shape {attn_mask.shape} does not broadcast to "
                         f"the scores' shape (..., L, S) = {scores_shape}")
    return attn_mask


def _mask_as_bias(attn_mask: Tensor, scores_shape: tuple[int, ...]) -> np.ndarray:
    """The mask as the kernel's additive 4-D bias: sizes 1 or equal to ``(B, H, L, S)``."""
    lead = scores_shape[:-2]
    bias = attn_mask.data
    if bias.dtype == np.bool_:
        zero, blocked = np.zeros((), np.float64), np.full((), -np.inf)
        bias = np.where(bias, zero, blocked)
    bias = bias.reshape((1,) * (len(scores_shape) - bias.ndim) + bias.shape)  # (..., L, S)
    if not lead:
        return bias.reshape(1, 1, *bias.shape)  # (1, 1, L, S)
    outer, rest = bias.shape[: len(lead) - 1], bias.shape[len(lead) - 1:]
    if all(n == 1 for n in outer):
        return bias.reshape(1, *rest)  # (1, H or 1, L or 1, S or 1)
    B, _ = _heads_layout(lead)
    full = np.broadcast_to(bias, lead[:-1] + rest)
    return full.reshape(B, *rest)  # (B, H or 1, L or 1, S or 1)


def _composed(query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None,
              dropout_p: float, is_causal: bool, scale: float) -> tuple[Tensor, Tensor]:
    """Every step a recorded op; returns ``(output, weights)`` (weights after dropout)."""
    L, S = query.shape[-2], key.shape[-2]
    scores = matmul(query, key.transpose(-2, -1)) * scale  # (..., L, S)
    if is_causal:
        allowed = np.tril(np.ones((L, S), dtype=bool))
        scores = masked_fill(scores, ~allowed, -np.inf)
    elif attn_mask is not None and attn_mask.dtype == np.bool_:
        scores = masked_fill(scores, ~attn_mask.data, -np.inf)
    elif attn_mask is not None:
        scores = scores + attn_mask
    weights = softmax(scores, dim=-1)
    if dropout_p > 0.0:
        from ..kernels.counter_rng import dropout_keep_mask

        lead = query.shape[:-2]
        with kernel_section:
            keep = dropout_keep_mask(draw_seed(), *_heads_layout(lead), L, S, dropout_p)
        keep = keep.reshape(*lead, L, S)  # (..., L, S)
        keep_scale = 1.0 / (1.0 - dropout_p) if dropout_p < 1.0 else 0.0
        weights = weights * Tensor(np.where(keep, keep_scale, 0.0).astype(query.dtype))
    return matmul(weights, value), weights


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | np.ndarray | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    need_weights: bool = False,
    impl: str = "auto",
) -> Tensor | tuple[Tensor, Tensor]:
    """Attention ``softmax(scale · Q Kᵀ + mask) V`` with PyTorch's arguments and semantics.

    Parameters
    ----------
    query, key, value : Tensor
        ``(..., L, E)``, ``(..., S, E)``, ``(..., S, Ev)``, one float dtype, equal leading dims.
    attn_mask : Tensor or np.ndarray, optional
        Broadcasts to ``(..., L, S)``. Boolean: True where a query MAY attend. Float (the
        query's dtype): added to the scores (``-inf`` forbids).
    dropout_p : float
        Probability of dropping an attention weight (inverted dropout), in ``[0, 1]``.
    is_causal : bool
        Query ``i`` attends key ``j`` only if ``j <= i`` (top-left aligned ``tril(ones(L, S))``);
        cannot be combined with ``attn_mask``.
    scale : float, optional
        Score scale, ``1 / sqrt(E)`` when None.
    need_weights : bool
        (+) Also return the attention weights ``(..., L, S)``: after softmax and after dropout,
        i.e. the weights the output was computed with (as ``torch.nn.MultiheadAttention``).
    impl : {'auto', 'composed', 'fused'}
        (+) ``'composed'`` records each step as an op; ``'fused'`` runs one kernel;
        ``'auto'`` is fused unless ``need_weights`` is set or a float ``attn_mask`` requires
        grad (the fused kernel has no mask gradient).

    Returns
    -------
    Tensor or (Tensor, Tensor)
        The output ``(..., L, Ev)``, and the weights when ``need_weights``. A query whose keys
        are all masked gets a zero output and zero gradients, never NaN.

    Examples
    --------
    >>> import tinyattn as ta
    >>> q, k, v = ta.randn(2, 4, 5, 8), ta.randn(2, 4, 6, 8), ta.randn(2, 4, 6, 3)
    >>> ta.F.scaled_dot_product_attention(q, k, v).shape
    (2, 4, 5, 3)
    >>> out, weights = ta.F.scaled_dot_product_attention(q, k, v, need_weights=True)
    >>> weights.shape, bool(abs(weights.numpy().sum(-1) - 1).max() < 1e-5)
    ((2, 4, 5, 6), True)
    """
    name = "scaled_dot_product_attention"
    _check_inputs(query, key, value)
    scores_shape = query.shape[:-1] + (key.shape[-2],)
    attn_mask = _check_mask(attn_mask, query, scores_shape)
    if is_causal and attn_mask is not None:
        raise ValueError(f"{name}: pass either attn_mask or is_causal=True, not both")
    dropout_p = check_probability(name, dropout_p)
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1]) if query.shape[-1] else 1.0
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale):
        raise ValueError(f"{name}: scale must be a finite number or None, got {scale!r}")
    if impl not in _IMPLS:
        raise ValueError(f"{name}: impl must be one of {_IMPLS}, got {impl!r}")
    mask_needs_grad = attn_mask is not None and attn_mask.requires_grad
    if impl == "fused" and need_weights:
        raise ValueError(f"{name}: impl='fused' never materialises the attention weights; use "
                         "impl='composed' or 'auto' with need_weights=True")
    if impl == "fused" and mask_needs_grad:
        raise ValueError(f"{name}: impl='fused' cannot differentiate a float attn_mask that "
                         "requires grad; use impl='composed' or 'auto'")
    if impl == "composed" or (impl == "auto" and (need_weights or mask_needs_grad)):
        output, weights = _composed(query, key, value, attn_mask, dropout_p, bool(is_causal),
                                    float(scale))
        return (output, weights) if need_weights else output
    bias = None if attn_mask is None else _mask_as_bias(attn_mask, scores_shape)
    seed = draw_seed() if dropout_p > 0.0 else 0
    return FusedAttention.apply(query, key, value, bias=bias, is_causal=bool(is_causal),
                                scale=float(scale), dropout_p=dropout_p, seed=seed)

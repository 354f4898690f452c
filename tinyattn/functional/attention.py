"""``scaled_dot_product_attention``: checks its arguments once and dispatches to one of the two
attention paths of :mod:`tinyattn.ops.attention` — *composed* (every step a recorded op) or
*fused* (one op on the flash-style kernel) — and says which one it took and why.

Dimensions: ``B`` batch, ``H`` query heads, ``Hkv`` key/value heads, ``T`` queries, ``S`` keys,
``D`` head size (the paper's ``d_k``), ``Dv`` value head size.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ..errors import DTypeError, ShapeError
from ..ops.attention import FusedAttention, attention_composed, default_scale, heads_layout
from ..random import draw_seed
from ..tensor import Tensor, check_float, check_mask
from ..validation import check_choice, check_int, check_number, check_probability

IMPLS = ("auto", "composed", "fused")
_OP = "scaled_dot_product_attention"


class AttentionPath(NamedTuple):
    """Which attention path a call takes (``'composed'`` or ``'fused'``) and why."""

    impl: str
    reason: str


def choose_path(impl: str, need_weights: bool = False, mask_requires_grad: bool = False,
                composed_for: str | None = None) -> AttentionPath:
    """The path for ``impl`` given what the call needs; ``impl='fused'`` where the fused kernel
    cannot serve is an error, never a silent switch.

    ``composed_for`` names another reason the caller needs the composed path (e.g. a hook on
    an attention intermediate).

    Examples
    --------
    >>> choose_path("auto", need_weights=True).impl
    'composed'
    >>> choose_path("auto").reason
    "impl='auto': the fused kernel serves this call"
    """
    check_choice(_OP, "impl", impl, IMPLS)
    needs = []
    if need_weights:
        needs.append("need_weights=True needs the (T, S) attention weights, which the fused "
                     "kernel never materialises")
    if mask_requires_grad:
        needs.append("a float attn_mask that requires grad needs its gradient, which the fused "
                     "kernel does not compute")
    if composed_for:
        needs.append(composed_for)
    if impl == "fused":
        if needs:
            raise ValueError(f"{_OP}: impl='fused' cannot serve this call: {'; '.join(needs)}; "
                             "use impl='composed' or 'auto'")
        return AttentionPath("fused", "impl='fused' was asked for")
    if impl == "composed":
        return AttentionPath("composed", "impl='composed' was asked for")
    if needs:
        return AttentionPath("composed", "impl='auto': " + "; ".join(needs))
    return AttentionPath("fused", "impl='auto': the fused kernel serves this call")


def _check_inputs(query: Tensor, key: Tensor, value: Tensor, enable_gqa: bool) -> None:
    for label, t in (("query", query), ("key", key), ("value", value)):
        check_float(_OP, label, t)
        if t.ndim < 2:
            raise ShapeError(f"{_OP}: {label} must have at least 2 dims (..., length, "
                               f"features), got shape {t.shape}")
    if not query.dtype == key.dtype == value.dtype:
        raise DTypeError(f"{_OP}: query, key and value must share one dtype, got "
                           f"{query.dtype}, {key.dtype} and {value.dtype}")
    if enable_gqa and query.ndim >= 3:
        H, Hkv = query.shape[-3], key.shape[-3]
        if query.shape[:-3] != key.shape[:-3] or key.shape[:-2] != value.shape[:-2]:
            raise ShapeError(f"{_OP}: query (..., H, T, D) = {query.shape}, key (..., Hkv, "
                               f"S, D) = {key.shape} and value {value.shape} must have the "
                               "same batch dims")
        if Hkv == 0 or H % Hkv:
            raise ShapeError(f"{_OP}: with enable_gqa the number of query heads {H} must be "
                               f"a multiple of the number of key/value heads {Hkv}")
    elif not query.shape[:-2] == key.shape[:-2] == value.shape[:-2]:
        raise ShapeError(f"{_OP}: query {query.shape}, key {key.shape} and value "
                           f"{value.shape} must have the same leading (batch, head) dims "
                           "(pass enable_gqa=True for fewer key/value heads)")
    if key.shape[-1] != query.shape[-1]:
        raise ShapeError(f"{_OP}: query (..., T, D) = {query.shape} and key (..., S, D) = "
                           f"{key.shape} must have the same feature size D")
    if value.shape[-2] != key.shape[-2]:
        raise ShapeError(f"{_OP}: key (..., S, D) = {key.shape} and value (..., S, Dv) = "
                           f"{value.shape} must have the same length S")


def _check_mask(attn_mask: Any, query: Tensor, scores_shape: tuple[int, ...]) -> Tensor | None:
    """``attn_mask`` as a Tensor (bool, or float of the query's dtype) that broadcasts to the
    scores ``(..., H, T, S)``."""
    if attn_mask is None:
        return None
    attn_mask = check_mask(_OP, "attn_mask", attn_mask, query.dtype)
    try:
        joint = np.broadcast_shapes(attn_mask.shape, scores_shape)
    except ValueError:
        joint = None
    if joint != scores_shape:
        raise ShapeError(f"{_OP}: attn_mask of shape {attn_mask.shape} does not broadcast "
                           f"to the scores' shape (..., H, T, S) = {scores_shape}")
    return attn_mask


def _mask_as_bias(attn_mask: Tensor, scores_shape: tuple[int, ...]) -> np.ndarray:
    """The mask as the kernel's additive 4-D bias: sizes 1 or equal to ``(B, H, T, S)``."""
    lead = scores_shape[:-2]
    bias = attn_mask.numpy()
    if bias.dtype == np.bool_:
        bias = np.where(bias, np.zeros((), np.float64), np.full((), -np.inf))
    bias = bias.reshape((1,) * (len(scores_shape) - bias.ndim) + bias.shape)  # (..., T, S)
    if not lead:
        return bias.reshape(1, 1, *bias.shape)  # (1, 1, T, S)
    outer, rest = bias.shape[: len(lead) - 1], bias.shape[len(lead) - 1:]
    if all(n == 1 for n in outer):
        return bias.reshape(1, *rest)  # (1, H or 1, T or 1, S or 1)
    B, _ = heads_layout(lead)
    full = np.broadcast_to(bias, lead[:-1] + rest)
    return full.reshape(B, *rest)  # (B, H or 1, T or 1, S or 1)


def scaled_dot_product_attention(
    query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | np.ndarray | None = None,
    dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None,
    enable_gqa: bool = False, *, window_size: int | None = None, need_weights: bool = False,
    impl: str = "auto",
) -> Tensor | tuple[Tensor, Tensor]:
    """Attention ``softmax(scale · Q Kᵀ + mask) V`` with PyTorch's arguments and semantics.

    Parameters
    ----------
    query, key, value : Tensor
        ``(..., H, T, D)``, ``(..., Hkv, S, D)``, ``(..., Hkv, S, Dv)``, one float dtype;
        ``Hkv = H`` (equal leading dims) unless ``enable_gqa``.
    attn_mask : Tensor or np.ndarray, optional
        Broadcasts to ``(..., H, T, S)``. Boolean: True where a query MAY attend. Float (the
        query's dtype): added to the scores (``-inf`` forbids).
    dropout_p : float
        Probability of dropping an attention weight (inverted dropout), in ``[0, 1]``.
    is_causal : bool
        Query ``i`` attends key ``j`` only if ``j <= i`` (top-left aligned ``tril(ones(T, S))``);
        cannot be combined with ``attn_mask``.
    scale : float, optional
        Score scale, ``1 / sqrt(D)`` when None.
    enable_gqa : bool
        Grouped-query attention: key/value head ``h // (H / Hkv)`` serves query head ``h``.
    window_size : int, optional
        (+) Sliding window: with ``is_causal`` query ``i`` sees keys ``i − window_size < j ≤ i``,
        without it keys ``|i − j| < window_size``.
    need_weights : bool
        (+) Also return the attention weights ``(..., H, T, S)``: after softmax and after
        dropout, i.e. the weights the output was computed with.
    impl : {'auto', 'composed', 'fused'}
        (+) ``'composed'`` records each step as an op; ``'fused'`` runs one kernel (an error
        where it cannot serve the call); ``'auto'`` is fused unless :func:`choose_path` says
        otherwise.

    Returns
    -------
    Tensor or (Tensor, Tensor)
        The output ``(..., H, T, Dv)``, and the weights when ``need_weights``. A query whose keys
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
    _check_inputs(query, key, value, bool(enable_gqa))
    scores_shape = query.shape[:-1] + (key.shape[-2],)
    attn_mask = _check_mask(attn_mask, query, scores_shape)
    if is_causal and attn_mask is not None:
        raise ValueError(f"{_OP}: pass either attn_mask or is_causal=True, not both")
    dropout_p = check_probability(_OP, dropout_p)
    scale = default_scale(query.shape[-1]) if scale is None else check_number(_OP, "scale",
                                                                               scale)
    if window_size is not None:
        window_size = check_int(_OP, "window_size", window_size, 1)
    mask_needs_grad = attn_mask is not None and attn_mask.requires_grad
    path = choose_path(impl, need_weights, mask_needs_grad)
    seed = draw_seed() if dropout_p > 0.0 else 0
    if path.impl == "composed":
        output, weights = attention_composed(query, key, value, attn_mask, dropout_p,
                                             bool(is_causal), scale, seed, window_size)
        return (output, weights) if need_weights else output
    bias = None if attn_mask is None else _mask_as_bias(attn_mask, scores_shape)
    mask = None if attn_mask is None else attn_mask.numpy()
    return FusedAttention.apply(query, key, value, bias=bias, mask=mask,
                                is_causal=bool(is_causal), scale=scale, dropout_p=dropout_p,
                                seed=seed, window_size=window_size)

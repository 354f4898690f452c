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
from ..kernels import FLOAT_DTYPES
from ..ops.attention import FusedAttention, attention_composed, default_scale, heads_layout
from ..ops.attention_masks import kernel_bias, sdpa_mask
from ..random import draw_seed
from ..tensor import Tensor, check_float, check_kernel_dtype
from ..validation import check_choice, check_int, check_number, check_probability

IMPLS = ("auto", "composed", "fused")
_OP = "scaled_dot_product_attention"


class AttentionPath(NamedTuple):
    """Which attention path a call takes (``'composed'`` or ``'fused'``) and why."""

    impl: str
    reason: str


_FUSED_AUTO = AttentionPath("fused", "impl='auto': the fused kernel serves this call")


def choose_path(impl: str, need_weights: bool = False, mask_requires_grad: bool = False,
                composed_for: str | None = None, op: str = _OP) -> AttentionPath:
    """The path for ``impl`` given what the call needs; ``impl='fused'`` where the fused kernel
    cannot serve is an error, never a silent switch.

    ``op`` is the caller named in errors. ``composed_for`` names another reason the caller
    needs the composed path (e.g. a hook on an attention intermediate).

    Examples
    --------
    >>> choose_path("auto", need_weights=True).impl
    'composed'
    >>> choose_path("auto").reason
    "impl='auto': the fused kernel serves this call"
    """
    if impl == "auto" and not (need_weights or mask_requires_grad or composed_for):
        return _FUSED_AUTO  # the common call, answered without building the reasons
    check_choice(op, "impl", impl, IMPLS)
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
            raise ValueError(f"{op}: impl='fused' cannot serve this call: {'; '.join(needs)}; "
                             "use impl='composed' or 'auto'")
        return AttentionPath("fused", "impl='fused' was asked for")
    if impl == "composed":
        return AttentionPath("composed", "impl='composed' was asked for")
    if needs:
        return AttentionPath("composed", "impl='auto': " + "; ".join(needs))
    return _FUSED_AUTO


def _check_inputs(query: Tensor, key: Tensor, value: Tensor, enable_gqa: bool) -> None:
    tensors = (("query", query), ("key", key), ("value", value))
    if not (isinstance(query, Tensor) and isinstance(key, Tensor) and isinstance(value, Tensor)
            and query.dtype == key.dtype == value.dtype and query.dtype in FLOAT_DTYPES):
        for label, t in tensors:  # the first argument that is wrong, named
            check_kernel_dtype(_OP, check_float(_OP, label, t))
        if not query.dtype == key.dtype == value.dtype:
            raise DTypeError(f"{_OP}: query, key and value must share one dtype, got "
                             f"{query.dtype}, {key.dtype} and {value.dtype}")
    for label, t in tensors:
        if t.ndim < 2:
            raise ShapeError(f"{_OP}: {label} must have at least 2 dims (..., length, "
                               f"features), got shape {t.shape}")
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


def attend(query: Tensor, key: Tensor, value: Tensor, path: AttentionPath,
           attn_mask: Tensor | None = None, dropout_p: float = 0.0, is_causal: bool = False,
           scale: float | None = None, window_size: int | None = None,
           scores_hook: Any = None, weights_hook: Any = None) -> tuple[Tensor, Tensor | None]:
    """Attention on the path already chosen (``path``), for arguments already checked;
    returns ``(output, weights)`` (weights None on the fused path).

    ``attn_mask`` is an SDPA mask (True = may attend, or float added). The composed path calls
    ``scores_hook`` and ``weights_hook`` (hook points) on the masked scores and on the weights.
    This is what :func:`scaled_dot_product_attention` and the attention layers run after their
    checks and their one choice of path.
    """
    scale = default_scale(query.shape[-1]) if scale is None else scale
    seed = draw_seed() if dropout_p > 0.0 else 0
    empty = query.numel() == 0 or key.shape[-2] == 0  # the recorded ops handle empty shapes
    if path.impl == "composed" or empty:
        output, weights = attention_composed(query, key, value, attn_mask, dropout_p,
                                             is_causal, scale, seed, window_size, scores_hook,
                                             weights_hook)
        return output, weights if path.impl == "composed" else None
    scores_shape = query.shape[:-1] + (key.shape[-2],)
    bias = None
    if attn_mask is not None:
        bias = kernel_bias(attn_mask, scores_shape, heads_layout(scores_shape[:-2])[0])
    mask = None if attn_mask is None else attn_mask.numpy()
    output = FusedAttention.apply(query, key, value, bias, mask, bool(is_causal), scale,
                                  dropout_p, seed, window_size)
    return output, None


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
    attn_mask = sdpa_mask(_OP, attn_mask, query.dtype, scores_shape)
    if is_causal and attn_mask is not None:
        raise ValueError(f"{_OP}: pass either attn_mask or is_causal=True, not both")
    dropout_p = check_probability(_OP, dropout_p)
    scale = default_scale(query.shape[-1]) if scale is None else check_number(_OP, "scale",
                                                                               scale)
    if window_size is not None:
        window_size = check_int(_OP, "window_size", window_size, 1)
    mask_needs_grad = attn_mask is not None and attn_mask.requires_grad
    path = choose_path(impl, need_weights, mask_needs_grad)
    output, weights = attend(query, key, value, path, attn_mask, dropout_p, bool(is_causal),
                             scale, window_size)
    return (output, weights) if need_weights else output

"""``MultiheadAttention``: PyTorch's attention layer, with its packed projection and spelling.

The query, key and value projections live in one packed ``in_proj_weight`` ``(3C, C)`` (rows
``0:C`` project the query, ``C:2C`` the key, ``2C:3C`` the value) and one ``in_proj_bias``
``(3C,)``, as in ``torch.nn.MultiheadAttention``, so a PyTorch state dict loads as it is. When
the key or value width differs from ``C`` (``kdim``/``vdim``), the projections are separate:
``q_proj_weight`` ``(C, C)``, ``k_proj_weight`` ``(C, kdim)``, ``v_proj_weight`` ``(C, vdim)``.

It is a thin adapter over tinyattn's :class:`~tinyattn.nn.MultiHeadAttention`: PyTorch's
argument order, its ``(T, B, C)`` layout unless ``batch_first``, the packed projection and the
extra key columns of ``add_bias_kv`` / ``add_zero_attn``; the attention itself (masks, the
choice of path, the heads, ``out_proj``) is the same code.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..functional import linear
from ..functional.dropout import check_probability
from ..kernels.aligned import aligned_empty
from ..ops import cat
from ..tensor import Tensor
from ..validation import check_choice, check_int
from . import init
from .attention import IMPLS, MultiHeadAttention
from .linear import Linear
from .module import Module, Parameter, check_device, float_dtype

_NAME = "MultiheadAttention"


class _NoHook:
    """Stands where :class:`~tinyattn.nn.MultiHeadAttention` has a hook point: passes values
    through, and is never active."""

    active = False

    def __call__(self, value: Tensor) -> Tensor:
        return value


_NO_HOOK = _NoHook()


class MultiheadAttention(MultiHeadAttention):
    """Multi-head attention with the parameters, arguments and masks of
    ``torch.nn.MultiheadAttention``.

    ``out_proj(concat_h softmax(q_h k_hᵀ / √D + mask) v_h)``, where ``q_h`` is head ``h``'s
    ``D = C / num_heads`` columns of the projected query (likewise ``k_h``, ``v_h``).

    Parameters
    ----------
    embed_dim, num_heads : int
        Model width ``C`` and number of heads ``H`` (``C`` divisible by ``H``).
    dropout : float
        Dropout on the attention weights while training.
    bias : bool
        Whether the input projections (``in_proj_bias``) and ``out_proj`` have biases.
    add_bias_kv : bool
        Append learned ``bias_k``/``bias_v`` ``(1, 1, C)`` to the keys and values.
    add_zero_attn : bool
        Append a zero key and value to each head (after ``add_bias_kv``).
    kdim, vdim : int, optional
        Feature sizes of ``key`` and ``value`` (default ``C``); when either differs from ``C``
        the projections are separate parameters.
    batch_first : bool
        Inputs and outputs ``(B, T, C)`` instead of PyTorch's default ``(T, B, C)``.
    device, dtype : optional
        The CPU only; float32 (default) or float64 parameters.
    impl : {'auto', 'composed', 'fused'}
        (+) The attention path (see ``scaled_dot_product_attention``); ``forward`` may
        override it per call. ``need_weights=True`` needs the composed path.

    Notes
    -----
    Initialisation is PyTorch's: Xavier-uniform projection weights, zero biases,
    Xavier-normal ``bias_k``/``bias_v``, and ``out_proj`` as a ``Linear``'s weight. A query
    whose keys are all masked gets a zero output here, where PyTorch gives NaN.

    Examples
    --------
    >>> import tinyattn as ta
    >>> mha = ta.nn.MultiheadAttention(8, num_heads=2, batch_first=True)
    >>> [name for name, _ in mha.named_parameters()]
    ['in_proj_weight', 'in_proj_bias', 'out_proj.weight', 'out_proj.bias']
    >>> x = ta.randn(3, 5, 8)
    >>> out, weights = mha(x, x, x)
    >>> out.shape, weights.shape
    ((3, 5, 8), (3, 5, 5))
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim: int | None = None,
                 vdim: int | None = None, batch_first: bool = False, device: Any = None,
                 dtype: Any = None, *, impl: str = "auto"):
        Module.__init__(self)  # the parameters are packed: MultiHeadAttention's are not made
        E = self.embed_dim = check_int(_NAME, "embed_dim", embed_dim, 1)
        H = self.num_heads = self.num_kv_heads = check_int(_NAME, "num_heads", num_heads, 1)
        if E % H:
            raise ValueError(f"{_NAME}: embed_dim {E} must be divisible by num_heads {H}")
        self.kdim = E if kdim is None else check_int(_NAME, "kdim", kdim, 1)
        self.vdim = E if vdim is None else check_int(_NAME, "vdim", vdim, 1)
        self._qkv_same_embed_dim = self.kdim == E and self.vdim == E
        self.head_dim = self.d_head = E // H
        self.dropout = check_probability(_NAME, dropout)
        self.batch_first = bool(batch_first)
        self.impl = check_choice(_NAME, "impl", impl, IMPLS)
        self.bias, self.causal, self.window_size = bool(bias), False, None
        self.rotary = self.alibi = None
        self.attention_path = None
        check_device(_NAME, device)
        dtype = float_dtype(_NAME, dtype)
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(aligned_empty((3 * E, E), dtype))  # as Linear's
            for role in ("q", "k", "v"):
                self.register_parameter(f"{role}_proj_weight", None)
        else:
            self.q_proj_weight = Parameter(aligned_empty((E, E), dtype))
            self.k_proj_weight = Parameter(aligned_empty((E, self.kdim), dtype))
            self.v_proj_weight = Parameter(aligned_empty((E, self.vdim), dtype))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(np.empty(3 * E, dtype))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(E, E, bias=bias, dtype=dtype)
        if add_bias_kv:
            self.bias_k = Parameter(np.empty((1, 1, E), dtype))
            self.bias_v = Parameter(np.empty((1, 1, E), dtype))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = bool(add_zero_attn)
        self.reset_parameters()

    # PyTorch's layer has one child module, out_proj: no hook points here
    hook_q = hook_k = hook_v = hook_attn_scores = hook_pattern = hook_z = _NO_HOOK

    def reset_parameters(self) -> None:
        """Draw the parameters again with PyTorch's scheme (see Notes)."""
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            for weight in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
                init.xavier_uniform_(weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
            init.xavier_normal_(self.bias_v)

    @property
    def _extra_keys(self) -> int:
        return int(self.bias_k is not None) + int(self.add_zero_attn)

    def forward(self, query: Tensor, key: Tensor, value: Tensor,
                key_padding_mask: Tensor | np.ndarray | None = None, need_weights: bool = True,
                attn_mask: Tensor | np.ndarray | None = None, average_attn_weights: bool = True,
                is_causal: bool = False, *, impl: str | None = None,
                ) -> tuple[Tensor, Tensor | None]:
        """Attend from ``query`` to ``key``/``value``; returns ``(output, weights or None)``.

        Parameters
        ----------
        query : Tensor
            ``(T, B, C)``, or ``(B, T, C)`` when ``batch_first``, or unbatched ``(T, C)``.
        key, value : Tensor
            ``(S, B, kdim)`` and ``(S, B, vdim)`` (batch first or unbatched likewise).
        key_padding_mask : Tensor or np.ndarray, optional
            ``(B, S)`` (unbatched ``(S,)``): boolean True marks keys NOT to attend, a float
            mask is added to the scores.
        need_weights : bool
            Also return the attention weights (after dropout), which needs the composed path.
        attn_mask : Tensor or np.ndarray, optional
            ``(T, S)`` or ``(B·H, T, S)`` (unbatched ``(H, T, S)``), same conventions: boolean
            True = NOT allowed, float added.
        average_attn_weights : bool
            Weights averaged over heads ``(B, T, S)``, or per head ``(B, H, T, S)``.
        is_causal : bool
            A hint, as in PyTorch, that ``attn_mask`` is the causal mask; ``attn_mask`` must
            still be given. Without ``key_padding_mask`` and ``need_weights`` the mask is then
            replaced by the causal flag of ``scaled_dot_product_attention``.
        impl : {'auto', 'composed', 'fused'}, optional
            (+) Overrides ``self.impl`` for this call.

        Returns
        -------
        (Tensor, Tensor or None)
            The output in the layout of ``query``, and the weights when ``need_weights``
            (unbatched: ``(T, S)`` or ``(H, T, S)``). ``add_bias_kv`` and ``add_zero_attn``
            each add one key column to the weights.
        """
        if is_causal and attn_mask is None:
            raise ValueError(f"{_NAME}: is_causal=True is a hint that attn_mask is the causal "
                             "mask, so attn_mask must be given too (True above the diagonal)")
        causal = is_causal and key_padding_mask is None and not need_weights and \
            not self._extra_keys
        if causal:
            attn_mask = None  # the hint: SDPA's causal flag replaces the mask
        transposed = self._check_layout(query, key, value)
        if transposed:  # (T, B, ·) -> (B, T, ·); one tensor passed twice stays one
            q = query.transpose(0, 1)
            k = q if key is query else key.transpose(0, 1)
            value = k if value is key else q if value is query else value.transpose(0, 1)
            query, key = q, k
        layer_impl = self.impl
        self.impl = layer_impl if impl is None else check_choice(_NAME, "impl", impl, IMPLS)
        try:  # the call's impl, for this call only
            result = super().forward(query, key, value, key_padding_mask, attn_mask,
                                     need_weights, average_attn_weights, causal)
        finally:
            self.impl = layer_impl
        output, weights = result if need_weights else (result, None)
        return (output.transpose(0, 1) if transposed else output), weights

    def _check_layout(self, query: Any, key: Any, value: Any) -> bool:
        """Check types and shapes; return whether the inputs are batched ``(T|S, B, ·)``."""
        for label, x in (("query", query), ("key", key), ("value", value)):
            if not isinstance(x, Tensor):
                raise TypeError(f"{_NAME}: {label} must be a Tensor, got {type(x).__name__}")
            if x.dtype.kind != "f":
                raise TypeError(f"{_NAME}: {label} must be a float tensor, got dtype {x.dtype}")
        if query.ndim not in (2, 3) or not query.ndim == key.ndim == value.ndim:
            raise ValueError(f"{_NAME}: query, key and value must all be batched 3-D or "
                             f"unbatched 2-D, got shapes {query.shape}, {key.shape} and "
                             f"{value.shape}")
        layout = "(B, {0}, {1})" if self.batch_first else "({0}, B, {1})"
        layout = "({0}, {1})" if query.ndim == 2 else layout
        for label, x, length, width in (("query", query, "T", self.embed_dim),
                                        ("key", key, "S", self.kdim),
                                        ("value", value, "S", self.vdim)):
            if x.shape[-1] != width:
                raise ValueError(f"{_NAME}: {label} must have shape "
                                 f"{layout.format(length, width)}, got {x.shape}")
        batch_dim = 0 if self.batch_first else 1
        if key.shape[:-1] != value.shape[:-1] or (
                query.ndim == 3 and query.shape[batch_dim] != key.shape[batch_dim]):
            raise ValueError(f"{_NAME}: key {key.shape} and value {value.shape} must share "
                             f"B and S, and query {query.shape} the same B")
        return query.ndim == 3 and not self.batch_first

    def _inputs(self, query: Tensor, key: Tensor, value: Tensor, key_padding_mask: Any,
                attn_mask: Any, kv_cache: Any) -> tuple[Tensor, Tensor, Tensor, bool]:
        """The inputs batched ``(B, T|S, ·)`` (checked by :meth:`_check_layout`); one tensor
        passed as query, key and value stays one (its projection is then one product)."""
        if query.ndim == 3:
            return query, key, value, True
        batched = [query.unsqueeze(0)]
        for x, earlier in ((key, query), (value, key)):
            batched.append(batched[-1] if x is earlier else x.unsqueeze(0))  # (1, T|S, ·)
        return batched[0], batched[1], batched[2], False

    def _project(self, query: Tensor, key: Tensor, value: Tensor) -> tuple[Tensor, ...]:
        """The heads ``(B, H, T|S', D)`` from the packed projection, with the extra key columns
        of ``add_bias_kv`` and ``add_zero_attn``."""
        B, T, C = query.shape
        H, D = self.num_heads, self.head_dim
        if self._qkv_same_embed_dim and query is key and key is value:
            q, k, v = linear(query, self.in_proj_weight, self.in_proj_bias).chunk(3, dim=-1)
        else:
            weights = self.in_proj_weight.chunk(3, dim=0) if self._qkv_same_embed_dim else (
                self.q_proj_weight, self.k_proj_weight, self.v_proj_weight)
            biases = (None,) * 3 if self.in_proj_bias is None else self.in_proj_bias.chunk(3)
            q, k, v = (linear(x, w, b) for x, w, b in zip((query, key, value), weights, biases))
        if self.bias_k is not None:
            k = cat([k, self.bias_k.expand(B, 1, C)], dim=1)  # (B, S + 1, C)
            v = cat([v, self.bias_v.expand(B, 1, C)], dim=1)
        q = q.reshape(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
        k = k.reshape(B, k.shape[1], H, D).transpose(1, 2)  # (B, H, S', D)
        v = v.reshape(B, v.shape[1], H, D).transpose(1, 2)  # (B, H, S', D)
        if self.add_zero_attn:
            zeros = Tensor(np.zeros((B, H, 1, D), dtype=k.dtype))
            k = cat([k, zeros], dim=2)  # (B, H, S' + 1, D)
            v = cat([v, zeros], dim=2)
        return self.hook_q(q), self.hook_k(k), self.hook_v(v)

    def extra_repr(self) -> str:
        return (f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, "
                f"dropout={self.dropout}, batch_first={self.batch_first}, impl={self.impl!r}")

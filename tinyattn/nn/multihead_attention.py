"""``MultiheadAttention``: PyTorch's attention layer, with its packed projection and spelling.

The query, key and value projections live in one packed ``in_proj_weight`` ``(3C, C)`` (rows
``0:C`` project the query, ``C:2C`` the key, ``2C:3C`` the value) and one ``in_proj_bias``
``(3C,)``, as in ``torch.nn.MultiheadAttention``, so a PyTorch state dict loads as it is. When
the key or value width differs from ``C`` (``kdim``/``vdim``), the projections are separate:
``q_proj_weight`` ``(C, C)``, ``k_proj_weight`` ``(C, kdim)``, ``v_proj_weight`` ``(C, vdim)``.

tinyattn's readable :class:`~tinyattn.nn.MultiHeadAttention` (one ``Linear`` per role) computes
the same thing; :meth:`MultiheadAttention.from_separate` and :meth:`MultiheadAttention.to_separate`
convert between the two.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..functional import linear, scaled_dot_product_attention
from ..functional.dropout import check_probability
from ..ops import cat
from ..tensor import Tensor
from ..validation import check_int
from . import init
from .attention import MultiHeadAttention
from .linear import Linear
from .masks import layer_masks, merge_masks
from .module import Module, Parameter, check_device, float_dtype

_IMPLS = ("auto", "composed", "fused")
_NAME = "MultiheadAttention"


def _check_impl(impl: Any) -> str:
    if impl not in _IMPLS:
        raise ValueError(f"{_NAME}: impl must be one of {_IMPLS}, got {impl!r}")
    return impl


def _pad_columns(mask: Tensor, count: int) -> Tensor:
    """``mask`` with ``count`` more key columns that block nothing (False, or 0 added)."""
    padding = np.zeros(mask.shape[:-1] + (count,), dtype=mask.dtype)
    if mask.dtype == np.bool_:
        return Tensor(np.concatenate([mask.numpy(), padding], axis=-1))
    return cat([mask, Tensor(padding)], dim=-1)  # a float mask may carry a gradient


class MultiheadAttention(Module):
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
        super().__init__()
        E = self.embed_dim = check_int(_NAME, "embed_dim", embed_dim, 1)
        H = self.num_heads = check_int(_NAME, "num_heads", num_heads, 1)
        if E % H:
            raise ValueError(f"{_NAME}: embed_dim {E} must be divisible by num_heads {H}")
        self.kdim = E if kdim is None else check_int(_NAME, "kdim", kdim, 1)
        self.vdim = E if vdim is None else check_int(_NAME, "vdim", vdim, 1)
        self._qkv_same_embed_dim = self.kdim == E and self.vdim == E
        self.head_dim = E // H
        self.dropout = check_probability(_NAME, dropout)
        self.batch_first = bool(batch_first)
        self.impl = _check_impl(impl)
        check_device(_NAME, device)
        dtype = float_dtype(_NAME, dtype)
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(np.empty((3 * E, E), dtype))
            for role in ("q", "k", "v"):
                self.register_parameter(f"{role}_proj_weight", None)
        else:
            self.q_proj_weight = Parameter(np.empty((E, E), dtype))
            self.k_proj_weight = Parameter(np.empty((E, self.kdim), dtype))
            self.v_proj_weight = Parameter(np.empty((E, self.vdim), dtype))
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

    # ---- forward ----------------------------------------------------------------------------
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
        impl = self.impl if impl is None else _check_impl(impl)
        if need_weights and impl == "fused":
            raise ValueError(f"{_NAME}: need_weights=True needs the composed path, got "
                             "impl='fused'; pass need_weights=False or impl='auto'")
        self_attention = query is key and key is value
        batched = self._check_inputs(query, key, value)
        if not batched:
            query, key, value = (t.unsqueeze(0) for t in (query, key, value))  # (1, T|S, ·)
        elif not self.batch_first:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))  # (B, T|S, ·)
        B, T, C = query.shape
        S, H, D = key.shape[1], self.num_heads, self.head_dim
        q, k, v = self._project(query, key, value, self_attention)  # (B, T|S, C)
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
        mask, causal = self._sdpa_mask(key_padding_mask, attn_mask, is_causal, need_weights,
                                       q.dtype, B, T, S, batched)
        result = scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=self.dropout if self.training else 0.0,
            is_causal=causal, need_weights=need_weights, impl=impl)
        heads, weights = result if need_weights else (result, None)
        output = self.out_proj(heads.transpose(1, 2).reshape(B, T, C))  # (B, T, C)
        if weights is not None and average_attn_weights:
            weights = weights.mean(dim=1)  # (B, T, S')
        if not batched:
            output = output.squeeze(0)  # (T, C)
            weights = None if weights is None else weights.squeeze(0)
        elif not self.batch_first:
            output = output.transpose(0, 1)  # (T, B, C)
        return output, weights

    def _check_inputs(self, query: Any, key: Any, value: Any) -> bool:
        """Check types and shapes; return whether the inputs are batched."""
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
        return query.ndim == 3

    def _project(self, query: Tensor, key: Tensor, value: Tensor,
                 self_attention: bool) -> tuple[Tensor, Tensor, Tensor]:
        """The query, key and value projections ``(B, T|S, C)``."""
        if self._qkv_same_embed_dim and self_attention:
            qkv = linear(query, self.in_proj_weight, self.in_proj_bias)  # (B, T, 3C)
            return qkv.chunk(3, dim=-1)
        if self._qkv_same_embed_dim:
            weights = self.in_proj_weight.chunk(3, dim=0)  # 3 × (C, C)
        else:
            weights = (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight)
        biases = (None,) * 3 if self.in_proj_bias is None else self.in_proj_bias.chunk(3)
        return tuple(linear(x, w, b) for x, w, b in zip((query, key, value), weights, biases))

    def _sdpa_mask(self, key_padding_mask: Any, attn_mask: Any, is_causal: bool,
                   need_weights: bool, dtype: np.dtype, B: int, T: int, S: int,
                   batched: bool) -> tuple[Tensor | None, bool]:
        """The mask for ``scaled_dot_product_attention`` (True = may attend, or float added),
        broadcasting to ``(B, H, T, S')``, and whether to pass it ``is_causal``."""
        H = self.num_heads
        if is_causal and attn_mask is None:
            raise ValueError(f"{_NAME}: is_causal=True is a hint that attn_mask is the causal "
                             "mask, so attn_mask must be given too (True above the diagonal)")
        if is_causal and key_padding_mask is None and not need_weights:
            return None, True
        masks = layer_masks(_NAME, key_padding_mask, attn_mask, dtype, B, H, T, S, batched)
        if not masks:
            return None, False
        extra = int(self.bias_k is not None) + int(self.add_zero_attn)
        if extra:
            masks = [_pad_columns(mask, extra) for mask in masks]  # (..., S + extra)
        return merge_masks(masks, dtype), False

    # ---- conversions ------------------------------------------------------------------------
    @classmethod
    def from_separate(cls, layer: MultiHeadAttention, batch_first: bool = True,
                      ) -> MultiheadAttention:
        """(+) A copy of tinyattn's :class:`~tinyattn.nn.MultiHeadAttention` in this layout.

        The rows of ``q_proj``, ``k_proj`` and ``v_proj`` are stacked into
        ``in_proj_weight`` (and their biases into ``in_proj_bias``); dtype, dropout and
        training mode are kept. ``batch_first=True`` (the default) keeps the source's input
        layout. A causal mask is not a parameter: pass ``attn_mask`` to ``forward``.

        Examples
        --------
        >>> import tinyattn as ta
        >>> separate = ta.nn.MultiHeadAttention(8, num_heads=2).eval()
        >>> packed = ta.nn.MultiheadAttention.from_separate(separate)
        >>> x = ta.randn(2, 3, 8)
        >>> bool(abs(packed(x, x, x)[0].numpy() - separate(x).numpy()).max() < 1e-5)
        True
        """
        if not isinstance(layer, MultiHeadAttention):
            raise TypeError(f"{_NAME}.from_separate: expected a tinyattn.nn.MultiHeadAttention, "
                            f"got {type(layer).__name__}")
        projections = (layer.q_proj, layer.k_proj, layer.v_proj)
        packed = cls(layer.embed_dim, layer.num_heads, dropout=layer.dropout, bias=layer.bias,
                     batch_first=batch_first, dtype=layer.q_proj.weight.dtype)
        state = {"in_proj_weight": np.concatenate([p.weight.numpy() for p in projections]),
                 "out_proj.weight": layer.out_proj.weight.numpy()}
        if layer.bias:
            state["in_proj_bias"] = np.concatenate([p.bias.numpy() for p in projections])
            state["out_proj.bias"] = layer.out_proj.bias.numpy()
        packed.load_state_dict(state)
        return packed.train(layer.training)

    def to_separate(self) -> MultiHeadAttention:
        """(+) A copy as tinyattn's :class:`~tinyattn.nn.MultiHeadAttention` (batch first).

        ``in_proj_weight`` is split by rows into ``q_proj``, ``k_proj``, ``v_proj``; dtype,
        dropout and training mode are kept. Only a layer with ``kdim == vdim == embed_dim``,
        no ``bias_k``/``bias_v`` and no ``add_zero_attn`` has that form.

        Examples
        --------
        >>> import tinyattn as ta
        >>> packed = ta.nn.MultiheadAttention(8, num_heads=2, batch_first=True)
        >>> separate = packed.to_separate()
        >>> x = ta.randn(2, 3, 8)
        >>> bool(abs(packed(x, x, x)[0].numpy() - separate(x).numpy()).max() < 1e-5)
        True
        """
        if not self._qkv_same_embed_dim or self.bias_k is not None or self.add_zero_attn:
            raise ValueError(f"{_NAME}.to_separate: only a layer with kdim == vdim == "
                             "embed_dim, add_bias_kv=False and add_zero_attn=False has a "
                             "MultiHeadAttention equivalent")
        if self.dropout >= 1.0:
            raise ValueError(f"{_NAME}.to_separate: MultiHeadAttention needs dropout < 1, got "
                             f"{self.dropout}")
        bias = self.in_proj_bias is not None
        separate = MultiHeadAttention(self.embed_dim, self.num_heads, dropout=self.dropout,
                                      bias=bias)
        separate.to(self.in_proj_weight.dtype)
        C = self.embed_dim
        state = {"out_proj.weight": self.out_proj.weight.numpy()}
        for index, role in enumerate(("q_proj", "k_proj", "v_proj")):
            rows = slice(index * C, (index + 1) * C)
            state[f"{role}.weight"] = self.in_proj_weight.numpy()[rows]
            if bias:
                state[f"{role}.bias"] = self.in_proj_bias.numpy()[rows]
        if bias:
            state["out_proj.bias"] = self.out_proj.bias.numpy()
        separate.load_state_dict(state)
        return separate.train(self.training)

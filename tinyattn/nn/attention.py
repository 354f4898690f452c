"""Attention layers, batch first ``(B, T, C)`` (an unbatched ``(T, C)`` input works too).

Three ways to build multi-head attention, from the most explicit to the one PyTorch ships:

* :class:`SelfAttention` — one head with its own query/key/value projections;
* :class:`MultiHeadAttentionWrapper` — ``num_heads`` independent ``SelfAttention`` heads whose
  outputs are concatenated;
* :class:`MultiHeadAttention` — one projection per role, split into heads by columns, followed
  by an output projection; the masks of ``torch.nn.MultiheadAttention``.

Head ``h`` of ``MultiHeadAttention`` reads the rows ``h·D : (h+1)·D`` of each projection weight,
so it is exactly a ``SelfAttention`` head with those rows as its weights.

Every layer takes ``impl="auto" | "composed" | "fused"`` (see
:func:`tinyattn.nn.functional.choose_path`) and records in ``attention_path`` which path its
last forward took and why.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..functional.attention import IMPLS, AttentionPath, attend, choose_path
from ..ops import cat, stack
from ..ops.attention_masks import band, fold, layer_mask
from ..tensor import Tensor, check_float
from ..validation import check_choice, check_int, check_number
from .container import ModuleList
from .hooks import HookPoint
from .kv_cache import KVCache
from .linear import Linear
from .module import Module
from .positional import ALiBi, RotaryEmbedding


def _check_dropout(layer: str, dropout: float) -> float:
    return check_number(layer, "dropout", dropout, 0.0, 1.0)


def _check_input(layer: str, label: str, x: Any, features: int) -> None:
    """``x`` must be a float Tensor ``(B, T, features)`` or ``(T, features)``."""
    check_float(layer, label, x)
    if x.ndim not in (2, 3) or x.shape[-1] != features:
        raise ValueError(f"{layer}: {label} must have shape (B, T, {features}) or (T, {features}),"
                         f" got {x.shape}")


class SelfAttention(Module):
    """One attention head: ``softmax(q kᵀ / √d_out) v`` with ``q, k, v`` projections of ``x``.

    Parameters
    ----------
    d_in, d_out : int
        Input features and head size.
    qkv_bias : bool
        Whether the projections ``q_proj``, ``k_proj``, ``v_proj`` have a bias.
    causal : bool
        Position ``t`` attends only positions ``<= t``.
    dropout : float
        Dropout on the attention weights while training, in ``[0, 1]``.
    impl : {'auto', 'composed', 'fused'}
        Which attention path to take.

    Examples
    --------
    >>> import tinyattn as ta
    >>> head = ta.nn.SelfAttention(8, 4, causal=True)
    >>> head(ta.randn(2, 5, 8)).shape
    (2, 5, 4)
    >>> head.attention_path.impl
    'fused'
    """

    kernel_families = ("attention",)

    def __init__(self, d_in: int, d_out: int, qkv_bias: bool = False, causal: bool = False,
                 dropout: float = 0.0, impl: str = "auto"):
        super().__init__()
        self.d_in = check_int("SelfAttention", "d_in", d_in, 1)
        self.d_out = check_int("SelfAttention", "d_out", d_out, 1)
        self.causal = bool(causal)
        self.dropout = _check_dropout("SelfAttention", dropout)
        self.impl = check_choice("SelfAttention", "impl", impl, IMPLS)
        self.attention_path: AttentionPath | None = None
        self.q_proj = Linear(d_in, d_out, bias=qkv_bias)
        self.k_proj = Linear(d_in, d_out, bias=qkv_bias)
        self.v_proj = Linear(d_in, d_out, bias=qkv_bias)

    def forward(self, x: Tensor, need_weights: bool = False) -> Tensor | tuple[Tensor, Tensor]:
        """``(B, T, d_in) -> (B, T, d_out)``; with ``need_weights`` also the ``(B, T, T)``
        weights."""
        _check_input("SelfAttention", "x", x, self.d_in)
        self.attention_path = choose_path(self.impl, need_weights, op="SelfAttention")
        q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)  # (B, T, d_out) each
        dropout_p = self.dropout if self.training else 0.0
        out, weights = attend(q, k, v, self.attention_path, None, dropout_p, self.causal)
        return (out, weights) if need_weights else out

    def extra_repr(self) -> str:
        return f"d_in={self.d_in}, d_out={self.d_out}, causal={self.causal}, impl={self.impl!r}"


class MultiHeadAttentionWrapper(Module):
    """``num_heads`` independent :class:`SelfAttention` heads, outputs concatenated.

    Output width ``num_heads · d_out``; the heads live in the ``ModuleList`` ``heads``.

    Examples
    --------
    >>> import tinyattn as ta
    >>> mha = ta.nn.MultiHeadAttentionWrapper(8, 4, num_heads=3)
    >>> mha(ta.randn(2, 5, 8)).shape
    (2, 5, 12)
    """

    def __init__(self, d_in: int, d_out: int, num_heads: int, qkv_bias: bool = False,
                 causal: bool = False, dropout: float = 0.0, impl: str = "auto"):
        super().__init__()
        num_heads = check_int("MultiHeadAttentionWrapper", "num_heads", num_heads, 1)
        self.d_in = check_int("MultiHeadAttentionWrapper", "d_in", d_in, 1)
        self.heads = ModuleList(
            SelfAttention(d_in, d_out, qkv_bias, causal, dropout, impl) for _ in range(num_heads)
        )

    @property
    def attention_path(self) -> AttentionPath | None:
        """The path of the last forward (every head takes the same one)."""
        return self.heads[0].attention_path

    def forward(self, x: Tensor, need_weights: bool = False) -> Tensor | tuple[Tensor, Tensor]:
        """``(B, T, d_in) -> (B, T, num_heads·d_out)``; with ``need_weights`` also the
        ``(B, num_heads, T, T)`` weights."""
        _check_input("MultiHeadAttentionWrapper", "x", x, self.d_in)
        if not need_weights:
            return cat([head(x) for head in self.heads], dim=-1)
        outputs, weights = zip(*(head(x, need_weights=True) for head in self.heads))
        return cat(outputs, dim=-1), stack(weights, dim=-3)  # (B, T, H·d_out), (B, H, T, T)


class MultiHeadAttention(Module):
    """Multi-head attention with separate projections and the masks of
    ``torch.nn.MultiheadAttention``.

    ``out_proj(concat_h softmax(q_h k_hᵀ / √D + mask) v_h)`` where ``q_h`` is columns
    ``h·D : (h+1)·D`` of ``q_proj(query)`` (likewise ``k_h``, ``v_h``).

    Parameters
    ----------
    embed_dim, num_heads : int
        Model width ``C`` and number of heads ``H``; head size ``D = C // H``.
    dropout : float
        Dropout on the attention weights while training, in ``[0, 1]``.
    bias : bool
        Whether ``q_proj``, ``k_proj``, ``v_proj`` and ``out_proj`` have biases.
    causal : bool
        (+) Always apply a causal mask (as if ``is_causal=True`` were passed to ``forward``).
    impl : {'auto', 'composed', 'fused'}
        (+) Which attention path to take.
    num_kv_heads : int, optional
        (+) Grouped-query attention: ``k_proj``/``v_proj`` make ``num_kv_heads`` heads of size
        ``D``, each shared by ``H / num_kv_heads`` query heads (1: multi-query attention).
    window_size : int, optional
        (+) Sliding-window attention: each query sees only the last ``window_size`` keys (with
        ``causal``).
    rotary : RotaryEmbedding, optional
        (+) Rotate queries and keys by their positions (RoPE) after the projections; its
        ``head_dim`` must be ``D``.
    alibi : bool
        (+) Add the ALiBi bias ``−m_h · (i − j)`` to the scores (:class:`ALiBi`).

    Hook points (see :mod:`tinyattn.nn.hooks`): ``hook_q``, ``hook_k``, ``hook_v`` (each
    ``(B, H, T, D)``, keys and values ``(B, Hkv, S, D)``), with ``rotary`` also ``hook_rot_q``
    and ``hook_rot_k`` (after the rotation; with a cache, ``hook_rot_k`` sees every cached key),
    ``hook_attn_scores`` and ``hook_pattern`` (``(B, H, T, S)``, composed path only: hooking
    them makes ``impl='auto'`` take it), ``hook_z`` (``(B, H, T, D)``).

    Decoding with a cache: ``forward(x, kv_cache=cache)`` appends this step's keys and values
    to the :class:`KVCache` and attends over all of them; the queries are the last ``T`` of the
    ``S`` positions (causal and window masks aligned bottom-right, rotary positions
    ``S − T … S − 1`` for the queries and ``0 … S − 1`` for the keys, which the cache keeps
    unrotated).

    Examples
    --------
    >>> import tinyattn as ta
    >>> mha = ta.nn.MultiHeadAttention(8, num_heads=2)
    >>> x = ta.randn(3, 5, 8)
    >>> out, weights = mha(x, need_weights=True)
    >>> out.shape, weights.shape, mha.attention_path.impl
    ((3, 5, 8), (3, 5, 5), 'composed')
    """

    kernel_families = ("attention",)

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 causal: bool = False, impl: str = "auto", num_kv_heads: int | None = None,
                 window_size: int | None = None, rotary: RotaryEmbedding | None = None,
                 alibi: bool = False):
        super().__init__()
        name = "MultiHeadAttention"
        self.embed_dim = check_int(name, "embed_dim", embed_dim, 1)
        self.num_heads = check_int(name, "num_heads", num_heads, 1)
        if embed_dim % num_heads:
            raise ValueError(f"{name}: embed_dim {embed_dim} must be divisible by num_heads "
                             f"{num_heads}")
        self.num_kv_heads = self.num_heads if num_kv_heads is None else check_int(
            name, "num_kv_heads", num_kv_heads, 1)
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"{name}: num_heads {num_heads} must be divisible by num_kv_heads "
                             f"{num_kv_heads}")
        self.window_size = None if window_size is None else check_int(name, "window_size",
                                                                      window_size, 1)
        self.d_head = self.embed_dim // self.num_heads
        self.dropout = _check_dropout(name, dropout)
        self.bias, self.causal = bool(bias), bool(causal)
        self.impl = check_choice(name, "impl", impl, IMPLS)
        self.attention_path: AttentionPath | None = None
        kv_width = self.num_kv_heads * self.d_head
        self.q_proj = Linear(embed_dim, embed_dim, bias=bias)
        self.k_proj = Linear(embed_dim, kv_width, bias=bias)
        self.v_proj = Linear(embed_dim, kv_width, bias=bias)
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias)
        self.hook_q, self.hook_k, self.hook_v = HookPoint(), HookPoint(), HookPoint()
        self.rotary = rotary
        if rotary is not None:
            if not isinstance(rotary, RotaryEmbedding) or rotary.head_dim != self.d_head:
                raise ValueError(f"{name}: rotary must be a RotaryEmbedding with head_dim "
                                 f"{self.d_head} (embed_dim // num_heads), got {rotary!r}")
            self.hook_rot_q, self.hook_rot_k = HookPoint(), HookPoint()
        self.alibi = ALiBi(self.num_heads) if alibi else None
        self.hook_attn_scores, self.hook_pattern = HookPoint(), HookPoint()
        self.hook_z = HookPoint()

    def forward(
        self,
        query: Tensor,
        key: Tensor | None = None,
        value: Tensor | None = None,
        key_padding_mask: Tensor | np.ndarray | None = None,
        attn_mask: Tensor | np.ndarray | None = None,
        need_weights: bool = False,
        average_attn_weights: bool = True,
        is_causal: bool = False,
        *,
        kv_cache: KVCache | None = None,
    ) -> Tensor | tuple[Tensor, Tensor]:
        """Attend from ``query (B, T, C)`` to ``key (B, S, C)`` / ``value (B, S, C)``.

        ``key`` defaults to ``query`` and ``value`` to ``key``. Masks as in PyTorch: boolean
        True means NOT allowed, float masks are added to the scores; ``key_padding_mask`` is
        ``(B, S)``, ``attn_mask`` ``(T, S)`` or ``(B·H, T, S)`` (unbatched: ``(S,)`` and
        ``(T, S)`` or ``(H, T, S)``). ``is_causal`` (or ``causal=True`` at construction) adds a
        causal mask. Returns the output ``(B, T, C)``, and with ``need_weights`` the weights
        ``(B, T, S)`` averaged over heads or ``(B, H, T, S)``.

        (+) ``kv_cache``: a :class:`KVCache` for incremental self-attention (no ``key``,
        ``value`` or masks besides causality); ``S`` is then the cached length plus ``T``.
        """
        query, key, value, batched = self._inputs(query, key, value, key_padding_mask,
                                                  attn_mask, kv_cache)
        B, T, C = query.shape
        S = key.shape[1]
        q, k, v = self._project(query, key, value)  # (B, H, T, D), (B, Hkv, S, D) twice
        past = 0
        if kv_cache is not None:  # decoding: this step's keys and values join the cached ones
            past = kv_cache.length
            k, v = kv_cache.update(k, v)  # (B, Hkv, past + T, D)
            S = past + T
        if self.rotary is not None:  # the queries are positions past … past + T − 1
            q = self.hook_rot_q(self.rotary.rotate(q, past))  # (B, H, T, D)
            k = self.hook_rot_k(self.rotary.rotate(k, 0))  # (B, Hkv, S, D)
        mask, causal, window = self._mask(key_padding_mask, attn_mask, is_causal, q.dtype, B,
                                          T, S, past, batched)
        self.attention_path = self._choose_path(need_weights, mask)
        dropout_p = self.dropout if self.training else 0.0
        z, weights = attend(q, k, v, self.attention_path, mask, dropout_p, causal, None,
                            window, self.hook_attn_scores, self.hook_pattern)
        z = self.hook_z(z)  # (B, H, T, D)
        output = self.out_proj(z.transpose(1, 2).reshape(B, T, C))  # (B, T, C)
        return self._outputs(output, weights, need_weights, average_attn_weights, batched)

    def _inputs(self, query: Any, key: Any, value: Any, key_padding_mask: Any, attn_mask: Any,
                kv_cache: KVCache | None) -> tuple[Tensor, Tensor, Tensor, bool]:
        """The inputs checked and batched ``(B, T|S, C)``, and whether they were batched."""
        name = type(self).__name__
        if kv_cache is not None and (key is not None or value is not None or
                                     key_padding_mask is not None or attn_mask is not None):
            raise ValueError(f"{name}: kv_cache serves self-attention only: pass no key, value, "
                             "key_padding_mask or attn_mask with it")
        key = query if key is None else key
        value = key if value is None else value
        for label, x in (("query", query), ("key", key), ("value", value)):
            _check_input(name, label, x, self.embed_dim)
        if not query.ndim == key.ndim == value.ndim or key.shape[:-1] != value.shape[:-1] or (
                query.shape[:-2] != key.shape[:-2]):
            raise ValueError(f"{name}: query {query.shape}, key {key.shape} and value "
                             f"{value.shape} must be (B, T, C), (B, S, C), (B, S, C) with one B")
        if query.ndim == 3:
            return query, key, value, True
        query, key, value = (t.unsqueeze(0) for t in (query, key, value))  # (1, T|S, C)
        return query, key, value, False

    def _project(self, query: Tensor, key: Tensor, value: Tensor) -> tuple[Tensor, ...]:
        """The heads: ``q (B, H, T, D)``, ``k`` and ``v`` ``(B, Hkv, S, D)``."""
        B, T, _ = query.shape
        S, H, Hkv, D = key.shape[1], self.num_heads, self.num_kv_heads, self.d_head
        q = self.hook_q(self.q_proj(query).view(B, T, H, D).transpose(1, 2))  # (B, H, T, D)
        k = self.hook_k(self.k_proj(key).view(B, S, Hkv, D).transpose(1, 2))  # (B, Hkv, S, D)
        v = self.hook_v(self.v_proj(value).view(B, S, Hkv, D).transpose(1, 2))  # (B, Hkv, S, D)
        return q, k, v

    def _mask(self, key_padding_mask: Any, attn_mask: Any, is_causal: bool, dtype: np.dtype,
              B: int, T: int, S: int, past: int,
              batched: bool) -> tuple[Tensor | None, bool, int | None]:
        """The SDPA mask of this call, and the causal flag and window left to SDPA itself.

        The layer's masks become one SDPA mask (:mod:`tinyattn.ops.attention_masks`); the
        causal band and the window stay flags (the fused kernel then skips the blocks outside
        them) unless a mask, a cache's offset or the ALiBi bias must be combined with them.
        """
        causal = is_causal or self.causal
        window = self.window_size
        if window is not None and window >= max(T, S):
            window = None  # every key is within the window anyway
        mask = layer_mask(type(self).__name__, key_padding_mask, attn_mask, dtype, B,
                          self.num_heads, T, S, batched, self._extra_keys)
        if mask is not None and causal and not past and self.alibi is None:
            mask, causal = fold(mask, band(T, mask.shape[-1], True, None), None, dtype), False
        if past or self.alibi is not None:
            bias = None if self.alibi is None else self.alibi(T, S, dtype).numpy()  # (H, T, S)
            mask = fold(mask, band(T, S, causal, window, past), bias, dtype)
            causal, window = False, None
        return mask, causal, window

    _extra_keys = 0
    """Key columns the layer adds to every query's keys (``nn.MultiheadAttention``'s
    ``add_bias_kv`` and ``add_zero_attn``)."""

    def _choose_path(self, need_weights: bool, mask: Tensor | None) -> AttentionPath:
        hooked = [p for p in ("hook_attn_scores", "hook_pattern") if getattr(self, p).active]
        return choose_path(
            self.impl, need_weights, mask is not None and mask.requires_grad,
            f"a hook on {' and '.join(hooked)} needs the composed path" if hooked else None,
            op=type(self).__name__)

    @staticmethod
    def _outputs(output: Tensor, weights: Tensor | None, need_weights: bool, average: bool,
                 batched: bool) -> Tensor | tuple[Tensor, Tensor]:
        """The output ``(B, T, C)`` (unbatched ``(T, C)``), and the weights averaged over
        heads ``(B, T, S)`` or per head ``(B, H, T, S)`` when asked for."""
        if need_weights and average:
            weights = weights.mean(dim=1)  # (B, T, S)
        if not batched:
            output = output.squeeze(0)  # (T, C)
            weights = None if weights is None else weights.squeeze(0)
        return (output, weights) if need_weights else output

    def extra_repr(self) -> str:
        text = (f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, "
                f"dropout={self.dropout}, causal={self.causal}, impl={self.impl!r}")
        if self.num_kv_heads != self.num_heads:
            text += f", num_kv_heads={self.num_kv_heads}"
        if self.window_size is not None:
            text += f", window_size={self.window_size}"
        if self.alibi is not None:
            text += ", alibi=True"
        return text

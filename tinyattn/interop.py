"""To and from PyTorch, in one place: :func:`to_torch` and :func:`from_torch` for whole models
and attention layers, and the packing of separate query/key/value projections.

* :class:`~tinyattn.models.TransformerLM` becomes a plain ``torch.nn.Module`` with the same
  parameter names, and back.
* :class:`~tinyattn.nn.MultiHeadAttention` (separate ``q_proj``, ``k_proj``, ``v_proj``)
  becomes ``torch.nn.MultiheadAttention(batch_first=True)``, whose packed ``in_proj_weight``
  ``(3C, C)`` stacks the three projections' rows (:func:`pack_projections`), and back
  (:func:`split_projections`). :func:`packed` and :func:`separate` convert between tinyattn's
  two layouts. tinyattn's :class:`~tinyattn.nn.MultiheadAttention` has PyTorch's own
  parameters, so its state dict loads into PyTorch's layer and back as it is.

The torch model is written here in ordinary PyTorch (``torch.nn.Linear``, ``torch.nn.RMSNorm``,
``torch.nn.functional.scaled_dot_product_attention`` with ``enable_gqa`` …), for every config
variant: learned, rotary, ALiBi or no positions, LayerNorm or RMSNorm, GELU or SwiGLU MLP,
grouped-query heads, sliding windows, tied head, no biases. Its state dict has tinyattn's keys
(a tied head's weight is listed under both of its names, in both libraries), so
checkpoints move in both directions. torch is imported only inside these functions:
``import tinyattn`` never imports it.

Examples
--------
>>> import tinyattn as ta
>>> config = ta.models.TransformerLMConfig(11, 8, 16, 4, 1, positional="rope", num_kv_heads=2)
>>> module = ta.interop.to_torch(ta.TransformerLM(config))  # doctest: +SKIP
>>> ta.interop.from_torch(module).config == config  # doctest: +SKIP
True
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import asdict, fields
from functools import lru_cache
from typing import Any

import numpy as np

from .models import TransformerLM, TransformerLMConfig
from .nn import MultiHeadAttention, MultiheadAttention
from .nn.transformer import swiglu_hidden
from .ops import cat
from .tensor import from_numpy


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        raise ImportError("tinyattn.interop: PyTorch is not installed (pip install torch)") \
            from None
    return torch


@lru_cache(maxsize=1)
def torch_transformer_lm() -> type:
    """The ``torch.nn.Module`` class of a :class:`~tinyattn.models.TransformerLM`:
    ``TorchTransformerLM(config)``, ``forward(idx, targets=None)`` returning the logits, or
    ``(logits, loss)``."""
    torch = _torch()
    nn, functional = torch.nn, torch.nn.functional

    def rotate_half(x: Any) -> Any:
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat([-x2, x1], dim=-1)

    def rope(x: Any, base: float) -> Any:
        T, D = x.shape[-2], x.shape[-1]
        inv_freq = base ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)  # (D/2,)
        angles = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq  # (T, D/2)
        angles = torch.cat([angles, angles], dim=-1).to(x.dtype)  # (T, D)
        return x * angles.cos() + rotate_half(x) * angles.sin()

    def alibi(num_heads: int, T: int) -> Any:
        power = 2 ** int(math.floor(math.log2(num_heads)))
        slopes = [2.0 ** (-8.0 * (h + 1) / power) for h in range(power)]
        slopes += [2.0 ** (-8.0 * (h + 1) / (2 * power)) for h in range(0, 2 * power, 2)][
            : num_heads - power]
        distance = (torch.arange(T)[:, None] - torch.arange(T)[None, :]).abs()  # (T, T)
        return -torch.tensor(slopes, dtype=torch.float64)[:, None, None] * distance  # (H, T, T)

    class Attention(nn.Module):
        def __init__(self, config: TransformerLMConfig):
            super().__init__()
            C, H = config.embed_dim, config.num_heads
            self.H, self.Hkv, self.D = H, config.num_kv_heads or H, C // H
            self.config = config
            self.q_proj = nn.Linear(C, C, bias=config.bias)
            self.k_proj = nn.Linear(C, self.Hkv * self.D, bias=config.bias)
            self.v_proj = nn.Linear(C, self.Hkv * self.D, bias=config.bias)
            self.out_proj = nn.Linear(C, C, bias=config.bias)

        def forward(self, x: Any) -> Any:
            B, T, C = x.shape
            config = self.config
            q = self.q_proj(x).view(B, T, self.H, self.D).transpose(1, 2)  # (B, H, T, D)
            k = self.k_proj(x).view(B, T, self.Hkv, self.D).transpose(1, 2)  # (B, Hkv, T, D)
            v = self.v_proj(x).view(B, T, self.Hkv, self.D).transpose(1, 2)  # (B, Hkv, T, D)
            if config.positional == "rope":
                q, k = rope(q, config.rope_base), rope(k, config.rope_base)
            i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
            allowed = j <= i  # (T, T)
            window = config.window_size
            if config.positional != "learned":
                window = min(window or config.context_length, config.context_length)
            if window is not None:
                allowed = allowed & (i - j < window)
            mask = allowed
            if config.positional == "alibi":
                mask = alibi(self.H, T).to(x.dtype).masked_fill(~allowed, float("-inf"))
            dropout_p = config.dropout if self.training else 0.0
            z = functional.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, dropout_p=dropout_p,
                enable_gqa=self.Hkv != self.H)  # (B, H, T, D)
            return self.out_proj(z.transpose(1, 2).reshape(B, T, C))  # (B, T, C)

    class SwiGLU(nn.Module):
        def __init__(self, C: int, hidden: int, bias: bool):
            super().__init__()
            self.gate = nn.Linear(C, hidden, bias=bias)
            self.fc = nn.Linear(C, hidden, bias=bias)
            self.proj = nn.Linear(hidden, C, bias=bias)

        def forward(self, x: Any) -> Any:
            return self.proj(functional.silu(self.gate(x)) * self.fc(x))

    def norm(config: TransformerLMConfig) -> Any:
        if config.norm == "rmsnorm":
            return nn.RMSNorm(config.embed_dim)
        return nn.LayerNorm(config.embed_dim, bias=config.bias)

    class Block(nn.Module):
        def __init__(self, config: TransformerLMConfig):
            super().__init__()
            C = config.embed_dim
            self.ln_1, self.attn, self.ln_2 = norm(config), Attention(config), norm(config)
            if config.mlp == "swiglu":
                self.mlp = SwiGLU(C, swiglu_hidden(C, config.mlp_ratio), config.bias)
            else:
                hidden = config.mlp_ratio * C
                self.mlp = nn.Sequential(OrderedDict(
                    fc=nn.Linear(C, hidden, bias=config.bias),
                    gelu=nn.GELU(approximate=config.gelu_approximate),
                    proj=nn.Linear(hidden, C, bias=config.bias)))
            self.dropout = nn.Dropout(config.dropout)

        def forward(self, x: Any) -> Any:
            x = x + self.dropout(self.attn(self.ln_1(x)))
            return x + self.dropout(self.mlp(self.ln_2(x)))

    class TorchTransformerLM(nn.Module):
        def __init__(self, config: TransformerLMConfig):
            super().__init__()
            C = config.embed_dim
            self.config = config
            self.token_embedding = nn.Embedding(config.vocab_size, C)
            if config.positional == "learned":
                self.position_embedding = nn.Embedding(config.context_length, C)
            self.dropout = nn.Dropout(config.dropout)
            self.blocks = nn.ModuleList(Block(config) for _ in range(config.num_layers))
            self.ln_f = norm(config)
            self.lm_head = nn.Linear(C, config.vocab_size,
                                     bias=config.bias and not config.tie_weights)
            if config.tie_weights:
                self.lm_head.weight = self.token_embedding.weight

        def forward(self, idx: Any, targets: Any = None) -> Any:
            B, T = idx.shape
            x = self.token_embedding(idx)  # (B, T, C)
            if self.config.positional == "learned":
                x = x + self.position_embedding(torch.arange(T))
            x = self.dropout(x)
            for block in self.blocks:
                x = block(x)
            logits = self.lm_head(self.ln_f(x))  # (B, T, vocab_size)
            if targets is None:
                return logits
            loss = functional.cross_entropy(logits.reshape(B * T, -1), targets.reshape(B * T))
            return logits, loss

    return TorchTransformerLM


def to_torch(obj: TransformerLM | MultiHeadAttention | MultiheadAttention) -> Any:
    """A ``torch.nn.Module`` computing what ``obj`` computes, with a copy of its weights
    (float64 stays float64), in the same training mode.

    A :class:`~tinyattn.models.TransformerLM` becomes the module of :func:`torch_transformer_lm`;
    an attention layer becomes ``torch.nn.MultiheadAttention`` (``batch_first=True`` for
    :class:`~tinyattn.nn.MultiHeadAttention`, whose ``causal=True`` has no torch attribute: pass
    the mask to the torch layer's forward). Dropout draws differ between the libraries: outputs
    agree in eval mode or without dropout.
    """
    torch = _torch()
    if isinstance(obj, TransformerLM):
        dtype = torch.float64 if obj.token_embedding.weight.dtype == np.float64 else \
            torch.float32
        module = torch_transformer_lm()(obj.config).to(dtype)
        state = obj.state_dict()
    elif isinstance(obj, (MultiHeadAttention, MultiheadAttention)):
        module, state = _torch_attention(obj)
    else:
        raise TypeError(f"tinyattn.interop.to_torch: expected a TransformerLM, "
                        f"MultiHeadAttention or MultiheadAttention, got {type(obj).__name__}")
    module.load_state_dict({name: torch.from_numpy(tensor.numpy().copy())
                            for name, tensor in state.items()})
    return module.train(obj.training)


def _torch_attention(layer: MultiHeadAttention | MultiheadAttention) -> tuple[Any, dict]:
    """An empty ``torch.nn.MultiheadAttention`` of ``layer``'s shape, and the state dict to
    load into it."""
    torch = _torch()
    if isinstance(layer, MultiheadAttention):
        weight = layer.out_proj.weight
        module = torch.nn.MultiheadAttention(
            layer.embed_dim, layer.num_heads, dropout=layer.dropout, bias=layer.bias,
            add_bias_kv=layer.bias_k is not None, add_zero_attn=layer.add_zero_attn,
            kdim=layer.kdim, vdim=layer.vdim, batch_first=layer.batch_first,
            dtype=torch.float64 if weight.dtype == np.float64 else torch.float32)
        return module, layer.state_dict()
    if (layer.num_kv_heads != layer.num_heads or layer.window_size is not None
            or layer.rotary is not None or layer.alibi is not None):
        raise ValueError("tinyattn.interop.to_torch: torch.nn.MultiheadAttention has no "
                         "grouped key/value heads, sliding window, rotary embedding or ALiBi; "
                         "convert the whole TransformerLM instead")
    module = torch.nn.MultiheadAttention(
        layer.embed_dim, layer.num_heads, dropout=layer.dropout, bias=layer.bias,
        batch_first=True,
        dtype=torch.float64 if layer.q_proj.weight.dtype == np.float64 else torch.float32)
    return module, pack_projections(layer.state_dict())


def pack_projections(state: dict[str, Any]) -> dict[str, Any]:
    """A separate-projection attention state dict (``q_proj.weight`` ...) in PyTorch's packed
    layout: ``in_proj_weight`` stacks the rows of the query, key and value weights, in that
    order (and ``in_proj_bias`` their biases); ``out_proj`` is kept."""
    roles = ("q_proj", "k_proj", "v_proj")
    packed = {key: value for key, value in state.items()
              if not key.startswith(roles)}
    packed["in_proj_weight"] = cat([state[f"{role}.weight"] for role in roles])  # (3C, C)
    if "q_proj.bias" in state:
        packed["in_proj_bias"] = cat([state[f"{role}.bias"] for role in roles])  # (3C,)
    return packed


def split_projections(state: dict[str, Any]) -> dict[str, Any]:
    """The inverse of :func:`pack_projections`: rows ``0:C``, ``C:2C``, ``2C:3C`` of
    ``in_proj_weight`` become ``q_proj``, ``k_proj``, ``v_proj``."""
    separate = {key: value for key, value in state.items()
                if key not in ("in_proj_weight", "in_proj_bias")}
    pieces = {"weight": state["in_proj_weight"].chunk(3, dim=0)}
    if state.get("in_proj_bias") is not None:
        pieces["bias"] = state["in_proj_bias"].chunk(3, dim=0)
    for kind, chunks in pieces.items():
        for role, chunk in zip(("q_proj", "k_proj", "v_proj"), chunks):
            separate[f"{role}.{kind}"] = chunk
    return separate


def packed(layer: MultiHeadAttention, batch_first: bool = True) -> MultiheadAttention:
    """tinyattn's :class:`~tinyattn.nn.MultiHeadAttention` as its packed
    :class:`~tinyattn.nn.MultiheadAttention` (same weights, dtype, dropout and training mode).

    Examples
    --------
    >>> import tinyattn as ta
    >>> layer = ta.nn.MultiHeadAttention(8, num_heads=2).eval()
    >>> x = ta.randn(2, 3, 8)
    >>> bool(abs(ta.interop.packed(layer)(x, x, x)[0] - layer(x)).max() < 1e-5)
    True
    """
    if not isinstance(layer, MultiHeadAttention) or isinstance(layer, MultiheadAttention):
        raise TypeError(f"tinyattn.interop.packed: expected a tinyattn.nn.MultiHeadAttention, "
                        f"got {type(layer).__name__}")
    if (layer.num_kv_heads != layer.num_heads or layer.window_size is not None
            or layer.rotary is not None or layer.alibi is not None):
        raise ValueError("tinyattn.interop.packed: MultiheadAttention has no grouped key/value "
                         "heads, sliding window, rotary embedding or ALiBi")
    result = MultiheadAttention(layer.embed_dim, layer.num_heads, dropout=layer.dropout,
                                bias=layer.bias, batch_first=batch_first,
                                dtype=layer.q_proj.weight.dtype)
    result.load_state_dict(pack_projections(layer.state_dict()))
    return result.train(layer.training)


def separate(layer: MultiheadAttention) -> MultiHeadAttention:
    """tinyattn's packed :class:`~tinyattn.nn.MultiheadAttention` as a
    :class:`~tinyattn.nn.MultiHeadAttention` (batch first; same weights, dtype, dropout and
    training mode). Only a layer with ``kdim == vdim == embed_dim``, no ``bias_k``/``bias_v``
    and no ``add_zero_attn`` has that form."""
    if not isinstance(layer, MultiheadAttention):
        raise TypeError(f"tinyattn.interop.separate: expected a tinyattn.nn.MultiheadAttention, "
                        f"got {type(layer).__name__}")
    if not layer._qkv_same_embed_dim or layer.bias_k is not None or layer.add_zero_attn:
        raise ValueError("tinyattn.interop.separate: only a layer with kdim == vdim == "
                         "embed_dim, add_bias_kv=False and add_zero_attn=False has a "
                         "MultiHeadAttention equivalent")
    result = MultiHeadAttention(layer.embed_dim, layer.num_heads, dropout=layer.dropout,
                                bias=layer.bias)
    result.to(layer.in_proj_weight.dtype)
    result.load_state_dict(split_projections(layer.state_dict()))
    return result.train(layer.training)


def from_torch(module: Any) -> TransformerLM | MultiHeadAttention:
    """tinyattn's copy of a torch module: a :class:`~tinyattn.models.TransformerLM` from a
    module made by :func:`to_torch` (or any ``torch.nn.Module`` with a ``config`` attribute
    holding a :class:`~tinyattn.models.TransformerLMConfig` and a state dict of the same
    keys), or a :class:`~tinyattn.nn.MultiHeadAttention` from a ``torch.nn.MultiheadAttention``
    (its packed ``in_proj_weight`` split into ``q_proj``, ``k_proj``, ``v_proj``)."""
    torch = _torch()
    if isinstance(module, torch.nn.MultiheadAttention):
        if not module._qkv_same_embed_dim:
            raise ValueError("tinyattn.interop.from_torch: only attention with kdim == vdim == "
                             "embed_dim has a MultiHeadAttention equivalent (load its state "
                             "dict into tinyattn.nn.MultiheadAttention instead)")
        if module.bias_k is not None or module.add_zero_attn:
            raise ValueError("tinyattn.interop.from_torch: add_bias_kv and add_zero_attn have no "
                             "MultiHeadAttention equivalent (load the state dict into "
                             "tinyattn.nn.MultiheadAttention instead)")
        layer = MultiHeadAttention(module.embed_dim, module.num_heads, dropout=module.dropout,
                                   bias=module.in_proj_bias is not None)
        layer.to(module.in_proj_weight.detach().numpy().dtype)
        state = {name: from_numpy(value.detach().cpu().numpy().copy())
                 for name, value in module.state_dict().items()}
        layer.load_state_dict(split_projections(state))
        return layer.train(module.training)
    config = getattr(module, "config", None)
    if not isinstance(config, TransformerLMConfig):
        raise TypeError("tinyattn.interop.from_torch: expected a torch.nn.MultiheadAttention, "
                        "or a module with a config attribute holding a TransformerLMConfig (as "
                        f"modules made by to_torch have); got {type(module).__name__}")
    return from_torch_state_dict(module.state_dict(), config).train(module.training)


def from_torch_state_dict(state_dict: Any, config: TransformerLMConfig | dict
                          ) -> TransformerLM:
    """A :class:`~tinyattn.models.TransformerLM` of ``config`` (a config or its ``asdict``)
    with the weights of a torch state dict of the :func:`to_torch` layout, e.g. one read back
    with ``torch.load``. Its float dtype is that of the token embedding."""
    if isinstance(config, dict):
        known = {f.name for f in fields(TransformerLMConfig)}
        config = TransformerLMConfig(**{k: v for k, v in config.items() if k in known})
    model = TransformerLM(config)
    arrays = {name: tensor.detach().cpu().numpy() for name, tensor in state_dict.items()}
    if config.tie_weights and not np.array_equal(arrays.get("lm_head.weight"),
                                                 arrays["token_embedding.weight"]):
        raise ValueError("tinyattn.interop: config.tie_weights is set but lm_head.weight "
                         "is missing or differs from token_embedding.weight")
    model.to(arrays["token_embedding.weight"].dtype)
    model.load_state_dict(arrays)
    return model.eval()


def torch_checkpoint(model: TransformerLM) -> dict[str, Any]:
    """``{"config": asdict(config), "state_dict": torch state dict}``: what ``torch.save``
    writes for :func:`from_torch_checkpoint` to read back."""
    return {"config": asdict(model.config), "state_dict": to_torch(model).state_dict()}


def from_torch_checkpoint(checkpoint: dict[str, Any]) -> TransformerLM:
    """The model of a :func:`torch_checkpoint` dict (after ``torch.load``)."""
    return from_torch_state_dict(checkpoint["state_dict"], checkpoint["config"])

"""A decoder-only language model built only from :mod:`tinyattn.nn` layers: GPT-style by
default, Llama-style (RoPE, RMSNorm, SwiGLU, grouped-query attention) by its config, with a
key/value cache for generation."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import functional as F
from .autograd import no_grad
from .creation import arange
from .functional.activation import GELU_APPROXIMATIONS
from .nn import (
    Dropout,
    Embedding,
    KVCache,
    LayerNorm,
    Linear,
    ModuleList,
    RMSNorm,
    RotaryEmbedding,
    TransformerBlock,
)
from .nn.hooks import HookedModule, HookPoint
from .nn.transformer import MLPS, NORMS
from .random import generator
from .tensor import Tensor
from .validation import check_choice, is_int

POSITIONALS = ("learned", "rope", "alibi", "none")
PRESETS = ("gpt", "gpt2", "llama")


@dataclass
class TransformerLMConfig:
    """Sizes and block variant of a :class:`TransformerLM`.

    ``vocab_size=65, context_length=64, embed_dim=128, num_heads=4, num_layers=2`` is the
    benchmark configuration (421,697 parameters). ``impl`` is every block's attention path
    (``'auto'``, ``'composed'`` or ``'fused'``).

    The variant fields (defaults: GPT-style, as before they existed):

    - ``bias``: biases in every Linear and LayerNorm; ``tie_weights``: the head shares the
      token embedding's weight (and then has no bias);
    - ``positional``: ``'learned'`` (a position embedding table), ``'rope'`` (rotary queries
      and keys, base ``rope_base``), ``'alibi'`` (linear score biases) or ``'none'``;
    - ``norm``: ``'layernorm'`` or ``'rmsnorm'``; ``mlp``: ``'gelu'`` (``gelu_approximate``
      ``'none'`` or ``'tanh'``) or ``'swiglu'``;
    - ``num_kv_heads``: key/value heads (grouped-query attention; 1: multi-query);
      ``window_size``: each query sees only the last ``window_size`` keys.

    ``context_length`` is the longest sequence a model with learned positions reads. With
    relative positions (``'rope'``, ``'alibi'``, ``'none'``) it is instead the attention span:
    every query sees at most the last ``context_length`` keys (``window_size`` narrows it), so
    such a model reads longer sequences too — with RoPE up to the larger of
    ``context_length`` and ``num_layers · (span − 1) + 1`` (the receptive field), any length
    otherwise.
    """

    vocab_size: int
    context_length: int
    embed_dim: int
    num_heads: int
    num_layers: int
    mlp_ratio: int = 4
    dropout: float = 0.0
    impl: str = "auto"
    bias: bool = True
    tie_weights: bool = False
    positional: str = "learned"
    norm: str = "layernorm"
    mlp: str = "gelu"
    gelu_approximate: str = "none"
    num_kv_heads: int | None = None
    window_size: int | None = None
    rope_base: float = 10000.0


def _check_config(config: TransformerLMConfig) -> None:
    name = "TransformerLM"
    for key in ("vocab_size", "context_length", "embed_dim", "num_heads", "num_layers"):
        value = getattr(config, key)
        if not is_int(value) or value <= 0:
            raise ValueError(f"{name}: config.{key} must be a positive int, got {value!r}")
    check_choice(name, "config.positional", config.positional, POSITIONALS)
    check_choice(name, "config.norm", config.norm, NORMS)
    check_choice(name, "config.mlp", config.mlp, MLPS)
    check_choice(name, "config.gelu_approximate", config.gelu_approximate, GELU_APPROXIMATIONS)
    kv = config.num_kv_heads
    if kv is not None and (not is_int(kv) or kv < 1 or config.num_heads % kv):
        raise ValueError(f"{name}: config.num_kv_heads must be None or a positive divisor of "
                         f"config.num_heads {config.num_heads}, got {kv!r}")
    window = config.window_size
    if window is not None and (not is_int(window) or window < 1):
        raise ValueError(f"{name}: config.window_size must be None or an int >= 1, got "
                         f"{window!r}")
    head_dim, split = divmod(config.embed_dim, config.num_heads)
    if config.positional == "rope" and head_dim % 2 and not split:
        raise ValueError(f"{name}: positional='rope' rotates feature pairs and needs an even "
                         f"head size embed_dim / num_heads, got {head_dim}")


def preset_config(preset: str, vocab_size: int, context_length: int, embed_dim: int,
                  num_heads: int, num_layers: int, **fields: Any) -> TransformerLMConfig:
    """A config of the named block variant (``tinyattn train --preset``); ``fields`` override.

    ``'gpt'`` is the default config (learned positions, LayerNorm, GELU MLP, biases);
    ``'gpt2'`` also ties the head to the token embedding and uses the tanh GELU; ``'llama'`` is
    RoPE + RMSNorm + SwiGLU, no biases, and grouped-query attention with half as many
    key/value heads as query heads (all of them for an odd head count).

    Examples
    --------
    >>> config = preset_config("llama", 11, 8, 16, 4, 2)
    >>> config.positional, config.norm, config.mlp, config.num_kv_heads, config.bias
    ('rope', 'rmsnorm', 'swiglu', 2, False)
    """
    check_choice("preset_config", "preset", preset, PRESETS)
    variant: dict[str, Any] = {
        "gpt": {},
        "gpt2": {"tie_weights": True, "gelu_approximate": "tanh"},
        "llama": {"positional": "rope", "norm": "rmsnorm", "mlp": "swiglu", "bias": False,
                  "num_kv_heads": num_heads // 2 if num_heads % 2 == 0 else num_heads},
    }[preset]
    return TransformerLMConfig(vocab_size, context_length, embed_dim, num_heads, num_layers,
                               **{**variant, **fields})


@dataclass
class DecodingCache:
    """What :meth:`TransformerLM.next_token_logits` keeps between steps: one
    :class:`~tinyattn.nn.KVCache` per block, the number of positions the caches were fed since
    they were last (re)started (``position``), and how many tokens of the sequence have been
    read (``consumed``); ``prefills`` counts the calls that (re)started the caches."""

    layers: list[KVCache]
    position: int = 0
    consumed: int = 0
    prefills: int = field(default=0, repr=False)

    def reset(self) -> None:
        """Forget everything (the next step is a prefill)."""
        for cache in self.layers:
            cache.reset()
        self.position = self.consumed = 0


class TransformerLM(HookedModule):
    """Decoder-only transformer: token embedding (+ learned position embedding), dropout,
    ``num_layers`` causal pre-norm :class:`~tinyattn.nn.TransformerBlock`, a final norm and a
    linear head.

    Submodules: ``token_embedding``, ``position_embedding`` (learned positions only),
    ``dropout``, ``blocks``, ``ln_f``, ``lm_head`` (its ``weight`` is the token embedding's
    with ``tie_weights``). Hook points (``model.hook_points()``): ``hook_embed``,
    ``hook_pos_embed`` (learned positions only), and in each block
    ``blocks.{i}.hook_resid_pre/mid/post``, ``blocks.{i}.hook_attn_out``,
    ``blocks.{i}.hook_mlp_out``,
    ``blocks.{i}.attn.hook_q/hook_k/hook_v/hook_attn_scores/hook_pattern/hook_z`` (with RoPE
    also ``blocks.{i}.attn.hook_rot_q/hook_rot_k``); see ``run_with_cache`` and
    ``run_with_hooks``.

    Examples
    --------
    >>> import tinyattn as ta
    >>> config = ta.models.TransformerLMConfig(vocab_size=11, context_length=8, embed_dim=16,
    ...                                        num_heads=2, num_layers=1)
    >>> model = ta.TransformerLM(config)
    >>> idx = ta.tensor([[1, 2, 3], [4, 5, 6]])
    >>> model(idx).shape
    (2, 3, 11)
    >>> logits, loss = model(idx, targets=idx)
    >>> loss.shape
    ()
    """

    def __init__(self, config: TransformerLMConfig):
        super().__init__()
        _check_config(config)
        self.config = config
        C, L = config.embed_dim, config.num_layers
        learned = config.positional == "learned"
        span = config.context_length
        if config.window_size is not None:
            span = min(span, config.window_size)
        # span: the most keys a query sees (window_size; with relative positions also
        # context_length). max_length: the tokens the next-token logits depend on (with
        # relative positions the last token's receptive field through the layers).
        # rope_positions: the RoPE table, long enough for both.
        self.span = span
        self.max_length = config.context_length if learned else L * (span - 1) + 1
        self.rope_positions = max(config.context_length, self.max_length)
        self.token_embedding = Embedding(config.vocab_size, C)
        if learned:
            self.position_embedding = Embedding(config.context_length, C)
        self.dropout = Dropout(config.dropout)
        window = config.window_size if learned else span
        head_dim = C // config.num_heads
        self.blocks = ModuleList(
            TransformerBlock(
                C, config.num_heads, config.mlp_ratio, config.dropout, causal=True,
                impl=config.impl, bias=config.bias, norm=config.norm, mlp=config.mlp,
                gelu_approximate=config.gelu_approximate, num_kv_heads=config.num_kv_heads,
                window_size=window, alibi=config.positional == "alibi",
                rotary=RotaryEmbedding(head_dim, self.rope_positions, config.rope_base)
                if config.positional == "rope" else None)
            for _ in range(L)
        )
        self.ln_f = RMSNorm(C) if config.norm == "rmsnorm" else LayerNorm(C, bias=config.bias)
        self.lm_head = Linear(C, config.vocab_size, bias=config.bias and not config.tie_weights)
        if config.tie_weights:
            self.lm_head.weight = self.token_embedding.weight
        self.hook_embed = HookPoint()
        if learned:
            self.hook_pos_embed = HookPoint()

    def embed(self, idx: Tensor, position: int = 0) -> Tensor:
        """Token embeddings ``(B, T, C)`` of ``idx (B, T)``, plus the learned position
        embeddings of positions ``position … position + T − 1`` when the model has them."""
        x = self.hook_embed(self.token_embedding(idx))  # (B, T, C)
        if self.config.positional == "learned":
            positions = arange(position, position + idx.shape[1])  # (T,)
            x = x + self.hook_pos_embed(self.position_embedding(positions))  # (B, T, C)
        return x

    def forward(self, idx: Tensor, targets: Tensor | None = None, *,
                cache: DecodingCache | None = None) -> Tensor | tuple[Tensor, Tensor]:
        """Logits ``(B, T, vocab_size)`` for token ids ``idx (B, T)``; with ``targets (B, T)``
        also the mean cross-entropy loss.

        With a ``cache`` (from :meth:`new_cache`), ``idx`` continues the tokens the cache has
        seen: their keys and values are reused, and ``idx``'s are appended.
        """
        name = "TransformerLM"
        if not isinstance(idx, Tensor) or idx.dtype.kind not in "iu" or idx.ndim != 2:
            raise ValueError(f"{name}: idx must be an integer Tensor of shape (B, T), got "
                             f"{type(idx).__name__} of dtype {getattr(idx, 'dtype', None)} and "
                             f"shape {getattr(idx, 'shape', None)}")
        B, T = idx.shape
        position = 0 if cache is None else cache.position
        if self.config.positional == "learned" and position + T > self.config.context_length:
            where = "" if cache is None else f" after the {position} cached positions"
            raise ValueError(f"{name}: sequence length {T}{where} exceeds context_length "
                             f"{self.config.context_length} (learned positions)")
        if self.config.positional == "rope" and T > self.rope_positions:
            raise ValueError(f"{name}: sequence length {T} exceeds the {self.rope_positions} "
                             "positions of the RoPE table (the context length, or the "
                             "receptive field num_layers · (span − 1) + 1 if longer)")
        if cache is not None and len(cache.layers) != len(self.blocks):
            raise ValueError(f"{name}: the cache has {len(cache.layers)} layers, the model "
                             f"{len(self.blocks)}; make it with model.new_cache()")
        x = self.dropout(self.embed(idx, position))  # (B, T, C)
        for i, block in enumerate(self.blocks):
            x = block(x, None if cache is None else cache.layers[i])
        if cache is not None:
            cache.position += T
        logits = self.lm_head(self.ln_f(x))  # (B, T, vocab_size)
        if targets is None:
            return logits
        if not isinstance(targets, Tensor) or targets.shape != (B, T):
            raise ValueError(f"{name}: targets must be a Tensor of shape {(B, T)}, got "
                             f"{getattr(targets, 'shape', type(targets).__name__)}")
        flat_logits = logits.reshape(B * T, -1)  # (B·T, vocab_size)
        loss = F.cross_entropy(flat_logits, targets.reshape(B * T))  # targets: (B·T,)
        return logits, loss

    def new_cache(self) -> DecodingCache:
        """An empty :class:`DecodingCache` for this model.

        Each block's :class:`~tinyattn.nn.KVCache` keeps the last ``span − 1`` positions and
        slides past them, except with learned positions and no window, where it holds up to
        ``context_length`` positions and going past that is an error.
        """
        learned_full = self.config.positional == "learned" and self.config.window_size is None
        return DecodingCache([
            KVCache(self.config.context_length) if learned_full else
            KVCache(self.span - 1, sliding=True) for _ in self.blocks])

    @no_grad()
    def next_token_logits(self, tokens: Tensor | np.ndarray,
                          cache: DecodingCache | None = None) -> Tensor:
        """Logits ``(B, vocab_size)`` of the token that follows ``tokens (B, N)``.

        Without a cache, the last :attr:`max_length` tokens are read from scratch. With one,
        only the tokens it has not yet read are fed (all of them on the first call: the
        prefill), so each later call costs one position's attention per layer; the result is
        the same, to round-off, at every step:

        - learned positions: the model reads the last ``context_length`` tokens with positions
          ``0 … context_length − 1``. Past the context length every token's position shifts
          by one at each step, which changes every cached key and value, so the cache is
          re-started on the last ``context_length`` tokens (a prefill per step: exact, but no
          faster than no cache);
        - RoPE, ALiBi or no positions: a query's scores depend only on distances ``i − j``
          within its span, so past the context length the cache slides (the oldest position
          falls out of every layer's cache) and each step still costs one position — this
          equals reading the whole sequence, whose last token reaches back
          ``num_layers · (span − 1)`` positions through the layers.

        ``tokens`` must continue what the cache has read (the tokens from earlier calls, then
        new ones).
        """
        tokens = tokens.numpy() if isinstance(tokens, Tensor) else np.asarray(tokens)
        if tokens.ndim != 2 or tokens.dtype.kind not in "iu" or tokens.shape[1] == 0:
            raise ValueError(f"TransformerLM.next_token_logits: tokens must be integer ids of "
                             f"shape (B, N) with N >= 1, got {tokens.dtype} {tokens.shape}")
        N = tokens.shape[1]
        if cache is None:
            return self(Tensor(tokens[:, -self.max_length:]))[:, -1]  # (B, vocab_size)
        if N <= cache.consumed:
            raise ValueError(f"TransformerLM.next_token_logits: the cache has read "
                             f"{cache.consumed} tokens; tokens (B, {N}) has no new one")
        learned = self.config.positional == "learned"
        if learned and cache.position + N - cache.consumed > self.config.context_length:
            cache.reset()  # positions shift: re-read the last context_length tokens
        if cache.consumed == 0:
            new = tokens[:, -self.max_length:]  # prefill
            cache.prefills += 1
        else:
            new = tokens[:, cache.consumed:]
        logits = self(Tensor(new), cache=cache)[:, -1]  # (B, vocab_size)
        cache.consumed = N
        return logits

    @no_grad()
    def generate(self, idx: Tensor, max_new_tokens: int, temperature: float = 1.0,
                 top_k: int | None = None, use_cache: bool = True) -> Tensor:
        """Append ``max_new_tokens`` sampled tokens to ``idx (B, T)``; returns ``(B, T + n)``.

        Each step takes the logits of :meth:`next_token_logits` — with a key/value cache unless
        ``use_cache=False``, the same logits either way — divides them by ``temperature``,
        keeps the ``top_k``
        largest (when given) and samples from the softmax with
        :func:`tinyattn.random.generator` (so ``ta.manual_seed`` repeats it). Call ``eval()``
        first to switch dropout off.

        Past the context length: with learned positions the model reads the last
        ``context_length`` tokens, whose positions all shift at each step, so the cache is
        re-started on them at every step (exact, no faster than recomputing); with RoPE (or
        ALiBi, or no positions) ``context_length`` is how far back a query sees, the cache
        slides (the oldest key and value drop out) and each step still costs one position.
        """
        name = "TransformerLM.generate"
        if not is_int(max_new_tokens) or max_new_tokens < 0:
            raise ValueError(f"{name}: max_new_tokens must be an int >= 0, got {max_new_tokens!r}")
        if not temperature > 0:
            raise ValueError(f"{name}: temperature must be > 0, got {temperature!r}")
        vocab = self.config.vocab_size
        if top_k is not None and (not is_int(top_k) or not 1 <= top_k <= vocab):
            raise ValueError(f"{name}: top_k must be None or an int in [1, {vocab}], got "
                             f"{top_k!r}")
        cache = self.new_cache() if use_cache else None
        tokens = idx.numpy()
        for _ in range(max_new_tokens):
            logits = self.next_token_logits(tokens, cache).numpy() / temperature  # (B, vocab)
            if top_k is not None:
                kth = np.sort(logits, axis=-1)[:, -top_k][:, None]  # (B, 1)
                logits = np.where(logits < kth, -np.inf, logits)
            probs = F.softmax(Tensor(logits), dim=-1).numpy().astype(np.float64)  # (B, vocab_size)
            cumulative = np.cumsum(probs, axis=-1)
            draws = generator().random((len(tokens), 1)) * cumulative[:, -1:]  # (B, 1)
            next_tokens = (cumulative <= draws).sum(axis=-1, keepdims=True)  # (B, 1)
            tokens = np.concatenate([tokens, np.minimum(next_tokens, vocab - 1)], axis=1)
        return Tensor(tokens)

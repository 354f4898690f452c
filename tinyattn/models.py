"""A GPT-style language model built only from :mod:`tinyattn.nn` layers."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import functional as F
from .autograd import no_grad
from .creation import arange
from .nn import Dropout, Embedding, LayerNorm, Linear, ModuleList, TransformerBlock
from .nn.hooks import HookedModule, HookPoint
from .random import generator
from .tensor import Tensor


@dataclass
class TransformerLMConfig:
    """Sizes of a :class:`TransformerLM`.

    ``vocab_size=65, context_length=64, embed_dim=128, num_heads=4, num_layers=2`` is the
    benchmark configuration (421,697 parameters). ``impl`` is every block's attention path
    (``'auto'``, ``'composed'`` or ``'fused'``).
    """

    vocab_size: int
    context_length: int
    embed_dim: int
    num_heads: int
    num_layers: int
    mlp_ratio: int = 4
    dropout: float = 0.0
    impl: str = "auto"


class TransformerLM(HookedModule):
    """Decoder-only transformer: token + learned position embeddings, dropout, ``num_layers``
    causal pre-LN :class:`~tinyattn.nn.TransformerBlock`, a final LayerNorm and a linear head
    (with bias, not tied to the token embedding).

    Submodules: ``token_embedding``, ``position_embedding``, ``dropout``, ``blocks``,
    ``ln_f``, ``lm_head``. Hook points (``model.hook_points()``): ``hook_embed``,
    ``hook_pos_embed``, and in each block ``blocks.{i}.hook_resid_pre/mid/post``,
    ``blocks.{i}.hook_attn_out``, ``blocks.{i}.hook_mlp_out``,
    ``blocks.{i}.attn.hook_q/hook_k/hook_v/hook_attn_scores/hook_pattern/hook_z``; see
    ``run_with_cache`` and ``run_with_hooks``.

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
        for field in ("vocab_size", "context_length", "embed_dim", "num_heads", "num_layers"):
            value = getattr(config, field)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"TransformerLM: config.{field} must be a positive int, got "
                                 f"{value!r}")
        self.config = config
        C = config.embed_dim
        self.token_embedding = Embedding(config.vocab_size, C)
        self.position_embedding = Embedding(config.context_length, C)
        self.dropout = Dropout(config.dropout)
        self.blocks = ModuleList(
            TransformerBlock(C, config.num_heads, config.mlp_ratio, config.dropout, causal=True,
                             impl=config.impl)
            for _ in range(config.num_layers)
        )
        self.ln_f = LayerNorm(C)
        self.lm_head = Linear(C, config.vocab_size)
        self.hook_embed, self.hook_pos_embed = HookPoint(), HookPoint()

    def forward(self, idx: Tensor, targets: Tensor | None = None) -> Tensor | tuple[Tensor, Tensor]:
        """Logits ``(B, T, vocab_size)`` for token ids ``idx (B, T)``; with ``targets (B, T)``
        also the mean cross-entropy loss."""
        if not isinstance(idx, Tensor) or idx.dtype.kind not in "iu" or idx.ndim != 2:
            raise ValueError(f"TransformerLM: idx must be an integer Tensor of shape (B, T), got "
                             f"{type(idx).__name__} of dtype {getattr(idx, 'dtype', None)} and "
                             f"shape {getattr(idx, 'shape', None)}")
        B, T = idx.shape
        if T > self.config.context_length:
            raise ValueError(f"TransformerLM: sequence length {T} exceeds context_length "
                             f"{self.config.context_length}")
        positions = arange(T)  # (T,)
        x = self.hook_embed(self.token_embedding(idx)) + self.hook_pos_embed(
            self.position_embedding(positions))  # (B, T, C)
        x = self.dropout(x)
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))  # (B, T, vocab_size)
        if targets is None:
            return logits
        if not isinstance(targets, Tensor) or targets.shape != (B, T):
            raise ValueError(f"TransformerLM: targets must be a Tensor of shape {(B, T)}, got "
                             f"{getattr(targets, 'shape', type(targets).__name__)}")
        flat_logits = logits.reshape(B * T, -1)  # (B·T, vocab_size)
        loss = F.cross_entropy(flat_logits, targets.reshape(B * T))  # targets: (B·T,)
        return logits, loss

    @no_grad()
    def generate(self, idx: Tensor, max_new_tokens: int, temperature: float = 1.0,
                 top_k: int | None = None) -> Tensor:
        """Append ``max_new_tokens`` sampled tokens to ``idx (B, T)``; returns ``(B, T + n)``.

        Each step feeds the last ``context_length`` tokens, divides the last logits by
        ``temperature``, keeps the ``top_k`` largest (when given) and samples from the softmax
        with :func:`tinyattn.random.generator` (so ``ta.manual_seed`` repeats it). Call
        ``eval()`` first to switch dropout off.
        """
        name = "TransformerLM.generate"
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or (
                max_new_tokens < 0):
            raise ValueError(f"{name}: max_new_tokens must be an int >= 0, got {max_new_tokens!r}")
        if not temperature > 0:
            raise ValueError(f"{name}: temperature must be > 0, got {temperature!r}")
        vocab = self.config.vocab_size
        if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int)
                                  or not 1 <= top_k <= vocab):
            raise ValueError(f"{name}: top_k must be None or an int in [1, {vocab}], got "
                             f"{top_k!r}")
        tokens = idx.data
        for _ in range(max_new_tokens):
            context = Tensor(tokens[:, -self.config.context_length:])  # (B, ≤ context_length)
            logits = self(context).data[:, -1, :] / temperature  # (B, vocab_size)
            if top_k is not None:
                kth = np.sort(logits, axis=-1)[:, -top_k][:, None]  # (B, 1)
                logits = np.where(logits < kth, -np.inf, logits)
            probs = F.softmax(Tensor(logits), dim=-1).data.astype(np.float64)  # (B, vocab_size)
            cumulative = np.cumsum(probs, axis=-1)
            draws = generator().random((len(tokens), 1)) * cumulative[:, -1:]  # (B, 1)
            next_tokens = (cumulative <= draws).sum(axis=-1, keepdims=True)  # (B, 1)
            tokens = np.concatenate([tokens, np.minimum(next_tokens, vocab - 1)], axis=1)
        return Tensor(tokens)

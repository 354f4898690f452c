"""``KVCache``: the keys and values one self-attention layer has already computed, so that
decoding one more token costs one query's attention instead of the whole context's."""

from __future__ import annotations

from ..ops import cat
from ..tensor import Tensor
from ..validation import check_int


class KVCache:
    """Keys ``(B, Hkv, S, D)`` and values ``(B, Hkv, S, Dv)`` of the tokens seen so far.

    :meth:`update` appends a step's keys and values and returns everything the step attends
    over (old and new). Between steps the cache holds at most ``max_length`` positions: with
    ``sliding=False`` a step that would go past that is an error; with ``sliding=True`` the
    oldest positions are dropped (a sliding window: a query that sees only the last ``w`` keys
    needs ``max_length = w − 1``). :class:`~tinyattn.nn.MultiHeadAttention` stores keys before
    any rotary embedding, so positions inside the cache always start at 0.

    Examples
    --------
    >>> import tinyattn as ta
    >>> cache = ta.nn.KVCache(max_length=4, sliding=True)
    >>> keys, _ = cache.update(ta.randn(1, 2, 3, 8), ta.randn(1, 2, 3, 8))
    >>> keys, _ = cache.update(ta.randn(1, 2, 2, 8), ta.randn(1, 2, 2, 8))
    >>> keys.shape[2], cache.length  # this step saw 5 keys; 4 are kept
    (5, 4)
    """

    def __init__(self, max_length: int, sliding: bool = False):
        self.max_length = check_int("KVCache", "max_length", max_length, 0)
        self.sliding = bool(sliding)
        self.keys: Tensor | None = None
        self.values: Tensor | None = None

    @property
    def length(self) -> int:
        """Number of positions held."""
        return 0 if self.keys is None else self.keys.shape[-2]

    def reset(self) -> None:
        """Forget every position."""
        self.keys = self.values = None

    def update(self, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        """Append ``key (B, Hkv, T, D)`` and ``value (B, Hkv, T, Dv)``; return the keys and
        values of this step, ``(B, Hkv, length + T, ·)``."""
        name = "KVCache.update"
        if key.ndim != 4 or value.ndim != 4 or key.shape[:3] != value.shape[:3]:
            raise ValueError(f"{name}: key and value must be (B, Hkv, T, D) and (B, Hkv, T, Dv), "
                             f"got {key.shape} and {value.shape}")
        if self.keys is not None and (key.shape[:2] != self.keys.shape[:2]
                                      or key.shape[-1] != self.keys.shape[-1]
                                      or value.shape[-1] != self.values.shape[-1]):
            raise ValueError(f"{name}: new keys {key.shape} / values {value.shape} do not match "
                             f"the cached {self.keys.shape} / {self.values.shape}")
        if not self.sliding and self.length + key.shape[-2] > self.max_length:
            raise ValueError(f"{name}: the cache holds {self.length} positions; {key.shape[-2]} "
                             f"more would exceed max_length {self.max_length}")
        if self.keys is not None:
            key = cat([self.keys, key], dim=-2)  # (B, Hkv, S, D)
            value = cat([self.values, value], dim=-2)  # (B, Hkv, S, Dv)
        start = key.shape[-2] - self.max_length
        self.keys, self.values = (key, value) if start <= 0 else (key[:, :, start:],
                                                                   value[:, :, start:])
        return key, value

    def __repr__(self) -> str:
        return f"KVCache(length={self.length}, max_length={self.max_length}, " \
               f"sliding={self.sliding})"

"""A counter-based (stateless) random number generator for attention dropout.

Instead of drawing dropout masks from a stateful generator and storing them, every weight
``(b, h, i, j)`` of an attention call gets its own uniform number ``u(seed, b, h, i, j)``
computed from the key ``(seed, b, h, i, j)`` alone. The fused attention kernel regenerates
exactly the same mask in its backward pass without having stored it, and the composed
(unfused) path can build the same mask to compare against.

The keys are folded into a 64-bit state one at a time::

    state₀ = seed,   state_{n+1} = mix(state_n + (key_n + 1) · γ)   (mod 2⁶⁴)

with ``γ = 0x9E3779B97F4A7C15`` (the golden-ratio increment of SplitMix64) and ``mix`` the
SplitMix64 finaliser (two xor-shift-multiply rounds with its published constants). ``mix`` is
a bijection of 64-bit integers and ``(key + 1) · γ`` is injective in ``key`` (``γ`` is odd), so
for a fixed prefix distinct keys give distinct states. The uniform number is the top 53 bits
of the last state scaled into ``[0, 1)``. Dropout keeps a weight when that number is ``>= p``.

The kernels make that test on integers: with ``top53 = state >> 11``, ``top53 / 2⁵³ >= p`` holds
exactly when ``top53 >= ⌈p · 2⁵³⌉`` (:func:`keep_threshold`; ``p · 2⁵³`` is exact in float64 and
``top53`` is an integer), which a vector loop can test without converting to floating point.

A prefix of the keys can be folded once and reused (:func:`fold_key`), which is what the
attention kernels do per head and per query.
"""

from __future__ import annotations

import math

import numpy as np

from .compiled_only import compiled_only
from .jit import jit
from .parallel import run_tasks

_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_MIX_MUL_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_MUL_2 = np.uint64(0x94D049BB133111EB)
_ONE = np.uint64(1)
_SHIFT_30 = np.uint64(30)
_SHIFT_27 = np.uint64(27)
_SHIFT_31 = np.uint64(31)
_SHIFT_11 = np.uint64(11)
_TWO_POW_53 = 2.0**53
_TWO_POW_MINUS_53 = 2.0**-53


@jit(inline="always")
def _mix64(x):
    x = (x ^ (x >> _SHIFT_30)) * _MIX_MUL_1
    x = (x ^ (x >> _SHIFT_27)) * _MIX_MUL_2
    return x ^ (x >> _SHIFT_31)


@jit(inline="always")
def fold_key(state, key):
    """Fold one non-negative integer ``key`` into a uint64 ``state``: ``mix(state + (key+1)·γ)``."""
    return _mix64(state + (np.uint64(key) + _ONE) * _GAMMA)


@jit(inline="always")
def keep_threshold(p):
    """``⌈p · 2⁵³⌉`` as a uint64: a state is kept (its uniform number is ``>= p``) when
    :func:`kept` says so. ``p = 0`` keeps every state, ``p = 1`` none."""
    return np.uint64(math.ceil(p * _TWO_POW_53))


@jit(inline="always")
def kept(state, threshold):
    """Whether the uniform number of ``state``, ``top53(state) / 2⁵³``, is ``>= p`` for
    ``threshold = keep_threshold(p)``."""
    return (state >> _SHIFT_11) >= threshold


@compiled_only(error_model="numpy")
def _dropout_keep_mask_head(seed, p, keep, bh):
    """The keep-mask of head ``bh % H`` of batch element ``bh // H``."""
    _, n_heads, n_queries, n_keys = keep.shape
    threshold = keep_threshold(p)
    b = bh // n_heads
    h = bh % n_heads
    head_state = fold_key(fold_key(seed, b), h)
    for i in range(n_queries):
        row_state = fold_key(head_state, i)
        for j in range(n_keys):
            keep[b, h, i, j] = kept(fold_key(row_state, j), threshold)


def dropout_keep_mask(seed: int, B: int, H: int, T: int, S: int, p: float) -> np.ndarray:
    """Boolean keep-mask ``(B, H, T, S)`` of attention dropout: ``u(seed, b, h, i, j) >= p``.

    Parameters
    ----------
    seed : int
        In ``[0, 2**64)``.
    B, H, T, S : int
        Batch, heads, queries, keys.
    p : float
        Drop probability in ``[0, 1]``; ``p = 0`` keeps everything, ``p = 1`` drops everything.

    Returns
    -------
    np.ndarray
        ``bool`` array of shape ``(B, H, T, S)``, True where the weight is kept.

    Examples
    --------
    >>> mask = dropout_keep_mask(7, 1, 1, 2, 3, 0.5)
    >>> mask.shape, mask.dtype
    ((1, 1, 2, 3), dtype('bool'))
    >>> bool((mask == dropout_keep_mask_numpy(7, 1, 1, 2, 3, 0.5)).all())
    True
    """
    assert 0 <= seed < 2**64 and 0.0 <= p <= 1.0, (seed, p)
    keep = np.empty((B, H, T, S), dtype=np.bool_)
    run_tasks(_dropout_keep_mask_head, B * H, np.uint64(seed), float(p), keep, parallel=True)
    return keep


def _fold_key_numpy(state: np.ndarray, key: np.ndarray) -> np.ndarray:
    x = state + (key.astype(np.uint64) + _ONE) * _GAMMA
    x = (x ^ (x >> _SHIFT_30)) * _MIX_MUL_1
    x = (x ^ (x >> _SHIFT_27)) * _MIX_MUL_2
    return x ^ (x >> _SHIFT_31)


def uniform_numpy(seed: int, *keys: np.ndarray | int) -> np.ndarray:
    """The uniform numbers ``u(seed, *keys)`` in plain numpy; the keys broadcast together.

    ``uniform_numpy(seed, b, h, i, j)`` is the number of attention weight ``(b, h, i, j)``;
    :mod:`.dropout` uses the one-key stream ``uniform_numpy(seed, n)`` (``n`` the C-order index).
    """
    with np.errstate(over="ignore"):  # uint64 arithmetic wraps modulo 2⁶⁴
        state = np.full((), seed, dtype=np.uint64)
        for key in keys:
            state = _fold_key_numpy(state, np.asarray(key))
    return (state >> _SHIFT_11).astype(np.float64) * _TWO_POW_MINUS_53


def dropout_keep_mask_numpy(seed: int, B: int, H: int, T: int, S: int, p: float) -> np.ndarray:
    """Plain-numpy twin of :func:`dropout_keep_mask`."""
    b, h, i, j = np.ix_(np.arange(B), np.arange(H), np.arange(T), np.arange(S))
    return uniform_numpy(seed, b, h, i, j) >= p

"""Exercise: the backward pass of one attention head — dQ, dK and dV.

    S = s · Q Kᵀ     with s = 1/√D; when causal, −inf where key j > query i
    P = softmax(S)   row by row
    O = P V

Write ``backward`` below, then check it (every element, several shapes, with and without a
causal mask):

    tinyattn exercise check attention_head.py
"""

import numpy as np

EXERCISE = "attention_head"


def forward(q, k, v, causal):
    """q (..., T, D), k (..., S, D), v (..., S, Dv) -> O (..., T, Dv), and the cache."""
    s = 1.0 / np.sqrt(q.shape[-1])
    scores = s * q @ np.swapaxes(k, -1, -2)  # (..., T, S)
    if causal:
        T, S = scores.shape[-2:]
        scores = np.where(np.tril(np.ones((T, S), dtype=bool)), scores, -np.inf)
    shifted = np.exp(scores - scores.max(axis=-1, keepdims=True))
    p = shifted / shifted.sum(axis=-1, keepdims=True)  # (..., T, S)
    return p @ v, (q, k, v, p, s)


def backward(d_out, cache):
    """dL/dO (..., T, Dv) -> (dL/dQ, dL/dK, dL/dV), shaped like q, k and v.

    Work backwards through O = P V, then P = softmax(S), then S = s · Q Kᵀ.
    np.swapaxes(a, -1, -2) transposes the last two axes.
    """
    q, k, v, p, s = cache
    dv = np.swapaxes(p, -1, -2) @ d_out
    dp = d_out @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
    dq = s * ds @ k
    dk = s * np.swapaxes(ds, -1, -2) @ q
    return dq, dk, dv

"""Exercise: the backward pass of attention with dropout on the weights.

    S = s · Q Kᵀ              with s = 1/√D; when causal, −inf where key j > query i
    P = softmax(S)            row by row
    W = P ⊙ keep / (1 − p)    inverted dropout: keep is the mask of kept weights
    O = W V

The mask is given (in training it is drawn once per forward pass; the backward must use the
same one). Write ``backward`` below, then check it:

    tinyattn exercise check dropout_attention.py
"""

import numpy as np

EXERCISE = "dropout_attention"


def forward(q, k, v, keep, p, causal):
    """q (..., T, D), k (..., S, D), v (..., S, Dv), keep (..., T, S) bool, p the drop
    probability -> O (..., T, Dv), and the cache."""
    s = 1.0 / np.sqrt(q.shape[-1])
    scores = s * q @ np.swapaxes(k, -1, -2)  # (..., T, S)
    if causal:
        T, S = scores.shape[-2:]
        scores = np.where(np.tril(np.ones((T, S), dtype=bool)), scores, -np.inf)
    shifted = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = shifted / shifted.sum(axis=-1, keepdims=True)  # P (..., T, S)
    dropped = weights * keep / (1.0 - p)  # W
    return dropped @ v, (q, k, v, weights, dropped, keep, p, s)


def backward(d_out, cache):
    """dL/dO (..., T, Dv) -> (dL/dQ, dL/dK, dL/dV), shaped like q, k and v."""
    q, k, v, weights, dropped, keep, p, s = cache
    dv = np.swapaxes(dropped, -1, -2) @ d_out
    dp = (d_out @ np.swapaxes(v, -1, -2)) * keep / (1.0 - p)
    ds = weights * (dp - (dp * weights).sum(axis=-1, keepdims=True))
    dq = s * ds @ k
    dk = s * np.swapaxes(ds, -1, -2) @ q
    return dq, dk, dv

"""Exercise: the backward pass of softmax.

    y = softmax(x), row by row over the last axis:  y_i = e^(x_i) / Σ_j e^(x_j)

Write ``backward`` below, then check it (every element, several shapes, a masked row):

    tinyattn exercise check softmax.py
"""

import numpy as np

EXERCISE = "softmax"


def forward(x):
    """x (..., S) -> y (..., S), and the cache that backward receives.

    Entries of x may be -inf (masked): they get weight 0.
    """
    shifted = np.exp(x - x.max(axis=-1, keepdims=True))
    y = shifted / shifted.sum(axis=-1, keepdims=True)
    return y, (y,)


def backward(dy, cache):
    """dL/dy (..., S) -> dL/dx (..., S).

    For one row, dy_i/dx_j = y_i (δ_ij − y_j). Use only numpy.
    """
    (y,) = cache
    return y * (dy - (dy * y).sum(axis=-1, keepdims=True))

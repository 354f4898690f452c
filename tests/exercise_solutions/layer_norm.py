"""Exercise: the backward pass of layer normalisation.

    mean = mean_j x_j,  var = mean_j (x_j − mean)²   (over the last axis, C features)
    x̂ = (x − mean) / sqrt(var + eps)
    y = x̂ ⊙ weight + bias

Write ``backward`` below, then check it:

    tinyattn exercise check layer_norm.py
"""

import numpy as np

EXERCISE = "layer_norm"


def forward(x, weight, bias, eps):
    """x (..., C), weight (C,), bias (C,) -> y (..., C), and the cache."""
    mean = x.mean(axis=-1, keepdims=True)
    rstd = 1.0 / np.sqrt(((x - mean) ** 2).mean(axis=-1, keepdims=True) + eps)
    x_hat = (x - mean) * rstd
    return x_hat * weight + bias, (x_hat, rstd, weight)


def backward(dy, cache):
    """dL/dy (..., C) -> (dL/dx, dL/dweight, dL/dbias), shaped like x, weight and bias.

    mean and var depend on every x_j of the row: they are not constants.
    """
    x_hat, rstd, weight = cache
    g = dy * weight
    dx = (g - g.mean(axis=-1, keepdims=True)
          - x_hat * (g * x_hat).mean(axis=-1, keepdims=True)) * rstd
    rows = tuple(range(dy.ndim - 1))
    return dx, (dy * x_hat).sum(axis=rows), dy.sum(axis=rows)

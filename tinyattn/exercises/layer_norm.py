"""Exercise ``layer_norm``: dx, dweight and dbias of a layer norm over the last axis."""

from __future__ import annotations

import numpy as np

from ..functional.normalization import layer_norm
from ..tensor import Tensor
from .exercise import Case, Mistake

EPS = 1e-5

SUMMARY = "dx, dweight and dbias of a layer norm: the mean and variance depend on x"
INPUTS = ("x", "weight", "bias")

STUB = '''"""Exercise: the backward pass of layer normalisation.

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
    raise NotImplementedError("write dx, dweight and dbias here")
'''


def cases(rng: np.random.Generator) -> list[Case]:
    def case(label: str, shape: tuple[int, ...]) -> Case:
        C = shape[-1]
        return Case(label, {"x": 2.0 * rng.standard_normal(shape) + 0.5,
                            "weight": rng.standard_normal(C), "bias": rng.standard_normal(C)},
                    {"eps": EPS})

    return [case("x (4, 6)", (4, 6)), case("x (2, 3, 5)", (2, 3, 5)), case("x (1, 8)", (1, 8))]


def reference(x: Tensor, weight: Tensor, bias: Tensor, eps: float) -> Tensor:
    return layer_norm(x, x.shape[-1], weight, bias, eps)


def _mistake(constant_statistics: bool = False, variance_term: bool = True):
    def gradients(case: Case, dy: np.ndarray) -> dict[str, np.ndarray]:
        x, weight = case.arrays["x"], case.arrays["weight"]
        mean = x.mean(-1, keepdims=True)
        rstd = 1.0 / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + EPS)
        x_hat = (x - mean) * rstd
        g = dy * weight
        if constant_statistics:
            dx = g * rstd
        else:
            dx = g - g.mean(-1, keepdims=True)
            if variance_term:
                dx = dx - x_hat * (g * x_hat).mean(-1, keepdims=True)
            dx = dx * rstd
        rows = tuple(range(dy.ndim - 1))
        return {"x": dx, "weight": (dy * x_hat).sum(rows), "bias": dy.sum(rows)}

    return gradients


MISTAKES = (
    Mistake("the mean and variance were treated as constants: dx = (ĝ − mean(ĝ) − x̂ ⊙ "
            "mean(ĝ ⊙ x̂)) / σ with ĝ = dy ⊙ weight, not ĝ / σ",
            _mistake(constant_statistics=True)),
    Mistake("the variance's dependence on x is missing: dx needs the term − x̂ ⊙ "
            "mean(ĝ ⊙ x̂) inside (… ) / σ", _mistake(variance_term=False)),
)

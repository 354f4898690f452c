"""Exercise ``softmax``: the backward pass of a row softmax."""

from __future__ import annotations

import numpy as np

from ..ops import softmax
from ..tensor import Tensor
from .exercise import Case, Mistake, causal, softmax_rows

SUMMARY = "dx from dy for y = softmax(x): the row-sum term"
INPUTS = ("x",)

STUB = '''"""Exercise: the backward pass of softmax.

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
    raise NotImplementedError("write the softmax backward here")
'''


def cases(rng: np.random.Generator) -> list[Case]:
    masked = rng.standard_normal((4, 4))
    masked[~causal(4, 4)] = -np.inf
    return [
        Case("x (3, 5)", {"x": rng.standard_normal((3, 5))}),
        Case("x (2, 3, 4)", {"x": 3.0 * rng.standard_normal((2, 3, 4))}),
        Case("x (4, 4), causal: -inf above the diagonal", {"x": masked}),
    ]


def reference(x: Tensor) -> Tensor:
    return softmax(x, dim=-1)


def _without_row_sum(case: Case, dy: np.ndarray) -> dict[str, np.ndarray]:
    y = softmax_rows(case.arrays["x"])
    return {"x": y * dy}


MISTAKES = (
    Mistake("the row-sum term is missing: dx = y ⊙ (dy − Σ_j dy_j y_j), not y ⊙ dy (each "
            "x_j moves every y_i through the shared denominator)", _without_row_sum),
)

"""Exercise ``softmax``: the backward pass of a row softmax, as a custom autograd Function."""

from __future__ import annotations

import numpy as np

from ..ops import softmax
from ..tensor import Tensor
from .exercise import Case, Mistake, Values

SUMMARY = "dx from dy for y = softmax(x): the row-sum term"
FUNCTION = "Softmax"
ARGUMENTS = ("x",)
INPUTS = ("x",)
OUTPUT = "y"

STUB = '''"""Exercise: the backward pass of softmax, written as a custom autograd Function.

    y = softmax(x), row by row over the last dim:  y_i = e^(x_i) / Σ_j e^(x_j)

Write ``Softmax.backward`` below with tensor operations, then check it (every element,
several shapes, a masked row):

    tinyattn exercise check softmax.py
"""

import tinyattn as torch  # the same file runs under PyTorch: write `import torch` instead

EXERCISE = "softmax"


class Softmax(torch.autograd.Function):
    """y = softmax(x) over the last dim; entries of x may be -inf (masked): they get weight 0."""

    @staticmethod
    def forward(ctx, x):
        """x (..., S) -> y (..., S)."""
        e = (x - x.amax(dim=-1, keepdim=True)).exp()
        y = e / e.sum(dim=-1, keepdim=True)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad_output):
        """grad_output = dL/dy (..., S) -> dL/dx (..., S).

        For one row, dy_i/dx_j = y_i (δ_ij − y_j). Use tensor operations (not numpy), so that
        your backward can itself be differentiated.
        """
        (y,) = ctx.saved_tensors
        raise NotImplementedError("write dL/dx here, with tensor operations")
'''


def cases(rng: np.random.Generator) -> list[Case]:
    masked = rng.standard_normal((4, 4))
    masked[np.triu(np.ones((4, 4), dtype=bool), 1)] = -np.inf
    return [
        Case("x (3, 5)", {"x": rng.standard_normal((3, 5))}),
        Case("x (2, 3, 4)", {"x": 3.0 * rng.standard_normal((2, 3, 4))}),
        Case("x (4, 4), causal: -inf above the diagonal", {"x": masked}),
    ]


def reference(x: Tensor, names: dict[str, Tensor] | None = None) -> Tensor:
    """tinyattn's ``Softmax`` op over the last dim."""
    return softmax(x, dim=-1)


def _without_row_sum(values: Values, dy: Tensor) -> dict[str, Tensor]:
    return {"x": softmax(values["x"].detach(), dim=-1) * dy}


MISTAKES = (
    Mistake("the row-sum term is missing: y ⊙ dy is only the diagonal of the Jacobian; each "
            "x_j also moves every y_i through the shared denominator", _without_row_sum),
)

"""Exercise ``layer_norm``: dx, dweight and dbias of a layer norm over the last dim, as a
custom autograd Function."""

from __future__ import annotations

import numpy as np

from ..functional.normalization import layer_norm
from ..tensor import Tensor
from .exercise import Case, Mistake, Values

EPS = 1e-5

SUMMARY = "dx, dweight and dbias of a layer norm: the mean and variance depend on x"
FUNCTION = "LayerNorm"
ARGUMENTS = ("x", "weight", "bias", "eps")
INPUTS = ("x", "weight", "bias")
OUTPUT = "y"

STUB = '''"""Exercise: the backward pass of layer normalisation, written as a custom autograd
Function.

    mean = mean_j x_j,  var = mean_j (x_j − mean)²   (over the last dim, C features)
    x̂ = (x − mean) / sqrt(var + eps)
    y = x̂ ⊙ weight + bias

Write ``LayerNorm.backward`` below with tensor operations, then check it:

    tinyattn exercise check layer_norm.py
"""

import tinyattn as torch  # the same file runs under PyTorch: write `import torch` instead

EXERCISE = "layer_norm"


def normalize(x, eps):
    """x (..., C) -> (x̂ (..., C), rstd (..., 1)) with rstd = 1 / sqrt(var + eps)."""
    centered = x - x.mean(dim=-1, keepdim=True)
    rstd = ((centered * centered).mean(dim=-1, keepdim=True) + eps).rsqrt()
    return centered * rstd, rstd


class LayerNorm(torch.autograd.Function):
    """y = layer_norm(x) ⊙ weight + bias over the last dim."""

    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        """x (..., C), weight (C,), bias (C,), eps a number -> y (..., C)."""
        x_hat, _ = normalize(x, eps)
        # the inputs are saved, not x̂: backward recomputes x̂ from them (see its docstring)
        ctx.save_for_backward(x, weight)
        ctx.eps = eps
        return x_hat * weight + bias

    @staticmethod
    def backward(ctx, grad_output):
        """grad_output = dL/dy (..., C) -> (dL/dx, dL/dweight, dL/dbias, None).

        One gradient per argument of forward, in order: None for eps (a number). mean and var
        depend on every x_j of the row: they are not constants. normalize(x, ctx.eps) gives
        x̂ and rstd again: recomputed here from the saved input, they stay connected to x,
        so that your backward (in tensor operations, not numpy) can itself be differentiated.
        dweight and dbias sum over every leading dim: .sum(dim=tuple(range(x.dim() - 1))).
        """
        x, weight = ctx.saved_tensors
        raise NotImplementedError("write dx, dweight and dbias here, with tensor operations")
'''


def cases(rng: np.random.Generator) -> list[Case]:
    def case(label: str, shape: tuple[int, ...]) -> Case:
        C = shape[-1]
        return Case(label, {"x": 2.0 * rng.standard_normal(shape) + 0.5,
                            "weight": rng.standard_normal(C), "bias": rng.standard_normal(C)},
                    {"eps": EPS})

    return [case("x (4, 6)", (4, 6)), case("x (2, 3, 5)", (2, 3, 5)), case("x (1, 8)", (1, 8))]


def reference(x: Tensor, weight: Tensor, bias: Tensor, eps: float,
              names: dict[str, Tensor] | None = None) -> Tensor:
    """tinyattn's ``LayerNorm`` op over the last dim."""
    return layer_norm(x, x.shape[-1], weight, bias, eps)


def _mistake(constant_statistics: bool = False, variance_term: bool = True):
    """The gradients of a layer-norm backward with the statistics' dependence on x (or only
    the variance's) left out; dweight and dbias right."""
    def gradients(values: Values, dy: Tensor) -> dict[str, Tensor]:
        x, weight = values["x"].detach(), values["weight"].detach()
        centered = x - x.mean(-1, keepdim=True)
        rstd = ((centered * centered).mean(-1, keepdim=True) + values["eps"]).rsqrt()
        x_hat = centered * rstd
        g = dy * weight
        if constant_statistics:
            dx = g * rstd
        else:
            dx = g - g.mean(-1, keepdim=True)
            if variance_term:
                dx = dx - x_hat * (g * x_hat).mean(-1, keepdim=True)
            dx = dx * rstd
        rows = tuple(range(dy.ndim - 1))
        return {"x": dx, "weight": (dy * x_hat).sum(rows), "bias": dy.sum(rows)}

    return gradients


MISTAKES = (
    Mistake("the mean and variance were treated as constants: dx = dy ⊙ weight / σ misses the "
            "terms through mean and var, which depend on every x_j of the row",
            _mistake(constant_statistics=True)),
    Mistake("the variance's dependence on x is missing: the term through the mean is there, "
            "but var depends on every x_j of the row too",
            _mistake(variance_term=False)),
)

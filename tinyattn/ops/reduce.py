"""Reductions over one or more dims: sum, mean, max, var (with ``dim`` and ``keepdim``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from ..autograd import Context, Function
from ..tensor import Tensor
from .validate import normalize_dim, normalize_dims


def _expand_back(grad: np.ndarray, shape: tuple[int, ...], axes: tuple[int, ...], keepdim: bool):
    """Re-insert reduced axes (if dropped) so ``grad`` broadcasts against the input."""
    if not keepdim:
        grad = np.expand_dims(grad, axes)
    return np.broadcast_to(grad, shape)


class Sum(Function):
    """``y = Σ_axes x``; ``dx = g`` copied along the summed axes."""

    @staticmethod
    def forward(ctx: Context, x: np.ndarray, axes: tuple[int, ...], keepdim: bool) -> np.ndarray:
        ctx.save_for_backward(x.shape, axes, keepdim)
        return np.asarray(x.sum(axis=axes, keepdims=keepdim))

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray]:
        shape, axes, keepdim = ctx.saved
        return (_expand_back(grad, shape, axes, keepdim),)


class Mean(Function):
    """``y = Σ_axes x / N``; ``dx = g / N`` copied along the reduced axes."""

    @staticmethod
    def forward(ctx: Context, x: np.ndarray, axes: tuple[int, ...], keepdim: bool) -> np.ndarray:
        count = int(np.prod([x.shape[a] for a in axes]))
        ctx.save_for_backward(x.shape, axes, keepdim, count)
        return np.asarray(x.mean(axis=axes, keepdims=keepdim))

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray]:
        shape, axes, keepdim, count = ctx.saved
        return (_expand_back(grad / count, shape, axes, keepdim),)


class Max(Function):
    """``y = max_axes x``; ``dx = g`` routed to the maxima, shared equally among ties."""

    @staticmethod
    def forward(ctx: Context, x: np.ndarray, axes: tuple[int, ...], keepdim: bool) -> np.ndarray:
        y = np.asarray(x.max(axis=axes, keepdims=True))
        is_max = x == y
        ctx.save_for_backward(is_max, is_max.sum(axis=axes, keepdims=True), axes, keepdim)
        return y if keepdim else np.squeeze(y, axis=axes)

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray]:
        is_max, ties, axes, keepdim = ctx.saved
        if not keepdim:
            grad = np.expand_dims(grad, axes)
        return (grad * is_max / ties,)


class Var(Function):
    """``y = Σ (x - x̄)² / (N - correction)``; ``dx = g · 2 (x - x̄) / (N - correction)``."""

    @staticmethod
    def forward(
        ctx: Context, x: np.ndarray, axes: tuple[int, ...], keepdim: bool, correction: int
    ) -> np.ndarray:
        count = int(np.prod([x.shape[a] for a in axes]))
        centered = x - x.mean(axis=axes, keepdims=True)
        dof = count - correction if count > correction else 0
        with np.errstate(divide="ignore", invalid="ignore"):
            y = (centered * centered).sum(axis=axes, keepdims=keepdim) / dof
        ctx.save_for_backward(centered, dof, axes, keepdim)
        return np.asarray(y, dtype=x.dtype)

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray]:
        centered, dof, axes, keepdim = ctx.saved
        if not keepdim:
            grad = np.expand_dims(grad, axes)
        with np.errstate(divide="ignore", invalid="ignore"):
            return (grad * 2 * centered / dof,)


class MaxResult(NamedTuple):
    """``x.max(dim)`` returns the maxima and their indices, as ``torch.max`` does."""

    values: Tensor
    indices: Tensor


Dims = int | Sequence[int] | None


def _axes(op: str, x: Tensor, dim: Dims) -> tuple[int, ...]:
    axes = normalize_dims(op, dim, x.ndim)
    if x.numel() == 0 and any(x.shape[a] == 0 for a in axes) and op == "max":
        raise ValueError(f"max: cannot reduce an empty dimension of a tensor of shape {x.shape}")
    return axes


def sum(x: Tensor, dim: Dims = None, keepdim: bool = False) -> Tensor:
    """Sum over ``dim`` (all dims when None)."""
    return Sum.apply(x, axes=_axes("sum", x, dim), keepdim=keepdim)


def mean(x: Tensor, dim: Dims = None, keepdim: bool = False) -> Tensor:
    """Mean over ``dim`` (all dims when None)."""
    if x.dtype.kind != "f":
        raise TypeError(f"mean: expected a floating point tensor, got dtype {x.dtype}")
    return Mean.apply(x, axes=_axes("mean", x, dim), keepdim=keepdim)


def max(x: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor | MaxResult:
    """Maximum of all elements, or ``(values, indices)`` along ``dim`` as ``torch.max``."""
    if dim is None:
        return Max.apply(x, axes=_axes("max", x, None), keepdim=False)
    axis = normalize_dim("max", dim, x.ndim)
    _axes("max", x, axis)
    values = Max.apply(x, axes=(axis,), keepdim=keepdim)
    indices = np.argmax(x.data, axis=axis)
    if keepdim:
        indices = np.expand_dims(indices, axis)
    return MaxResult(values, Tensor(indices.astype(np.int64)))


def var(x: Tensor, dim: Dims = None, keepdim: bool = False, correction: int = 1) -> Tensor:
    """Variance over ``dim``, unbiased by default (``correction=1``) as ``torch.var``."""
    if x.dtype.kind != "f":
        raise TypeError(f"var: expected a floating point tensor, got dtype {x.dtype}")
    return Var.apply(x, axes=_axes("var", x, dim), keepdim=keepdim, correction=correction)

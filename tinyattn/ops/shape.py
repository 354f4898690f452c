"""Ops that move data without arithmetic: reshape/view, permute/transpose, expand, contiguous.

Their backward rules undo the move: reshape back, apply the inverse permutation, and for
``expand`` return the gradient unchanged so the engine's ``unbroadcast`` sums it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..autograd import Context, Function
from ..tensor import Tensor
from .validate import normalize_dim


class Reshape(Function):
    """``y = x`` viewed with a new shape; ``dx = g`` reshaped back."""

    @staticmethod
    def forward(ctx: Context, x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        ctx.save_for_backward(x.shape)
        return x.reshape(shape)

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray]:
        (shape,) = ctx.saved
        return (grad.reshape(shape),)


class Permute(Function):
    """``y = x`` with axes reordered by ``dims``; ``dx = g`` with the inverse order."""

    @staticmethod
    def forward(ctx: Context, x: np.ndarray, dims: tuple[int, ...]) -> np.ndarray:
        ctx.save_for_backward(np.argsort(dims))
        return x.transpose(dims)

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray]:
        (inverse,) = ctx.saved
        return (grad.transpose(inverse),)


class Expand(Function):
    """``y = x`` broadcast to ``shape`` (a view); ``dx = g`` summed by the engine's unbroadcast."""

    @staticmethod
    def forward(ctx: Context, x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        return np.broadcast_to(x, shape)

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray]:
        return (grad,)


class Contiguous(Function):
    """``y = x`` copied to C order; ``dx = g``."""

    @staticmethod
    def forward(ctx: Context, x: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(x)

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray]:
        return (grad,)


def _shape_arg(shape: tuple) -> tuple:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(shape[0])
    return tuple(shape)


def reshape(x: Tensor, *shape: int | Sequence[int]) -> Tensor:
    """``x`` with a new shape of the same number of elements; one dim may be ``-1``."""
    target = _shape_arg(shape)
    if any(not isinstance(n, (int, np.integer)) or isinstance(n, bool) for n in target):
        raise TypeError(f"reshape: shape must be ints, got {target}")
    if sum(1 for n in target if n == -1) > 1 or any(n < -1 for n in target):
        raise ValueError(f"reshape: invalid shape {target}: at most one -1 and no other negatives")
    known = math.prod(n for n in target if n != -1)
    if -1 in target:
        if known == 0 or x.numel() % known:
            raise ValueError(
                f"reshape: cannot reshape a tensor of shape {x.shape} ({x.numel()} elements) "
                f"into {target}"
            )
        target = tuple(x.numel() // known if n == -1 else n for n in target)
    elif known != x.numel():
        raise ValueError(
            f"reshape: cannot reshape a tensor of shape {x.shape} ({x.numel()} elements) "
            f"into {target} ({known} elements)"
        )
    if target == x.shape:
        return x
    return Reshape.apply(x, shape=tuple(int(n) for n in target))


def permute(x: Tensor, *dims: int | Sequence[int]) -> Tensor:
    """``x`` with its axes in the order ``dims``."""
    order = _shape_arg(dims)
    if len(order) != x.ndim:
        raise ValueError(
            f"permute: got {len(order)} dims {order} for a tensor of {x.ndim} dims {x.shape}"
        )
    axes = tuple(normalize_dim("permute", d, x.ndim) for d in order)
    if sorted(axes) != list(range(x.ndim)):
        raise ValueError(f"permute: dims {order} are not a permutation of {x.ndim} axes")
    return Permute.apply(x, dims=axes)


def transpose(x: Tensor, dim0: int, dim1: int) -> Tensor:
    """``x`` with axes ``dim0`` and ``dim1`` swapped."""
    a = normalize_dim("transpose", dim0, x.ndim)
    b = normalize_dim("transpose", dim1, x.ndim)
    order = list(range(x.ndim))
    order[a], order[b] = order[b], order[a]
    return Permute.apply(x, dims=tuple(order))


def unsqueeze(x: Tensor, dim: int) -> Tensor:
    """``x`` with a new axis of size 1 inserted at ``dim``."""
    axis = normalize_dim("unsqueeze", dim, x.ndim, extra=1)
    return Reshape.apply(x, shape=x.shape[:axis] + (1,) + x.shape[axis:])


def squeeze(x: Tensor, dim: int | None = None) -> Tensor:
    """``x`` without axes of size 1 (only ``dim``, when given and of size 1, as PyTorch)."""
    if dim is None:
        shape = tuple(n for n in x.shape if n != 1)
    else:
        axis = normalize_dim("squeeze", dim, x.ndim)
        if x.shape[axis] != 1:
            return x
        shape = x.shape[:axis] + x.shape[axis + 1 :]
    if shape == x.shape:
        return x
    return Reshape.apply(x, shape=shape)


def expand(x: Tensor, *sizes: int | Sequence[int]) -> Tensor:
    """``x`` broadcast to ``sizes`` without copying; ``-1`` keeps a dim."""
    target = _shape_arg(sizes)
    if len(target) < x.ndim:
        raise ValueError(
            f"expand: the number of sizes {target} ({len(target)}) must be at least the "
            f"number of dims of the tensor {x.shape} ({x.ndim})"
        )
    lead = len(target) - x.ndim
    shape = []
    for i, n in enumerate(target):
        own = x.shape[i - lead] if i >= lead else None
        if n == -1:
            if own is None:
                raise ValueError(f"expand: -1 is not allowed for the new leading dim {i}")
            n = own
        if own is not None and own != 1 and own != n:
            raise ValueError(
                f"expand: the tensor of shape {x.shape} cannot be expanded to {target}: "
                f"dim {i} has size {own}, which must be 1 or {n}"
            )
        shape.append(int(n))
    if tuple(shape) == x.shape:
        return x
    return Expand.apply(x, shape=tuple(shape))


def contiguous(x: Tensor) -> Tensor:
    """``x`` itself when C-contiguous, else a C-ordered copy."""
    if x.data.flags.c_contiguous:
        return x
    return Contiguous.apply(x)

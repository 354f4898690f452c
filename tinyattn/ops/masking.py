"""Selecting by a mask: where, masked_fill, triu and tril.

Each keeps the gradient where the input's value was kept and sends zero where it was
replaced: the backward *selects* (``where``) instead of multiplying by a 0/1 mask, so a NaN or
inf in a discarded position never turns a zero gradient into NaN.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..autograd import Context, Function
from ..errors import DTypeError, ShapeError
from ..tensor import Tensor, check_tensor
from ..validation import broadcast_shapes, check_int
from .operands import operands


class Where(Function):
    """``y = cond ? a : b``; ``da = cond ? g : 0``, ``db = cond ? 0 : g``."""

    @staticmethod
    def forward(ctx: Context, a: np.ndarray, b: np.ndarray, cond: np.ndarray) -> np.ndarray:
        ctx.save_for_backward(cond)
        return np.where(cond, a, b)

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        (cond,) = ctx.saved
        zero = np.zeros((), dtype=grad.dtype)
        return np.where(cond, grad, zero), np.where(cond, zero, grad)

    @staticmethod
    def differentiable_backward(ctx: Context, grad: Tensor) -> tuple[Tensor, Tensor]:
        (cond,) = ctx.saved
        mask = Tensor(cond)
        return where(mask, grad, 0.0), where(mask, 0.0, grad)


class MaskedFill(Function):
    """``y = mask ? value : x``; ``dx = mask ? 0 : g`` (filled positions get no gradient)."""

    @staticmethod
    def forward(ctx: Context, x: np.ndarray, mask: np.ndarray, value: Any) -> np.ndarray:
        ctx.save_for_backward(mask)
        return np.where(mask, np.asarray(value).astype(x.dtype), x)

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray]:
        (mask,) = ctx.saved
        return (np.where(mask, np.zeros((), dtype=grad.dtype), grad),)

    @staticmethod
    def differentiable_backward(ctx: Context, grad: Tensor) -> tuple[Tensor]:
        return (where(Tensor(ctx.saved[0]), 0.0, grad),)


class Triangle(Function):
    """``y = triu(x, k)`` or ``tril(x, k)``; ``dx`` = the same triangle of ``g``."""

    keeps_inputs = False

    @staticmethod
    def forward(ctx: Context, x: np.ndarray, upper: bool, diagonal: int) -> np.ndarray:
        ctx.save_for_backward(upper, diagonal)
        return np.triu(x, diagonal) if upper else np.tril(x, diagonal)

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray]:
        upper, diagonal = ctx.saved
        return (np.triu(grad, diagonal) if upper else np.tril(grad, diagonal),)

    @staticmethod
    def differentiable_backward(ctx: Context, grad: Tensor) -> tuple[Tensor]:
        upper, diagonal = ctx.saved
        return (Triangle.apply(grad, upper=upper, diagonal=diagonal),)


def _bool_mask(op: str, mask: Any) -> np.ndarray:
    array = mask.numpy() if isinstance(mask, Tensor) else np.asarray(mask)
    if array.dtype != np.bool_:
        raise DTypeError(f"{op}: the mask/condition must be a boolean tensor, got dtype "
                           f"{array.dtype}")
    return array


def where(condition: Any, input: Any = None, other: Any = None) -> Any:
    """``input`` where ``condition`` is True, else ``other``, all broadcast together.

    ``where(condition)`` alone is ``nonzero(condition, as_tuple=True)``.
    """
    cond = _bool_mask("where", condition)
    if input is None and other is None:
        return tuple(Tensor(i.astype(np.int64)) for i in np.nonzero(cond))
    a, b = operands("where", input, other)
    broadcast_shapes("where", cond.shape, a.shape, b.shape)
    return Where.apply(a, b, cond=cond)


def masked_fill(input: Tensor, mask: Any, value: Any) -> Tensor:
    """``input`` with ``value`` written where ``mask`` is True (the two broadcast together; the
    in-place ``masked_fill_`` needs the result to keep the input's shape)."""
    check_tensor("masked_fill", "input", input)
    array = _bool_mask("masked_fill", mask)
    if isinstance(value, Tensor):
        if value.ndim:
            raise ShapeError(f"masked_fill: value must be a number or a 0-d tensor, got "
                               f"shape {value.shape}")
        value = value.item()
    if input.dtype.kind in "iu" and not (np.isfinite(value) and
                                        np.iinfo(input.dtype).min <= value
                                        <= np.iinfo(input.dtype).max):
        raise ValueError(f"masked_fill: value {value} cannot be converted to {input.dtype} "
                         "without overflow")
    shape = broadcast_shapes("masked_fill", input.shape, array.shape)
    if shape != input.shape:  # out of place, the mask may broadcast the input (PyTorch)
        input = input.expand(shape)
    return MaskedFill.apply(input, mask=array, value=value)


def _triangle(op: str, x: Tensor, upper: bool, diagonal: int) -> Tensor:
    check_tensor(op, "input", x)
    if x.ndim < 2:
        raise ShapeError(f"{op}: expected a tensor of at least 2 dims, got shape {x.shape}")
    return Triangle.apply(x, upper=upper, diagonal=check_int(op, "diagonal", diagonal))


def triu(input: Tensor, diagonal: int = 0) -> Tensor:
    """The upper triangle of the last two dims (elements with ``j - i >= diagonal``)."""
    return _triangle("triu", input, True, diagonal)


def tril(input: Tensor, diagonal: int = 0) -> Tensor:
    """The lower triangle of the last two dims (elements with ``j - i <= diagonal``)."""
    return _triangle("tril", input, False, diagonal)

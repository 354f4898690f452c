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
from ..kernels.elementwise import select
from ..tensor import Tensor, check_tensor, from_numpy
from ..validation import broadcast_shapes, check_int
from .notation import operand, summed_to_input
from .operands import operands


class Where(Function):
    """``y = cond ? a : b`` (the three broadcast together); ``da = cond ? g : 0``,
    ``db = cond ? 0 : g`` (each summed back to its input's shape)."""

    keeps_inputs = False

    @staticmethod
    def forward(ctx: Context, a: Tensor, b: Tensor, cond: Tensor) -> Tensor:
        ctx.save_for_backward(cond)
        return from_numpy(select(cond.numpy(), a.numpy(), b.numpy()))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> tuple[Tensor | None, Tensor | None, None]:
        (cond,) = ctx.saved_tensors
        need_a, need_b, _ = ctx.needs_input_grad
        return (where(cond, grad, 0.0) if need_a else None,
                where(cond, 0.0, grad) if need_b else None, None)

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        return summed_to_input(node, slot, f"{operand(g)} ⊙ [{'' if slot == 0 else '¬'}cond]")


class MaskedFill(Function):
    """``y = mask ? value : x``; ``dx = mask ? 0 : g`` (filled positions get no gradient)."""

    keeps_inputs = False

    @staticmethod
    def forward(ctx: Context, x: Tensor, mask: Tensor, *, value: Any) -> Tensor:
        ctx.save_for_backward(mask)
        array = x.numpy()
        return from_numpy(select(mask.numpy(), np.asarray(value).astype(array.dtype), array))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> tuple[Tensor, None]:
        (mask,) = ctx.saved_tensors
        return where(mask, 0.0, grad), None

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        return f"{operand(g)} ⊙ ¬M"


class Triangle(Function):
    """``y = triu(x, k)`` or ``tril(x, k)`` (of the last two dims); ``dx`` = the same triangle
    of ``g``."""

    keeps_inputs = False

    @staticmethod
    def forward(ctx: Context, x: Tensor, *, upper: bool, diagonal: int) -> Tensor:
        array = x.numpy()
        return from_numpy(np.triu(array, diagonal) if upper else np.tril(array, diagonal))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        return Triangle.apply(grad, **ctx.kwargs)

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        upper, diagonal = node.kwargs["upper"], node.kwargs["diagonal"]
        return f"{'triu' if upper else 'tril'}({g}, {diagonal})"


def _bool_mask(op: str, mask: Any) -> Tensor:
    """``mask`` (a tensor, array or nested list) as a bool tensor, else a DTypeError."""
    if isinstance(mask, Tensor):
        if mask.dtype != np.bool_:
            raise DTypeError(f"{op}: the mask/condition must be a boolean tensor, got dtype "
                             f"{mask.dtype}")
        return mask
    array = np.asarray(mask)
    if array.dtype != np.bool_:
        raise DTypeError(f"{op}: the mask/condition must be a boolean tensor, got dtype "
                           f"{array.dtype}")
    return Tensor(array)


def _float_pair(input: Any, other: Any) -> tuple[Tensor, Tensor] | None:
    """``(input, other)`` as tensors when they need no promotion: two float tensors of one
    dtype, or a float tensor and a Python number (which takes its dtype); else None."""
    if type(input) is Tensor:
        dtype = input._data.dtype
        if dtype.kind != "f":
            return None
        if type(other) is Tensor:
            return (input, other) if other._data.dtype == dtype else None
        if type(other) is float or type(other) is int:
            return input, Tensor._from_op(np.asarray(other, dtype), None)
        return None
    if type(other) is Tensor and (type(input) is float or type(input) is int):
        dtype = other._data.dtype
        if dtype.kind == "f":
            return Tensor._from_op(np.asarray(input, dtype), None), other
    return None


def where(condition: Any, input: Any = None, other: Any = None) -> Any:
    """``input`` where ``condition`` is True, else ``other``, all broadcast together.

    ``where(condition)`` alone is ``nonzero(condition, as_tuple=True)``.
    """
    if type(condition) is Tensor and condition._data.dtype == np.bool_:
        pair = _float_pair(input, other)  # the common call (in backward rules): no promotion
        if pair is not None:
            a, b = pair
            shape, shape_a, shape_b = condition._data.shape, a._data.shape, b._data.shape
            if not ((shape_a == shape or not shape_a) and (shape_b == shape or not shape_b)):
                broadcast_shapes("where", shape, shape_a, shape_b)
            return Where.apply(a, b, condition)
    cond = _bool_mask("where", condition)
    if input is None and other is None:
        return tuple(Tensor(i.astype(np.int64)) for i in np.nonzero(cond.numpy()))
    a, b = operands("where", input, other)
    broadcast_shapes("where", cond.shape, a.shape, b.shape)
    return Where.apply(a, b, cond)


def masked_fill(input: Tensor, mask: Any, value: Any) -> Tensor:
    """``input`` with ``value`` written where ``mask`` is True (the two broadcast together; the
    in-place ``masked_fill_`` needs the result to keep the input's shape)."""
    if type(input) is Tensor and type(mask) is Tensor and mask._data.dtype == np.bool_ and \
            input._data.dtype.kind == "f" and (type(value) is float or type(value) is int) \
            and mask._data.shape == input._data.shape:
        return MaskedFill.apply(input, mask, value=value)  # the common call: nothing to check
    check_tensor("masked_fill", "input", input)
    mask = _bool_mask("masked_fill", mask)
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
    shape = broadcast_shapes("masked_fill", input.shape, mask.shape)
    if shape != input.shape:  # out of place, the mask may broadcast the input (PyTorch)
        input = input.expand(shape)
    return MaskedFill.apply(input, mask, value=value)


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

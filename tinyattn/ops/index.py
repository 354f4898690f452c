"""Selecting and combining: getitem, cat, stack, split, chunk, where, masked_fill, triu, tril.

The backward of a selection is a scatter: the gradient goes back to the positions that were
read, and positions read twice (repeated integer indices) receive the sum.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..autograd import Context, Function
from ..tensor import Tensor, as_tensor
from .validate import broadcast_shapes, normalize_dim


class GetItem(Function):
    """``y = x[index]``; ``dx = zeros_like(x)`` with ``g`` scatter-added at ``index``."""

    @staticmethod
    def forward(ctx: Context, x: np.ndarray, index: object, basic: bool) -> np.ndarray:
        ctx.save_for_backward(x.shape, x.dtype, index, basic)
        return x[index]

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray]:
        shape, dtype, index, basic = ctx.saved
        dx = np.zeros(shape, dtype=dtype)
        if basic:
            dx[index] = grad  # slices never repeat a position
        else:
            np.add.at(dx, index, grad)  # repeated indices accumulate
        return (dx,)


class Cat(Function):
    """``y = concat(x_1..x_n, dim)``; ``dx_i = g[..., offset_i : offset_i + n_i, ...]``."""

    @staticmethod
    def forward(ctx: Context, *xs: np.ndarray, dim: int) -> np.ndarray:
        ctx.save_for_backward(dim, np.cumsum([x.shape[dim] for x in xs])[:-1])
        return np.concatenate(xs, axis=dim)

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray, ...]:
        dim, offsets = ctx.saved
        return tuple(np.split(grad, offsets, axis=dim))


class Stack(Function):
    """``y = stack(x_1..x_n, dim)``; ``dx_i = g`` indexed at ``i`` along ``dim``."""

    @staticmethod
    def forward(ctx: Context, *xs: np.ndarray, dim: int) -> np.ndarray:
        ctx.save_for_backward(dim, len(xs))
        return np.stack(xs, axis=dim)

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray, ...]:
        dim, count = ctx.saved
        return tuple(np.take(grad, i, axis=dim) for i in range(count))


class Where(Function):
    """``y = cond ? a : b``; ``da = g ⊙ cond``, ``db = g ⊙ ¬cond``."""

    @staticmethod
    def forward(ctx: Context, a: np.ndarray, b: np.ndarray, cond: np.ndarray) -> np.ndarray:
        ctx.save_for_backward(cond)
        return np.where(cond, a, b)

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        (cond,) = ctx.saved
        zero = np.zeros((), dtype=grad.dtype)
        return np.where(cond, grad, zero), np.where(cond, zero, grad)


class MaskedFill(Function):
    """``y = mask ? value : x``; ``dx = g ⊙ ¬mask`` (filled positions get no gradient)."""

    @staticmethod
    def forward(ctx: Context, x: np.ndarray, mask: np.ndarray, value: float) -> np.ndarray:
        ctx.save_for_backward(mask)
        return np.where(mask, np.asarray(value, dtype=x.dtype), x)

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray]:
        (mask,) = ctx.saved
        return (np.where(mask, np.zeros((), dtype=grad.dtype), grad),)


class Triangle(Function):
    """``y = triu(x, k)`` or ``tril(x, k)``; ``dx`` = the same triangle of ``g``."""

    @staticmethod
    def forward(ctx: Context, x: np.ndarray, upper: bool, diagonal: int) -> np.ndarray:
        ctx.save_for_backward(upper, diagonal)
        return np.triu(x, diagonal) if upper else np.tril(x, diagonal)

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray]:
        upper, diagonal = ctx.saved
        return (np.triu(grad, diagonal) if upper else np.tril(grad, diagonal),)


def _index_array(op: str, value: object) -> object:
    """An index component as numpy understands it; floats are refused."""
    if isinstance(value, Tensor):
        value = value.data
    if isinstance(value, (list, np.ndarray)):
        array = np.asarray(value)
        if array.size == 0:
            return array.astype(np.intp)
        if array.dtype.kind not in "iub":
            raise IndexError(
                f"{op}: tensors used as indices must be integer or boolean, got dtype {array.dtype}"
            )
        return array
    if isinstance(value, (float, np.floating)):
        raise IndexError(f"{op}: indices must be integers, slices or tensors, got float {value}")
    return value


def getitem(x: Tensor, index: object) -> Tensor:
    """``x[index]`` for ints, slices, None, Ellipsis, integer arrays/tensors and boolean masks."""
    parts = index if isinstance(index, tuple) else (index,)
    parts = tuple(_index_array("getitem", p) for p in parts)
    basic = all(isinstance(p, (int, np.integer, slice, type(None), type(Ellipsis))) for p in parts)
    key = parts if isinstance(index, tuple) else parts[0]
    try:
        return GetItem.apply(x, index=key, basic=basic)
    except IndexError as err:
        raise IndexError(f"getitem on a tensor of shape {x.shape}: {err}") from None


def cat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Concatenate tensors along an existing ``dim``; all other dims must match."""
    tensors = list(tensors)
    if not tensors:
        raise ValueError("cat: expected a non-empty sequence of tensors")
    first = tensors[0]
    axis = normalize_dim("cat", dim, first.ndim)
    for i, t in enumerate(tensors):
        if t.ndim != first.ndim or any(
            a != b for d, (a, b) in enumerate(zip(t.shape, first.shape)) if d != axis
        ):
            raise ValueError(
                f"cat: tensor {i} has shape {t.shape}, which does not match tensor 0's shape "
                f"{first.shape} outside dim {axis}"
            )
    return Cat.apply(*tensors, dim=axis)


def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Stack equally shaped tensors along a new ``dim``."""
    tensors = list(tensors)
    if not tensors:
        raise ValueError("stack: expected a non-empty sequence of tensors")
    for i, t in enumerate(tensors):
        if t.shape != tensors[0].shape:
            raise ValueError(
                f"stack: tensor {i} has shape {t.shape} but tensor 0 has {tensors[0].shape}; "
                "all must be equal"
            )
    axis = normalize_dim("stack", dim, tensors[0].ndim, extra=1)
    return Stack.apply(*tensors, dim=axis)


def split(x: Tensor, split_size_or_sections: int | Sequence[int], dim: int = 0) -> tuple:
    """Split ``x`` along ``dim`` into pieces of a given size (the last may be smaller) or sizes."""
    axis = normalize_dim("split", dim, x.ndim)
    length = x.shape[axis]
    if isinstance(split_size_or_sections, (int, np.integer)):
        size = int(split_size_or_sections)
        if size <= 0:
            raise ValueError(f"split: split_size must be positive, got {size}")
        sizes = [min(size, length - start) for start in range(0, length, size)] or [0]
    else:
        sizes = [int(s) for s in split_size_or_sections]
        if sum(sizes) != length or any(s < 0 for s in sizes):
            raise ValueError(
                f"split: sections {sizes} must be non-negative and sum to the size {length} of "
                f"dim {axis} (tensor of shape {x.shape})"
            )
    pieces, start = [], 0
    for size in sizes:
        index = (slice(None),) * axis + (slice(start, start + size),)
        pieces.append(getitem(x, index))
        start += size
    return tuple(pieces)


def chunk(x: Tensor, chunks: int, dim: int = 0) -> tuple:
    """Split ``x`` into ``chunks`` pieces of size ``ceil(n / chunks)`` along ``dim``."""
    if not isinstance(chunks, (int, np.integer)) or chunks <= 0:
        raise ValueError(f"chunk: chunks must be a positive int, got {chunks}")
    axis = normalize_dim("chunk", dim, x.ndim)
    size = -(-x.shape[axis] // int(chunks)) or 1
    return split(x, size, axis)


def _bool_mask(op: str, mask: object) -> np.ndarray:
    array = mask.data if isinstance(mask, Tensor) else np.asarray(mask)
    if array.dtype != np.bool_:
        raise TypeError(
            f"{op}: the mask/condition must be a boolean tensor, got dtype {array.dtype}"
        )
    return array


def where(condition: object, a: object, b: object) -> Tensor:
    """``a`` where ``condition`` is True, else ``b``, all three broadcast together."""
    cond = _bool_mask("where", condition)
    a_t = as_tensor(a, like=b if isinstance(b, Tensor) else None)
    b_t = as_tensor(b, like=a_t)
    broadcast_shapes("where", cond.shape, a_t.shape, b_t.shape)
    return Where.apply(a_t, b_t, cond=cond)


def masked_fill(x: Tensor, mask: object, value: float) -> Tensor:
    """``x`` with ``value`` written where ``mask`` is True; ``mask`` broadcasts to ``x``."""
    array = _bool_mask("masked_fill", mask)
    if broadcast_shapes("masked_fill", x.shape, array.shape) != x.shape:
        raise ValueError(
            f"masked_fill: mask of shape {array.shape} does not broadcast to the tensor's "
            f"shape {x.shape}"
        )
    if isinstance(value, Tensor):
        value = value.item()
    return MaskedFill.apply(x, mask=array, value=value)


def _triangle(op: str, x: Tensor, upper: bool, diagonal: int) -> Tensor:
    if x.ndim < 2:
        raise ValueError(f"{op}: expected a tensor of at least 2 dims, got shape {x.shape}")
    return Triangle.apply(x, upper=upper, diagonal=int(diagonal))


def triu(x: Tensor, diagonal: int = 0) -> Tensor:
    """The upper triangle of the last two dims (elements with ``j - i >= diagonal``)."""
    return _triangle("triu", x, True, diagonal)


def tril(x: Tensor, diagonal: int = 0) -> Tensor:
    """The lower triangle of the last two dims (elements with ``j - i <= diagonal``)."""
    return _triangle("tril", x, False, diagonal)

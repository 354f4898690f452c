"""Selecting and combining: indexing, index_put (``x[i] = v``), gather, cat, stack, topk
(selecting by a mask — where, masked_fill, triu, tril — is in :mod:`.masking`).

The backward of a selection is a scatter: the gradient goes back to the positions that were
read, and positions read twice (repeated integer indices) receive the sum. ``GetItem`` and
``IndexPut`` are each other's adjoints: each one's backward is written with the other.

Indexing follows PyTorch where it differs from numpy: an integer index selects first (it
removes its dim), and only then do the tensor/list indices place their dims — so for ``x`` of
shape (2, 5, 6), ``x[1, :, [0, 1]]`` has shape (5, 2), as in PyTorch (numpy gives (2, 5)).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from .. import dtypes
from ..autograd import Context, Function
from ..errors import DTypeError, ShapeError
from ..tensor import Tensor, check_tensor
from ..validation import broadcast_shapes, check_int, normalize_dim
from .masking import masked_fill, tril, triu, where
from .operands import to_dtype

__all__ = ["GetItem", "Index", "IndexPut", "Cat", "Stack", "TopK", "cat", "gather", "getitem",
           "index_put", "index_select", "masked_fill", "parse_index", "setitem", "stack",
           "topk", "tril", "triu", "where"]


@dataclass(frozen=True)
class Index:
    """A PyTorch index as two numpy keys: ``basic`` (ints, slices, None, Ellipsis) applied
    first, then ``advanced`` (integer/boolean arrays, with slices for the other dims) or None."""

    basic: tuple
    advanced: tuple | None

    def get(self, x: np.ndarray) -> np.ndarray:
        """``x[index]``."""
        selected = x[self.basic]
        return selected if self.advanced is None else selected[self.advanced]

    def put(self, x: np.ndarray, values: np.ndarray, accumulate: bool) -> None:
        """``x[index] = values`` (or ``+=`` with repeats summed when ``accumulate``), in place."""
        if self.advanced is None:
            if accumulate:
                x[self.basic] += values
            else:
                x[self.basic] = values
            return
        target = x[self.basic]  # a view: the advanced dims are still there, and writes reach x
        if accumulate:
            np.add.at(target, self.advanced, values)
        else:
            target[self.advanced] = values


def _component(value: Any) -> Any:
    """One component of an index, as numpy understands it; floats are refused."""
    if isinstance(value, Tensor):
        value = value.numpy()
    if isinstance(value, (list, tuple)):
        value = np.asarray(value)
        if value.size == 0:
            value = value.astype(np.intp)
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "iub":
            raise IndexError(f"tensors used as indices must be long, int or bool tensors, got "
                             f"dtype {value.dtype}")
        if value.ndim == 0 and value.dtype.kind in "iu":
            return int(value)
        return value
    if isinstance(value, (float, np.floating)):
        raise IndexError(f"indices must be integers, slices, None, Ellipsis or tensors, got "
                         f"float {value}")
    if isinstance(value, slice):
        if value.step is not None and int(value.step) <= 0:
            raise ValueError("getitem: slice step must be greater than zero")
        return value
    if value is None or value is Ellipsis or isinstance(value, (int, np.integer, bool,
                                                               np.bool_)):
        return value
    raise IndexError(f"indices must be integers, slices, None, Ellipsis or tensors, got "
                     f"{type(value).__name__}")


def parse_index(ndim: int, index: Any) -> Index:
    """Translate a PyTorch index for a tensor of ``ndim`` dims into an :class:`Index`."""
    parts = index if isinstance(index, tuple) else (index,)
    parts = tuple(_component(p) for p in parts)
    advanced = [isinstance(p, np.ndarray) for p in parts]
    consumed = sum(p.ndim if isinstance(p, np.ndarray) and p.dtype.kind == "b" else
                   0 if p is None or p is Ellipsis or isinstance(p, (bool, np.bool_)) else 1
                   for p in parts)
    if consumed > ndim:
        raise IndexError(f"too many indices for a tensor of dimension {ndim}")
    if sum(p is Ellipsis for p in parts) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if not any(advanced):
        return Index(parts, None)
    basic, second = [], []
    for p, is_array in zip(parts, advanced):
        if is_array:
            width = p.ndim if p.dtype.kind == "b" else 1
            basic.extend([slice(None)] * width)
            second.append(p)
        elif isinstance(p, (int, np.integer)) and not isinstance(p, (bool, np.bool_)):
            basic.append(p)
        elif p is Ellipsis:
            basic.append(p)
            second.append(p)
        else:
            basic.append(p)
            second.append(slice(None))
    return Index(tuple(basic), tuple(second))


class GetItem(Function):
    """``y = x[index]``; ``dx = zeros_like(x)`` with ``g`` scatter-added at ``index``."""

    view = True
    keeps_inputs = False

    @staticmethod
    def forward(ctx: Context, x: np.ndarray, index: Index) -> np.ndarray:
        ctx.save_for_backward(x.shape, x.dtype, index)
        return index.get(x)

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray]:
        shape, dtype, index = ctx.saved
        dx = np.zeros(shape, dtype=dtype)
        index.put(dx, grad, accumulate=index.advanced is not None)  # repeats accumulate
        return (dx,)

    @staticmethod
    def differentiable_backward(ctx: Context, grad: Tensor) -> tuple[Tensor]:
        shape, dtype, index = ctx.saved
        return (IndexPut.apply(Tensor(np.zeros(shape, dtype)), grad, index=index,
                               accumulate=True),)


class IndexPut(Function):
    """``y = x`` with ``values`` written at ``index`` (added when ``accumulate``).

    ``dx = g`` (with the overwritten positions zeroed unless ``accumulate``),
    ``dvalues = g[index]`` (summed back to ``values``' shape by the engine).
    """

    keeps_inputs = False

    @staticmethod
    def forward(ctx: Context, x: np.ndarray, values: np.ndarray, index: Index,
                accumulate: bool) -> np.ndarray:
        ctx.save_for_backward(index, accumulate)
        out = x.copy()
        index.put(out, values.astype(x.dtype, copy=False), accumulate)
        return out

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray | None, ...]:
        index, accumulate = ctx.saved
        dx = None
        if ctx.needs_input_grad[0]:
            dx = grad
            if not accumulate:
                dx = grad.copy()
                index.put(dx, np.zeros((), grad.dtype), False)
        dvalues = index.get(grad) if ctx.needs_input_grad[1] else None
        return dx, dvalues

    @staticmethod
    def differentiable_backward(ctx: Context, grad: Tensor) -> tuple[Tensor | None, ...]:
        index, accumulate = ctx.saved
        needs_dx, needs_dvalues = ctx.needs_input_grad
        dx = None
        if needs_dx:
            dx = grad if accumulate else IndexPut.apply(
                grad, Tensor(np.zeros((), grad.dtype)), index=index, accumulate=False)
        return dx, GetItem.apply(grad, index=index) if needs_dvalues else None


class Cat(Function):
    """``y = concat(x_1..x_n, dim)``; ``dx_i = g[..., offset_i : offset_i + n_i, ...]``."""

    keeps_inputs = False

    @staticmethod
    def forward(ctx: Context, *xs: np.ndarray, dim: int) -> np.ndarray:
        ctx.save_for_backward(dim, np.cumsum([x.shape[dim] for x in xs])[:-1])
        return np.concatenate(xs, axis=dim)

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray, ...]:
        dim, offsets = ctx.saved
        return tuple(np.split(grad, offsets, axis=dim))

    @staticmethod
    def differentiable_backward(ctx: Context, grad: Tensor) -> tuple[Tensor, ...]:
        dim, offsets = ctx.saved
        bounds = [0, *offsets.tolist(), grad.shape[dim]]
        return tuple(grad[(slice(None),) * dim + (slice(a, b),)]
                     for a, b in zip(bounds, bounds[1:]))


class Stack(Function):
    """``y = stack(x_1..x_n, dim)``; ``dx_i = g`` indexed at ``i`` along ``dim``."""

    keeps_inputs = False

    @staticmethod
    def forward(ctx: Context, *xs: np.ndarray, dim: int) -> np.ndarray:
        ctx.save_for_backward(dim, len(xs))
        return np.stack(xs, axis=dim)

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray, ...]:
        dim, count = ctx.saved
        return tuple(np.take(grad, i, axis=dim) for i in range(count))

    @staticmethod
    def differentiable_backward(ctx: Context, grad: Tensor) -> tuple[Tensor, ...]:
        dim, count = ctx.saved
        return tuple(grad[(slice(None),) * dim + (i,)] for i in range(count))


def getitem(input: Tensor, index: Any) -> Tensor:
    """``input[index]`` for ints, slices, None, Ellipsis, integer tensors/lists and boolean
    masks, with PyTorch's placement of the advanced dims."""
    try:
        parsed = parse_index(input.ndim, index)
        return GetItem.apply(input, index=parsed)
    except IndexError as err:
        raise IndexError(f"getitem on a tensor of shape {input.shape}: {err}") from None


def index_put(input: Tensor, indices: Any, values: Any, accumulate: bool = False) -> Tensor:
    """A copy of ``input`` with ``values`` written (or added, ``accumulate``) at ``indices``."""
    check_tensor("index_put", "input", input)
    value = to_dtype(values, input.dtype)
    try:
        parsed = parse_index(input.ndim, indices)
        target_shape = parsed.get(np.empty(input.shape, np.bool_)).shape
    except IndexError as err:
        raise IndexError(f"index_put on a tensor of shape {input.shape}: {err}") from None
    if broadcast_shapes("index_put", value.shape, target_shape) != target_shape:
        raise ShapeError(f"index_put: values of shape {value.shape} cannot be broadcast to "
                           f"the indexed shape {target_shape}")
    return IndexPut.apply(input, value, index=parsed, accumulate=bool(accumulate))


def setitem(input: Tensor, index: Any, value: Any) -> Tensor:
    """The out-of-place value of ``input[index] = value`` (``Tensor.__setitem__`` writes it)."""
    return index_put(input, index, value)


def gather(input: Tensor, dim: int, index: Tensor) -> Tensor:
    """``out[i][j][k] = input[index[i][j][k]][j][k]`` for ``dim=0`` (likewise for other dims).

    ``index`` has the same number of dims as ``input`` and no larger size outside ``dim``.
    """
    axis = normalize_dim("gather", dim, input.ndim)
    idx = index.numpy() if isinstance(index, Tensor) else np.asarray(index)
    if idx.dtype.kind not in "iu" or idx.ndim != input.ndim:
        raise DTypeError(f"gather: index must be an integer tensor with {input.ndim} dims, "
                           f"got dtype {idx.dtype} and shape {idx.shape}")
    for d, (n, m) in enumerate(zip(idx.shape, input.shape)):
        if d != axis and n > m:
            raise ShapeError(f"gather: index size {n} exceeds the input size {m} in dim {d}")
    if idx.size and (idx.min() < -input.shape[axis] or idx.max() >= input.shape[axis]):
        raise IndexError(f"gather: index out of range for dim {axis} of size "
                         f"{input.shape[axis]}")
    key = tuple(idx if d == axis else
                np.arange(n).reshape((-1,) + (1,) * (idx.ndim - d - 1))
                for d, n in enumerate(idx.shape))
    return GetItem.apply(input, index=Index((), key)) if input.ndim else input


def index_select(input: Tensor, dim: int, index: Tensor) -> Tensor:
    """The entries at the integer ``index`` (1-D) along ``dim``, as ``torch.index_select``."""
    axis = normalize_dim("index_select", dim, input.ndim)
    idx = index.numpy() if isinstance(index, Tensor) else np.asarray(index)
    if idx.ndim > 1 or idx.dtype.kind not in "iu":
        raise DTypeError(f"index_select: index must be a 1-D integer tensor, got dtype "
                         f"{idx.dtype} and shape {idx.shape}")
    return getitem(input, (slice(None),) * axis + (Tensor(idx.reshape(-1)),))


def cat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Concatenate tensors along an existing ``dim``; all other dims must match.

    The dtypes are promoted as PyTorch does; 1-D empty tensors are skipped.
    """
    tensors = [t for t in tensors]
    for i, t in enumerate(tensors):
        check_tensor("cat", f"tensors[{i}]", t)
    if not tensors:
        raise ShapeError("cat: expected a non-empty sequence of tensors")
    dtype = dtypes.result_type(*tensors)
    tensors = [t for t in tensors if t.shape != (0,)]
    if not tensors:  # only empty 1-D tensors (skipped whatever the dim, as PyTorch)
        return Tensor(np.zeros(0, dtype))
    first = tensors[0]
    if first.ndim == 0:
        raise ShapeError("cat: zero-dimensional tensors cannot be concatenated")
    axis = normalize_dim("cat", dim, first.ndim)
    for i, t in enumerate(tensors):
        if t.ndim != first.ndim or any(
            a != b for d, (a, b) in enumerate(zip(t.shape, first.shape)) if d != axis
        ):
            raise ShapeError(
                f"cat: tensor {i} has shape {t.shape}, which does not match tensor 0's shape "
                f"{first.shape} outside dim {axis}"
            )
    return Cat.apply(*(to_dtype(t, dtype) for t in tensors), dim=axis)


def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Stack equally shaped tensors along a new ``dim`` (dtypes promoted as PyTorch)."""
    tensors = list(tensors)
    if not tensors:
        raise ShapeError("stack: expected a non-empty sequence of tensors")
    for i, t in enumerate(tensors):
        check_tensor("stack", f"tensors[{i}]", t)
        if t.shape != tensors[0].shape:
            raise ShapeError(
                f"stack: tensor {i} has shape {t.shape} but tensor 0 has {tensors[0].shape}; "
                "all must be equal"
            )
    axis = normalize_dim("stack", dim, tensors[0].ndim, extra=1)
    dtype = dtypes.result_type(*tensors)
    return Stack.apply(*(to_dtype(t, dtype) for t in tensors), dim=axis)


class TopK(NamedTuple):
    """``topk`` returns the values and their indices, as ``torch.topk``."""

    values: Tensor
    indices: Tensor


def topk(input: Tensor, k: int, dim: int = -1, largest: bool = True,
         sorted: bool = True) -> TopK:
    """The ``k`` largest (or smallest) entries along ``dim``, with their indices; the values
    are differentiable (the gradient goes back to the chosen positions)."""
    axis = normalize_dim("topk", dim, input.ndim)
    size = input.shape[axis] if input.ndim else 1
    k = check_int("topk", "k", k, 0)
    if k > size:
        raise ShapeError(f"topk: k ({k}) is larger than the size {size} of dim {dim}")
    if input.ndim == 0:
        return TopK(input, Tensor(np.zeros((), np.int64)))
    data = input.numpy()
    key = -data if largest else data
    if data.dtype.kind == "f":  # NaN counts as the largest, as in PyTorch
        key = np.where(np.isnan(data), -np.inf if largest else np.inf, key)
    order = np.argsort(key, axis=axis, kind="stable")
    indices = np.take(order, np.arange(k), axis=axis).astype(np.int64)
    return TopK(gather(input, axis, Tensor(indices)), Tensor(indices))

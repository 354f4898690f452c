"""Selecting, combining and sorting: indexing, index_put (``x[i] = v``), gather, scatter,
scatter_add, index_fill, cat, split, stack, sort, topk, unique, nonzero (selecting by a mask —
where, masked_fill, triu, tril — is in :mod:`.masking`).

The backward of a selection is a scatter: the gradient goes back to the positions that were
read, and positions read twice (repeated integer indices) receive the sum. ``GetItem`` and
``IndexScatter`` (zeros with values written at an index) are each other's adjoints: each one's
backward is the other; so are ``Split`` and ``Cat``. ``IndexPut``'s backward is ``GetItem`` and
``IndexPut`` itself. The backward of ``Scatter`` is a ``gather`` (a ``GetItem``) and
``Scatter`` itself; ``Sort``'s is a ``Scatter``. Every backward is written with these ops, so
it is differentiable again.

Indexing follows PyTorch where it differs from numpy: an integer index selects first (it
removes its dim), and only then do the tensor/list indices place their dims — so for ``x`` of
shape (2, 5, 6), ``x[1, :, [0, 1]]`` has shape (5, 2), as in PyTorch (numpy gives (2, 5)).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from .. import dtypes
from ..autograd import Context, Function, is_grad_enabled
from ..autograd.function import memory_owner
from ..errors import DTypeError, ShapeError
from ..kernels.top_k import top_k, top_k_numpy
from ..tensor import Tensor, check_tensor, from_numpy
from ..validation import broadcast_shapes, check_int, is_number, normalize_dim
from .masking import masked_fill, tril, triu, where
from .notation import operand
from .operands import to_dtype

__all__ = ["Cat", "GetItem", "Index", "IndexFill", "IndexPut", "IndexScatter", "Scatter",
           "Sort", "SortResult", "Split", "Stack", "TopK", "argsort", "cat", "gather", "getitem",
           "index_fill", "index_put", "index_select", "masked_fill", "nonzero", "parse_index",
           "scatter", "scatter_add", "setitem", "sort", "stack", "topk", "tril", "triu",
           "where"]


class Index:
    """A PyTorch index as two numpy keys: ``basic`` (ints, slices, None, Ellipsis) applied
    first, then ``advanced`` (integer/boolean arrays, with slices for the other dims) or None."""

    __slots__ = ("basic", "advanced")

    def __init__(self, basic: tuple, advanced: tuple | None):
        self.basic = basic
        self.advanced = advanced

    def get(self, x: np.ndarray) -> np.ndarray:
        """``x[index]``: a view for a basic index; for an advanced one a new array laid out
        C-contiguously, as PyTorch's (numpy's puts an advanced index after the first dim on
        the outer axis in memory: its ``x[:, idx]`` cannot be ``view``-ed as PyTorch's can)."""
        selected = x[self.basic]
        if self.advanced is None:
            return selected
        gathered = selected[self.advanced]
        return gathered if gathered.flags.c_contiguous else gathered.copy(order="C")

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

    def __repr__(self) -> str:
        return f"Index(basic={self.basic!r}, advanced={self.advanced!r})"


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


def _constant(value: Any, dtype: np.dtype) -> Tensor:
    """``value`` as a 0-d constant tensor of ``dtype``."""
    return from_numpy(np.asarray(value, dtype))


def _gather_key(idx: np.ndarray, axis: int) -> tuple:
    """The advanced key that reads ``x[..., idx[i, j, k], ...]`` (``idx`` in dim ``axis``) at
    each position of ``idx``: ``torch.gather``'s selection as a numpy index."""
    last = idx.ndim - 1
    return tuple(idx if d == axis else np.arange(n).reshape((n,) + (1,) * (last - d))
                 for d, n in enumerate(idx.shape))


def _take(x: Tensor, axis: int, index: Tensor) -> Tensor:
    """``gather(x, axis, index)`` for an index already checked: ``GetItem`` on its key."""
    return GetItem.apply(x, index=Index((), _gather_key(index.numpy(), axis)))


class GetItem(Function):
    """``y = x[index]``; ``dx = zeros_like(x)`` with ``g`` written at ``index`` (summed where
    an integer index repeats): ``IndexScatter``, its adjoint."""

    view = True
    keeps_inputs = False

    @staticmethod
    def forward(ctx: Context, x: Tensor, index: Index) -> Tensor:
        array = x.numpy()
        ctx.in_shape, ctx.index = array.shape, index
        return from_numpy(index.get(array))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        return IndexScatter.apply(grad, shape=ctx.in_shape, index=ctx.index)

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        return f"scatter({g}, index)"


class IndexScatter(Function):
    """``y = zeros(shape)`` with ``v`` written at ``index`` (summed where an integer index
    repeats): the adjoint of ``GetItem``, its backward; ``dv = g[index]``."""

    keeps_inputs = False

    @staticmethod
    def forward(ctx: Context, values: Tensor, shape: tuple[int, ...], index: Index) -> Tensor:
        v = values.numpy()
        out = np.zeros(shape, v.dtype)
        index.put(out, v, accumulate=index.advanced is not None)
        ctx.index = index
        return from_numpy(out)

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        return GetItem.apply(grad, index=ctx.index)

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        return f"{operand(g)}[index]"


class IndexPut(Function):
    """``y = x`` with ``values`` written at ``index`` (added when ``accumulate``).

    ``dx = g`` (with the overwritten positions zeroed unless ``accumulate``),
    ``dvalues = g[index]`` (summed back to ``values``' shape by the engine).
    """

    keeps_inputs = False

    @staticmethod
    def forward(ctx: Context, x: Tensor, values: Tensor, index: Index,
                accumulate: bool) -> Tensor:
        out = x.numpy().copy()
        index.put(out, values.numpy().astype(out.dtype, copy=False), accumulate)
        ctx.index, ctx.accumulate = index, accumulate
        return from_numpy(out)

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> tuple[Tensor | None, Tensor | None]:
        need_x, need_values = ctx.needs_input_grad
        dx = dvalues = None
        if need_x:
            dx = grad if ctx.accumulate else IndexPut.apply(
                grad, _constant(0, grad.dtype), index=ctx.index, accumulate=False)
        if need_values:
            dvalues = GetItem.apply(grad, index=ctx.index)
        return dx, dvalues

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        if slot == 1:
            return f"{operand(g)}[index]"
        return g if node.accumulate else f"index_put({g}, index, 0)"


class Cat(Function):
    """``y = concat(x_1..x_n, dim)``; ``dx_i = g[..., offset_i : offset_i + n_i, ...]``.

    An empty 1-D input beside inputs of more dims is skipped, as PyTorch skips it: it takes
    no part in the result and gets an empty gradient.
    """

    keeps_inputs = False

    @staticmethod
    def forward(ctx: Context, *xs: Tensor, dim: int) -> Tensor:
        arrays = [x.numpy() for x in xs]
        ndim = max(a.ndim for a in arrays)
        skipped = [a.shape == (0,) and ndim > 1 for a in arrays]
        ctx.dim = dim
        ctx.sizes = [None if skip else a.shape[dim] for a, skip in zip(arrays, skipped)]
        return from_numpy(np.concatenate([a for a, skip in zip(arrays, skipped) if not skip],
                                         axis=dim))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> tuple[Tensor | None, ...]:
        lead = (slice(None),) * ctx.dim
        grads, start = [], 0
        for need, size in zip(ctx.needs_input_grad, ctx.sizes):
            if size is None:  # a skipped empty vector: an empty gradient
                grads.append(grad.reshape(-1)[0:0] if need else None)
                continue
            grads.append(GetItem.apply(grad, index=Index(lead + (slice(start, start + size),),
                                                         None)) if need else None)
            start += size
        return tuple(grads)

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        if node.sizes[slot] is None:
            return "[] (an empty input, skipped)"
        start = sum(size for size in node.sizes[:slot] if size is not None)
        return f"narrow({g}, {node.dim}, {start}, {node.sizes[slot]})"


class Split(Function):
    """``(y_1, …, y_n) = split(x, sizes, dim)``, views of ``x``;
    ``dx = concat(g_1, …, g_n, dim)``: ``Cat``, its adjoint (a piece that received no gradient
    contributes zeros).

    One op for all the pieces, as nanoGPT's ``q, k, v = qkv.split(C, dim=2)``: the backward
    writes the gradient of ``x`` once, instead of one zero-filled ``x``-sized gradient per
    piece summed by the engine. When the ``g_i`` already lie side by side in one array, that
    array is ``dx`` and nothing is copied: the fused attention writes ``dq``, ``dk``, ``dv``
    so for a packed ``qkv`` (:func:`~tinyattn.kernels.attention.attention_backward`).
    """

    view = True
    keeps_inputs = False

    @staticmethod
    def forward(ctx: Context, x: Tensor, sizes: tuple[int, ...], dim: int) -> tuple[Tensor, ...]:
        array = x.numpy()
        ctx.sizes, ctx.dim = sizes, dim
        lead = (slice(None),) * dim
        pieces, start = [], 0
        for size in sizes:
            pieces.append(from_numpy(array[lead + (slice(start, start + size),)]))
            start += size
        return tuple(pieces)

    @staticmethod
    def backward(ctx: Context, *grads: Tensor) -> Tensor:
        if not is_grad_enabled():  # fast path: pieces written side by side need no copy
            whole = _joined_in_place(grads, ctx.dim)
            if whole is not None:
                return from_numpy(whole)
        return Cat.apply(*grads, dim=ctx.dim)

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        return f"cat({g} of each piece, dim {node.dim})"


def _joined_in_place(grads: tuple[Tensor | None, ...], dim: int) -> np.ndarray | None:
    """The concatenation of ``grads`` along ``dim`` without a copy, when they already lie side by
    side in one array's memory: views of the same array, each starting where the one before
    ends along ``dim``, with the same strides (the attention kernel writes ``dq``, ``dk``,
    ``dv`` so for a packed ``qkv``). None otherwise.

    Every element of the result is an element of one of the pieces, so the view stays inside
    their memory, and that memory is one array's, which the view keeps alive.
    """
    if any(g is None for g in grads):
        return None
    arrays = [g.numpy() for g in grads]
    first = arrays[0]
    if first.strides[dim] == 0:  # broadcast along dim: not memory of its own
        return None
    owner = memory_owner(first)
    address = first.__array_interface__["data"][0]
    for a in arrays:
        if a.strides != first.strides or a.dtype != first.dtype or \
                a.shape[:dim] != first.shape[:dim] or a.shape[dim + 1:] != first.shape[dim + 1:] \
                or a.__array_interface__["data"][0] != address or memory_owner(a) is not owner:
            return None
        address += a.shape[dim] * a.strides[dim]
    shape = list(first.shape)
    shape[dim] = sum(a.shape[dim] for a in arrays)
    return np.lib.stride_tricks.as_strided(first, tuple(shape), first.strides)


class Stack(Function):
    """``y = stack(x_1..x_n, dim)``; ``dx_i = g`` indexed at ``i`` along ``dim``."""

    keeps_inputs = False

    @staticmethod
    def forward(ctx: Context, *xs: Tensor, dim: int) -> Tensor:
        ctx.dim = dim
        return from_numpy(np.stack([x.numpy() for x in xs], axis=dim))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> tuple[Tensor | None, ...]:
        lead = (slice(None),) * ctx.dim
        return tuple(GetItem.apply(grad, index=Index(lead + (i,), None)) if need else None
                     for i, need in enumerate(ctx.needs_input_grad))

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        return f"select({g}, {node.dim}, {slot})"


class Scatter(Function):
    """``y = x`` with ``src`` written (``accumulate``: added) at ``index`` along ``dim``: for
    ``dim = 0``, ``y[index[i, j], j] = src[i, j]``.

    ``dx = g`` with the written positions zeroed (``accumulate``: ``dx = g``);
    ``dsrc = gather(g, dim, index)`` (0 where ``src`` reaches beyond ``index``), as PyTorch.
    """

    keeps_inputs = False

    @staticmethod
    def forward(ctx: Context, x: Tensor, index: Tensor, src: Tensor, dim: int,
                accumulate: bool) -> Tensor:
        out = x.numpy().copy()
        idx, values = index.numpy(), src.numpy()
        ctx.src_shape = values.shape
        if values.ndim and values.shape != idx.shape:  # src may be larger than index
            values = values[tuple(slice(0, n) for n in idx.shape)]
        values = values.astype(out.dtype, copy=False)
        key = _gather_key(idx, dim)
        if accumulate:
            np.add.at(out, key, values)
        else:
            out[key] = values
        ctx.dim, ctx.accumulate = dim, accumulate
        ctx.save_for_backward(index)
        return from_numpy(out)

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> tuple[Tensor | None, None, Tensor | None]:
        (index,) = ctx.saved_tensors
        need_x, _, need_src = ctx.needs_input_grad
        dx = dsrc = None
        if need_x:
            dx = grad if ctx.accumulate else Scatter.apply(
                grad, index, _constant(0, grad.dtype), dim=ctx.dim, accumulate=False)
        if need_src:
            dsrc = _take(grad, ctx.dim, index)
            if len(ctx.src_shape) and dsrc.shape != ctx.src_shape:
                dsrc = IndexScatter.apply(dsrc, shape=ctx.src_shape, index=Index(
                    tuple(slice(0, n) for n in dsrc.shape), None))
        return dx, None, dsrc

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        if slot == 2:
            return f"gather({g}, {node.dim}, index)"
        return g if node.accumulate else f"scatter({g}, {node.dim}, index, 0)"


class IndexFill(Function):
    """``y = x`` with ``value`` (0-d) written at the positions ``index`` (distinct) along
    ``dim``; ``dx = g`` zeroed at those positions, ``dvalue = Σ g`` over them."""

    keeps_inputs = False

    @staticmethod
    def forward(ctx: Context, x: Tensor, index: Tensor, value: Tensor, dim: int) -> Tensor:
        out = x.numpy().copy()
        out[(slice(None),) * dim + (index.numpy(),)] = value.numpy()
        ctx.dim = dim
        ctx.save_for_backward(index)
        return from_numpy(out)

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> tuple[Tensor | None, None, Tensor | None]:
        (index,) = ctx.saved_tensors
        need_x, _, need_value = ctx.needs_input_grad
        dx = dvalue = None
        if need_x:
            dx = IndexFill.apply(grad, index, _constant(0, grad.dtype), dim=ctx.dim)
        if need_value:
            picked = Index((slice(None),) * (ctx.dim + 1),
                           (slice(None),) * ctx.dim + (index.numpy(),))
            dvalue = GetItem.apply(grad, index=picked).sum()
        return dx, None, dvalue

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        if slot == 2:
            return f"Σ index_select({g}, {node.dim}, index)"
        return f"index_fill({g}, {node.dim}, index, 0)"


class Sort(Function):
    """``values, indices = sort(x, dim)`` (stable; NaN counts as the largest, as PyTorch), or
    the ``first`` k of each (``topk``); ``dx = 0`` with ``g`` written back to the positions the
    values came from, ``dx = scatter(0, dim, indices, g)``; the indices have no gradient."""

    keeps_inputs = False

    @staticmethod
    def forward(ctx: Context, x: Tensor, dim: int, descending: bool,
                first: int | None = None) -> tuple[Tensor, Tensor]:
        array = x.numpy()
        values, order = _sorted_along(array, dim, descending, first)
        indices = from_numpy(order)
        ctx.mark_non_differentiable(indices)
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(indices)
        ctx.dim, ctx.in_shape = dim, array.shape
        return from_numpy(values), indices

    @staticmethod
    def backward(ctx: Context, grad: Tensor | None, grad_indices: None) -> Tensor | None:
        if grad is None:
            return None
        (indices,) = ctx.saved_tensors
        zeros = from_numpy(np.zeros(ctx.in_shape, grad.dtype))
        return Scatter.apply(zeros, indices, grad, dim=ctx.dim, accumulate=False)

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        return f"scatter(0, {node.dim}, indices, {g})"


class Unique(Function):
    """``values, inverse, counts = unique(x, dim)``: the distinct elements of ``x`` (its distinct
    slices along ``dim``), ascending, where each element went and how often each occurs.
    Selected, not computed; as in PyTorch, the values have no derivative (``backward`` refuses
    them), and the inverse and counts are integers without a gradient."""

    keeps_inputs = False

    @staticmethod
    def forward(ctx: Context, x: Tensor, *, dim: int | None) -> tuple[Tensor, Tensor, Tensor]:
        array = x.numpy()
        if dim is None:
            values, inverse, counts = np.unique(array.reshape(-1), return_inverse=True,
                                                return_counts=True, equal_nan=False)
            inverse = inverse.reshape(array.shape)
        else:
            values, inverse, counts = np.unique(array, return_inverse=True, return_counts=True,
                                                axis=dim, equal_nan=False)
            inverse = inverse.reshape(-1)
        inverse = from_numpy(inverse.astype(np.int64, copy=False))
        counts = from_numpy(counts.astype(np.int64, copy=False))
        ctx.mark_non_differentiable(inverse, counts)
        return from_numpy(values), inverse, counts

    @staticmethod
    def backward(ctx: Context, grad: Tensor, grad_inverse: Tensor, grad_counts: Tensor) -> None:
        raise RuntimeError("unique: the derivative of unique is not implemented (it selects "
                           "values; PyTorch refuses it too)")

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        return "(no derivative: unique is refused by backward)"


def _sorted_along(array: np.ndarray, axis: int, descending: bool,
                  first: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The values of ``array`` along ``axis`` sorted stably (equal elements keep their order;
    NaN sorts as the largest, as in PyTorch), and the int64 indices they came from: all of
    them (numpy's stable sort, :func:`~tinyattn.kernels.top_k.top_k_numpy` of whole rows),
    or the ``first`` ones (the selection kernel, :mod:`tinyattn.kernels.top_k`)."""
    last = axis == array.ndim - 1
    rows = array if last else np.moveaxis(array, axis, -1)
    if first is None:
        values, order = top_k_numpy(rows, rows.shape[-1], descending)
    else:
        values, order = top_k(rows, first, descending)
    if last:
        return values, order
    return (np.ascontiguousarray(np.moveaxis(values, -1, axis)),
            np.ascontiguousarray(np.moveaxis(order, -1, axis)))


def getitem(input: Tensor, index: Any) -> Tensor:
    """``input[index]`` for ints, slices, None, Ellipsis, integer tensors/lists and boolean
    masks, with PyTorch's placement of the advanced dims."""
    parts = index if type(index) is tuple else (index,)
    for p in parts:  # a basic index of Python ints and slices goes straight to numpy
        kind = type(p)
        if not (kind is int or p is None or p is Ellipsis or kind is slice and (
                p.step is None or type(p.step) is int and p.step > 0)):
            break
    else:
        try:  # numpy's errors (too many indices, out of range) are PyTorch's
            return GetItem.apply(input, index=Index(parts, None))
        except IndexError as err:
            raise IndexError(f"getitem on a tensor of shape {input.shape}: {err}") from None
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
        anything = np.broadcast_to(np.zeros((), np.bool_), input.shape)  # no memory
        target_shape = parsed.get(anything).shape
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
    if not input.ndim:
        return input
    return GetItem.apply(input, index=Index((), _gather_key(idx, axis)))


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
    if tensors and type(dim) is int and _plain_cat(tensors, dim):
        return Cat.apply(*tensors, dim=dim % tensors[0].ndim)
    for i, t in enumerate(tensors):
        check_tensor("cat", f"tensors[{i}]", t)
    if not tensors:
        raise ShapeError("cat: expected a non-empty sequence of tensors")
    dtype = dtypes.result_type(*tensors)
    kept = [t for t in tensors if t.shape != (0,)]
    if not kept:  # only empty 1-D tensors (whatever the dim, as PyTorch): an empty vector
        return Cat.apply(*(to_dtype(t, dtype) for t in tensors), dim=0)
    first = kept[0]
    if first.ndim == 0:
        raise ShapeError("cat: zero-dimensional tensors cannot be concatenated")
    axis = normalize_dim("cat", dim, first.ndim)
    for i, t in enumerate(kept):
        if t.ndim != first.ndim or any(
            a != b for d, (a, b) in enumerate(zip(t.shape, first.shape)) if d != axis
        ):
            raise ShapeError(
                f"cat: tensor {i} has shape {t.shape}, which does not match tensor 0's shape "
                f"{first.shape} outside dim {axis}"
            )
    return Cat.apply(*(to_dtype(t, dtype) for t in tensors), dim=axis)


def _plain_cat(tensors: list, dim: int) -> bool:
    """Whether :func:`cat` can take ``tensors`` as they are, found in a few comparisons:
    tensors of one dtype and of the first's shape outside ``dim``, an int ``dim`` in range, none
    of them an empty vector. False sends the call through the full checks."""
    first = tensors[0]
    if not isinstance(first, Tensor) or not -first.ndim <= dim < first.ndim:
        return False
    dtype, shape, axis = first.dtype, first.shape, dim % first.ndim
    for t in tensors:
        if not (isinstance(t, Tensor) and t.dtype == dtype and len(t.shape) == len(shape) and
                t.shape[:axis] == shape[:axis] and t.shape[axis + 1:] == shape[axis + 1:]) \
                or t.shape == (0,):
            return False
    return True


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
    """The ``k`` largest (or smallest) entries along ``dim``, in order, with their indices: the
    first ``k`` of :func:`sort` (NaN counts as the largest; equal values in the order of their
    positions). The values are differentiable, by the ``Sort`` op's rule: the gradient goes
    back to the chosen positions. Found without sorting whole rows (the selection kernel of
    :mod:`tinyattn.kernels.top_k`); ``sorted`` is accepted, and the result is always sorted.

    Examples
    --------
    >>> import tinyattn as ta
    >>> values, indices = ta.topk(ta.tensor([1.0, 3.0, 2.0, 3.0]), 3)
    >>> values.tolist(), indices.tolist()
    ([3.0, 3.0, 2.0], [1, 3, 2])
    """
    check_tensor("topk", "input", input)
    axis = normalize_dim("topk", dim, input.ndim)
    size = input.shape[axis] if input.ndim else 1
    k = check_int("topk", "k", k, 0)
    if k > size:
        raise ShapeError(f"topk: k ({k}) is larger than the size {size} of dim {dim}")
    largest = _check_flag("topk", "largest", largest)
    _check_flag("topk", "sorted", sorted)
    if input.ndim == 0:
        return TopK(input, Tensor(np.zeros((), np.int64)))
    return TopK(*Sort.apply(input, dim=axis, descending=largest, first=k))


class SortResult(NamedTuple):
    """``sort`` returns the sorted values and the indices they came from, as ``torch.sort``."""

    values: Tensor
    indices: Tensor


def _check_flag(op: str, label: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{op}: {label} must be a bool, got {type(value).__name__} {value!r}")
    return bool(value)


def sort(input: Tensor, dim: int = -1, descending: bool = False,
         stable: bool = False) -> SortResult:
    """The elements of ``input`` sorted along ``dim`` (ascending unless ``descending``), with
    the int64 indices they came from, as ``torch.sort``.

    The sort is always stable (equal elements keep their order, so ``stable=True`` changes
    nothing); NaN sorts as the largest value, as in PyTorch. The values are differentiable: the
    gradient goes back to the position each value came from.

    Examples
    --------
    >>> import tinyattn as ta
    >>> values, indices = ta.sort(ta.tensor([3.0, 1.0, 2.0]), descending=True)
    >>> values.tolist(), indices.tolist()
    ([3.0, 2.0, 1.0], [0, 2, 1])
    """
    check_tensor("sort", "input", input)
    axis = normalize_dim("sort", dim, input.ndim)
    descending = _check_flag("sort", "descending", descending)
    _check_flag("sort", "stable", stable)
    if input.ndim == 0:  # one element: sorted as it is
        values, indices = Sort.apply(input.reshape(1), dim=0, descending=descending)
        return SortResult(values.reshape(()), indices.reshape(()))
    values, indices = Sort.apply(input, dim=axis, descending=descending)
    return SortResult(values, indices)


def argsort(input: Tensor, dim: int = -1, descending: bool = False,
            stable: bool = False) -> Tensor:
    """The int64 indices that sort ``input`` along ``dim`` (``sort(...).indices``; stable, NaN
    as the largest), as ``torch.argsort``."""
    check_tensor("argsort", "input", input)
    axis = normalize_dim("argsort", dim, input.ndim)
    descending = _check_flag("argsort", "descending", descending)
    _check_flag("argsort", "stable", stable)
    if input.ndim == 0:
        return from_numpy(np.zeros((), np.int64))
    return from_numpy(_sorted_along(input.numpy(), axis, descending)[1])


def unique(input: Tensor, sorted: bool = True, return_inverse: bool = False,
           return_counts: bool = False, dim: int | None = None) -> Any:
    """The distinct elements of ``input`` in ascending order, as a 1-D tensor (its distinct
    slices along ``dim`` when given), as ``torch.unique`` (:class:`Unique`); with
    ``return_inverse`` also where each element (slice) went, in the input's shape (of length
    ``input.shape[dim]``), and with ``return_counts`` how often each distinct one occurs, both
    int64. Each NaN counts as distinct, as in PyTorch.

    Examples
    --------
    >>> import tinyattn as ta
    >>> values, inverse = ta.unique(ta.tensor([3, 1, 3, 2]), return_inverse=True)
    >>> values.tolist(), inverse.tolist()
    ([1, 2, 3], [2, 0, 2, 1])
    """
    check_tensor("unique", "input", input)
    _check_flag("unique", "sorted", sorted)  # always sorted, which ``sorted=False`` allows
    inverse_wanted = _check_flag("unique", "return_inverse", return_inverse)
    counts_wanted = _check_flag("unique", "return_counts", return_counts)
    if dim is not None:
        if input.ndim == 0:
            raise IndexError("unique: a 0-d tensor has no dim to take slices along; leave "
                             "dim=None")
        dim = normalize_dim("unique", dim, input.ndim)
    values, inverse, counts = Unique.apply(input, dim=dim)
    found = [values]
    if inverse_wanted:
        found.append(inverse)
    if counts_wanted:
        found.append(counts)
    return found[0] if len(found) == 1 else tuple(found)


def _check_index(op: str, index: Any) -> Tensor:
    check_tensor(op, "index", index)
    if index.dtype != np.int64:
        raise DTypeError(f"{op}: expected an int64 index tensor, got dtype {index.dtype} "
                         "(convert it with .long())")
    return index


def _out_of_range(op: str, idx: np.ndarray, size: int, axis: int, negative: bool) -> None:
    """An IndexError naming the first index outside ``[0, size)`` (``[-size, size)`` when
    ``negative`` indices count from the end)."""
    if not idx.size:
        return
    low = -size if negative else 0
    bad = (idx < low) | (idx >= size)
    if bad.any():
        value = int(idx.reshape(-1)[np.argmax(bad.reshape(-1))])
        raise IndexError(f"{op}: index {value} is out of bounds for dim {axis} with size "
                         f"{size}")


def _scatter(op: str, input: Any, dim: Any, index: Any, src: Any,
             accumulate: bool) -> Tensor:
    """Check the arguments of ``scatter``/``scatter_add`` and apply :class:`Scatter`."""
    check_tensor(op, "input", input)
    _check_index(op, index)
    axis = normalize_dim(op, dim, input.ndim)
    if isinstance(src, Tensor):
        if src.dtype != input.dtype:
            raise DTypeError(f"{op}: expected src to have the input's dtype {input.dtype}, got "
                             f"{src.dtype}")
        if src.ndim != input.ndim:
            raise ShapeError(f"{op}: src must have as many dims as input ({input.ndim}), got "
                             f"shape {src.shape}")
    elif accumulate or not is_number(src) and not isinstance(src, (bool, np.bool_)):
        wanted = "a tensor" if accumulate else "a tensor or a number"
        raise TypeError(f"{op}: src must be {wanted}, got {type(src).__name__}")
    if index.ndim != input.ndim:
        raise ShapeError(f"{op}: index must have as many dims as input ({input.ndim}), got "
                         f"shape {index.shape}")
    for d, n in enumerate(index.shape):
        if (d != axis and n > input.shape[d]) or (isinstance(src, Tensor) and n > src.shape[d]):
            raise ShapeError(
                f"{op}: index of shape {index.shape} must be no larger than input "
                f"{input.shape} outside dim {axis}, and no larger than src"
                + (f" {src.shape}" if isinstance(src, Tensor) else "") + " in every dim")
    _out_of_range(op, index.numpy(), input.shape[axis] if input.ndim else 1, axis, False)
    if not isinstance(src, Tensor):
        src = _constant(src, input.dtype)
    if input.ndim == 0:  # one element: scattered as a 1-element vector
        one = (1,)
        return Scatter.apply(input.reshape(one), index.reshape(one),
                             src.reshape(one) if src.ndim else src, dim=0,
                             accumulate=accumulate).reshape(())
    return Scatter.apply(input, index, src, dim=axis, accumulate=accumulate)


def scatter(input: Tensor, dim: int, index: Tensor, src: Any = None, *, value: Any = None,
            reduce: str | None = None) -> Tensor:
    """A copy of ``input`` with the entries of ``src`` written at ``index`` along ``dim``, as
    ``torch.scatter``: for ``dim=0``, ``out[index[i][j]][j] = src[i][j]``.

    ``index`` is int64 with as many dims as ``input``, no larger than ``src`` in any dim nor
    than ``input`` outside ``dim``; its values lie in ``[0, input.size(dim))``. ``src`` is a
    tensor of ``input``'s dtype or a number (also accepted as ``value=``). Where ``index``
    repeats a position, one of the values is written (which one is unspecified, as in
    PyTorch). ``reduce`` is not supported: use :func:`scatter_add`.

    Gradients, as PyTorch's: ``input`` gets ``grad`` with the written positions zeroed,
    ``src`` gets ``gather(grad, dim, index)``.

    Examples
    --------
    >>> import tinyattn as ta
    >>> ta.scatter(ta.zeros(4), 0, ta.tensor([3, 0]), ta.tensor([1.0, 2.0])).tolist()
    [2.0, 0.0, 0.0, 1.0]
    """
    if reduce is not None:
        raise NotImplementedError(f"scatter: reduce={reduce!r} is not supported; use "
                                  "scatter_add for sums")
    if value is not None:
        if src is not None:
            raise TypeError("scatter: give either src or value, not both")
        src = value
    if src is None:
        raise TypeError("scatter: missing the src (or value) argument")
    return _scatter("scatter", input, dim, index, src, accumulate=False)


def scatter_add(input: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    """A copy of ``input`` with the entries of ``src`` added at ``index`` along ``dim`` (values
    sent to one position are summed), as ``torch.scatter_add``: for ``dim=0``,
    ``out[index[i][j]][j] += src[i][j]``. Arguments as :func:`scatter` (``src`` a tensor).

    Gradients: ``input`` gets ``grad``, ``src`` gets ``gather(grad, dim, index)``.

    Examples
    --------
    >>> import tinyattn as ta
    >>> ta.scatter_add(ta.zeros(3), 0, ta.tensor([1, 1, 2]), ta.ones(3)).tolist()
    [0.0, 2.0, 1.0]
    """
    return _scatter("scatter_add", input, dim, index, src, accumulate=True)


def index_fill(input: Tensor, dim: int, index: Tensor, value: Any) -> Tensor:
    """A copy of ``input`` with ``value`` written at the positions ``index`` (int64, 0-d or
    1-D; negative counts from the end) along ``dim``, as ``torch.index_fill``.

    ``value`` is a number or a 0-d tensor. Gradients: ``input`` gets ``grad`` zeroed at the
    filled positions; a ``value`` tensor gets the sum of ``grad`` over them.

    Examples
    --------
    >>> import tinyattn as ta
    >>> ta.index_fill(ta.ones(2, 3), 1, ta.tensor([0, 2]), -1.0).tolist()
    [[-1.0, 1.0, -1.0], [-1.0, 1.0, -1.0]]
    """
    check_tensor("index_fill", "input", input)
    _check_index("index_fill", index)
    axis = normalize_dim("index_fill", dim, input.ndim)
    if index.ndim > 1:
        raise ShapeError(f"index_fill: index must be 0-d or 1-D, got shape {index.shape}")
    if isinstance(value, Tensor):
        if value.ndim:
            raise ShapeError(f"index_fill: value must be a number or a 0-d tensor, got a "
                             f"tensor of shape {value.shape}")
        value = to_dtype(value, input.dtype)
    elif is_number(value) or isinstance(value, (bool, np.bool_)):
        value = _constant(value, input.dtype)
    else:
        raise TypeError(f"index_fill: value must be a number or a 0-d tensor, got "
                        f"{type(value).__name__}")
    size = input.shape[axis] if input.ndim else 1
    idx = index.numpy().reshape(-1)
    _out_of_range("index_fill", idx, size, axis, True)
    positions = from_numpy(np.unique(idx % size) if size else idx)  # distinct, from 0
    if input.ndim == 0:
        return IndexFill.apply(input.reshape(1), positions, value, dim=0).reshape(())
    return IndexFill.apply(input, positions, value, dim=axis)


def nonzero(input: Tensor, as_tuple: bool = False) -> Tensor | tuple[Tensor, ...]:
    """The indices of the nonzero (true, NaN included) elements, as ``torch.nonzero``: an
    int64 tensor of shape ``(count, input.ndim)``, one row per element in C order, or with
    ``as_tuple=True`` one 1-D tensor per dim (one for a 0-d input). No gradient.

    Examples
    --------
    >>> import tinyattn as ta
    >>> ta.nonzero(ta.tensor([[1, 0], [0, 3]])).tolist()
    [[0, 0], [1, 1]]
    """
    check_tensor("nonzero", "input", input)
    array = input.numpy()
    if as_tuple:
        found = np.nonzero(array.reshape(1) if array.ndim == 0 else array)
        return tuple(from_numpy(c.astype(np.int64, copy=False)) for c in found)
    return from_numpy(np.argwhere(array).astype(np.int64, copy=False))

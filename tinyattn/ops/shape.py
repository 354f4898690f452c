"""Shape ops: reshape/view, permute/transpose, expand, repeat, squeeze/unsqueeze, flatten,
contiguous.

None of these change a value, so each backward only moves the gradient back into the input's
layout: reshape it back, permute it back, or (for ``expand``) return it unchanged so the
engine's ``unbroadcast`` sums it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..autograd import Context, Function
from ..errors import DTypeError, ShapeError
from ..tensor import Tensor, check_tensor
from ..validation import check_int, normalize_dim, shape_arg


class Reshape(Function):
    """``y = x`` with a new shape; ``dx = g`` reshaped back."""

    view = True
    keeps_inputs = False

    @staticmethod
    def forward(ctx: Context, x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        ctx.save_for_backward(x.shape)
        return x.reshape(shape)

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any]:
        (shape,) = ctx.saved
        return (grad.reshape(shape),)

    differentiable_backward = backward


class Permute(Function):
    """``y = x`` with axes reordered by ``dims``; ``dx = g`` with the inverse order."""

    view = True
    keeps_inputs = False

    @staticmethod
    def forward(ctx: Context, x: np.ndarray, dims: tuple[int, ...]) -> np.ndarray:
        ctx.save_for_backward(tuple(int(i) for i in np.argsort(dims)))
        return x.transpose(dims)

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray]:
        (inverse,) = ctx.saved
        return (grad.transpose(inverse),)

    @staticmethod
    def differentiable_backward(ctx: Context, grad: Tensor) -> tuple[Tensor]:
        return (grad.permute(ctx.saved[0]),)


class Expand(Function):
    """``y = x`` broadcast to ``shape`` (a view); ``dx = g`` summed by the engine's unbroadcast."""

    view = True
    keeps_inputs = False

    @staticmethod
    def forward(ctx: Context, x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        return np.broadcast_to(x, shape)

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any]:
        return (grad,)

    differentiable_backward = backward


class Tile(Function):
    """``y = x`` repeated ``reps[d]`` times along each dim ``d``; ``dx = Σ`` over the copies."""

    keeps_inputs = False

    @staticmethod
    def forward(ctx: Context, x: np.ndarray, reps: tuple[int, ...]) -> np.ndarray:
        ctx.save_for_backward(x.shape, reps)
        return np.tile(x, reps)

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any]:
        shape, reps = ctx.saved
        split = tuple(n for pair in zip(reps, shape) for n in pair)  # (r0, n0, r1, n1, ...)
        axes = tuple(range(0, 2 * len(shape), 2))
        if isinstance(grad, np.ndarray):
            return (grad.reshape(split).sum(axis=axes),)
        return (grad.reshape(split).sum(dim=axes),)

    differentiable_backward = backward


class Copy(Function):
    """``y`` = a C-ordered copy of ``x``; ``dx = g``."""

    keeps_inputs = False

    @staticmethod
    def forward(ctx: Context, x: np.ndarray) -> np.ndarray:
        return np.array(x, order="C", copy=True)

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any]:
        return (grad,)

    differentiable_backward = backward


def _resolve_shape(op: str, x: Tensor, target: tuple[int, ...]) -> tuple[int, ...]:
    """``target`` with its one ``-1`` filled in, checked to hold ``x.numel()`` elements."""
    if sum(1 for n in target if n == -1) > 1 or any(n < -1 for n in target):
        raise ShapeError(f"{op}: invalid shape {target}: at most one -1 and no other negatives")
    known = math.prod(n for n in target if n != -1)
    if -1 in target:
        if known == 0 or x.numel() % known:
            raise ShapeError(f"{op}: cannot reshape a tensor of shape {x.shape} ({x.numel()} "
                             f"elements) into {target}")
        return tuple(x.numel() // known if n == -1 else n for n in target)
    if known != x.numel():
        raise ShapeError(f"{op}: cannot reshape a tensor of shape {x.shape} ({x.numel()} "
                         f"elements) into {target} ({known} elements)")
    return target


def reshape(input: Tensor, *shape: int | Sequence[int]) -> Tensor:
    """``input`` with a new shape of the same number of elements; one dim may be ``-1``."""
    check_tensor("reshape", "input", input)
    target = _resolve_shape("reshape", input, shape_arg("reshape", shape))
    if target == input.shape:
        return input
    return Reshape.apply(input, shape=target)


def view(input: Tensor, *shape: Any) -> Tensor:
    """``reshape`` that never copies: a non-contiguous layout that cannot be viewed is an error
    (as ``torch.Tensor.view``); ``view(dtype)`` is not supported."""
    if len(shape) == 1 and not isinstance(shape[0], (int, np.integer, tuple, list)) and \
            not hasattr(shape[0], "ndim"):
        raise TypeError(f"view: expected a shape, got {shape[0]!r} (view(dtype) is not "
                        "supported; use .to(dtype))")
    target = _resolve_shape("view", input, shape_arg("view", shape))
    probe = input.numpy().view()
    try:
        probe.shape = target
    except AttributeError:
        raise ShapeError(
            f"view: size {list(target)} is not compatible with the input's size and strides "
            f"(shape {input.shape}, not contiguous); use .reshape(...) instead"
        ) from None
    return input if target == input.shape else Reshape.apply(input, shape=target)


def permute(input: Tensor, *dims: int | Sequence[int]) -> Tensor:
    """``input`` with its axes in the order ``dims``."""
    order = shape_arg("permute", dims, required=True)
    if len(order) != input.ndim:
        raise ShapeError(f"permute: got {len(order)} dims {order} for a tensor of "
                           f"{input.ndim} dims {input.shape}")
    axes = tuple(normalize_dim("permute", d, input.ndim) for d in order) if input.ndim else ()
    if sorted(axes) != list(range(input.ndim)):
        raise ShapeError(f"permute: dims {order} are not a permutation of {input.ndim} axes")
    return input if axes == tuple(range(input.ndim)) else Permute.apply(input, dims=axes)


def transpose(input: Tensor, dim0: int, dim1: int) -> Tensor:
    """``input`` with axes ``dim0`` and ``dim1`` swapped."""
    a = normalize_dim("transpose", dim0, input.ndim)
    b = normalize_dim("transpose", dim1, input.ndim)
    if a == b or input.ndim < 2:
        return input
    order = list(range(input.ndim))
    order[a], order[b] = order[b], order[a]
    return Permute.apply(input, dims=tuple(order))


def movedim(input: Tensor, source: int, destination: int) -> Tensor:
    """``input`` with dim ``source`` moved to position ``destination``."""
    order = list(range(input.ndim))
    order.insert(normalize_dim("movedim", destination, input.ndim),
                 order.pop(normalize_dim("movedim", source, input.ndim)))
    return permute(input, order)


def unsqueeze(input: Tensor, dim: int) -> Tensor:
    """``input`` with a new axis of size 1 inserted at ``dim``."""
    axis = normalize_dim("unsqueeze", dim, input.ndim, extra=1)
    return Reshape.apply(input, shape=input.shape[:axis] + (1,) + input.shape[axis:])


def squeeze(input: Tensor, dim: int | Sequence[int] | None = None) -> Tensor:
    """``input`` without axes of size 1 (only those among ``dim``, when given, as PyTorch)."""
    if dim is None:
        axes = {i for i, n in enumerate(input.shape) if n == 1}
    else:
        dims = dim if isinstance(dim, (tuple, list)) else (dim,)
        axes = {normalize_dim("squeeze", d, input.ndim) for d in dims}
        axes = {a for a in axes if a < input.ndim and input.shape[a] == 1}
    shape = tuple(n for i, n in enumerate(input.shape) if i not in axes)
    return input if shape == input.shape else Reshape.apply(input, shape=shape)


def flatten(input: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """``input`` with dims ``start_dim..end_dim`` merged into one."""
    if input.ndim == 0:
        return reshape(input, 1)
    start = normalize_dim("flatten", start_dim, input.ndim)
    end = normalize_dim("flatten", end_dim, input.ndim)
    if start > end:
        raise ShapeError(f"flatten: start_dim {start_dim} cannot come after end_dim {end_dim}")
    merged = math.prod(input.shape[start:end + 1])
    return reshape(input, input.shape[:start] + (merged,) + input.shape[end + 1:])


def unflatten(input: Tensor, dim: int, sizes: Sequence[int]) -> Tensor:
    """``input`` with dim ``dim`` split into ``sizes`` (one may be -1)."""
    axis = normalize_dim("unflatten", dim, input.ndim)
    sizes = shape_arg("unflatten", (sizes,))
    known = math.prod(n for n in sizes if n != -1)
    if -1 in sizes:
        sizes = tuple(input.shape[axis] // known if n == -1 else n for n in sizes)
    if math.prod(sizes) != input.shape[axis]:
        raise ShapeError(f"unflatten: sizes {list(sizes)} do not multiply to the size "
                           f"{input.shape[axis]} of dim {dim}")
    return reshape(input, input.shape[:axis] + sizes + input.shape[axis + 1:])


def expand(input: Tensor, *sizes: int | Sequence[int]) -> Tensor:
    """``input`` broadcast to ``sizes`` without copying; ``-1`` keeps a dim."""
    target = shape_arg("expand", sizes, required=True)
    if len(target) < input.ndim:
        raise ShapeError(
            f"expand: the number of sizes {target} ({len(target)}) must be at least the "
            f"number of dims of the tensor {input.shape} ({input.ndim})"
        )
    lead = len(target) - input.ndim
    shape = []
    for i, n in enumerate(target):
        own = input.shape[i - lead] if i >= lead else None
        if n == -1:
            if own is None:
                raise ShapeError(f"expand: -1 is not allowed for the new leading dim {i}")
            n = own
        if own is not None and own != 1 and own != n:
            raise ShapeError(
                f"expand: the tensor of shape {input.shape} cannot be expanded to {target}: "
                f"dim {i} has size {own}, which must be 1 or {n}"
            )
        shape.append(int(n))
    return input if tuple(shape) == input.shape else Expand.apply(input, shape=tuple(shape))


def expand_as(input: Tensor, other: Tensor) -> Tensor:
    """``input`` expanded to ``other``'s shape."""
    return expand(input, other.shape)


def repeat(input: Tensor, *sizes: int | Sequence[int]) -> Tensor:
    """``input`` tiled ``sizes[d]`` times along each dim (new leading dims where ``sizes`` is
    longer), as ``torch.Tensor.repeat``."""
    reps = shape_arg("repeat", sizes, required=True)
    if len(reps) < input.ndim:
        raise ShapeError(f"repeat: the number of repeat dims ({len(reps)}) can not be "
                           f"smaller than the number of tensor dims ({input.ndim})")
    if any(r < 0 for r in reps):
        raise ShapeError(f"repeat: repeats must be non-negative, got {reps}")
    x = reshape(input, (1,) * (len(reps) - input.ndim) + input.shape)
    return Tile.apply(x, reps=reps)


def repeat_interleave(input: Tensor, repeats: int | Tensor, dim: int | None = None) -> Tensor:
    """Each element (or slice along ``dim``) repeated ``repeats`` times in place:
    ``[a, b] -> [a, a, b, b]``. With ``dim=None`` the input is flattened first."""
    from .index import getitem

    if dim is None:
        input, dim = reshape(input, -1), 0
    axis = normalize_dim("repeat_interleave", dim, input.ndim)
    counts = repeats.numpy() if isinstance(repeats, Tensor) else np.asarray(repeats)
    if counts.dtype.kind not in "iu" or (counts.ndim and counts.shape != (input.shape[axis],)):
        raise DTypeError(f"repeat_interleave: repeats must be an int or an integer tensor "
                           f"of size {input.shape[axis]}, got {repeats!r}")
    if (counts < 0).any():
        raise ShapeError("repeat_interleave: repeats must be non-negative")
    source = np.repeat(np.arange(input.shape[axis]), counts)
    return getitem(input, (slice(None),) * axis + (Tensor(source),))


def contiguous(input: Tensor) -> Tensor:
    """``input`` itself when C-contiguous, else a C-ordered copy."""
    if input.numpy().flags.c_contiguous:
        return input
    return Copy.apply(input)


def clone(input: Tensor) -> Tensor:
    """A copy of ``input`` (differentiable: the gradient passes through unchanged)."""
    check_tensor("clone", "input", input)
    return Copy.apply(input)


def split(input: Tensor, split_size_or_sections: int | Sequence[int],
          dim: int = 0) -> tuple[Tensor, ...]:
    """Split along ``dim`` into pieces of a size (the last may be smaller) or of given sizes."""
    from .index import getitem

    if input.ndim == 0:
        raise ShapeError("split: expects at least a 1-dimensional tensor")
    axis = normalize_dim("split", dim, input.ndim)
    length = input.shape[axis]
    if isinstance(split_size_or_sections, (int, np.integer)):
        size = check_int("split", "split_size", split_size_or_sections, 1)
        sizes = [min(size, length - start) for start in range(0, length, size)] or [0]
    else:
        sizes = [int(s) for s in split_size_or_sections]
        if sum(sizes) != length or any(s < 0 for s in sizes):
            raise ShapeError(
                f"split: sections {sizes} must be non-negative and sum to the size {length} "
                f"of dim {axis} (tensor of shape {input.shape})"
            )
    pieces, start = [], 0
    for size in sizes:
        pieces.append(getitem(input, (slice(None),) * axis + (slice(start, start + size),)))
        start += size
    return tuple(pieces)


def chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
    """Split into ``chunks`` pieces of size ``ceil(n / chunks)`` along ``dim``."""
    chunks = check_int("chunk", "chunks", chunks, 1)
    if input.ndim == 0:
        raise ShapeError("chunk: expects at least a 1-dimensional tensor")
    axis = normalize_dim("chunk", dim, input.ndim)
    if input.shape[axis] == 0:  # an empty dim gives `chunks` empty pieces, as in PyTorch
        return split(input, [0] * chunks, axis)
    size = -(-input.shape[axis] // chunks)
    return split(input, size, axis)


def unbind(input: Tensor, dim: int = 0) -> tuple[Tensor, ...]:
    """The slices of ``input`` along ``dim``, without that dim."""
    from .index import getitem

    axis = normalize_dim("unbind", dim, input.ndim)
    return tuple(getitem(input, (slice(None),) * axis + (i,)) for i in range(input.shape[axis]))


def flip(input: Tensor, dims: int | Sequence[int]) -> Tensor:
    """``input`` reversed along ``dims``."""
    from .index import getitem

    axes = {normalize_dim("flip", d, input.ndim) for d in
            (dims if isinstance(dims, (tuple, list)) else (dims,))}
    if input.ndim == 0:
        return input
    key = tuple(Tensor(np.arange(n - 1, -1, -1)) if i in axes else slice(None)
                for i, n in enumerate(input.shape))
    out = input
    for i in sorted(axes):
        out = getitem(out, (slice(None),) * i + (key[i],))
    return out

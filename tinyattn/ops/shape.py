"""Shape ops: reshape/view, permute/transpose, expand, repeat, flip, roll,
squeeze/unsqueeze, flatten, contiguous.

None of these change a value, so each backward only moves the gradient back into the input's
layout: reshape it back, permute it back, flip or roll it back, or (for ``expand``) return it
unchanged so the engine's ``unbroadcast`` sums it. Each backward is written with these same
ops, so it is differentiable again.

Reshape, permute, transpose, (un)squeeze are called inside other ops' backward rules all the
time: their public functions take a short path when the arguments are already plain ints in
range, and check everything else in full.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..autograd import Context, Function
from ..errors import DTypeError, ShapeError
from ..tables import shape_text
from ..tensor import Tensor, check_tensor, from_numpy
from ..validation import check_int, normalize_dim, shape_arg
from .notation import transpose as transposed


class Reshape(Function):
    """``y = x`` with a new shape; ``dx = g`` reshaped back to ``x``'s shape."""

    view = True
    keeps_inputs = False

    @staticmethod
    def forward(ctx: Context, x: Tensor, shape: tuple[int, ...]) -> Tensor:
        array = x.numpy()
        ctx.in_shape = array.shape
        return from_numpy(array.reshape(shape))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        return Reshape.apply(grad, shape=ctx.in_shape)

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        return f"reshape({g}, {shape_text(node.inputs[0].shape)})"


def _swaps_last_two(dims: tuple[int, ...]) -> bool:
    n = len(dims)
    return n >= 2 and dims == tuple(range(n - 2)) + (n - 1, n - 2)


class Permute(Function):
    """``y = x`` with its axes reordered by ``dims``; ``dx = g`` permuted by the inverse order."""

    view = True
    keeps_inputs = False

    @staticmethod
    def forward(ctx: Context, x: Tensor, dims: tuple[int, ...]) -> Tensor:
        ctx.dims = dims
        return from_numpy(x.numpy().transpose(dims))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        inverse = [0] * len(ctx.dims)
        for position, axis in enumerate(ctx.dims):
            inverse[axis] = position
        return Permute.apply(grad, dims=tuple(inverse))

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        dims = tuple(node.dims)
        if _swaps_last_two(dims):
            return transposed(g)
        inverse = tuple(sorted(range(len(dims)), key=dims.__getitem__))
        return f"permute({g}, {inverse})"


class Expand(Function):
    """``y = x`` broadcast to ``shape`` (a view); ``dx = g`` summed over the broadcast dims (by
    the engine's ``unbroadcast``)."""

    view = True
    keeps_inputs = False

    @staticmethod
    def forward(ctx: Context, x: Tensor, shape: tuple[int, ...]) -> Tensor:
        return from_numpy(np.broadcast_to(x.numpy(), shape))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        return grad

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        return g


class Tile(Function):
    """``y = x`` repeated ``reps[d]`` times along each dim ``d``; ``dx = Σ`` of ``g`` over the
    copies (``g`` reshaped to ``(r₀, n₀, r₁, n₁, …)`` and summed over the ``r`` dims)."""

    keeps_inputs = False

    @staticmethod
    def forward(ctx: Context, x: Tensor, reps: tuple[int, ...]) -> Tensor:
        array = x.numpy()
        ctx.in_shape, ctx.reps = array.shape, reps
        return from_numpy(np.tile(array, reps))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        shape, reps = ctx.in_shape, ctx.reps
        split = tuple(n for pair in zip(reps, shape) for n in pair)  # (r0, n0, r1, n1, ...)
        return Reshape.apply(grad, shape=split).sum(dim=tuple(range(0, 2 * len(shape), 2)))

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        return f"sum_copies({g}, reps={tuple(node.reps)})"


class Flip(Function):
    """``y = x`` reversed along ``axes`` (``y[…, i, …] = x[…, n − 1 − i, …]``), in new memory;
    ``dx = g`` reversed along the same axes (a reversal is its own inverse)."""

    keeps_inputs = False

    @staticmethod
    def forward(ctx: Context, x: Tensor, *, axes: tuple[int, ...]) -> Tensor:
        return from_numpy(np.flip(x.numpy(), axes).copy())

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        return Flip.apply(grad, axes=ctx.kwargs["axes"])

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        return f"flip({g}, {tuple(node.kwargs['axes'])})"


class Roll(Function):
    """``y = x`` shifted cyclically by ``shifts`` along ``axes`` (``y[…, (i + s) mod n, …] =
    x[…, i, …]``), in new memory; ``dx = g`` rolled back by ``−shifts``."""

    keeps_inputs = False

    @staticmethod
    def forward(ctx: Context, x: Tensor, *, shifts: tuple[int, ...],
                axes: tuple[int, ...]) -> Tensor:
        return from_numpy(np.roll(x.numpy(), shifts, axes))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        return Roll.apply(grad, shifts=tuple(-s for s in ctx.kwargs["shifts"]),
                          axes=ctx.kwargs["axes"])

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        back = tuple(-s for s in node.kwargs["shifts"])
        return f"roll({g}, {back}, {tuple(node.kwargs['axes'])})"


class Copy(Function):
    """``y = x`` copied into new memory in C order; ``dx = g``."""

    keeps_inputs = False

    @staticmethod
    def forward(ctx: Context, x: Tensor) -> Tensor:
        return from_numpy(np.array(x.numpy(), order="C", copy=True))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        return grad

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        return g


def _plain_sizes(sizes: tuple) -> tuple[int, ...] | None:
    """``sizes`` given as ``f(2, 3)``, ``f((2, 3))`` or ``f([2, 3])`` when every size is a
    Python int (the common case: the caller checks the values); else None (the full check)."""
    if len(sizes) == 1 and type(sizes[0]) in (tuple, list):
        sizes = tuple(sizes[0])
    for n in sizes:
        if type(n) is not int:
            return None
    return sizes


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


def _target_shape(op: str, input: Tensor, shape: tuple) -> tuple[int, ...]:
    """The shape ``reshape``/``view`` make: plain non-negative ints holding ``input``'s
    elements are taken as they are; anything else (``-1``, numpy ints, errors) in full."""
    target = _plain_sizes(shape)
    if target is None or min(target, default=0) < 0 or math.prod(target) != input._data.size:
        target = _resolve_shape(op, input, shape_arg(op, shape))
    return target


def reshape(input: Tensor, *shape: int | Sequence[int]) -> Tensor:
    """``input`` with a new shape of the same number of elements; one dim may be ``-1``."""
    check_tensor("reshape", "input", input)
    target = _target_shape("reshape", input, shape)
    if target == input._data.shape:
        return input
    return Reshape.apply(input, shape=target)


def view(input: Tensor, *shape: Any) -> Tensor:
    """``reshape`` that never copies: a non-contiguous layout that cannot be viewed is an error
    (as ``torch.Tensor.view``); ``view(dtype)`` is not supported."""
    if len(shape) == 1 and not isinstance(shape[0], (int, np.integer, tuple, list)) and \
            not hasattr(shape[0], "ndim"):
        raise TypeError(f"view: expected a shape, got {shape[0]!r} (view(dtype) is not "
                        "supported; use .to(dtype))")
    check_tensor("view", "input", input)
    target = _target_shape("view", input, shape)
    array = input.numpy()
    if not array.flags.c_contiguous:  # a C-contiguous array can take any shape
        probe = array.view()
        try:
            probe.shape = target
        except AttributeError:
            raise ShapeError(
                f"view: size {list(target)} is not compatible with the input's size and "
                f"strides (shape {input.shape}, not contiguous); use .reshape(...) instead"
            ) from None
    return input if target == array.shape else Reshape.apply(input, shape=target)


def permute(input: Tensor, *dims: int | Sequence[int]) -> Tensor:
    """``input`` with its axes in the order ``dims``."""
    n = input.ndim
    order = _plain_sizes(dims)
    if order is not None and len(order) == n and n and all(-n <= d < n for d in order):
        axes = tuple([d % n for d in order])
        if len(set(axes)) == n:
            return input if axes == tuple(range(n)) else Permute.apply(input, dims=axes)
    order = shape_arg("permute", dims, required=True)
    if len(order) != n:
        raise ShapeError(f"permute: got {len(order)} dims {order} for a tensor of "
                         f"{n} dims {input.shape}")
    axes = tuple(normalize_dim("permute", d, n) for d in order) if n else ()
    if sorted(axes) != list(range(n)):
        raise ShapeError(f"permute: dims {order} are not a permutation of {n} axes")
    return input if axes == tuple(range(n)) else Permute.apply(input, dims=axes)


def transpose(input: Tensor, dim0: int, dim1: int) -> Tensor:
    """``input`` with axes ``dim0`` and ``dim1`` swapped."""
    n = input.ndim
    if type(dim0) is int and type(dim1) is int and -n <= dim0 < n and -n <= dim1 < n:
        a, b = dim0 % n, dim1 % n
    else:
        a = normalize_dim("transpose", dim0, n)
        b = normalize_dim("transpose", dim1, n)
    if a == b or n < 2:
        return input
    order = list(range(n))
    order[a], order[b] = order[b], order[a]
    return Permute.apply(input, dims=tuple(order))


def t(input: Tensor) -> Tensor:
    """The transpose of a matrix, as ``torch.t``: dims 0 and 1 of a 2-D tensor swapped (a
    view), a 0-D or 1-D tensor as it is."""
    check_tensor("t", "input", input)
    if input.ndim > 2:
        raise ShapeError(f"t: expects a tensor of at most 2 dims, got shape {input.shape}; "
                         "use transpose(dim0, dim1) or .mT")
    return transpose(input, 0, 1) if input.ndim == 2 else input


def movedim(input: Tensor, source: int, destination: int) -> Tensor:
    """``input`` with dim ``source`` moved to position ``destination``."""
    order = list(range(input.ndim))
    order.insert(normalize_dim("movedim", destination, input.ndim),
                 order.pop(normalize_dim("movedim", source, input.ndim)))
    return permute(input, order)


def unsqueeze(input: Tensor, dim: int) -> Tensor:
    """``input`` with a new axis of size 1 inserted at ``dim``."""
    shape = input.shape
    n = len(shape)
    if type(dim) is int and -n - 1 <= dim <= n:
        axis = dim % (n + 1)
    else:
        axis = normalize_dim("unsqueeze", dim, n, extra=1)
    return Reshape.apply(input, shape=shape[:axis] + (1,) + shape[axis:])


def squeeze(input: Tensor, dim: int | Sequence[int] | None = None) -> Tensor:
    """``input`` without axes of size 1 (only those among ``dim``, when given, as PyTorch)."""
    shape = input.shape
    n = len(shape)
    if type(dim) is int and -n <= dim < n:
        axis = dim % n
        if shape[axis] != 1:
            return input
        return Reshape.apply(input, shape=shape[:axis] + shape[axis + 1:])
    if dim is None:
        axes = {i for i, size in enumerate(shape) if size == 1}
    else:
        dims = dim if isinstance(dim, (tuple, list)) else (dim,)
        axes = {normalize_dim("squeeze", d, n) for d in dims}
        axes = {a for a in axes if a < n and shape[a] == 1}
    squeezed = tuple(size for i, size in enumerate(shape) if i not in axes)
    return input if squeezed == shape else Reshape.apply(input, shape=squeezed)


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
    target = _plain_sizes(sizes) if sizes else None
    if target is None:
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
        if n < 0:
            raise ShapeError(f"expand: invalid size {n} for dim {i} (sizes must be >= 0, or "
                             "-1 to keep a dim)")
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
    """Split along ``dim`` into pieces of a size (the last may be smaller) or of given sizes:
    views of ``input``, the outputs of one op (:class:`~tinyattn.ops.index.Split`)."""
    from .index import Split

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
    return Split.apply(input, sizes=tuple(sizes), dim=axis)


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


def roll(input: Tensor, shifts: int | Sequence[int],
         dims: int | Sequence[int] | None = None) -> Tensor:
    """``input`` shifted cyclically by ``shifts`` along ``dims`` (one shift per dim; a dim named
    twice is shifted by the sum), in new memory, as ``torch.roll`` (:class:`Roll`). Without
    ``dims`` the flattened tensor is shifted by one ``shifts`` and given its shape back."""
    check_tensor("roll", "input", input)
    steps = tuple(shifts) if isinstance(shifts, (tuple, list)) else (shifts,)
    steps = tuple(check_int("roll", "shifts", s) for s in steps)
    if dims is None:
        if len(steps) != 1:
            raise ShapeError(f"roll: without dims, shifts must be one int, got {shifts}")
        flat = input.reshape(-1)
        return Roll.apply(flat, shifts=steps, axes=(0,)).reshape(input.shape)
    listed = tuple(dims) if isinstance(dims, (tuple, list)) else (dims,)
    if len(listed) != len(steps):
        raise ShapeError(f"roll: shifts and dims must have the same length, got shifts "
                         f"{shifts} and dims {dims}")
    if input.ndim == 0:
        raise IndexError("roll: a 0-d tensor has no dims to roll along; leave dims=None")
    axes = tuple(normalize_dim("roll", d, input.ndim) for d in listed)
    return Roll.apply(input, shifts=steps, axes=axes)


def flip(input: Tensor, dims: int | Sequence[int]) -> Tensor:
    """``input`` reversed along ``dims`` (an int or a sequence of them), in new memory, as
    ``torch.flip`` (:class:`Flip`)."""
    check_tensor("flip", "input", input)
    listed = dims if isinstance(dims, (tuple, list)) else (dims,)
    axes = tuple(sorted({normalize_dim("flip", d, input.ndim) for d in listed}))
    if len(axes) != len(listed):
        raise ShapeError(f"flip: dims {dims} name the same axis twice")
    return Flip.apply(input, axes=axes if input.ndim else ())  # a 0-d tensor's dim 0 is itself

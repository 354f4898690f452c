"""Reductions over one or more dims: sum, mean, var/std, amax/amin, max/min, argmax/argmin.

``dim`` may be an int, a tuple of ints or None (all dims), and ``keepdim`` keeps the reduced
axes with size 1, as in PyTorch. Gradients of a reduction are copied back along the reduced
axes; a maximum shares its gradient equally among ties (``amax``, ``max()``), except
``max(dim)``, which sends it to the index it returned, as PyTorch does.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from .. import dtypes
from ..autograd import Context, Function
from ..errors import DTypeError, ShapeError
from ..tensor import Tensor, check_tensor
from ..validation import normalize_dim, normalize_dims

Dims = int | Sequence[int] | None


def _expand_back(grad: Any, shape: tuple[int, ...], axes: tuple[int, ...], keepdim: bool) -> Any:
    """Re-insert the reduced axes (when dropped) and broadcast ``grad`` to the input's shape."""
    if not isinstance(grad, Tensor):
        if not keepdim:
            grad = np.expand_dims(grad, axes)
        return np.broadcast_to(grad, shape)
    if not keepdim:
        kept = tuple(1 if i in axes else n for i, n in enumerate(shape))
        grad = grad.reshape(kept)
    return grad.expand(shape)


class Sum(Function):
    """``y = Σ_axes x``; ``dx = g`` copied along the summed axes."""

    keeps_inputs = False

    @staticmethod
    def forward(ctx: Context, x: np.ndarray, axes: tuple[int, ...], keepdim: bool,
                dtype: np.dtype) -> np.ndarray:
        ctx.save_for_backward(x.shape, axes, keepdim)
        return np.asarray(x.sum(axis=axes, keepdims=keepdim, dtype=dtype))

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any]:
        shape, axes, keepdim = ctx.saved
        return (_expand_back(grad, shape, axes, keepdim),)

    differentiable_backward = backward


class Mean(Function):
    """``y = Σ_axes x / N``; ``dx = g / N`` copied along the reduced axes."""

    keeps_inputs = False

    @staticmethod
    def forward(ctx: Context, x: np.ndarray, axes: tuple[int, ...], keepdim: bool) -> np.ndarray:
        count = int(np.prod([x.shape[a] for a in axes]))
        ctx.save_for_backward(x.shape, axes, keepdim, count)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.asarray(x.sum(axis=axes, keepdims=keepdim) / x.dtype.type(count)
                              if count else np.full(_reduced_shape(x.shape, axes, keepdim),
                                                    np.nan, x.dtype))

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any]:
        shape, axes, keepdim, count = ctx.saved
        return (_expand_back(grad / (count or 1), shape, axes, keepdim),)

    differentiable_backward = backward


class Var(Function):
    """``y = Σ (x − x̄)² / (N − correction)``; ``dx = g · 2 (x − x̄) / (N − correction)``."""

    @staticmethod
    def forward(ctx: Context, x: np.ndarray, axes: tuple[int, ...], keepdim: bool,
                correction: float) -> np.ndarray:
        count = int(np.prod([x.shape[a] for a in axes]))
        dof = builtins.max(count - correction, 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            centered = x - x.mean(axis=axes, keepdims=True)
            y = (centered * centered).sum(axis=axes, keepdims=keepdim) / x.dtype.type(dof)
        ctx.save_for_backward(x, centered, dof, axes, keepdim)
        return np.asarray(y, dtype=x.dtype)

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray]:
        _, centered, dof, axes, keepdim = ctx.saved
        if not keepdim:
            grad = np.expand_dims(grad, axes)
        with np.errstate(divide="ignore", invalid="ignore"):
            return (grad * 2 * centered / grad.dtype.type(dof),)

    @staticmethod
    def differentiable_backward(ctx: Context, grad: Tensor) -> tuple[Tensor]:
        (x,) = ctx.inputs
        _, _, dof, axes, keepdim = ctx.saved
        centered = x - x.mean(dim=axes, keepdim=True)
        return (_expand_back(grad, x.shape, axes, keepdim) * 2 * centered / dof,)


class Extremum(Function):
    """``y = max_axes x`` (or min); ``dx = g / ties`` at every extremum, 0 elsewhere.

    A NaN is the extremum of its row (its value is NaN). ``max()``/``min()`` send the gradient
    to the NaN positions; ``amax``/``amin`` compare values, find no tie for a NaN and give the
    row a NaN gradient — both as PyTorch does.
    """

    @staticmethod
    def forward(ctx: Context, x: np.ndarray, axes: tuple[int, ...], keepdim: bool,
                largest: bool, nan_hits: bool) -> np.ndarray:
        reduce = np.max if largest else np.min
        y = np.asarray(reduce(x, axis=axes, keepdims=True))
        hit = x == y
        if nan_hits:
            hit |= np.isnan(x) & np.isnan(y)
        ctx.save_for_backward(hit, hit.sum(axis=axes, keepdims=True), axes, keepdim)
        return y if keepdim else np.squeeze(y, axis=axes)

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray]:
        hit, ties, axes, keepdim = ctx.saved
        if not keepdim:
            grad = np.expand_dims(grad, axes)
        with np.errstate(divide="ignore", invalid="ignore"):
            shared = np.where(ties == 0, np.nan, grad / ties).astype(grad.dtype, copy=False)
        return (np.where(hit | (ties == 0), shared, np.zeros((), grad.dtype)),)

    @staticmethod
    def differentiable_backward(ctx: Context, grad: Tensor) -> tuple[Tensor]:
        from .masking import where

        hit, ties, axes, keepdim = ctx.saved
        if not keepdim:
            grad = grad.reshape(ties.shape)
        return (where(Tensor(hit), grad / Tensor(ties.astype(grad.dtype)), 0.0),)


class MinMaxResult(NamedTuple):
    """``x.max(dim)`` returns the values and their indices, as ``torch.max`` does."""

    values: Tensor
    indices: Tensor


def _reduced_shape(shape: tuple[int, ...], axes: tuple[int, ...], keepdim: bool) -> tuple:
    if keepdim:
        return tuple(1 if i in axes else n for i, n in enumerate(shape))
    return tuple(n for i, n in enumerate(shape) if i not in axes)


def _nonempty(op: str, x: Tensor, axes: tuple[int, ...]) -> None:
    if any(x.shape[a] == 0 for a in axes) or (x.numel() == 0 and not axes):
        raise ShapeError(f"{op}: cannot reduce an empty dimension of a tensor of shape "
                         f"{x.shape} (the operation has no identity)")


def sum(input: Tensor, dim: Dims = None, keepdim: bool = False, dtype: Any = None) -> Tensor:
    """Sum over ``dim`` (all dims when None); bool and integer tensors sum in int64."""
    check_tensor("sum", "input", input)
    axes = normalize_dims("sum", dim, input.ndim)
    if dtype is not None:
        out_dtype = dtypes.as_dtype(dtype, "sum")
    else:
        out_dtype = input.dtype if input.dtype.kind == "f" else dtypes.int64
    if out_dtype.kind == "f" and input.dtype != out_dtype:
        input = input.to(out_dtype)
    return Sum.apply(input, axes=axes, keepdim=bool(keepdim), dtype=out_dtype)


def mean(input: Tensor, dim: Dims = None, keepdim: bool = False, dtype: Any = None) -> Tensor:
    """Mean over ``dim`` (all dims when None); only for floating point tensors, as PyTorch."""
    check_tensor("mean", "input", input)
    if dtype is not None:
        input = input.to(dtype)
    if input.dtype.kind != "f":
        raise DTypeError(f"mean: could not infer the output dtype: the input must be a "
                           f"floating point tensor, got {input.dtype} (use .float() first)")
    return Mean.apply(input, axes=normalize_dims("mean", dim, input.ndim), keepdim=bool(keepdim))


def var(input: Tensor, dim: Dims = None, unbiased: bool | None = None, keepdim: bool = False,
        *, correction: float | None = None) -> Tensor:
    """Variance over ``dim``: ``Σ (x − mean)² / (N − correction)``.

    ``correction=1`` (the default, Bessel's correction) is ``unbiased=True``; ``unbiased=False``
    or ``correction=0`` divides by ``N``, as LayerNorm does.

    Examples
    --------
    >>> import tinyattn as ta
    >>> x = ta.tensor([1.0, 2.0, 3.0, 4.0])
    >>> x.var().item(), x.var(unbiased=False).item(), x.var(correction=0).item()
    (1.6666666269302368, 1.25, 1.25)
    """
    check_tensor("var", "input", input)
    if isinstance(dim, bool) and unbiased is None:  # the legacy var(unbiased) form
        dim, unbiased = None, dim
    if unbiased is not None and correction is not None:
        raise ValueError("var: pass either unbiased or correction, not both")
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    if input.dtype.kind != "f":
        raise DTypeError(f"var: the input must be a floating point tensor, got {input.dtype}")
    return Var.apply(input, axes=normalize_dims("var", dim, input.ndim), keepdim=bool(keepdim),
                     correction=float(correction))


def std(input: Tensor, dim: Dims = None, unbiased: bool | None = None, keepdim: bool = False,
        *, correction: float | None = None) -> Tensor:
    """Standard deviation: ``sqrt(var(...))`` with the same arguments."""
    from .unary import sqrt

    return sqrt(var(input, dim, unbiased, keepdim, correction=correction))


def _extremum(op: str, input: Tensor, dim: Dims, keepdim: bool, largest: bool) -> Tensor:
    check_tensor(op, "input", input)
    axes = normalize_dims(op, dim, input.ndim)
    _nonempty(op, input, axes)
    return Extremum.apply(input, axes=axes, keepdim=bool(keepdim), largest=largest,
                          nan_hits=op in ("max", "min"))


def amax(input: Tensor, dim: Dims = (), keepdim: bool = False) -> Tensor:
    """Maximum over ``dim`` (all dims for ``()``); ties share the gradient equally."""
    return _extremum("amax", input, dim, keepdim, True)


def amin(input: Tensor, dim: Dims = (), keepdim: bool = False) -> Tensor:
    """Minimum over ``dim`` (all dims for ``()``); ties share the gradient equally."""
    return _extremum("amin", input, dim, keepdim, False)


def _arg_extremum(op: str, input: Tensor, dim: int | None, keepdim: bool,
                  largest: bool) -> np.ndarray:
    check_tensor(op, "input", input)
    if input.dtype.kind == "b" and op.startswith("arg"):
        raise DTypeError(f"{op}: bool inputs are not supported")
    find = np.argmax if largest else np.argmin
    if dim is None:
        _nonempty(op, input, tuple(range(input.ndim)))
        flat = np.asarray(find(input.numpy()), dtype=np.int64)
        return flat.reshape((1,) * input.ndim) if keepdim else flat
    axis = normalize_dim(op, dim, input.ndim)
    if input.ndim == 0:
        return np.zeros((), np.int64)
    _nonempty(op, input, (axis,))
    data = input.numpy()
    if data.dtype.kind == "f" and np.isnan(data).any():  # PyTorch: a NaN is the extremum
        data = np.where(np.isnan(data), np.inf if largest else -np.inf, data)
    return find(data, axis=axis, keepdims=keepdim).astype(np.int64)


def argmax(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """Indices of the maxima (of the flattened tensor when ``dim`` is None); no gradient."""
    return Tensor(_arg_extremum("argmax", input, dim, keepdim, True))


def argmin(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """Indices of the minima (of the flattened tensor when ``dim`` is None); no gradient."""
    return Tensor(_arg_extremum("argmin", input, dim, keepdim, False))


def _max_or_min(op: str, input: Tensor, dim: Any, keepdim: bool, largest: bool) -> Any:
    if isinstance(dim, Tensor):  # torch.max(a, b): the elementwise maximum
        from .compare import maximum, minimum

        return (maximum if largest else minimum)(input, dim)
    if dim is None:
        return _extremum(op, input, None, False, largest)
    from .index import gather

    indices = _arg_extremum(op, input, dim, True, largest)
    axis = normalize_dim(op, dim, input.ndim)
    if input.ndim == 0:
        return MinMaxResult(input, Tensor(indices))
    values = gather(input, axis, Tensor(indices))
    if not keepdim:
        values, indices = values.squeeze(axis), np.squeeze(indices, axis)
    return MinMaxResult(values, Tensor(indices))


def max(input: Tensor, dim: Any = None, keepdim: bool = False) -> Any:
    """``max()``: the largest element (ties share the gradient); ``max(dim)``: the named tuple
    ``(values, indices)`` along ``dim`` (the gradient goes to the returned index);
    ``max(other)``: the elementwise maximum. As ``torch.max``."""
    return _max_or_min("max", input, dim, keepdim, True)


def min(input: Tensor, dim: Any = None, keepdim: bool = False) -> Any:
    """The counterpart of :func:`max` for minima."""
    return _max_or_min("min", input, dim, keepdim, False)


def logsumexp(input: Tensor, dim: Dims, keepdim: bool = False) -> Tensor:
    """``log Σ_dim e^x`` computed without overflow (as ``max + log Σ e^(x − max)``)."""
    from .operands import floating
    from .unary import exp, log

    input = floating("logsumexp", input)
    if input.numel() == 0 or any(input.shape[a] == 0 for a in
                                 normalize_dims("logsumexp", dim, input.ndim)):
        return log(sum(exp(input), dim, keepdim))  # an empty sum: log 0 = −inf
    shift = amax(input, dim, keepdim=True).detach()
    shift = Tensor(np.where(np.isfinite(shift.numpy()), shift.numpy(), 0).astype(shift.dtype))
    total = sum(exp(input - shift), dim, keepdim=True)
    out = log(total) + shift
    return out if keepdim else out.squeeze(normalize_dims("logsumexp", dim, input.ndim))


def bincount(input: Tensor, weights: Tensor | None = None, minlength: int = 0) -> Tensor:
    """How often each value ``0 … max(input)`` occurs in a 1-D non-negative integer tensor
    (summing ``weights`` instead of counting when given), as ``torch.bincount``."""
    check_tensor("bincount", "input", input)
    if input.ndim != 1 or input.dtype.kind not in "iu" or (input.numel() and
                                                           input.numpy().min() < 0):
        raise DTypeError(f"bincount: expected a 1-D tensor of non-negative integers, got "
                         f"dtype {input.dtype} and shape {input.shape}")
    counts = np.bincount(input.numpy(), None if weights is None else weights.numpy(),
                         minlength=minlength)
    return Tensor(counts if weights is not None else counts.astype(np.int64))


class CumSum(Function):
    """``y_i = Σ_{j ≤ i} x_j`` along ``dim``; ``dx_j = Σ_{i ≥ j} g_i`` (a reversed cumsum)."""

    keeps_inputs = False

    @staticmethod
    def forward(ctx: Context, x: np.ndarray, dim: int) -> np.ndarray:
        ctx.save_for_backward(dim)
        return np.cumsum(x, axis=dim, dtype=x.dtype if x.dtype.kind == "f" else np.int64)

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray]:
        (dim,) = ctx.saved
        return (np.flip(np.cumsum(np.flip(grad, dim), axis=dim), dim),)

    @staticmethod
    def differentiable_backward(ctx: Context, grad: Tensor) -> tuple[Tensor]:
        (dim,) = ctx.saved
        return (cumsum(grad.flip(dim), dim).flip(dim),)


def cumsum(input: Tensor, dim: int, dtype: Any = None) -> Tensor:
    """Running sums along ``dim`` (bool and integers sum in int64), as ``torch.cumsum``."""
    check_tensor("cumsum", "input", input)
    if dtype is not None:
        input = input.to(dtype)
    axis = normalize_dim("cumsum", dim, input.ndim)
    if input.ndim == 0:
        return input
    return CumSum.apply(input, dim=axis)

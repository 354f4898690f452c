"""Reductions over one or more dims: sum, mean, var/std, prod, amax/amin, max/min,
argmax/argmin, logsumexp, cumsum, cumprod and the vector and matrix norms.

``dim`` may be an int, a tuple of ints or None (all dims), and ``keepdim`` keeps the reduced
axes with size 1, as in PyTorch. Gradients of a reduction are copied back along the reduced
axes; a maximum shares its gradient equally among ties (``amax``, ``max()``), except
``max(dim)``, which sends it to the index it returned, as PyTorch does.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from .. import dtypes
from ..autograd import Context, Function, is_grad_enabled
from ..errors import DTypeError, ShapeError
from ..kernels import FLOAT_DTYPES
from ..kernels.cumsum import cumsum_rows
from ..kernels.row_sums import row_sums
from ..tensor import Tensor, check_tensor, from_numpy
from ..validation import is_int, is_number, normalize_dim, normalize_dims
from . import unary
from .masking import masked_fill, where
from .notation import operand

Dims = int | Sequence[int] | None


def _kept_shape(shape: tuple[int, ...], axes: tuple[int, ...]) -> tuple[int, ...]:
    """``shape`` with the reduced ``axes`` kept as size 1."""
    return tuple(1 if i in axes else n for i, n in enumerate(shape))


def _with_kept_axes(grad: Tensor, shape: tuple[int, ...], axes: tuple[int, ...],
                    keepdim: bool) -> Tensor:
    """``grad`` of a reduction with its reduced axes back as size 1 (when they were dropped)."""
    return grad if keepdim else grad.reshape(_kept_shape(shape, axes))


def _expand_back(grad: Tensor, shape: tuple[int, ...], axes: tuple[int, ...],
                 keepdim: bool) -> Tensor:
    """Re-insert the reduced axes (when dropped) and broadcast ``grad`` to the input's shape."""
    if not keepdim and axes != tuple(range(len(axes))):  # leading axes: expand adds them
        grad = grad.reshape(_kept_shape(shape, axes))
    return grad.expand(shape)


def _normal_axes(dim: Any, ndim: int) -> tuple[int, ...] | None:
    """``dim`` as axes when it is already normal (None, an int in range, or a strictly
    increasing tuple of non-negative ints in range), else None: the common arguments skip the
    general checks."""
    if dim is None:
        return tuple(range(ndim))
    if type(dim) is int:
        return (dim % ndim,) if -ndim <= dim < ndim else None
    if type(dim) is tuple and dim:
        previous = -1
        for d in dim:
            if type(d) is not int or d <= previous:
                return None
            previous = d
        return dim if previous < ndim else None
    return None


def _reduced_count(shape: tuple[int, ...], axes: tuple[int, ...]) -> int:
    count = 1
    for a in axes:
        count *= shape[a]
    return count


def _trailing_sums(array: np.ndarray, axes: tuple[int, ...], keepdim: bool,
                   divisor: float = 1.0, terms: str = "values") -> np.ndarray | None:
    """``Σ t(x) / divisor`` of ``array`` over ``axes`` through the row-sum kernel (``t`` the
    values, their squares or their deviations from the mean, as ``terms`` says), when ``axes``
    are its last dims (``sum(-1)``, ``mean()``) and it is a non-empty C-contiguous float32 or
    float64 array; else None."""
    ndim = array.ndim
    if (array.dtype not in FLOAT_DTYPES or not array.size or not axes
            or axes != tuple(range(ndim - len(axes), ndim)) or not array.flags.c_contiguous):
        return None
    count = _reduced_count(array.shape, axes)
    sums = row_sums(array.reshape(-1, count), divisor, terms)
    return sums.reshape(_reduced_shape(array.shape, axes, keepdim))


class Sum(Function):
    """``y = Σ_axes x``; ``dx = g`` copied along the summed axes."""

    keeps_inputs = False

    @staticmethod
    def forward(ctx: Context, x: Tensor, *, axes: tuple[int, ...], keepdim: bool,
                dtype: np.dtype | None) -> Tensor:
        array = x.numpy()
        if dtype is None or dtype == array.dtype:
            sums = _trailing_sums(array, axes, keepdim)
            if sums is not None:
                return from_numpy(sums)
        return from_numpy(np.asarray(array.sum(axis=axes, keepdims=keepdim, dtype=dtype)))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        options = ctx.kwargs
        return _expand_back(grad, ctx.inputs[0].shape, options["axes"], options["keepdim"])

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        return f"broadcast({g})"


class Mean(Function):
    """``y = Σ_axes x / N``; ``dx = g / N`` copied along the reduced axes."""

    keeps_inputs = False

    @staticmethod
    def forward(ctx: Context, x: Tensor, *, axes: tuple[int, ...], keepdim: bool) -> Tensor:
        array = x.numpy()
        count = _reduced_count(array.shape, axes)
        if not count:  # the mean of nothing is NaN, as in PyTorch
            return from_numpy(np.full(_reduced_shape(array.shape, axes, keepdim), np.nan,
                                      array.dtype))
        means = _trailing_sums(array, axes, keepdim, divisor=count)
        if means is not None:
            return from_numpy(means)
        total = array.sum(axis=axes, keepdims=keepdim)
        return from_numpy(np.asarray(total / array.dtype.type(count)))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        shape, axes = ctx.inputs[0].shape, ctx.kwargs["axes"]
        count = _reduced_count(shape, axes)
        if count > 1:
            grad = grad / count
        return _expand_back(grad, shape, axes, ctx.kwargs["keepdim"])

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        return f"broadcast({g}) / n"


class Var(Function):
    """``y = Σ_axes (x − x̄)² / (N − c)``; ``dx = 2 g ⊙ (x − x̄) / (N − c)`` (``c`` the
    correction)."""

    @staticmethod
    def forward(ctx: Context, x: Tensor, *, axes: tuple[int, ...], keepdim: bool,
                correction: float) -> Tensor:
        array = x.numpy()
        dof = builtins.max(_reduced_count(array.shape, axes) - correction, 0)
        ctx.save_for_backward(x)
        y = _trailing_sums(array, axes, keepdim, divisor=dof, terms="deviations")
        if y is not None:
            return from_numpy(y)
        with np.errstate(divide="ignore", invalid="ignore"):
            centered = array - array.mean(axis=axes, keepdims=True)
            y = (centered * centered).sum(axis=axes, keepdims=keepdim) / array.dtype.type(dof)
        return from_numpy(np.asarray(y, dtype=array.dtype))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        axes, keepdim = ctx.kwargs["axes"], ctx.kwargs["keepdim"]
        divisor = _reduced_count(x.shape, axes) - ctx.kwargs["correction"]
        scale = 2.0 / divisor if divisor else math.inf  # 0 dof: inf · 0 = NaN, as PyTorch
        centered = x - x.mean(dim=axes, keepdim=True)
        return scale * _with_kept_axes(grad, x.shape, axes, keepdim) * centered

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        return f"2 · broadcast({g}) ⊙ ({x[0]} − mean({x[0]})) / (n − c)"


class Prod(Function):
    """``y = Π_axes x``; ``dx_i = g ⊙ Π_{j≠i} x_j``: ``g ⊙ y / x`` where the slice has no
    zero; at a slice's only zero the product of the others, 0 elsewhere in that slice; all 0
    in a slice with two zeros (PyTorch's gradient)."""

    @staticmethod
    def forward(ctx: Context, x: Tensor, *, axes: tuple[int, ...], keepdim: bool,
                dtype: np.dtype | None) -> Tensor:
        with np.errstate(over="ignore", invalid="ignore"):  # inf · 0 is NaN, as in PyTorch
            y = np.prod(x.numpy(), axis=axes, keepdims=keepdim, dtype=dtype)
        y = from_numpy(np.asarray(y))
        ctx.save_for_backward(x, y)
        return y

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        x, y = ctx.saved_tensors
        axes, keepdim = ctx.kwargs["axes"], ctx.kwargs["keepdim"]
        if not axes:  # nothing reduced: y = x
            return grad
        grad = _with_kept_axes(grad, x.shape, axes, keepdim)
        y = _with_kept_axes(y, x.shape, axes, keepdim)
        zero = x == 0
        if not zero.numpy().any():
            return grad * (y / x)
        zeros = zero.sum(dim=axes, keepdim=True)
        if not is_grad_enabled():
            # Fast path (first order only): the product of a slice's non-zero elements goes to
            # its only zero. Its derivative is not the second derivative of prod at a zero, so
            # a recorded backward takes the rule below.
            nonzero_product = _prod_over(where(zero, 1.0, x), axes, keepdim=True)
            others = where(zeros == 0, y / x, where(zero & (zeros == 1), nonzero_product, 0.0))
            return grad * others
        if zeros.numpy().max() <= 1:
            # At most one zero per slice: x = v ⊙ w with v the slice with its zero replaced by
            # 1 and w that zero alone (1 elsewhere), so Π_{j≠i} x_j = (Π v / v_i) · Π_{j≠i} w_j
            # exactly, with no division by a zero (Π_{j≠i} w_j is 1 at the zero, Π w elsewhere).
            v, w = where(zero, 1.0, x), where(zero, x, 1.0)
            nonzero_others = _prod_over(v, axes, keepdim=True) / v
            return grad * nonzero_others * where(zero, 1.0, _prod_over(w, axes, keepdim=True))
        return grad * _products_of_others(x, axes)

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        return f"broadcast({g}) ⊙ Π_(j≠i) {operand(x[0])}ⱼ"


def _products_of_others(x: Tensor, axes: tuple[int, ...]) -> Tensor:
    """``Π_{j≠i} x_j`` over the reduced ``axes`` for every element ``i``, as a polynomial in
    ``x`` (no division), so that it is differentiable at zeros: each slice of ``n`` elements
    becomes ``n`` rows, row ``i`` the slice with ``x_i`` replaced by 1, and each row is
    multiplied out (``O(n²)`` memory: only a recorded backward of a slice with two zeros or
    more takes it, as PyTorch's double backward of ``cumprod`` does)."""
    kept = [i for i in range(x.ndim) if i not in axes]
    order = kept + list(axes)
    moved = x.permute(order) if order != list(range(x.ndim)) else x
    n = _reduced_count(x.shape, axes)
    rows = moved.reshape(*[x.shape[i] for i in kept], 1, n)
    others = _prod_over(where(Tensor(np.eye(n, dtype=bool)), 1.0, rows), (rows.ndim - 1,))
    others = others.reshape(moved.shape)
    return others.permute(np.argsort(order).tolist()) if moved is not x else others


def _prod_over(input: Tensor, axes: tuple[int, ...], keepdim: bool = False) -> Tensor:
    """The product of a float tensor over normalised ``axes`` (the op behind :func:`prod`)."""
    return Prod.apply(input, axes=axes, keepdim=keepdim, dtype=None)


class Extremum(Function):
    """``y = max_axes x`` (or min); ``dx = g / ties`` at every extremum, 0 elsewhere.

    A NaN is the extremum of its row (its value is NaN). ``max()``/``min()`` send the gradient
    to the NaN positions; ``amax``/``amin`` compare values, find no tie for a NaN and give the
    row a NaN gradient — both as PyTorch does. As in PyTorch, ``max()``/``min()`` select the
    gradient of the extrema, while ``amax``/``amin`` multiply it by their 0/1 mask (so a NaN
    gradient arriving at a row is NaN for all of it).
    """

    @staticmethod
    def forward(ctx: Context, x: Tensor, *, axes: tuple[int, ...], keepdim: bool, largest: bool,
                nan_hits: bool) -> Tensor:
        array = x.numpy()
        y = np.asarray((np.max if largest else np.min)(array, axis=axes, keepdims=True))
        if ctx.needs_input_grad[0]:
            hit = array == y
            if nan_hits:
                hit |= np.isnan(array) & np.isnan(y)
            ties = hit.sum(axis=axes, keepdims=True)
            none = ties == 0  # a NaN under amax: the whole row's gradient is NaN
            hit |= none
            ctx.save_for_backward(from_numpy(hit), from_numpy(
                np.where(none, np.nan, ties).astype(array.dtype)))
        return from_numpy(y if keepdim else np.squeeze(y, axis=axes))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        hit, ties = ctx.saved_tensors
        if not ctx.kwargs["keepdim"]:
            grad = grad.reshape(ties.shape)
        if ctx.kwargs["nan_hits"]:  # max()/min(): the extrema are selected, as in PyTorch
            return where(hit, grad / ties, 0.0)
        # amax/amin: a product with the 0/1 mask (PyTorch's rule), so that a NaN or infinite
        # gradient reaches the whole row (NaN · 0)
        return grad / ties * hit.to(ties.dtype)

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        return f"broadcast({g}) ⊙ [{x[0]} = {out}] / ties"


class LogSumExp(Function):
    """``y = log Σ_axes eˣ`` (as ``m + log Σ e^(x − m)``, ``m`` the maximum, so nothing
    overflows); ``dx = g ⊙ e^(x − y)`` (the softmax)."""

    @staticmethod
    def forward(ctx: Context, x: Tensor, *, axes: tuple[int, ...], keepdim: bool) -> Tensor:
        array = x.numpy()
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            if any(array.shape[a] == 0 for a in axes) or array.size == 0:
                y = np.log(np.exp(array).sum(axis=axes, keepdims=keepdim))  # log 0 = −inf
            else:
                shift = np.max(array, axis=axes, keepdims=True)
                shift = np.where(np.isfinite(shift), shift, np.zeros((), array.dtype))
                y = np.log(np.exp(array - shift).sum(axis=axes, keepdims=True)) + shift
                if not keepdim:
                    y = np.squeeze(y, axis=axes)
        out = from_numpy(np.asarray(y, dtype=array.dtype))
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        x, y = ctx.saved_tensors
        axes, keepdim = ctx.kwargs["axes"], ctx.kwargs["keepdim"]
        grad = _with_kept_axes(grad, x.shape, axes, keepdim)
        return grad * unary.exp(x - _with_kept_axes(y, x.shape, axes, keepdim))

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        return f"broadcast({g}) ⊙ e^({x[0]} − {out})"


class CumSum(Function):
    """``y_i = Σ_{j ≤ i} x_j`` along ``dim``; ``dx_j = Σ_{i ≥ j} g_i`` (a reversed cumsum)."""

    keeps_inputs = False

    @staticmethod
    def forward(ctx: Context, x: Tensor, *, dim: int) -> Tensor:
        array = x.numpy()
        if (dim == array.ndim - 1 and array.dtype in FLOAT_DTYPES
                and array.flags.c_contiguous and array.shape[-1]):
            return from_numpy(cumsum_rows(array.reshape(-1, array.shape[-1])).reshape(
                array.shape))
        return from_numpy(np.cumsum(array, axis=dim,
                                    dtype=array.dtype if array.dtype.kind == "f" else np.int64))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        return _reversed_cumsum(grad, ctx.kwargs["dim"])

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        return f"flip(cumsum(flip({g})))"


def _reversed_cumsum(t: Tensor, dim: int) -> Tensor:
    """``Σ_{i ≥ j} t_i`` along ``dim`` for every ``j``: the sums from each position to the end."""
    return cumsum(t.flip(dim), dim).flip(dim)


class CumProd(Function):
    """``y_i = Π_{j ≤ i} x_j`` along ``dim``; ``dx_j = Σ_{i ≥ j} g_i Π_{k ≤ i, k ≠ j} x_k``:
    ``Σ_{i ≥ j} g_i y_i / x_j`` (a reversed cumsum) where the row has no zero. In a row whose
    first zero is at ``z``, the same sum for ``j < z`` (every ``y_i`` from ``z`` on is 0), at
    ``z`` the reversed cumsum of ``g`` times the running products with ``x_z`` taken as 1,
    and 0 after ``z``: PyTorch's gradient."""

    @staticmethod
    def forward(ctx: Context, x: Tensor, *, dim: int) -> Tensor:
        array = x.numpy()
        with np.errstate(over="ignore", invalid="ignore"):  # inf · 0 is NaN, as in PyTorch
            if array.dtype.kind == "f":  # running products in float64, each rounded once
                y = np.cumprod(array, axis=dim, dtype=np.float64).astype(array.dtype)
            else:
                y = np.cumprod(array, axis=dim, dtype=np.int64)
        out = from_numpy(y)
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        x, y = ctx.saved_tensors
        dim = ctx.kwargs["dim"]
        zero = x.numpy() == 0
        if not zero.any():
            return _reversed_cumsum(grad * y, dim) / x
        if is_grad_enabled():
            # A recorded backward (a higher derivative is wanted): the polynomial form, whose
            # own derivative at a zero is right where the masks below would cut it off.
            return _cumprod_gradient_by_rows(x, grad, dim)
        zeros_so_far = np.cumsum(zero, axis=dim)
        before = Tensor(zeros_so_far == 0)  # the positions before the row's first zero
        first = Tensor(zero & (zeros_so_far == 1))
        before_first = where(before, _reversed_cumsum(grad * y, dim) / where(before, x, 1.0),
                             0.0)
        without_first = cumprod(where(first, 1.0, x), dim)  # x_z taken as 1
        return before_first + where(first, _reversed_cumsum(grad * without_first, dim), 0.0)

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        return f"flip(cumsum(flip({g} ⊙ {out}))) / {operand(x[0])}"


def _cumprod_gradient_by_rows(x: Tensor, grad: Tensor, dim: int) -> Tensor:
    """``dx_j = Σ_{i ≥ j} g_i Π_{k ≤ i, k ≠ j} x_k`` as a polynomial in ``x`` (no division),
    differentiable at zeros: each row of ``n`` elements becomes ``n`` rows, row ``j`` the row
    with ``x_j`` replaced by 1, whose running products are summed against ``g`` from ``j`` on
    (``O(n²)`` memory, taken only by a recorded backward of a row with a zero)."""
    x_last, g_last = x.movedim(dim, -1), grad.movedim(dim, -1)
    n = x_last.shape[-1]
    rows = where(Tensor(np.eye(n, dtype=bool)), 1.0, x_last.unsqueeze(-2))
    from_j_on = Tensor(np.triu(np.ones((n, n), dtype=bool)))  # [i ≥ j] at (j, i)
    weights = where(from_j_on, g_last.unsqueeze(-2), 0.0)
    return (cumprod(rows, -1) * weights).sum(-1).movedim(-1, dim)


class Norm(Function):
    """The vector ``p``-norm over ``axes``: ``y = (Σ |x|ᵖ)^(1/p)`` (``max |x|`` for ``p = ∞``,
    ``min |x|`` for ``−∞``, the count of non-zeros for 0); ``dx = g ⊙ sign(x) |x|^(p−1) /
    y^(p−1)`` (``g ⊙ x / y`` for ``p = 2``, 0 where ``y = 0``; ``g ⊙ sign(x)`` for 1; shared by
    the maxima for ``±∞``; none for ``p = 0``), PyTorch's subgradient."""

    @staticmethod
    def forward(ctx: Context, x: Tensor, *, ord: float, axes: tuple[int, ...],
                keepdim: bool) -> Tensor:
        array = x.numpy()
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            if ord == 2:
                squares = _trailing_sums(array, axes, keepdim, terms="squares")
                if squares is None:
                    squares = (array * array).sum(axis=axes, keepdims=keepdim)
                y = np.sqrt(squares)
            elif ord == 1:
                y = np.abs(array).sum(axis=axes, keepdims=keepdim)
            elif ord == 0:
                y = (array != 0).sum(axis=axes, keepdims=keepdim, dtype=array.dtype)
            elif math.isinf(ord):
                y = (np.max if ord > 0 else np.min)(np.abs(array), axis=axes, keepdims=keepdim)
            else:
                y = (np.abs(array) ** ord).sum(axis=axes, keepdims=keepdim) ** (1.0 / ord)
        out = from_numpy(np.asarray(y, dtype=array.dtype))
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor | None:
        x, y = ctx.saved_tensors
        p, axes, keepdim = ctx.kwargs["ord"], ctx.kwargs["axes"], ctx.kwargs["keepdim"]
        if p == 0:  # piecewise constant: no gradient at all, as in PyTorch
            return None
        grad = _with_kept_axes(grad, x.shape, axes, keepdim)
        if p == 1:
            return unary.sign(x) * grad
        y = _with_kept_axes(y, x.shape, axes, keepdim)
        if p == 2:
            return grad * masked_fill(x / y, y == 0, 0.0)
        if math.isinf(p):
            size = unary.abs(x)
            hit = (size == y) | size.isnan()
            return unary.sign(x) * where(hit, grad / hit.sum(dim=axes, keepdim=True), 0.0)
        if p < 1:
            scaled = unary.sign(x) * masked_fill(unary.abs(x) ** (p - 1), x == 0, 0.0)
            return scaled * grad * y ** (1 - p)
        size = unary.abs(x)
        scaled = unary.sign(x) * size ** (p - 1) if p < 2 else x * size ** (p - 2)
        return scaled * masked_fill(grad / y ** (p - 1), y == 0, 0.0)

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        p, name = node.kwargs["ord"], x[0]
        if p == 0:
            return "0"
        if p == 1:
            return f"broadcast({g}) ⊙ sign({name})"
        if p == 2:
            return f"broadcast({g}) ⊙ {operand(name)} / {out}"
        if math.isinf(p):
            return f"broadcast({g}) ⊙ sign({name}) ⊙ [|{name}| = {out}] / ties"
        return f"broadcast({g}) ⊙ sign({name}) ⊙ |{name}|^{p - 1:g} / {out}^{p - 1:g}"


class MinMaxResult(NamedTuple):
    """``x.max(dim)`` returns the values and their indices, as ``torch.max`` does."""

    values: Tensor
    indices: Tensor


def _reduced_shape(shape: tuple[int, ...], axes: tuple[int, ...], keepdim: bool) -> tuple:
    if keepdim:
        return _kept_shape(shape, axes)
    return tuple(n for i, n in enumerate(shape) if i not in axes)


def _nonempty(op: str, x: Tensor, axes: tuple[int, ...]) -> None:
    if any(x.shape[a] == 0 for a in axes) or (x.numel() == 0 and not axes):
        raise ShapeError(f"{op}: cannot reduce an empty dimension of a tensor of shape "
                         f"{x.shape} (the operation has no identity)")


def sum(input: Tensor, dim: Dims = None, keepdim: bool = False, dtype: Any = None) -> Tensor:
    """Sum over ``dim`` (all dims when None); bool and integer tensors sum in int64."""
    if dtype is None and type(input) is Tensor and input._data.dtype.kind == "f" and (
            keepdim is False or keepdim is True):
        axes = _normal_axes(dim, input._data.ndim)  # the common call: no further checks
        if axes is not None:
            return Sum.apply(input, axes=axes, keepdim=keepdim, dtype=None)
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
    if dtype is None and type(input) is Tensor and input._data.dtype.kind == "f" and (
            keepdim is False or keepdim is True):
        axes = _normal_axes(dim, input._data.ndim)  # the common call: no further checks
        if axes is not None:
            return Mean.apply(input, axes=axes, keepdim=keepdim)
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
    return unary.sqrt(var(input, dim, unbiased, keepdim, correction=correction))


def prod(input: Tensor, dim: int | None = None, keepdim: bool = False,
         dtype: Any = None) -> Tensor:
    """The product of all elements, or along ``dim`` (an int, as ``torch.prod``); bool and
    integer tensors multiply in int64 unless ``dtype`` says otherwise.

    The gradient is PyTorch's, also where the input has zeros: at a slice's only zero it is
    the product of the others; a slice with two zeros gets none.

    Examples
    --------
    >>> import tinyattn as ta
    >>> x = ta.tensor([[2.0, 0.0, 3.0], [1.0, 2.0, 3.0]], requires_grad=True)
    >>> x.prod(1).tolist()
    [0.0, 6.0]
    >>> x.prod(1).sum().backward()
    >>> x.grad.tolist()
    [[0.0, 6.0, 0.0], [6.0, 3.0, 2.0]]
    """
    check_tensor("prod", "input", input)
    if dim is None:
        axes = tuple(range(input.ndim))
    elif is_int(dim):
        axes = (normalize_dim("prod", dim, input.ndim),) if input.ndim else ()
    else:
        raise TypeError(f"prod: dim must be an int or None, got {dim!r} (torch.prod reduces "
                        "one dim at a time)")
    if dtype is not None:
        out_dtype = dtypes.as_dtype(dtype, "prod")
    else:
        out_dtype = input.dtype if input.dtype.kind == "f" else dtypes.int64
    if out_dtype.kind == "f" and input.dtype != out_dtype:
        input = input.to(out_dtype)
    return Prod.apply(input, axes=axes, keepdim=bool(keepdim), dtype=out_dtype)


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

    input = floating("logsumexp", input)
    return LogSumExp.apply(input, axes=normalize_dims("logsumexp", dim, input.ndim),
                           keepdim=bool(keepdim))


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


def cumsum(input: Tensor, dim: int, dtype: Any = None) -> Tensor:
    """Running sums along ``dim`` (bool and integers sum in int64), as ``torch.cumsum``
    (:class:`CumSum`)."""
    return _running("cumsum", CumSum, input, dim, dtype)


def cumprod(input: Tensor, dim: int, dtype: Any = None) -> Tensor:
    """Running products along ``dim`` (bool and integers multiply in int64), as
    ``torch.cumprod`` (:class:`CumProd`)."""
    return _running("cumprod", CumProd, input, dim, dtype)


def _running(op: str, function: type[Function], input: Tensor, dim: int,
             dtype: Any) -> Tensor:
    """``function`` (:class:`CumSum` or :class:`CumProd`) along ``dim`` of ``input`` converted
    to ``dtype`` when given; a 0-d tensor as it is."""
    check_tensor(op, "input", input)
    if dtype is not None:
        input = input.to(dtype)
    axis = normalize_dim(op, dim, input.ndim)
    if input.ndim == 0:
        return input
    return function.apply(input, dim=axis)


# ---- norms (torch.norm; ta.linalg's vector_norm and matrix_norm) ---------------------------

def _norm_input(op: str, input: Tensor, dtype: Any) -> Tensor:
    """The float input of a norm, converted to ``dtype`` when given (never narrowed)."""
    check_tensor(op, "input", input)
    if input.dtype.kind != "f":
        raise DTypeError(f"{op}: expected a floating point tensor as input, got {input.dtype}")
    if dtype is None:
        return input
    target = dtypes.as_dtype(dtype, op)
    if target.kind != "f":
        raise DTypeError(f"{op}: dtype should be floating point, got {target}")
    if target.itemsize < input.dtype.itemsize:
        raise DTypeError(f"{op}: the dtype of the input ({input.dtype}) should be convertible "
                         f"without narrowing to the specified dtype ({target})")
    return input.to(target)


def vector_norm(input: Tensor, ord: float = 2, dim: Dims = None, keepdim: bool = False, *,
                dtype: Any = None) -> Tensor:
    """The vector ``ord``-norm over ``dim`` (all elements when None), as
    ``torch.linalg.vector_norm``: ``(Σ |x|^ord)^(1/ord)``, ``max |x|`` for ``inf``, ``min |x|``
    for ``-inf``, the number of non-zeros for 0.

    The gradient at a zero vector is 0 (PyTorch's subgradient), never NaN.

    Examples
    --------
    >>> import tinyattn as ta
    >>> x = ta.tensor([[3.0, -4.0], [0.0, 0.0]], requires_grad=True)
    >>> ta.linalg.vector_norm(x, dim=1).tolist()
    [5.0, 0.0]
    >>> ta.linalg.vector_norm(x, dim=1).sum().backward()
    >>> x.grad.tolist()
    [[0.6000000238418579, -0.800000011920929], [0.0, 0.0]]
    """
    op = "linalg.vector_norm"
    if not is_number(ord):
        raise TypeError(f"{op}: ord must be a number (inf, -inf, 0, 1, 2, ...), got {ord!r}")
    x = _norm_input(op, input, dtype)
    axes = normalize_dims(op, dim, x.ndim)
    ord = float(ord)
    if (ord < 0 or ord == math.inf) and any(x.shape[a] == 0 for a in axes):
        raise ShapeError(f"{op}: cannot compute the {ord:g} norm of an empty dimension (tensor "
                         f"of shape {x.shape}): the operation has no identity")
    return Norm.apply(x, ord=ord, axes=axes, keepdim=bool(keepdim))


def matrix_norm(input: Tensor, ord: Any = "fro", dim: tuple[int, int] = (-2, -1),
                keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    """A matrix norm over the two dims ``dim``, as ``torch.linalg.matrix_norm``: ``'fro'``
    (the Frobenius norm, ``√Σ x²``), ``1``/``-1`` (the largest/smallest column sum of
    ``|x|``), ``inf``/``-inf`` (the largest/smallest row sum). The spectral and nuclear norms
    (``2``, ``-2``, ``'nuc'``) need a singular value decomposition, which tinyattn does not
    have."""
    op = "linalg.matrix_norm"
    x = _norm_input(op, input, dtype)
    if x.ndim < 2:
        raise ShapeError(f"{op}: the input must have at least 2 dims, got shape {x.shape}")
    if isinstance(dim, (int, np.integer)) or len(tuple(dim)) != 2:
        raise ShapeError(f"{op}: dim must be a 2-tuple, got {dim!r}")
    rows, columns = normalize_dims(op, tuple(dim), x.ndim)
    if isinstance(ord, str):
        if ord == "fro":
            return Norm.apply(x, ord=2.0, axes=(rows, columns), keepdim=bool(keepdim))
        if ord == "nuc":
            raise NotImplementedError(f"{op}: the nuclear norm needs a singular value "
                                      "decomposition, which tinyattn does not have")
    elif is_number(ord) and builtins.abs(ord) in (1, math.inf):
        if ord in (math.inf, -math.inf):  # the row sums: the 1-norm of the transpose
            rows, columns = columns, rows
        sums = vector_norm(x, 1, rows, keepdim)
        if not keepdim and rows < columns:
            columns -= 1
        return (amax if ord > 0 else amin)(sums, columns, keepdim)
    elif is_number(ord) and builtins.abs(ord) == 2:
        raise NotImplementedError(f"{op}: the spectral norm (ord {ord}) needs a singular value "
                                  "decomposition, which tinyattn does not have")
    raise ValueError(f"{op}: ord must be 'fro', 'nuc', 1, -1, 2, -2, inf or -inf, got {ord!r}")


def norm(input: Tensor, p: Any = "fro", dim: Dims = None, keepdim: bool = False, *,
         dtype: Any = None) -> Tensor:
    """The norm of ``input``, as ``torch.norm``: ``p='fro'`` (the default) is the 2-norm of the
    elements over ``dim`` (at most two dims; all when None), a number ``p`` the vector
    ``p``-norm over ``dim`` (see :func:`tinyattn.linalg.vector_norm`); ``'nuc'`` would be the
    nuclear norm (not supported).

    Examples
    --------
    >>> import tinyattn as ta
    >>> x = ta.tensor([[3.0, 4.0], [6.0, 8.0]])
    >>> x.norm().item(), x.norm(dim=1).tolist(), x.norm(1).item()
    (11.180339813232422, [5.0, 10.0], 21.0)
    """
    if isinstance(p, str):
        if p == "fro" and (dim is None or is_int(dim) or len(dim) <= 2):
            return vector_norm(input, 2, dim, keepdim, dtype=dtype)
        check_tensor("norm", "input", input)
        dims = tuple(range(input.ndim)) if dim is None else dim
        return matrix_norm(input, p, dims, keepdim, dtype=dtype)
    return vector_norm(input, 2 if p is None else p, dim, keepdim, dtype=dtype)

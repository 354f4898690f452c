"""``LayerNorm``: normalise each row over the trailing dims, on the numba row kernels of
:mod:`tinyattn.kernels.layer_norm` (one call forward, one backward).

The trailing ``normalized_shape`` dims are flattened into the ``C`` features of a row and the
leading dims into rows.
"""

from __future__ import annotations

import math

import numpy as np

from ..autograd import Context, Function, is_grad_enabled
from ..kernels.layer_norm import layer_norm_backward, layer_norm_forward
from ..tensor import Tensor, from_numpy
from .notation import operand


class LayerNorm(Function):
    """Per row of ``C`` features: ``x̂ = (x − mean) / sqrt(var + eps)``, ``y = x̂ ⊙ w + b``.

    Backward, with ``ĝ = g ⊙ w``: ``dx = (ĝ − mean(ĝ) − x̂ · mean(ĝ ⊙ x̂)) / sqrt(var + eps)``,
    ``dw = Σ_rows g ⊙ x̂``, ``db = Σ_rows g`` (``var`` is the biased variance of the row).
    """

    named_gradient = True

    @staticmethod
    def forward(ctx: Context, x: Tensor, *params: Tensor, normalized_shape: tuple[int, ...],
                eps: float, has_weight: bool, has_bias: bool) -> Tensor:
        array = x.numpy()
        rows = _rows(array, normalized_shape)  # (N, C)
        features = rows.shape[1]
        weight = _flat(params[0], features) if has_weight else None  # (C,)
        bias = _flat(params[-1], features) if has_bias else None
        if rows.size:
            y, mean, rstd = layer_norm_forward(rows, weight, bias, eps)
        else:  # no rows, or rows of no features: an empty result, as in PyTorch
            y, mean, rstd = rows.copy(), np.zeros(len(rows), array.dtype), \
                np.zeros(len(rows), array.dtype)
        ctx.save_for_backward(x, params[0] if has_weight else None)
        ctx.mean, ctx.rstd = mean, rstd  # the row statistics, for the kernel's backward
        ctx.normalized_shape, ctx.eps = normalized_shape, eps
        ctx.has_weight, ctx.has_bias = has_weight, has_bias
        return from_numpy(y.reshape(array.shape))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> tuple[Tensor | None, ...]:
        x, weight = ctx.saved_tensors
        if not is_grad_enabled():  # fast path: the row kernel, when no graph is being built
            return _backward_kernel(ctx, x.numpy(), weight, grad.numpy())
        dims = tuple(range(x.ndim - len(ctx.normalized_shape), x.ndim))
        rows = tuple(range(x.ndim - len(ctx.normalized_shape)))
        centered = x - x.mean(dims, keepdim=True)
        rstd = ((centered * centered).mean(dims, keepdim=True) + ctx.eps).rsqrt()
        x_hat = centered * rstd
        g_hat = grad * weight if ctx.has_weight else grad
        dx = (g_hat - g_hat.mean(dims, keepdim=True)
              - x_hat * (g_hat * x_hat).mean(dims, keepdim=True)) * rstd
        grads = [dx]
        if ctx.has_weight:
            grads.append((grad * x_hat).sum(rows) if rows else grad * x_hat)
        if ctx.has_bias:
            grads.append(grad.sum(rows) if rows else grad)
        return tuple(grads)

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        return (f"(ĝ − mean(ĝ) − x̂ ⊙ mean(ĝ ⊙ x̂)) / σ  with ĝ = {operand(g)} ⊙ w, "
                f"x̂ = ({x[0]} − mean) / σ", f"Σ_rows {operand(g)} ⊙ x̂",
                f"Σ_rows {operand(g)}")[slot if slot == 0 or node.kwargs["has_weight"] else 2]


def _flat(param: Tensor, features: int) -> np.ndarray:
    """A weight or bias as ``(C,)`` contiguous values (no copy for the 1-D ones of a module)."""
    values = param.numpy()
    if values.ndim == 1 and values.flags.c_contiguous:
        return values
    return np.ascontiguousarray(values).reshape(features)


def _rows(array: np.ndarray, normalized_shape: tuple[int, ...]) -> np.ndarray:
    """``array`` as ``(N, C)`` rows of the ``C = prod(normalized_shape)`` features (either may
    be 0)."""
    lead = array.shape[: array.ndim - len(normalized_shape)]
    return np.ascontiguousarray(array).reshape(math.prod(lead), math.prod(normalized_shape))


def _backward_kernel(ctx: Context, x: np.ndarray, weight: Tensor | None,
                     grad: np.ndarray) -> tuple[Tensor, ...]:
    """The rule of :class:`LayerNorm` on the row kernel (``dx``, ``dw``, ``db`` in one pass)."""
    rows = _rows(x, ctx.normalized_shape)  # (N, C)
    features = rows.shape[1]
    # w = 1 when there is none: passing it makes the kernel return db as well
    w = np.ones(features, x.dtype) if weight is None else \
        np.ascontiguousarray(weight.numpy()).reshape(features)
    grad_rows = np.ascontiguousarray(grad, dtype=x.dtype).reshape(rows.shape)  # (N, C)
    if rows.size:
        dx, dweight, dbias = layer_norm_backward(grad_rows, rows, w, ctx.mean, ctx.rstd)
    else:  # nothing was normalised: zero gradients of the parameters' shape
        dx, dweight, dbias = np.zeros_like(rows), np.zeros_like(w), np.zeros_like(w)
    grads = [from_numpy(dx.reshape(x.shape))]
    if ctx.has_weight:
        grads.append(from_numpy(dweight.reshape(ctx.normalized_shape)))
    if ctx.has_bias:
        grads.append(from_numpy(dbias.reshape(ctx.normalized_shape)))
    return tuple(grads)

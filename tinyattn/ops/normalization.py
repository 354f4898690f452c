"""``LayerNorm``: normalise each row over the trailing dims, on the numba row kernels of
:mod:`tinyattn.kernels.layer_norm` (one call forward, one backward).

The trailing ``normalized_shape`` dims are flattened into the ``C`` features of a row and the
leading dims into rows.
"""

from __future__ import annotations

import math

import numpy as np

from ..autograd import Context, Function
from ..kernels.layer_norm import layer_norm_backward, layer_norm_forward
from ..tensor import Tensor


class LayerNorm(Function):
    """Per row of ``C`` features: ``x̂ = (x − mean) / sqrt(var + eps)``, ``y = x̂ ⊙ w + b``.

    Backward, with ``ĝ = g ⊙ w``: ``dx = (ĝ − mean(ĝ) − x̂ · mean(ĝ ⊙ x̂)) / sqrt(var + eps)``,
    ``dw = Σ_rows g ⊙ x̂``, ``db = Σ_rows g`` (``var`` is the biased variance of the row).
    """

    @staticmethod
    def forward(ctx: Context, x: np.ndarray, *params: np.ndarray,
                normalized_shape: tuple[int, ...], eps: float, has_weight: bool,
                has_bias: bool) -> np.ndarray:
        features = math.prod(normalized_shape)
        rows = np.ascontiguousarray(x).reshape(-1, features)  # (N, C)
        flat = [np.ascontiguousarray(p).reshape(features) for p in params]  # (C,) each
        weight = flat[0] if has_weight else None
        bias = flat[-1] if has_bias else None
        y, mean, rstd = layer_norm_forward(rows, weight, bias, eps)
        ctx.save_for_backward(x, weight, mean, rstd, normalized_shape, has_weight, has_bias,
                              eps)
        return y.reshape(x.shape)

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray | None, ...]:
        x, weight, mean, rstd, normalized_shape, has_weight, has_bias, _ = ctx.saved
        features = math.prod(normalized_shape)
        rows = np.ascontiguousarray(x).reshape(-1, features)  # (N, C)
        if weight is None:  # w = 1; passing it makes the kernel return db as well
            weight = np.ones(features, dtype=x.dtype)
        grad_rows = np.ascontiguousarray(grad, dtype=x.dtype).reshape(rows.shape)  # (N, C)
        dx, dweight, dbias = layer_norm_backward(grad_rows, rows, weight, mean, rstd)
        grads = [dx.reshape(x.shape)]
        if has_weight:
            grads.append(dweight.reshape(normalized_shape))
        if has_bias:
            grads.append(dbias.reshape(normalized_shape))
        return tuple(grads)

    @staticmethod
    def differentiable_backward(ctx: Context, grad: Tensor) -> tuple[Tensor | None, ...]:
        x, *params = ctx.inputs
        _, _, _, _, normalized_shape, has_weight, has_bias, eps = ctx.saved
        dims = tuple(range(x.ndim - len(normalized_shape), x.ndim))
        rows = tuple(range(x.ndim - len(normalized_shape)))
        centered = x - x.mean(dims, keepdim=True)
        rstd = ((centered * centered).mean(dims, keepdim=True) + eps).rsqrt()
        x_hat = centered * rstd
        g_hat = grad * params[0] if has_weight else grad
        dx = (g_hat - g_hat.mean(dims, keepdim=True)
              - x_hat * (g_hat * x_hat).mean(dims, keepdim=True)) * rstd
        grads = [dx]
        if has_weight:
            grads.append((grad * x_hat).sum(rows) if rows else grad * x_hat)
        if has_bias:
            grads.append(grad.sum(rows) if rows else grad)
        return tuple(grads)

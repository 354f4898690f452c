"""``Linear``: the affine map ``y = x Wᵀ + b`` of ``torch.nn.functional.linear`` as one op.

The weight is ``(out_features, in_features)`` as in PyTorch. The leading dims of ``x`` are
flattened into rows, so the forward is one 2-D product on the numba matmul kernel and the
backward two products and a row sum — instead of a transpose, a matmul and an add recorded
separately.
"""

from __future__ import annotations

import math

import numpy as np

from ..autograd import Context, Function
from ..tensor import Tensor
from .matmul import matmul, product


class Linear(Function):
    """``y = x Wᵀ + b`` over the last dim of ``x``.

    With the leading dims of ``x`` flattened into rows ``X (N, in)`` and ``G (N, out)`` the
    upstream gradient: ``dX = G W``, ``dW = Gᵀ X``, ``db = Σ_rows G``.
    """

    @staticmethod
    def forward(ctx: Context, x: np.ndarray, weight: np.ndarray,
                bias: np.ndarray | None = None) -> np.ndarray:
        out_features, in_features = weight.shape
        rows = x.reshape(math.prod(x.shape[:-1]), in_features)  # (N, in)
        y = product(rows, weight.T)  # (N, out)
        if bias is not None:
            y += bias
        ctx.save_for_backward(x if ctx.needs_input_grad[1] else None,
                              weight if ctx.needs_input_grad[0] else None, x.shape)
        return y.reshape(x.shape[:-1] + (out_features,))  # (..., out)

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray | None, ...]:
        x, weight, x_shape = ctx.saved
        n_rows, out_features = math.prod(x_shape[:-1]), grad.shape[-1]
        grad_rows = grad.reshape(n_rows, out_features)  # (N, out)
        dx = dweight = dbias = None
        if ctx.needs_input_grad[0]:
            dx = product(grad_rows, weight).reshape(x_shape)  # (..., in)
        if ctx.needs_input_grad[1]:
            dweight = product(grad_rows.T, x.reshape(n_rows, x_shape[-1]))  # (out, in)
        if len(ctx.needs_input_grad) == 3 and ctx.needs_input_grad[2]:
            dbias = grad_rows.sum(axis=0)  # (out,)
        return (dx, dweight, dbias)[:len(ctx.needs_input_grad)]

    @staticmethod
    def differentiable_backward(ctx: Context, grad: Tensor) -> tuple[Tensor | None, ...]:
        x, weight = ctx.inputs[:2]
        needs = ctx.needs_input_grad
        grad_rows = grad.reshape(-1, grad.shape[-1])  # (N, out)
        dx = matmul(grad, weight) if needs[0] else None  # (..., in)
        dweight = matmul(grad_rows.T, x.reshape(-1, x.shape[-1])) if needs[1] else None
        dbias = grad_rows.sum(0) if len(needs) == 3 and needs[2] else None
        return (dx, dweight, dbias)[:len(needs)]

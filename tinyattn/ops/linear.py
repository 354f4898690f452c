"""``Linear``: the affine map ``y = x Wᵀ + b`` of ``torch.nn.functional.linear`` as one op.

The weight is ``(out_features, in_features)`` as in PyTorch. The leading dims of ``x`` are
flattened into rows, so the forward is one 2-D product on the numba matmul kernel and the
backward two products and a row sum — instead of a transpose, a matmul and an add recorded
separately.
"""

from __future__ import annotations

import math

import numpy as np

from ..autograd import Context, Function, is_grad_enabled
from ..kernels.column_sums import column_sums
from ..tensor import Tensor, from_numpy
from .matmul import matmul, product
from .notation import factor, operand, transpose


class Linear(Function):
    """``y = x Wᵀ + b`` over the last dim of ``x``.

    With the leading dims of ``x`` flattened into rows ``X (N, in)`` and ``G (N, out)`` the
    upstream gradient: ``dX = G W``, ``dW = Gᵀ X``, ``db = Σ_rows G``.
    """

    @staticmethod
    def forward(ctx: Context, x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
        array, w = x.numpy(), weight.numpy()
        out_features, in_features = w.shape
        rows = array.reshape(math.prod(array.shape[:-1]), in_features)  # (N, in)
        y = product(rows, w.T, None if bias is None else bias.numpy())  # (N, out)
        needs = ctx.needs_input_grad
        ctx.save_for_backward(x if needs[1] else None, weight if needs[0] else None)
        return from_numpy(y.reshape(array.shape[:-1] + (out_features,)))  # (..., out)

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> tuple[Tensor | None, ...]:
        x, weight = ctx.saved_tensors
        needs = ctx.needs_input_grad
        if not is_grad_enabled():  # fast path: two kernel products and a row sum on arrays
            return _backward_kernel(ctx, x, weight, grad.numpy())
        grad_rows = grad.reshape(-1, grad.shape[-1])  # (N, out)
        dx = matmul(grad, weight) if needs[0] else None  # (..., in)
        dweight = matmul(grad_rows.mT, x.reshape(-1, x.shape[-1])) if needs[1] else None
        dbias = grad_rows.sum(0) if len(needs) == 3 and needs[2] else None
        return (dx, dweight, dbias)[:len(needs)]

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        return (f"{factor(g)} · {x[1]}", f"{operand(transpose(g))} · {x[0]}",
                f"Σ_rows {operand(g)}")[slot]


def _backward_kernel(ctx: Context, x: Tensor | None, weight: Tensor | None,
                     grad: np.ndarray) -> tuple[Tensor | None, ...]:
    """The rule of :class:`Linear` on the matmul kernel: ``G W``, ``Gᵀ X``, ``Σ_rows G``.

    ``Σ_rows G`` is the row sums of ``Gᵀ``: the tasks of ``Gᵀ X`` add them up as they read
    ``Gᵀ``, so ``G`` is not read a third time (unless the weight needs no gradient).
    """
    needs = ctx.needs_input_grad
    grad_rows = grad.reshape(-1, grad.shape[-1])  # (N, out)
    dx = dweight = dbias = None
    wants_bias = len(needs) == 3 and needs[2]
    if needs[0]:
        x_shape = ctx.inputs[0].shape
        dx = from_numpy(product(grad_rows, weight.numpy()).reshape(x_shape))  # (..., in)
    if needs[1]:
        array = x.numpy()
        sums = np.zeros(grad_rows.shape[1], np.float64) if wants_bias else None
        dweight = from_numpy(product(grad_rows.T, array.reshape(-1, array.shape[-1]),
                                     row_sums=sums))
        if wants_bias:
            dbias = from_numpy(sums.astype(grad.dtype))  # (out,)
    elif wants_bias:
        dbias = from_numpy(column_sums(grad_rows))  # (out,)
    return (dx, dweight, dbias)[:len(needs)]

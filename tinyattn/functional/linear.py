"""``linear``: the affine map ``y = x Wᵀ + b`` of ``torch.nn.functional.linear``.

The weight is ``(out_features, in_features)`` as in PyTorch, so weights move between the two
without transposing. The op is one :class:`Linear` Function rather than a transpose, a matmul
and an add: the leading dims of ``x`` are flattened into rows, so the forward is one 2-D
product and the backward two 2-D products and a row sum, all on the Numba matmul kernel.
"""

from __future__ import annotations

import numpy as np

from ..autograd import Context, Function
from ..ops.linalg import _product
from ..tensor import Tensor


class Linear(Function):
    """``y = x Wᵀ + b`` over the last dim of ``x``.

    With the leading dims of ``x`` flattened into rows ``X`` (N, in) and ``G`` (N, out) the
    upstream gradient: ``dX = G W``, ``dW = Gᵀ X``, ``db = Σ_rows G``.
    """

    @staticmethod
    def forward(
        ctx: Context, x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None = None
    ) -> np.ndarray:
        out_features, in_features = weight.shape
        rows = x.reshape(-1, in_features)  # (N, in)
        y = _product(rows, weight.T)  # (N, out)
        if bias is not None:
            y += bias.astype(y.dtype, copy=False)
        ctx.save_for_backward(rows, weight, x.shape, bias is not None)
        return y.reshape(x.shape[:-1] + (out_features,))  # (..., out)

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray | None, ...]:
        rows, weight, x_shape, has_bias = ctx.saved
        grad_rows = grad.reshape(-1, weight.shape[0])  # (N, out)
        dx = dweight = dbias = None
        if ctx.needs_input_grad[0]:
            dx = _product(grad_rows, weight).reshape(x_shape)  # (..., in)
        if ctx.needs_input_grad[1]:
            dweight = _product(grad_rows.T, rows)  # (out, in)
        if has_bias and ctx.needs_input_grad[2]:
            dbias = grad_rows.sum(axis=0)  # (out,)
        return (dx, dweight, dbias) if has_bias else (dx, dweight)


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """Apply ``y = input @ weight.T + bias`` to the last dim of ``input``.

    Parameters
    ----------
    input : Tensor, shape (..., in_features), float
    weight : Tensor, shape (out_features, in_features), float
    bias : Tensor, shape (out_features,), float, or None

    Returns
    -------
    Tensor, shape (..., out_features)

    Examples
    --------
    >>> import tinyattn as ta
    >>> x = ta.ones(2, 3)
    >>> w = ta.tensor([[1.0, 2.0, 3.0]])
    >>> ta.F.linear(x, w, ta.tensor([0.5])).tolist()
    [[6.5], [6.5]]
    """
    named = {"input": input, "weight": weight, "bias": bias}
    for label, value in named.items():
        if value is None and label == "bias":
            continue
        if not isinstance(value, Tensor):
            raise TypeError(f"linear: {label} must be a Tensor, got {type(value).__name__}")
        if value.dtype.kind != "f":
            raise TypeError(f"linear: {label} must be a float tensor, got dtype {value.dtype}")
    if weight.ndim != 2:
        raise ValueError(
            f"linear: weight must have shape (out_features, in_features), got {weight.shape}"
        )
    if input.ndim == 0 or input.shape[-1] != weight.shape[1]:
        raise ValueError(
            f"linear: input of shape {input.shape} does not match weight of shape "
            f"{weight.shape}: expected input.shape[-1] == in_features == {weight.shape[1]}"
        )
    if bias is None:
        return Linear.apply(input, weight)
    if bias.shape != (weight.shape[0],):
        raise ValueError(
            f"linear: bias must have shape (out_features,) = ({weight.shape[0]},) to match "
            f"weight of shape {weight.shape}, got {bias.shape}"
        )
    return Linear.apply(input, weight, bias)

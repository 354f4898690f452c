"""Matrix product with numpy's batching and broadcasting rules, on the Numba matmul kernel."""

from __future__ import annotations

import numpy as np

from ..autograd import Context, Function
from ..tensor import Tensor
from .validate import broadcast_shapes


def _product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` for arrays of >= 2 dims: the Numba kernel for floats, numpy for integers."""
    if a.dtype.kind == "f" and b.dtype.kind == "f":
        from ..kernels.matmul import matmul as matmul_kernel  # numba loads on first use

        dtype = np.result_type(a.dtype, b.dtype)
        return matmul_kernel(a.astype(dtype, copy=False), b.astype(dtype, copy=False))
    return np.matmul(a, b)


class MatMul(Function):
    """``C = A @ B``; chain rule: ``dA = G @ Bᵀ``, ``dB = Aᵀ @ G``.

    Vectors are promoted as numpy does (a 1-D ``A`` is a row, a 1-D ``B`` a column) and the
    added axis is removed from the result; broadcast batch dims are summed by the engine.
    """

    @staticmethod
    def forward(ctx: Context, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        a_vec, b_vec = a.ndim == 1, b.ndim == 1
        a2 = a[None, :] if a_vec else a
        b2 = b[:, None] if b_vec else b
        ctx.save_for_backward(a2, b2, a_vec, b_vec)
        out = _product(a2, b2)
        if b_vec:
            out = out[..., 0]
        if a_vec:
            out = out[..., 0, :] if not b_vec else out[..., 0]
        return out

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray | None, ...]:
        a2, b2, a_vec, b_vec = ctx.saved
        if b_vec:
            grad = grad[..., None]
        if a_vec:
            grad = np.expand_dims(grad, -2)
        da = db = None
        if ctx.needs_input_grad[0]:
            da = _product(grad, np.swapaxes(b2, -1, -2))
            if a_vec:
                da = da.reshape(-1, da.shape[-1]).sum(axis=0)
        if ctx.needs_input_grad[1]:
            db = _product(np.swapaxes(a2, -1, -2), grad)
            if b_vec:
                db = db.reshape(-1, db.shape[-2], 1).sum(axis=0)[:, 0]
        return da, db


def matmul(a: Tensor, b: Tensor) -> Tensor:
    """Matrix product ``a @ b`` with numpy's rules for vectors, batches and broadcasting.

    Examples
    --------
    >>> import tinyattn as ta
    >>> (ta.ones(2, 3) @ ta.ones(3, 4)).shape
    (2, 4)
    """
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise TypeError(
            f"matmul: expected two tensors, got {type(a).__name__} and {type(b).__name__}"
        )
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"matmul: both operands need at least 1 dim, got {a.shape} and {b.shape}")
    inner_a = a.shape[-1]
    inner_b = b.shape[0] if b.ndim == 1 else b.shape[-2]
    if inner_a != inner_b:
        raise ValueError(
            f"matmul: shapes {a.shape} and {b.shape} do not align: {inner_a} != {inner_b}"
        )
    if a.ndim > 2 or b.ndim > 2:
        batch_a = a.shape[:-2] if a.ndim > 1 else ()
        batch_b = b.shape[:-2] if b.ndim > 1 else ()
        broadcast_shapes("matmul (batch dims)", batch_a, batch_b)
    return MatMul.apply(a, b)

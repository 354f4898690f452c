"""Matrix products: ``matmul`` (numpy's batching and broadcasting), ``mm``, ``bmm``, ``dot``,
and the outer product ``outer``.

Float products run on the numba matmul kernel (:func:`tinyattn.kernels.matmul.matmul`);
integer ones on numpy. Mixed dtypes are refused, as in PyTorch.
"""

from __future__ import annotations

import numpy as np

from ..autograd import Context, Function, is_grad_enabled
from ..errors import DTypeError, ShapeError
from ..kernels.matmul import matmul as matmul_kernel
from ..tables import shape_text
from ..tensor import Tensor, check_kernel_dtype, check_tensor, from_numpy
from ..validation import broadcast_shapes, check_same_dtype
from .arithmetic import mul
from .notation import factor, right, transpose

_KERNEL_MACS = 4096
"""Float products of fewer multiply-adds than this run on numpy (``np.dot`` for matrices): for
them the call into the kernel costs more than the arithmetic."""


def product(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None = None,
            row_sums: np.ndarray | None = None) -> np.ndarray:
    """``a @ b (+ bias)`` for arrays of >= 2 dims and one dtype: the kernel for floats (numpy
    for tiny products), numpy otherwise. ``bias`` (``(N,)``, the same dtype) is added to every
    row, by the kernel's tiles before they store. ``row_sums`` (``(M,)`` float64, a 2-D float
    ``a`` only) gets the sums of ``a``'s rows added by the kernel (its ``row_sums``)."""
    if row_sums is not None or (a.dtype.kind == "f" and (a.size * b.shape[-1] >= _KERNEL_MACS
                                                         or a.ndim < b.ndim)):
        return matmul_kernel(a, b, bias, row_sums)
    out = np.dot(a, b) if a.ndim == 2 == b.ndim else np.matmul(a, b)  # dot: less overhead
    if bias is not None:
        out += bias
    return out


class MatMul(Function):
    """``C = A @ B``; chain rule: ``dA = G @ Bᵀ``, ``dB = Aᵀ @ G``.

    Vectors are promoted as numpy does (a 1-D ``A`` is a row, a 1-D ``B`` a column) and the
    added axis is removed from the result; broadcast batch dims are summed by the engine.
    """

    @staticmethod
    def forward(ctx: Context, a: Tensor, b: Tensor) -> Tensor:
        need_a, need_b = ctx.needs_input_grad
        ctx.save_for_backward(a if need_b else None, b if need_a else None)
        x, y = a.numpy(), b.numpy()
        out = product(x[None, :] if x.ndim == 1 else x,  # (1, K) or (..., M, K)
                      y[:, None] if y.ndim == 1 else y)  # (K, 1) or (..., K, N)
        if y.ndim == 1:
            out = out[..., 0]
        if x.ndim == 1:
            out = out[..., 0, :] if y.ndim != 1 else out[..., 0]
        return from_numpy(out)

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> tuple[Tensor | None, Tensor | None]:
        a, b = ctx.saved_tensors
        a_row, b_column = ctx.inputs[0].ndim == 1, ctx.inputs[1].ndim == 1
        if not is_grad_enabled() and not (a_row or b_column):  # fast path: the kernel products
            return _backward_kernel(a, b, grad.numpy())
        if b_column:
            grad = grad.unsqueeze(-1)  # (..., M, 1)
        if a_row:
            grad = grad.unsqueeze(-2)  # (..., 1, N)
        da = db = None
        if b is not None:
            da = matmul(grad, (b.unsqueeze(-1) if b_column else b).mT)  # (..., M, K)
            if a_row:  # (..., 1, K): the row's gradient summed over the batch dims
                da = da.sum(tuple(range(da.ndim - 1)))  # (K,)
        if a is not None:
            db = matmul((a.unsqueeze(0) if a_row else a).mT, grad)  # (..., K, N)
            if b_column:  # (..., K, 1): the column's gradient summed over the batch dims
                db = db.squeeze(-1)
                db = db.sum(tuple(range(db.ndim - 1))) if db.ndim > 1 else db  # (K,)
        return da, db

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        shape, out_shape = node.inputs[slot].shape, tuple(node.out_shape)
        if slot == 0:
            expr = f"{factor(g)} · {transpose(x[1])}"
        else:
            expr = f"{transpose(x[0])} · {right(g)}"
        broadcast = len(shape) > 2 and shape[:-2] != out_shape[:-2] or len(shape) == 2 < len(
            out_shape)
        return f"sum_to({expr}, {shape_text(shape)})" if broadcast else expr


def _backward_kernel(a: Tensor | None, b: Tensor | None,
                     grad: np.ndarray) -> tuple[Tensor | None, Tensor | None]:
    """The rule of :class:`MatMul` for matrices on arrays: ``G Bᵀ`` and ``Aᵀ G`` (transposed
    operands are read in place)."""
    da = None if b is None else from_numpy(product(grad, b.numpy().mT))
    db = None if a is None else from_numpy(product(a.numpy().mT, grad))
    return da, db


def matmul(input: Tensor, other: Tensor) -> Tensor:
    """Matrix product ``input @ other`` with numpy's rules for vectors, batches and broadcasting.

    Examples
    --------
    >>> import tinyattn as ta
    >>> (ta.ones(2, 3) @ ta.ones(3, 4)).shape
    (2, 4)
    """
    if isinstance(input, Tensor) and isinstance(other, Tensor):
        # The common case first: two matrices of one kernel dtype whose inner dims agree.
        a, b = input._data, other._data
        if a.ndim == 2 == b.ndim and a.shape[1] == b.shape[0] and a.dtype == b.dtype and \
                a.dtype.char in "fd":
            return MatMul.apply(input, other)
    check_tensor("matmul", "input", input)
    check_tensor("matmul", "other", other)
    if input.ndim == 0 or other.ndim == 0:
        raise ShapeError(f"matmul: both operands need at least 1 dim, got {input.shape} "
                         f"and {other.shape}")
    check_same_dtype("matmul", input=input, other=other)
    check_kernel_dtype("matmul", input)
    if input.dtype.kind == "b" and input.ndim == other.ndim == 1:
        raise DTypeError("matmul: the dot product of two bool vectors is not supported")
    inner_a = input.shape[-1]
    inner_b = other.shape[0] if other.ndim == 1 else other.shape[-2]
    if inner_a != inner_b:
        raise ShapeError(f"matmul: shapes {input.shape} and {other.shape} do not align: "
                         f"{inner_a} != {inner_b}")
    rows = input.shape[-2] if input.ndim > 1 else 1
    columns = other.shape[-1] if other.ndim > 1 else 1
    if input.dtype.kind == "b" and inner_a and rows and columns and input.size and other.size:
        raise DTypeError(f"matmul: products of bool matrices are not supported (shapes "
                         f"{input.shape} and {other.shape}; PyTorch has no bool kernel either): "
                         "convert them with .long() or .float()")
    if input.ndim > 2 or other.ndim > 2:
        batch_a = input.shape[:-2] if input.ndim > 1 else ()
        batch_b = other.shape[:-2] if other.ndim > 1 else ()
        broadcast_shapes("matmul (batch dims)", batch_a, batch_b)
    return MatMul.apply(input, other)


def mm(input: Tensor, mat2: Tensor) -> Tensor:
    """The product of two matrices (2-D only)."""
    if input.ndim != 2 or mat2.ndim != 2:
        raise ShapeError(f"mm: expected two 2-D tensors, got shapes {input.shape} and "
                           f"{mat2.shape}")
    return matmul(input, mat2)


def bmm(input: Tensor, mat2: Tensor) -> Tensor:
    """Batched product of ``(b, n, m)`` and ``(b, m, p)`` tensors (no broadcasting)."""
    if input.ndim != 3 or mat2.ndim != 3 or input.shape[0] != mat2.shape[0]:
        raise ShapeError(f"bmm: expected 3-D tensors with the same batch size, got shapes "
                           f"{input.shape} and {mat2.shape}")
    return matmul(input, mat2)


def dot(input: Tensor, other: Tensor) -> Tensor:
    """The inner product of two 1-D tensors of the same size."""
    if input.ndim != 1 or other.ndim != 1 or input.shape != other.shape:
        raise ShapeError(f"dot: expected two 1-D tensors of the same size, got shapes "
                           f"{input.shape} and {other.shape}")
    return matmul(input, other)


def outer(input: Tensor, vec2: Tensor) -> Tensor:
    """The outer product of two 1-D tensors: ``out[i, j] = input[i] · vec2[j]``.

    As in PyTorch it is the broadcast product ``input[:, None] * vec2[None, :]`` (dtypes
    promote as in ``*``; the gradient is that of the product, ``d input = G · vec2`` and
    ``d vec2 = Gᵀ · input``).

    Parameters
    ----------
    input : Tensor
        A 1-D tensor of length ``n``.
    vec2 : Tensor
        A 1-D tensor of length ``m``.

    Returns
    -------
    Tensor
        The ``(n, m)`` product.

    Raises
    ------
    ShapeError
        When either argument is not 1-D.

    Examples
    --------
    >>> import tinyattn as ta
    >>> ta.outer(ta.tensor([1.0, 2.0]), ta.tensor([1.0, 10.0, 100.0]))
    tensor([[1., 10., 100.],
            [2., 20., 200.]])
    """
    check_tensor("outer", "input", input)
    check_tensor("outer", "vec2", vec2)
    for label, vector in (("input", input), ("vec2", vec2)):
        if vector.ndim != 1:
            raise ShapeError(f"outer: expected 1-D tensors, got {label} of shape "
                             f"{vector.shape} ({vector.ndim}-D)")
    return mul(input.reshape(-1, 1), vec2.reshape(1, -1))

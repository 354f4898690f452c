"""``ta.linalg``, as ``torch.linalg``: the vector norms and the matrix norms that need no
decomposition (Frobenius, and the largest or smallest column or row sum).

Each is a function of the ops in :mod:`tinyattn.ops.reduce` (where the ``Norm`` op and its
gradient live): ``norm`` picks the vector or matrix norm from ``ord`` and ``dim`` exactly as
PyTorch does.
"""

from __future__ import annotations

from typing import Any

from .errors import ShapeError
from .ops.reduce import Dims, matrix_norm, vector_norm
from .tensor import Tensor, check_tensor
from .validation import is_int

__all__ = ["matrix_norm", "norm", "vector_norm"]


def norm(input: Tensor, ord: Any = None, dim: Dims = None, keepdim: bool = False, *,
         dtype: Any = None) -> Tensor:
    """A vector or matrix norm, as ``torch.linalg.norm``.

    - ``dim`` an int (or a 1-tuple): the vector norm of order ``ord`` (default 2) along it;
    - ``dim`` a 2-tuple: the matrix norm of order ``ord`` (default ``'fro'``) over those dims;
    - ``dim=None``: with ``ord=None``, the 2-norm of all elements (any number of dims); with
      an ``ord``, the input must be 1-D (a vector norm) or 2-D (a matrix norm).

    Vector orders: ``2``, ``1``, ``inf``, ``-inf``, ``0`` (the number of non-zeros) and any
    other number ``p`` (``(Σ |x|ᵖ)^(1/p)``); matrix orders: ``'fro'``, ``1``, ``-1``, ``inf``,
    ``-inf`` (``2``, ``-2`` and ``'nuc'`` need a singular value decomposition and are not
    supported). The gradient at a zero vector is 0 (PyTorch's subgradient), never NaN.

    Examples
    --------
    >>> import tinyattn as ta
    >>> a = ta.tensor([[1.0, -2.0], [3.0, 4.0]])
    >>> ta.linalg.norm(a).item(), ta.linalg.norm(a, dim=1).tolist()
    (5.4772257804870605, [2.2360680103302, 5.0])
    >>> ta.linalg.norm(a, 1).item(), ta.linalg.norm(a, float("inf")).item()
    (6.0, 7.0)
    """
    check_tensor("linalg.norm", "input", input)
    if dim is not None:
        dims = (dim,) if is_int(dim) else tuple(dim)
        if len(dims) == 1:
            return vector_norm(input, 2 if ord is None else ord, dims, keepdim, dtype=dtype)
        if len(dims) == 2:
            return matrix_norm(input, "fro" if ord is None else ord, dims, keepdim,
                               dtype=dtype)
        raise ShapeError(f"linalg.norm: if dim is given it must be of length 1 or 2, got "
                         f"{dim!r}")
    if ord is None:
        return vector_norm(input, 2, None, keepdim, dtype=dtype)
    if input.ndim == 1:
        return vector_norm(input, ord, None, keepdim, dtype=dtype)
    if input.ndim == 2:
        return matrix_norm(input, ord, (0, 1), keepdim, dtype=dtype)
    raise ShapeError(f"linalg.norm: when ord is given without dim, the input must be 1-D or "
                     f"2-D, got {input.ndim}-D (shape {input.shape}); pass dim")

"""Turning an op's arguments into tensors of one dtype, by PyTorch's promotion rules.

``x + 1.5`` on an int64 ``x`` computes in float32, ``x_f32 + y_f64`` in float64: the operands
are cast to :func:`tinyattn.dtypes.result_type` first (a recorded, differentiable cast for
float tensors that require grad), and Python numbers become constant 0-d tensors.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import dtypes
from ..tensor import Tensor


def to_dtype(value: Any, dtype: np.dtype) -> Tensor:
    """``value`` (tensor, array or number) as a tensor of ``dtype``."""
    if isinstance(value, Tensor):
        if value.dtype == dtype:
            return value
        from .unary import cast

        return cast(value, dtype)
    if isinstance(value, (np.ndarray, list, tuple)) or np.isscalar(value) or \
            isinstance(value, np.generic):
        return Tensor(np.asarray(value).astype(dtype, copy=False))
    raise TypeError(f"expected a tensor, number or array, got {type(value).__name__}")


def operands(op: str, *values: Any, floating: bool = False) -> tuple[Tensor, ...]:
    """``values`` as tensors of their promoted dtype (the default float dtype if ``floating``
    and the promoted dtype is not floating point)."""
    for value in values:
        if not isinstance(value, (Tensor, np.ndarray, np.generic, int, float, bool, list,
                                  tuple)):
            raise TypeError(f"{op}: expected a tensor, number or array, got "
                            f"{type(value).__name__}")
    arrays = [v if isinstance(v, Tensor) or not isinstance(v, (list, tuple)) else np.asarray(v)
              for v in values]
    dtype = dtypes.result_type(*arrays)
    if floating:
        dtype = dtypes.float_result(dtype)
    return tuple(to_dtype(v, dtype) for v in arrays)


def floating(op: str, x: Any) -> Tensor:
    """A tensor input of a float function: bool and integers become the default float dtype."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(x).__name__}")
    return x if x.dtype.kind == "f" else to_dtype(x, dtypes.get_default_dtype())

"""Dtypes and PyTorch's type promotion.

tinyattn's dtypes are numpy dtypes under PyTorch's names (``ta.float32 == np.float32``). What
dtype an op returns follows PyTorch, not numpy: operands come in three *categories* — bool <
integer < floating — and three *kinds* — tensors with dims, 0-d tensors, Python numbers. A
weaker kind takes part in the promotion only when its category is higher than that of the
stronger kinds::

    int64 tensor + 0.5            -> float32   (a Python float means the default float dtype)
    float32 tensor + float64 0-d  -> float32   (same category: the dimensioned tensor wins)
    float32 tensor + int64 tensor -> float32   (numpy would give float64)
    bool tensor + 1               -> int64

Functions that only make sense on floats (``exp``, ``sqrt``, ``softmax``, true division …)
turn bool and integer inputs into the default float dtype, float32.
"""

from __future__ import annotations

from typing import Any

import numpy as np

float32 = np.dtype(np.float32)
float64 = np.dtype(np.float64)
uint8 = np.dtype(np.uint8)
int8 = np.dtype(np.int8)
int16 = np.dtype(np.int16)
int32 = np.dtype(np.int32)
int64 = np.dtype(np.int64)
bool_ = np.dtype(np.bool_)

DEFAULT_FLOAT = float32
"""The default floating point dtype (PyTorch's ``get_default_dtype()``)."""

_SUPPORTED = frozenset({float32, float64, uint8, int8, int16, int32, int64, bool_})


def get_default_dtype() -> np.dtype:
    """The dtype Python floats and float factories default to: float32."""
    return DEFAULT_FLOAT


def as_dtype(dtype: Any, op: str = "dtype") -> np.dtype:
    """``dtype`` (a tinyattn/numpy dtype, a numpy type, a name or a Python type) as a dtype.

    Python's ``float``/``int``/``bool`` mean float32, int64 and bool, as in PyTorch.
    """
    if dtype is float:
        return float32
    if dtype is int:
        return int64
    if dtype is bool:
        return bool_
    try:
        result = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{op}: {dtype!r} is not a dtype") from None
    if result not in _SUPPORTED:
        raise TypeError(f"{op}: dtype {result} is not supported (tinyattn computes in float32 "
                        "and float64; integers int64/int32/int16/int8/uint8 and bool)")
    return result


_CATEGORY = {"b": 0, "u": 1, "i": 1, "f": 2}


def category(dtype: np.dtype) -> int:
    """0 for bool, 1 for integers, 2 for floating point."""
    return _CATEGORY[dtype.kind]


def promote_types(a: np.dtype, b: np.dtype) -> np.dtype:
    """PyTorch's ``promote_types``: the higher category wins (int64 + float32 = float32), and
    within a category the smallest dtype that holds both (uint8 + int8 = int16)."""
    if a == b:
        return a
    if category(a) != category(b):
        return a if category(a) > category(b) else b
    return np.promote_types(a, b)


def _scalar_dtype(value: Any) -> np.dtype:
    if isinstance(value, (bool, np.bool_)):
        return bool_
    if isinstance(value, (int, np.integer)):
        return int64
    return DEFAULT_FLOAT


def _combine(higher: np.dtype | None, lower: np.dtype | None) -> np.dtype | None:
    """Let ``lower`` (a weaker kind) promote ``higher`` only when its category is higher."""
    if higher is None:
        return lower
    if lower is None or higher.kind == "f":
        return higher
    if higher.kind == "b" or lower.kind == "f":
        return promote_types(higher, lower)
    return higher


def result_type(*operands: Any) -> np.dtype:
    """The dtype PyTorch gives an op on ``operands`` (tensors, arrays or Python numbers).

    Examples
    --------
    >>> import tinyattn as ta
    >>> result_type(ta.tensor([1, 2]), 0.5), result_type(ta.tensor([True]), -1)
    (dtype('float32'), dtype('int64'))
    >>> result_type(ta.ones(2), ta.tensor(1.0, dtype=ta.float64))
    dtype('float32')
    """
    dims = zero = wrapped = None
    for value in operands:
        if hasattr(value, "dtype") and hasattr(value, "ndim") and not isinstance(value,
                                                                                 np.generic):
            dtype = np.dtype(value.dtype)
            if value.ndim:
                dims = dtype if dims is None else promote_types(dims, dtype)
            else:
                zero = dtype if zero is None else promote_types(zero, dtype)
        else:
            dtype = _scalar_dtype(value)
            wrapped = dtype if wrapped is None else promote_types(wrapped, dtype)
    result = _combine(dims, _combine(zero, wrapped))
    if result is None:
        raise TypeError("result_type: no operands")
    return result


def float_result(dtype: np.dtype) -> np.dtype:
    """``dtype`` if it is floating point, else the default float dtype (for exp, sqrt, ...)."""
    return dtype if dtype.kind == "f" else DEFAULT_FLOAT


def is_floating_point(x: Any) -> bool:
    """Whether ``x`` (a tensor) has a floating point dtype."""
    return np.dtype(x.dtype).kind == "f"

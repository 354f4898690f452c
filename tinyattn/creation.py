"""Making tensors: ``tensor`` from data, and the factories ``zeros``, ``ones``, ``full``,
``zeros_like``, ``ones_like``, ``rand``, ``randn`` and ``arange`` (PyTorch's names and defaults).

Random factories draw from the generator that ``ta.manual_seed`` seeds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .random import generator
from .tensor import Tensor, _to_array, float32, int64


def tensor(data: Any, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    """Make a tensor from nested lists, numbers or a numpy array (which is copied).

    Examples
    --------
    >>> import tinyattn as ta
    >>> ta.tensor([1.0, 2.0]).dtype, ta.tensor([1, 2]).dtype
    (dtype('float32'), dtype('int64'))
    """
    array = _to_array(data, dtype)
    if array is data or (isinstance(data, Tensor) and array is data.data):
        array = array.copy()
    return Tensor(array, requires_grad=requires_grad)


def _shape_of(sizes: Sequence[Any]) -> tuple[int, ...]:
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = tuple(sizes[0])
    if any(isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0 for n in sizes):
        raise ValueError(f"expected non-negative int sizes, got {tuple(sizes)}")
    return tuple(int(n) for n in sizes)


def zeros(*size: Any, dtype: Any = float32, requires_grad: bool = False) -> Tensor:
    """A tensor of zeros of the given size."""
    return Tensor(np.zeros(_shape_of(size), dtype=dtype), requires_grad=requires_grad)


def ones(*size: Any, dtype: Any = float32, requires_grad: bool = False) -> Tensor:
    """A tensor of ones of the given size."""
    return Tensor(np.ones(_shape_of(size), dtype=dtype), requires_grad=requires_grad)


def full(size: Sequence[int], fill_value: float, dtype: Any = None,
         requires_grad: bool = False) -> Tensor:
    """A tensor of ``size`` filled with ``fill_value``."""
    dtype = dtype or _to_array(fill_value).dtype
    return Tensor(np.full(_shape_of((size,)), fill_value, dtype=dtype), requires_grad=requires_grad)


def zeros_like(t: Tensor, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    """Zeros of ``t``'s shape (and dtype unless given)."""
    return zeros(t.shape, dtype=dtype or t.dtype, requires_grad=requires_grad)


def ones_like(t: Tensor, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    """Ones of ``t``'s shape (and dtype unless given)."""
    return ones(t.shape, dtype=dtype or t.dtype, requires_grad=requires_grad)


def rand(*size: Any, dtype: Any = float32, requires_grad: bool = False) -> Tensor:
    """Uniform samples in [0, 1), drawn from the generator seeded by ``manual_seed``."""
    data = generator().random(_shape_of(size)).astype(dtype)
    return Tensor(data, requires_grad=requires_grad)


def randn(*size: Any, dtype: Any = float32, requires_grad: bool = False) -> Tensor:
    """Standard normal samples, drawn from the generator seeded by ``manual_seed``."""
    data = generator().standard_normal(_shape_of(size)).astype(dtype)
    return Tensor(data, requires_grad=requires_grad)


def arange(start: float, end: float | None = None, step: float = 1, dtype: Any = None,
           requires_grad: bool = False) -> Tensor:
    """Evenly spaced values in ``[start, end)``: int64 when all arguments are ints, else float32."""
    if end is None:
        start, end = 0, start
    if dtype is None:
        dtype = float32 if any(isinstance(v, float) for v in (start, end, step)) else int64
    return Tensor(np.arange(start, end, step).astype(dtype), requires_grad=requires_grad)

"""Softmax and log-softmax along one dim, on the Numba row kernels (max-shifted, NaN-free)."""

from __future__ import annotations

import numpy as np

from ..autograd import Context, Function
from ..tensor import Tensor
from .validate import normalize_dim


def _rows(name: str, dim: int, *arrays: np.ndarray) -> np.ndarray:
    """Apply the last-axis row kernel ``name`` along ``dim`` by moving that axis last and back."""
    from ..kernels import softmax as kernels  # numba loads on first use

    fn = getattr(kernels, name)
    moved = [np.ascontiguousarray(np.moveaxis(a, dim, -1)) for a in arrays]
    return np.moveaxis(fn(*moved), -1, dim)


class Softmax(Function):
    """``y = e^(x - max) / Σ e^(x - max)``; ``dx = y ⊙ (g − Σ g⊙y)``.

    A row that is entirely ``-inf`` (fully masked) gives zeros, not NaN.
    """

    @staticmethod
    def forward(ctx: Context, x: np.ndarray, dim: int) -> np.ndarray:
        y = _rows("softmax_forward", dim, x)
        ctx.save_for_backward(y, dim)
        return y

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray]:
        y, dim = ctx.saved
        return (_rows("softmax_backward", dim, y, grad),)


class LogSoftmax(Function):
    """``y = x − max − log Σ e^(x − max)``; ``dx = g − e^y Σ g``."""

    @staticmethod
    def forward(ctx: Context, x: np.ndarray, dim: int) -> np.ndarray:
        y = _rows("log_softmax_forward", dim, x)
        ctx.save_for_backward(y, dim)
        return y

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray]:
        y, dim = ctx.saved
        return (_rows("log_softmax_backward", dim, y, grad),)


def _checked(op: str, x: Tensor, dim: int) -> int:
    if x.dtype.kind != "f":
        raise TypeError(f"{op}: expected a floating point tensor, got dtype {x.dtype}")
    if x.ndim == 0:
        raise ValueError(f"{op}: expected a tensor with at least 1 dim, got a scalar")
    return normalize_dim(op, dim, x.ndim)


def softmax(x: Tensor, dim: int) -> Tensor:
    """Softmax along ``dim``: non-negative, sums to 1 (0 for a fully ``-inf`` row).

    Examples
    --------
    >>> import tinyattn as ta
    >>> ta.softmax(ta.tensor([[0.0, 0.0]]), dim=-1).tolist()
    [[0.5, 0.5]]
    """
    return Softmax.apply(x, dim=_checked("softmax", x, dim))


def log_softmax(x: Tensor, dim: int) -> Tensor:
    """``log(softmax(x))`` along ``dim``, computed without overflow."""
    return LogSoftmax.apply(x, dim=_checked("log_softmax", x, dim))

"""Elementwise functions of one tensor: exp, log, sqrt, tanh, sigmoid, relu, and dtype casts."""

from __future__ import annotations

import numpy as np

from ..autograd import Context, Function
from ..tensor import Tensor


class Exp(Function):
    """``y = e^x``; ``dx = g * y``."""

    @staticmethod
    def forward(ctx: Context, x: np.ndarray) -> np.ndarray:
        y = np.exp(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray]:
        (y,) = ctx.saved
        return (grad * y,)


class Log(Function):
    """``y = ln x``; ``dx = g / x``."""

    @staticmethod
    def forward(ctx: Context, x: np.ndarray) -> np.ndarray:
        ctx.save_for_backward(x)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.log(x)

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray]:
        (x,) = ctx.saved
        with np.errstate(divide="ignore", invalid="ignore"):
            return (grad / x,)


class Sqrt(Function):
    """``y = √x``; ``dx = g / (2 y)``."""

    @staticmethod
    def forward(ctx: Context, x: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            y = np.sqrt(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray]:
        (y,) = ctx.saved
        with np.errstate(divide="ignore", invalid="ignore"):
            return (grad / (2 * y),)


class Tanh(Function):
    """``y = tanh x``; ``dx = g * (1 - y²)``."""

    @staticmethod
    def forward(ctx: Context, x: np.ndarray) -> np.ndarray:
        y = np.tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray]:
        (y,) = ctx.saved
        return (grad * (1 - y * y),)


class Sigmoid(Function):
    """``y = 1 / (1 + e^-x)`` (computed without overflow); ``dx = g * y * (1 - y)``."""

    @staticmethod
    def forward(ctx: Context, x: np.ndarray) -> np.ndarray:
        e = np.exp(-np.abs(x))
        y = np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype, copy=False)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray]:
        (y,) = ctx.saved
        return (grad * y * (1 - y),)


class Relu(Function):
    """``y = max(x, 0)``; ``dx = g * [x > 0]`` (zero at the kink, as PyTorch)."""

    @staticmethod
    def forward(ctx: Context, x: np.ndarray) -> np.ndarray:
        positive = x > 0
        ctx.save_for_backward(positive)
        return np.where(positive, x, 0)  # not x * positive: that gives -0.0 for x < 0

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray]:
        (positive,) = ctx.saved
        return (grad * positive,)


class Cast(Function):
    """``y = x`` in another dtype; ``dx = g`` (the engine casts it back to x's dtype)."""

    @staticmethod
    def forward(ctx: Context, x: np.ndarray, dtype: np.dtype) -> np.ndarray:
        return x.astype(dtype)

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray]:
        return (grad,)


def _float_input(op: str, x: Tensor) -> Tensor:
    if x.dtype.kind != "f":
        raise TypeError(f"{op}: expected a floating point tensor, got dtype {x.dtype}")
    return x


def exp(x: Tensor) -> Tensor:
    """Elementwise ``e^x``."""
    return Exp.apply(_float_input("exp", x))


def log(x: Tensor) -> Tensor:
    """Elementwise natural log (``-inf`` at 0 and NaN below, as numpy and PyTorch)."""
    return Log.apply(_float_input("log", x))


def sqrt(x: Tensor) -> Tensor:
    """Elementwise square root."""
    return Sqrt.apply(_float_input("sqrt", x))


def tanh(x: Tensor) -> Tensor:
    """Elementwise hyperbolic tangent."""
    return Tanh.apply(_float_input("tanh", x))


def sigmoid(x: Tensor) -> Tensor:
    """Elementwise logistic sigmoid."""
    return Sigmoid.apply(_float_input("sigmoid", x))


def relu(x: Tensor) -> Tensor:
    """Elementwise ``max(x, 0)``."""
    return Relu.apply(x)


def cast(x: Tensor, dtype: object) -> Tensor:
    """``x`` converted to ``dtype``; differentiable between float dtypes."""
    target = np.dtype(dtype)
    if target == x.dtype:
        return x
    if target.kind != "f":
        return Tensor(x.data.astype(target))
    return Cast.apply(x, dtype=target)

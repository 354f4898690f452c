"""Elementwise arithmetic: add, sub, mul, div, neg, pow.

Every backward here returns a gradient of the *output* (broadcast) shape; the engine's
``unbroadcast`` sums it back to each input's shape.
"""

from __future__ import annotations

import numpy as np

from ..autograd import Context, Function
from ..tensor import Tensor, as_tensor
from .validate import broadcast_shapes


class Add(Function):
    """``out = a + b``; ``da = g``, ``db = g``."""

    @staticmethod
    def forward(ctx: Context, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return a + b

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return grad, grad


class Sub(Function):
    """``out = a - b``; ``da = g``, ``db = -g``."""

    @staticmethod
    def forward(ctx: Context, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return a - b

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return grad, -grad


class Mul(Function):
    """``out = a * b``; chain rule: ``da = g * b``, ``db = g * a``."""

    @staticmethod
    def forward(ctx: Context, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray | None, ...]:
        a, b = ctx.saved
        da = grad * b if ctx.needs_input_grad[0] else None
        db = grad * a if ctx.needs_input_grad[1] else None
        return da, db


class Div(Function):
    """``out = a / b``; ``da = g / b``, ``db = -g * a / b²``."""

    @staticmethod
    def forward(ctx: Context, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        ctx.save_for_backward(a, b)
        return a / b

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray | None, ...]:
        a, b = ctx.saved
        da = grad / b if ctx.needs_input_grad[0] else None
        db = -grad * a / (b * b) if ctx.needs_input_grad[1] else None
        return da, db


class Neg(Function):
    """``out = -a``; ``da = -g``."""

    @staticmethod
    def forward(ctx: Context, a: np.ndarray) -> np.ndarray:
        return -a

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray]:
        return (-grad,)


class PowScalar(Function):
    """``out = a ** p`` for a constant ``p``; ``da = g * p * a ** (p - 1)``."""

    @staticmethod
    def forward(ctx: Context, a: np.ndarray, exponent: float) -> np.ndarray:
        ctx.save_for_backward(a, exponent)
        return a**exponent

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray]:
        a, exponent = ctx.saved
        return (grad * exponent * a ** (exponent - 1),)


class Pow(Function):
    """``out = a ** b`` for tensors; ``da = g * b * a ** (b - 1)``, ``db = g * out * log(a)``."""

    @staticmethod
    def forward(ctx: Context, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        out = a**b
        ctx.save_for_backward(a, b, out)
        return out

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray | None, ...]:
        a, b, out = ctx.saved
        da = grad * b * a ** (b - 1) if ctx.needs_input_grad[0] else None
        db = grad * out * np.log(a) if ctx.needs_input_grad[1] else None
        return da, db


def _binary(fn: type[Function], name: str, a: object, b: object) -> Tensor:
    a_t = as_tensor(a, like=b if isinstance(b, Tensor) else None)
    b_t = as_tensor(b, like=a_t)
    broadcast_shapes(name, a_t.shape, b_t.shape)
    return fn.apply(a_t, b_t)


def add(a: object, b: object) -> Tensor:
    """Elementwise ``a + b`` with numpy broadcasting."""
    return _binary(Add, "add", a, b)


def sub(a: object, b: object) -> Tensor:
    """Elementwise ``a - b`` with numpy broadcasting."""
    return _binary(Sub, "sub", a, b)


def mul(a: object, b: object) -> Tensor:
    """Elementwise ``a * b`` with numpy broadcasting."""
    return _binary(Mul, "mul", a, b)


def div(a: object, b: object) -> Tensor:
    """Elementwise ``a / b`` with numpy broadcasting (true division)."""
    return _binary(Div, "div", a, b)


def neg(a: Tensor) -> Tensor:
    """Elementwise ``-a``."""
    return Neg.apply(a)


def pow(a: object, b: object) -> Tensor:
    """Elementwise ``a ** b``; a Python-number exponent is a constant (no gradient)."""
    if isinstance(a, Tensor) and isinstance(b, (int, float)) and not isinstance(b, bool):
        return PowScalar.apply(a, exponent=b)
    return _binary(Pow, "pow", a, b)

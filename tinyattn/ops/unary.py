"""Elementwise functions of one tensor: exp, log, sqrt, rsqrt, tanh, sigmoid, relu, abs, sin,
cos, erf, clamp, and dtype casts.

The float functions turn bool and integer inputs into float32 first, as PyTorch does. Where a
backward keeps only part of the gradient (relu, clamp), it *selects* (``where``) instead of
multiplying by a 0/1 mask, so a NaN or inf elsewhere never turns a zero gradient into NaN.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..autograd import Context, Function
from ..dtypes import DEFAULT_FLOAT, result_type
from ..kernels.special import erf as erf_kernel
from ..tensor import Tensor
from .operands import floating
from .validate import DTypeError, is_number

_TWO_OVER_SQRT_PI = 2.0 / np.sqrt(np.pi)


class Exp(Function):
    """``y = e^x``; ``dx = g * y``."""

    @staticmethod
    def forward(ctx: Context, x: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore"):
            y = np.exp(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray]:
        (y,) = ctx.saved
        return (grad * y,)

    @staticmethod
    def differentiable_backward(ctx: Context, grad: Tensor) -> tuple[Tensor]:
        (x,) = ctx.inputs
        return (grad * exp(x),)


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

    @staticmethod
    def differentiable_backward(ctx: Context, grad: Tensor) -> tuple[Tensor]:
        (x,) = ctx.inputs
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

    @staticmethod
    def differentiable_backward(ctx: Context, grad: Tensor) -> tuple[Tensor]:
        (x,) = ctx.inputs
        return (grad / (2 * sqrt(x)),)


class Rsqrt(Function):
    """``y = 1 / √x``; ``dx = −g · y³ / 2``."""

    @staticmethod
    def forward(ctx: Context, x: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            y = 1 / np.sqrt(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray]:
        (y,) = ctx.saved
        return (-0.5 * grad * y * y * y,)

    @staticmethod
    def differentiable_backward(ctx: Context, grad: Tensor) -> tuple[Tensor]:
        (x,) = ctx.inputs
        y = rsqrt(x)
        return (-0.5 * grad * y * y * y,)


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

    @staticmethod
    def differentiable_backward(ctx: Context, grad: Tensor) -> tuple[Tensor]:
        (x,) = ctx.inputs
        y = tanh(x)
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

    @staticmethod
    def differentiable_backward(ctx: Context, grad: Tensor) -> tuple[Tensor]:
        (x,) = ctx.inputs
        y = sigmoid(x)
        return (grad * y * (1 - y),)


class Relu(Function):
    """``y = max(x, 0)`` (NaN stays NaN); ``dx = 0`` where ``y ≤ 0`` (0 at the kink), else ``g``
    (a NaN input passes its gradient on, as in PyTorch)."""

    @staticmethod
    def forward(ctx: Context, x: np.ndarray) -> np.ndarray:
        y = np.where(x < 0, np.zeros((), x.dtype), x)  # keeps NaN; -0.0 never appears
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray]:
        (y,) = ctx.saved
        return (np.where(y <= 0, np.zeros((), grad.dtype), grad),)

    @staticmethod
    def differentiable_backward(ctx: Context, grad: Tensor) -> tuple[Tensor]:
        from .masking import where

        (x,) = ctx.inputs
        return (where(x <= 0, 0.0, grad),)


def _sign(x: np.ndarray) -> np.ndarray:
    """−1, 0 or 1, and 0 for NaN (PyTorch's ``sign``)."""
    return np.where(np.isnan(x), np.zeros((), x.dtype), np.sign(x))


class Abs(Function):
    """``y = |x|``; ``dx = g · sign(x)`` (0 at 0 and at NaN, as PyTorch's ``sign``)."""

    @staticmethod
    def forward(ctx: Context, x: np.ndarray) -> np.ndarray:
        ctx.save_for_backward(x)
        return np.abs(x)

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray]:
        (x,) = ctx.saved
        return (grad * _sign(x),)

    @staticmethod
    def differentiable_backward(ctx: Context, grad: Tensor) -> tuple[Tensor]:
        (x,) = ctx.inputs
        return (grad * Tensor(_sign(x.data)),)


class Sin(Function):
    """``y = sin x``; ``dx = g · cos x``."""

    @staticmethod
    def forward(ctx: Context, x: np.ndarray) -> np.ndarray:
        ctx.save_for_backward(x)
        return np.sin(x)

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray]:
        (x,) = ctx.saved
        return (grad * np.cos(x),)

    @staticmethod
    def differentiable_backward(ctx: Context, grad: Tensor) -> tuple[Tensor]:
        (x,) = ctx.inputs
        return (grad * cos(x),)


class Cos(Function):
    """``y = cos x``; ``dx = −g · sin x``."""

    @staticmethod
    def forward(ctx: Context, x: np.ndarray) -> np.ndarray:
        ctx.save_for_backward(x)
        return np.cos(x)

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray]:
        (x,) = ctx.saved
        return (-grad * np.sin(x),)

    @staticmethod
    def differentiable_backward(ctx: Context, grad: Tensor) -> tuple[Tensor]:
        (x,) = ctx.inputs
        return (-grad * sin(x),)


class Erf(Function):
    """``y = erf x``; ``dx = g · 2/√π · e^(−x²)``."""

    @staticmethod
    def forward(ctx: Context, x: np.ndarray) -> np.ndarray:
        ctx.save_for_backward(x)
        return erf_kernel(x)

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray]:
        (x,) = ctx.saved
        return (grad * (_TWO_OVER_SQRT_PI * np.exp(-x * x)).astype(x.dtype, copy=False),)

    @staticmethod
    def differentiable_backward(ctx: Context, grad: Tensor) -> tuple[Tensor]:
        (x,) = ctx.inputs
        return (grad * _TWO_OVER_SQRT_PI * exp(-x * x),)


class Clamp(Function):
    """``y = min(max(x, low), high)``; ``dx = g`` where ``low ≤ x ≤ high``, else 0."""

    @staticmethod
    def forward(ctx: Context, x: np.ndarray, low: float | None, high: float | None) -> np.ndarray:
        inside = np.ones(x.shape, bool)
        y = x
        if low is not None:
            inside &= x >= low
            y = np.where(x < low, np.asarray(low, x.dtype), y)
        if high is not None:
            inside &= x <= high
            y = np.where(x > high, np.asarray(high, x.dtype), y)
        ctx.save_for_backward(inside)
        return np.array(y, dtype=x.dtype, copy=y is x)

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray]:
        (inside,) = ctx.saved
        return (np.where(inside, grad, np.zeros((), grad.dtype)),)

    @staticmethod
    def differentiable_backward(ctx: Context, grad: Tensor) -> tuple[Tensor]:
        from .masking import where

        return (where(Tensor(ctx.saved[0]), grad, 0.0),)


class Cast(Function):
    """``y = x`` in another dtype; ``dx = g`` (the engine casts it back to x's dtype)."""

    keeps_inputs = False

    @staticmethod
    def forward(ctx: Context, x: np.ndarray, dtype: np.dtype) -> np.ndarray:
        return x.astype(dtype)

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> tuple[Tensor]:
        return (grad,)

    differentiable_backward = backward


def _float_op(op: str, function: type[Function], doc: str) -> Callable[[Tensor], Tensor]:
    """The public function ``op``: ``function`` on the input made floating point."""

    def apply(input: Tensor) -> Tensor:
        return function.apply(floating(op, input))

    apply.__name__ = apply.__qualname__ = op
    apply.__doc__ = doc
    return apply


exp = _float_op("exp", Exp, "Elementwise ``e^x``.")
log = _float_op("log", Log, "Elementwise natural log (``-inf`` at 0 and NaN below, as numpy and "
                "PyTorch).")
sqrt = _float_op("sqrt", Sqrt, "Elementwise square root.")
rsqrt = _float_op("rsqrt", Rsqrt, "Elementwise ``1 / √x``.")
tanh = _float_op("tanh", Tanh, "Elementwise hyperbolic tangent.")
sigmoid = _float_op("sigmoid", Sigmoid, "Elementwise logistic sigmoid.")
sin = _float_op("sin", Sin, "Elementwise sine.")
cos = _float_op("cos", Cos, "Elementwise cosine.")
erf = _float_op("erf", Erf, "Elementwise error function.")


def relu(input: Tensor) -> Tensor:
    """Elementwise ``max(x, 0)``."""
    if not isinstance(input, Tensor):
        raise TypeError(f"relu: expected a Tensor, got {type(input).__name__}")
    if input.dtype.kind == "b":
        raise DTypeError("relu: boolean inputs are not supported")
    return Relu.apply(input)


def abs(input: Tensor) -> Tensor:
    """Elementwise absolute value."""
    if input.dtype.kind == "b":
        raise DTypeError("abs: boolean inputs are not supported")
    return Abs.apply(input)


def clamp(input: Tensor, min: float | None = None, max: float | None = None) -> Tensor:
    """Elementwise ``min(max(x, min), max)``; at least one bound must be given.

    The bounds take part in the type promotion (a bool tensor clamped to 0..1 gives int64, an
    integer tensor clamped to 0.5 gives float32), as in PyTorch.
    """
    if min is None and max is None:
        raise ValueError("clamp: at least one of min and max must be given")
    low, high = _bound("min", min), _bound("max", max)
    bounds = [b for b in (low, high) if b is not None]
    dtype = result_type(input, *bounds)
    if dtype.kind == "b":
        dtype = np.dtype(np.int64) if all(float(b).is_integer() for b in bounds) else \
            DEFAULT_FLOAT
    return Clamp.apply(cast(input, dtype), low=low, high=high)


def _bound(label: str, bound: object) -> int | float | None:
    if isinstance(bound, Tensor) and bound.numel() == 1:
        bound = bound.item()
    if bound is not None and not is_number(bound):
        raise TypeError(f"clamp: {label} must be a number or None, got {bound!r}")
    return bound


def cast(input: Tensor, dtype: object) -> Tensor:
    """``input`` converted to ``dtype``; differentiable between float dtypes."""
    from ..dtypes import as_dtype

    target = as_dtype(dtype, "to")
    if target == input.dtype:
        return input
    if target.kind != "f" or input.dtype.kind != "f":
        return Tensor(input.data.astype(target))
    return Cast.apply(input, dtype=target)

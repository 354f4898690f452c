"""Elementwise functions of one tensor: exp, expm1, log, log1p, sqrt, rsqrt, square, reciprocal,
tanh, sigmoid, relu, abs, sign, sin, cos, erf, clamp, the roundings floor/ceil/round/trunc, and
dtype casts.

The float functions turn bool and integer inputs into float32 first, as PyTorch does. Where a
backward keeps only part of the gradient (relu, clamp), it *selects* (``where``) instead of
multiplying by a 0/1 mask, so a NaN or inf elsewhere never turns a zero gradient into NaN.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..autograd import Context, Function
from ..creation import zeros_like
from ..dtypes import as_dtype, get_default_dtype, result_type
from ..errors import DTypeError
from ..kernels import FLOAT_DTYPES
from ..kernels.elementwise import binary, clamp_numpy
from ..kernels.elementwise import clamp as clamp_kernel
from ..kernels.special import erf as erf_kernel
from ..kernels.special import sigmoid as sigmoid_kernel
from ..tensor import Tensor, from_numpy
from ..validation import is_int, is_number
from .notation import operand
from .operands import floating

_TWO_OVER_SQRT_PI = 2.0 / np.sqrt(np.pi)


class Exp(Function):
    """``y = eˣ``; ``dx = g ⊙ y``."""

    @staticmethod
    def forward(ctx: Context, x: Tensor) -> Tensor:
        with np.errstate(over="ignore"):
            y = from_numpy(np.exp(x.numpy()))
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        return grad * y

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        return f"{operand(g)} ⊙ {out}"


class Expm1(Function):
    """``y = eˣ − 1`` (exact for small x); ``dx = g ⊙ (y + 1)``."""

    @staticmethod
    def forward(ctx: Context, x: Tensor) -> Tensor:
        with np.errstate(over="ignore"):
            y = from_numpy(np.expm1(x.numpy()))
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        return grad * (y + 1)

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        return f"{operand(g)} ⊙ ({out} + 1)"


class Log(Function):
    """``y = ln x``; ``dx = g / x``."""

    @staticmethod
    def forward(ctx: Context, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        with np.errstate(divide="ignore", invalid="ignore"):
            return from_numpy(np.log(x.numpy()))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return grad / x

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        return f"{operand(g)} / {operand(x[0])}"


class Log1p(Function):
    """``y = ln(1 + x)`` (exact for small x); ``dx = g / (1 + x)``."""

    @staticmethod
    def forward(ctx: Context, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        with np.errstate(divide="ignore", invalid="ignore"):
            return from_numpy(np.log1p(x.numpy()))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return grad / (x + 1)

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        return f"{operand(g)} / (1 + {x[0]})"


class Sqrt(Function):
    """``y = √x``; ``dx = g / (2 y)``."""

    @staticmethod
    def forward(ctx: Context, x: Tensor) -> Tensor:
        with np.errstate(invalid="ignore"):
            y = from_numpy(np.sqrt(x.numpy()))
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        return grad / (2 * y)

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        return f"{operand(g)} / (2 · {out})"


class Rsqrt(Function):
    """``y = 1 / √x``; ``dx = −½ g ⊙ y³``."""

    @staticmethod
    def forward(ctx: Context, x: Tensor) -> Tensor:
        with np.errstate(divide="ignore", invalid="ignore"):
            y = from_numpy(1 / np.sqrt(x.numpy()))
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        return -0.5 * grad * y * y * y

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        return f"−½ {operand(g)} ⊙ {out}³"


class Square(Function):
    """``y = x²``; ``dx = 2 g ⊙ x``."""

    @staticmethod
    def forward(ctx: Context, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        array = x.numpy()
        return from_numpy(array * array)

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return 2 * grad * x

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        return f"2 {operand(g)} ⊙ {operand(x[0])}"


class Reciprocal(Function):
    """``y = 1 / x``; ``dx = −g ⊙ y²``."""

    @staticmethod
    def forward(ctx: Context, x: Tensor) -> Tensor:
        with np.errstate(divide="ignore", invalid="ignore"):
            y = from_numpy(1 / x.numpy())
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        return -grad * y * y

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        return f"−{operand(g)} ⊙ {out}²"


class Tanh(Function):
    """``y = tanh x``; ``dx = g ⊙ (1 − y²)``, one op of its own: :class:`TanhBackward`."""

    @staticmethod
    def forward(ctx: Context, x: Tensor) -> Tensor:
        y = from_numpy(np.tanh(x.numpy()))
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        return TanhBackward.apply(grad, y)

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        return f"{operand(g)} ⊙ (1 − {out}²)"


class TanhBackward(Function):
    """tanh's backward as an op, as PyTorch's ``tanh_backward``: ``out = g ⊙ (1 − y²)`` from the
    gradient ``g`` and tanh's output ``y`` (one op, not a square, a subtraction and a product).

    Its own rule, for a second derivative: ``dg = h ⊙ (1 − y²)`` (itself again) and
    ``dy = −2 h ⊙ g ⊙ y``, with ``h`` the gradient of ``out``.
    """

    @staticmethod
    def forward(ctx: Context, grad: Tensor, y: Tensor) -> Tensor:
        ctx.save_for_backward(grad if ctx.needs_input_grad[1] else None, y)
        t = y.numpy()
        return from_numpy(binary("mul", grad.numpy(),
                                 binary("sub", np.array(1, t.dtype), binary("mul", t, t))))

    @staticmethod
    def backward(ctx: Context, h: Tensor) -> tuple[Tensor | None, Tensor | None]:
        grad, y = ctx.saved_tensors
        need_grad, need_y = ctx.needs_input_grad
        return (TanhBackward.apply(h, y) if need_grad else None,
                -2 * h * grad * y if need_y else None)

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        if slot == 0:
            return f"{operand(g)} ⊙ (1 − {operand(x[1])}²)"
        return f"−2 {operand(g)} ⊙ {operand(x[0])} ⊙ {operand(x[1])}"


def _on_kernel(kernel: Callable[[np.ndarray], np.ndarray], array: np.ndarray) -> np.ndarray:
    """``kernel(array)`` for an elementwise kernel of float32 and float64: float16 is computed
    in float32 and rounded back."""
    if array.dtype == np.float16:
        return kernel(array.astype(np.float32)).astype(np.float16)
    return kernel(array)


class Sigmoid(Function):
    """``y = 1 / (1 + e⁻ˣ)`` (computed without overflow, on the kernel of
    :mod:`tinyattn.kernels.special`); ``dx = g ⊙ y ⊙ (1 − y)``."""

    @staticmethod
    def forward(ctx: Context, x: Tensor) -> Tensor:
        y = from_numpy(_on_kernel(sigmoid_kernel, x.numpy()))
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        return SigmoidBackward.apply(grad, y)

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        return f"{operand(g)} ⊙ {out} ⊙ (1 − {out})"


class SigmoidBackward(Function):
    """sigmoid's backward as an op, as PyTorch's ``sigmoid_backward``: ``out = g ⊙ y ⊙ (1 − y)``
    from the gradient ``g`` and sigmoid's output ``y``.

    Its own rule, for a second derivative: ``dg = h ⊙ y ⊙ (1 − y)`` (itself again) and
    ``dy = h ⊙ g ⊙ (1 − 2y)``, with ``h`` the gradient of ``out``.
    """

    @staticmethod
    def forward(ctx: Context, grad: Tensor, y: Tensor) -> Tensor:
        ctx.save_for_backward(grad if ctx.needs_input_grad[1] else None, y)
        s = y.numpy()
        return from_numpy(binary("mul", grad.numpy(),
                                 binary("mul", s, binary("sub", np.array(1, s.dtype), s))))

    @staticmethod
    def backward(ctx: Context, h: Tensor) -> tuple[Tensor | None, Tensor | None]:
        grad, y = ctx.saved_tensors
        need_grad, need_y = ctx.needs_input_grad
        return (SigmoidBackward.apply(h, y) if need_grad else None,
                h * grad * (1 - 2 * y) if need_y else None)

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        if slot == 0:
            return f"{operand(g)} ⊙ {operand(x[1])} ⊙ (1 − {operand(x[1])})"
        return f"{operand(g)} ⊙ {operand(x[0])} ⊙ (1 − 2{operand(x[1])})"


class Relu(Function):
    """``y = max(x, 0)`` (NaN stays NaN); ``dx = 0`` where ``y ≤ 0`` (0 at the kink), else ``g``
    (a NaN input passes its gradient on, as in PyTorch)."""

    @staticmethod
    def forward(ctx: Context, x: Tensor) -> Tensor:
        y = from_numpy(_clamped(x.numpy(), 0, None))
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        from .masking import where

        (y,) = ctx.saved_tensors
        return where(y <= 0, 0.0, grad)

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        return f"{operand(g)} ⊙ [{x[0]} > 0]"


class Abs(Function):
    """``y = |x|``; ``dx = g ⊙ sign(x)`` (0 at 0 and at NaN, as PyTorch's ``sign``)."""

    @staticmethod
    def forward(ctx: Context, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return from_numpy(np.abs(x.numpy()))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return grad * sign(x)

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        return f"{operand(g)} ⊙ sign({x[0]})"


class Piecewise(Function):
    """A piecewise-constant function (``sign``, ``floor``, ``ceil``, ``round``, ``trunc``):
    ``y = f(x)``; ``dx = 0`` (its derivative is zero wherever it exists, as in PyTorch)."""

    keeps_inputs = False

    @staticmethod
    def forward(ctx: Context, x: Tensor, fn: Callable[[np.ndarray], np.ndarray]) -> Tensor:
        return from_numpy(np.asarray(fn(x.numpy()), dtype=x.dtype))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> tuple[Tensor, None]:
        return zeros_like(grad), None

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        return "0"


class Sin(Function):
    """``y = sin x``; ``dx = g ⊙ cos x``."""

    @staticmethod
    def forward(ctx: Context, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return from_numpy(np.sin(x.numpy()))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return grad * cos(x)

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        return f"{operand(g)} ⊙ cos {x[0]}"


class Cos(Function):
    """``y = cos x``; ``dx = −g ⊙ sin x``."""

    @staticmethod
    def forward(ctx: Context, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return from_numpy(np.cos(x.numpy()))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return -grad * sin(x)

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        return f"−{operand(g)} ⊙ sin {x[0]}"


class Erf(Function):
    """``y = erf x``; ``dx = g ⊙ 2/√π · e^(−x²)``."""

    @staticmethod
    def forward(ctx: Context, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return from_numpy(_on_kernel(erf_kernel, x.numpy()))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return grad * _TWO_OVER_SQRT_PI * exp(-x * x)

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        return f"{operand(g)} ⊙ 2/√π · e^(−{x[0]}²)"


class Clamp(Function):
    """``y = min(max(x, low), high)`` (``high`` wins where ``low > high``, as in PyTorch);
    ``dx = g`` where ``low ≤ x ≤ high``, else 0."""

    @staticmethod
    def forward(ctx: Context, x: Tensor, low: float | None, high: float | None) -> Tensor:
        ctx.save_for_backward(x)
        return from_numpy(_clamped(x.numpy(), low, high))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> tuple[Tensor, None, None]:
        from .masking import where

        (x,) = ctx.saved_tensors
        _, low, high = ctx.inputs
        inside = None if low is None else x >= low
        if high is not None:
            inside = x <= high if inside is None else inside & (x <= high)
        return where(inside, grad, 0.0), None, None

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        return f"{operand(g)} ⊙ [low ≤ {x[0]} ≤ high]"


def _clamped(array: np.ndarray, low: float | None, high: float | None) -> np.ndarray:
    """``min(max(array, low), high)``: the kernel for floats, its numpy twin for the rest."""
    if array.dtype in FLOAT_DTYPES:
        return clamp_kernel(array, low, high)
    return clamp_numpy(array, low, high)


class Cast(Function):
    """``y = x`` in another dtype; ``dx = g`` (the engine casts it back to x's dtype)."""

    keeps_inputs = False

    @staticmethod
    def forward(ctx: Context, x: Tensor, dtype: np.dtype) -> Tensor:
        return from_numpy(x.numpy().astype(dtype))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> tuple[Tensor, None]:
        return grad, None

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        return g


def _float_op(op: str, function: type[Function], doc: str) -> Callable[[Tensor], Tensor]:
    """The public function ``op``: ``function`` on the input made floating point."""

    def apply(input: Tensor) -> Tensor:
        if type(input) is Tensor and input._data.dtype.kind == "f":
            return function.apply(input)
        return function.apply(floating(op, input))

    apply.__name__ = apply.__qualname__ = op
    apply.__doc__ = doc
    return apply


exp = _float_op("exp", Exp, "Elementwise ``e^x``.")
expm1 = _float_op("expm1", Expm1, "Elementwise ``e^x − 1``, exact for small ``x``.")
log = _float_op("log", Log, "Elementwise natural log (``-inf`` at 0 and NaN below, as numpy and "
                "PyTorch).")
log1p = _float_op("log1p", Log1p, "Elementwise ``ln(1 + x)``, exact for small ``x``.")
sqrt = _float_op("sqrt", Sqrt, "Elementwise square root.")
rsqrt = _float_op("rsqrt", Rsqrt, "Elementwise ``1 / √x``.")
reciprocal = _float_op("reciprocal", Reciprocal, "Elementwise ``1 / x``.")
tanh = _float_op("tanh", Tanh, "Elementwise hyperbolic tangent.")
sigmoid = _float_op("sigmoid", Sigmoid, "Elementwise logistic sigmoid.")
sin = _float_op("sin", Sin, "Elementwise sine.")
cos = _float_op("cos", Cos, "Elementwise cosine.")
erf = _float_op("erf", Erf, "Elementwise error function.")


def _numeric(op: str, input: Tensor) -> Tensor:
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(input).__name__}")
    if input.dtype.kind == "b":
        raise DTypeError(f"{op}: boolean inputs are not supported")
    return input


def square(input: Tensor) -> Tensor:
    """Elementwise ``x²`` (integers stay integers; bool becomes int64, as in PyTorch)."""
    if isinstance(input, Tensor) and input.dtype.kind in "iub":
        array = input.numpy().astype(np.int64) if input.dtype.kind == "b" else input.numpy()
        return from_numpy(array * array)
    return Square.apply(_numeric("square", input))


def relu(input: Tensor) -> Tensor:
    """Elementwise ``max(x, 0)``."""
    return Relu.apply(_numeric("relu", input))


def abs(input: Tensor) -> Tensor:
    """Elementwise absolute value."""
    return Abs.apply(_numeric("abs", input))


def sign(input: Tensor) -> Tensor:
    """Elementwise −1, 0 or 1 (0 for NaN, and True/False for bool); zero gradient."""
    if not isinstance(input, Tensor):
        raise TypeError(f"sign: expected a Tensor, got {type(input).__name__}")
    if input.dtype.kind == "b":
        return input.clone()
    return Piecewise.apply(input, _sign)


def _sign(x: np.ndarray) -> np.ndarray:
    """−1, 0 or 1, and 0 for NaN (PyTorch's ``sign``)."""
    return np.where(np.isnan(x), np.zeros((), x.dtype), np.sign(x))


def _rounding(op: str, fn: Callable[[np.ndarray], np.ndarray]) -> Callable[[Tensor], Tensor]:
    def rounded(input: Tensor) -> Tensor:
        x = _numeric(op, input)
        return x.clone() if x.dtype.kind in "iu" else Piecewise.apply(x, fn)

    rounded.__name__ = rounded.__qualname__ = op
    rounded.__doc__ = f"Elementwise {op} (integers unchanged); zero gradient."
    return rounded


floor = _rounding("floor", np.floor)
ceil = _rounding("ceil", np.ceil)
trunc = _rounding("trunc", np.trunc)


def round(input: Tensor, decimals: int = 0) -> Tensor:
    """Elementwise rounding to ``decimals`` places, halves to even (as PyTorch); zero
    gradient."""
    if not is_int(decimals):
        raise TypeError(f"round: decimals must be an int, got {decimals!r}")
    x = _numeric("round", input)
    if x.dtype.kind in "iu":
        return x.clone()
    return Piecewise.apply(x, np.round if decimals == 0 else _round_to(int(decimals)))


def _round_to(decimals: int) -> Callable[[np.ndarray], np.ndarray]:
    def rounded(x: np.ndarray) -> np.ndarray:
        return np.round(x, decimals)

    return rounded


def clamp(input: Tensor, min: float | None = None, max: float | None = None) -> Tensor:
    """Elementwise ``min(max(x, min), max)``; at least one bound must be given (``max`` wins
    where ``min > max``, as in PyTorch).

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
            get_default_dtype()
    return Clamp.apply(cast(input, dtype), low, high)


def _bound(label: str, bound: object) -> int | float | None:
    if isinstance(bound, Tensor) and bound.numel() == 1:
        bound = bound.item()
    if bound is not None and not is_number(bound):
        raise TypeError(f"clamp: {label} must be a number or None, got {bound!r}")
    return bound


def cast(input: Tensor, dtype: object) -> Tensor:
    """``input`` converted to ``dtype``; differentiable between float dtypes."""
    target = as_dtype(dtype, "to")
    if target == input.dtype:
        return input
    if target.kind != "f" or input.dtype.kind != "f":
        return from_numpy(input.numpy().astype(target))
    return Cast.apply(input, target)

"""Elementwise arithmetic: add, sub, mul, div, neg, pow (and the integer floor_divide/remainder).

Every backward here returns a gradient of the *output* (broadcast) shape; the engine's
``unbroadcast`` sums it back to each input's shape. Operands are promoted as PyTorch does
(:mod:`.operands`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..autograd import Context, Function
from ..creation import zeros_like
from ..errors import DTypeError
from ..kernels.elementwise import binary
from ..tensor import Tensor, from_numpy
from ..validation import broadcast_shapes, is_number
from .notation import operand, scaled_or_elementwise, summed_to_input
from .operands import operands


class Add(Function):
    """``out = a + b``; ``da = g``, ``db = g``."""

    keeps_inputs = False

    @staticmethod
    def forward(ctx: Context, a: Tensor, b: Tensor) -> Tensor:
        return from_numpy(binary("add", a.numpy(), b.numpy()))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> tuple[Tensor, Tensor]:
        return grad, grad

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        return summed_to_input(node, slot, g)


class Sub(Function):
    """``out = a − b``; ``da = g``, ``db = −g``."""

    keeps_inputs = False

    @staticmethod
    def forward(ctx: Context, a: Tensor, b: Tensor) -> Tensor:
        return from_numpy(binary("sub", a.numpy(), b.numpy()))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> tuple[Tensor, Tensor | None]:
        return grad, (-grad if ctx.needs_input_grad[1] else None)

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        return summed_to_input(node, slot, g if slot == 0 else f"−{operand(g)}")


class Mul(Function):
    """``out = a ⊙ b``; chain rule: ``da = g ⊙ b``, ``db = g ⊙ a``."""

    @staticmethod
    def forward(ctx: Context, a: Tensor, b: Tensor) -> Tensor:
        need_a, need_b = ctx.needs_input_grad
        ctx.save_for_backward(a if need_b else None, b if need_a else None)
        return from_numpy(binary("mul", a.numpy(), b.numpy()))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> tuple[Tensor | None, Tensor | None]:
        a, b = ctx.saved_tensors
        return (grad * b if b is not None else None, grad * a if a is not None else None)

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        return summed_to_input(node, slot, scaled_or_elementwise(node, slot, g, x[1 - slot]))


class Div(Function):
    """``out = a / b``; ``da = g / b``, ``db = −g ⊙ a / b²``."""

    @staticmethod
    def forward(ctx: Context, a: Tensor, b: Tensor) -> Tensor:
        ctx.save_for_backward(a if ctx.needs_input_grad[1] else None, b)
        with np.errstate(divide="ignore", invalid="ignore"):
            return from_numpy(binary("div", a.numpy(), b.numpy()))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> tuple[Tensor | None, Tensor | None]:
        a, b = ctx.saved_tensors
        need_a, need_b = ctx.needs_input_grad
        return (grad / b if need_a else None, -grad * a / (b * b) if need_b else None)

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        if slot == 0:
            return summed_to_input(node, 0, f"{operand(g)} / {operand(x[1])}")
        return summed_to_input(node, 1, f"−{operand(g)} ⊙ {operand(x[0])} / {operand(x[1])}²")


class Neg(Function):
    """``out = −a``; ``da = −g``."""

    keeps_inputs = False

    @staticmethod
    def forward(ctx: Context, a: Tensor) -> Tensor:
        return from_numpy(-a.numpy())

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        return -grad

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        return f"−{operand(g)}"


def _power(values: np.ndarray, exponent: float) -> np.ndarray:
    """``values ** exponent``, by PyTorch's products at the exponents 2, 3, −2 and −½.

    There PyTorch computes ``x·x``, ``x·x·x``, ``1 / (x·x)`` and ``1 / √x``; numpy calls ``pow``
    for each element (for float32 at 3, about 45 ns an element, sixty times two
    multiplications: half of a minGPT step, whose GELU cubes its activations; at a float 2.0,
    the cube's gradient, 12 ns). The same products give PyTorch's bits. numpy's own ``**``
    takes the root at ½.
    """
    if exponent == 2:
        return binary("mul", values, values)
    if exponent == 3:
        return binary("mul", binary("mul", values, values), values)
    if exponent == -2:
        return binary("div", np.array(1, values.dtype), binary("mul", values, values))
    if exponent == -0.5:
        return binary("div", np.array(1, values.dtype), np.sqrt(values))
    return values ** exponent


class PowScalar(Function):
    """``out = a^p`` for a constant ``p``; ``da = g ⊙ p · a^(p−1)`` (0 when ``p = 0``)."""

    @staticmethod
    def forward(ctx: Context, a: Tensor, exponent: float) -> Tensor:
        ctx.save_for_backward(a)
        ctx.exponent = exponent
        with np.errstate(divide="ignore", invalid="ignore"):
            return from_numpy(_power(a.numpy(), exponent))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> tuple[Tensor, None]:
        (a,) = ctx.saved_tensors
        if ctx.exponent == 0:
            return zeros_like(grad), None
        return grad * ctx.exponent * a ** (ctx.exponent - 1), None

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        p = node.inputs[1]
        return f"{operand(g)} ⊙ {p:g} · {operand(x[0])}^{p - 1:g}"


class Pow(Function):
    """``out = a^b`` for tensors.

    ``da = g ⊙ b ⊙ a^(b−1)`` (0 where ``b = 0``), ``db = g ⊙ a^b ⊙ ln a`` (0 where ``a = 0`` and
    ``b ≥ 0``: the limit of ``a^b ln a``), as PyTorch.
    """

    @staticmethod
    def forward(ctx: Context, a: Tensor, b: Tensor) -> Tensor:
        with np.errstate(divide="ignore", invalid="ignore"):
            out = from_numpy(a.numpy() ** b.numpy())
        ctx.save_for_backward(a, b, out if ctx.needs_input_grad[1] else None)
        return out

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> tuple[Tensor | None, Tensor | None]:
        from .masking import where
        from .unary import log

        a, b, out = ctx.saved_tensors
        need_a, need_b = ctx.needs_input_grad
        da = where(b == 0, 0.0, grad * b * a ** (b - 1)) if need_a else None
        db = grad * where((a == 0) & (b >= 0), 0.0, out * log(a)) if need_b else None
        return da, db

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        if slot == 0:
            return summed_to_input(node, 0, f"{operand(g)} ⊙ {x[1]} ⊙ {x[0]}^({x[1]} − 1)")
        return summed_to_input(node, 1, f"{operand(g)} ⊙ {out} ⊙ ln {x[0]}")


def _is_bool(value: Any) -> bool:
    return isinstance(value, (bool, np.bool_)) or getattr(value, "dtype", None) == np.bool_


def _constant(value: int, dtype: np.dtype) -> Tensor:
    """A Python int as a constant 0-d tensor of the integer ``dtype``, cast as the general path
    casts it (:func:`~.operands.to_dtype`)."""
    return Tensor._from_op(np.asarray(value).astype(dtype, copy=False), None)


def _binary(fn: type[Function], name: str, a: Any, b: Any, floating: bool = False) -> Tensor:
    """Apply the binary op ``fn`` after PyTorch's promotion and a broadcast check."""
    # The common cases first: two float tensors of one dtype, a float tensor and a Python
    # number, or an integer tensor and a Python int (the number takes the tensor's dtype; an
    # integer result only when the op does not ask for a float one).
    if isinstance(a, Tensor):
        kind = a._data.dtype.kind
        if kind == "f":
            if isinstance(b, Tensor):
                if b._data.dtype == a._data.dtype:
                    if a._data.shape != b._data.shape:
                        broadcast_shapes(name, a._data.shape, b._data.shape)
                    return fn.apply(a, b)
            elif type(b) is float or type(b) is int:
                return fn.apply(a, Tensor._from_op(np.asarray(b, a._data.dtype), None))
        elif (kind == "i" or kind == "u") and type(b) is int and not floating:
            return fn.apply(a, _constant(b, a._data.dtype))
    elif isinstance(b, Tensor) and (type(a) is float or type(a) is int):
        kind = b._data.dtype.kind
        if kind == "f":
            return fn.apply(Tensor._from_op(np.asarray(a, b._data.dtype), None), b)
        if (kind == "i" or kind == "u") and type(a) is int and not floating:
            return fn.apply(_constant(a, b._data.dtype), b)
    if fn is Sub and (_is_bool(a) or _is_bool(b)):
        raise DTypeError("sub: subtraction, the `-` operator, with a bool tensor is not "
                         "supported; use the `^` or logical_xor() operator instead")
    a_t, b_t = operands(name, a, b, floating=floating)
    broadcast_shapes(name, a_t.shape, b_t.shape)
    return fn.apply(a_t, b_t)


def add(input: Any, other: Any, alpha: Any = 1) -> Tensor:
    """Elementwise ``input + alpha · other`` with broadcasting.

    Examples
    --------
    >>> import tinyattn as ta
    >>> ta.add(ta.tensor([1, 2]), 0.5).tolist()     # int64 + a float: float32
    [1.5, 2.5]
    """
    if not (isinstance(alpha, (int, np.integer)) and alpha == 1):
        other = mul(other, alpha)
    return _binary(Add, "add", input, other)


def sub(input: Any, other: Any, alpha: Any = 1) -> Tensor:
    """Elementwise ``input - alpha · other`` with broadcasting."""
    if not (isinstance(alpha, (int, np.integer)) and alpha == 1):
        other = mul(other, alpha)
    return _binary(Sub, "sub", input, other)


def mul(input: Any, other: Any) -> Tensor:
    """Elementwise ``input * other`` with broadcasting."""
    return _binary(Mul, "mul", input, other)


def div(input: Any, other: Any, rounding_mode: str | None = None) -> Tensor:
    """Elementwise true division (integers give floats), or ``'floor'``/``'trunc'`` rounding."""
    if rounding_mode is None:
        return _binary(Div, "div", input, other, floating=True)
    if rounding_mode == "floor":
        return floor_divide(input, other)
    if rounding_mode == "trunc":
        a, b = operands("div", input, other)
        x, y = a.numpy(), b.numpy()
        if a.dtype.kind == "f":
            broadcast_shapes("div", a.shape, b.shape)
            with np.errstate(divide="ignore", invalid="ignore"):
                return Tensor(np.asarray(np.trunc(x / y)).astype(a.dtype, copy=False))
        _check_divisor("div", a, b)
        # exact in integers (a float quotient loses digits past 2**53): the floor quotient,
        # moved up by one where it rounded a negative quotient down
        q = np.asarray(np.floor_divide(x, y))
        return Tensor(q + ((np.remainder(x, y) != 0) & ((x < 0) != (y < 0))).astype(q.dtype))
    raise ValueError(f"div: rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")


def neg(input: Tensor) -> Tensor:
    """Elementwise ``-input``."""
    if input.dtype.kind == "b":
        raise DTypeError("neg: negation, the `-` operator, on a bool tensor is not supported; "
                           "to invert a mask use `~` or logical_not()")
    return Neg.apply(input)


def pow(input: Any, exponent: Any) -> Tensor:
    """Elementwise ``input ** exponent``; a Python-number exponent is a constant.

    Integer tensors to a negative Python-int power are an error (as in PyTorch).
    """
    if isinstance(input, Tensor) and is_number(exponent):
        if input.dtype.kind in "iub" and isinstance(exponent, (int, np.integer)):
            if exponent < 0:
                raise DTypeError("pow: integers to negative integer powers are not allowed")
            base = input if input.dtype.kind != "b" else input.to(np.int64)
            return Tensor(base.numpy()**exponent)
        base = input if input.dtype.kind == "f" else input.to(np.float32)
        return PowScalar.apply(base, exponent)
    if _is_bool(input) and _is_bool(exponent):
        raise DTypeError("pow: a bool to a bool power is not supported (PyTorch has no bool pow)")
    a, b = operands("pow", input, exponent)
    broadcast_shapes("pow", a.shape, b.shape)
    if a.dtype.kind in "iub":
        if a.dtype.kind == "b":
            a, b = a.to(np.int64), b.to(np.int64)
        return Tensor(_integer_power(a.numpy(), b.numpy()))
    return Pow.apply(a, b)


def _integer_power(base: np.ndarray, exponent: np.ndarray) -> np.ndarray:
    """``base ** exponent`` for integers, with PyTorch's results for negative exponents."""
    negative = exponent < 0
    safe = np.where(negative, 0, exponent)
    result = base**safe
    odd = (exponent % 2) != 0
    reciprocal = np.where(base == 1, 1, np.where(base == -1, np.where(odd, -1, 1), 0))
    return np.where(negative, reciprocal, result).astype(result.dtype)


class FloorDivide(Function):
    """``y = floor(a / b)``: piecewise constant, and, as in PyTorch, without a derivative."""

    @staticmethod
    def forward(ctx: Context, a: Tensor, b: Tensor) -> Tensor:
        with np.errstate(divide="ignore", invalid="ignore"):
            return from_numpy(np.floor_divide(a.numpy(), b.numpy()))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> tuple[None, None]:
        raise RuntimeError("floor_divide: the derivative of floor_divide is not implemented "
                           "(it is zero almost everywhere; PyTorch refuses it too)")

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        return "(no derivative: floor_divide is refused by backward)"


class Remainder(Function):
    """``y = a − b · floor(a / b)`` (the sign of ``b``); ``da = g``, ``db = −g · floor(a / b)``."""

    @staticmethod
    def forward(ctx: Context, a: Tensor, b: Tensor) -> Tensor:
        with np.errstate(divide="ignore", invalid="ignore"):
            quotient = from_numpy(np.floor_divide(a.numpy(), b.numpy()))
            ctx.save_for_backward(quotient)
            return from_numpy(np.remainder(a.numpy(), b.numpy()))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> tuple[Tensor, Tensor]:
        (quotient,) = ctx.saved_tensors
        return grad, -grad * quotient

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        if slot == 0:
            return summed_to_input(node, 0, g)
        return summed_to_input(node, 1, f"−{operand(g)} ⊙ floor({x[0]} / {x[1]})")


def _check_divisor(op: str, a: Tensor, b: Tensor) -> None:
    """Refuse bool operands, and an integer division with a zero divisor, as PyTorch does: only
    when the result has elements (over an empty broadcast no division takes place)."""
    if a.dtype.kind == "b":
        raise DTypeError(f"{op}: bool tensors are not supported")
    shape = broadcast_shapes(op, a.shape, b.shape)
    if a.dtype.kind in "iu" and math.prod(shape) and (b.numpy() == 0).any():
        raise ZeroDivisionError(f"{op}: integer division by zero")


def floor_divide(input: Any, other: Any) -> Tensor:
    """Elementwise ``floor(input / other)``, as ``torch.floor_divide`` (``//``)."""
    a, b = operands("floor_divide", input, other)
    _check_divisor("floor_divide", a, b)
    return FloorDivide.apply(a, b)


def remainder(input: Any, other: Any) -> Tensor:
    """Elementwise remainder with the sign of ``other`` (Python's ``%``)."""
    a, b = operands("remainder", input, other)
    _check_divisor("remainder", a, b)
    return Remainder.apply(a, b)

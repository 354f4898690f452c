"""Comparisons and logic: ``== != < <= > >=``, ``& | ^ ~``, maximum/minimum, isclose and friends.

Comparisons return bool tensors without grad (computed in the promoted dtype, as PyTorch);
``maximum``/``minimum`` are differentiable: the gradient goes to the larger (smaller) input,
split in half where the two are equal.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..autograd import Context, Function
from ..tensor import Tensor, check_tensor, from_numpy
from ..validation import broadcast_shapes
from .notation import operand, summed_to_input
from .operands import operands


def _comparison(op: str, ufunc: np.ufunc, symbol: str) -> Callable[[Any, Any], Tensor]:
    """The public comparison ``op``: ``ufunc`` on the promoted, broadcast operands."""

    def compare(input: Any, other: Any) -> Tensor:
        if type(input) is Tensor and type(other) is Tensor and input.dtype == other.dtype:
            a, b = input, other  # already of one dtype
        else:
            a, b = operands(op, input, other)
        broadcast_shapes(op, a.shape, b.shape)
        return from_numpy(np.asarray(ufunc(a.numpy(), b.numpy())))

    compare.__name__ = compare.__qualname__ = op
    compare.__doc__ = f"Elementwise ``input {symbol} other``."
    return compare


eq = _comparison("eq", np.equal, "==")
ne = _comparison("ne", np.not_equal, "!=")
lt = _comparison("lt", np.less, "<")
le = _comparison("le", np.less_equal, "<=")
gt = _comparison("gt", np.greater, ">")
ge = _comparison("ge", np.greater_equal, ">=")

_LOGICAL = {"and": (np.logical_and, np.bitwise_and), "or": (np.logical_or, np.bitwise_or),
            "xor": (np.logical_xor, np.bitwise_xor)}


def logical_op(kind: str, input: Any, other: Any) -> Tensor:
    """``&``, ``|``, ``^`` (and ``~`` for ``kind='not'``): logical on bool, bitwise on integers."""
    if kind == "not":
        check_tensor("invert", "input", input)
        if input.dtype.kind == "f":
            raise TypeError(f"invert: ~ needs a bool or integer tensor, got dtype {input.dtype}")
        return Tensor(np.logical_not(input.numpy()) if input.dtype.kind == "b" else
                      np.invert(input.numpy()))
    a, b = operands(kind, input, other)
    if a.dtype.kind == "f":
        raise TypeError(f"bitwise {kind} is not defined for floating point dtype {a.dtype}")
    broadcast_shapes(kind, a.shape, b.shape)
    logical, bitwise = _LOGICAL[kind]
    return Tensor(np.asarray((logical if a.dtype.kind == "b" else bitwise)(a.numpy(), b.numpy())))


def logical_not(input: Tensor) -> Tensor:
    """Elementwise ``not`` (nonzero counts as True)."""
    return Tensor(np.logical_not(input.numpy()))


def logical_and(input: Tensor, other: Tensor) -> Tensor:
    """Elementwise ``and`` (nonzero counts as True)."""
    return Tensor(np.logical_and(input.numpy(), other.numpy()))


def logical_or(input: Tensor, other: Tensor) -> Tensor:
    """Elementwise ``or`` (nonzero counts as True)."""
    return Tensor(np.logical_or(input.numpy(), other.numpy()))


class Maximum(Function):
    """``y = max(a, b)`` (``min`` when not ``largest``); ``da = g`` where ``a`` wins, ``g/2``
    where ``a = b``, 0 where it loses (``db`` alike). NaN loses to nothing: both sides of a NaN
    comparison get the whole gradient, as in PyTorch."""

    @staticmethod
    def forward(ctx: Context, a: Tensor, b: Tensor, *, largest: bool) -> Tensor:
        ctx.save_for_backward(a, b)
        x, y = a.numpy(), b.numpy()
        return from_numpy(np.maximum(x, y) if largest else np.minimum(x, y))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> tuple[Tensor | None, Tensor | None]:
        from .masking import where

        a, b = ctx.saved_tensors
        need_a, need_b = ctx.needs_input_grad
        largest = ctx.kwargs["largest"]
        shared = where(a == b, grad / 2, grad)
        da = where(a < b if largest else a > b, 0.0, shared) if need_a else None
        db = where(b < a if largest else b > a, 0.0, shared) if need_b else None
        return da, db

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        wins = ">" if node.kwargs["largest"] else "<"
        mine, other = x[slot], x[1 - slot]
        return summed_to_input(node, slot, f"{operand(g)} ⊙ ([{mine} {wins} {other}] + "
                                           f"½ [{mine} = {other}])")


def _extreme(op: str, input: Any, other: Any, largest: bool) -> Tensor:
    a, b = operands(op, input, other)
    broadcast_shapes(op, a.shape, b.shape)
    if a.dtype.kind in "iub":
        return Tensor((np.maximum if largest else np.minimum)(a.numpy(), b.numpy()))
    return Maximum.apply(a, b, largest=largest)


def maximum(input: Any, other: Any) -> Tensor:
    """Elementwise maximum (NaN if either is NaN)."""
    return _extreme("maximum", input, other, True)


def minimum(input: Any, other: Any) -> Tensor:
    """Elementwise minimum (NaN if either is NaN)."""
    return _extreme("minimum", input, other, False)


def isclose(input: Tensor, other: Tensor, rtol: float = 1e-5, atol: float = 1e-8,
            equal_nan: bool = False) -> Tensor:
    """Elementwise ``|input − other| <= atol + rtol·|other|``."""
    a, b = operands("isclose", input, other)
    return Tensor(np.isclose(a.numpy(), b.numpy(), rtol=rtol, atol=atol, equal_nan=equal_nan))


def allclose(input: Tensor, other: Tensor, rtol: float = 1e-5, atol: float = 1e-8,
             equal_nan: bool = False) -> bool:
    """Whether :func:`isclose` holds everywhere (shapes broadcast)."""
    a, b = operands("allclose", input, other)
    broadcast_shapes("allclose", a.shape, b.shape)
    return bool(np.allclose(a.numpy(), b.numpy(), rtol=rtol, atol=atol, equal_nan=equal_nan))


def equal(input: Tensor, other: Tensor) -> bool:
    """Whether the two tensors have the same shape and elements."""
    return input.shape == other.shape and bool(np.array_equal(input.numpy(), other.numpy()))


def isnan(input: Tensor) -> Tensor:
    """Elementwise ``x != x``."""
    return Tensor(np.isnan(input.numpy()) if input.dtype.kind == "f" else
                  np.zeros(input.shape, bool))


def isinf(input: Tensor) -> Tensor:
    """Elementwise ``|x| == inf``."""
    return Tensor(np.isinf(input.numpy()) if input.dtype.kind == "f" else
                  np.zeros(input.shape, bool))


def isfinite(input: Tensor) -> Tensor:
    """Elementwise: neither NaN nor infinite."""
    return Tensor(np.isfinite(input.numpy()) if input.dtype.kind == "f" else
                  np.ones(input.shape, bool))

"""The argument guards, written once: each raises an error that names the op and what it got.

Every public function of tinyattn (ops, ``nn.functional``, layers, optimizers) checks its
arguments with these before anything runs; the kernels below only assert their preconditions.
The guards that ask "is this a tensor?" live beside :class:`tinyattn.tensor.Tensor`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .errors import DTypeError, ShapeError


def is_int(value: Any) -> bool:
    """Whether ``value`` is an integer (and not a bool, which Python counts as one)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def is_number(value: Any) -> bool:
    """Whether ``value`` is a real number (int or float, not a bool)."""
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
        value, (bool, np.bool_))


def check_int(op: str, label: str, value: Any, minimum: int | None = None) -> int:
    """``value`` as an int, or a TypeError/ValueError naming ``op`` and ``label``."""
    if not is_int(value):
        raise TypeError(f"{op}: {label} must be an int, got {type(value).__name__} {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{op}: {label} must be an int >= {minimum}, got {value}")
    return int(value)


def check_number(op: str, label: str, value: Any, low: float | None = None,
                 high: float | None = None, finite: bool = True) -> float:
    """``value`` as a float within ``[low, high]``, or an error naming ``op`` and ``label``."""
    if not is_number(value):
        raise TypeError(f"{op}: {label} must be a real number, got {type(value).__name__} "
                        f"{value!r}")
    value = float(value)
    if math.isnan(value) or (finite and not math.isfinite(value)):
        raise ValueError(f"{op}: {label} must be a finite number, got {value}")
    if (low is not None and value < low) or (high is not None and value > high):
        if low is not None and high is not None:
            wanted = f"in [{low:g}, {high:g}]"
        else:
            wanted = f">= {low:g}" if low is not None else f"<= {high:g}"
        raise ValueError(f"{op}: {label} must be a number {wanted}, got {value}")
    return value


def check_probability(op: str, p: Any) -> float:
    """A dropout probability: a number in [0, 1]."""
    return check_number(op, "dropout probability p", p, 0.0, 1.0)


def check_same_dtype(op: str, **tensors: Any) -> None:
    """PyTorch refuses mixed float dtypes in matmul-like ops: so does tinyattn."""
    present = {label: t.dtype for label, t in tensors.items() if t is not None}
    if len(set(present.values())) > 1:
        listed = ", ".join(f"{label} {dtype}" for label, dtype in present.items())
        raise DTypeError(f"{op}: expected all inputs to have the same dtype, got {listed}")


def check_choice(op: str, label: str, value: Any, choices: Sequence[Any]) -> Any:
    """``value`` if it is one of ``choices``, else a ValueError listing them."""
    if value not in choices:
        names = [repr(c) for c in choices]
        listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + f" or {names[-1]}"
        raise ValueError(f"{op}: {label} must be {listed}, got {value!r}")
    return value


def normalize_dim(op: str, dim: Any, ndim: int, extra: int = 0) -> int:
    """Turn a possibly negative ``dim`` into an index in ``[0, ndim + extra)``.

    A 0-d tensor accepts ``dim`` 0 and -1, as in PyTorch. ``extra=1`` is for ops such as
    ``unsqueeze``/``stack`` that insert a new axis.
    """
    size = ndim + extra if extra else max(ndim, 1)
    if type(dim) is int and -size <= dim < size:  # the common case, in two comparisons
        return dim % size
    if not is_int(dim):
        raise TypeError(f"{op}: dim must be an int, got {type(dim).__name__}")
    if not -size <= dim < size:
        raise IndexError(
            f"{op}: dim {dim} is out of range for a tensor of {ndim} dims "
            f"(expected a dim in [{-size}, {size - 1}])"
        )
    return int(dim) % size


def normalize_dims(op: str, dim: int | Sequence[int] | None, ndim: int) -> tuple[int, ...]:
    """All axes when ``dim`` is None, else the normalised axes (none at all for a 0-d tensor).

    An empty tuple/list means all axes, as in PyTorch's reductions.
    """
    if dim is None:
        return tuple(range(ndim))
    dims = tuple(dim) if isinstance(dim, (tuple, list)) else (dim,)
    if not dims:
        return tuple(range(ndim))
    axes = tuple(normalize_dim(op, d, ndim) for d in dims)
    if len(set(axes)) != len(axes):
        raise ShapeError(f"{op}: dim {dim} names the same axis twice")
    return axes if ndim else ()


def broadcast_shapes(op: str, *shapes: tuple[int, ...]) -> tuple[int, ...]:
    """The broadcast of ``shapes``, or a ShapeError naming every shape (as PyTorch).

    numpy's rule, in Python (numpy's ``broadcast_shapes`` builds arrays to find it: 1.5 µs
    against 1.0 for the two shapes of an op, 12 times as long for two equal ones): the shapes
    are aligned at their last dims, and each dim is the one size other than 1 its shapes have
    (1 if none), 0 included.
    """
    if len(shapes) == 2 and shapes[0] == shapes[1]:
        return tuple(shapes[0])
    ndim = max(map(len, shapes), default=0)
    out = [1] * ndim
    for shape in shapes:
        for axis, n in enumerate(shape, ndim - len(shape)):
            if n != 1:
                if out[axis] != 1 and out[axis] != n:
                    listed = " and ".join(str(tuple(s)) for s in shapes)
                    raise ShapeError(f"{op}: shapes {listed} are not broadcastable (each dim "
                                     "must match or be 1)")
                out[axis] = n
    return tuple(out)


def shape_arg(op: str, sizes: tuple, required: bool = False) -> tuple[int, ...]:
    """Sizes given as ``f(2, 3)``, ``f((2, 3))`` or ``f([2, 3])``, checked to be ints.

    ``required``: calling ``f()`` with no sizes at all is a TypeError (as PyTorch's
    ``permute``, ``expand`` and ``repeat``); ``f(())`` is allowed.
    """
    if required and not sizes:
        raise TypeError(f"{op}: missing the required sizes/dims argument")
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = tuple(sizes[0])
    if len(sizes) == 1 and hasattr(sizes[0], "tolist") and getattr(sizes[0], "ndim", 0) == 1:
        sizes = tuple(sizes[0].tolist())
    for n in sizes:
        if not is_int(n) and not (hasattr(n, "__index__") and not isinstance(n, bool)):
            raise TypeError(f"{op}: sizes must be ints, got {tuple(sizes)}")
    return tuple(int(n) for n in sizes)

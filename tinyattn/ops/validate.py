"""Input checks shared by the ops: each raises an error that names the op and what it got."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def normalize_dim(op: str, dim: int, ndim: int, extra: int = 0) -> int:
    """Turn a possibly negative ``dim`` into an index in ``[0, ndim + extra)``.

    ``extra=1`` is for ops such as ``unsqueeze``/``stack`` that insert a new axis.
    """
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
        raise TypeError(f"{op}: dim must be an int, got {type(dim).__name__}")
    size = ndim + extra
    if not -size <= dim < size or size == 0:
        low, high = -max(size, 1), max(size, 1) - 1
        raise IndexError(
            f"{op}: dim {dim} is out of range for a tensor of {ndim} dims "
            f"(expected a dim in [{low}, {high}])"
        )
    return int(dim) % size


def normalize_dims(op: str, dim: int | Sequence[int] | None, ndim: int) -> tuple[int, ...]:
    """All axes when ``dim`` is None, else the normalised, de-duplicated axes."""
    if dim is None:
        return tuple(range(ndim))
    dims = tuple(dim) if isinstance(dim, (tuple, list)) else (dim,)
    axes = tuple(normalize_dim(op, d, ndim) for d in dims)
    if len(set(axes)) != len(axes):
        raise ValueError(f"{op}: dim {dim} names the same axis twice")
    return axes


def broadcast_shapes(op: str, *shapes: tuple[int, ...]) -> tuple[int, ...]:
    """The numpy broadcast of ``shapes``, or a ValueError naming every shape."""
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        listed = " and ".join(str(tuple(s)) for s in shapes)
        raise ValueError(
            f"{op}: shapes {listed} are not broadcastable (each dim must match or be 1)"
        ) from None

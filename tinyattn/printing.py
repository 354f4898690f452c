"""How a tensor prints: like PyTorch (four decimals, scientific notation for wide ranges)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .tensor import Tensor

_DEFAULT_DTYPES = ("float32", "int64", "bool")


def _float_formatter(values: np.ndarray) -> dict:
    finite = np.abs(values[np.isfinite(values)])
    if finite.size == 0:
        return {"float_kind": lambda v: f"{v:.4f}" if np.isfinite(v) else str(v)}
    if np.all(finite == np.round(finite)) and finite.max() < 1e8:
        return {"float_kind": lambda v: f"{v:.0f}." if np.isfinite(v) else str(v)}
    nonzero = finite[finite > 0]
    wide = nonzero.size and (finite.max() >= 1e8 or nonzero.min() < 1e-4
                             or finite.max() / nonzero.min() > 1e3)
    if wide:
        return {"float_kind": lambda v: f"{v:.4e}" if np.isfinite(v) else str(v)}
    return {"float_kind": lambda v: f"{v:.4f}" if np.isfinite(v) else str(v)}


def tensor_repr(t: Tensor) -> str:
    """``tensor([...], dtype=..., grad_fn=<...>)`` as PyTorch prints it."""
    data = t.data
    formatter = _float_formatter(data) if data.dtype.kind == "f" else None
    body = np.array2string(data, separator=", ", prefix="tensor(", formatter=formatter,
                           threshold=1000, edgeitems=3, max_line_width=80)
    extra = ""
    if data.size == 0:
        extra += f", size={tuple(data.shape)}"
    if data.dtype.name not in _DEFAULT_DTYPES:
        extra += f", dtype=tinyattn.{data.dtype.name}"
    if t.grad_fn is not None:
        extra += f", grad_fn={t.grad_fn!r}"
    elif t.requires_grad:
        extra += ", requires_grad=True"
    return f"tensor({body}{extra})"

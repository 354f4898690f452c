"""How a tensor prints: like PyTorch (four decimals, scientific notation for wide ranges)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .tensor import Tensor

_DEFAULT_DTYPES = ("float32", "int64", "bool")
_OPTIONS = {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80,
            "sci_mode": None}


def set_printoptions(precision: int | None = None, threshold: int | None = None,
                     edgeitems: int | None = None, linewidth: int | None = None,
                     profile: str | None = None, sci_mode: bool | None = None) -> None:
    """PyTorch's print options: digits, summarising threshold, edge items, line width, and
    ``sci_mode`` (True/False forces scientific notation on or off; None decides per tensor).

    Examples
    --------
    >>> import tinyattn as ta
    >>> ta.set_printoptions(sci_mode=False)
    >>> ta.tensor([1e-5, 1.0])
    tensor([0.0000, 1.0000])
    >>> ta.set_printoptions(profile="default")
    """
    if profile == "default":
        _OPTIONS.update(precision=4, threshold=1000, edgeitems=3, linewidth=80, sci_mode=None)
    elif profile == "full":
        _OPTIONS.update(threshold=np.inf)
    for key, value in (("precision", precision), ("threshold", threshold),
                       ("edgeitems", edgeitems), ("linewidth", linewidth)):
        if value is not None:
            _OPTIONS[key] = value
    if sci_mode is not None or profile == "default":
        _OPTIONS["sci_mode"] = sci_mode


def _float_formatter(values: np.ndarray) -> dict:
    digits, sci = _OPTIONS["precision"], _OPTIONS["sci_mode"]
    finite = np.abs(values[np.isfinite(values)]).astype(np.float64)

    def fixed(v: float) -> str:
        return f"{v:.{digits}f}" if np.isfinite(v) else str(v)

    def scientific(v: float) -> str:
        return f"{v:.{digits}e}" if np.isfinite(v) else str(v)

    if sci is True:
        return {"float_kind": scientific}
    if finite.size == 0 or sci is False:
        return {"float_kind": fixed}
    if np.all(finite == np.round(finite)) and finite.max() < 1e8:
        return {"float_kind": lambda v: f"{v:.0f}." if np.isfinite(v) else str(v)}
    nonzero = finite[finite > 0]
    wide = nonzero.size and (finite.max() >= 1e8 or nonzero.min() < 1e-4
                             or finite.max() / nonzero.min() > 1e3)
    return {"float_kind": scientific if wide else fixed}


def tensor_repr(t: Tensor) -> str:
    """``tensor([...], dtype=..., grad_fn=<...>)`` as PyTorch prints it."""
    data = t.numpy()
    formatter = _float_formatter(data) if data.dtype.kind == "f" else None
    body = np.array2string(data, separator=", ", prefix="tensor(", formatter=formatter,
                           threshold=_OPTIONS["threshold"], edgeitems=_OPTIONS["edgeitems"],
                           max_line_width=_OPTIONS["linewidth"])
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

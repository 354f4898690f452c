"""What the explorer keeps of an array: a few statistics, and a small picture of one 2-D slice.

A page of :func:`tinyattn.inspect.view` never embeds a tensor whole. Each value and gradient is
summarised by :func:`array_stats` (norm, min, max, mean, fraction of zeros, NaN and inf counts,
computed in float64 over the whole array) and drawn by :func:`heatmap`: its first 2-D slice
(``x[0, 0, ..., :, :]``), averaged over blocks down to at most ``limit × limit`` cells and
quantised to one byte per cell (256 levels between the slice's ``lo`` and ``hi``), sent as
base64. Small slices also carry their values (rounded to 6 significant digits), which the page
shows on hover.
"""

from __future__ import annotations

import base64
import math
from typing import Any

import numpy as np

from ..tables import shape_text

EXACT_CELLS = 256
"""A slice of at most this many cells keeps its values (for the page's tooltips)."""


def finite_or_text(value: float | None) -> float | str | None:
    """A float for JSON: itself when finite, ``'NaN'``, ``'Infinity'`` or ``'-Infinity'``
    otherwise (JSON has no such numbers), None for None.

    Examples
    --------
    >>> finite_or_text(1.5), finite_or_text(float("nan")), finite_or_text(-math.inf)
    (1.5, 'NaN', '-Infinity')
    """
    if value is None:
        return None
    value = float(value)
    if math.isfinite(value):
        return value
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def array_stats(array: Any) -> dict[str, Any]:
    """Statistics of a whole array, in float64.

    ``norm`` (Euclidean, over the finite entries), ``min``, ``max`` and ``mean`` (of the finite
    entries; None when there is none), ``zero_fraction`` (entries exactly 0, over all entries),
    ``nan`` and ``inf`` (counts) and ``size``.

    Examples
    --------
    >>> s = array_stats(np.array([[3.0, 0.0], [np.nan, -4.0]]))
    >>> s["norm"], s["min"], s["max"], s["zero_fraction"], s["nan"], s["inf"]
    (5.0, -4.0, 3.0, 0.25, 1, 0)
    """
    a = np.asarray(array)
    if a.dtype.kind == "b":
        a = a.astype(np.float64)
    x = a.astype(np.float64, copy=False)
    size = int(x.size)
    nan = int(np.count_nonzero(np.isnan(x)))
    inf = int(np.count_nonzero(np.isinf(x)))
    values = x[np.isfinite(x)] if nan or inf else x.reshape(-1)
    stats: dict[str, Any] = {
        "size": size,
        "norm": float(np.sqrt(np.sum(np.square(values)))),
        "min": float(values.min()) if values.size else None,
        "max": float(values.max()) if values.size else None,
        "mean": float(values.mean()) if values.size else None,
        "zero_fraction": float(np.count_nonzero(x == 0) / size) if size else 0.0,
        "nan": nan,
        "inf": inf,
    }
    return stats


def pool(plane: np.ndarray, limit: int) -> np.ndarray:
    """A 2-D array averaged over blocks down to at most ``limit × limit`` cells (rows and
    columns are cut into ``limit`` nearly equal runs; an axis already small enough is kept).

    Examples
    --------
    >>> pool(np.arange(16.0).reshape(4, 4), 2).tolist()
    [[2.5, 4.5], [10.5, 12.5]]
    """
    out = np.asarray(plane, dtype=np.float64)
    for axis in (0, 1):
        n = out.shape[axis]
        if n > limit:
            starts = (np.arange(limit) * n) // limit
            counts = np.diff(np.append(starts, n)).astype(np.float64)
            sums = np.add.reduceat(out, starts, axis=axis)
            out = sums / (counts[:, None] if axis == 0 else counts[None, :])
    return out


def first_plane(array: np.ndarray) -> tuple[np.ndarray, str]:
    """The first 2-D slice of an array (a 1-D array as one row) and how it was cut."""
    a = np.asarray(array)
    if a.ndim == 1:
        return a[None, :], "[:] as one row"
    lead = (0,) * (a.ndim - 2)
    text = "[" + ", ".join(["0"] * len(lead) + [":", ":"]) + "]"
    return a[lead], text


def heatmap(array: Any, limit: int = 24, signed: bool | None = None) -> dict[str, Any] | None:
    """A small picture of the first 2-D slice of ``array`` (None for a 0-d or empty array).

    Parameters
    ----------
    array : array_like
        The values (any float, int or bool dtype).
    limit : int
        At most ``limit × limit`` cells (block means).
    signed : bool, optional
        Draw on a scale symmetric about 0 (gradients); default: when the slice has a negative
        entry.

    Returns
    -------
    dict
        ``rows``, ``cols``; ``source`` (the slice's own shape) and ``slice`` (which slice);
        ``lo`` and ``hi`` (the ends of the scale); ``signed``; ``bytes`` (base64 of one
        ``uint8`` per cell, row by row: ``lo + byte / 255 · (hi − lo)``); ``nonfinite`` (NaN or
        inf entries of the slice, drawn as 0); ``values`` (the cells rounded to 6 significant
        digits) when there are at most :data:`EXACT_CELLS` of them.

    Examples
    --------
    >>> m = heatmap(np.array([[0.0, 1.0], [0.5, 0.25]]))
    >>> m["rows"], m["cols"], m["lo"], m["hi"], decode(m).tolist()
    (2, 2, 0.0, 1.0, [[0.0, 1.0], [0.5019607843137255, 0.25098039215686274]])
    """
    a = np.asarray(array)
    if a.ndim == 0 or a.size == 0:
        return None
    plane, cut = first_plane(a)
    plane = plane.astype(np.float64)
    finite = np.isfinite(plane)
    nonfinite = int(plane.size - np.count_nonzero(finite))
    if nonfinite:
        plane = np.where(finite, plane, 0.0)
    cells = pool(plane, limit)
    low, high = float(cells.min()), float(cells.max())
    if signed is None:
        signed = low < 0
    if signed:
        bound = max(abs(low), abs(high))
        low, high = -bound, bound
    span = high - low
    levels = np.zeros(cells.shape) if span <= 0 else (cells - low) / span
    data = np.clip(np.rint(levels * 255), 0, 255).astype(np.uint8)
    picture: dict[str, Any] = {
        "rows": int(cells.shape[0]), "cols": int(cells.shape[1]),
        "source": [int(n) for n in plane.shape], "shape": shape_text(a.shape), "slice": cut,
        "lo": low, "hi": high, "signed": bool(signed), "nonfinite": nonfinite,
        "bytes": base64.b64encode(data.tobytes()).decode("ascii"),
    }
    if cells.size <= EXACT_CELLS:
        picture["values"] = [float(f"{v:.6g}") for v in cells.reshape(-1)]
    return picture


def decode(picture: dict[str, Any]) -> np.ndarray:
    """The cells a :func:`heatmap` encodes, back as floats (to within one level,
    ``(hi − lo) / 255``, of the block means)."""
    raw = np.frombuffer(base64.b64decode(picture["bytes"]), dtype=np.uint8).astype(np.float64)
    span = picture["hi"] - picture["lo"]
    return (picture["lo"] + raw / 255.0 * span).reshape(picture["rows"], picture["cols"])

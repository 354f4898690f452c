"""Reports as tables: aligned plain text in a terminal, an HTML table in Jupyter.

Every report of :mod:`tinyattn.inspect` and of the hook-point cache (a trace, a graph check, a
memory ledger, saturation statistics) is a :class:`TableReport`: it defines its header and
rows once, and gets ``str()`` (the text table, also what ``print`` shows) and ``_repr_html_``
(what Jupyter shows) from them.
:func:`tensor_html` is the HTML form of a tensor.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ..tensor import Tensor

Row = Sequence[str]


def text_table(header: Row, rows: Sequence[Row]) -> str:
    """An aligned text table, left-aligned but for a first column of numbers (right-aligned).

    Examples
    --------
    >>> print(text_table(("#", "op"), [("0", "Sum"), ("1", "MatMul")]))
    #  op
    -  ------
    0  Sum
    1  MatMul
    """
    widths = [max(len(line[c]) for line in [header, *rows]) for c in range(len(header))]
    numbered = all(row[0].isdigit() for row in rows)
    lines = []
    for line in [header, *rows]:
        cells = [line[0].rjust(widths[0]) if numbered else line[0].ljust(widths[0])]
        cells += [cell.ljust(width) for cell, width in zip(line[1:], widths[1:])]
        lines.append("  ".join(cells).rstrip())
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def html_table(header: Row, rows: Sequence[Row], caption: str = "",
               marked: Sequence[bool] = ()) -> str:
    """An HTML table (every cell escaped); rows whose ``marked`` entry is True are shaded red.

    Examples
    --------
    >>> html_table(("a",), [("<1>",)]).count("&lt;1&gt;")
    1
    """
    parts = ['<table style="font-family: monospace; font-size: 90%">']
    if caption:
        parts.append(f'<caption style="text-align: left">{html.escape(caption)}</caption>')
    parts.append("<thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in header)
                 + "</tr></thead><tbody>")
    for i, row in enumerate(rows):
        style = ' style="background: #fdd"' if i < len(marked) and marked[i] else ""
        parts.append(f"<tr{style}>" + "".join(f"<td>{html.escape(c)}</td>" for c in row)
                     + "</tr>")
    parts.append("</tbody></table>")
    return "".join(parts)


class TableReport:
    """A report shown as a table: subclasses define :meth:`table_header` and :meth:`table_rows`
    and may add a :meth:`summary` line (printed under the table) and :meth:`marked` rows
    (failures, shaded in HTML)."""

    def table_header(self) -> Row:
        raise NotImplementedError

    def table_rows(self) -> list[Row]:
        raise NotImplementedError

    def summary(self) -> str:
        return ""

    def marked(self) -> list[bool]:
        return []

    def table(self) -> str:
        """The report as aligned text (what ``print`` shows)."""
        text = text_table(self.table_header(), self.table_rows())
        summary = self.summary()
        return f"{text}\n{summary}" if summary else text

    def __str__(self) -> str:
        return self.table()

    def _repr_html_(self) -> str:
        return html_table(self.table_header(), self.table_rows(), self.summary(), self.marked())

    def __repr__(self) -> str:
        return f"<{type(self).__name__} of {len(self.table_rows())} rows>"


def shape_text(shape: Sequence[int]) -> str:
    """``(2, 3)`` for a shape (no trailing comma for one dim)."""
    return "(" + ", ".join(str(n) for n in shape) + ")"


def tensor_html(tensor: Tensor, max_rows: int = 8, max_cols: int = 8) -> str:
    """A tensor as an HTML table: a caption with shape, dtype and ``grad_fn``, then its values
    (0, 1 or 2 dims; larger tensors show the text form, cut as ``repr`` cuts it).

    Examples
    --------
    >>> import tinyattn as ta
    >>> "<td>2.0000</td>" in tensor_html(ta.tensor([[1.0, 2.0]]))
    True
    """
    data = tensor.numpy()
    caption = f"tensor of shape {shape_text(data.shape)}, {data.dtype}"
    if tensor.grad_fn is not None:
        caption += f", grad_fn={tensor.grad_fn!r}"
    elif tensor.requires_grad:
        caption += ", requires_grad=True"
    if data.ndim > 2:
        return f"<p>{html.escape(caption)}</p><pre>{html.escape(repr(tensor))}</pre>"
    grid = data.reshape(1, -1) if data.ndim < 2 else data

    def cell(value: object) -> str:
        return f"{value:.4f}" if data.dtype.kind == "f" else str(value)

    def cut(count: int, limit: int) -> list[int | None]:
        if count <= limit:
            return list(range(count))
        return list(range(limit // 2)) + [None] + list(range(count - limit // 2, count))

    columns = cut(grid.shape[1], max_cols)
    body = [tuple("…" if j is None or i is None else cell(grid[i, j]) for j in columns)
            for i in cut(grid.shape[0], max_rows)]
    return html_table([str(j) if j is not None else "…" for j in columns], body, caption)


def array_norm(array: np.ndarray) -> float:
    """The Euclidean norm of an array, summed in float64 (the ``|grad|`` of the reports)."""
    return float(np.sqrt(np.sum(np.square(array, dtype=np.float64))))


def format_float(value: float | None, digits: int = 2) -> str:
    """``1.23e-04`` (or ``-`` for None, ``nan`` for NaN) for a table cell."""
    if value is None:
        return "-"
    if not np.isfinite(value):
        return str(value)
    return f"{value:.{digits}e}"

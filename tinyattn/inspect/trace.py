"""Watch one backward pass: for every op, the norm of the gradient arriving at its output and
of each gradient it sends to its inputs (so you can see where gradients shrink or blow up).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import autograd
from ..autograd import Context, ReleasedInput
from ..tables import Row, TableReport, array_norm, shape_text
from ..tensor import Tensor


@dataclass(frozen=True)
class TraceRow:
    """What one op saw during backward.

    Attributes
    ----------
    name : str
        The op's name (``MatMul``, ``Softmax``, ...).
    out_shape : tuple of int
        Shape of the op's output.
    grad_norm : float
        Frobenius norm of the gradient arriving at the output, ``‖dL/d out‖``.
    input_shapes : tuple of tuple of int
        Shape of each positional input.
    input_grad_norms : tuple of (float or None)
        ``‖dL/d input_i‖`` for each input (after un-broadcasting), None where no gradient flows.
    """

    name: str
    out_shape: tuple[int, ...]
    grad_norm: float
    input_shapes: tuple[tuple[int, ...], ...]
    input_grad_norms: tuple[float | None, ...]


class Trace(TableReport):
    """The ops of one backward pass in the order the engine ran them (output side first).

    Iterating yields :class:`TraceRow` objects; ``str(trace)`` is :meth:`table`.
    """

    def __init__(self) -> None:
        self.rows: list[TraceRow] = []
        self._by_node: dict[int, TraceRow] = {}
        self._nodes: list[Context] = []  # keeps the ids in _by_node valid

    def _record(self, ctx: Context, grads_out: tuple, grads_in: tuple) -> None:
        tensors = [i for i, value in enumerate(ctx.inputs or ())
                   if isinstance(value, (Tensor, ReleasedInput))]
        row = TraceRow(
            name=ctx.name,
            out_shape=tuple(ctx.out_shape),
            grad_norm=float(np.sqrt(sum(array_norm(g) ** 2 for g in grads_out
                                        if g is not None))),
            input_shapes=tuple(ctx.inputs[i].shape for i in tensors),
            input_grad_norms=tuple(None if grads_in[i] is None else array_norm(grads_in[i])
                                   for i in tensors),
        )
        self.rows.append(row)
        self._by_node[id(ctx)] = row
        self._nodes.append(ctx)

    def row_for(self, ctx: Context) -> TraceRow | None:
        """The row recorded for the op ``ctx`` (a tensor's ``grad_fn``), or None."""
        return self._by_node.get(id(ctx))

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[TraceRow]:
        return iter(self.rows)

    def __getitem__(self, index: int) -> TraceRow:
        return self.rows[index]

    def table_header(self) -> Row:
        return ("#", "op", "output shape", "|grad out|", "|grad in| per input")

    def table_rows(self) -> list[Row]:
        """One line per op: step, op, output shape, ‖grad out‖, ‖grad in‖ per input."""
        return [
            (
                str(i),
                row.name,
                shape_text(row.out_shape),
                f"{row.grad_norm:.4e}",
                ", ".join("-" if g is None else f"{g:.4e}" for g in row.input_grad_norms),
            )
            for i, row in enumerate(self.rows)
        ]

    def __repr__(self) -> str:
        return f"<Trace of {len(self.rows)} ops>"


def trace(loss: Tensor, gradient: Any = None, retain_graph: bool = False) -> Trace:
    """Backpropagate from ``loss`` like ``loss.backward()`` and record what every op saw.

    Leaves' ``.grad`` (and retained gradients) are filled exactly as a normal backward fills
    them. Pass ``retain_graph=True`` to draw the graph with :func:`to_dot` afterwards.

    Parameters
    ----------
    loss : Tensor
        The output to differentiate; a non-scalar needs ``gradient``.
    gradient : Tensor or array, optional
        ``dL/d loss`` (default 1 for a one-element ``loss``).
    retain_graph : bool
        Keep the graph (and its saved values) after the pass.

    Examples
    --------
    >>> import tinyattn as ta
    >>> from tinyattn.inspect import trace
    >>> x = ta.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    >>> t = trace((x * 3.0).sum())
    >>> [row.name for row in t]
    ['Sum', 'Mul']
    >>> round(t[1].input_grad_norms[0], 4)   # ‖dL/dx‖ = ‖3·ones(2, 2)‖ = 6
    6.0
    """
    if not isinstance(loss, Tensor):
        raise TypeError(f"trace: expected a Tensor, got {type(loss).__name__}")
    if not loss.requires_grad:
        raise RuntimeError("trace: the tensor does not require grad, so there is nothing to trace")
    seed = autograd.seed_gradient(loss, gradient, "trace")
    record = Trace()
    autograd.run_backward([loss], [seed], retain_graph=retain_graph, on_node=record._record)
    return record

"""Study tools: watch one backward pass, draw the graph, and plot attention maps and losses.

- :func:`trace` runs a normal backward pass and records, for every op it goes through, the
  norm of the gradient arriving at the op's output and the norm of each gradient it sends to
  its inputs (so you can see where gradients shrink or blow up).
- :func:`to_dot` / :func:`render` export the recorded graph as Graphviz DOT text.
- :func:`plot_attention` / :func:`plot_losses` draw heatmaps and training curves with
  matplotlib (optional: ``pip install 'tinyattn[viz]'``), always on the non-interactive Agg
  backend, so they work on a machine without a display.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from . import autograd
from .autograd import Context
from .tensor import Tensor


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


class Trace:
    """The ops of one backward pass in the order the engine ran them (output side first).

    Iterating yields :class:`TraceRow` objects; ``str(trace)`` is :meth:`table`.
    """

    def __init__(self) -> None:
        self.rows: list[TraceRow] = []
        self._by_node: dict[int, TraceRow] = {}
        self._nodes: list[Context] = []  # keeps the ids in _by_node valid

    def _record(self, ctx: Context, grad_out: np.ndarray, grads_in: tuple) -> None:
        row = TraceRow(
            name=ctx.name,
            out_shape=tuple(ctx.out_shape),
            grad_norm=_norm(grad_out),
            input_shapes=tuple(t.shape for t in ctx.inputs or ()),
            input_grad_norms=tuple(None if g is None else _norm(g) for g in grads_in),
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

    def table(self) -> str:
        """An aligned text table: step, op, output shape, ‖grad out‖, ‖grad in‖ per input."""
        header = ("#", "op", "output shape", "|grad out|", "|grad in| per input")
        body = [
            (
                str(i),
                row.name,
                _shape_text(row.out_shape),
                f"{row.grad_norm:.4e}",
                ", ".join("-" if g is None else f"{g:.4e}" for g in row.input_grad_norms),
            )
            for i, row in enumerate(self.rows)
        ]
        widths = [max(len(line[c]) for line in [header, *body]) for c in range(len(header))]
        lines = []
        for line in [header, *body]:
            cells = [line[0].rjust(widths[0])]
            cells += [cell.ljust(width) for cell, width in zip(line[1:], widths[1:])]
            lines.append("  ".join(cells).rstrip())
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()

    def __repr__(self) -> str:
        return f"<Trace of {len(self.rows)} ops>"


def _norm(array: np.ndarray) -> float:
    return float(np.sqrt(np.sum(np.square(array, dtype=np.float64))))


def _shape_text(shape: Sequence[int]) -> str:
    return "(" + ", ".join(str(n) for n in shape) + ")"


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


def _dot_quote(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return '"' + escaped + '"'


def to_dot(
    tensor: Tensor, grads: Trace | None = None, names: Mapping[str, Tensor] | None = None
) -> str:
    """Graphviz DOT text of the graph that produced ``tensor``.

    One box per recorded op (name and output shape, plus ``‖grad‖`` when a :class:`Trace` of a
    backward pass is given), one ellipse per leaf tensor (named from ``names`` when found
    there, e.g. ``dict(model.named_parameters())``; constants dashed), and one edge per op
    input, pointing in the direction of the forward pass.

    Examples
    --------
    >>> import tinyattn as ta
    >>> from tinyattn.inspect import to_dot
    >>> w = ta.ones(2, 2, requires_grad=True)
    >>> print(to_dot((w @ w).sum(), names={"w": w}).splitlines()[0])
    digraph tinyattn {
    """
    if not isinstance(tensor, Tensor):
        raise TypeError(f"to_dot: expected a Tensor, got {type(tensor).__name__}")
    labels = {id(t): name for name, t in (names or {}).items()}
    lines = ["digraph tinyattn {", "  rankdir=BT;", "  node [fontname=Helvetica, fontsize=10];"]
    seen: set[int] = set()

    def leaf_node(leaf: Tensor) -> str:
        key = f"t{id(leaf)}"
        if id(leaf) not in seen:
            seen.add(id(leaf))
            label = labels.get(id(leaf), "param" if leaf.requires_grad else "const")
            label += f"\n{_shape_text(leaf.shape)}"
            if grads is not None and leaf.grad is not None:
                label += f"\n|grad| {_norm(leaf.grad.data):.3e}"
            style = "solid" if leaf.requires_grad else "dashed"
            lines.append(f"  {key} [shape=ellipse, style={style}, label={_dot_quote(label)}];")
        return key

    root = tensor.grad_fn
    if root is None:
        leaf_node(tensor)
        lines.append("}")
        return "\n".join(lines)
    stack = [root]
    seen.add(id(root))
    while stack:
        node = stack.pop()
        if node.freed:
            raise RuntimeError(
                f"to_dot: the graph was freed by a backward pass (op '{node.name}'); call "
                "to_dot before backward, or trace(loss, retain_graph=True)"
            )
        label = f"{node.name}\n{_shape_text(node.out_shape)}"
        row = grads.row_for(node) if grads is not None else None
        if row is not None:
            label += f"\n|grad| {row.grad_norm:.3e}"
        lines.append(f"  n{id(node)} [shape=box, label={_dot_quote(label)}];")
        for slot, inp in enumerate(node.inputs or ()):
            parent = inp.grad_fn
            if parent is None:
                source = leaf_node(inp)
            else:
                source = f"n{id(parent)}"
                if id(parent) not in seen:
                    seen.add(id(parent))
                    stack.append(parent)
            lines.append(f"  {source} -> n{id(node)} [label={_dot_quote(str(slot))}];")
    lines.append("}")
    return "\n".join(lines)


def render(dot_text: str, path: str | os.PathLike) -> Path:
    """Render DOT text to ``path`` (``.png`` or ``.svg``) with Graphviz's ``dot`` program.

    When ``dot`` is not installed, the DOT text is written next to ``path`` with a ``.dot``
    suffix instead, a note says so on stderr, and that path is returned.

    Examples
    --------
    >>> import tempfile, os
    >>> from tinyattn.inspect import render
    >>> out = render("digraph { a -> b }", os.path.join(tempfile.mkdtemp(), "g.svg"))
    >>> out.exists()
    True
    """
    target = Path(path)
    fmt = target.suffix.lower().lstrip(".")
    if fmt not in ("png", "svg"):
        raise ValueError(f"render: path must end in .png or .svg, got {str(target)!r}")
    target.parent.mkdir(parents=True, exist_ok=True)
    program = shutil.which("dot")
    if program is None:
        fallback = target.with_suffix(".dot")
        fallback.write_text(dot_text + "\n")
        print(
            f"render: Graphviz 'dot' is not installed, so wrote the DOT text to {fallback} "
            f"(render it with: dot -T{fmt} {fallback} -o {target})",
            file=sys.stderr,
        )
        return fallback
    subprocess.run(
        [program, f"-T{fmt}", "-o", str(target)], input=dot_text.encode(), check=True
    )
    return target


def _figure(width: float, height: float) -> Any:
    """A matplotlib Figure on the Agg canvas (no display, no global pyplot state)."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as err:
        raise ImportError(
            "tinyattn.inspect plotting needs matplotlib: pip install 'tinyattn[viz]'"
        ) from err
    figure = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def plot_attention(
    weights: Tensor | np.ndarray,
    tokens: Sequence[str],
    path: str | os.PathLike,
    title: str | None = None,
    query_tokens: Sequence[str] | None = None,
    panel_titles: Sequence[str] | None = None,
) -> Path:
    """Draw attention weights as heatmaps: one panel per head for ``(H, T, S)``, one for ``(T, S)``.

    Row ``t`` shows where query ``t`` looks; column ``s`` is key ``s``.

    Parameters
    ----------
    weights : Tensor or ndarray
        Post-softmax weights, ``(T, S)`` or ``(H, T, S)``.
    tokens : sequence of str
        Labels of the ``S`` keys (and of the queries, when ``query_tokens`` is not given).
    path : str or PathLike
        Where to save the picture (the format follows the suffix, e.g. ``.png``).
    query_tokens : sequence of str, optional
        Labels of the ``T`` queries.
    panel_titles : sequence of str, optional
        One title per panel (default ``head 0``, ``head 1``, ... when there are several).

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> from tinyattn.inspect import plot_attention
    >>> w = np.full((2, 3, 3), 1 / 3)
    >>> p = plot_attention(w, ["a", "b", "c"], os.path.join(tempfile.mkdtemp(), "a.png"))
    >>> p.stat().st_size > 0
    True
    """
    array = np.asarray(weights.data if isinstance(weights, Tensor) else weights, dtype=np.float64)
    if array.ndim == 2:
        array = array[None]
    if array.ndim != 3:
        raise ValueError(
            f"plot_attention: weights must be (T, S) or (H, T, S), got shape {array.shape}"
        )
    heads, n_queries, n_keys = array.shape
    query_tokens = list(tokens) if query_tokens is None else list(query_tokens)
    if len(tokens) != n_keys or len(query_tokens) != n_queries:
        raise ValueError(
            f"plot_attention: weights of shape {array.shape} need {n_keys} key labels and "
            f"{n_queries} query labels, got {len(tokens)} and {len(query_tokens)}"
        )
    if panel_titles is None:
        panel_titles = [f"head {h}" for h in range(heads)] if heads > 1 else [""]
    if len(panel_titles) != heads:
        raise ValueError(
            f"plot_attention: {heads} panels need {heads} titles, got {len(panel_titles)}"
        )
    columns = min(heads, 4)
    rows = -(-heads // columns)
    side = 0.22 * max(n_queries, n_keys) + 1.0
    figure = _figure(side * columns + 0.8, side * rows + (0.5 if title else 0.0))
    axes = figure.subplots(rows, columns, squeeze=False)
    image = None
    for h, ax in enumerate(axes.flat):
        if h >= heads:
            ax.set_axis_off()
            continue
        image = ax.imshow(array[h], cmap="viridis", vmin=0.0, vmax=max(1e-12, array.max()))
        ax.set_xticks(range(n_keys), list(tokens), rotation=90, fontsize=8)
        ax.set_yticks(range(n_queries), query_tokens, fontsize=8)
        ax.set_xlabel("key")
        ax.set_ylabel("query")
        ax.set_title(panel_titles[h], fontsize=9)
    figure.colorbar(image, ax=axes.ravel().tolist(), shrink=0.8)
    if title:
        figure.suptitle(title)
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(target, dpi=110)
    return target


def plot_losses(
    history: Mapping[str, Sequence[tuple[int, float]]], path: str | os.PathLike,
    title: str | None = None,
) -> Path:
    """Plot loss curves: ``history`` maps a curve name (``"train"``, ``"eval"``) to
    ``(step, value)`` pairs.

    Examples
    --------
    >>> import tempfile, os
    >>> from tinyattn.inspect import plot_losses
    >>> history = {"train": [(0, 2.3), (10, 1.1)], "eval": [(10, 1.3)]}
    >>> plot_losses(history, os.path.join(tempfile.mkdtemp(), "l.png")).suffix
    '.png'
    """
    if not history or not any(len(points) for points in history.values()):
        raise ValueError("plot_losses: history has no points to plot")
    figure = _figure(6.0, 3.6)
    ax = figure.subplots()
    for name, points in history.items():
        if len(points):
            steps, values = zip(*points)
            ax.plot(steps, values, marker="o" if len(points) < 30 else None, ms=3, label=name)
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.set_yscale("log")
    ax.grid(True, alpha=0.3)
    ax.legend()
    if title:
        ax.set_title(title)
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(target, dpi=110)
    return target

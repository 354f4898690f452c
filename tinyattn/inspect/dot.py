"""Draw the recorded graph: Graphviz DOT text, rendered to a file or inline in Jupyter.

:func:`to_dot` returns a :class:`DotGraph` — the DOT text itself (a ``str``), which Jupyter
shows as an inline SVG picture when Graphviz's ``dot`` program is installed, and otherwise as
the DOT text with a note saying how to install Graphviz. :func:`render` writes a ``.png`` or
``.svg`` file (the ``.dot`` text when Graphviz is missing).
"""

from __future__ import annotations

import html
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from ..autograd import ReleasedInput
from ..tables import array_norm, shape_text
from ..tensor import Tensor
from .graph import graph_nodes
from .trace import Trace

INSTALL_HINT = ("install Graphviz to see the picture (apt install graphviz, brew install "
                "graphviz or conda install graphviz)")


class DotGraph(str):
    """DOT text that Jupyter draws: inline SVG with Graphviz, else the text and a note."""

    def svg(self) -> str | None:
        """The picture as SVG text, or None when Graphviz's ``dot`` is not installed."""
        program = shutil.which("dot")
        if program is None:
            return None
        result = subprocess.run([program, "-Tsvg"], input=str(self).encode(),
                                capture_output=True, check=True)
        return result.stdout.decode()

    def _repr_html_(self) -> str:
        picture = self.svg()
        if picture is not None:
            return picture[picture.index("<svg"):]
        return (f"<p>Graphviz's <code>dot</code> program was not found: {INSTALL_HINT}. "
                f"The graph as DOT text:</p><pre>{html.escape(str(self))}</pre>")


def _dot_quote(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return '"' + escaped + '"'


def to_dot(
    tensor: Tensor, grads: Trace | None = None, names: Mapping[str, Tensor] | None = None
) -> DotGraph:
    """Graphviz DOT text of the graph that produced ``tensor``.

    One box per recorded op (``#k``, its name and output shape, plus ``‖grad‖`` when a
    :class:`Trace` of a backward pass is given), one ellipse per leaf tensor (named from
    ``names`` when found there, e.g. ``dict(model.named_parameters())``; constants dashed), and
    one edge per op input, pointing in the direction of the forward pass. ``#k`` is the node's
    number in every inspect tool (see :mod:`tinyattn.inspect.graph`).

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
            label += f"\n{shape_text(leaf.shape)}"
            if grads is not None and leaf.grad is not None:
                label += f"\n|grad| {array_norm(leaf.grad.numpy()):.3e}"
            style = "solid" if leaf.requires_grad else "dashed"
            lines.append(f"  {key} [shape=ellipse, style={style}, label={_dot_quote(label)}];")
        return key

    if tensor.grad_fn is None:
        leaf_node(tensor)
        lines.append("}")
        return DotGraph("\n".join(lines))
    for index, node in enumerate(graph_nodes(tensor, "to_dot")):
        label = f"#{index} {node.name}\n{shape_text(node.out_shape)}"
        row = grads.row_for(node) if grads is not None else None
        if row is not None:
            label += f"\n|grad| {row.grad_norm:.3e}"
        lines.append(f"  n{id(node)} [shape=box, label={_dot_quote(label)}];")
        for slot, (inp, edge) in enumerate(zip(node.inputs, node.edges)):
            if edge is None and not isinstance(inp, (Tensor, ReleasedInput)):
                continue  # an option of the op (a dim, a seed), not an input tensor
            source = f"n{id(edge)}" if edge is not None and edge is not inp else leaf_node(inp)
            lines.append(f"  {source} -> n{id(node)} [label={_dot_quote(str(slot))}];")
    lines.append("}")
    return DotGraph("\n".join(lines))


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
            f"(render it with: dot -T{fmt} {fallback} -o {target}; {INSTALL_HINT})",
            file=sys.stderr,
        )
        return fallback
    subprocess.run(
        [program, f"-T{fmt}", "-o", str(target)], input=dot_text.encode(), check=True
    )
    return target

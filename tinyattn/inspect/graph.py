"""Walking a recorded graph: the checks every study tool makes first, and the node order.

The nodes of a graph are the :class:`~tinyattn.autograd.Context` objects behind ``grad_fn``.
Every tool numbers them the same way: in the order the engine's backward pass visits them
(``#0`` is the op that produced the output), so the ``#7`` of a trace, a graph check, an
explanation and a memory ledger is the same op. A node's ``edges`` say where each input's
gradient goes: another node, a leaf tensor that requires grad, or nowhere (None).
"""

from __future__ import annotations

from ..autograd import Context
from ..autograd.engine import topological_order
from ..tensor import Tensor

FREED = ("{op}: the graph was freed by a backward pass (op '{name}' no longer holds its saved "
         "values); run the tool before backward, or call backward(retain_graph=True) (or "
         "trace(loss, retain_graph=True)) to keep the graph")


def require_graph(tensor: object, op: str) -> Context:
    """``tensor``'s ``grad_fn``, or a clear error when it is not a live graph's output."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(tensor).__name__}")
    if tensor.grad_fn is None:
        raise RuntimeError(
            f"{op}: the tensor (shape {tensor.shape}) is not in a graph: it has no grad_fn. "
            "Compute it from tensors with requires_grad=True, with grad mode on"
        )
    if tensor.grad_fn.freed:
        raise RuntimeError(FREED.format(op=op, name=tensor.grad_fn.name))
    return tensor.grad_fn


def graph_nodes(tensor: Tensor, op: str) -> list[Context]:
    """Every node behind ``tensor``, output side first (the engine's backward order).

    Raises when ``tensor`` has no graph or a node was freed by an earlier backward pass.
    """
    order = topological_order([require_graph(tensor, op)])
    for node in order:
        if node.freed:
            raise RuntimeError(FREED.format(op=op, name=node.name))
    return order


def consumers(order: list[Context]) -> dict[int, list[tuple[Context, int]]]:
    """For each node or leaf (by ``id``): the ``(node, input slot)`` pairs that use it."""
    used: dict[int, list[tuple[Context, int]]] = {}
    for node in order:
        for slot, edge in enumerate(node.edges):
            if edge is not None:
                used.setdefault(id(edge), []).append((node, slot))
    return used


def graph_target(tensor: object, order: list[Context], op: str) -> Context | Tensor:
    """The node (for an intermediate tensor) or leaf that ``tensor`` is in the graph, or a
    clear error when the graph does not reach it."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"{op}: expected a Tensor to look for, got {type(tensor).__name__}")
    key = tensor.grad_fn if tensor.grad_fn is not None else tensor
    if isinstance(key, Context):
        if any(node is key for node in order):
            return key
    elif any(edge is key for node in order for edge in node.edges):
        return key
    kind = "an intermediate" if tensor.grad_fn is not None else (
        "a leaf that requires grad" if tensor.requires_grad else "a tensor without grad")
    raise ValueError(f"{op}: the tensor of shape {tensor.shape} ({kind}) is not in the graph "
                     "of the output: no gradient flows from the output to it")

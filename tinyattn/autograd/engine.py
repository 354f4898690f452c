"""The backward pass: the recorded ops in reverse, one chain-rule step per op.

:func:`run_backward` runs the ops that produced the roots from the most recently recorded one
down (the highest ``sequence_nr`` first, as PyTorch's engine does): an op then runs after every
op that used its outputs, with no recursion, so a 10,000-op chain is fine. It gives every op the
gradient of each of its outputs (summed over all the places the output was used) and sends
what its backward rule returns on to the inputs; an op that receives no gradient is not run.
Gradients are tensors throughout.

Broadcasting is undone in exactly one place, :func:`unbroadcast`: a backward rule may return a
gradient of the *broadcast* shape and the engine sums it back to the input's shape, because the
backward of "copy this value along an axis" is "sum along that axis".

Each op has one backward rule, written in tensor ops. Ordinarily it runs with grad mode off, so
nothing is recorded (and an op with a kernel may take its named fast path). With
``create_graph=True`` the same rule runs with grad mode on, so the gradients are themselves
recorded and can be differentiated again (Hessian-vector products, gradient penalties).
"""

from __future__ import annotations

import heapq
import operator
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from . import function
from .function import Context
from .grad_mode import _set_grad_enabled, is_anomaly_enabled, is_grad_enabled

if TYPE_CHECKING:
    from ..tensor import Tensor

NodeCallback = Callable[[Context, Any, tuple], None]


def unbroadcast(grad: Any, shape: tuple[int, ...]) -> Any:
    """Sum ``grad`` down to ``shape``: the backward of broadcasting (a tensor, or an array).

    Leading axes that broadcasting added are summed away; axes where ``shape`` has size 1 but
    ``grad`` does not are summed with ``keepdims``.

    Examples
    --------
    >>> unbroadcast(np.ones((4, 2, 3)), (2, 1)).tolist()
    [[12.0], [12.0]]
    """
    if grad.shape == shape:
        return grad
    extra = grad.ndim - len(shape)
    if extra < 0:
        raise ValueError(f"unbroadcast: gradient shape {grad.shape} has fewer dims than {shape}")
    axes = tuple(range(extra)) + tuple(
        extra + i for i, n in enumerate(shape) if n == 1 and grad.shape[extra + i] != 1)
    if isinstance(grad, np.ndarray):
        reduced = grad.sum(axis=axes, keepdims=True) if axes else grad
    else:
        reduced = grad.sum(dim=axes, keepdim=True) if axes else grad
    if reduced.shape[extra:] != shape:
        raise ValueError(f"unbroadcast: cannot reduce gradient of shape {grad.shape} to {shape}")
    return reduced.reshape(shape)


def topological_order(roots: Sequence[Context]) -> list[Context]:
    """Contexts reachable from ``roots``, each before every context that feeds it.

    An op's inputs were made before it, so the reverse of the order the ops were recorded in
    (their ``sequence_nr``) is such an order, and the one the backward visits them in.
    """
    found = {id(r): r for r in roots}
    stack = list(roots)
    while stack:
        for parent in stack.pop().edges:
            if (type(parent) is Context or isinstance(parent, Context)) and \
                    id(parent) not in found:
                found[id(parent)] = parent
                stack.append(parent)
    return sorted(found.values(), key=_recorded, reverse=True)


_recorded = operator.attrgetter("sequence_nr")


def nodes_towards(order: list[Context], targets: set[int]) -> tuple[set[int], set[int]]:
    """Which contexts a backward towards ``targets`` (ids of contexts or leaves) must visit.

    ``order`` is a topological order (outputs first). Returns ``(visit, propagate)``: the ids
    of the contexts from which a target is reached (or that are targets), and of those whose
    own backward must run (a target lies beyond them).
    """
    visit: set[int] = set()
    propagate: set[int] = set()
    for node in reversed(order):  # parents first
        if any(id(e) in targets or id(e) in visit for e in node.edges if e is not None):
            propagate.add(id(node))
        if id(node) in propagate or id(node) in targets:
            visit.add(id(node))
    return visit, propagate


def _sum_arrays(held: Tensor, grad: Tensor) -> Tensor:
    """``held + grad`` on their arrays (numpy's), recorded by no one: how the gradients that
    meet at one tensor are summed when the backward builds no graph (with ``create_graph`` they
    are added as tensors, an ``Add`` op of the new graph)."""
    return function.TENSOR._from_op(held._data + grad._data, None)


def _run_hooks(hooks: list[Callable], grad: Any) -> Any:
    for hook in hooks:
        replaced = hook(grad)
        if replaced is not None:
            grad = replaced
    return grad


def run_backward(
    roots: Sequence[Tensor],
    root_grads: Sequence[Any],
    retain_graph: bool = False,
    create_graph: bool = False,
    targets: Sequence[Tensor] | None = None,
    accumulate: bool = True,
    on_node: NodeCallback | None = None,
) -> dict[int, Any]:
    """Propagate ``root_grads`` (d out / d root, tensors) back through the graph behind
    ``roots``.

    Parameters
    ----------
    roots, root_grads
        The tensors to differentiate and the gradients they start from.
    retain_graph
        Keep the saved values so that the graph can be walked again (else each visited op is
        freed).
    create_graph
        Record the backward pass itself (gradients get a ``grad_fn``).
    targets
        When given, only the gradients of these tensors are computed (others are pruned).
    accumulate
        Add the gradients into ``.grad`` (of every leaf, or of ``targets``), as ``backward()``
        does; when False they are only returned, as ``autograd.grad`` does.
    on_node
        Called as ``on_node(ctx, grads_out, grads_in)`` for each op, with numpy arrays: the
        gradient of each output, and the one sent to each input (summed to its shape; None
        where none is sent). Used by ``inspect.trace``.

    Returns
    -------
    dict
        ``id(target) -> gradient`` for each target that received one (empty without targets).
    """

    leaf_grads: dict[int, tuple[Tensor, Any]] = {}
    node_grads: dict[int, list] = {}  # per op to run: the gradient of each output so far
    # a heap of (−sequence_nr, id, op): the latest op first (the id breaks the tie between an op
    # and its copy, as copy.deepcopy of a graph makes, without comparing contexts)
    ready: list[tuple[int, int, Context]] = []
    root_nodes = []
    for root, grad in zip(roots, root_grads):
        node = root.grad_fn
        if node is None:
            held = leaf_grads.get(id(root))
            leaf_grads[id(root)] = (root, grad if held is None else held[1] + grad)
            continue
        if node.freed:
            raise RuntimeError(function._FREED.format(name=node.name))
        buffer = node_grads.get(id(node))
        if buffer is None:
            buffer = node_grads[id(node)] = [None] * len(node.out_shapes)
            heapq.heappush(ready, (-node.sequence_nr, id(node), node))
        held = buffer[root._output_nr]
        buffer[root._output_nr] = grad if held is None else held + grad
        root_nodes.append(node)
    target_ids = None
    captured: dict[int, Any] = {}
    target_of_node: dict[tuple[int, int], Tensor] = {}
    visit: set[int] | None = None
    propagate: set[int] = set()
    if targets is not None:
        target_ids = {id(t.grad_fn) if t.grad_fn is not None else id(t) for t in targets}
        target_of_node = {(id(t.grad_fn), t._output_nr): t for t in targets
                          if t.grad_fn is not None}
        visit, propagate = nodes_towards(topological_order(root_nodes), target_ids)
    check = is_anomaly_enabled()
    previous_mode = is_grad_enabled()
    _set_grad_enabled(create_graph)
    quiet = np.errstate(all="ignore")  # inf·0 and friends give NaN silently, as in PyTorch
    quiet.__enter__()
    tensor_type = function.TENSOR
    add = operator.add if create_graph else _sum_arrays
    try:
        while ready:
            node = heapq.heappop(ready)[2]
            grads = node_grads.pop(id(node))
            if node.freed:
                raise RuntimeError(function._FREED.format(name=node.name))
            if visit is not None and id(node) not in visit:
                continue  # no target lies beyond it
            if node.hooks or node.retained or target_of_node:
                grads = _visit_outputs(node, grads, accumulate and targets is None,
                                       target_of_node, captured)
                if target_of_node and id(node) not in propagate:
                    continue
            # an op runs once a gradient reached it: only one of several outputs may lack one
            if len(grads) > 1 and node.materialize_grads and None in grads:
                grads = _materialized(node, grads)
            input_grads = node.fn.backward(node, *grads)
            if type(input_grads) is not tuple:
                input_grads = (input_grads,)
            edges, needs, inputs = node.edges, node.needs_input_grad, node.inputs
            if len(input_grads) != len(needs):
                _check_count(node, input_grads)
            sent = [None] * len(edges) if on_node is not None else None
            for i, (edge, g, need) in enumerate(zip(edges, input_grads, needs)):
                if g is None or edge is None or not need:
                    continue
                if type(g) is not tensor_type and not isinstance(g, tensor_type):
                    raise TypeError(f"function {node.name}Backward returned a "
                                    f"{type(g).__name__} as the gradient of input {i}; "
                                    "expected a Tensor or None")
                wanted, data = inputs[i], g._data
                like = wanted._data if type(wanted) is tensor_type else wanted
                if data.shape != like.shape or data.dtype != like.dtype:
                    g = _fit(g, wanted, node.name, i)
                if check and not np.all(np.isfinite(g._data)):
                    raise RuntimeError(
                        f"detect_anomaly: the backward of '{node.name}' produced non-finite "
                        f"values in the gradient of its input {i} (shape {g.shape})"
                    )
                if sent is not None:
                    sent[i] = g._data
                if type(edge) is Context or isinstance(edge, Context):
                    buffer = node_grads.get(id(edge))
                    if buffer is None:
                        buffer = node_grads[id(edge)] = [None] * len(edge.out_shapes)
                        heapq.heappush(ready, (-edge.sequence_nr, id(edge), edge))
                    slot = node.input_slots[i]
                    held = buffer[slot]
                    buffer[slot] = g if held is None else add(held, g)
                else:
                    held = leaf_grads.get(id(edge))
                    leaf_grads[id(edge)] = (edge, g if held is None else add(held[1], g))
            if on_node is not None:
                on_node(node, tuple(None if g is None else g._data for g in grads), tuple(sent))
            if not retain_graph:  # drop what the op saved and its inputs; the structure stays
                node._saved = ()
                node.inputs = None
                node.freed = True
        # these names still refer to the last node's gradients: drop them, or the check below
        # would count them as other holders and the leaves would copy their gradients
        input_grads = grads = g = data = like = sent = held = None
        while leaf_grads:
            _, (tensor, grad) = leaf_grads.popitem()
            if tensor._hooks:
                grad = _run_hooks(tensor._hooks, grad)
            if targets is not None:
                if id(tensor) in target_ids:
                    captured[id(tensor)] = grad
                    if accumulate:
                        tensor._accumulate_grad(grad)
            elif accumulate:
                # no one else holds this gradient or its memory (only the local name and the
                # argument of getrefcount do): the leaf may keep the array instead of a copy
                owned = sys.getrefcount(grad) == 2 and sys.getrefcount(grad._data) == 2
                tensor._accumulate_grad(grad, owned)
        if accumulate and targets is not None:
            for tensor in targets:
                if tensor.grad_fn is not None and id(tensor) in captured:
                    tensor._accumulate_grad(captured[id(tensor)])
    finally:
        quiet.__exit__(None, None, None)
        _set_grad_enabled(previous_mode)
    return captured


def _visit_outputs(node: Context, grads: list, retain: bool,
                   target_of_node: dict, captured: dict) -> list:
    """Hooks, ``retain_grad`` and ``autograd.grad`` targets at each output of ``node``."""
    for slot, grad in enumerate(grads):
        if grad is None:
            continue
        hooks = node.hooks.get(slot) if node.hooks else None
        if hooks:
            grads[slot] = grad = _run_hooks(hooks, grad)
        kept = node.retained.get(slot) if node.retained else None
        if kept is not None and retain:
            kept._accumulate_grad(grad)
        target = target_of_node.get((id(node), slot))
        if target is not None:
            captured[id(target)] = grad
    return grads


def _materialized(node: Context, grads: list) -> list:
    """The gradients of ``node``'s outputs, with zeros for the outputs that received none."""
    tensor = function.TENSOR
    return [tensor._from_op(np.zeros(shape, dtype), None) if g is None else g
            for g, shape, dtype in zip(grads, node.out_shapes, node.out_dtypes)]


def _check_count(node: Context, input_grads: tuple) -> None:
    """A backward may return more gradients than the op has inputs only if they are None."""
    expected = len(node.needs_input_grad)
    if len(input_grads) < expected or any(g is not None for g in input_grads[expected:]):
        raise RuntimeError(f"function {node.name}Backward returned an incorrect number of "
                           f"gradients (expected {expected}, got {len(input_grads)})")


def _fit(grad: Any, input: Any, name: str, slot: int) -> Any:
    """``grad`` summed to ``input``'s shape and cast to its dtype."""
    shape = input.shape
    if grad.shape != shape:
        try:
            grad = unbroadcast(grad, shape)
        except ValueError:
            raise RuntimeError(f"function {name}Backward returned an invalid gradient at index "
                               f"{slot}: got shape {grad.shape} but expected shape compatible "
                               f"with {shape}") from None
    if grad.dtype != input.dtype:
        grad = grad.to(input.dtype)
    return grad


def _as_tensors(value: Any, label: str, op: str) -> list[Tensor]:
    tensor = function.TENSOR
    items = [value] if isinstance(value, tensor) else list(value)
    for i, item in enumerate(items):
        if not isinstance(item, tensor):
            raise TypeError(f"{op}: {label}[{i}] must be a Tensor, got {type(item).__name__}")
    return items


def seed_gradient(tensor: Tensor, gradient: Any, op: str) -> Tensor:
    """The gradient a backward pass starts from: ones for a one-element tensor, else
    ``gradient`` (a tensor or array) checked against ``tensor``'s shape."""
    tensor_type = function.TENSOR
    if gradient is None:
        if tensor._data.size != 1:
            raise RuntimeError(
                f"{op}: grad can be implicitly created only for one-element outputs; this "
                f"tensor has shape {tensor.shape}, so pass gradient= of that shape"
            )
        return tensor_type._from_op(np.ones(tensor.shape, dtype=tensor.dtype), None)
    if not isinstance(gradient, tensor_type):
        gradient = tensor_type._from_op(np.asarray(gradient), None)
    if gradient.shape != tensor.shape:
        raise ValueError(f"{op}: gradient has shape {gradient.shape} but the tensor has "
                         f"shape {tensor.shape}; they must match")
    return gradient if gradient.dtype == tensor.dtype else gradient.to(tensor.dtype)


def _roots(outputs: Any, gradients: Any, op: str, create_graph: bool) -> tuple[list, list]:
    roots = _as_tensors(outputs, "outputs", op)
    if gradients is None:
        gradients = [None] * len(roots)
    elif not isinstance(gradients, (list, tuple)):
        gradients = [gradients]
    if len(gradients) != len(roots):
        raise ValueError(f"{op}: got {len(gradients)} gradients for {len(roots)} outputs")
    for root in roots:
        if not root.requires_grad:
            raise RuntimeError(
                f"{op}: a tensor does not require grad and has no grad_fn (did an input have "
                "requires_grad=True, and was grad mode on when it was computed?)"
            )
    return roots, [seed_gradient(r, g, op) for r, g in zip(roots, gradients)]


def backward(
    tensors: Tensor | Sequence[Tensor],
    grad_tensors: Any = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    inputs: Tensor | Sequence[Tensor] | None = None,
) -> None:
    """Accumulate the gradients of ``tensors`` into the ``.grad`` of the leaves, as PyTorch.

    ``retain_graph`` defaults to ``create_graph``; with ``inputs``, only those tensors (leaves
    or not) get their ``.grad`` accumulated.
    """
    observed_backward(None, tensors, grad_tensors, retain_graph, create_graph, inputs)


def observed_backward(
    on_node: NodeCallback | None,
    tensors: Tensor | Sequence[Tensor],
    grad_tensors: Any = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    inputs: Tensor | Sequence[Tensor] | None = None,
) -> None:
    """:func:`backward`, with ``on_node(ctx, grads_out, grads_in)`` called at every op as
    :func:`run_backward` calls it: what :mod:`tinyattn.inspect.recording` uses to watch the
    backward passes a script runs, without changing them."""
    retain = create_graph if retain_graph is None else retain_graph
    roots, seeds = _roots(tensors, grad_tensors, "backward", create_graph)
    targets = None if inputs is None else _as_tensors(inputs, "inputs", "backward")
    run_backward(roots, seeds, retain_graph=retain, create_graph=create_graph, targets=targets,
                 on_node=on_node)


def grad(
    outputs: Tensor | Sequence[Tensor],
    inputs: Tensor | Sequence[Tensor],
    grad_outputs: Any = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    allow_unused: bool | None = None,
    materialize_grads: bool = False,
) -> tuple[Tensor | None, ...]:
    """The gradients of ``outputs`` with respect to ``inputs``, returned instead of accumulated.

    PyTorch's ``torch.autograd.grad``: a tuple with one entry per input; ``retain_graph``
    defaults to ``create_graph``; an input the outputs do not depend on is an error unless
    ``allow_unused`` (its entry is then None, or zeros with ``materialize_grads``). With
    ``create_graph=True`` the returned gradients have a ``grad_fn`` and can be differentiated
    again.

    Examples
    --------
    >>> import tinyattn as ta
    >>> x = ta.tensor([1.0, 2.0], requires_grad=True)
    >>> (dx,) = ta.autograd.grad((x ** 3).sum(), x, create_graph=True)
    >>> dx.tolist()                        # 3 x²
    [3.0, 12.0]
    >>> ta.autograd.grad(dx.sum(), x)[0].tolist()   # 6 x
    [6.0, 12.0]
    """
    tensor = function.TENSOR
    retain = create_graph if retain_graph is None else retain_graph
    allow_unused = materialize_grads if allow_unused is None else allow_unused
    roots, seeds = _roots(outputs, grad_outputs, "grad", create_graph)
    targets = _as_tensors(inputs, "inputs", "grad")
    for i, t in enumerate(targets):
        if not t.requires_grad:
            raise RuntimeError(f"grad: inputs[{i}] does not require grad")
    captured = run_backward(roots, seeds, retain_graph=retain, create_graph=create_graph,
                            targets=targets, accumulate=False)
    results: list[Tensor | None] = []
    for i, t in enumerate(targets):
        g = captured.get(id(t))
        if g is None:
            if not allow_unused:
                raise RuntimeError(
                    f"grad: inputs[{i}] (shape {t.shape}) was not used to compute the outputs; "
                    "pass allow_unused=True to get None for it"
                )
            results.append(tensor._from_op(np.zeros(t.shape, t.dtype), None)
                           if materialize_grads else None)
        else:
            results.append(g)
    return tuple(results)

"""The backward pass: reverse topological order, one chain-rule step per recorded op.

:func:`run_backward` walks the graph that produced the roots with an explicit stack (so a
10,000-op chain needs no recursion), gives every op the gradient of its output (summed over
all the places the output was used) and sends what its backward returns on to the inputs.

Broadcasting is undone in exactly one place, :func:`unbroadcast`: a backward rule may return a
gradient of the *broadcast* shape and the engine sums it back to the input's shape, because the
backward of "copy this value along an axis" is "sum along that axis".

Two modes. Ordinarily gradients are numpy arrays and each op runs its fast ``backward``, with
grad mode off. With ``create_graph=True`` gradients are tensors and each op runs its
``differentiable_backward`` with grad mode on, so the gradients are themselves recorded and can
be differentiated again (Hessian-vector products, gradient penalties).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .function import Context
from .grad_mode import _set_grad_enabled, is_anomaly_enabled, is_grad_enabled

if TYPE_CHECKING:
    from ..tensor import Tensor

NodeCallback = Callable[[Context, np.ndarray, tuple[np.ndarray | None, ...]], None]


def unbroadcast(grad: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sum ``grad`` down to ``shape``: the backward of broadcasting (arrays or tensors).

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


def _topological_order(roots: Sequence[Context]) -> list[Context]:
    """Contexts reachable from ``roots``, each before every context that feeds it."""
    order: list[Context] = []
    visited = {id(r) for r in roots}
    stack: list[tuple[Context, int]] = [(r, 0) for r in roots]
    while stack:
        node, child = stack.pop()
        edges = node.edges
        if child < len(edges):
            stack.append((node, child + 1))
            parent = edges[child]
            if isinstance(parent, Context) and id(parent) not in visited:
                visited.add(id(parent))
                stack.append((parent, 0))
        else:
            order.append(node)
    order.reverse()
    return order


def _prune(order: list[Context], targets: set[int]) -> tuple[set[int], set[int]]:
    """Which contexts a backward towards ``targets`` (ids of contexts or leaves) must visit.

    Returns ``(visit, propagate)``: the ids of the contexts from which a target is reached (or
    that are targets), and of those whose own backward must run (a target lies beyond them).
    """
    visit: set[int] = set()
    propagate: set[int] = set()
    for node in reversed(order):  # parents first
        if any(id(e) in targets or id(e) in visit for e in node.edges if e is not None):
            propagate.add(id(node))
        if id(node) in propagate or id(node) in targets:
            visit.add(id(node))
    return visit, propagate


def _run_hooks(hooks: list[Callable], grad: Any, as_tensor: bool) -> Any:
    from ..tensor import Tensor

    value = grad if as_tensor else Tensor(grad)
    for hook in hooks:
        replaced = hook(value)
        if replaced is not None:
            value = replaced
    return value if as_tensor else value.data


def run_backward(
    roots: Sequence[Tensor],
    root_grads: Sequence[Any],
    retain_graph: bool = False,
    create_graph: bool = False,
    targets: Sequence[Tensor] | None = None,
    accumulate: bool = True,
    on_node: NodeCallback | None = None,
) -> dict[int, Any]:
    """Propagate ``root_grads`` (d out / d root) back through the graph behind ``roots``.

    Parameters
    ----------
    roots, root_grads
        The tensors to differentiate and the gradients they start from (arrays, or tensors
        when ``create_graph``).
    retain_graph
        Keep the saved values so that the graph can be walked again (else each visited op is
        freed).
    create_graph
        Record the backward pass itself (gradients become tensors with a ``grad_fn``).
    targets
        When given, only the gradients of these tensors are computed (others are pruned).
    accumulate
        Add the gradients into ``.grad`` (of every leaf, or of ``targets``), as ``backward()``
        does; when False they are only returned, as ``autograd.grad`` does.
    on_node
        Called as ``on_node(ctx, grad_out, grads_in)`` for each op (used by ``inspect.trace``).

    Returns
    -------
    dict
        ``id(target) -> gradient`` for each target that received one (empty without targets).
    """

    leaf_grads: dict[int, tuple[Tensor, Any]] = {}
    node_grads: dict[int, Any] = {}

    def send(dest: Context | Tensor, grad: Any) -> None:
        store = node_grads if isinstance(dest, Context) else leaf_grads
        key = id(dest)
        if isinstance(dest, Context):
            store[key] = store[key] + grad if key in store else grad
        else:
            store[key] = (dest, store[key][1] + grad if key in store else grad)

    root_nodes = []
    for root, grad in zip(roots, root_grads):
        if root.grad_fn is None:
            send(root, grad)
            continue
        if root.grad_fn.freed:
            raise RuntimeError(_FREED_MESSAGE.format(name=root.grad_fn.name))
        send(root.grad_fn, grad)
        root_nodes.append(root.grad_fn)
    order = _topological_order(root_nodes)
    target_ids = None
    captured: dict[int, Any] = {}
    target_of_node: dict[int, Tensor] = {}
    if targets is not None:
        target_ids = {id(t.grad_fn) if t.grad_fn is not None else id(t) for t in targets}
        target_of_node = {id(t.grad_fn): t for t in targets if t.grad_fn is not None}
        visit, propagate = _prune(order, target_ids)
        order = [node for node in order if id(node) in visit]
    check = is_anomaly_enabled()
    previous_mode = is_grad_enabled()
    _set_grad_enabled(create_graph)
    quiet = np.errstate(all="ignore")  # inf·0 and friends give NaN silently, as in PyTorch
    quiet.__enter__()
    try:
        for node in order:
            if node.freed:
                raise RuntimeError(_FREED_MESSAGE.format(name=node.name))
            grad = node_grads.pop(id(node), None)
            if grad is None:
                continue
            node.check_versions()
            if node.hooks:
                grad = _run_hooks(node.hooks, grad, create_graph)
            if node.retained is not None and accumulate and targets is None:
                node.retained._accumulate_grad(grad)
            if id(node) in target_of_node:
                captured[id(target_of_node[id(node)])] = grad
                if id(node) not in propagate:
                    continue
            input_grads = _call_backward(node, grad, create_graph)
            shaped = []
            for tensor, edge, needed_grad, g in zip(node.inputs, node.edges,
                                                    node.needs_input_grad, input_grads):
                if not needed_grad or g is None or edge is None:
                    shaped.append(None)
                    continue
                g = _fit(g, tensor, create_graph)
                if check and not np.all(np.isfinite(g if not create_graph else g.data)):
                    raise RuntimeError(
                        f"detect_anomaly: the backward of '{node.name}' produced non-finite "
                        f"values in the gradient of its input {len(shaped)} (shape {g.shape})"
                    )
                shaped.append(g)
                send(edge, g)
            if on_node is not None:
                on_node(node, grad if not create_graph else grad.data,
                        tuple(g if g is None or not create_graph else g.data for g in shaped))
            if not retain_graph:
                node.free()
        for tensor, grad in leaf_grads.values():
            if tensor._hooks:
                grad = _run_hooks(tensor._hooks, grad, create_graph)
            if targets is not None:
                if id(tensor) in target_ids:
                    captured[id(tensor)] = grad
                    if accumulate:
                        tensor._accumulate_grad(grad)
            elif accumulate:
                tensor._accumulate_grad(grad)
        if accumulate and targets is not None:
            for tensor in targets:
                if tensor.grad_fn is not None and id(tensor) in captured:
                    tensor._accumulate_grad(captured[id(tensor)])
    finally:
        quiet.__exit__(None, None, None)
        _set_grad_enabled(previous_mode)
    return captured


def _call_backward(node: Context, grad: Any, create_graph: bool) -> tuple:
    """One chain-rule step: the op's array backward, or its differentiable form."""
    if create_graph:
        rule = getattr(node.fn, "differentiable_backward", None)
        if rule is None:
            raise RuntimeError(
                f"create_graph=True: the op '{node.name}' has no differentiable_backward, so "
                "its gradient cannot be differentiated again"
            )
        input_grads = rule(node, grad)
    else:
        input_grads = node.fn.backward(node, grad)
    if not isinstance(input_grads, tuple):
        input_grads = (input_grads,)
    if len(input_grads) != len(node.inputs):
        raise RuntimeError(f"{node.name}.backward returned {len(input_grads)} gradients for "
                           f"{len(node.inputs)} inputs")
    return input_grads


def _fit(grad: Any, tensor: Tensor, create_graph: bool) -> Any:
    """``grad`` summed to ``tensor``'s shape and cast to its dtype."""
    if create_graph:
        from ..tensor import Tensor

        if not isinstance(grad, Tensor):
            grad = Tensor(np.asarray(grad))
        grad = unbroadcast(grad, tensor.shape)
        return grad if grad.dtype == tensor.dtype else grad.to(tensor.dtype)
    return unbroadcast(np.asarray(grad), tensor.shape).astype(tensor.dtype, copy=False)


_FREED_MESSAGE = (
    "backward: trying to backward through the graph a second time (op '{name}'): its saved "
    "values were freed after the first backward. Pass retain_graph=True to the first call "
    "if you need to backward twice."
)


def _as_tensors(value: Any, label: str, op: str) -> list[Tensor]:
    from ..tensor import Tensor

    items = [value] if isinstance(value, Tensor) else list(value)
    for i, item in enumerate(items):
        if not isinstance(item, Tensor):
            raise TypeError(f"{op}: {label}[{i}] must be a Tensor, got {type(item).__name__}")
    return items


def seed_gradient(tensor: Tensor, gradient: Any, op: str, create_graph: bool = False) -> Any:
    """The gradient a backward pass starts from: ones for a one-element tensor, else
    ``gradient`` checked against ``tensor``'s shape (an array, or a tensor with
    ``create_graph``)."""
    from ..tensor import Tensor

    if gradient is None:
        if tensor.data.size != 1:
            raise RuntimeError(
                f"{op}: grad can be implicitly created only for one-element outputs; this "
                f"tensor has shape {tensor.shape}, so pass gradient= of that shape"
            )
        seed = np.ones(tensor.shape, dtype=tensor.dtype)
        return Tensor(seed) if create_graph else seed
    if isinstance(gradient, Tensor):
        if gradient.shape != tensor.shape:
            raise ValueError(f"{op}: gradient has shape {gradient.shape} but the tensor has "
                             f"shape {tensor.shape}; they must match")
        if create_graph:
            return gradient if gradient.dtype == tensor.dtype else gradient.to(tensor.dtype)
        gradient = gradient.data
    array = np.asarray(gradient)
    if array.shape != tensor.shape:
        raise ValueError(f"{op}: gradient has shape {array.shape} but the tensor has shape "
                         f"{tensor.shape}; they must match")
    array = array.astype(tensor.dtype, copy=False)
    return Tensor(array) if create_graph else array


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
    return roots, [seed_gradient(r, g, op, create_graph) for r, g in zip(roots, gradients)]


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
    retain = create_graph if retain_graph is None else retain_graph
    roots, seeds = _roots(tensors, grad_tensors, "backward", create_graph)
    targets = None if inputs is None else _as_tensors(inputs, "inputs", "backward")
    run_backward(roots, seeds, retain_graph=retain, create_graph=create_graph, targets=targets)


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
    from ..tensor import Tensor

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
            results.append(Tensor(np.zeros(t.shape, t.dtype)) if materialize_grads else None)
        else:
            results.append(g if isinstance(g, Tensor) else Tensor(g))
    return tuple(results)

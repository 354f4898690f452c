"""Reverse-mode automatic differentiation: Function, Context, grad mode and the backward pass.

An op is a :class:`Function` subclass with two static methods side by side::

    forward(ctx, *arrays, **kwargs) -> array
    backward(ctx, grad) -> tuple of arrays (one per positional input; None for "no gradient")

``Function.apply`` unwraps tensors, runs ``forward`` on plain numpy arrays and, when grad mode is
on and an input requires grad, records the context as the output's ``grad_fn``. The backward
pass (:func:`backward`) walks the recorded graph in reverse topological order with an explicit
stack, so a 10,000-op chain needs no recursion.

Broadcasting is undone in exactly one place, :func:`unbroadcast`: a backward rule returns a
gradient of the *broadcast* shape and the engine sums it back to the input's shape, because the
backward of "copy this value along an axis" is "sum along that axis".
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

from .kernels.parallel import kernel_section

if TYPE_CHECKING:
    from .tensor import Tensor

_state = threading.local()


def is_grad_enabled() -> bool:
    """Whether operations are recorded for backward in this thread."""
    return getattr(_state, "grad_enabled", True)


def _set_grad_enabled(mode: bool) -> None:
    _state.grad_enabled = mode


class _GradMode:
    """Context manager *and* decorator that sets grad mode for its extent."""

    def __init__(self, mode: bool):
        self.mode = mode
        self._previous: list[bool] = []

    def __enter__(self) -> None:
        self._previous.append(is_grad_enabled())
        _set_grad_enabled(self.mode)

    def __exit__(self, *exc: object) -> None:
        _set_grad_enabled(self._previous.pop())

    def __call__(self, fn: Callable) -> Callable:
        import functools

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with _GradMode(self.mode):
                return fn(*args, **kwargs)

        return wrapper


def no_grad() -> _GradMode:
    """Disable graph recording, as a context manager (``with ta.no_grad():``) or decorator.

    Examples
    --------
    >>> import tinyattn as ta
    >>> x = ta.ones(2, requires_grad=True)
    >>> with ta.no_grad():
    ...     y = x * 2
    >>> y.requires_grad
    False
    """
    return _GradMode(False)


def enable_grad() -> _GradMode:
    """Re-enable graph recording inside a ``no_grad`` region."""
    return _GradMode(True)


def is_anomaly_enabled() -> bool:
    """Whether :func:`detect_anomaly` is active in this thread."""
    return getattr(_state, "anomaly", False)


@contextmanager
def detect_anomaly() -> Iterator[None]:
    """Check every gradient for NaN/inf during backward and name the op that produced it.

    Examples
    --------
    >>> import tinyattn as ta
    >>> x = ta.tensor([0.0, 1.0], requires_grad=True)
    >>> with ta.detect_anomaly():
    ...     try:
    ...         x.sqrt().sum().backward()
    ...     except RuntimeError as err:
    ...         print(str(err).split(":")[0])
    detect_anomaly
    """
    previous = is_anomaly_enabled()
    _state.anomaly = True
    try:
        yield
    finally:
        _state.anomaly = previous


def unbroadcast(grad: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sum ``grad`` down to ``shape``: the backward of numpy broadcasting.

    Leading axes that broadcasting added are summed away; axes where ``shape`` has size 1 but
    ``grad`` does not are summed with ``keepdims``.

    Examples
    --------
    >>> unbroadcast(np.ones((4, 2, 3)), (2, 1)).tolist()
    [[12.0], [12.0]]
    """
    if grad.shape == shape:
        return grad
    original = grad.shape
    extra = grad.ndim - len(shape)
    if extra < 0:
        raise ValueError(f"unbroadcast: gradient shape {grad.shape} has fewer dims than {shape}")
    if extra:
        grad = grad.sum(axis=tuple(range(extra)))
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and grad.shape[i] != 1)
    if axes:
        grad = grad.sum(axis=axes, keepdims=True)
    if grad.shape != shape:
        raise ValueError(f"unbroadcast: cannot reduce gradient of shape {original} to {shape}")
    return grad


class Context:
    """One recorded op: what its backward needs, and where the gradient goes next.

    The context of an op is the ``grad_fn`` of the tensor the op produced.

    Attributes
    ----------
    name : str
        The op's name (the Function's class name).
    inputs : tuple of Tensor
        The positional tensor inputs, in order (None once the graph has been freed).
    saved : tuple of np.ndarray
        What ``save_for_backward`` stored.
    needs_input_grad : tuple of bool
        For each input, whether a gradient must be computed for it.
    """

    def __init__(self, fn: type[Function], inputs: tuple[Tensor, ...]):
        self.fn = fn
        self.name = fn.__name__
        self.inputs: tuple[Tensor, ...] | None = inputs
        self.needs_input_grad = tuple(t.requires_grad for t in inputs)
        self.saved: tuple[Any, ...] = ()
        self.out_shape: tuple[int, ...] = ()
        self.out_dtype: np.dtype | None = None
        self.hooks: list[Callable] = []
        self.retained: Tensor | None = None
        self.freed = False

    def save_for_backward(self, *values: Any) -> None:
        """Keep arrays (or other values) for the backward rule."""
        self.saved = values

    def free(self) -> None:
        """Drop saved values and the links to the inputs (after a backward pass)."""
        self.saved = ()
        self.inputs = None
        self.freed = True

    @property
    def next_functions(self) -> tuple[Context | None, ...]:
        """The ``grad_fn`` of each input (None for leaves), as in PyTorch."""
        return tuple(t.grad_fn for t in self.inputs or ())

    def __repr__(self) -> str:
        return f"<{self.name}Backward>"


class Function:
    """Base class of every differentiable op; subclasses define ``forward`` and ``backward``."""

    @staticmethod
    def forward(ctx: Context, *arrays: np.ndarray, **kwargs: Any) -> np.ndarray:
        raise NotImplementedError

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray | None, ...]:
        raise NotImplementedError

    @classmethod
    def apply(cls, *inputs: Tensor, **kwargs: Any) -> Tensor:
        """Run the op on tensors and record it when any input requires grad."""
        from .tensor import Tensor

        ctx = Context(cls, inputs)
        with kernel_section:  # a lock only on numba's non-thread-safe workqueue layer
            out = cls.forward(ctx, *(t.data for t in inputs), **kwargs)
        record = is_grad_enabled() and any(ctx.needs_input_grad)
        result = Tensor._from_op(out, ctx if record else None)
        if record:
            ctx.out_shape = result.shape
            ctx.out_dtype = result.dtype
        return result


NodeCallback = Callable[[Context, np.ndarray, tuple[np.ndarray | None, ...]], None]


def _topological_order(root: Context) -> list[Context]:
    """Contexts reachable from ``root``, each after every context that consumes its output."""
    order: list[Context] = []
    visited = {id(root)}
    stack: list[tuple[Context, int]] = [(root, 0)]
    while stack:
        node, child = stack.pop()
        inputs = node.inputs or ()
        if child < len(inputs):
            stack.append((node, child + 1))
            parent = inputs[child].grad_fn
            if parent is not None and id(parent) not in visited:
                visited.add(id(parent))
                stack.append((parent, 0))
        else:
            order.append(node)
    order.reverse()
    return order


def _run_hooks(hooks: list[Callable], grad_tensor: Tensor) -> Tensor:
    for hook in hooks:
        replaced = hook(grad_tensor)
        if replaced is not None:
            grad_tensor = replaced
    return grad_tensor


def backward(
    root: Tensor,
    gradient: np.ndarray,
    retain_graph: bool = False,
    on_node: NodeCallback | None = None,
) -> None:
    """Propagate ``gradient`` (d out / d root) back through the graph that produced ``root``.

    Gradients of intermediate results live in a dict for the duration of the pass; they reach
    ``.grad`` only on leaves and on tensors that called ``retain_grad()``. Unless
    ``retain_graph`` is set, every visited context is freed afterwards. ``on_node`` (used by
    :mod:`tinyattn.inspect`) is called as ``on_node(ctx, grad_out, grads_in)`` for each op.
    """
    from .tensor import Tensor

    leaf_grads: dict[int, tuple[Tensor, np.ndarray]] = {}
    node_grads: dict[int, np.ndarray] = {}

    def send(tensor: Tensor, grad: np.ndarray) -> None:
        if tensor.grad_fn is None:
            if tensor.requires_grad:
                key = id(tensor)
                if key in leaf_grads:
                    leaf_grads[key] = (tensor, leaf_grads[key][1] + grad)
                else:
                    leaf_grads[key] = (tensor, grad)
        else:
            node = tensor.grad_fn
            node_grads[id(node)] = node_grads[id(node)] + grad if id(node) in node_grads else grad

    root_node = root.grad_fn
    if root_node is not None and root_node.freed:
        raise RuntimeError(_FREED_MESSAGE.format(name=root_node.name))
    send(root, gradient)
    order = _topological_order(root_node) if root_node is not None else []
    check = is_anomaly_enabled()
    with no_grad():
        for node in order:
            if node.freed:
                raise RuntimeError(_FREED_MESSAGE.format(name=node.name))
            grad = node_grads.pop(id(node), None)
            if grad is None:
                continue
            if node.hooks:
                grad = _run_hooks(node.hooks, Tensor(grad)).data
            if node.retained is not None:
                node.retained._accumulate_grad(grad)
            with kernel_section:
                input_grads = node.fn.backward(node, grad)
            if not isinstance(input_grads, tuple):
                input_grads = (input_grads,)
            inputs = node.inputs or ()
            if len(input_grads) != len(inputs):
                raise RuntimeError(
                    f"{node.name}.backward returned {len(input_grads)} gradients for "
                    f"{len(inputs)} inputs"
                )
            shaped = []
            for tensor, needed, g in zip(inputs, node.needs_input_grad, input_grads):
                if not needed or g is None:
                    shaped.append(None)
                    continue
                g = unbroadcast(np.asarray(g), tensor.shape).astype(tensor.dtype, copy=False)
                if check and not np.all(np.isfinite(g)):
                    raise RuntimeError(
                        f"detect_anomaly: the backward of '{node.name}' produced non-finite "
                        f"values in the gradient of its input {len(shaped)} (shape {g.shape})"
                    )
                shaped.append(g)
                send(tensor, g)
            if on_node is not None:
                on_node(node, grad, tuple(shaped))
            if not retain_graph:
                node.free()
        for tensor, grad in leaf_grads.values():
            if tensor._hooks:
                grad = _run_hooks(tensor._hooks, Tensor(grad)).data
            tensor._accumulate_grad(grad)


_FREED_MESSAGE = (
    "backward: trying to backward through the graph a second time (op '{name}'): its saved "
    "values were freed after the first backward. Pass retain_graph=True to the first call "
    "if you need to backward twice."
)

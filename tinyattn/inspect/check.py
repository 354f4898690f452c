"""Re-test every node of a live graph: each op's backward against central finite differences.

A gradient check of a whole model says *that* a gradient is wrong; this says *where*. For node
``#k`` with output ``y = f(x_0, x_1, ...)``, a random cotangent ``v`` of ``y``'s shape and each
input ``x_i`` that needs a gradient:

* the analytic side is the op's own ``backward(ctx, v)`` — its one rule, with its kernel fast
  path where it has one, as an ordinary ``backward()`` runs it — on the values the node saved
  in the forward pass (the graph is not modified), summed back to ``x_i``'s shape;
* the numeric side is the central difference (:func:`tinyattn.gradcheck.central_difference`)
  of ``L(x_i) = <v, f(..., x_i, ...)>``, recomputed in float64: ``fn.forward`` runs again on
  float64 copies of the node's input tensors with its other recorded arguments
  (``ctx.inputs``, ``ctx.kwargs``), so a float32 graph is checked against an exact reference.
  A random forward (dropout) is deterministic here: its seed is one of those arguments. A
  linear op (add, reshape, dropout ...) does not keep the values of an intermediate input (see
  :class:`tinyattn.autograd.ReleasedInput`); it is rerun on random values of that input's
  shape, which test the same Jacobian.

Both are compared along probes ``u`` — every unit vector for small inputs, random directions
for large ones (``<g_i, u>`` against ``dL/du``): pass when ``|analytic − numeric| <= atol · scale
+ rtol · |numeric|``, where ``scale`` is the largest gradient seen at that input (so the
tolerances are relative to the node's own gradient size). Integer inputs (indices) and masks
are held fixed. A probe that fails where the function has a kink (ReLU at 0, a tie in a max) is
recognised by central differences taken just before and just after the point, which disagree,
and reported as a kink rather than a failure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..autograd import Context, ReleasedInput, no_grad, unbroadcast
from ..autograd.engine import nodes_towards
from ..gradcheck import central_difference
from ..tables import Row, TableReport, format_float, shape_text
from ..tensor import Tensor, from_numpy
from .graph import graph_nodes, graph_target

TOLERANCES = {"float64": (1e-6, 1e-4), "float32": (1e-3, 1e-2), "float16": (2e-2, 5e-2)}
"""Default ``(atol, rtol)`` by the dtype of the node's output (its backward's precision)."""


@dataclass(frozen=True)
class NodeCheck:
    """The result for one node.

    Attributes
    ----------
    index : int
        The node's number (``#k``, the engine's backward order).
    name : str
        The op's name.
    input_shapes : tuple
        Shape of every input.
    checked : tuple of int
        The input slots that were compared (those that need a gradient).
    max_abs_error, max_rel_error : float or None
        Largest ``|analytic − numeric|`` over all probes, and the same divided by the input's
        gradient scale (None when nothing was compared).
    status : str
        ``'ok'``, ``'FAIL'``, ``'kink'`` (disagreement only where the op is not
        differentiable) or ``'skipped'``.
    note : str
        Why it failed or was skipped, or which input failed.
    """

    index: int
    name: str
    input_shapes: tuple[tuple[int, ...], ...]
    checked: tuple[int, ...]
    max_abs_error: float | None
    max_rel_error: float | None
    status: str
    note: str = ""

    @property
    def passed(self) -> bool:
        """False only for a failure (a skipped node or a kink is not a failure)."""
        return self.status != "FAIL"


class CheckReport(TableReport):
    """Every node's :class:`NodeCheck`; ``ok`` is True when none failed.

    ``str(report)`` is a table (``#``, op, input shapes, errors, result) followed by a summary
    that names the first failing node; Jupyter shows the same as HTML with failures shaded.
    """

    def __init__(self, nodes: list[NodeCheck]):
        self.nodes = nodes

    @property
    def failures(self) -> list[NodeCheck]:
        """The nodes that failed, in graph order."""
        return [n for n in self.nodes if not n.passed]

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def first_failure(self) -> NodeCheck | None:
        """The failing node nearest the output (the first one the backward pass runs)."""
        failures = self.failures
        return failures[0] if failures else None

    def table_header(self) -> Row:
        return ("#", "op", "input shapes", "checked", "max abs err", "max rel err", "result",
                "note")

    def table_rows(self) -> list[Row]:
        return [(str(n.index), n.name, ", ".join(shape_text(s) for s in n.input_shapes),
                 ",".join(str(i) for i in n.checked) or "-", format_float(n.max_abs_error),
                 format_float(n.max_rel_error), n.status, n.note) for n in self.nodes]

    def marked(self) -> list[bool]:
        return [not n.passed for n in self.nodes]

    def summary(self) -> str:
        skipped = sum(n.status == "skipped" for n in self.nodes)
        kinks = sum(n.status == "kink" for n in self.nodes)
        counts = f"{len(self.nodes)} nodes checked ({skipped} skipped, {kinks} at a kink)"
        first = self.first_failure
        if first is None:
            return f"{counts}: every backward agrees with finite differences"
        return (f"{counts}: {len(self.failures)} FAILED; first failing node: #{first.index} "
                f"{first.name} ({first.note}, max rel error {format_float(first.max_rel_error)})")

    def __repr__(self) -> str:
        return f"<CheckReport of {len(self.nodes)} nodes, {len(self.failures)} failed>"


def check_graph(
    output: Tensor,
    inputs: Tensor | Sequence[Tensor] | None = None,
    eps: float = 1e-6,
    atol: float | None = None,
    rtol: float | None = None,
    max_elements: int = 16,
    directions: int = 3,
    seed: int = 0,
) -> CheckReport:
    """Check the backward of every op in the live graph behind ``output``.

    Parameters
    ----------
    output : Tensor
        The output of a graph not yet backwarded (or backwarded with ``retain_graph=True``).
    inputs : Tensor or sequence of Tensor, optional
        Only check the nodes through which a gradient reaches these tensors (leaves or
        intermediates); default: every node.
    eps : float
        The finite-difference step (in float64).
    atol, rtol : float, optional
        Tolerances relative to each input's gradient scale; default by the node's dtype
        (:data:`TOLERANCES`).
    max_elements : int
        Inputs with at most this many elements are probed element by element, larger ones
        along ``directions`` random directions.
    seed : int
        Seeds the cotangents and directions (a local generator).

    Returns
    -------
    CheckReport
        One row per node; ``report.ok``, ``report.first_failure``.

    Examples
    --------
    >>> import tinyattn as ta
    >>> x = ta.randn(3, 4, requires_grad=True)
    >>> report = check_graph((x @ x.T).softmax(dim=-1).sum())
    >>> report.ok, [n.name for n in report.nodes]
    (True, ['Sum', 'Softmax', 'MatMul', 'Permute'])
    """
    order = graph_nodes(output, "check_graph")
    if inputs is not None:
        wanted = [inputs] if isinstance(inputs, Tensor) else list(inputs)
        targets = {id(graph_target(t, order, "check_graph")) for t in wanted}
        _, through = nodes_towards(order, targets)  # the nodes whose backward reaches a target
        selected = [(i, node) for i, node in enumerate(order) if id(node) in through]
    else:
        selected = list(enumerate(order))
    rng = np.random.default_rng(seed)
    with no_grad():
        return CheckReport([_check_node(node, index, rng, eps, atol, rtol, max_elements,
                                        directions) for index, node in selected])


def _as_float64(value: Any) -> Any:
    """A keyword argument for the float64 rerun: float arrays and float dtypes become float64."""
    if isinstance(value, np.ndarray) and value.dtype.kind == "f":
        return value.astype(np.float64)
    if isinstance(value, (np.dtype, type)):
        try:
            if np.dtype(value).kind == "f":
                return np.dtype(np.float64)
        except TypeError:
            return value
    if isinstance(value, tuple):
        return tuple(_as_float64(v) for v in value)
    return value


def _is_tensor(value: Any) -> bool:
    return isinstance(value, (Tensor, ReleasedInput))


def _input_values(tensor: Tensor | ReleasedInput, rng: np.random.Generator) -> np.ndarray:
    """An input's values for the rerun: float64 copies, or random normal values where a linear
    op did not keep them (its Jacobian is the same at every point)."""
    if isinstance(tensor, ReleasedInput):
        values = rng.standard_normal(tensor.shape)
        return values if tensor.dtype.kind == "f" else values.astype(tensor.dtype)
    return tensor.numpy().astype(np.float64) if tensor.dtype.kind == "f" else tensor.numpy()


def _check_node(node: Context, index: int, rng: np.random.Generator, eps: float,
                atol: float | None, rtol: float | None, max_elements: int,
                directions: int) -> NodeCheck:
    slots = [i for i, value in enumerate(node.inputs) if _is_tensor(value)]
    shapes = tuple(node.inputs[i].shape for i in slots)
    wanted = tuple(i for i in slots
                   if node.needs_input_grad[i] and node.inputs[i].dtype.kind == "f")

    def result(status: str, note: str, errors: tuple = (None, None)) -> NodeCheck:
        return NodeCheck(index, node.name, shapes, wanted, errors[0], errors[1], status, note)

    if not wanted:
        return result("skipped", "no input needs a gradient")
    try:
        node.saved_tensors  # noqa: B018  (raises if a saved tensor was changed in place)
    except RuntimeError:
        return result("skipped", "a saved tensor was modified in place after the op")
    default_atol, default_rtol = TOLERANCES.get(np.dtype(node.out_dtype).name, (1e-3, 1e-2))
    atol = default_atol if atol is None else atol
    rtol = default_rtol if rtol is None else rtol

    args = [_input_values(v, rng) if _is_tensor(v) else _as_float64(v) for v in node.inputs]
    kwargs = {k: _as_float64(v) for k, v in node.kwargs.items()}

    def forward(values: list) -> tuple[np.ndarray, ...]:
        tensors = [from_numpy(v) if i in slots else v for i, v in enumerate(values)]
        fresh = Context(node.fn, tuple(tensors), node.needs_input_grad, kwargs)
        out = node.fn.forward(fresh, *tensors, **kwargs)
        outs = out if isinstance(out, tuple) else (out,)
        return tuple(np.asarray(o.numpy(), dtype=np.float64) for o in outs)

    try:
        finite = [np.isfinite(o) for o in forward(args)]  # -inf where a mask filled: constant
    except Exception as err:
        return result("skipped", f"the forward could not be rerun in float64 "
                                 f"({type(err).__name__}: {err})")
    cotangents = [(rng.standard_normal(shape) * ok).astype(dtype)
                  for shape, dtype, ok in zip(node.out_shapes, node.out_dtypes, finite)]
    weights = [c.astype(np.float64) for c in cotangents]
    try:
        grads = node.fn.backward(node, *(from_numpy(c.copy()) for c in cotangents))
    except Exception as err:  # a learner's backward may fail in any way: report, go on
        return result("FAIL", f"backward raised {type(err).__name__}: {err}")
    grads = grads if isinstance(grads, tuple) else (grads,)
    if len(grads) < len(node.inputs):
        return result("FAIL", f"backward returned {len(grads)} gradients for "
                              f"{len(node.inputs)} inputs")

    def objective(slot: int):
        def loss(x: np.ndarray) -> float:
            values = list(args)
            values[slot] = x
            return float(sum(np.sum(np.where(ok, out * w, 0.0))
                             for out, w, ok in zip(forward(values), weights, finite)))
        return loss

    worst_abs = worst_rel = 0.0
    status, note = "ok", ""
    for slot in wanted:
        grad = grads[slot]
        if grad is None:
            return result("FAIL", f"backward returned None for input {slot}, which needs a "
                                  "gradient")
        shape = node.inputs[slot].shape
        try:
            analytic = unbroadcast(np.asarray(grad.numpy() if isinstance(grad, Tensor) else grad,
                                              dtype=np.float64), shape)
        except ValueError:
            return result("FAIL", f"input {slot}: gradient of shape {np.shape(grad)} for an "
                                  f"input of shape {shape_text(shape)}")
        loss = objective(slot)
        x = args[slot]
        movable = np.isfinite(x)  # a -inf (masked) entry is not perturbed
        if x.size <= max_elements:
            probes = np.eye(x.size).reshape((x.size,) + x.shape)[movable.reshape(-1)]
        else:
            probes = rng.standard_normal((directions,) + x.shape) * movable
        with np.errstate(invalid="ignore"):
            numeric = np.array([central_difference(loss, x, u, eps) for u in probes])
            exact = np.array([np.sum(np.where(u != 0, analytic * u, 0.0)) for u in probes])
        if not (np.all(np.isfinite(numeric)) and np.all(np.isfinite(exact))):
            return result("FAIL", f"input {slot}: non-finite values in the "
                                  f"{'analytic' if np.all(np.isfinite(numeric)) else 'numeric'} "
                                  "gradient")
        scale = max(float(np.max(np.abs(numeric), initial=0.0)),
                    float(np.max(np.abs(exact), initial=0.0)), 1e-30)
        errors = np.abs(exact - numeric)
        worst_abs = max(worst_abs, float(np.max(errors, initial=0.0)))
        worst_rel = max(worst_rel, float(np.max(errors, initial=0.0)) / scale)
        bad = np.flatnonzero(errors > atol * scale + rtol * np.abs(numeric))
        if bad.size == 0:
            continue
        kinks = [k for k in bad if _at_kink(loss, x, probes[k], eps, exact[k],
                                            atol * scale)]
        if len(kinks) < bad.size:
            k = max((k for k in bad if k not in kinks), key=lambda k: errors[k])
            if x.size <= max_elements:
                element = np.unravel_index(np.flatnonzero(movable)[k], x.shape)
                where = f"element {tuple(int(i) for i in element)}"
            else:
                where = f"random direction {k}"
            return result("FAIL", f"input {slot} disagrees at {bad.size - len(kinks)} of "
                                  f"{len(probes)} probes (worst at {where}: analytic "
                                  f"{exact[k]:.4g}, numeric {numeric[k]:.4g})",
                          (worst_abs, worst_rel))
        status, note = "kink", f"input {slot}: {len(kinks)} probes at a kink"
    return result(status, note, (worst_abs, worst_rel))


def _at_kink(loss: Any, x: np.ndarray, direction: np.ndarray, eps: float, analytic: float,
             tolerance: float) -> bool:
    """Whether ``x`` sits at a kink along ``direction``: the derivative just before and just
    after the point differ, and the analytic value is one of them (or between)."""
    before = central_difference(loss, x - 2 * eps * direction, direction, eps / 2)
    after = central_difference(loss, x + 2 * eps * direction, direction, eps / 2)
    low, high = min(before, after), max(before, after)
    return high - low > tolerance and low - tolerance <= analytic <= high + tolerance

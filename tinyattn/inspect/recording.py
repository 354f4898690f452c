"""Record what a training run's backward passes do, without changing them.

Three things are recorded while a :func:`recording` (or :func:`module_scopes`) is active:

* **module scopes** — every op is tagged with the modules whose ``forward`` was running when it
  was recorded (``GPT`` → ``transformer.h.0`` → ``transformer.h.0.attn`` → ``...c_attn``), and
  every :class:`~tinyattn.nn.hooks.HookPoint` names the op whose output passed through it; the
  explorer groups its graph by them. (``Module.__call__`` and ``Function.apply`` are wrapped
  for the extent of the block.)
* **attention maps per step** — at every ``every``-th ``backward()`` call, for every attention
  in the graph (a :class:`~tinyattn.ops.attention.FusedAttention` op, or a ``Softmax`` over the
  last dim whose output is multiplied by the values), the weights ``P``, the gradient ``dP``
  arriving at them and the gradient ``dS = P ⊙ (dP − rowsum(dP ⊙ P))`` at the scores, per
  head: :class:`SiteRecord`. The backward pass is the script's own — ``backward()`` runs as it
  would, with an observer called at each op (:func:`~tinyattn.autograd.engine.observed_backward`)
  — so no number of the run changes. A fused attention never forms ``P``: it is recomputed
  from the op's saved ``q``, ``k``, ``v`` and options with the composed formulas, in float64,
  and ``dP = (g vᵀ) ⊙ z`` (``z`` the dropout factors) from the gradient ``g`` arriving at the
  op's output. On the composed path ``P`` is the softmax's output, ``dP`` the gradient it
  received and ``dS`` the gradient it sent back.
* **the whole graph of one step** — at the ``graph_step``-th ``backward()`` call, before the
  backward runs: every node's values, its :func:`~tinyattn.inspect.check_graph` verdict, its
  saved memory, every parameter's :func:`~tinyattn.inspect.explain` path; and during the
  backward every gradient (:class:`tinyattn.inspect.view.GraphCapture`).

``tinyattn run --inspect-step N`` is a :func:`recording` around a whole script.
"""

from __future__ import annotations

import contextlib
import sys
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import autograd
from ..autograd import Context, Function, no_grad
from ..autograd.engine import observed_backward, topological_order
from ..nn.hooks import HookPoint
from ..nn.module import Module
from ..ops.attention import attention_weights, dropout_factors, heads_layout
from ..tables import Row, TableReport
from ..tensor import Tensor, from_numpy
from .graph import consumers
from .saturation import softmax_gain
from .summaries import finite_or_text, heatmap, pool

if TYPE_CHECKING:
    from .view import View

# ---- module scopes ----------------------------------------------------------------------------
Scope = tuple[tuple[str, str], ...]
"""The modules running when an op was recorded, outermost first: ``(group id, class name)``
pairs. A group id is the root module's class name, then ``/`` and the module's dotted name in
the root (``GPT/transformer.h.0.attn``)."""

SCOPES: weakref.WeakKeyDictionary[Context, Scope] = weakref.WeakKeyDictionary()
"""The scope of every op recorded inside :func:`module_scopes` (by its node)."""
HOOK_POINTS: weakref.WeakKeyDictionary[Context, list[str]] = weakref.WeakKeyDictionary()
"""The hook points (group ids) that the output of a node passed through."""
ROOTS: weakref.WeakValueDictionary[str, Module] = weakref.WeakValueDictionary()
"""The root modules seen (called with no module running), by group id."""


class _ScopeState:
    """The modules running now (a stack of scopes) and the names of the current root."""

    def __init__(self) -> None:
        self.depth = 0
        self.stack: list[Scope] = [()]
        self.names: dict[int, str] = {}
        self.root = ""
        self.root_ids: weakref.WeakKeyDictionary[Module, str] = weakref.WeakKeyDictionary()
        self.call: Callable | None = None
        self.apply: Callable | None = None
        self.apply_descriptor: Any = None


_STATE = _ScopeState()


def _root_id(module: Module) -> str:
    """A group id for a root module: its class name (``GPT``, ``GPT#2`` for a second one)."""
    known = _STATE.root_ids.get(module)
    if known is not None:
        return known
    base = type(module).__name__
    gid, n = base, 1
    while gid in ROOTS and ROOTS.get(gid) is not module:
        n += 1
        gid = f"{base}#{n}"
    _STATE.root_ids[module] = gid
    ROOTS[gid] = module
    return gid


def _scoped_call(self: Module, *args: Any, **kwargs: Any) -> Any:
    state = _STATE
    if len(state.stack) == 1:  # a root call: name the modules below it
        gid = _root_id(self)
        state.names = {id(m): name for name, m in self.named_modules()}
        state.root = gid
    else:
        path = state.names.get(id(self))
        parent = state.stack[-1][-1][0]
        gid = f"{state.root}/{path}" if path else f"{parent}.<{type(self).__name__}>"
    if isinstance(self, HookPoint) and args and isinstance(args[0], Tensor) \
            and args[0].grad_fn is not None:
        HOOK_POINTS.setdefault(args[0].grad_fn, []).append(gid)
    state.stack.append(state.stack[-1] + ((gid, type(self).__name__),))
    try:
        return state.call(self, *args, **kwargs)
    finally:
        state.stack.pop()


def _scoped_apply(cls: type[Function], *args: Any, **kwargs: Any) -> Any:
    outputs = _STATE.apply(cls, *args, **kwargs)
    scope = _STATE.stack[-1]
    if scope:
        for out in outputs if isinstance(outputs, tuple) else (outputs,):
            node = getattr(out, "grad_fn", None)
            if isinstance(node, Context) and node not in SCOPES:
                SCOPES[node] = scope
    return outputs


@contextlib.contextmanager
def module_scopes() -> Iterator[None]:
    """Tag every op recorded inside the block with the modules running (:data:`SCOPES`) and
    the hook points its output passes (:data:`HOOK_POINTS`); blocks may nest.

    Examples
    --------
    >>> import tinyattn as ta
    >>> model = ta.nn.Sequential(ta.nn.Linear(3, 2), ta.nn.Tanh())
    >>> with module_scopes():
    ...     y = model(ta.randn(4, 3))
    >>> [gid for gid, _ in SCOPES[y.grad_fn]]
    ['Sequential', 'Sequential/1']
    """
    state = _STATE
    if state.depth == 0:
        state.call = Module.__call__
        state.apply_descriptor = Function.__dict__["apply"]
        state.apply = state.apply_descriptor.__func__
        state.stack = [()]
        Module.__call__ = _scoped_call
        Function.apply = classmethod(_scoped_apply)
    state.depth += 1
    try:
        yield
    finally:
        state.depth -= 1
        if state.depth == 0:
            Module.__call__ = state.call
            Function.apply = state.apply_descriptor
            state.call = state.apply = state.apply_descriptor = None


def parameter_names(order: list[Context]) -> dict[int, tuple[str, str]]:
    """``id(parameter) -> (group id of its module, dotted name)`` for the parameters of the
    root modules whose forward recorded nodes of ``order``."""
    roots = []
    for node in order:
        scope = SCOPES.get(node)
        if scope and scope[0][0] not in roots:
            roots.append(scope[0][0])
    names: dict[int, tuple[str, str]] = {}
    for gid in roots:
        module = ROOTS.get(gid)
        if module is None:
            continue
        for name, param in module.named_parameters():
            owner = name.rpartition(".")[0]
            names.setdefault(id(param), (f"{gid}/{owner}" if owner else gid, name))
    return names


# ---- attention sites --------------------------------------------------------------------------
MAP_LIMIT = 32
"""Attention maps are pooled to at most this many queries and keys."""
GAIN_EXAMPLES = 8
"""The softmax gain by query position is averaged over at most this many sequences."""


@dataclass
class SiteRecord:
    """One attention call at one step: its maps and numbers per head.

    Attributes
    ----------
    name : str
        The attention module's dotted name (``transformer.h.0.attn``; ``attention 0`` without
        module scopes), with `` (call 2)`` for a second call of the same module.
    kind : str
        ``'fused'`` (P recomputed from the op's q, k, v) or ``'composed'`` (the softmax op's
        own values).
    node : int
        The op's number ``#k`` in its graph.
    shape : tuple
        ``(B, H, T, S)``: the dim before the queries is the head, the dims before it the batch.
    norms : dict
        ``'P'``, ``'dP'``, ``'dS'`` → ``(H,)`` Euclidean norms over the batch.
    gain : ndarray (H, T)
        The largest eigenvalue of the softmax Jacobian ``diag(p) − p pᵀ`` of each query's row,
        averaged over the first :data:`GAIN_EXAMPLES` sequences: how much gradient the softmax
        can pass at each query position (0: none, ½ at most).
    maps : dict
        ``'P'``, ``'dP'``, ``'dS'`` → ``(H, t, s)``: the first sequence, pooled to at most
        :data:`MAP_LIMIT` × :data:`MAP_LIMIT` (exact when ``T`` and ``S`` are that small).
    above_diagonal : float
        The largest ``|dS|`` or ``|P|`` strictly above the diagonal: 0.0 for causal attention.
    P, dP, dS : ndarray or None
        The whole ``(B, H, T, S)`` arrays, kept for the step whose graph is captured.
    """

    name: str
    kind: str
    node: int
    shape: tuple[int, int, int, int]
    norms: dict[str, np.ndarray]
    gain: np.ndarray
    maps: dict[str, np.ndarray]
    above_diagonal: float
    P: np.ndarray | None = None
    dP: np.ndarray | None = None
    dS: np.ndarray | None = None

    def page_data(self) -> dict[str, Any]:
        """What the explorer's page shows of this site (JSON-ready)."""
        return {
            "name": self.name, "kind": self.kind, "node": self.node, "shape": list(self.shape),
            "norms": {k: [finite_or_text(x) for x in v] for k, v in self.norms.items()},
            "gain": [[float(f"{g:.6g}") for g in row] for row in self.gain],
            "maps": {k: [heatmap(m, MAP_LIMIT, signed=k != "P") for m in v]
                     for k, v in self.maps.items()},
            "above_diagonal": finite_or_text(self.above_diagonal),
        }


def _bhts(array: np.ndarray) -> np.ndarray:
    """``(..., H, T, S)`` as ``(B, H, T, S)`` (the kernel's layout: the last leading dim is
    the head, the others the batch)."""
    B, H = heads_layout(array.shape[:-2])
    return array.reshape(B, H, *array.shape[-2:])


def fused_maps(node: Context, grad: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``P``, ``dP``, ``dS`` of a :class:`~tinyattn.ops.attention.FusedAttention` node, from its
    saved ``q``, ``k``, ``v`` and options and the gradient ``grad`` of its output, in float64
    (shapes ``(..., H, T, S)``)."""
    q, k, v, _ = node.saved_tensors
    options = node.options
    with no_grad():
        q64, k64 = (from_numpy(t.numpy().astype(np.float64)) for t in (q, k))
        mask = node.mask
        if mask is not None and mask.dtype.kind == "f":
            mask = mask.astype(np.float64)
        P = attention_weights(q64, k64, None if mask is None else from_numpy(mask),
                              options["is_causal"], options["scale"],
                              options["window_size"]).numpy()
    values = v.numpy().astype(np.float64)
    H, Hkv = (q.shape[-3], v.shape[-3]) if q.ndim > 2 else (1, 1)
    if Hkv != H:
        values = np.repeat(values, H // Hkv, axis=-3)
    dP = np.matmul(np.asarray(grad, dtype=np.float64), np.swapaxes(values, -1, -2))
    if options["dropout_p"] > 0.0:
        dP = dP * dropout_factors(options["seed"], P.shape, options["dropout_p"],
                                  np.float64).numpy()
    dS = P * (dP - np.sum(dP * P, axis=-1, keepdims=True))
    return P, dP, dS


def composed_maps(node: Context, grad: np.ndarray,
                  sent: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``P``, ``dP``, ``dS`` of an attention ``Softmax`` node: its output, the gradient it
    received and the one it sent back (computed from the two when it sent none)."""
    (y,) = node.saved_tensors
    P = y.numpy().astype(np.float64)
    dP = np.asarray(grad, dtype=np.float64)
    if sent is None:
        dS = P * (dP - np.sum(dP * P, axis=-1, keepdims=True))
    else:
        dS = np.asarray(sent, dtype=np.float64)
    return P, dP, dS


def summarise_site(name: str, kind: str, index: int, P: np.ndarray, dP: np.ndarray,
                   dS: np.ndarray, keep: bool = False) -> SiteRecord:
    """The :class:`SiteRecord` of one attention's ``P``, ``dP``, ``dS`` (any ``(..., T, S)``
    layout)."""
    P4, dP4, dS4 = (_bhts(a) for a in (P, dP, dS))
    B, H, T, S = P4.shape
    arrays = {"P": P4, "dP": dP4, "dS": dS4}
    norms = {key: np.sqrt(np.sum(np.square(a), axis=(0, 2, 3))) for key, a in arrays.items()}
    gain = softmax_gain(P4[:GAIN_EXAMPLES]).mean(axis=0) if B else np.zeros((H, T))
    maps = {key: np.stack([pool(a[0, h], MAP_LIMIT) for h in range(H)]) if B and H else
            np.zeros((H, 0, 0)) for key, a in arrays.items()}
    above = np.triu(np.ones((T, S), dtype=bool), k=1)
    leak = max(float(np.max(np.abs(dS4[..., above]), initial=0.0)),
               float(np.max(np.abs(P4[..., above]), initial=0.0)))
    record = SiteRecord(name, kind, index, (B, H, T, S), norms, gain, maps, leak)
    if keep:
        record.P, record.dP, record.dS = P4, dP4, dS4
    return record


def _feeds_values(node: Context, used: dict[int, list[tuple[Context, int]]]) -> bool:
    """Whether ``node``'s output is multiplied by the values: the left operand of a MatMul,
    directly or through a dropout (a Dropout op, or a product with the dropout factors)."""
    frontier = [node]
    for _ in range(3):
        following = []
        for current in frontier:
            for user, slot in used.get(id(current), []):
                if user.name == "MatMul" and slot == 0:
                    return True
                if user.name in ("Dropout", "Mul"):
                    following.append(user)
        frontier = following
    return False


def attention_sites(order: list[Context]) -> list[tuple[int, Context, str, str]]:
    """``(index, node, name, kind)`` of every attention in the graph, in forward order.

    A site is a ``FusedAttention`` op, or a ``Softmax`` over the last dim of an array of at
    least 2 dims whose output feeds a ``MatMul`` as its left operand. Its name is the module
    that ran it (from the module scopes, without the root's name), else ``attention i``.
    """
    used = consumers(order)
    found = []
    for index in range(len(order) - 1, -1, -1):  # forward order
        node = order[index]
        if node.name == "FusedAttention":
            found.append((index, node, "fused"))
        elif node.name == "Softmax" and len(node.out_shape) >= 2:
            dim = node.inputs[1] if len(node.inputs) > 1 else node.kwargs.get("dim", -1)
            if dim in (-1, len(node.out_shape) - 1) and _feeds_values(node, used):
                found.append((index, node, "composed"))
    sites, seen = [], {}
    for i, (index, node, kind) in enumerate(found):
        scope = SCOPES.get(node)
        name = scope[-1][0].partition("/")[2] or scope[-1][0] if scope else f"attention {i}"
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:
            name = f"{name} (call {seen[name]})"
        sites.append((index, node, name, kind))
    return sites


class SiteWatcher:
    """Called at every op of a backward pass (``on_node``): summarises each attention site
    of ``order`` when the backward reaches it (:class:`SiteRecord`)."""

    def __init__(self, order: list[Context], keep: bool = False):
        self.sites = {id(node): (index, name, kind)
                      for index, node, name, kind in attention_sites(order)}
        self.keep = keep
        self.records: dict[int, SiteRecord] = {}
        self.errors: list[str] = []

    def on_node(self, node: Context, grads_out: tuple, grads_in: tuple) -> None:
        site = self.sites.get(id(node))
        if site is None or grads_out[0] is None:
            return
        index, name, kind = site
        try:
            with no_grad():
                if kind == "fused":
                    arrays = fused_maps(node, grads_out[0])
                else:
                    arrays = composed_maps(node, grads_out[0], grads_in[0])
            self.records[index] = summarise_site(name, kind, index, *arrays, keep=self.keep)
        except Exception as err:  # an inspection must never break the run it watches
            self.errors.append(f"attention {name} (#{index}): {type(err).__name__}: {err}")

    def results(self) -> list[SiteRecord]:
        """The sites reached, in forward order."""
        return [self.records[i] for i in sorted(self.records, reverse=True)]


# ---- a recording of a training run ------------------------------------------------------------
@dataclass
class StepRecord:
    """The attention of one ``backward()`` call: ``step`` is its number (1 for the first)."""

    step: int
    loss: float | None
    sites: list[SiteRecord] = field(default_factory=list)


class Recording(TableReport):
    """The attention maps of the steps a :func:`recording` saw, and the graph of one of them.

    Attributes
    ----------
    records : list of StepRecord
        One per recorded ``backward()`` call, in order.
    graph : View or None
        The explorer of the ``graph_step``-th call, once it has run.
    backward_calls : int
        How many ``backward()`` calls the recording saw.
    errors : list of str
        What could not be inspected (the run itself went on).

    ``print(recording)`` answers, for the last recorded step, which head of each layer sends
    the largest gradient to its scores and at which query position the softmax passes the
    least gradient; :meth:`norms` and :meth:`gain` give the same numbers for every step.
    """

    def __init__(self, every: int = 1, graph_step: int | None = None, max_steps: int = 24,
                 check: bool = True, title: str | None = None,
                 on_graph: Callable[[View], None] | None = None):
        for label, value in (("every", every), ("max_steps", max_steps)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"recording: {label} must be a positive int, got {value!r}")
        if graph_step is not None and (isinstance(graph_step, bool)
                                       or not isinstance(graph_step, int) or graph_step < 1):
            raise ValueError(f"recording: graph_step must be None or a positive int (the "
                             f"number of the backward() call, 1 for the first), got "
                             f"{graph_step!r}")
        self.every = every
        self.graph_step = graph_step
        self.max_steps = max(2, max_steps)
        self.check = check
        self.title = title
        self.on_graph = on_graph
        self.records: list[StepRecord] = []
        self.graph: View | None = None
        self.backward_calls = 0
        self.errors: list[str] = []

    # ---- what the wrapped backward does -----------------------------------------------------
    def _wanted(self, call: int) -> bool:
        if call == self.graph_step:
            return True
        if self.graph_step is not None and call > self.graph_step:
            return False
        return (call - 1) % self.every == 0

    def _backward(self, tensors: Any, grad_tensors: Any = None, retain_graph: bool | None = None,
                  create_graph: bool = False, inputs: Any = None) -> None:
        self.backward_calls += 1
        call = self.backward_calls
        roots = [tensors] if isinstance(tensors, Tensor) else list(tensors) \
            if isinstance(tensors, (list, tuple)) else []
        root = roots[0] if roots else None
        if not self._wanted(call) or not isinstance(root, Tensor) or root.grad_fn is None \
                or root.grad_fn.freed:
            return observed_backward(None, tensors, grad_tensors, retain_graph, create_graph,
                                     inputs)
        capture = None
        if call == self.graph_step:
            from .view import GraphCapture

            try:
                capture = GraphCapture(root, check=self.check)
            except Exception as err:  # an inspection must never break the run it watches
                self._error(f"backward {call}: the graph could not be captured "
                            f"({type(err).__name__}: {err})")
        try:
            order = capture.order if capture is not None else topological_order(
                [r.grad_fn for r in roots if isinstance(r, Tensor) and r.grad_fn is not None])
            watcher = SiteWatcher(order, keep=capture is not None)
        except Exception as err:
            self._error(f"backward {call}: {type(err).__name__}: {err}")
            return observed_backward(None, tensors, grad_tensors, retain_graph, create_graph,
                                     inputs)

        def on_node(node: Context, grads_out: tuple, grads_in: tuple) -> None:
            watcher.on_node(node, grads_out, grads_in)
            if capture is not None:
                capture.on_node(node, grads_out, grads_in)

        loss = float(root.numpy().reshape(-1)[0]) if root.numel() == 1 else None
        observed_backward(on_node, tensors, grad_tensors, retain_graph, create_graph, inputs)
        for message in watcher.errors:
            self._error(f"backward {call}: {message}")
        self.records.append(StepRecord(call, loss, watcher.results()))
        self._thin()
        if capture is not None:
            try:
                self.graph = capture.view(step=call, recording=self, title=self.title,
                                          sites=watcher.results())
            except Exception as err:
                self._error(f"backward {call}: the page could not be built "
                            f"({type(err).__name__}: {err})")
            if self.graph is not None and self.on_graph is not None:
                try:
                    self.on_graph(self.graph)
                except Exception as err:
                    self._error(f"backward {call}: {type(err).__name__}: {err}")

    def _thin(self) -> None:
        """Keep at most ``max_steps`` records: every other one goes (the first, the newest and
        the graph's step stay), and the interval doubles."""
        if len(self.records) <= self.max_steps:
            return
        keep = [r for i, r in enumerate(self.records)
                if i % 2 == 0 or i == len(self.records) - 1 or r.step == self.graph_step]
        self.records = keep
        self.every *= 2

    def _error(self, message: str) -> None:
        self.errors.append(message)
        print(f"tinyattn inspect: {message}", file=sys.stderr)

    # ---- reading it --------------------------------------------------------------------------
    @property
    def steps(self) -> list[int]:
        """The numbers of the recorded ``backward()`` calls."""
        return [r.step for r in self.records]

    @property
    def layers(self) -> list[str]:
        """The attention sites of the last recorded step, in forward order."""
        return [s.name for s in self.records[-1].sites] if self.records else []

    def _uniform(self, op: str) -> list[StepRecord]:
        records = [r for r in self.records if r.sites]
        if not records:
            raise ValueError(f"Recording.{op}: no step with attention was recorded")
        shapes = {tuple((s.name, s.shape[1], s.shape[2]) for s in r.sites) for r in records}
        if len(shapes) != 1:
            raise ValueError(f"Recording.{op}: the steps have different attention layers or "
                             "shapes; read records[i].sites step by step")
        return records

    def norms(self, kind: str = "dS") -> np.ndarray:
        """``(steps, layers, heads)``: the norm of ``P``, ``dP`` or ``dS`` of every head at
        every recorded step (with attention).

        ``recording.norms("dS")[-1, 0].argmax()`` is the head of layer 0 whose scores receive
        the largest gradient at the last step.
        """
        if kind not in ("P", "dP", "dS"):
            raise ValueError(f"Recording.norms: kind must be 'P', 'dP' or 'dS', got {kind!r}")
        return np.array([[s.norms[kind] for s in r.sites] for r in self._uniform("norms")])

    def gain(self) -> np.ndarray:
        """``(steps, layers, heads, T)``: the softmax gain (largest eigenvalue of
        ``diag(p) − p pᵀ``) by query position; ``recording.gain()[-1, 0].mean(0).argmin()``
        is the query of layer 0 where the least gradient passes."""
        return np.array([[s.gain for s in r.sites] for r in self._uniform("gain")])

    def table_header(self) -> Row:
        return ("layer", "head", "|dP|", "|dS|", "|dS|/|dP|", "largest |dS|",
                "least gain: λ_max at query")

    def table_rows(self) -> list[Row]:
        if not self.records or not self.records[-1].sites:
            return []
        rows = []
        for site in self.records[-1].sites:
            top = int(np.argmax(site.norms["dS"]))
            for h in range(site.shape[1]):
                dP, dS = float(site.norms["dP"][h]), float(site.norms["dS"][h])
                q = int(np.argmin(site.gain[h])) if site.gain.shape[1] else 0
                least = f"{site.gain[h, q]:.3g} at {q}" if site.gain.shape[1] else "-"
                rows.append((site.name, str(h), f"{dP:.3e}", f"{dS:.3e}",
                             f"{dS / dP:.3f}" if dP > 0 else "nan", "◀" if h == top else "",
                             least))
        return rows

    def summary(self) -> str:
        if not self.records:
            return "nothing recorded yet"
        last = self.records[-1]
        lines = [f"step {last.step} (backward call {last.step} of {self.backward_calls}; "
                 f"{len(self.records)} steps recorded)"]
        for site in last.sites:
            head = int(np.argmax(site.norms["dS"]))
            mean_gain = site.gain.mean(axis=0)
            q = int(np.argmin(mean_gain)) if mean_gain.size else 0
            lines.append(f"{site.name}: head {head} has the largest |dS| "
                         f"({site.norms['dS'][head]:.3e}); the softmax passes least gradient "
                         f"at query {q} (mean λ_max {mean_gain[q] if mean_gain.size else 0:.3g})")
        return "\n".join(lines)

    def view(self) -> View:
        """The explorer of this recording: its graph (when captured) and its training view."""
        from .view import View

        if self.graph is not None:
            return self.graph.with_recording(self)
        return View.of_recording(self)

    def page_data(self) -> dict[str, Any]:
        """The training view's numbers (JSON-ready): every recorded step and site."""
        return {"steps": [{"step": r.step, "loss": finite_or_text(r.loss),
                           "sites": [s.page_data() for s in r.sites]} for r in self.records],
                "graph_step": self.graph_step if self.graph is not None else None}

    def __repr__(self) -> str:
        return (f"<Recording of {len(self.records)} steps ({self.backward_calls} backward "
                f"calls), graph {'captured' if self.graph is not None else 'not captured'}>")


_ACTIVE: list[Recording] = []


def _recorded_backward(*args: Any, **kwargs: Any) -> None:
    return _ACTIVE[-1]._backward(*args, **kwargs)


@contextlib.contextmanager
def recording(graph_step: int | None = None, every: int = 1, max_steps: int = 24,
              check: bool = True, title: str | None = None,
              on_graph: Callable[[View], None] | None = None) -> Iterator[Recording]:
    """Record the attention of the training steps run inside the block, and the whole graph
    of one of them.

    Every ``backward()`` call (``loss.backward()``, ``ta.autograd.backward``) inside the block
    is counted; the 1st, ``1 + every``-th, ``1 + 2·every``-th ... up to ``graph_step`` record
    the attention maps of their graph (:class:`StepRecord`), and the ``graph_step``-th also
    captures its whole graph for the explorer (``recording.graph``, a
    :class:`~tinyattn.inspect.view.View`; ``on_graph(view)`` is called then). The backward
    passes are the ones the code runs, observed: gradients, parameters and losses are the same
    as without the block.

    Parameters
    ----------
    graph_step : int, optional
        Which ``backward()`` call's graph to capture (1 for the first); None: none.
    every : int
        Record the attention maps of every ``every``-th call.
    max_steps : int
        Keep at most this many steps (older ones are thinned out evenly).
    check : bool
        Run :func:`~tinyattn.inspect.check_graph` on the captured graph.
    title : str, optional
        The page's title.
    on_graph : callable, optional
        Called with the :class:`~tinyattn.inspect.view.View` of the captured graph.

    Examples
    --------
    >>> import tinyattn as ta
    >>> ta.manual_seed(0)
    >>> model = ta.TransformerLM(ta.models.TransformerLMConfig(11, 6, 8, 2, 1))
    >>> idx = ta.tensor([[1, 2, 3, 4]])
    >>> with recording(graph_step=2) as rec:
    ...     for step in range(2):
    ...         _, loss = model(idx, targets=idx)
    ...         loss.backward()
    >>> rec.steps, rec.layers, rec.norms("dS").shape, rec.graph is not None
    ([1, 2], ['blocks.0.attn'], (2, 1, 2), True)
    >>> float(rec.gain()[-1, 0, :, 0].max())     # query 0 sees one key: p = 1, no gradient
    0.0
    """
    rec = Recording(every, graph_step, max_steps, check, title, on_graph)
    with module_scopes():
        original = autograd.backward
        _ACTIVE.append(rec)
        autograd.backward = _recorded_backward
        try:
            yield rec
        finally:
            _ACTIVE.remove(rec)
            autograd.backward = _recorded_backward if _ACTIVE else original

"""The self-check behind ``tinyattn gradcheck``: every op and layer against finite differences.

Each case is a small float64 function of its inputs. :func:`ta.gradcheck <tinyattn.gradcheck>`
gives the verdict; the table also shows the largest disagreement between the analytic
directional derivative ``<∇L, u>`` and the central difference ``(L(x + εu) − L(x − εu)) / 2ε``
along a few random directions ``u`` (all checked inputs moved at once), where
``L = Σ <v, f(x)>`` for a random cotangent ``v``.

A layer's parameters are checked too: the case passes them in as extra inputs, and the layer
runs with those tensors in place of its own parameters.

``tinyattn gradcheck --order 2`` checks second derivatives the same way: each case becomes its
vector-Jacobian product ``(x, v) ↦ vᵀ ∂f/∂x`` (recorded with ``create_graph=True``), whose
own gradient is checked (:func:`second_order`). Where that product does not depend on the
inputs at all (the roundings and ``sign``, whose gradient is zero), the row says
"(vᵀJ constant)" and the check is that its finite differences vanish.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TextIO

import numpy as np

from . import functional as F
from . import linalg, nn, ops
from .autograd import enable_grad, grad, no_grad
from .creation import tensor
from .gradcheck import central_difference, gradcheck
from .models import TransformerLM, TransformerLMConfig
from .random import manual_seed
from .tensor import Tensor


@dataclass
class Case:
    """One gradient check: ``fn(*inputs)``; tensors requiring grad are checked."""

    name: str
    fn: Callable[..., Any]
    inputs: list[Any]
    shown: int | None = None  # how many inputs the table lists (a layer's parameters are not)

    @property
    def shapes(self) -> str:
        listed = self.inputs[: self.shown]
        return " ".join(str(tuple(t.shape)) for t in listed if isinstance(t, Tensor))


def _leaf(rng: np.random.Generator, *shape: int, positive: bool = False) -> Tensor:
    data = rng.uniform(0.5, 2.0, shape) if positive else rng.standard_normal(shape)
    return tensor(data, requires_grad=True)


@contextmanager
def _parameters_replaced(module: nn.Module, values: Sequence[Tensor]) -> Iterator[None]:
    """Run ``module`` with ``values`` in place of its parameters (in named_parameters order)."""
    modules = dict(module.named_modules())
    slots = []
    for (name, _), value in zip(module.named_parameters(), values):
        owner_name, _, attr = name.rpartition(".")
        owner = modules[owner_name]
        slots.append((owner, attr, owner._parameters[attr]))
        owner._parameters[attr] = value
    try:
        yield
    finally:
        for owner, attr, original in slots:
            owner._parameters[attr] = original


def _layer_case(name: str, module: nn.Module, inputs: list[Any]) -> Case:
    """A case checking ``module(*inputs)`` w.r.t. its float inputs and all its parameters."""
    module.double()
    params = [p.detach().requires_grad_() for p in module.parameters()]
    count = len(inputs)

    def fn(*args: Any) -> Any:
        with _parameters_replaced(module, args[count:]):
            return module(*args[:count])

    return Case(name, fn, inputs + params, shown=count)


def _seeded(fn: Callable[..., Tensor]) -> Callable[..., Tensor]:
    """Re-seed before every call so that dropout draws the same mask each time."""

    def wrapped(*args: Any) -> Tensor:
        manual_seed(0)
        return fn(*args)

    return wrapped


def _weighted_pieces(pieces: Sequence[Tensor]) -> Tensor:
    """The pieces of a split, each times its own weight, side by side again: a value that
    depends on each piece differently (a gradient sent to the wrong piece shows)."""
    return ops.cat([piece * (i + 1.0) for i, piece in enumerate(pieces)], dim=-1).tanh()


def cases(seed: int = 0) -> list[Case]:
    """Every op and layer with small float64 inputs.

    Examples
    --------
    >>> found = cases()
    >>> len(found) > 40, all(isinstance(case, Case) for case in found)
    (True, True)
    """
    rng = np.random.default_rng(seed)
    x = lambda *shape: _leaf(rng, *shape)  # noqa: E731
    pos = lambda *shape: _leaf(rng, *shape, positive=True)  # noqa: E731
    mask = tensor(rng.random((3, 4)) < 0.5)
    idx = tensor(rng.integers(0, 5, (2, 3)))
    target = tensor(np.array([0, 2, -100, 1]))
    sdpa = F.scaled_dot_product_attention
    q, k, v = x(2, 3, 4), x(2, 5, 4), x(2, 5, 3)
    allowed = tensor(np.tril(np.ones((3, 5), dtype=bool), 1))
    found = [
        Case("add (broadcast)", lambda a, b: a + b, [x(3, 4), x(4)]),
        Case("sub", lambda a, b: a - b, [x(3, 1), x(1, 4)]),
        Case("mul", lambda a, b: a * b, [x(3, 4), x(3, 4)]),
        Case("div", lambda a, b: a / b, [x(3, 4), pos(3, 4)]),
        Case("pow", lambda a, b: a ** b, [pos(3, 4), x(3, 4)]),
        Case("neg", lambda a: -a, [x(3, 4)]),
        Case("exp", ops.exp, [x(3, 4)]),
        Case("log", ops.log, [pos(3, 4)]),
        Case("sqrt", ops.sqrt, [pos(3, 4)]),
        Case("tanh", ops.tanh, [x(3, 4)]),
        Case("sigmoid", ops.sigmoid, [x(3, 4)]),
        Case("relu", ops.relu, [x(3, 4)]),
        Case("sum(dim=1)", lambda a: a.sum(dim=1), [x(3, 4)]),
        Case("mean(dim=0)", lambda a: a.mean(dim=0, keepdim=True), [x(3, 4)]),
        Case("max(dim=1)", lambda a: a.max(dim=1)[0], [x(3, 4)]),
        Case("var(dim=-1)", lambda a: a.var(dim=-1), [x(3, 4)]),
        Case("reshape", lambda a: a.reshape(4, 3), [x(3, 4)]),
        Case("permute", lambda a: a.permute(2, 0, 1), [x(2, 3, 4)]),
        Case("expand", lambda a: a.expand(3, 4), [x(1, 4)]),
        Case("getitem", lambda a: a[1:, ::2], [x(3, 4)]),
        Case("cat", lambda a, b: ops.cat([a, b], dim=1), [x(3, 2), x(3, 4)]),
        Case("split", lambda a: _weighted_pieces(a.split([1, 3, 2], dim=1)), [x(3, 6)]),
        Case("stack", lambda a, b: ops.stack([a, b], dim=0), [x(3, 4), x(3, 4)]),
        Case("where", lambda a, b: ops.where(mask, a, b), [x(3, 4), x(3, 4)]),
        Case("masked_fill", lambda a: a.masked_fill(mask, 0.0), [x(3, 4)]),
        Case("triu", ops.triu, [x(4, 4)]),
        Case("matmul", ops.matmul, [x(2, 3, 4), x(4, 5)]),
        Case("softmax", lambda a: a.softmax(dim=-1), [x(3, 4)]),
        Case("log_softmax", lambda a: a.log_softmax(dim=-1), [x(3, 4)]),
        Case("F.linear", F.linear, [x(2, 3, 4), x(5, 4), x(5)]),
        Case("F.embedding", lambda w: F.embedding(idx, w), [x(5, 4)]),
        Case("F.dropout", _seeded(lambda a: F.dropout(a, 0.3)), [x(3, 4)]),
        Case("F.layer_norm", lambda a, w, b: F.layer_norm(a, (4,), w, b), [x(3, 4), x(4), x(4)]),
        Case("F.gelu", F.gelu, [x(3, 4)]),
        Case("F.gelu(tanh)", lambda a: F.gelu(a, approximate="tanh"), [x(3, 4)]),
        Case("F.cross_entropy", lambda a: F.cross_entropy(a, target, label_smoothing=0.1),
             [x(4, 3)]),
    ]
    found += _dropin_cases(np.random.default_rng(seed + 1))
    for impl in ("composed", "fused"):
        found += [
            Case(f"sdpa {impl}", lambda a, b, c, i=impl: sdpa(a, b, c, impl=i), [q, k, v]),
            Case(f"sdpa {impl} causal",
                 lambda a, b, c, i=impl: sdpa(a, b, c, is_causal=True, impl=i), [q, k, v]),
            Case(f"sdpa {impl} bool mask",
                 lambda a, b, c, i=impl: sdpa(a, b, c, attn_mask=allowed, impl=i), [q, k, v]),
            Case(f"sdpa {impl} dropout",
                 _seeded(lambda a, b, c, i=impl: sdpa(a, b, c, dropout_p=0.3, impl=i)),
                 [q, k, v]),
        ]
    manual_seed(seed)
    tiny = TransformerLMConfig(vocab_size=5, context_length=4, embed_dim=8, num_heads=2,
                               num_layers=1)
    found += [
        _layer_case("Linear", nn.Linear(4, 3), [x(2, 4)]),
        _layer_case("Embedding", nn.Embedding(5, 3), [idx]),
        _layer_case("LayerNorm", nn.LayerNorm(4), [x(2, 3, 4)]),
        _layer_case("SelfAttention", nn.SelfAttention(4, 3, causal=True), [x(2, 3, 4)]),
        _layer_case("MultiHeadAttentionWrapper", nn.MultiHeadAttentionWrapper(4, 2, 2),
                    [x(2, 3, 4)]),
        _layer_case("MultiHeadAttention", nn.MultiHeadAttention(4, 2, causal=True),
                    [x(2, 3, 4)]),
        _layer_case("TransformerBlock", nn.TransformerBlock(4, 2, mlp_ratio=2), [x(2, 3, 4)]),
        _layer_case("TransformerLM", TransformerLM(tiny), [tensor(rng.integers(0, 5, (2, 4)))]),
    ]
    return found


def _dropin_cases(rng: np.random.Generator) -> list[Case]:
    """The elementwise functions, reductions, index ops and losses that PyTorch scripts use
    beyond the attention core (their own generator, so that the other cases keep their inputs).

    floor/ceil/round/trunc and sign have zero gradients almost everywhere (PyTorch's too): the
    check is that they send zeros, and finite differences away from the jumps agree. Every case
    is twice differentiable where it is evaluated (l1's and smooth_l1's kinks and the roundings'
    jumps are not hit by random inputs), so ``--order 2`` checks them all.
    """
    x = lambda *shape: _leaf(rng, *shape)  # noqa: E731
    pos = lambda *shape: _leaf(rng, *shape, positive=True)  # noqa: E731

    def unit(*shape: int) -> Tensor:  # probabilities, away from 0 and 1
        return tensor(rng.uniform(0.1, 0.9, shape), requires_grad=True)

    def with_zeros(*shape: int, count: int) -> Tensor:  # prod's special gradients at zeros
        data = rng.standard_normal(shape)
        data.flat[rng.choice(data.size, count, replace=False)] = 0.0
        return tensor(data, requires_grad=True)

    def fixed(data: Any) -> Tensor:
        return tensor(np.asarray(data))

    index = fixed(np.array([[0, 2, 1, 0], [1, 1, 0, 2]]))
    columns = fixed(np.array([3, 0]))
    chosen = tensor(rng.random((3, 4)) < 0.5)
    classes = fixed(np.array([0, 2, -100, 1]))
    target = tensor(rng.standard_normal((3, 4)))
    labels = tensor((rng.random((3, 4)) < 0.5).astype(np.float64))
    probs = tensor(rng.dirichlet(np.ones(4), 3))
    weight = tensor(rng.uniform(0.5, 2.0, 3))
    return [
        Case("square", ops.square, [x(3, 4)]),
        Case("reciprocal", ops.reciprocal, [pos(3, 4)]),
        Case("sign (zero gradient)", ops.sign, [x(3, 4)]),
        Case("floor (zero gradient)", ops.floor, [x(3, 4)]),
        Case("ceil (zero gradient)", ops.ceil, [x(3, 4)]),
        Case("round (zero gradient)", ops.round, [x(3, 4)]),
        Case("trunc (zero gradient)", ops.trunc, [x(3, 4)]),
        Case("log1p", ops.log1p, [pos(3, 4)]),
        Case("expm1", ops.expm1, [x(3, 4)]),
        Case("prod(dim=1)", lambda a: a.prod(dim=1), [x(3, 4)]),
        Case("prod (one zero)", lambda a: a.prod(), [with_zeros(2, 3, count=1)]),
        Case("prod(dim=1) (zeros)", lambda a: a.prod(dim=1), [with_zeros(3, 4, count=4)]),
        Case("norm", ops.norm, [x(3, 4)]),
        Case("norm(p=1, dim=1)", lambda a: ops.norm(a, p=1, dim=1), [x(3, 4)]),
        Case("linalg.norm(dim=-1)", lambda a: linalg.norm(a, dim=-1), [x(3, 4)]),
        Case("linalg.norm(fro)", linalg.norm, [x(3, 4)]),
        Case("F.normalize", lambda a: F.normalize(a, dim=-1), [x(3, 4)]),
        Case("sort (values)", lambda a: ops.sort(a, dim=1, descending=True)[0], [x(3, 4)]),
        Case("gather by argsort", lambda a: a.gather(1, ops.argsort(a, dim=1)), [x(3, 4)]),
        Case("outer", ops.outer, [x(3), x(4)]),
        Case("clamp", lambda a: a.clamp(-0.5, 0.5), [x(3, 4)]),
        Case("clamp (min > max)", lambda a: a.clamp(0.5, -0.5), [x(3, 4)]),
        Case("gather", lambda a: a.gather(0, index), [x(3, 4)]),
        Case("scatter", lambda a, b: a.scatter(0, index, b), [x(3, 4), x(2, 4)]),
        Case("scatter_add", lambda a, b: a.scatter_add(0, index, b), [x(3, 4), x(2, 4)]),
        Case("index_fill", lambda a: a.index_fill(1, columns, -1.0), [x(3, 4)]),
        Case("index_fill (tensor value)", lambda a, v: a.index_fill(1, columns, v),
             [x(3, 4), x()]),
        Case("getitem by nonzero", lambda a: a[ops.nonzero(chosen, as_tuple=True)], [x(3, 4)]),
        Case("F.kl_div", lambda a, t: F.kl_div(a, t, reduction="batchmean"),
             [x(3, 4), unit(3, 4)]),
        Case("F.kl_div(log_target)",
             lambda a, t: F.kl_div(a, t, reduction="batchmean", log_target=True),
             [x(3, 4), x(3, 4)]),
        Case("F.nll_loss", lambda a: F.nll_loss(a, classes), [x(4, 3)]),
        Case("F.nll_loss (weight)", lambda a: F.nll_loss(a, classes, weight=weight), [x(4, 3)]),
        Case("F.mse_loss", F.mse_loss, [x(3, 4), x(3, 4)]),
        Case("F.l1_loss", lambda a: F.l1_loss(a, target), [x(3, 4)]),
        Case("F.smooth_l1_loss", lambda a: F.smooth_l1_loss(a, target, beta=0.5),
             [x(3, 4)]),
        Case("F.huber_loss", lambda a: F.huber_loss(a, target, delta=0.7), [x(3, 4)]),
        Case("F.binary_cross_entropy", lambda a: F.binary_cross_entropy(a, labels),
             [unit(3, 4)]),
        Case("F.binary_cross_entropy (soft)",
             lambda a: F.binary_cross_entropy(a, probs, reduction="sum"), [unit(3, 4)]),
        Case("F.bce_with_logits", lambda a: F.binary_cross_entropy_with_logits(a, labels),
             [x(3, 4)]),
        Case("F.bce_with_logits (pos_weight)",
             lambda a, w: F.binary_cross_entropy_with_logits(a, probs, pos_weight=w),
             [x(3, 4), pos(4)]),
    ]


def directional_error(
    case: Case, directions: int = 3, eps: float = 1e-6, seed: int = 0
) -> float:
    """Largest ``|<∇L, u> − (L(x + εu) − L(x − εu)) / 2ε|`` over random directions ``u``.

    The case's inputs should be float64 (finite differences with ``ε = 1e-6`` need it).

    Examples
    --------
    >>> import tinyattn as ta
    >>> x = ta.tensor([1.0, 2.0], dtype=ta.float64, requires_grad=True)
    >>> case = Case("square", lambda t: t * t, [x])
    >>> directional_error(case) < 1e-8
    True
    """
    rng = np.random.default_rng(seed)
    checked = [t for t in case.inputs if isinstance(t, Tensor) and t.requires_grad]
    for t in checked:
        t.grad = None
    output = case.fn(*case.inputs)
    cotangent = rng.standard_normal(output.shape)
    if output.requires_grad:
        output.backward(cotangent)
    # else: a constant function of the inputs (the vᵀJ of an op with a zero gradient), whose
    # gradient is zero; the finite differences below check that it is constant.
    grads = [np.zeros(t.shape) if t.grad is None else t.grad.numpy() for t in checked]
    originals = [t.numpy() for t in checked]
    ends = np.cumsum([t.numpy().size for t in checked])[:-1]

    def objective(point: np.ndarray) -> float:
        """``L`` with the checked inputs set from ``point``, all of them flattened end to end."""
        for t, piece in zip(checked, np.split(point, ends)):
            t.data = piece.reshape(t.shape)
        with no_grad():
            return float(np.sum(case.fn(*case.inputs).numpy() * cotangent))

    start = np.concatenate([base.ravel() for base in originals])
    worst = 0.0
    try:
        for _ in range(directions):
            step = [rng.standard_normal(t.shape) for t in checked]
            direction = np.concatenate([u.ravel() for u in step])
            numeric = central_difference(objective, start, direction, eps)
            analytic = sum(float(np.sum(g * u)) for g, u in zip(grads, step))
            worst = max(worst, abs(analytic - numeric))
    finally:
        for t, base in zip(checked, originals):
            t.data = base
            t.grad = None
    return worst


def second_order(case: Case, seed: int = 0) -> Case:
    """The case's vector-Jacobian product as a case of its own: ``(x, v) ↦ vᵀ ∂f/∂x`` with a
    random cotangent ``v`` (an input too), the gradients flattened into one output.

    Examples
    --------
    >>> import tinyattn as ta
    >>> x = ta.tensor([1.0, 2.0], dtype=ta.float64, requires_grad=True)
    >>> directional_error(second_order(Case("cube", lambda t: t ** 3, [x]))) < 1e-7
    True
    """
    rng = np.random.default_rng(seed + 1)
    checked = [i for i, t in enumerate(case.inputs) if isinstance(t, Tensor) and t.requires_grad]
    shape = case.fn(*case.inputs).shape
    cotangent = tensor(rng.standard_normal(shape), requires_grad=True)
    count = len(case.inputs)

    def vector_jacobian_product(*values: Any) -> Tensor:
        xs, v = list(values[:count]), values[count]
        with enable_grad():
            found = grad(case.fn(*xs), [xs[i] for i in checked], v, create_graph=True,
                         allow_unused=True)
            return ops.cat([g.reshape(-1) for g in found if g is not None])

    name = case.name
    if not vector_jacobian_product(*case.inputs, cotangent).requires_grad:
        name += f" {CONSTANT_VJP}"
    return Case(name, vector_jacobian_product, [*case.inputs, cotangent], case.shown)


CONSTANT_VJP = "(vᵀJ constant)"
"""The mark of a second-order case whose ``vᵀ ∂f/∂x`` does not depend on ``x`` or ``v`` (the
roundings, sign, a clamp with ``min > max``: their gradient is zero). Nothing in it requires
grad, so there is no gradient to compare; the check is that finite differences of it vanish."""

CONSTANT_TOLERANCE = 1e-8
"""Largest finite difference along a direction allowed for a :data:`CONSTANT_VJP` case."""


def run(stream: TextIO | None = None, seed: int = 0, order: int = 1) -> int:
    """Check every case, print a table (op, input shapes, max error, pass); return #failures.

    Run it as ``tinyattn gradcheck`` (``--order 2``: second derivatives; exit status 1 on any
    failure).
    """
    out = sys.stdout if stream is None else stream
    found = cases(seed)
    if order == 2:
        found = [second_order(case, seed) for case in found]
    rows = []
    for case in found:
        error = directional_error(case)
        if case.name.endswith(CONSTANT_VJP):
            passed = error <= CONSTANT_TOLERANCE
        else:
            passed = gradcheck(case.fn, case.inputs, raise_exception=False, max_elements=64)
        rows.append((case.name, case.shapes, f"{error:.2e}", "ok" if passed else "FAIL"))
    header = ("op / layer", "input shapes", "max error", "pass")
    widths = [max(len(r[c]) for r in [header, *rows]) for c in range(4)]
    for row in [header, tuple("-" * w for w in widths), *rows]:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip(), file=out)
    failures = sum(row[3] != "ok" for row in rows)
    kind = "gradient" if order == 1 else "second-derivative"
    print(f"\n{len(rows) - failures} of {len(rows)} {kind} checks passed", file=out)
    return failures

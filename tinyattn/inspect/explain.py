"""Explain a gradient: the path from an output to a tensor, derived from the recorded graph and
written symbolically, op by op.

:func:`explain` walks the nodes through which the output's gradient reaches the tensor (in the
engine's backward order) and writes, for each, the chain-rule step as a formula in the names
of the tensors involved: ``dP = dO · Vᵀ``, ``dS = P ⊙ (dP − rowsum(dP ⊙ P))``, ``dQ = dS · s ·
K`` ... Names come from three places, in this order: the ``names`` you pass (a mapping, or a
module whose parameters are named ``q_proj.weight`` ...), the roles of the tensors around each
attention softmax (``S``, ``P``, ``Q``, ``K``, ``V``, ``O``, the scale ``s``; numbered ``S₀``,
``S₁`` ... when there are several attention sites), and otherwise ``h7`` for the output of node
``#7``.

Linear steps (products, sums, reshapes, scalings) are composed into one formula; steps through
a nonlinearity with a rule of its own (softmax, layer norm, cross-entropy, fused attention) or
where gradients from several uses of a tensor add up start a new named gradient. The result's
:attr:`Explanation.formula` is the gradient of the tensor written back to the nearest of these
— for ``W_q`` of one attention head, ``dW_q = Xᵀ · (dS · s · K)`` — and its :attr:`steps` the
whole derivation, output side first.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..autograd import Context, ReleasedInput
from ..autograd.engine import nodes_towards
from ..nn.module import Module
from ..tables import shape_text
from ..tensor import Tensor
from .graph import consumers, graph_nodes, graph_target

SUBSCRIPTS = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")


@dataclass(frozen=True)
class ExplainStep:
    """One chain-rule step: node ``index`` sends ``symbol = rule`` to its input ``slot``
    (``symbol += rule`` when the input is used by several ops: their gradients add up)."""

    index: int
    name: str
    out_shape: tuple[int, ...]
    slot: int
    symbol: str
    rule: str
    accumulates: bool = False

    def __str__(self) -> str:
        sign = "+=" if self.accumulates else "="
        return f"#{self.index} {self.name} {shape_text(self.out_shape)}: {self.symbol} {sign} " \
               f"{self.rule}"


@dataclass
class Explanation:
    """The gradient path from an output to one tensor.

    Attributes
    ----------
    formula : str
        ``d<name> = ...`` written back to the nearest named gradient.
    chain : list of int
        The nodes (``#k``) the formula composes, output side first.
    steps : list of ExplainStep
        Every chain-rule step from the output to the tensor, output side first.
    paths : int
        How many distinct paths lead from the output to the tensor (each adds a term).
    """

    target: str
    formula: str
    chain: list[int]
    steps: list[ExplainStep]
    paths: int

    def __str__(self) -> str:
        lines = [self.formula, f"through {', '.join(f'#{i}' for i in self.chain) or '-'} "
                               f"({self.paths} path{'s' if self.paths != 1 else ''} from the "
                               "output)", "", "derivation, output side first:"]
        lines += [f"  {step}" for step in self.steps]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<Explanation {self.formula}>"

    def _repr_html_(self) -> str:
        import html

        return f"<pre>{html.escape(str(self))}</pre>"


def explain(tensor: Tensor, output: Tensor,
            names: Mapping[str, Tensor] | Module | None = None) -> Explanation:
    """The gradient of ``output`` with respect to ``tensor``, derived symbolically from the
    recorded graph.

    Parameters
    ----------
    tensor : Tensor
        A parameter, leaf or intermediate tensor in the graph of ``output``.
    output : Tensor
        The output (usually the loss) of a live graph.
    names : mapping or Module, optional
        Names for tensors (``{"X": x, "W_q": w}``), or a module whose named parameters name
        themselves.

    Examples
    --------
    >>> import tinyattn as ta
    >>> x, w = ta.randn(4, 3), ta.randn(3, 2, requires_grad=True)
    >>> print(explain(w, (x @ w).tanh().sum(), names={"X": x, "W": w}).formula)
    dW = Xᵀ · (broadcast(dL) ⊙ (1 − h1²))
    """
    order = graph_nodes(output, "explain")
    target = graph_target(tensor, order, "explain")
    labels = _names(order, output, names)
    index = {id(node): i for i, node in enumerate(order)}
    _, through = nodes_towards(order, {id(target)})
    if target is order[0]:
        symbol = "d" + labels[id(target)]
        return Explanation(labels[id(target)], f"{symbol} = {symbol}", [], [], 1)

    def label(key: int) -> str:
        return labels.get(key) or f"h{index[key]}"

    uses: dict[int, int] = {}  # how many ops send a gradient to each tensor on the way
    for node in order:
        if id(node) in through:
            for edge in node.edges:
                if edge is not None and (id(edge) in through or edge is target):
                    uses[id(edge)] = uses.get(id(edge), 0) + 1
    root = "d" + label(id(order[0]))
    symbols: dict[int, str] = {id(order[0]): root}
    # per tensor: its gradient composed back to the nearest named one, and the nodes composed
    composed: dict[int, list[tuple[str, list[int]]]] = {id(order[0]): [(root, [])]}
    paths: dict[int, int] = {id(order[0]): 1}
    steps: list[ExplainStep] = []
    for node in order:
        if id(node) not in through:
            continue
        inline, chain = composed[id(node)][0] if uses.get(id(node), 1) == 1 else \
            (symbols[id(node)], [])
        operands = operand_names(node, label)
        for slot, edge in enumerate(node.edges):
            if edge is None or (id(edge) not in through and edge is not target):
                continue
            key = id(edge)
            symbols.setdefault(key, "d" + label(key))
            rule = chain_rule(node, slot, symbols[id(node)], operands, label(id(node)))
            opaque = starts_named_gradient(node)
            start = rule if opaque and edge is target else symbols[key] if opaque else \
                chain_rule(node, slot, inline, operands, label(id(node)))
            composed.setdefault(key, []).append(
                (start, [index[id(node)]] if opaque else chain + [index[id(node)]]))
            paths[key] = paths.get(key, 0) + paths[id(node)]
            steps.append(ExplainStep(index[id(node)], node.name, tuple(node.out_shape), slot,
                                     symbols[key], rule, uses[key] > 1))
    parts = composed[id(target)]
    formula = " + ".join(p[0] for p in parts)
    return Explanation(label(id(target)), f"{symbols[id(target)]} = {formula}",
                       parts[0][1] if len(parts) == 1 else [], steps, paths[id(target)])


def chain_rule(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
    """The gradient ``node`` sends to its input ``slot``, written by the op's own ``formula``
    from its output's gradient ``g``, the names ``x`` of its inputs and ``out`` of its output
    (``J_Opᵀ[i](g)``, its Jacobian's transpose, for an op without a formula)."""
    formula = node.fn.formula
    if formula is None:
        return f"J_{node.name}ᵀ[{slot}]({g})"
    return formula(node, slot, g, x, out)


def operand_names(node: Context, label: Callable[[int], str]) -> list[str]:
    """The names of ``node``'s arguments as its ``formula`` receives them: ``label(key)`` of
    each tensor (``key`` the id of its producer node, or of the tensor itself for a leaf or a
    constant), ``repr`` of every other argument."""
    return [label(_key(node, i)) if _is_tensor(value) else repr(value)
            for i, value in enumerate(node.inputs)]


def tensor_names(order: list[Context], output: Tensor,
                 names: Mapping[str, Tensor] | Module | None = None) -> dict[int, str]:
    """The names :func:`explain` gives in the graph ``order`` of ``output``, by id (of a node
    for its output, of a tensor for a leaf or a constant): ``names`` first, then the attention
    roles (``S``, ``P``, ``Q``, ...), ``θ₀ …`` for leaves that require grad, ``C0 …`` for
    constants; a node without one is ``h<k>``."""
    return _names(order, output, names)


def starts_named_gradient(node: Context) -> bool:
    """Whether ``node``'s step starts a named gradient (an op that names its gradient, or one
    without a formula)."""
    return node.fn.named_gradient or node.fn.formula is None


def swaps_last_two(node: Context) -> bool:
    """Whether a ``Permute`` node swaps exactly the last two dims (a transpose)."""
    dims = node.kwargs.get("dims")
    if dims is None:
        dims = node.inputs[1] if len(node.inputs) > 1 else ()
    dims = tuple(dims)
    n = len(dims)
    return n >= 2 and dims == tuple(range(n - 2)) + (n - 1, n - 2)


def _is_tensor(value: Any) -> bool:
    return isinstance(value, (Tensor, ReleasedInput))


def _key(node: Context, slot: int) -> int:
    """The id naming input ``slot`` of ``node``: its producer node, or the tensor itself."""
    edge = node.edges[slot]
    return id(edge) if edge is not None else id(node.inputs[slot])


def _names(order: list[Context], output: Tensor, names: Any) -> dict[int, str]:
    """Names by id: attention roles, then unnamed leaves, overridden by ``names``."""
    labels: dict[int, str] = {}
    _attention_roles(order, labels)
    leaves = constants = 0
    for node in order:
        for slot, tensor in enumerate(node.inputs):
            if not _is_tensor(tensor):
                continue
            key = _key(node, slot)
            if key in labels or node.edges[slot] is not None and node.edges[slot] is not tensor:
                continue
            if tensor.requires_grad:
                labels[key] = "θ" + str(leaves).translate(SUBSCRIPTS)
                leaves += 1
            elif tensor.ndim == 0:
                labels[key] = f"{float(tensor.numpy()):.4g}"
            else:
                labels[key] = f"C{constants}"
                constants += 1
    labels.setdefault(id(order[0]), "L" if output.ndim == 0 else "Y")
    if isinstance(names, Module):
        names = dict(names.named_parameters())
    for name, tensor in (names or {}).items():
        if not isinstance(tensor, Tensor):
            raise TypeError(f"explain: names[{name!r}] must be a Tensor, got "
                            f"{type(tensor).__name__}")
        labels[id(tensor.grad_fn) if tensor.grad_fn is not None else id(tensor)] = name
    return labels


def _attention_roles(order: list[Context], labels: dict[int, str]) -> None:
    """Name the tensors around every attention site: S, P, Q, K, V, O and the scale s."""
    used = consumers(order)
    sites = [node for node in reversed(order)  # forward order
             if node.name == "FusedAttention"
             or node.name == "Softmax" and len(node.out_shape) >= 2]
    tag = (lambda i: str(i).translate(SUBSCRIPTS)) if len(sites) > 1 else (lambda i: "")
    for i, node in enumerate(sites):
        sub = tag(i)
        if node.name == "FusedAttention":
            for slot, role in enumerate("QKV"):
                labels.setdefault(_key(node, slot), role + sub)
            labels.setdefault(id(node), "O" + sub)
            continue
        labels.setdefault(id(node), "P" + sub)
        labels.setdefault(_key(node, 0), "S" + sub)
        scores = node.edges[0]
        while isinstance(scores, Context) and scores.name in ("MaskedFill", "Add", "Mul",
                                                               "Div"):
            other = scores.inputs[1] if len(scores.inputs) > 1 else None
            if scores.name == "Mul" and other is not None and other.ndim == 0:
                labels.setdefault(_key(scores, 1), "s" + sub)
            scores = scores.edges[0]
        if isinstance(scores, Context) and scores.name == "MatMul":
            labels.setdefault(_key(scores, 0), "Q" + sub)
            keys = scores.edges[1]
            if isinstance(keys, Context) and keys.name == "Permute" and swaps_last_two(keys):
                labels.setdefault(_key(keys, 0), "K" + sub)
            labels.setdefault(_key(scores, 1), "K" + sub + "ᵀ")
        weights = node
        for _ in range(2):  # the weights, or the weights after dropout
            for user, slot in used.get(id(weights), []):
                if user.name == "MatMul" and slot == 0:
                    labels.setdefault(_key(user, 1), "V" + sub)
                    labels.setdefault(id(user), "O" + sub)
                elif user.name in ("Mul", "Dropout"):
                    weights = user

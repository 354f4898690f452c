"""How each op's chain-rule step is written as a formula, for :func:`tinyattn.inspect.explain`.

A rule takes the name (or formula) ``g`` of the gradient at an op's output and the names of its
inputs and output, and writes the gradient the op sends to one input: ``MatMul`` sends
``g · Bᵀ`` to ``A`` and ``Aᵀ · g`` to ``B``; ``Softmax`` sends ``P ⊙ (g − rowsum(g ⊙ P))``. An
op without a rule here is written ``J_Opᵀ[i](g)`` (its Jacobian's transpose). Formulas are
plain strings; the helpers below add the parentheses that precedence needs and apply
``(A · B)ᵀ = Bᵀ · Aᵀ``.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ..autograd import Context
from ..tables import shape_text

OPAQUE = {"Softmax", "LogSoftmax", "LayerNorm", "CrossEntropy", "FusedAttention", "Var"}
"""Ops whose rule starts a new named gradient instead of being composed into the formula."""


def starts_named_gradient(node: Context) -> bool:
    """Whether ``node``'s step starts a named gradient (a rule of its own, or none known)."""
    return node.name in OPAQUE or node.name not in RULES


def swaps_last_two(node: Context) -> bool:
    """Whether a ``Permute`` node swaps exactly the last two dims (a transpose)."""
    dims = tuple(node.kwargs.get("dims", ()))
    n = len(dims)
    return n >= 2 and dims == tuple(range(n - 2)) + (n - 1, n - 2)


_ATOM = re.compile(r"^[\w.ᵀ′₀-₉θ]+$")
_SCALAR = re.compile(r"^(s[₀-₉]*|-?[\d.]+(e-?\d+)?)$")
"""The names of scalars: the attention scale ``s`` and numeric constants."""


def _top_level(expr: str) -> str:
    """``expr`` with every parenthesised group written ``()`` (to look at its top level)."""
    depth, out = 0, []
    for ch in expr:
        if depth == 0:
            out.append(ch)
        depth += (ch == "(") - (ch == ")")
        if depth == 0 and ch == ")" and out[-1] != ")":
            out.append(")")
    return "".join(out)


def _atomic(expr: str) -> bool:
    """A name, a call ``f(...)`` or a parenthesised group: needs no parentheses around it."""
    top = _top_level(expr)
    return " " not in top and not top.startswith("−")


def _operand(expr: str) -> str:
    """``expr`` as an operand of ⊙, +, /: parenthesised unless atomic."""
    return expr if _atomic(expr) else f"({expr})"


def _chain(expr: str) -> bool:
    """Whether ``expr`` is a product chain ``A · B · C`` at its top level (or atomic)."""
    top = _top_level(expr).replace(" · ", "·")
    return " " not in top and not top.startswith("−")


def _factor(expr: str) -> str:
    """``expr`` as a factor of a matrix product: products chain without parentheses."""
    return expr if _chain(expr) else f"({expr})"


def _right(expr: str) -> str:
    """``expr`` as the right factor of a product: a chain is grouped, for readability."""
    return expr if _atomic(expr) else f"({expr})"


def _factors(expr: str) -> list[str]:
    """The factors of a product chain, parenthesised sub-chains opened up."""
    if not _chain(expr):
        return [expr]
    if _top_level(expr) == "()" and _chain(expr[1:-1]):
        return _factors(expr[1:-1])
    pieces, depth, start = [], 0, 0
    for i, ch in enumerate(expr):
        depth += (ch == "(") - (ch == ")")
        if depth == 0 and expr.startswith(" · ", i):
            pieces.append(expr[start:i])
            start = i + 3
    pieces.append(expr[start:])
    if len(pieces) == 1:
        return pieces
    return [f for piece in pieces for f in _factors(piece)]


def _transpose(expr: str) -> str:
    """``exprᵀ``, with ``(A · B)ᵀ = Bᵀ · Aᵀ`` applied to a product chain (scalars stay)."""
    if _ATOM.match(expr):
        return expr[:-1] if expr.endswith("ᵀ") else expr + "ᵀ"
    if _top_level(expr) == "()ᵀ":
        return _factor(expr[1:-2])
    factors = _factors(expr)
    if len(factors) > 1:
        return " · ".join(f if _SCALAR.match(f) else _transpose(f) for f in reversed(factors))
    return expr + "ᵀ" if _atomic(expr) else f"({expr})ᵀ"


def _fit(node: Context, slot: int, expr: str) -> str:
    """Sum a gradient down to the shape of an input that was broadcast."""
    shape = node.inputs[slot].shape
    out = tuple(node.out_shape)
    if node.name == "MatMul":
        broadcast = len(shape) > 2 and shape[:-2] != out[:-2] or len(shape) == 2 < len(out)
    else:
        broadcast = node.name in BROADCASTING and shape != out and len(shape) > 0
    return f"sum_to({expr}, {shape_text(shape)})" if broadcast else expr


def chain_rule(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
    """The gradient node ``node`` sends to its input ``slot``, written from its output's
    gradient ``g``, the names ``x`` of its inputs and ``out`` of its output."""
    rule = RULES.get(node.name)
    if rule is None:
        return f"J_{node.name}ᵀ[{slot}]({g})"
    return _fit(node, slot, rule(node, slot, g, x, out))


def _scalar_or_elementwise(node: Context, slot: int, g: str, other: str) -> str:
    if node.inputs[1 - slot].ndim == 0:
        return f"{_factor(g)} · {other}"
    return f"{_operand(g)} ⊙ {_operand(other)}"


def _permute(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
    if swaps_last_two(node):
        return _transpose(g)
    dims = tuple(node.kwargs["dims"])
    inverse = tuple(sorted(range(len(dims)), key=dims.__getitem__))
    return f"permute({g}, {inverse})"


Rule = Callable[[Context, int, str, list, str], str]
RULES: dict[str, Rule] = {
    "Add": lambda n, i, g, x, o: g,
    "Sub": lambda n, i, g, x, o: g if i == 0 else f"−{_operand(g)}",
    "Mul": lambda n, i, g, x, o: _scalar_or_elementwise(n, i, g, x[1 - i]),
    "Div": lambda n, i, g, x, o: f"{_operand(g)} / {_operand(x[1])}" if i == 0
    else f"−{_operand(g)} ⊙ {_operand(x[0])} / {_operand(x[1])}²",
    "Neg": lambda n, i, g, x, o: f"−{_operand(g)}",
    "PowScalar": lambda n, i, g, x, o: f"{_operand(g)} ⊙ {n.kwargs['exponent']:g} · "
                                       f"{_operand(x[0])}^{n.kwargs['exponent'] - 1:g}",
    "Exp": lambda n, i, g, x, o: f"{_operand(g)} ⊙ {o}",
    "Log": lambda n, i, g, x, o: f"{_operand(g)} / {_operand(x[0])}",
    "Sqrt": lambda n, i, g, x, o: f"{_operand(g)} / (2 · {o})",
    "Rsqrt": lambda n, i, g, x, o: f"−½ {_operand(g)} ⊙ {o}³",
    "Tanh": lambda n, i, g, x, o: f"{_operand(g)} ⊙ (1 − {o}²)",
    "Sigmoid": lambda n, i, g, x, o: f"{_operand(g)} ⊙ {o} ⊙ (1 − {o})",
    "Relu": lambda n, i, g, x, o: f"{_operand(g)} ⊙ [{x[0]} > 0]",
    "Abs": lambda n, i, g, x, o: f"{_operand(g)} ⊙ sign({x[0]})",
    "Gelu": lambda n, i, g, x, o: f"{_operand(g)} ⊙ GELU′({x[0]})",
    "Cast": lambda n, i, g, x, o: g,
    "Copy": lambda n, i, g, x, o: g,
    "Sum": lambda n, i, g, x, o: f"broadcast({g})",
    "Mean": lambda n, i, g, x, o: f"broadcast({g}) / n",
    "Reshape": lambda n, i, g, x, o: f"reshape({g}, {shape_text(n.inputs[0].shape)})",
    "Permute": _permute,
    "Expand": lambda n, i, g, x, o: g,
    "MaskedFill": lambda n, i, g, x, o: f"{_operand(g)} ⊙ ¬M",
    "Dropout": lambda n, i, g, x, o: f"{_operand(g)} ⊙ m / (1 − p)",
    "MatMul": lambda n, i, g, x, o: f"{_factor(g)} · {_transpose(x[1])}" if i == 0
    else f"{_transpose(x[0])} · {_right(g)}",
    "Linear": lambda n, i, g, x, o: (f"{_factor(g)} · {x[1]}", f"{_operand(_transpose(g))} · "
                                     f"{x[0]}", f"Σ_rows {_operand(g)}")[i],
    "Softmax": lambda n, i, g, x, o: f"{o} ⊙ ({g} − rowsum({_operand(g)} ⊙ {o}))",
    "LogSoftmax": lambda n, i, g, x, o: f"{_operand(g)} − softmax({x[0]}) ⊙ rowsum({g})",
    "LayerNorm": lambda n, i, g, x, o: (
        f"(ĝ − mean(ĝ) − x̂ ⊙ mean(ĝ ⊙ x̂)) / σ  with ĝ = {_operand(g)} ⊙ w, "
        f"x̂ = ({x[0]} − mean) / σ", f"Σ_rows {_operand(g)} ⊙ x̂", f"Σ_rows {_operand(g)}")[i],
    "CrossEntropy": lambda n, i, g, x, o: f"{_factor(g)} · (softmax({x[0]}) − onehot(t))"
                                          + (" / N" if n.kwargs.get("reduction") == "mean"
                                             else ""),
    "Embedding": lambda n, i, g, x, o: f"scatter_add_rows({g}, idx)",
    "GetItem": lambda n, i, g, x, o: f"scatter({g}, index)",
    "Where": lambda n, i, g, x, o: f"{_operand(g)} ⊙ [{'' if i == 0 else '¬'}cond]",
    "FusedAttention": lambda n, i, g, x, o: (
        f"s · dS · {x[1]}  with dS = P ⊙ ({_factor(g)} · {_transpose(x[2])} − δ), "
        f"P = softmax(s · {x[0]} · {_transpose(x[1])}), δ = rowsum({_operand(g)} ⊙ {o})",
        f"s · dSᵀ · {x[0]}  with dS as for {x[0]}",
        f"Pᵀ · {_factor(g)}")[i],
}
BROADCASTING = {"Add", "Sub", "Mul", "Div", "Where", "MatMul"}

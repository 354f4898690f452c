"""How a backward rule is written as a formula, for :func:`tinyattn.inspect.explain`.

Each op's ``formula(node, slot, g, x, out)`` (an attribute of its :class:`Function`) writes the
gradient it sends to input ``slot`` from the name (or formula) ``g`` of its output's gradient,
the names ``x`` of its inputs and ``out`` of its output: ``MatMul`` sends ``g · Bᵀ`` to ``A``
and ``Aᵀ · g`` to ``B``; ``Softmax`` sends ``P ⊙ (g − rowsum(g ⊙ P))``. Formulas are plain
strings; the helpers here add the parentheses that precedence needs, apply
``(A · B)ᵀ = Bᵀ · Aᵀ`` and write the sum that undoes a broadcast.
"""

from __future__ import annotations

import re
from typing import Any

from ..tables import shape_text

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


def _chain(expr: str) -> bool:
    """Whether ``expr`` is a product chain ``A · B · C`` at its top level (or atomic)."""
    top = _top_level(expr).replace(" · ", "·")
    return " " not in top and not top.startswith("−")


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


def transpose(expr: str) -> str:
    """``exprᵀ``, with ``(A · B)ᵀ = Bᵀ · Aᵀ`` applied to a product chain (scalars stay)."""
    if _ATOM.match(expr):
        return expr[:-1] if expr.endswith("ᵀ") else expr + "ᵀ"
    if _top_level(expr) == "()ᵀ":
        return factor(expr[1:-2])
    factors = _factors(expr)
    if len(factors) > 1:
        return " · ".join(f if _SCALAR.match(f) else transpose(f) for f in reversed(factors))
    return expr + "ᵀ" if _atomic(expr) else f"({expr})ᵀ"


def operand(expr: str) -> str:
    """``expr`` as an operand of ⊙, +, /: parenthesised unless atomic."""
    return expr if _atomic(expr) else f"({expr})"


def factor(expr: str) -> str:
    """``expr`` as a factor of a matrix product: products chain without parentheses."""
    return expr if _chain(expr) else f"({expr})"


def right(expr: str) -> str:
    """``expr`` as the right factor of a product: a chain is grouped, for readability."""
    return expr if _atomic(expr) else f"({expr})"


def summed_to_input(node: Any, slot: int, expr: str) -> str:
    """``expr`` summed down to the shape of input ``slot`` where the op broadcast it."""
    shape = node.inputs[slot].shape
    if shape != tuple(node.out_shape) and len(shape) > 0:
        return f"sum_to({expr}, {shape_text(shape)})"
    return expr


def scaled_or_elementwise(node: Any, slot: int, g: str, other: str) -> str:
    """``g`` times the other operand: a scalar factor, or an elementwise product."""
    if node.inputs[1 - slot].ndim == 0:
        return f"{factor(g)} · {other}"
    return f"{operand(g)} ⊙ {operand(other)}"

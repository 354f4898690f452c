"""The rule an exercise asks for, read from tinyattn's own ops (never written out here).

An exercise whose reference is a single tinyattn op (``Softmax``, ``LayerNorm``,
``CrossEntropy``) asks for that op's backward: :func:`rule` prints the op's class docstring,
which states its forward and backward math, and the op's own ``formula`` (what
:func:`tinyattn.inspect.explain` writes for it) rendered with the exercise's names. The
node comes from running the reference on a case with grad on: ``out.grad_fn`` is the op's
context, ``node.fn.formula(node, slot, "dy", ["x", ...], "y")`` the gradient it sends to input
``slot``.

For a composite reference (an attention head: matmul, mask, softmax, matmul ...) the rule is
what :func:`tinyattn.inspect.explain` composes from the formula of each op on the way, for
every input, followed by the derivation step by step.
"""

from __future__ import annotations

import inspect as pyinspect
from typing import Any

import numpy as np

from ..autograd import Context, enable_grad
from ..inspect.explain import explain
from ..tensor import Tensor
from .exercise import Exercise, Values


def rule(exercise: Exercise, seed: int = 0) -> list[str]:
    """The lines that state the rule ``exercise`` asks for, taken from tinyattn's ops.

    Examples
    --------
    >>> from tinyattn.exercises import EXERCISES
    >>> rule(EXERCISES["softmax"])[0]
    "the rule, from tinyattn's own op tinyattn.ops.softmax.Softmax:"
    """
    out, values, names = _run_reference(exercise, seed)
    leaves = {id(values[name]): name for name in exercise.inputs}
    if _is_single_op(out.grad_fn, leaves):
        return _op_rule(exercise, out.grad_fn, values, leaves)
    return _composed_rule(exercise, out, values, names)


def single_op(exercise: Exercise) -> type | None:
    """The tinyattn op that is the whole of ``exercise``'s reference, or None when the
    reference composes several ops."""
    out, values, _ = _run_reference(exercise, 0)
    leaves = {id(values[name]): name for name in exercise.inputs}
    return out.grad_fn.fn if _is_single_op(out.grad_fn, leaves) else None


def _run_reference(exercise: Exercise, seed: int) -> tuple[Tensor, Values, dict[str, Tensor]]:
    """The reference run with grad on the first case: its output, arguments and the
    intermediates it names."""
    case = exercise.cases(np.random.default_rng(seed))[0]
    values = case.values(requires_grad=True)
    names: dict[str, Tensor] = {}
    with enable_grad():
        out = exercise.reference(**values, names=names)
    return out, values, names


def _is_single_op(node: Context, leaves: dict[int, str]) -> bool:
    """Whether ``node`` takes the exercise's inputs themselves (no op before it)."""
    return all(edge is None or id(edge) in leaves for edge in node.edges)


def _op_rule(exercise: Exercise, node: Context, values: Values,
             leaves: dict[int, str]) -> list[str]:
    op = node.fn
    lines = [f"the rule, from tinyattn's own op {op.__module__}.{op.__qualname__}:"]
    doc = pyinspect.cleandoc(op.__doc__ or "").replace("``", "")
    lines += [f"    {line}" if line else "" for line in doc.splitlines()]
    if op.formula is None:
        return lines
    by_value = {id(value): name for name, value in values.items()}
    operands = [leaves.get(id(edge)) or by_value.get(id(value)) or _operand(value)
                for edge, value in zip(node.edges, node.inputs)]
    lines.append(f"  {op.__name__}.formula, in this exercise's names:")
    for slot, edge in enumerate(node.edges):
        if edge is not None and id(edge) in leaves:
            text = op.formula(node, slot, "d" + exercise.output, operands, exercise.output)
            lines.append(f"    d{leaves[id(edge)]} = {text}")
    return lines


def _operand(value: Any) -> str:
    """How a non-tensor argument of an op is written (as ``explain`` writes it)."""
    return "·" if isinstance(value, Tensor) else repr(value)


def _composed_rule(exercise: Exercise, out: Tensor, values: Values,
                   names: dict[str, Tensor]) -> list[str]:
    labels = {exercise.symbol(name): values[name] for name in exercise.inputs}
    labels.update(names)
    labels[exercise.symbol(exercise.output)] = out
    lines = ["the rule, as inspect.explain composes it from the formula of each tinyattn op "
             "on the way:"]
    renamed = [(symbol, name) for name, symbol in exercise.symbols.items() if symbol != name]
    if renamed:
        lines.append(f"  ({', '.join(s for s, _ in renamed)} are "
                     f"{', '.join(n for _, n in renamed)}; the other names are explain's)")
    steps: dict[tuple[int, int], Any] = {}
    for name in exercise.inputs:
        explanation = explain(values[name], out, labels)
        lines.append(f"    {explanation.formula}")
        steps.update({(step.index, step.slot): step for step in explanation.steps})
    lines.append("  derivation, output side first (#k is the op's place in the graph):")
    lines += [f"    {steps[key]}" for key in sorted(steps)]
    return lines

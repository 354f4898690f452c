"""What an exercise is: a stub to fill in, test cases, tinyattn's reference, and known mistakes.

A backward exercise is written exactly as a PyTorch custom ``autograd.Function``: the stub
defines a class (``class Softmax(torch.autograd.Function)``) whose ``forward(ctx, ...)`` is
given, written with tensor methods, and saves what the backward needs; its
``backward(ctx, grad_output)`` is left to write, with tensor operations. The stub starts with
``import tinyattn as torch`` and runs unchanged with ``import torch``.

The grader (:mod:`.grader`) runs ``Fn.apply(*arguments)`` on every :class:`Case`, takes the
gradients through autograd and compares each element with the gradients of
:attr:`Exercise.reference` — the same computation written with tinyattn ops, differentiated
by tinyattn's autograd — and with central finite differences of that reference. A wrong answer
is compared with every :class:`Mistake`: the gradients a known slip would produce, computed
with tinyattn tensor ops.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np

from ..autograd import enable_grad, grad
from ..ops import masked_fill, matmul, softmax
from ..tensor import Tensor

Values = dict[str, Any]
"""The arguments of one call, by name: tensors, numbers and flags."""


@dataclass(frozen=True)
class Case:
    """One test case: the float64 ``inputs`` to differentiate, the other arguments of
    ``forward`` (``options``: numbers, flags, and integer or bool arrays, which are passed as
    tensors that do not require grad), and a label."""

    label: str
    inputs: dict[str, np.ndarray]
    options: dict[str, Any] = field(default_factory=dict)

    def values(self, requires_grad: bool = True) -> Values:
        """Fresh tensors for every argument (copies: nothing a run does reaches the case).

        Examples
        --------
        >>> case = Case("x", {"x": np.ones(2)}, {"mask": np.array([True, False]), "p": 0.5})
        >>> values = case.values()
        >>> values["x"].requires_grad, values["mask"].requires_grad, values["p"]
        (True, False, 0.5)
        """
        values: Values = {name: Tensor(array.copy(), requires_grad=requires_grad)
                          for name, array in self.inputs.items()}
        values.update({name: Tensor(value.copy()) if isinstance(value, np.ndarray) else value
                       for name, value in self.options.items()})
        return values


@dataclass(frozen=True)
class Mistake:
    """A known slip: ``gradients(values, d_output)`` are the gradients it produces, by input
    name, computed with tinyattn tensor ops from the case's ``values`` (see
    :meth:`Case.values`) and the upstream gradient."""

    diagnosis: str
    gradients: Callable[[Values, Tensor], dict[str, Tensor]]


@dataclass(frozen=True)
class Exercise:
    """An exercise.

    Attributes
    ----------
    name, summary : str
        Its name and a one-line summary.
    stub : str
        The text of the file ``tinyattn exercise new`` writes.
    function : str
        The name of the stub's ``autograd.Function`` class.
    arguments : tuple of str
        The arguments of its ``forward`` (after ``ctx``), in order: ``apply`` gets them
        positionally, and ``backward`` returns one gradient for each.
    inputs : tuple of str
        The arguments that are differentiated (the others get None).
    output : str
        The name of the output (``y``), for the rule: its gradient is ``d`` + ``output``.
    cases : callable
        The test cases, from a seeded generator.
    reference : callable
        The same computation with tinyattn ops: ``reference(**values)`` returns the output; a
        composite one fills ``names`` (a dict, when given) with the intermediate tensors to
        name in :func:`tinyattn.inspect.explain`.
    mistakes : tuple of Mistake
        The known slips, each with its diagnosis.
    symbols : dict
        The letters the rule uses for some arguments and the output (``q`` is ``Q`` in an
        attention head's rule, as in its docstring's math); the others keep their names.
    """

    name: str
    summary: str
    stub: str
    function: str
    arguments: tuple[str, ...]
    inputs: tuple[str, ...]
    output: str
    cases: Callable[[np.random.Generator], list[Case]]
    reference: Callable[..., Tensor]
    mistakes: tuple[Mistake, ...]
    symbols: dict[str, str] = field(default_factory=dict)

    def symbol(self, name: str) -> str:
        """How ``name`` is written in the rule."""
        return self.symbols.get(name, name)

    @classmethod
    def from_module(cls, module: ModuleType) -> Exercise:
        """The exercise that ``module`` defines, named after it: its ``SUMMARY``, ``STUB``,
        ``FUNCTION``, ``ARGUMENTS``, ``INPUTS``, ``OUTPUT``, ``cases``, ``reference``,
        ``MISTAKES`` and (if it has one) ``SYMBOLS``."""
        return cls(name=module.__name__.rpartition(".")[2], summary=module.SUMMARY,
                   stub=module.STUB, function=module.FUNCTION, arguments=module.ARGUMENTS,
                   inputs=module.INPUTS, output=module.OUTPUT, cases=module.cases,
                   reference=module.reference, mistakes=module.MISTAKES,
                   symbols=getattr(module, "SYMBOLS", {}))


def attention_inputs(rng: np.random.Generator, lead: tuple[int, ...], T: int, S: int, D: int,
                     Dv: int) -> dict[str, np.ndarray]:
    """Standard normal ``q (*lead, T, D)``, ``k (*lead, S, D)`` and ``v (*lead, S, Dv)``."""
    return {"q": rng.standard_normal(lead + (T, D)), "k": rng.standard_normal(lead + (S, D)),
            "v": rng.standard_normal(lead + (S, Dv))}


def reference_gradients(reference: Callable[..., Tensor], values: Values, d_output: Tensor,
                        inputs: tuple[str, ...]) -> dict[str, Tensor]:
    """The gradients tinyattn's autograd computes for ``reference(**values)`` given the upstream
    gradient ``d_output``, by input name (on detached copies of the inputs)."""
    fresh = {name: value.detach().requires_grad_() if name in inputs else value
             for name, value in values.items()}
    with enable_grad():
        out = reference(**fresh)
        found = grad(out, [fresh[name] for name in inputs], d_output)
    return {name: g.detach() for name, g in zip(inputs, found)}


def head_scale(q: Tensor) -> float:
    """The score scale ``s = 1/√D`` of queries ``q (..., T, D)``."""
    return 1.0 / float(np.sqrt(q.shape[-1]))


def attention_scores(values: Values) -> Tensor:
    """``S = s · q kᵀ`` with −inf where key ``j`` > query ``i`` when ``causal``, ``(..., T, S)``:
    the forward the attention exercises' mistakes start from."""
    q, k = values["q"].detach(), values["k"].detach()
    scores = matmul(q, transpose(k)) * head_scale(q)
    if values["causal"]:
        future = Tensor(np.triu(np.ones(scores.shape[-2:], dtype=bool), 1))
        scores = masked_fill(scores, future, -np.inf)
    return scores


def through_softmax(scores: Tensor, d_weights: Tensor) -> Tensor:
    """The gradient at the scores from the gradient ``d_weights`` at ``softmax(scores)``,
    taken by tinyattn's own ``Softmax`` op (for the mistakes that get another step wrong)."""
    scores = scores.detach().requires_grad_()
    with enable_grad():
        return grad(softmax(scores, dim=-1), scores, d_weights)[0].detach()


def transpose(t: Tensor) -> Tensor:
    """The transpose of the last two dims."""
    return t.transpose(-2, -1)

"""What an exercise is: a stub to fill in, test cases, tinyattn's reference, and known mistakes.

The stub gives ``forward(**inputs, **options) -> (output, cache)`` in numpy and leaves
``backward(d_output, cache) -> gradients`` to write. The grader runs both on every
:class:`Case`, and compares each gradient element by element with the backward of
:attr:`Exercise.reference` — the same computation written with tinyattn ops, differentiated
by tinyattn's autograd — and with central finite differences of that reference. A wrong
answer is compared with every :class:`Mistake`: the gradients a known slip would produce.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np

from ..tensor import Tensor

Arrays = dict[str, np.ndarray]


@dataclass(frozen=True)
class Case:
    """One test case: the float64 inputs to differentiate, the other arguments, a label."""

    label: str
    arrays: Arrays
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Mistake:
    """A known slip: ``gradients(case, d_output)`` are the gradients it produces."""

    diagnosis: str
    gradients: Callable[[Case, np.ndarray], Arrays]


@dataclass(frozen=True)
class Exercise:
    """An exercise: ``name``, a one-line ``summary``, the ``stub`` file's text, the names of
    the differentiated inputs in the order ``backward`` returns their gradients, the test
    cases (from a seeded generator), the reference computation on tensors and the known
    mistakes."""

    name: str
    summary: str
    stub: str
    inputs: tuple[str, ...]
    cases: Callable[[np.random.Generator], list[Case]]
    reference: Callable[..., Tensor]
    mistakes: tuple[Mistake, ...]

    @classmethod
    def from_module(cls, module: ModuleType) -> Exercise:
        """The exercise that ``module`` defines, named after it: its ``SUMMARY``, ``STUB``,
        ``INPUTS``, ``cases``, ``reference`` and ``MISTAKES``."""
        return cls(name=module.__name__.rpartition(".")[2], summary=module.SUMMARY,
                   stub=module.STUB, inputs=module.INPUTS, cases=module.cases,
                   reference=module.reference, mistakes=module.MISTAKES)


def attention_inputs(rng: np.random.Generator, lead: tuple[int, ...], T: int, S: int, D: int,
                     Dv: int) -> Arrays:
    """Standard normal ``q (*lead, T, D)``, ``k (*lead, S, D)`` and ``v (*lead, S, Dv)``."""
    return {"q": rng.standard_normal(lead + (T, D)), "k": rng.standard_normal(lead + (S, D)),
            "v": rng.standard_normal(lead + (S, Dv))}


def causal(T: int, S: int) -> np.ndarray:
    """``(T, S)`` bool, True where query ``i`` may see key ``j <= i``."""
    return np.tril(np.ones((T, S), dtype=bool))


def softmax_rows(scores: np.ndarray) -> np.ndarray:
    """Softmax of the last axis in numpy (for the mistakes' arithmetic)."""
    shifted = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


def attention_weights(q: np.ndarray, k: np.ndarray, is_causal: bool) -> tuple[np.ndarray, float]:
    """``(P, s)``: ``P = softmax(s · q kᵀ)`` (−inf above the diagonal when causal), ``s = 1/√D``
    — the forward the attention exercises' mistakes start from."""
    s = 1.0 / np.sqrt(q.shape[-1])
    scores = s * q @ swap(k)  # (..., T, S)
    if is_causal:
        scores = np.where(causal(*scores.shape[-2:]), scores, -np.inf)
    return softmax_rows(scores), s


def swap(a: np.ndarray) -> np.ndarray:
    """The transpose of the last two axes."""
    return np.swapaxes(a, -1, -2)

"""Exercise ``cross_entropy``: d logits of the mean cross-entropy over rows."""

from __future__ import annotations

import numpy as np

from ..functional.loss import cross_entropy
from ..tensor import Tensor
from .exercise import Case, Mistake, softmax_rows

SUMMARY = "d logits of the mean cross-entropy: softmax − one-hot, over N"
INPUTS = ("logits",)

STUB = '''"""Exercise: the backward pass of the cross-entropy loss.

    loss = mean over the N rows of  −log softmax(logits)[row, target[row]]

Write ``backward`` below, then check it:

    tinyattn exercise check cross_entropy.py
"""

import numpy as np

EXERCISE = "cross_entropy"


def forward(logits, targets):
    """logits (N, C), targets (N,) ints -> the mean loss (a 0-d array), and the cache."""
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    rows = np.arange(len(targets))
    return -log_probs[rows, targets].mean(), (np.exp(log_probs), targets)


def backward(d_loss, cache):
    """dL/dloss (a number) -> dL/dlogits (N, C)."""
    probs, targets = cache
    raise NotImplementedError("write dlogits here")
'''


def cases(rng: np.random.Generator) -> list[Case]:
    def case(N: int, C: int) -> Case:
        return Case(f"logits ({N}, {C})", {"logits": 2.0 * rng.standard_normal((N, C))},
                    {"targets": rng.integers(0, C, N)})

    return [case(6, 5), case(3, 4), case(1, 7)]


def reference(logits: Tensor, targets: np.ndarray) -> Tensor:
    return cross_entropy(logits, Tensor(targets))


def _mistake(divisor: str = "N", upstream: bool = True):
    def gradients(case: Case, d_loss: np.ndarray) -> dict[str, np.ndarray]:
        logits, targets = case.arrays["logits"], case.options["targets"]
        N, C = logits.shape
        delta = softmax_rows(logits)
        delta[np.arange(N), targets] -= 1.0
        scale = {"N": N, "1": 1, "N·C": N * C}[divisor]
        return {"logits": delta / scale * (d_loss if upstream else 1.0)}

    return gradients


MISTAKES = (
    Mistake("sum instead of mean: the loss is the mean over the N rows, so dlogits = "
            "(softmax − onehot) / N (times d_loss)", _mistake(divisor="1")),
    Mistake("mean over all N·C entries instead of over the N rows: dlogits = (softmax − "
            "onehot) / N", _mistake(divisor="N·C")),
    Mistake("the upstream gradient d_loss is ignored: multiply by it (the chain rule)",
            _mistake(upstream=False)),
)

"""Exercise ``cross_entropy``: d logits of the mean cross-entropy over rows, as a custom
autograd Function."""

from __future__ import annotations

import numpy as np

from ..functional.loss import cross_entropy
from ..tensor import Tensor
from .exercise import Case, Mistake, Values, reference_gradients

SUMMARY = "d logits of the mean cross-entropy: softmax − one-hot, over N"
FUNCTION = "CrossEntropy"
ARGUMENTS = ("logits", "targets")
INPUTS = ("logits",)
OUTPUT = "loss"

STUB = '''"""Exercise: the backward pass of the cross-entropy loss, written as a custom autograd
Function.

    loss = mean over the N rows of  −log softmax(logits)[row, targets[row]]

Write ``CrossEntropy.backward`` below with tensor operations, then check it:

    tinyattn exercise check cross_entropy.py
"""

import tinyattn as torch  # the same file runs under PyTorch: write `import torch` instead

EXERCISE = "cross_entropy"


class CrossEntropy(torch.autograd.Function):
    """The mean cross-entropy of rows of logits against integer class targets."""

    @staticmethod
    def forward(ctx, logits, targets):
        """logits (N, C), targets (N,) integer class indices -> the mean loss (0-d)."""
        log_probs = logits.log_softmax(dim=-1)  # (N, C)
        onehot = torch.nn.functional.one_hot(targets, logits.shape[-1]).to(logits.dtype)
        ctx.save_for_backward(logits, targets)
        return -(onehot * log_probs).sum() / logits.shape[0]

    @staticmethod
    def backward(ctx, grad_output):
        """grad_output = dL/dloss (0-d) -> (dL/dlogits (N, C), None).

        One gradient per argument of forward, in order: None for targets (integers have no
        gradient). logits.softmax(dim=-1) gives the probabilities, and
        torch.nn.functional.one_hot(targets, C).to(logits.dtype) the one-hot rows. Use tensor
        operations (not numpy), so that your backward can itself be differentiated.
        """
        logits, targets = ctx.saved_tensors
        raise NotImplementedError("write dL/dlogits here, with tensor operations")
'''


def cases(rng: np.random.Generator) -> list[Case]:
    def case(N: int, C: int) -> Case:
        return Case(f"logits ({N}, {C})", {"logits": 2.0 * rng.standard_normal((N, C))},
                    {"targets": rng.integers(0, C, N)})

    return [case(6, 5), case(3, 4), case(1, 7)]


def reference(logits: Tensor, targets: Tensor, names: dict[str, Tensor] | None = None) -> Tensor:
    """tinyattn's ``CrossEntropy`` op, the mean over the rows."""
    return cross_entropy(logits, targets)


def _mistake(divisor: str = "N", upstream: bool = True):
    """The right gradient with the wrong divisor, or without the upstream gradient."""
    def gradients(values: Values, d_loss: Tensor) -> dict[str, Tensor]:
        right = reference_gradients(reference, values, d_loss, INPUTS)["logits"]
        N, C = right.shape
        scale = {"N": 1.0, "1": float(N), "N·C": 1.0 / C}[divisor]
        return {"logits": right * scale / (1.0 if upstream else d_loss)}

    return gradients


MISTAKES = (
    Mistake("sum instead of mean: the loss is the mean over the N rows, so every row's "
            "gradient is divided by N", _mistake(divisor="1")),
    Mistake("mean over all N·C entries instead of over the N rows: divide by N, not N·C",
            _mistake(divisor="N·C")),
    Mistake("the upstream gradient grad_output is ignored: multiply by it (the chain rule)",
            _mistake(upstream=False)),
)

"""``BinaryCrossEntropy``: the elementwise binary cross-entropy of probabilities, with
PyTorch's clamped logs and its bounded backward.

Composed of ``log`` and ``log1p`` ops, the loss would have the gradient ``−t / x`` and
``(1 − t) / (1 − x)``, which overflows (to ``inf`` in float32 below ``x ≈ 3e-39``) when ``x``
comes from a saturated sigmoid, and is ``0 · ∞ = NaN`` where the log is clamped at ``x = 0``.
PyTorch's rule divides by ``max(x (1 − x), 1e-12)`` instead: the same gradient wherever
``x (1 − x) ≥ 1e-12``, and a bounded one at the ends. Weights and reductions are applied around
this op by :func:`tinyattn.functional.binary_cross_entropy`.
"""

from __future__ import annotations

import numpy as np

from ..autograd import Context, Function
from ..tensor import Tensor, from_numpy
from .notation import operand
from .unary import clamp, log, log1p

LOG_FLOOR = -100.0
"""The logs are clamped here, so that a probability of exactly 0 or 1 costs 100, not ``inf``."""

EPSILON = float(np.float32(1e-12))
"""The floor of ``x (1 − x)`` in the input's gradient: PyTorch's, a float32 ``1e-12``
(``9.99999996e-13``), so that the bounded gradients agree to the last digit."""


class BinaryCrossEntropy(Function):
    """``ℓ = −(t · max(ln x, −100) + (1 − t) · max(ln(1 − x), −100))`` per element;
    ``dx = g (x − t) / max(x (1 − x), 1e-12)``, ``dt = g (ln(1 − x) − ln x)``.

    ``x`` are probabilities in ``[0, 1]`` and ``t`` targets in ``[0, 1]``, of one shape and
    dtype. The backward is PyTorch's: exact wherever ``x (1 − x) ≥ 1e-12``; at the ends it is
    bounded (``dx``) or infinite (``dt`` at ``x = 0`` or ``1``), as in PyTorch. Being written in
    tensor ops, it is differentiated again under ``create_graph=True``: the second derivatives
    are exact (and PyTorch's) where ``x (1 − x) ≥ 1e-12``; beyond, they are those of the clamped
    rule, where PyTorch's double backward has its own.
    """

    @staticmethod
    def forward(ctx: Context, x: Tensor, t: Tensor) -> Tensor:
        probs, targets = x.numpy(), t.numpy()
        with np.errstate(divide="ignore"):
            log_x = np.maximum(np.log(probs), LOG_FLOOR)
            log_not_x = np.maximum(np.log1p(-probs), LOG_FLOOR)
        ctx.save_for_backward(x, t)
        loss = -(targets * log_x + (1 - targets) * log_not_x)
        return from_numpy(np.asarray(loss, dtype=probs.dtype))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> tuple[Tensor | None, Tensor | None]:
        x, t = ctx.saved_tensors
        dx = dt = None
        if ctx.needs_input_grad[0]:
            dx = grad * (x - t) / clamp(x * (1 - x), min=EPSILON)
        if ctx.needs_input_grad[1]:
            dt = grad * (log1p(-x) - log(x))
        return dx, dt

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        if slot == 0:
            return f"{operand(g)} ⊙ ({x[0]} − {x[1]}) / max({x[0]} ⊙ (1 − {x[0]}), 1e-12)"
        return f"{operand(g)} ⊙ (ln(1 − {x[0]}) − ln {x[0]})"


__all__ = ["BinaryCrossEntropy"]

"""``Dropout``: inverted dropout on the counter-based generator — the mask is never stored.

Element ``n`` of a call with seed ``s`` is kept when the counter-based uniform ``u(s, n) >= p``
(:mod:`tinyattn.kernels.dropout`), so the forward ``y = x ⊙ m / (1 − p)`` and the backward
``dx = g ⊙ m / (1 − p)`` are the *same* function of ``(seed, p)`` applied to ``x`` and to ``g``.
"""

from __future__ import annotations

import numpy as np

from ..autograd import Context, Function
from ..kernels.dropout import dropout_apply
from ..tensor import Tensor


def keep_scale(p: float) -> float:
    """The factor ``1 / (1 − p)`` that inverted dropout gives the kept elements (0 if p = 1)."""
    return 1.0 / (1.0 - p) if p < 1.0 else 0.0


class Dropout(Function):
    """``y = x ⊙ m / (1 − p)`` for a keep-mask ``m``; ``dx = g ⊙ m / (1 − p)`` (the same mask).

    The mask is a function of a seed (drawn from ``ta.manual_seed``'s generator) through the
    counter-based generator, so the backward recomputes it.
    """

    keeps_inputs = False

    @staticmethod
    def forward(ctx: Context, x: np.ndarray, p: float, seed: int) -> np.ndarray:
        ctx.save_for_backward(seed, p)
        return dropout_apply(np.ascontiguousarray(x), seed, p)

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray]:
        seed, p = ctx.saved
        return (dropout_apply(np.ascontiguousarray(grad), seed, p),)

    @staticmethod
    def differentiable_backward(ctx: Context, grad: Tensor) -> tuple[Tensor]:
        seed, p = ctx.saved
        scaled_mask = dropout_apply(np.ones(grad.shape, grad.dtype), seed, p)  # m / (1 − p)
        return (grad * Tensor(scaled_mask),)

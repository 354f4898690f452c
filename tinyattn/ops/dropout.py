"""``Dropout``: inverted dropout on the counter-based generator — the mask is never stored.

Element ``n`` of a call with seed ``s`` is kept when the counter-based uniform ``u(s, n) >= p``
(:mod:`tinyattn.kernels.dropout`), so the forward ``y = x ⊙ m / (1 − p)`` and the backward
``dx = g ⊙ m / (1 − p)`` are the *same* function of ``(seed, p)`` applied to ``x`` and to ``g``.
"""

from __future__ import annotations

import numpy as np

from ..autograd import Context, Function
from ..kernels.dropout import dropout_apply
from ..tensor import Tensor, from_numpy
from .notation import operand


def keep_scale(p: float) -> float:
    """The factor ``1 / (1 − p)`` that inverted dropout gives the kept elements (0 if p = 1)."""
    return 1.0 / (1.0 - p) if p < 1.0 else 0.0


class Dropout(Function):
    """``y = x ⊙ m / (1 − p)`` for a keep-mask ``m``; ``dx = g ⊙ m / (1 − p)`` (the same mask).

    The mask is a function of a seed (drawn from ``ta.manual_seed``'s generator) through the
    counter-based generator, so the backward recomputes it: the backward of dropout is dropout
    with the same seed, applied to ``g`` (a recorded op under ``create_graph``, itself linear).
    """

    keeps_inputs = False

    @staticmethod
    def forward(ctx: Context, x: Tensor, p: float, seed: int) -> Tensor:
        ctx.p, ctx.seed = p, seed
        return from_numpy(dropout_apply(np.ascontiguousarray(x.numpy()), seed, p))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> tuple[Tensor, None, None]:
        return Dropout.apply(grad, ctx.p, ctx.seed), None, None

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        return f"{operand(g)} ⊙ m / (1 − p)"

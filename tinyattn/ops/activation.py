"""``Gelu``: the Gaussian error linear unit on the numba GELU kernels
(:mod:`tinyattn.kernels.gelu`), exact (erf) or with PyTorch's tanh approximation."""

from __future__ import annotations

import math

import numpy as np

from ..autograd import Context, Function, is_grad_enabled
from ..kernels.gelu import gelu_backward, gelu_forward
from ..kernels.gelu_tanh import SQRT_2_OVER_PI, TANH_CUBIC
from ..tensor import Tensor, from_numpy
from .notation import operand
from .unary import erf, exp, tanh


class Gelu(Function):
    """``y = x Φ(x)``; ``dx = g ⊙ (Φ(x) + x φ(x))`` (Φ, φ: standard normal CDF and density).

    With ``approximate='tanh'``: ``y = ½ x (1 + t)``, ``t = tanh(√(2/π)(x + 0.044715 x³))``,
    ``dx = g ⊙ (½ (1 + t) + ½ x (1 − t²) √(2/π) (1 + 3 · 0.044715 x²))``.
    """

    @staticmethod
    def forward(ctx: Context, x: Tensor, approximate: str) -> Tensor:
        ctx.save_for_backward(x)
        ctx.approximate = approximate
        array = x.numpy()
        return from_numpy(gelu_forward(array.reshape(-1), approximate).reshape(array.shape))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> tuple[Tensor, None]:
        (x,) = ctx.saved_tensors
        if not is_grad_enabled():  # fast path: the GELU kernel, when no graph is being built
            array = x.numpy()
            rows = np.ascontiguousarray(grad.numpy(), dtype=array.dtype).reshape(-1)
            return from_numpy(gelu_backward(array.reshape(-1), rows, ctx.approximate)
                              .reshape(array.shape)), None
        if ctx.approximate == "tanh":
            t = tanh(SQRT_2_OVER_PI * (x + TANH_CUBIC * x * x * x))
            slope = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * SQRT_2_OVER_PI * (
                1 + 3 * TANH_CUBIC * x * x)
        else:
            cdf = 0.5 * (1 + erf(x / math.sqrt(2.0)))
            density = exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
            slope = cdf + x * density
        return grad * slope, None

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        return f"{operand(g)} ⊙ GELU′({x[0]})"

"""Activation functions: ``gelu`` (on the Numba GELU kernels) and ``relu`` (a primitive op)."""

from __future__ import annotations

import numpy as np

from ..autograd import Context, Function
from ..ops import relu
from ..tensor import Tensor

__all__ = ["gelu", "relu"]

GELU_APPROXIMATIONS = ("none", "tanh")


class Gelu(Function):
    """``y = x Φ(x)``; ``dx = g ⊙ (Φ(x) + x φ(x))`` (Φ, φ: standard normal CDF and density).

    With ``approximate='tanh'``: ``y = ½ x (1 + t)``, ``t = tanh(√(2/π)(x + 0.044715 x³))``,
    ``dx = g ⊙ (½ (1 + t) + ½ x (1 − t²) √(2/π) (1 + 3 · 0.044715 x²))``.
    """

    @staticmethod
    def forward(ctx: Context, x: np.ndarray, approximate: str) -> np.ndarray:
        from ..kernels.gelu import gelu_forward  # numba loads on first use

        ctx.save_for_backward(x, approximate)
        return gelu_forward(x, approximate)

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray]:
        from ..kernels.gelu import gelu_backward

        x, approximate = ctx.saved
        return (gelu_backward(x, grad.astype(x.dtype, copy=False), approximate),)


def check_approximate(op: str, approximate: str) -> str:
    """``approximate`` if it is 'none' or 'tanh', else a ValueError naming ``op``."""
    if approximate not in GELU_APPROXIMATIONS:
        raise ValueError(f"{op}: approximate must be 'none' or 'tanh', got {approximate!r}")
    return approximate


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """Gaussian error linear unit ``x Φ(x)``, or its tanh approximation.

    Parameters
    ----------
    input : Tensor, float, any shape
    approximate : {'none', 'tanh'}

    Returns
    -------
    Tensor, shape and dtype of ``input``

    Examples
    --------
    >>> import tinyattn as ta
    >>> [round(v, 4) for v in ta.F.gelu(ta.tensor([-1.0, 0.0, 1.0])).tolist()]
    [-0.1587, 0.0, 0.8413]
    """
    check_approximate("gelu", approximate)
    if not isinstance(input, Tensor) or input.dtype.kind != "f":
        raise TypeError(f"gelu: input must be a float Tensor, got {type(input).__name__} "
                        f"of dtype {getattr(input, 'dtype', None)}")
    return Gelu.apply(input, approximate=approximate)

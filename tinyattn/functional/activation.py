"""Activations: ``gelu`` (the :class:`Gelu` op on the numba kernels), ``silu``, and the
primitives ``relu``, ``sigmoid``, ``tanh``, ``softmax``, ``log_softmax`` of :mod:`tinyattn.ops`.
"""

from __future__ import annotations

from ..ops import log_softmax, relu, sigmoid, softmax, tanh
from ..ops.activation import Gelu
from ..tensor import Tensor, check_float, check_kernel_dtype
from ..validation import check_choice

__all__ = ["gelu", "log_softmax", "relu", "sigmoid", "silu", "softmax", "tanh"]

GELU_APPROXIMATIONS = ("none", "tanh")


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """Gaussian error linear unit ``x Φ(x)``, or its tanh approximation.

    Parameters
    ----------
    input : Tensor, floating point, any shape
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
    check_choice("gelu", "approximate", approximate, GELU_APPROXIMATIONS)
    check_kernel_dtype("gelu", check_float("gelu", "input", input))
    return Gelu.apply(input, approximate=approximate)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """``x · sigmoid(x)`` (the gate of SwiGLU), composed of two recorded ops."""
    x = check_float("silu", "input", input)
    return x * sigmoid(x)

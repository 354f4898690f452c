"""Activation layers, thin modules over the functional forms, with PyTorch's names.

``Identity``, ``ReLU``, ``GELU``, ``Tanh``, ``Sigmoid``, ``SiLU``, ``Softmax``, ``LogSoftmax``.
``inplace=True`` is accepted where PyTorch has it, but the result is always a new tensor (the
values are the same; the input is left as it was).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from ..functional import gelu, log_softmax, relu, silu, softmax
from ..functional.activation import GELU_APPROXIMATIONS
from ..ops import sigmoid, tanh
from ..tensor import Tensor
from ..validation import check_choice
from .module import Module


class Identity(Module):
    """Return the input unchanged; any constructor arguments are ignored, as in PyTorch.

    Examples
    --------
    >>> import tinyattn as ta
    >>> x = ta.ones(2)
    >>> ta.nn.Identity(54, unused="argument")(x) is x
    True
    """

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__()

    def forward(self, input: Tensor) -> Tensor:
        return input


class _AcceptsInplace(Module):
    """A layer that takes PyTorch's ``inplace`` flag (kept, but the result is a new tensor)."""

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace


class ReLU(_AcceptsInplace):
    """Elementwise ``max(x, 0)``.

    Examples
    --------
    >>> import tinyattn as ta
    >>> ta.nn.ReLU()(ta.tensor([-1.0, 2.0])).tolist()
    [0.0, 2.0]
    """

    def forward(self, input: Tensor) -> Tensor:
        return relu(input)


class GELU(Module):
    """Gaussian error linear unit ``x Φ(x)``; ``approximate='tanh'`` for the tanh form.

    Examples
    --------
    >>> import tinyattn as ta
    >>> ta.nn.GELU(approximate="tanh")
    GELU(approximate='tanh')
    >>> ta.nn.GELU()(ta.zeros(3)).tolist()
    [0.0, 0.0, 0.0]
    """

    def __init__(self, approximate: str = "none"):
        # set first: Module.__init__ reads kernel_families, which depend on it
        self.approximate = check_choice("GELU", "approximate", approximate, GELU_APPROXIMATIONS)
        super().__init__()

    @property
    def kernel_families(self) -> tuple[str, ...]:
        """The exact form's kernels, or the tanh form's (a family of their own)."""
        return ("gelu",) if self.approximate == "none" else ("gelu_tanh",)

    def forward(self, input: Tensor) -> Tensor:
        return gelu(input, self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class Tanh(Module):
    """Elementwise hyperbolic tangent.

    Examples
    --------
    >>> import tinyattn as ta
    >>> ta.nn.Tanh()(ta.zeros(2)).tolist()
    [0.0, 0.0]
    """

    def forward(self, input: Tensor) -> Tensor:
        return tanh(input)


class Sigmoid(Module):
    """Elementwise logistic sigmoid ``1 / (1 + e^(−x))``.

    Examples
    --------
    >>> import tinyattn as ta
    >>> ta.nn.Sigmoid()(ta.zeros(2)).tolist()
    [0.5, 0.5]
    """

    def forward(self, input: Tensor) -> Tensor:
        return sigmoid(input)


class SiLU(_AcceptsInplace):
    """Sigmoid linear unit (swish) ``x · sigmoid(x)``: :func:`tinyattn.nn.functional.silu`.

    Examples
    --------
    >>> import tinyattn as ta
    >>> [round(v, 4) for v in ta.nn.SiLU()(ta.tensor([-1.0, 0.0, 1.0])).tolist()]
    [-0.2689, 0.0, 0.7311]
    """

    def forward(self, input: Tensor) -> Tensor:
        return silu(input)


def _softmax_dim(layer: str, dim: int | None, ndim: int) -> int:
    """``dim``, or PyTorch's deprecated implicit choice (with its warning) when it is None."""
    if dim is not None:
        return dim
    warnings.warn(f"Implicit dimension choice for {layer} has been deprecated. Change the call "
                  "to include dim=X as an argument.", stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


class _AlongDim(Module):
    """A layer applying ``function(input, dim)``; ``dim=None`` makes PyTorch's deprecated
    implicit choice, with its warning."""

    function: Callable[[Tensor, int], Tensor]

    def __init__(self, dim: int | None = None):
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        dim = _softmax_dim(type(self).__name__, self.dim, getattr(input, "ndim", 0))
        return type(self).function(input, dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmax(_AlongDim):
    """Softmax along ``dim``: non-negative values that sum to 1.

    Examples
    --------
    >>> import tinyattn as ta
    >>> ta.nn.Softmax(dim=-1)(ta.zeros(1, 4)).tolist()
    [[0.25, 0.25, 0.25, 0.25]]
    """

    function = staticmethod(softmax)


class LogSoftmax(_AlongDim):
    """``log(softmax(x))`` along ``dim``, computed without overflow.

    Examples
    --------
    >>> import tinyattn as ta
    >>> [round(v, 4) for v in ta.nn.LogSoftmax(dim=0)(ta.zeros(2)).tolist()]
    [-0.6931, -0.6931]
    """

    function = staticmethod(log_softmax)

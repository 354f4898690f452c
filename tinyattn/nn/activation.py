"""Activation layers: ``GELU`` and ``ReLU``, thin modules over the functional forms."""

from __future__ import annotations

from ..functional import gelu, relu
from ..functional.activation import GELU_APPROXIMATIONS
from ..ops.validate import check_choice
from ..tensor import Tensor
from .module import Module


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
        super().__init__()
        self.approximate = check_choice("GELU", "approximate", approximate, GELU_APPROXIMATIONS)

    def forward(self, input: Tensor) -> Tensor:
        return gelu(input, self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class ReLU(Module):
    """Elementwise ``max(x, 0)``.

    Examples
    --------
    >>> import tinyattn as ta
    >>> ta.nn.ReLU()(ta.tensor([-1.0, 2.0])).tolist()
    [0.0, 2.0]
    """

    def forward(self, input: Tensor) -> Tensor:
        return relu(input)

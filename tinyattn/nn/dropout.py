"""``Dropout``: inverted dropout while training, the identity in evaluation mode."""

from __future__ import annotations

from ..functional import dropout
from ..tensor import Tensor
from ..validation import check_probability
from .module import Module


class Dropout(Module):
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 − p)``.

    Active only while ``self.training`` (see ``Module.train`` / ``Module.eval``).
    ``inplace=True`` is accepted as in PyTorch, but the result is a new tensor.

    Examples
    --------
    >>> import tinyattn as ta
    >>> drop = ta.nn.Dropout(p=0.1)
    >>> drop.eval()(ta.ones(3)).tolist()
    [1.0, 1.0, 1.0]
    """

    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        self.p = check_probability("Dropout", p)
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return dropout(input, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"

"""Loss modules: ``CrossEntropyLoss``, ``NLLLoss`` and ``MSELoss``, thin modules over the
functional forms, with PyTorch's constructor arguments."""

from __future__ import annotations

from ..functional import cross_entropy, mse_loss, nll_loss
from ..tensor import Tensor
from .module import Module


class CrossEntropyLoss(Module):
    """``F.cross_entropy`` with its options fixed at construction.

    Examples
    --------
    >>> import tinyattn as ta, math
    >>> loss = ta.nn.CrossEntropyLoss()(ta.zeros(2, 4), ta.tensor([1, 3]))
    >>> math.isclose(loss.item(), math.log(4), rel_tol=1e-6)
    True
    """

    def __init__(self, weight: Tensor | None = None, ignore_index: int = -100,
                 reduction: str = "mean", label_smoothing: float = 0.0):
        super().__init__()
        self.weight, self.ignore_index = weight, ignore_index
        self.reduction, self.label_smoothing = reduction, label_smoothing

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return cross_entropy(input, target, self.weight, ignore_index=self.ignore_index,
                             reduction=self.reduction, label_smoothing=self.label_smoothing)


class NLLLoss(Module):
    """``F.nll_loss`` with its options fixed at construction."""

    def __init__(self, weight: Tensor | None = None, ignore_index: int = -100,
                 reduction: str = "mean"):
        super().__init__()
        self.weight, self.ignore_index, self.reduction = weight, ignore_index, reduction

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return nll_loss(input, target, self.weight, self.ignore_index, self.reduction)


class MSELoss(Module):
    """``F.mse_loss``: the mean (or sum) of squared differences."""

    def __init__(self, reduction: str = "mean"):
        super().__init__()
        self.reduction = reduction

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return mse_loss(input, target, self.reduction)

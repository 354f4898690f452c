"""Loss modules, thin modules over the functional forms with PyTorch's constructor arguments:
``CrossEntropyLoss``, ``NLLLoss``, ``KLDivLoss``, ``MSELoss``, ``L1Loss``, ``SmoothL1Loss``,
``HuberLoss``, ``BCELoss`` and ``BCEWithLogitsLoss``.

As in PyTorch, the legacy ``size_average``/``reduce`` arguments are mapped to ``reduction`` once,
at construction (with a deprecation warning), and class or element weights are buffers: they
appear in ``state_dict()`` and follow ``.to(dtype)``.
"""

from __future__ import annotations

from ..functional import (
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    cross_entropy,
    huber_loss,
    kl_div,
    l1_loss,
    mse_loss,
    nll_loss,
    smooth_l1_loss,
)
from ..functional.loss import KL_REDUCTIONS, REDUCTIONS, legacy_reduction
from ..tensor import Tensor
from .module import Module


class _Loss(Module):
    """A loss with a ``reduction`` (mapped from the legacy arguments when they are given)."""

    _reductions: tuple[str, ...] = REDUCTIONS

    def __init__(self, size_average: bool | None = None, reduce: bool | None = None,
                 reduction: str = "mean"):
        super().__init__()
        self.reduction = legacy_reduction(type(self).__name__, reduction, size_average, reduce,
                                          self._reductions)


class _WeightedLoss(_Loss):
    """A loss with a ``weight`` buffer (``None`` allowed, as in PyTorch)."""

    def __init__(self, weight: Tensor | None = None, size_average: bool | None = None,
                 reduce: bool | None = None, reduction: str = "mean"):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)


class CrossEntropyLoss(_WeightedLoss):
    """``F.cross_entropy`` with its options fixed at construction.

    Examples
    --------
    >>> import tinyattn as ta, math
    >>> loss = ta.nn.CrossEntropyLoss()(ta.zeros(2, 4), ta.tensor([1, 3]))
    >>> math.isclose(loss.item(), math.log(4), rel_tol=1e-6)
    True
    """

    kernel_families = ("cross_entropy",)

    def __init__(self, weight: Tensor | None = None, size_average: bool | None = None,
                 ignore_index: int = -100, reduce: bool | None = None, reduction: str = "mean",
                 label_smoothing: float = 0.0):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index, self.label_smoothing = ignore_index, label_smoothing

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return cross_entropy(input, target, self.weight, ignore_index=self.ignore_index,
                             reduction=self.reduction, label_smoothing=self.label_smoothing)


class NLLLoss(_WeightedLoss):
    """``F.nll_loss`` with its options fixed at construction."""

    def __init__(self, weight: Tensor | None = None, size_average: bool | None = None,
                 ignore_index: int = -100, reduce: bool | None = None, reduction: str = "mean"):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return nll_loss(input, target, self.weight, ignore_index=self.ignore_index,
                        reduction=self.reduction)


class KLDivLoss(_Loss):
    """``F.kl_div``: pointwise ``t (ln t − x)`` for log-probabilities ``x``.

    Examples
    --------
    >>> import tinyattn as ta, math
    >>> criterion = ta.nn.KLDivLoss(reduction="sum")
    >>> loss = criterion(ta.tensor([[0.25, 0.75]]).log(), ta.tensor([[0.5, 0.5]]))
    >>> math.isclose(loss.item(), 0.5 * math.log(2) + 0.5 * math.log(2 / 3), rel_tol=1e-6)
    True
    """

    _reductions = KL_REDUCTIONS

    def __init__(self, size_average: bool | None = None, reduce: bool | None = None,
                 reduction: str = "mean", log_target: bool = False):
        super().__init__(size_average, reduce, reduction)
        self.log_target = log_target

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class MSELoss(_Loss):
    """``F.mse_loss``: the mean (or sum) of squared differences."""

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    """``F.l1_loss``: the mean (or sum) of absolute differences."""

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return l1_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    """``F.smooth_l1_loss``: quadratic below ``beta``, linear above."""

    def __init__(self, size_average: bool | None = None, reduce: bool | None = None,
                 reduction: str = "mean", beta: float = 1.0):
        super().__init__(size_average, reduce, reduction)
        self.beta = beta

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    """``F.huber_loss``: quadratic below ``delta``, ``delta``-scaled linear above (PyTorch's
    ``HuberLoss`` has no legacy arguments)."""

    def __init__(self, reduction: str = "mean", delta: float = 1.0):
        super().__init__(reduction=reduction)
        self.delta = delta

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class BCELoss(_WeightedLoss):
    """``F.binary_cross_entropy`` of probabilities (logs clamped at −100)."""

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return binary_cross_entropy(input, target, self.weight, reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    """``F.binary_cross_entropy_with_logits``, with ``weight`` and ``pos_weight`` buffers.

    Examples
    --------
    >>> import tinyattn as ta, math
    >>> criterion = ta.nn.BCEWithLogitsLoss(pos_weight=ta.tensor([3.0]))
    >>> loss = criterion(ta.zeros(2, 1), ta.tensor([[1.0], [0.0]]))
    >>> math.isclose(loss.item(), (3 + 1) * math.log(2) / 2, rel_tol=1e-6)
    True
    """

    def __init__(self, weight: Tensor | None = None, size_average: bool | None = None,
                 reduce: bool | None = None, reduction: str = "mean",
                 pos_weight: Tensor | None = None):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return binary_cross_entropy_with_logits(input, target, self.weight,
                                                reduction=self.reduction,
                                                pos_weight=self.pos_weight)


__all__ = [
    "BCELoss", "BCEWithLogitsLoss", "CrossEntropyLoss", "HuberLoss", "KLDivLoss", "L1Loss",
    "MSELoss", "NLLLoss", "SmoothL1Loss",
]

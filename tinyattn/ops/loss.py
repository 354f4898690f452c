"""``CrossEntropy``: softmax and negative log-likelihood fused per row, on the numba row
kernels of :mod:`tinyattn.kernels.cross_entropy` (the softmax is never materialised in the
forward pass).

The logits are rows of ``C`` class scores: ``(N, C)``; ``(C,)`` for one sample;
``(N, C, d1, ...)`` with the class dim moved last.
"""

from __future__ import annotations

import numpy as np

from ..autograd import Context, Function
from ..kernels.cross_entropy import cross_entropy_backward, cross_entropy_forward
from ..tensor import Tensor
from .index import IndexPut, parse_index
from .softmax import softmax


def _rows(logits: np.ndarray) -> np.ndarray:
    """Logits as contiguous (rows, C): the class dim (dim 1, or dim 0 for one sample) last."""
    if logits.ndim == 1:
        return logits.reshape(1, -1)  # (1, C)
    moved = np.moveaxis(logits, 1, -1)  # (N, d1, ..., C)
    return np.ascontiguousarray(moved).reshape(-1, logits.shape[1])  # (N·d1·..., C)


def _row_weights(grad: np.ndarray, reduction: str, count: int, n_rows: int) -> np.ndarray:
    """The upstream gradient of each row's loss: ``g``, ``g`` or ``g / count``."""
    if reduction == "none":
        return grad.reshape(-1)
    if reduction == "sum":
        return np.full(n_rows, grad)
    return np.full(n_rows, grad / count if count else 0.0)


class CrossEntropy(Function):
    """Per row: ``loss = (1 − ε)(lse − x_t) + ε (lse − mean_c x_c)``, ``lse = log Σ_c e^(x_c)``.

    Rows whose target is ``ignore_index`` have loss 0; 'mean' divides the sum by the number
    of other rows. Backward, for ``r`` the upstream gradient of a row's loss (``g``, ``g``, or
    ``g / count`` for 'none', 'sum', 'mean'): ``dx = r (softmax(x) − (1 − ε) onehot(t) − ε/C)``,
    and 0 on ignored rows.
    """

    @staticmethod
    def forward(ctx: Context, logits: np.ndarray, target: np.ndarray, ignore_index: int,
                reduction: str, label_smoothing: float) -> np.ndarray:
        rows = _rows(logits)
        flat_target = target.reshape(-1)
        loss, lse = cross_entropy_forward(rows, flat_target, ignore_index, label_smoothing)
        count = int(np.count_nonzero(flat_target != ignore_index))
        ctx.save_for_backward(logits, flat_target, lse, count, ignore_index, reduction,
                              label_smoothing)
        if reduction == "none":
            return loss.reshape(target.shape)
        total = loss.sum(dtype=np.float64)
        if reduction == "sum":
            return np.asarray(total, dtype=logits.dtype)
        mean = total / count if count else np.nan  # every row ignored: nan, as PyTorch
        return np.asarray(mean, dtype=logits.dtype)

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray]:
        logits, flat_target, lse, count, ignore_index, reduction, label_smoothing = ctx.saved
        rows = _rows(logits)
        grad_rows = np.ascontiguousarray(_row_weights(grad, reduction, count, len(rows)),
                                         dtype=rows.dtype)
        dlogits = cross_entropy_backward(rows, flat_target, lse, grad_rows, ignore_index,
                                         label_smoothing)  # (rows, C)
        if logits.ndim == 1:
            return (dlogits.reshape(logits.shape),)  # (C,)
        moved_shape = (logits.shape[0],) + logits.shape[2:] + (logits.shape[1],)
        return (np.moveaxis(dlogits.reshape(moved_shape), -1, 1),)  # (N, C, d1, ...)

    @staticmethod
    def differentiable_backward(ctx: Context, grad: Tensor) -> tuple[Tensor]:
        (logits,) = ctx.inputs
        _, flat_target, _, count, ignore_index, reduction, smoothing = ctx.saved
        class_dim = 0 if logits.ndim == 1 else 1
        n_classes = logits.shape[class_dim]
        moved = logits.unsqueeze(0) if logits.ndim == 1 else logits.movedim(1, -1)
        probs = softmax(moved.reshape(-1, n_classes), -1)  # (rows, C)
        kept = flat_target != ignore_index
        rows = np.arange(len(flat_target))[kept]
        onehot = np.zeros(probs.shape, probs.dtype)
        onehot[rows, flat_target[kept]] = 1.0 - smoothing
        target_dist = Tensor(onehot + np.where(kept[:, None], smoothing / n_classes, 0.0)
                             .astype(probs.dtype))
        if reduction == "none":
            weights = grad.reshape(-1, 1)
        elif reduction == "sum":
            weights = grad
        else:
            weights = grad / count if count else grad * 0.0
        masked = IndexPut.apply(probs, Tensor(np.zeros((), probs.dtype)),
                                index=parse_index(2, (Tensor(~kept),)), accumulate=False)
        drows = (masked - target_dist) * weights  # (rows, C)
        if logits.ndim == 1:
            return (drows.reshape(logits.shape),)
        return (drows.reshape(moved.shape).movedim(-1, 1),)

"""``CrossEntropy``: softmax and negative log-likelihood fused per row, on the numba row
kernels of :mod:`tinyattn.kernels.cross_entropy` (the softmax is never materialised in the
forward pass).

The logits are rows of ``C`` class scores: ``(N, C)``; ``(C,)`` for one sample;
``(N, C, d1, ...)`` with the class dim moved last.
"""

from __future__ import annotations

import numpy as np

from ..autograd import Context, Function, is_grad_enabled
from ..kernels.cross_entropy import cross_entropy_backward, cross_entropy_forward
from ..tensor import Tensor, from_numpy
from .masking import where
from .notation import factor
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

    named_gradient = True

    @staticmethod
    def forward(ctx: Context, logits: Tensor, target: np.ndarray, ignore_index: int,
                reduction: str, label_smoothing: float) -> Tensor:
        array = logits.numpy()
        flat_target = target.reshape(-1)
        loss, lse = cross_entropy_forward(_rows(array), flat_target, ignore_index,
                                          label_smoothing)
        count = int(np.count_nonzero(flat_target != ignore_index))
        ctx.save_for_backward(logits)
        ctx.flat_target, ctx.lse, ctx.count = flat_target, lse, count
        ctx.ignore_index, ctx.reduction, ctx.label_smoothing = (ignore_index, reduction,
                                                                label_smoothing)
        if reduction == "none":
            return from_numpy(loss.reshape(target.shape))
        total = loss.sum(dtype=np.float64)
        if reduction == "sum":
            return from_numpy(np.asarray(total, dtype=array.dtype))
        mean = total / count if count else np.nan  # every row ignored: nan, as PyTorch
        return from_numpy(np.asarray(mean, dtype=array.dtype))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> tuple[Tensor, None, None, None, None]:
        (logits,) = ctx.saved_tensors
        if not is_grad_enabled():  # fast path: the row kernel, when no graph is being built
            return _backward_kernel(ctx, logits.numpy(), grad.numpy()), None, None, None, None
        class_dim = 0 if logits.ndim == 1 else 1
        n_classes = logits.shape[class_dim]
        moved = logits.unsqueeze(0) if logits.ndim == 1 else logits.movedim(1, -1)
        probs = softmax(moved.reshape(-1, n_classes), -1)  # (rows, C)
        kept = ctx.flat_target != ctx.ignore_index
        target_dist = np.zeros(probs.shape, probs.dtype)
        target_dist[np.flatnonzero(kept), ctx.flat_target[kept]] = 1.0 - ctx.label_smoothing
        target_dist[kept] += ctx.label_smoothing / n_classes
        if ctx.reduction == "none":
            weights = grad.reshape(-1, 1)  # (rows, 1)
        elif ctx.reduction == "sum":
            weights = grad
        else:
            weights = grad / ctx.count if ctx.count else grad * 0.0
        drows = where(from_numpy(kept[:, None]), probs - from_numpy(target_dist), 0.0) * weights
        if logits.ndim == 1:
            return drows.reshape(logits.shape), None, None, None, None  # (C,)
        return drows.reshape(moved.shape).movedim(-1, 1), None, None, None, None  # (N, C, ...)

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        mean = " / N" if node.kwargs.get("reduction") == "mean" else ""
        return f"{factor(g)} · (softmax({x[0]}) − onehot(t)){mean}"


def _backward_kernel(ctx: Context, logits: np.ndarray, grad: np.ndarray) -> Tensor:
    """The rule of :class:`CrossEntropy` on the row kernel."""
    rows = _rows(logits)
    grad_rows = np.ascontiguousarray(_row_weights(grad, ctx.reduction, ctx.count, len(rows)),
                                     dtype=rows.dtype)
    dlogits = cross_entropy_backward(rows, ctx.flat_target, ctx.lse, grad_rows,
                                     ctx.ignore_index, ctx.label_smoothing)  # (rows, C)
    if logits.ndim == 1:
        return from_numpy(dlogits.reshape(logits.shape))  # (C,)
    moved_shape = (logits.shape[0],) + logits.shape[2:] + (logits.shape[1],)
    return from_numpy(np.moveaxis(dlogits.reshape(moved_shape), -1, 1))  # (N, C, d1, ...)

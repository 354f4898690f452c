"""``cross_entropy``: softmax + negative log-likelihood fused, as
``torch.nn.functional.cross_entropy`` with class-index targets.

The logits are laid out as rows of ``C`` class scores (``(N, C)``; ``(C,)`` for one sample;
``(N, C, d1, ...)`` with the class dim moved last), and one call of the fused row kernels of
:mod:`tinyattn.kernels.cross_entropy` computes every row's loss, and in the backward every
row's gradient, without materialising the softmax in the forward pass.
"""

from __future__ import annotations

import numpy as np

from ..autograd import Context, Function
from ..tensor import Tensor

REDUCTIONS = ("mean", "sum", "none")


def _rows(logits: np.ndarray) -> np.ndarray:
    """Logits as contiguous (rows, C): the class dim (dim 1, or dim 0 for one sample) last."""
    if logits.ndim == 1:
        return logits.reshape(1, -1)  # (1, C)
    moved = np.moveaxis(logits, 1, -1)  # (N, d1, ..., C)
    return np.ascontiguousarray(moved).reshape(-1, logits.shape[1])  # (N·d1·..., C)


class CrossEntropy(Function):
    """Per row: ``loss = (1 − ε)(lse − x_t) + ε (lse − mean_c x_c)``, ``lse = log Σ_c e^(x_c)``.

    Rows whose target is ``ignore_index`` have loss 0; 'mean' divides the sum by the number
    of other rows. Backward, for ``r`` the upstream gradient of a row's loss (``g``, ``g``, or
    ``g / count`` for 'none', 'sum', 'mean'): ``dx = r (softmax(x) − (1 − ε) onehot(t) − ε/C)``,
    and 0 on ignored rows.
    """

    @staticmethod
    def forward(
        ctx: Context, logits: np.ndarray, target: np.ndarray, ignore_index: int,
        reduction: str, label_smoothing: float,
    ) -> np.ndarray:
        from ..kernels.cross_entropy import cross_entropy_forward  # numba loads on first use

        rows = _rows(logits)
        flat_target = target.reshape(-1)
        loss, lse = cross_entropy_forward(rows, flat_target, ignore_index, label_smoothing)
        count = int(np.count_nonzero(flat_target != ignore_index))
        ctx.save_for_backward(rows, flat_target, lse, count, logits.shape, ignore_index,
                              reduction, label_smoothing)
        if reduction == "none":
            return loss.reshape(target.shape)
        total = loss.sum(dtype=np.float64)
        if reduction == "sum":
            return np.asarray(total, dtype=logits.dtype)
        mean = total / count if count else np.nan  # every row ignored: nan, as PyTorch
        return np.asarray(mean, dtype=logits.dtype)

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray]:
        from ..kernels.cross_entropy import cross_entropy_backward

        (rows, flat_target, lse, count, logits_shape, ignore_index, reduction,
         label_smoothing) = ctx.saved
        if reduction == "none":
            grad_rows = grad.reshape(-1)
        elif reduction == "sum":
            grad_rows = np.full(len(rows), grad)
        else:
            grad_rows = np.full(len(rows), grad / count if count else 0.0)
        grad_rows = np.ascontiguousarray(grad_rows, dtype=rows.dtype)
        dlogits = cross_entropy_backward(rows, flat_target, lse, grad_rows, ignore_index,
                                         label_smoothing)  # (rows, C)
        if len(logits_shape) == 1:
            return (dlogits.reshape(logits_shape),)  # (C,)
        moved_shape = (logits_shape[0],) + logits_shape[2:] + (logits_shape[1],)
        return (np.moveaxis(dlogits.reshape(moved_shape), -1, 1),)  # (N, C, d1, ...)


def _target_array(target: object, logits_shape: tuple[int, ...]) -> np.ndarray:
    """``target`` as an integer array of the shape that ``logits`` implies, or an error."""
    array = target.data if isinstance(target, Tensor) else np.asarray(target)
    if array.dtype.kind not in "iu":
        raise TypeError(f"cross_entropy: target must hold integer class indices, got dtype "
                        f"{array.dtype} (class-probability targets are not supported)")
    if len(logits_shape) == 1:
        expected = ()
    else:
        expected = (logits_shape[0],) + logits_shape[2:]
    if array.shape != expected:
        raise ValueError(f"cross_entropy: input of shape {logits_shape} needs a target of "
                         f"shape {expected}, got target of shape {array.shape}")
    return array.astype(np.int64, copy=False)


def cross_entropy(
    input: Tensor, target: Tensor, ignore_index: int = -100, reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> Tensor:
    """Cross-entropy between ``softmax(input)`` over the class dim and integer class targets.

    Parameters
    ----------
    input : Tensor, float, shape (N, C), (C,) or (N, C, d1, ...): unnormalised logits
    target : Tensor of integers, shape (N,), () or (N, d1, ...), each in ``[0, C)`` or
        equal to ``ignore_index``
    ignore_index : int, targets with this value add nothing to the loss or the gradient
    reduction : {'mean', 'sum', 'none'}
        'mean' averages over the non-ignored targets (nan when there are none), 'sum' adds
        them, 'none' returns one loss per target.
    label_smoothing : float in [0, 1], mixes the one-hot target with a uniform distribution

    Returns
    -------
    Tensor: a scalar, or the shape of ``target`` when ``reduction='none'``

    Examples
    --------
    >>> import tinyattn as ta, math
    >>> loss = ta.F.cross_entropy(ta.zeros(2, 4), ta.tensor([1, 3]))
    >>> math.isclose(loss.item(), math.log(4), rel_tol=1e-6)
    True
    """
    if not isinstance(input, Tensor) or input.dtype.kind != "f":
        raise TypeError(f"cross_entropy: input must be a float Tensor of logits, got "
                        f"{type(input).__name__} of dtype {getattr(input, 'dtype', None)}")
    if input.ndim == 0 or input.shape[0 if input.ndim == 1 else 1] == 0:
        raise ValueError(f"cross_entropy: input must have shape (N, C), (C,) or "
                         f"(N, C, d1, ...) with C >= 1, got {input.shape}")
    if reduction not in REDUCTIONS:
        raise ValueError(f"cross_entropy: reduction must be 'mean', 'sum' or 'none', got "
                         f"{reduction!r}")
    is_number = isinstance(label_smoothing, (int, float, np.number))
    if isinstance(label_smoothing, bool) or not is_number or not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be a number in [0, 1], got "
                         f"{label_smoothing!r}")
    if isinstance(ignore_index, bool) or not isinstance(ignore_index, (int, np.integer)):
        raise TypeError(f"cross_entropy: ignore_index must be an int, got "
                        f"{type(ignore_index).__name__}")
    array = _target_array(target, input.shape)
    n_classes = input.shape[0 if input.ndim == 1 else 1]
    bad = ((array < 0) | (array >= n_classes)) & (array != ignore_index)
    if bad.any():
        raise IndexError(f"cross_entropy: target value {int(array[bad][0])} is out of range "
                         f"for {n_classes} classes (expected 0 <= target < {n_classes} or "
                         f"target == ignore_index {ignore_index})")
    return CrossEntropy.apply(input, target=array, ignore_index=int(ignore_index),
                              reduction=reduction, label_smoothing=float(label_smoothing))

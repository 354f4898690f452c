"""Losses: ``cross_entropy``, ``nll_loss`` and ``mse_loss``, as in ``torch.nn.functional``.

``cross_entropy`` with integer class targets runs the fused :class:`CrossEntropy` op
(:mod:`tinyattn.ops.loss`); class-probability targets and class weights are composed of
recorded ops (``log_softmax``, ``gather``, sums), as is ``nll_loss``.
"""

from __future__ import annotations

import numpy as np

from ..errors import DTypeError, ShapeError
from ..ops import gather, log_softmax
from ..ops.loss import CrossEntropy
from ..tensor import Tensor, check_float
from ..validation import check_choice, check_int, check_number

REDUCTIONS = ("mean", "sum", "none")


def _class_dim(op: str, input: Tensor) -> int:
    check_float(op, "input", input)
    if input.ndim == 0 or input.shape[0 if input.ndim == 1 else 1] == 0:
        raise ShapeError(f"{op}: input must have shape (N, C), (C,) or (N, C, d1, ...) with "
                           f"C >= 1, got {input.shape}")
    return 0 if input.ndim == 1 else 1


def _class_targets(op: str, target: object, input: Tensor, ignore_index: int) -> np.ndarray:
    """``target`` as int64 class indices of the shape ``input`` implies, checked in range."""
    array = target.numpy() if isinstance(target, Tensor) else np.asarray(target)
    expected = () if input.ndim == 1 else (input.shape[0],) + input.shape[2:]
    if array.shape != expected:
        raise ShapeError(f"{op}: input of shape {input.shape} needs a target of shape "
                           f"{expected}, got target of shape {array.shape}")
    n_classes = input.shape[0 if input.ndim == 1 else 1]
    bad = ((array < 0) | (array >= n_classes)) & (array != ignore_index)
    if bad.any():
        raise IndexError(f"{op}: target value {int(array[bad][0])} is out of range for "
                         f"{n_classes} classes (expected 0 <= target < {n_classes} or target "
                         f"== ignore_index {ignore_index})")
    return array.astype(np.int64, copy=False)


def _reduce(loss: Tensor, reduction: str, denominator: Tensor | float | None = None) -> Tensor:
    if reduction == "none":
        return loss
    total = loss.sum()
    if reduction == "sum":
        return total
    return total / (loss.numel() if denominator is None else denominator)


def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None,
             ignore_index: int = -100, reduction: str = "mean") -> Tensor:
    """Negative log-likelihood of log-probabilities ``input`` at the ``target`` classes.

    ``loss_i = −w[t_i] · input[i, t_i]`` (0 for ignored targets); 'mean' divides the sum by
    ``Σ w[t_i]`` over the kept targets.

    Examples
    --------
    >>> import tinyattn as ta
    >>> ta.F.nll_loss(ta.tensor([[-1.0, -2.0]]), ta.tensor([1])).item()
    2.0
    """
    class_dim = _class_dim("nll_loss", input)
    check_choice("nll_loss", "reduction", reduction, REDUCTIONS)
    ignore_index = check_int("nll_loss", "ignore_index", ignore_index)
    classes = _class_targets("nll_loss", target, input, ignore_index)
    kept = classes != ignore_index
    safe = np.where(kept, classes, 0)
    picked = gather(input, class_dim, Tensor(np.expand_dims(safe, class_dim)))
    picked = picked.squeeze(class_dim)  # (N, d1, ...) or ()
    weights = np.where(kept, 1.0, 0.0).astype(input.dtype)
    if weight is not None:
        check_float("nll_loss", "weight", weight)
        weights = weights * weight.numpy()[safe]
    loss = -picked * Tensor(weights)
    return _reduce(loss, reduction, Tensor(np.asarray(weights.sum(), input.dtype)))


def cross_entropy(
    input: Tensor, target: Tensor, weight: Tensor | None = None, size_average: None = None,
    ignore_index: int = -100, reduce: None = None, reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> Tensor:
    """Cross-entropy between ``softmax(input)`` over the class dim and the targets.

    Parameters
    ----------
    input : Tensor, float, shape (N, C), (C,) or (N, C, d1, ...): unnormalised logits
    target : integer class indices of shape (N,), () or (N, d1, ...), each in ``[0, C)`` or
        equal to ``ignore_index``; or class probabilities of ``input``'s shape
    weight : Tensor (C,), optional class weights (not with ``label_smoothing``)
    ignore_index : int, targets with this value add nothing to the loss or the gradient
    reduction : {'mean', 'sum', 'none'}
        'mean' averages over the non-ignored targets (nan when there are none), 'sum' adds
        them, 'none' returns one loss per target.
    label_smoothing : float in [0, 1], mixes the target with a uniform distribution

    Examples
    --------
    >>> import tinyattn as ta, math
    >>> loss = ta.F.cross_entropy(ta.zeros(2, 4), ta.tensor([1, 3]))
    >>> math.isclose(loss.item(), math.log(4), rel_tol=1e-6)
    True
    """
    if size_average is not None or reduce is not None:
        raise TypeError("cross_entropy: size_average and reduce are deprecated in PyTorch and "
                        "not supported; use reduction=")
    class_dim = _class_dim("cross_entropy", input)
    check_choice("cross_entropy", "reduction", reduction, REDUCTIONS)
    label_smoothing = check_number("cross_entropy", "label_smoothing", label_smoothing, 0.0, 1.0)
    ignore_index = check_int("cross_entropy", "ignore_index", ignore_index)
    target_array = target.numpy() if isinstance(target, Tensor) else np.asarray(target)
    if target_array.dtype.kind == "f":
        return _soft_cross_entropy(input, target, class_dim, weight, reduction, label_smoothing)
    if target_array.dtype.kind not in "iu":
        raise DTypeError(f"cross_entropy: target must hold class indices (integers) or "
                           f"class probabilities (floats), got dtype {target_array.dtype}")
    if weight is not None:
        if label_smoothing:
            raise NotImplementedError("cross_entropy: class weights with label_smoothing are "
                                      "not supported")
        return nll_loss(log_softmax(input, class_dim), target, weight, ignore_index, reduction)
    classes = _class_targets("cross_entropy", target_array, input, ignore_index)
    return CrossEntropy.apply(input, target=classes, ignore_index=ignore_index,
                              reduction=reduction, label_smoothing=label_smoothing)


def _soft_cross_entropy(input: Tensor, target: Tensor, class_dim: int, weight: Tensor | None,
                        reduction: str, label_smoothing: float) -> Tensor:
    """``−Σ_c t_c log softmax(x)_c`` per sample, with ``t = (1 − ε) t + ε / C``."""
    if not isinstance(target, Tensor) or target.shape != input.shape:
        raise ShapeError(f"cross_entropy: class-probability targets must have the input's "
                           f"shape {input.shape}, got {getattr(target, 'shape', None)}")
    n_classes = input.shape[class_dim]
    probs = target.to(input.dtype)
    if label_smoothing:
        probs = probs * (1 - label_smoothing) + label_smoothing / n_classes
    terms = log_softmax(input, class_dim) * probs
    if weight is not None:
        check_float("cross_entropy", "weight", weight)
        shape = [1] * input.ndim
        shape[class_dim] = n_classes
        terms = terms * weight.reshape(shape)
    loss = -terms.sum(class_dim)
    return _reduce(loss, reduction)


def mse_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """Mean squared error ``(input − target)²`` reduced as ``reduction`` says."""
    check_choice("mse_loss", "reduction", reduction, REDUCTIONS)
    diff = input - target
    return _reduce(diff * diff, reduction)


__all__ = ["cross_entropy", "mse_loss", "nll_loss"]

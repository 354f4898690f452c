"""Fused softmax + cross-entropy over rows of logits, forward and backward.

For a row ``x`` of ``C`` logits with target class ``t`` and label smoothing ``ε``
(``torch.nn.functional.cross_entropy(..., reduction='none')`` semantics)::

    m = max x,   lse = m + log Σ e^(x − m)
    loss = (1 − ε) · (lse − x_t) + ε · (lse − mean_c x_c)
    dloss/dx = softmax(x) − (1 − ε) · onehot(t) − ε / C

Rows whose target equals ``ignore_index`` get loss 0 and gradient 0. The softmax is never
materialised in the forward pass: each row is visited once, by one thread (the max loop pulls
the row into cache, the exp-sum loop reads it from there). Differences such as ``m − x_t`` are
formed before anything is added to ``m``, and sums accumulate in float64, so logits of ±1e4 or
near the float32 maximum give the same finite losses and gradients as PyTorch.
"""

from __future__ import annotations

import math

import numpy as np
from numba import prange

from .parallel import parallel_kernel


@parallel_kernel
def _cross_entropy_forward_kernel(logits, target, ignore_index, label_smoothing, loss, lse):
    n_rows, n_classes = logits.shape
    for i in prange(n_rows):
        row_max = logits[i, 0]
        for c in range(1, n_classes):
            row_max = max(row_max, logits[i, c])
        sum_exp = 0.0
        sum_logits = 0.0
        for c in range(n_classes):
            sum_exp += math.exp(logits[i, c] - row_max)
            sum_logits += logits[i, c]
        log_sum_exp = math.log(sum_exp)
        lse[i] = row_max + log_sum_exp
        if target[i] == ignore_index:
            loss[i] = 0.0
            continue
        # lse − x_t and lse − mean x, each computed relative to the row max.
        nll = log_sum_exp + (np.float64(row_max) - np.float64(logits[i, target[i]]))
        smooth = log_sum_exp + (np.float64(row_max) - sum_logits / n_classes)
        if label_smoothing == 0.0:
            loss[i] = nll
        else:
            loss[i] = (1.0 - label_smoothing) * nll + label_smoothing * smooth


@parallel_kernel
def _cross_entropy_backward_kernel(logits, target, grad_rows, ignore_index, label_smoothing,
                                   dlogits):
    n_rows, n_classes = logits.shape
    for i in prange(n_rows):
        if target[i] == ignore_index:
            for c in range(n_classes):
                dlogits[i, c] = 0.0
            continue
        # The softmax is recomputed from the row max rather than as exp(x − lse): lse has
        # been rounded to the dtype, which would shift every probability by up to half an
        # ulp of lse (a relative 5e-4 for float32 logits around 1e4).
        row_max = logits[i, 0]
        for c in range(1, n_classes):
            row_max = max(row_max, logits[i, c])
        sum_exp = 0.0
        for c in range(n_classes):
            dlogits[i, c] = math.exp(logits[i, c] - row_max)
            sum_exp += dlogits[i, c]
        scale = grad_rows[i] / sum_exp
        uniform = grad_rows[i] * label_smoothing / n_classes
        for c in range(n_classes):
            dlogits[i, c] = dlogits[i, c] * scale - uniform
        dlogits[i, target[i]] -= grad_rows[i] * (1.0 - label_smoothing)


def _check_logits(name: str, logits: np.ndarray) -> None:
    if not isinstance(logits, np.ndarray) or logits.dtype not in (np.float32, np.float64):
        raise TypeError(f"{name}: logits must be a float32 or float64 ndarray, got "
                        f"{type(logits).__name__} of dtype {getattr(logits, 'dtype', None)}")
    if logits.ndim != 2 or logits.shape[1] == 0:
        raise ValueError(f"{name}: logits must have shape (N, C) with C >= 1, got "
                         f"{logits.shape}")


def _check_target(name: str, target: np.ndarray, n_rows: int, n_classes: int,
                  ignore_index: int) -> np.ndarray:
    """Validate ``target`` and return it as a contiguous int64 array."""
    if not isinstance(target, np.ndarray) or not np.issubdtype(target.dtype, np.integer):
        raise TypeError(f"{name}: target must be an integer ndarray of class indices, got "
                        f"{type(target).__name__} of dtype {getattr(target, 'dtype', None)}")
    if target.shape != (n_rows,):
        raise ValueError(f"{name}: target must have shape ({n_rows},) to match logits, got "
                         f"{target.shape}")
    bad = (target < 0) | (target >= n_classes)
    bad &= target != ignore_index
    if bad.any():
        raise IndexError(f"{name}: target value {int(target[bad][0])} is out of range for "
                         f"{n_classes} classes (expected 0 <= t < {n_classes} or "
                         f"t == ignore_index {ignore_index})")
    return np.ascontiguousarray(target, dtype=np.int64)


def _check_smoothing(name: str, label_smoothing: float) -> float:
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"{name}: label_smoothing must be in [0, 1], got {label_smoothing}")
    return float(label_smoothing)


def cross_entropy_forward(
    logits: np.ndarray, target: np.ndarray, ignore_index: int = -100,
    label_smoothing: float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Per-row cross-entropy of ``softmax(logits)`` against integer ``target``.

    ``loss = (1 − ε)(lse − x_t) + ε (lse − mean_c x_c)``, 0 where ``t == ignore_index``.

    Parameters
    ----------
    logits : ndarray, shape (N, C), float32 or float64
    target : integer ndarray, shape (N,), ``0 <= t < C`` or ``t == ignore_index``
    ignore_index : int
    label_smoothing : float in [0, 1]

    Returns
    -------
    loss_per_row : ndarray, shape (N,), dtype of ``logits``
    lse : ndarray, shape (N,), ``log Σ_c exp(x_c)`` of each row (ignored rows included)

    Examples
    --------
    >>> loss, lse = cross_entropy_forward(np.zeros((1, 4)), np.array([2]))
    >>> round(float(loss[0]), 6) == round(float(np.log(4)), 6)
    True
    """
    name = "cross_entropy_forward"
    _check_logits(name, logits)
    n_rows, n_classes = logits.shape
    target = _check_target(name, target, n_rows, n_classes, ignore_index)
    label_smoothing = _check_smoothing(name, label_smoothing)
    loss = np.empty(n_rows, dtype=logits.dtype)
    lse = np.empty(n_rows, dtype=logits.dtype)
    _cross_entropy_forward_kernel(np.ascontiguousarray(logits), target, int(ignore_index),
                                  label_smoothing, loss, lse)
    return loss, lse


def cross_entropy_backward(
    logits: np.ndarray, target: np.ndarray, lse: np.ndarray, grad_rows: np.ndarray,
    ignore_index: int = -100, label_smoothing: float = 0.0,
) -> np.ndarray:
    """Gradient of the per-row losses of :func:`cross_entropy_forward` w.r.t. ``logits``.

    ``dlogits = g · (softmax(x) − (1 − ε) · onehot(t) − ε / C)`` per row, 0 on ignored rows,
    where ``g = grad_rows`` is the upstream gradient of each row's loss.

    Parameters
    ----------
    logits, target, ignore_index, label_smoothing : as for :func:`cross_entropy_forward`
    lse : ndarray, shape (N,), as returned by :func:`cross_entropy_forward`. It is checked
        but the kernel recomputes each row's normaliser from the row max, which stays exact
        where ``lse`` itself has been rounded (see the kernel).
    grad_rows : ndarray, shape (N,), dtype of ``logits``

    Returns
    -------
    dlogits : ndarray, shape (N, C)
    """
    name = "cross_entropy_backward"
    _check_logits(name, logits)
    n_rows, n_classes = logits.shape
    target = _check_target(name, target, n_rows, n_classes, ignore_index)
    label_smoothing = _check_smoothing(name, label_smoothing)
    for label, array in (("lse", lse), ("grad_rows", grad_rows)):
        if not isinstance(array, np.ndarray) or array.shape != (n_rows,):
            raise ValueError(f"{name}: {label} must have shape ({n_rows},), got "
                             f"{getattr(array, 'shape', type(array).__name__)}")
    if grad_rows.dtype != logits.dtype:
        raise TypeError(f"{name}: grad_rows has dtype {grad_rows.dtype}, expected "
                        f"{logits.dtype} like logits")
    dlogits = np.empty_like(logits)
    _cross_entropy_backward_kernel(np.ascontiguousarray(logits), target,
                                   np.ascontiguousarray(grad_rows), int(ignore_index),
                                   label_smoothing, dlogits)
    return dlogits


def cross_entropy_forward_numpy(
    logits: np.ndarray, target: np.ndarray, ignore_index: int = -100,
    label_smoothing: float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Plain-numpy twin of :func:`cross_entropy_forward` (the test oracle)."""
    n_rows, n_classes = logits.shape
    x64 = logits.astype(np.float64)
    row_max = x64.max(axis=1)
    log_sum_exp = np.log(np.exp(x64 - row_max[:, None]).sum(axis=1))
    kept = target != ignore_index
    safe_target = np.where(kept, target, 0)
    nll = log_sum_exp + (row_max - x64[np.arange(n_rows), safe_target])
    smooth = log_sum_exp + (row_max - x64.mean(axis=1))
    loss = (1.0 - label_smoothing) * nll + label_smoothing * smooth
    loss = np.where(kept, loss, 0.0)
    return loss.astype(logits.dtype), (row_max + log_sum_exp).astype(logits.dtype)


def cross_entropy_backward_numpy(
    logits: np.ndarray, target: np.ndarray, lse: np.ndarray, grad_rows: np.ndarray,
    ignore_index: int = -100, label_smoothing: float = 0.0,
) -> np.ndarray:
    """Plain-numpy twin of :func:`cross_entropy_backward` (the test oracle)."""
    n_rows, n_classes = logits.shape
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    softmax = shifted / shifted.sum(axis=1, keepdims=True, dtype=np.float64)
    kept = target != ignore_index
    onehot = np.zeros_like(softmax)
    onehot[np.arange(n_rows)[kept], target[kept]] = 1.0
    dlogits = softmax - (1.0 - label_smoothing) * onehot - label_smoothing / n_classes
    dlogits *= np.where(kept, grad_rows, 0.0)[:, None]
    return dlogits.astype(logits.dtype)

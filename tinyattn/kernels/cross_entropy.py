"""Fused softmax + cross-entropy over rows of logits, forward and backward.

For a row ``x`` of ``C`` logits with target class ``t`` and label smoothing ``ε``
(``torch.nn.functional.cross_entropy(..., reduction='none')`` semantics)::

    m = max x,   lse = m + log Σ e^(x − m)
    loss = (1 − ε) · (lse − x_t) + ε · (lse − mean_c x_c)
    dloss/dx = softmax(x) − (1 − ε) · onehot(t) − ε / C

Rows whose target equals ``ignore_index`` get loss 0 and gradient 0. The softmax is never
materialised in the forward pass: each row is visited once, by one thread (the max loop pulls
the row into cache, the exp-sum loop reads it from there). Differences such as ``m − x_t`` are
formed before anything is added to ``m``, and sums accumulate in float64 (in vector lanes:
:mod:`~tinyattn.kernels.reductions`), so logits of ±1e4 or near the float32 maximum give the
same finite losses and gradients as PyTorch. The exponentials are :func:`.exp.fast_exp`.
"""

from __future__ import annotations

import math

import numpy as np

from . import FLOAT_DTYPES
from .compiled_only import compiled_only
from .exp import fast_exp
from .inline import always_inline
from .parallel import chunk_bounds, row_chunks, run_tasks
from .reductions import row_maximum, row_sum


@compiled_only
def _shifted_exp(row, c, shift):
    """``e^(row[c] − shift)``: a function of its own so that, inlined by LLVM into
    :func:`_shifted_exp_sum`, it keeps its own flags (the sum's ``reassoc`` does not reach the
    exponential's polynomial)."""
    always_inline()
    return fast_exp(row[c] - shift)


@compiled_only(fastmath={"reassoc"})
def _shifted_exp_sum(row, shift):
    """``Σ_c e^(row[c] − shift)`` in float64, in vector lanes like the sums of
    :mod:`~tinyattn.kernels.reductions` (the exponentials themselves are not reassociated)."""
    always_inline()
    total = np.float64(0.0)  # float64 also when run as Python (NUMBA_DISABLE_JIT=1)
    for c in range(row.size):
        total += _shifted_exp(row, c, shift)
    return total


@compiled_only(error_model="numpy")
def _cross_entropy_forward_chunk(logits, target, ignore_index, label_smoothing, loss, lse,
                                 n_chunks, chunk):
    """Rows of chunk ``chunk`` (of ``n_chunks`` near-equal chunks)."""
    n_rows, n_classes = logits.shape
    start, stop = chunk_bounds(chunk, n_chunks, n_rows)
    for i in range(start, stop):
        row_max = row_maximum(logits[i])
        log_sum_exp = math.log(_shifted_exp_sum(logits[i], row_max))
        lse[i] = row_max + log_sum_exp
        if target[i] == ignore_index:
            loss[i] = 0.0
            continue
        # lse − x_t and lse − mean x, each computed relative to the row max.
        nll = log_sum_exp + (np.float64(row_max) - np.float64(logits[i, target[i]]))
        if label_smoothing == 0.0:
            loss[i] = nll
        else:  # mean x is needed only here: no pass over the row without smoothing
            smooth = log_sum_exp + (np.float64(row_max) - row_sum(logits[i]) / n_classes)
            loss[i] = (1.0 - label_smoothing) * nll + label_smoothing * smooth


@compiled_only(error_model="numpy")
def _cross_entropy_backward_chunk(logits, target, grad_rows, ignore_index, label_smoothing,
                                  dlogits, n_chunks, chunk):
    """Rows of chunk ``chunk`` (of ``n_chunks`` near-equal chunks)."""
    n_rows, n_classes = logits.shape
    start, stop = chunk_bounds(chunk, n_chunks, n_rows)
    for i in range(start, stop):
        if target[i] == ignore_index:
            for c in range(n_classes):
                dlogits[i, c] = 0.0
            continue
        # The softmax is recomputed from the row max rather than as exp(x − lse): lse has
        # been rounded to the dtype, which would shift every probability by up to half an
        # ulp of lse (a relative 5e-4 for float32 logits around 1e4).
        row_max = row_maximum(logits[i])
        for c in range(n_classes):
            dlogits[i, c] = fast_exp(logits[i, c] - row_max)
        scale = grad_rows[i] / row_sum(dlogits[i])
        uniform = grad_rows[i] * label_smoothing / n_classes
        for c in range(n_classes):
            dlogits[i, c] = dlogits[i, c] * scale - uniform
        dlogits[i, target[i]] -= grad_rows[i] * (1.0 - label_smoothing)


def _target_indices(logits: np.ndarray, target: np.ndarray, ignore_index: int,
                    label_smoothing: float) -> np.ndarray:
    """``target`` as a contiguous int64 array, once the arguments of both kernels are known to
    hold: in particular each target indexes a class of its row (or equals ``ignore_index``),
    since the kernels read ``logits[i, target[i]]`` unchecked."""
    assert logits.dtype in FLOAT_DTYPES and logits.ndim == 2 and logits.shape[1] >= 1, (
        f"float32 or float64 (N, C), C >= 1 expected, got {logits.dtype} {logits.shape}")
    n_rows, n_classes = logits.shape
    assert np.issubdtype(target.dtype, np.integer) and target.shape == (n_rows,), (
        target.dtype, target.shape, n_rows)
    assert (((target >= 0) & (target < n_classes)) | (target == ignore_index)).all(), (
        f"target out of range for {n_classes} classes")
    assert 0.0 <= label_smoothing <= 1.0, label_smoothing
    return np.ascontiguousarray(target, dtype=np.int64)


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
    target = _target_indices(logits, target, ignore_index, label_smoothing)
    loss = np.empty(len(logits), dtype=logits.dtype)
    lse = np.empty(len(logits), dtype=logits.dtype)
    n_chunks = row_chunks(len(logits), parallel=True)
    run_tasks(_cross_entropy_forward_chunk, n_chunks, np.ascontiguousarray(logits), target,
              int(ignore_index), float(label_smoothing), loss, lse, n_chunks, parallel=True)
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
    lse : ndarray, shape (N,), as returned by :func:`cross_entropy_forward`. Unused by the
        kernel, which recomputes each row's normaliser from the row max: that stays exact where
        ``lse`` itself has been rounded (see the kernel).
    grad_rows : ndarray, shape (N,), dtype of ``logits``

    Returns
    -------
    dlogits : ndarray, shape (N, C)
    """
    target = _target_indices(logits, target, ignore_index, label_smoothing)
    assert lse.shape == grad_rows.shape == (len(logits),), (lse.shape, grad_rows.shape)
    assert grad_rows.dtype == logits.dtype, (grad_rows.dtype, logits.dtype)
    dlogits = np.empty_like(logits)
    n_chunks = row_chunks(len(logits), parallel=True)
    run_tasks(_cross_entropy_backward_chunk, n_chunks, np.ascontiguousarray(logits), target,
              np.ascontiguousarray(grad_rows), int(ignore_index), float(label_smoothing),
              dlogits, n_chunks, parallel=True)
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

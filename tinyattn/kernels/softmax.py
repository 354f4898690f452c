"""Softmax and log-softmax along the last axis, forward and backward.

For a row ``x`` with ``m = max x`` (the shift keeps ``e^(x−m) <= 1``, so huge logits such as
±1e4 or ±3e38 stay finite)::

    softmax:      y = e^(x−m) / Σ e^(x−m)             dx = y ⊙ (g − Σ g ⊙ y)
    log_softmax:  y = x − m − log Σ e^(x−m)           dx = g − e^y · Σ g

A row that is entirely ``-inf`` (a fully masked row) has no defined softmax; here its softmax
is all zeros and its gradient zero (PyTorch returns NaN), and its log-softmax is ``-inf``
everywhere with a zero gradient (PyTorch returns NaN for both). A NaN anywhere in a row makes
the whole row NaN, as in PyTorch.

The kernels run in parallel over rows when the input has at least
``_PARALLEL_MIN_ELEMENTS`` elements and serially below that, where waking the thread pool would
cost more than the work (each row is independent, so the result does not depend on the path or
the thread count). Row sums accumulate in float64, in vector lanes
(:mod:`~tinyattn.kernels.reductions`); everything else stays in the input dtype.
The exponentials are :func:`.exp.fast_exp` (a polynomial the compiler vectorises).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from . import FLOAT_DTYPES
from .compiled_only import compiled_only
from .exp import fast_exp
from .inline import always_inline
from .parallel import chunk_bounds, row_chunks, run_tasks
from .reductions import row_dot, row_maximum, row_sum

_PARALLEL_MIN_ELEMENTS = 32768  # below this a serial pass beats waking the thread pool


@compiled_only
def _row_max(row):
    """``(max row, NaN ignored; whether the row is fully masked)``: all ``-inf`` and no NaN."""
    always_inline()
    m = row_maximum(row)
    has_nan = False
    for j in range(row.size):
        has_nan |= row[j] != row[j]
    return m, m == -np.inf and not has_nan


@compiled_only
def _exp_shifted_row(x_row, y_row, m):
    """Write ``e^(x_row − m)`` into ``y_row`` and return its sum, accumulated in float64."""
    always_inline()
    for j in range(x_row.size):
        y_row[j] = fast_exp(x_row[j] - m)
    return row_sum(y_row)


@compiled_only(error_model="numpy")
def _softmax_row(x_row, y_row):
    """``y_row = softmax(x_row)``; zeros for a fully masked row (``e^(−inf − 0)`` scaled by 0)."""
    always_inline()
    dtype = x_row.dtype.type
    m, masked = _row_max(x_row)
    total = _exp_shifted_row(x_row, y_row, dtype(0.0) if masked else dtype(m))
    inv_total = dtype(0.0) if masked else dtype(1.0 / total)
    for j in range(y_row.size):
        y_row[j] *= inv_total


@compiled_only(error_model="numpy")
def _log_softmax_row(x_row, y_row):
    """``y_row = log_softmax(x_row)``; ``-inf`` for a fully masked row (``−inf − 0 − 0``)."""
    always_inline()
    dtype = x_row.dtype.type
    m, masked = _row_max(x_row)
    shift = dtype(0.0) if masked else dtype(m)
    # y_row holds the shifted exponentials until it is overwritten below
    total = _exp_shifted_row(x_row, y_row, shift)
    log_total = dtype(0.0) if masked else dtype(math.log(total))
    for j in range(y_row.size):
        y_row[j] = (x_row[j] - shift) - log_total  # shift first: m + log(total) would round away


@compiled_only(error_model="numpy")
def _log_softmax_backward_row(y_row, grad_row, dx_row):
    """``dx_row = g − e^y Σ g``; zeros for a fully masked row."""
    always_inline()
    dtype = y_row.dtype.type
    masked = _row_max(y_row)[1]
    grad_sum = dtype(row_sum(grad_row))
    for j in range(dx_row.size):
        dx_row[j] = dtype(0.0) if masked else grad_row[j] - fast_exp(y_row[j]) * grad_sum


# The row helpers, which LLVM inlines into the tasks, tell a fully masked row from any other by
# scalars only and run the same loops over it either way: each view of a row then ends at one
# point, and numba's reference-count pruning removes its increment and decrement. A branch
# between two sets of loops left them in every row: atomic operations on the count of the
# whole array, which both threads share (the forward of (16384, 16) took 3.2 ms on 2 threads
# against 0.6 ms on 1).
@compiled_only(error_model="numpy")
def _softmax_forward_chunk(x, y, n_chunks, chunk):
    """Rows of chunk ``chunk`` (of ``n_chunks`` near-equal chunks)."""
    start, stop = chunk_bounds(chunk, n_chunks, x.shape[0])
    for i in range(start, stop):
        _softmax_row(x[i], y[i])


@compiled_only(error_model="numpy")
def _softmax_backward_chunk(y, grad, dx, n_chunks, chunk):
    """Rows of chunk ``chunk`` (of ``n_chunks`` near-equal chunks)."""
    start, stop = chunk_bounds(chunk, n_chunks, y.shape[0])
    for i in range(start, stop):
        dot = y.dtype.type(row_dot(grad[i], y[i]))
        for j in range(y.shape[1]):
            dx[i, j] = y[i, j] * (grad[i, j] - dot)


@compiled_only(error_model="numpy")
def _log_softmax_forward_chunk(x, y, n_chunks, chunk):
    """Rows of chunk ``chunk`` (of ``n_chunks`` near-equal chunks)."""
    start, stop = chunk_bounds(chunk, n_chunks, x.shape[0])
    for i in range(start, stop):
        _log_softmax_row(x[i], y[i])


@compiled_only(error_model="numpy")
def _log_softmax_backward_chunk(y, grad, dx, n_chunks, chunk):
    """Rows of chunk ``chunk`` (of ``n_chunks`` near-equal chunks)."""
    start, stop = chunk_bounds(chunk, n_chunks, y.shape[0])
    for i in range(start, stop):
        _log_softmax_backward_row(y[i], grad[i], dx[i])


def _parallel(rows: np.ndarray) -> bool:
    """Whether ``rows`` is worth spreading over threads (several rows and enough elements)."""
    return rows.shape[0] > 1 and rows.size >= _PARALLEL_MIN_ELEMENTS


def _as_rows(x: np.ndarray) -> np.ndarray:
    """``x`` (float32 or float64, ndim >= 1) as contiguous 2-D rows (N, C)."""
    assert x.dtype in FLOAT_DTYPES and x.ndim >= 1, (
        f"float32 or float64, ndim >= 1 expected, got {x.dtype} {x.shape}")
    n_cols = x.shape[-1]
    return np.ascontiguousarray(x).reshape(x.size // n_cols if n_cols else 0, n_cols)


def _forward(task: Any, x: np.ndarray) -> np.ndarray:
    """Run a forward task over the rows of ``x``; the result has the shape of ``x``."""
    rows = _as_rows(x)
    y = np.empty_like(rows)
    parallel = _parallel(rows)
    n_chunks = row_chunks(rows.shape[0], parallel)
    run_tasks(task, n_chunks, rows, y, n_chunks, parallel=parallel)
    return y.reshape(x.shape)


def _backward(task: Any, y: np.ndarray, grad: np.ndarray) -> np.ndarray:
    """Run a backward task over the rows of the output ``y`` and its gradient (same shape and
    dtype)."""
    assert y.shape == grad.shape and y.dtype == grad.dtype, (y.shape, y.dtype, grad.dtype)
    y_rows = _as_rows(y)
    dx = np.empty_like(y_rows)
    parallel = _parallel(y_rows)
    n_chunks = row_chunks(y_rows.shape[0], parallel)
    run_tasks(task, n_chunks, y_rows, _as_rows(grad), dx, n_chunks, parallel=parallel)
    return dx.reshape(y.shape)


def softmax_forward(x: np.ndarray) -> np.ndarray:
    """Softmax along the last axis: ``y = e^(x−max) / Σ e^(x−max)``; all ``-inf`` rows → 0.

    Examples
    --------
    >>> softmax_forward(np.array([[0.0, np.log(3.0)], [-np.inf, -np.inf]])).round(6)
    array([[0.25, 0.75],
           [0.  , 0.  ]])
    """
    return _forward(_softmax_forward_chunk, x)


def softmax_backward(y: np.ndarray, grad: np.ndarray) -> np.ndarray:
    """Gradient of softmax from its output ``y``: ``dx = y ⊙ (g − Σ g ⊙ y)`` per row."""
    return _backward(_softmax_backward_chunk, y, grad)


def log_softmax_forward(x: np.ndarray) -> np.ndarray:
    """Log-softmax along the last axis: ``y = x − max − log Σ e^(x−max)``; all ``-inf`` → ``-inf``.

    Examples
    --------
    >>> np.exp(log_softmax_forward(np.array([0.0, np.log(3.0)]))).round(6)
    array([0.25, 0.75])
    """
    return _forward(_log_softmax_forward_chunk, x)


def log_softmax_backward(y: np.ndarray, grad: np.ndarray) -> np.ndarray:
    """Gradient of log-softmax from its output: ``dx = g − e^y Σ g``; all ``-inf`` rows → 0."""
    return _backward(_log_softmax_backward_chunk, y, grad)


def softmax_forward_numpy(x: np.ndarray) -> np.ndarray:
    """Plain-numpy twin of :func:`softmax_forward`."""
    m = np.max(x, axis=-1, keepdims=True) if x.shape[-1] else np.zeros(x.shape[:-1] + (1,))
    masked = np.isneginf(m)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        shifted = np.exp(x - np.where(masked, 0, m).astype(x.dtype))
        total = shifted.sum(axis=-1, keepdims=True, dtype=np.float64)
        y = (shifted / total.astype(x.dtype)).astype(x.dtype)
    return np.where(masked, x.dtype.type(0), y)


def softmax_backward_numpy(y: np.ndarray, grad: np.ndarray) -> np.ndarray:
    """Plain-numpy twin of :func:`softmax_backward`."""
    return y * (grad - (grad * y).sum(axis=-1, keepdims=True))


def log_softmax_forward_numpy(x: np.ndarray) -> np.ndarray:
    """Plain-numpy twin of :func:`log_softmax_forward`."""
    m = np.max(x, axis=-1, keepdims=True) if x.shape[-1] else np.zeros(x.shape[:-1] + (1,))
    masked = np.isneginf(m)
    safe_m = np.where(masked, 0, m).astype(x.dtype)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        total = np.exp(x - safe_m).sum(axis=-1, keepdims=True, dtype=np.float64)
        log_total = np.log(total).astype(x.dtype)
        return np.where(masked, x.dtype.type(-np.inf), (x - safe_m) - log_total)


def log_softmax_backward_numpy(y: np.ndarray, grad: np.ndarray) -> np.ndarray:
    """Plain-numpy twin of :func:`log_softmax_backward`."""
    dx = grad - np.exp(y) * grad.sum(axis=-1, keepdims=True)
    masked = np.all(np.isneginf(y), axis=-1, keepdims=True) & (y.shape[-1] > 0)
    return np.where(masked, y.dtype.type(0), dx)

"""Layer normalisation over the last axis of a 2-D array of rows, forward and backward.

For a row ``x`` of ``C`` features (``torch.nn.functional.layer_norm`` semantics)::

    mean = Σ x / C,   var = Σ (x − mean)² / C   (biased),   rstd = 1 / sqrt(var + eps)
    x̂ = (x − mean) · rstd,   y = x̂ ⊙ w + b

and for an upstream gradient ``g`` of ``y``, with ``ĝ = g ⊙ w``::

    dx = rstd · (ĝ − mean(ĝ) − x̂ · mean(ĝ ⊙ x̂)),   dw = Σ_rows g ⊙ x̂,   db = Σ_rows g

The kernels run in parallel over rows (serially below ``_PARALLEL_MIN_ELEMENTS`` elements).
The row statistics accumulate in float64 whatever the input dtype, in vector lanes
(:mod:`~tinyattn.kernels.reductions`); everything else is computed in the input dtype.
``dw``/``db`` are sums over rows: the rows are split into a fixed number of chunks that depends
only on ``N`` (never on the number of threads or the path), each chunk sums its rows in order,
and the partials are added in chunk order, so the result is bitwise the same run to run and for
any thread count.
"""

from __future__ import annotations

import functools

import numpy as np

from . import FLOAT_DTYPES
from .aligned import aligned_empty_like
from .compiled_only import compiled_only
from .inline import always_inline
from .parallel import chunk_bounds, row_chunks, run_tasks
from .reductions import row_squared_deviations, row_sum

# Upper bound on the number of row chunks whose partial dw/db sums are reduced in a fixed
# order. It only needs to exceed the thread count of a laptop for good load balance.
_MAX_ROW_CHUNKS = 32

# Arrays of fewer elements run serially: waking the second thread costs more than it saves.
# On the AMD EPYC of benchmarks/README.md (``bench_thresholds.py``, four runs, 2 threads,
# float32 rows of 128) two threads took 1.09–1.32× the serial time forward and 0.99–1.73×
# backward up to 8192 elements (64 tokens of a small GPT), 0.93–1.20× and 0.91–1.28× at 16384,
# 0.78–0.94× and 0.81–1.08× at 32768, 0.62–0.86× at 98304 (a training batch of 768 tokens).
_PARALLEL_MIN_ELEMENTS = 32768


@compiled_only(error_model="numpy")
def _layer_norm_forward_chunk(x, weight, bias, eps, y, mean, rstd, n_chunks, chunk):
    """Chunk ``chunk`` of the rows (of ``n_chunks`` near-equal chunks): their ``y``, ``mean``
    and ``rstd``."""
    n_rows, n_cols = x.shape
    start, stop = chunk_bounds(chunk, n_chunks, n_rows)
    for i in range(start, stop):
        row_mean = row_sum(x[i]) / n_cols
        mean[i] = row_mean
        rstd[i] = 1.0 / np.sqrt(row_squared_deviations(x[i], row_mean) / n_cols + eps)
        # mean[i] and rstd[i] now hold the statistics rounded to the input dtype.
        mu = mean[i]
        inv_std = rstd[i]
        for j in range(n_cols):
            y[i, j] = (x[i, j] - mu) * inv_std * weight[j] + bias[j]


@compiled_only
def _gradient_terms(grad_row, x_row, weight, j, mu, inv_std):
    """``ĝ = g w`` and ``ĝ x̂`` at column ``j``, in the input dtype (rounded as written)."""
    always_inline()
    g_hat = grad_row[j] * weight[j]
    return g_hat, g_hat * ((x_row[j] - mu) * inv_std)


@compiled_only(fastmath={"reassoc"})
def _gradient_sums(grad_row, x_row, weight, mu, inv_std):
    """``Σ_j ĝ`` and ``Σ_j ĝ x̂`` of a row, in float64; reassociated like the sums of
    :mod:`~tinyattn.kernels.reductions` (the terms themselves are not: they come from
    :func:`_gradient_terms`, which keeps its own flags when LLVM inlines it)."""
    always_inline()
    sum_g = np.float64(0.0)  # float64 also when run as Python (NUMBA_DISABLE_JIT=1)
    sum_g_xhat = np.float64(0.0)
    for j in range(x_row.size):
        g_hat, g_hat_x_hat = _gradient_terms(grad_row, x_row, weight, j, mu, inv_std)
        sum_g += g_hat
        sum_g_xhat += g_hat_x_hat
    return sum_g, sum_g_xhat


@compiled_only
def _layer_norm_backward_chunk(grad, x, weight, mean, rstd, n_chunks, dx, row_means,
                               dweight_parts, dbias_parts, chunk):
    """Chunk ``chunk`` of the rows: their ``dx``, and their sums of ``dw``, ``db`` into row
    ``chunk`` of ``dweight_parts``, ``dbias_parts``."""
    n_rows, n_cols = x.shape
    start, stop = chunk_bounds(chunk, n_chunks, n_rows)
    for i in range(start, stop):
        mu = mean[i]
        inv_std = rstd[i]
        sum_g, sum_g_xhat = _gradient_sums(grad[i], x[i], weight, mu, inv_std)
        # row_means has the input dtype: the per-element update below stays in it.
        row_means[i, 0] = sum_g / n_cols
        row_means[i, 1] = sum_g_xhat / n_cols
        mean_g = row_means[i, 0]
        mean_g_xhat = row_means[i, 1]
        for j in range(n_cols):
            x_hat = (x[i, j] - mu) * inv_std
            dweight_parts[chunk, j] += grad[i, j] * x_hat
            dbias_parts[chunk, j] += grad[i, j]
            dx[i, j] = inv_std * (grad[i, j] * weight[j] - mean_g - x_hat * mean_g_xhat)


def _assert_rows(x: np.ndarray) -> None:
    assert x.dtype in FLOAT_DTYPES and x.ndim == 2 and x.shape[1] >= 1, (
        f"float32 or float64 (N, C), C >= 1 expected, got {x.dtype} {x.shape}")


def _assert_vector(v: np.ndarray, length: int, dtype: np.dtype) -> None:
    assert v.shape == (length,) and v.dtype == dtype, (v.shape, v.dtype, length, dtype)


def layer_norm_forward(
    x: np.ndarray, weight: np.ndarray | None, bias: np.ndarray | None, eps: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Normalise each row of ``x`` and apply the optional affine map.

    ``y = (x − mean) · rstd ⊙ w + b`` with ``rstd = 1 / sqrt(var_biased + eps)``. A constant
    row has ``var = 0`` and gives ``y = b`` (finite for any ``eps > 0``).

    Parameters
    ----------
    x : ndarray, shape (N, C), float32 or float64
    weight, bias : ndarray, shape (C,), same dtype as ``x``, or None (ones / zeros)
    eps : float, >= 0 (as in PyTorch, 0 makes a constant row divide by zero)

    Returns
    -------
    y : ndarray, shape (N, C)
    mean, rstd : ndarray, shape (N,), the row statistics saved for the backward pass.

    Examples
    --------
    >>> y, mean, rstd = layer_norm_forward(np.array([[1.0, 3.0]]), None, None, 0.0)
    >>> y.tolist(), mean.tolist(), rstd.tolist()
    ([[-1.0, 1.0]], [2.0], [1.0])
    """
    _assert_rows(x)
    n_rows, n_cols = x.shape
    assert eps >= 0, eps
    weight = _constant(n_cols, x.dtype, 1.0) if weight is None else np.ascontiguousarray(weight)
    bias = _constant(n_cols, x.dtype, 0.0) if bias is None else np.ascontiguousarray(bias)
    assert weight.shape == bias.shape == (n_cols,) and weight.dtype == bias.dtype == x.dtype, \
        (weight.shape, bias.shape, weight.dtype, bias.dtype, n_cols, x.dtype)
    y = aligned_empty_like(x)  # read row by row by the next product
    mean = np.empty(n_rows, dtype=x.dtype)
    rstd = np.empty(n_rows, dtype=x.dtype)
    parallel = x.size >= _PARALLEL_MIN_ELEMENTS
    n_chunks = row_chunks(n_rows, parallel)
    run_tasks(_layer_norm_forward_chunk, n_chunks, np.ascontiguousarray(x), weight, bias,
              float(eps), y, mean, rstd, n_chunks, parallel=parallel)
    return y, mean, rstd


@functools.lru_cache(maxsize=16)
def _constant(n: int, dtype: np.dtype, value: float) -> np.ndarray:
    """The weight (ones) or bias (zeros) of a layer norm without one, as nanoGPT's
    ``LayerNorm(bias=False)`` calls it: made once per width, never written."""
    return np.full(n, value, dtype)


def layer_norm_backward(
    grad: np.ndarray, x: np.ndarray, weight: np.ndarray | None, mean: np.ndarray,
    rstd: np.ndarray,
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """Gradients of :func:`layer_norm_forward` given the upstream gradient ``grad`` of ``y``.

    ``dx = rstd · (ĝ − mean(ĝ) − x̂ · mean(ĝ ⊙ x̂))`` with ``ĝ = grad ⊙ w``;
    ``dw = Σ_rows grad ⊙ x̂``; ``db = Σ_rows grad``.

    Parameters
    ----------
    grad, x : ndarray, shape (N, C), same float dtype
    weight : ndarray, shape (C,), or None
    mean, rstd : ndarray, shape (N,), as returned by :func:`layer_norm_forward`

    Returns
    -------
    dx : ndarray, shape (N, C)
    dweight, dbias : ndarray, shape (C,), or None when ``weight`` is None
    """
    _assert_rows(x)
    n_rows, n_cols = x.shape
    assert grad.shape == x.shape and grad.dtype == x.dtype, (grad.shape, grad.dtype, x.dtype)
    has_weight = weight is not None
    if weight is None:
        weight = np.ones(n_cols, dtype=x.dtype)
    _assert_vector(weight, n_cols, x.dtype)
    _assert_vector(mean, n_rows, x.dtype)
    _assert_vector(rstd, n_rows, x.dtype)
    n_chunks = min(n_rows, _MAX_ROW_CHUNKS)
    dx = np.empty_like(x)
    row_means = np.empty((n_rows, 2), dtype=x.dtype)
    dweight_parts = np.zeros((n_chunks, n_cols), dtype=np.float64)
    dbias_parts = np.zeros((n_chunks, n_cols), dtype=np.float64)
    run_tasks(_layer_norm_backward_chunk, n_chunks, np.ascontiguousarray(grad),
              np.ascontiguousarray(x), np.ascontiguousarray(weight), np.ascontiguousarray(mean),
              np.ascontiguousarray(rstd), n_chunks, dx, row_means, dweight_parts, dbias_parts,
              parallel=x.size >= _PARALLEL_MIN_ELEMENTS)
    if not has_weight:
        return dx, None, None
    # Summing over axis 0 adds the chunk partials one after another in chunk order, so the
    # result does not depend on how the chunks were scheduled onto threads.
    dweight = dweight_parts.sum(axis=0).astype(x.dtype)
    dbias = dbias_parts.sum(axis=0).astype(x.dtype)
    return dx, dweight, dbias


def layer_norm_forward_numpy(
    x: np.ndarray, weight: np.ndarray | None, bias: np.ndarray | None, eps: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Plain-numpy twin of :func:`layer_norm_forward` (the test oracle)."""
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=1)
    var = ((x64 - mean[:, None]) ** 2).mean(axis=1)
    mean_t = mean.astype(x.dtype)
    rstd_t = (1.0 / np.sqrt(var + eps)).astype(x.dtype)
    y = (x - mean_t[:, None]) * rstd_t[:, None]
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y, mean_t, rstd_t


def layer_norm_backward_numpy(
    grad: np.ndarray, x: np.ndarray, weight: np.ndarray | None, mean: np.ndarray,
    rstd: np.ndarray,
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """Plain-numpy twin of :func:`layer_norm_backward` (the test oracle)."""
    x_hat = (x - mean[:, None]) * rstd[:, None]
    g_hat = grad if weight is None else grad * weight
    mean_g = g_hat.mean(axis=1, dtype=np.float64).astype(x.dtype)
    mean_g_xhat = (g_hat * x_hat).mean(axis=1, dtype=np.float64).astype(x.dtype)
    dx = rstd[:, None] * (g_hat - mean_g[:, None] - x_hat * mean_g_xhat[:, None])
    if weight is None:
        return dx, None, None
    dweight = (grad * x_hat).sum(axis=0, dtype=np.float64).astype(x.dtype)
    dbias = grad.sum(axis=0, dtype=np.float64).astype(x.dtype)
    return dx, dweight, dbias

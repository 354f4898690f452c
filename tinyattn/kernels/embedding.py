"""Embedding lookup (a row gather) and its backward (a deterministic scatter-add).

``out[..., :] = W[idx[...], :]`` for a weight ``W`` of shape (num_embeddings, D), and for an
upstream gradient ``g`` of ``out``::

    dW[r, :] = Σ_{positions p with idx[p] = r} g[p, :],     dW[padding_idx, :] = 0

Several positions can name the same row, so the backward must not split positions across
threads (two threads adding into one row race). It splits the *columns* of ``D`` into fixed
blocks instead: each block is owned by one thread, which visits every position in order. So
there are no races, and every element of ``dW`` is summed in position order whatever the
number of threads: the result is bitwise deterministic.
"""

from __future__ import annotations

import numpy as np

from . import FLOAT_DTYPES
from .compiled_only import compiled_only
from .parallel import chunk_bounds, row_chunks, run_tasks

# Columns per block of the backward scatter: 16 float32 = one 64-byte cache line.
_COLUMN_BLOCK = 16

# Outputs (forward) and gradients (backward) of fewer elements run serially, where waking the
# second thread costs more than it saves. On the AMD EPYC of benchmarks/README.md
# (``bench_thresholds.py``, six runs, 2 threads, float32 rows of 128), two threads took
# 1.06–1.62× the serial time of the gather up to 32768 elements, and 0.84–1.01× at 98304 (a
# training batch of 768 tokens); of the scatter-add 1.10–2.27× up to 8192 elements, 0.96–1.87×
# at 16384, 0.78–1.56× at 32768 (faster in four runs of the six), 0.63–0.97× at 98304.
_PARALLEL_MIN_ELEMENTS = 65536


@compiled_only(error_model="numpy")
def _embedding_forward_chunk(weight, flat_indices, out, n_chunks, chunk):
    """``out[p] = weight[flat_indices[p]]`` for the positions ``p`` of chunk ``chunk`` (of
    ``n_chunks`` near-equal chunks)."""
    start, stop = chunk_bounds(chunk, n_chunks, flat_indices.size)
    for p in range(start, stop):
        row = flat_indices[p]
        for j in range(weight.shape[1]):
            out[p, j] = weight[row, j]


@compiled_only(error_model="numpy")
def _embedding_backward_block(grad, flat_indices, padding_idx, dweight, block):
    """Columns ``block · _COLUMN_BLOCK`` onwards (one block) of the scatter-add into
    ``dweight``: each task owns its columns, so no two tasks add into the same element."""
    start = block * _COLUMN_BLOCK
    stop = min(start + _COLUMN_BLOCK, dweight.shape[1])
    for p in range(flat_indices.size):
        row = flat_indices[p]
        if row == padding_idx:
            continue
        for j in range(start, stop):
            dweight[row, j] += grad[p, j]


def _row_indices(indices: np.ndarray, num_embeddings: int) -> np.ndarray:
    """``indices`` flattened to a contiguous int64 array, once each is known to name a row:
    the kernels read and write ``weight[index]`` unchecked."""
    assert indices.dtype.kind in "iu", indices.dtype
    flat = np.ascontiguousarray(indices, dtype=np.int64).reshape(-1)
    assert not flat.size or (flat.min() >= 0 and flat.max() < num_embeddings), (
        f"index out of range for {num_embeddings} embeddings")
    return flat


def embedding_forward(weight: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """Gather rows of ``weight``: ``out[..., :] = weight[indices[...], :]``.

    Parameters
    ----------
    weight : ndarray, shape (num_embeddings, D), float32 or float64
    indices : integer ndarray, any shape, ``0 <= index < num_embeddings``

    Returns
    -------
    ndarray, shape ``indices.shape + (D,)``.

    Examples
    --------
    >>> embedding_forward(np.arange(6.0).reshape(3, 2), np.array([2, 0])).tolist()
    [[4.0, 5.0], [0.0, 1.0]]
    """
    assert weight.dtype in FLOAT_DTYPES and weight.ndim == 2, (
        f"float32 or float64 (num_embeddings, D) expected, got {weight.dtype} {weight.shape}")
    flat = _row_indices(indices, weight.shape[0])
    out = np.empty((flat.size, weight.shape[1]), dtype=weight.dtype)
    parallel = out.size >= _PARALLEL_MIN_ELEMENTS
    n_chunks = row_chunks(flat.size, parallel)
    run_tasks(_embedding_forward_chunk, n_chunks, np.ascontiguousarray(weight), flat, out,
              n_chunks, parallel=parallel)
    return out.reshape(indices.shape + (weight.shape[1],))


def embedding_backward(
    grad: np.ndarray, indices: np.ndarray, num_embeddings: int, padding_idx: int | None = None
) -> np.ndarray:
    """Gradient of :func:`embedding_forward` w.r.t. ``weight``: a scatter-add of ``grad``.

    ``dW[r] = Σ_{p: indices[p] = r} grad[p]``, and ``dW[padding_idx] = 0``.

    Parameters
    ----------
    grad : ndarray, shape ``indices.shape + (D,)``, float32 or float64
    indices : integer ndarray, as given to :func:`embedding_forward`
    num_embeddings : int, rows of the weight
    padding_idx : int in [0, num_embeddings) or None

    Returns
    -------
    dweight : ndarray, shape (num_embeddings, D), dtype of ``grad``.
    """
    assert grad.dtype in FLOAT_DTYPES and grad.ndim >= 1, (
        f"float32 or float64, ndim >= 1 expected, got {grad.dtype} {grad.shape}")
    assert grad.shape[:-1] == indices.shape, (grad.shape, indices.shape)
    assert padding_idx is None or 0 <= padding_idx < num_embeddings, padding_idx
    flat = _row_indices(indices, num_embeddings)
    n_cols = grad.shape[-1]
    dweight = np.zeros((num_embeddings, n_cols), dtype=grad.dtype)
    run_tasks(_embedding_backward_block, -(-n_cols // _COLUMN_BLOCK),
              np.ascontiguousarray(grad).reshape(flat.size, n_cols), flat,
              -1 if padding_idx is None else int(padding_idx), dweight,
              parallel=grad.size >= _PARALLEL_MIN_ELEMENTS)
    return dweight


def embedding_forward_numpy(weight: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """Plain-numpy twin of :func:`embedding_forward` (the test oracle)."""
    return weight[indices]


def embedding_backward_numpy(
    grad: np.ndarray, indices: np.ndarray, num_embeddings: int, padding_idx: int | None = None
) -> np.ndarray:
    """Plain-numpy twin of :func:`embedding_backward` (the test oracle)."""
    dweight = np.zeros((num_embeddings, grad.shape[-1]), dtype=grad.dtype)
    np.add.at(dweight, indices.reshape(-1), grad.reshape(indices.size, grad.shape[-1]))
    if padding_idx is not None:
        dweight[padding_idx] = 0.0
    return dweight

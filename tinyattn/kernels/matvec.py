"""Products with fewer rows than the register tile: ``C = A @ B`` for ``1 <= M < MR``.

Generating text with a KV cache runs every projection on one new token at a time: ``x @ Wᵀ``
with ``x`` a single row and ``W`` the ``(N, K)`` weight, a GPT-2's 50257 × 768 output head
among them. The register tile of :mod:`.matmul` holds ``MR`` rows of C, and B in ``Wᵀ``
layout must be copied into panels before the tile can read it: for one row, that copy reads
and writes the whole weight to do a single multiply-add with each of its values. Here B is
read once, in place, and each of its values meets all ``M`` rows of A while it is in cache:

* **B a transposed view** (``Wᵀ`` of a C-contiguous ``(N, K)`` weight; a cached
  ``keys.transpose(-2, -1)``): ``C[i, j]`` is the dot product of row ``i`` of A with row ``j``
  of W, both contiguous. It is :func:`~.reductions.row_dot`: each product rounded to the input
  dtype, the products summed in float64 in vector lanes, the sum rounded once to the input
  dtype. A float32 result then carries the rounding of its products and of that last step,
  not the ``K`` roundings of a float32 chain; the order of the additions is fixed by the
  compiled code.
* **B in rows** (C-contiguous ``(K, N)``): for each ``p`` in order, ``C[i, j] += A[i, p] ·
  B[p, j]`` runs along a row of B and of C (vectorised over ``j``), one fused multiply-add per
  step as in the register tile: each element is the same chain, in the same order, as the
  tile's.

A bias is added to the finished sum, as the tile adds it. Each output matrix is cut into
blocks of columns, one task each (:func:`column_width`); an element is computed whole by one
task, so the result is bitwise the same for any number of threads or blocks. Below
``_PARALLEL_MIN_MACS`` multiply-adds the tasks run on the calling thread.
"""

from __future__ import annotations

import numpy as np

from .compiled_only import compiled_only
from .jit import jit
from .parallel import available_threads, run_tasks
from .reductions import row_dot

_PARALLEL_MIN_MACS = 1 << 17  # below this, waking the threads costs more than the work
_TASKS_PER_THREAD = 4  # at least this many blocks per thread, for balance
_ROW_ALIGN = 64  # a block of B's rows starts on a multiple of 64 columns: whole vectors
# the bias argument of a product that adds none (never read), per dtype
_NO_BIAS = {np.dtype(t): np.zeros(0, t) for t in (np.float32, np.float64)}


def column_width(batch: int, n: int, parallel: bool, align: int) -> int:
    """Columns per task, a multiple of ``align``: all ``n`` when the product runs on one
    thread, else few enough that every thread gets ``_TASKS_PER_THREAD`` tasks.

    Wide blocks read B in long runs: with the rows of a ``(768, 50257)`` B cut into blocks of
    128 columns rather than 8 blocks in all, one row took 9.3 ms instead of 6.1 ms (AMD EPYC,
    2 threads); for a transposed B, whose columns are whole rows of W, the width made no
    difference.

    Examples
    --------
    >>> column_width(1, 50257, parallel=False, align=1)
    50257
    >>> column_width(1, 50257, parallel=True, align=1) >= 50257 // (4 * available_threads())
    True
    >>> column_width(12, 100, parallel=True, align=64)  # 12 matrices: one task each
    128
    """
    if not parallel:
        return n
    width = -(-n // -(-_TASKS_PER_THREAD * available_threads() // batch))
    return -(-width // align) * align


@jit(inline="always")
def _task_block(n, width, task):
    """``(o, j0, j1)``: task ``task`` computes columns ``j0 <= j < j1`` of output matrix ``o``,
    when each of them is cut into blocks of ``width`` of its ``n`` columns."""
    n_blocks = -(-n // width)
    j0 = task % n_blocks * width
    return task // n_blocks, j0, min(n, j0 + width)


@compiled_only(error_model="numpy")
def _dots_block(a, w, a_index, b_index, bias, add_bias, out, width, task):
    """Task ``task``: ``out[o, i, j] = A[i] · W[j] (+ bias[j])`` for the columns of its block
    (:func:`_task_block`), with ``A = a[a_index[o]]`` ``(M, K)`` and ``W = w[b_index[o]]``
    ``(N, K)``."""
    o, j0, j1 = _task_block(out.shape[2], width, task)
    a_mat, w_mat, c = a[a_index[o]], w[b_index[o]], out[o]
    for j in range(j0, j1):
        w_row = w_mat[j]
        for i in range(c.shape[0]):
            total = c.dtype.type(row_dot(a_mat[i], w_row))
            c[i, j] = total + bias[j] if add_bias else total


@compiled_only(error_model="numpy", fastmath={"contract"})
def _rows_block(a, b, a_index, b_index, bias, add_bias, out, width, task):
    """Task ``task``: the columns of its block (:func:`_task_block`) of ``out[o] = A @ B
    (+ bias)``, with ``A = a[a_index[o]]`` ``(M, K)`` and ``B = b[b_index[o]]`` ``(K, N)``, one
    chain of fused multiply-adds along ``k`` per element."""
    o, j0, j1 = _task_block(out.shape[2], width, task)
    a_mat, b_mat, c = a[a_index[o]], b[b_index[o]], out[o]
    m, k = a_mat.shape
    for i in range(m):
        c_row = c[i, j0:j1]
        for j in range(c_row.size):
            c_row[j] = 0
    for p in range(k):
        b_row = b_mat[p, j0:j1]
        for i in range(m):
            a_ip = a_mat[i, p]
            c_row = c[i, j0:j1]
            for j in range(c_row.size):
                c_row[j] += a_ip * b_row[j]
    if add_bias:
        for i in range(m):
            c_row = c[i, j0:j1]
            for j in range(c_row.size):
                c_row[j] += bias[j0 + j]


def few_rows_product(a3: np.ndarray, b3: np.ndarray, a_index: np.ndarray, b_index: np.ndarray,
                     out: np.ndarray, bias: np.ndarray | None) -> None:
    """``out[o] = a3[a_index[o]] @ b3[b_index[o]] (+ bias)`` for matrices of few rows.

    Parameters
    ----------
    a3 : np.ndarray
        ``(batch_a, M, K)``, C-contiguous or a transposed view of a C-contiguous array (copied:
        ``M`` rows are few).
    b3 : np.ndarray
        ``(batch_b, K, N)``, C-contiguous, or a transposed view of a C-contiguous ``(batch_b,
        N, K)`` (read in place either way).
    a_index, b_index : np.ndarray
        int64, the matrix of ``a3`` and of ``b3`` for each output matrix.
    out : np.ndarray
        ``(batch, M, N)``, C-contiguous, written.
    bias : np.ndarray or None
        ``(N,)``, added to every row.

    Examples
    --------
    >>> w = np.arange(6.0).reshape(2, 3)  # a (N, K) weight: x @ wᵀ
    >>> out = np.empty((1, 1, 2))
    >>> index = np.zeros(1, np.int64)
    >>> few_rows_product(np.ones((1, 1, 3)), w.T[None], index, index, out, np.array([0.5, 0.0]))
    >>> out.tolist()
    [[[3.5, 12.0]]]
    """
    batch, m, n = out.shape
    k = a3.shape[2]
    transposed = not b3.flags.c_contiguous  # then its last two axes swapped are
    b = b3.swapaxes(1, 2) if transposed else b3  # rows of W (batch_b, N, K), or of B (.., K, N)
    parallel = batch * m * n * k >= _PARALLEL_MIN_MACS and available_threads() >= 2
    # rows of B are read in whole vectors: their blocks start on a multiple of 64 values
    width = column_width(batch, n, parallel, align=1 if transposed else _ROW_ALIGN)
    task = _dots_block if transposed else _rows_block
    run_tasks(task, batch * -(-n // width), np.ascontiguousarray(a3), b, a_index, b_index,
              _NO_BIAS[out.dtype] if bias is None else bias, bias is not None, out,
              np.int64(width), parallel=parallel)

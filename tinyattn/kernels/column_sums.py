"""Sums over the rows of a matrix, ``s[j] = Σ_i x[i, j]``: the bias gradient of a ``Linear``
whose weight is frozen (otherwise the product ``Gᵀ X`` of its weight gradient sums the rows as
it reads them: ``row_sums`` of :func:`~tinyattn.kernels.matmul.matmul`).

The rows are cut into ``min(N, 16)`` near-equal chunks; each task adds its chunk's rows one
after another into a row of partial sums in the input dtype (the inner loop runs along a row,
so it vectorises; float64 partials, with a conversion per value, were slower than numpy), and
the partials are then added in chunk order in float64: the result does not depend on the
number of threads or on how the chunks were scheduled. Each value passes through at most
``ceil(N / 16)`` float32 additions, about as many as in numpy's pairwise ``sum(axis=0)`` of the
same rows. A matrix of fewer than ``_PARALLEL_MIN_ELEMENTS`` values is summed in one serial
pass (its timings against numpy's are in ``benchmarks/results_matmul.md``).

Examples
--------
>>> import numpy as np
>>> column_sums(np.arange(6.0).reshape(3, 2)).tolist()
[6.0, 9.0]
"""

from __future__ import annotations

import numpy as np

from . import FLOAT_DTYPES
from .compiled_only import compiled_only
from .parallel import chunk_bounds, run_tasks
from .simd import prefer_full_width

_MAX_CHUNKS = 16  # more than a laptop's threads, for load balance
_PARALLEL_MIN_ELEMENTS = 1 << 15


@compiled_only
def _chunk_sum(x, n_chunks, parts, chunk):
    """``parts[chunk] = Σ x[i]`` over the rows ``i`` of chunk ``chunk``, in order."""
    prefer_full_width()
    start, stop = chunk_bounds(chunk, n_chunks, x.shape[0])
    part = parts[chunk]
    for i in range(start, stop):
        row = x[i]
        for j in range(row.size):
            part[j] += row[j]


def column_sums(x: np.ndarray) -> np.ndarray:
    """``x.sum(axis=0)`` of a float matrix ``x (N, C)``, in ``x``'s dtype (module doc)."""
    assert x.ndim == 2 and x.dtype in FLOAT_DTYPES, (x.shape, x.dtype)
    n_rows, n_cols = x.shape
    n_chunks = max(1, min(n_rows, _MAX_CHUNKS))
    parts = np.zeros((n_chunks, n_cols), x.dtype)
    if x.size:
        run_tasks(_chunk_sum, n_chunks, np.ascontiguousarray(x), n_chunks, parts,
                  parallel=x.size >= _PARALLEL_MIN_ELEMENTS)
    return parts.sum(axis=0, dtype=np.float64).astype(x.dtype)

"""Inverted dropout on the counter-based generator: the mask is recomputed, never stored.

Element ``n`` (in C order) of a dropout call with seed ``s`` is kept when
``u(s, n) = top53(mix(s + (n + 1)·γ)) / 2⁵³ >= p`` (see :mod:`.counter_rng`), so the
forward ``y = x ⊙ m / (1 − p)`` and the backward ``dx = g ⊙ m / (1 − p)`` are the *same*
function of ``(seed, p)`` applied to ``x`` and to ``g``. Large inputs are split into chunks
run in parallel, small ones run in one serial pass; each element's value depends only on
``(seed, n)``, so results are identical on either path and for any thread count.
"""

from __future__ import annotations

import numpy as np

from . import FLOAT_DTYPES
from .compiled_only import compiled_only
from .counter_rng import fold_key, keep_threshold, kept, uniform_numpy
from .parallel import chunk_bounds, element_chunks, run_tasks

_PARALLEL_MIN = 1 << 15  # below this a parallel launch costs more than it saves


@compiled_only
def _dropout_span(x, seed, p, scale, out, first):
    """Elements ``n = first, first + 1, ...`` of the call, given as views that start at 0: an
    index that may be negative would need a wraparound select per element, which keeps the
    compiler from vectorising the loop (``n`` is counted alongside for the same reason)."""
    threshold = keep_threshold(p)
    n = first
    for k in range(x.size):
        out[k] = x[k] * scale if kept(fold_key(seed, n), threshold) else 0.0
        n += 1


@compiled_only(error_model="numpy")
def _dropout_chunk(x, seed, p, scale, out, n_chunks, chunk):
    """Chunk ``chunk`` of the elements (of ``n_chunks`` near-equal chunks)."""
    start, stop = chunk_bounds(chunk, n_chunks, x.size)
    _dropout_span(x[start:stop], seed, p, scale, out[start:stop], start)


def dropout_apply(x: np.ndarray, seed: int, p: float) -> np.ndarray:
    """``x ⊙ m / (1 − p)`` with the keep-mask ``m`` of ``(seed, p)``; same shape and dtype.

    Examples
    --------
    >>> x = np.ones(6, dtype=np.float32)
    >>> y = dropout_apply(x, seed=3, p=0.5)
    >>> bool(np.array_equal(y, dropout_apply_numpy(x, seed=3, p=0.5)))
    True
    >>> sorted(set(y.tolist())) <= [0.0, 2.0]
    True
    """
    assert x.dtype in FLOAT_DTYPES, f"float32 or float64 expected, got {x.dtype}"
    assert 0 <= seed < 2**64 and 0.0 <= p < 1.0, (seed, p)
    flat = np.ascontiguousarray(x).reshape(-1)
    out = np.empty_like(flat)
    parallel = flat.size >= _PARALLEL_MIN
    n_chunks = element_chunks(flat.size, parallel)
    run_tasks(_dropout_chunk, n_chunks, flat, np.uint64(seed), float(p),
              x.dtype.type(1.0 / (1.0 - p)), out, n_chunks, parallel=parallel)
    return out.reshape(x.shape)


def dropout_apply_numpy(x: np.ndarray, seed: int, p: float) -> np.ndarray:
    """Plain-numpy twin of :func:`dropout_apply`."""
    keep = uniform_numpy(seed, np.arange(x.size)).reshape(x.shape) >= p
    return np.where(keep, x * x.dtype.type(1.0 / (1.0 - p)), x.dtype.type(0.0))

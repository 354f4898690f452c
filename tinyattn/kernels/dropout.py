"""Inverted dropout on the counter-based generator: the mask is recomputed, never stored.

Element ``n`` (in C order) of a dropout call with seed ``s`` is kept when
``u(s, n) = top53(mix(s + (n + 1)·γ)) / 2⁵³ >= p`` (see :mod:`.counter_rng`), so the
forward ``y = x ⊙ m / (1 − p)`` and the backward ``dx = g ⊙ m / (1 − p)`` are the *same*
function of ``(seed, p)`` applied to ``x`` and to ``g``. The elements are split into fixed
chunks, run in parallel for large inputs and serially for small ones; each element's value
depends only on ``(seed, n)``, so results are identical on either path and for any thread
count.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from . import FLOAT_DTYPES
from .counter_rng import fold_key, state_to_uniform, uniform_numpy
from .parallel import parallel_kernel

_CHUNK = 16384
_PARALLEL_MIN = 1 << 20  # below this a parallel launch costs more than it saves


@parallel_kernel
def _dropout_kernel(x, seed, p, scale, out):
    size = x.size
    for chunk in prange((size + _CHUNK - 1) // _CHUNK):
        for n in range(chunk * _CHUNK, min(size, (chunk + 1) * _CHUNK)):
            keep = state_to_uniform(fold_key(seed, n)) >= p
            out[n] = x[n] * scale if keep else 0.0


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
    _dropout_kernel(flat, np.uint64(seed), float(p), x.dtype.type(1.0 / (1.0 - p)), out,
                    parallel=flat.size >= _PARALLEL_MIN)
    return out.reshape(x.shape)


def dropout_apply_numpy(x: np.ndarray, seed: int, p: float) -> np.ndarray:
    """Plain-numpy twin of :func:`dropout_apply`."""
    keep = uniform_numpy(seed, np.arange(x.size)).reshape(x.shape) >= p
    return np.where(keep, x * x.dtype.type(1.0 / (1.0 - p)), x.dtype.type(0.0))

"""Special functions numpy lacks, compiled with numba: the error function.

``erf`` backs the :class:`~tinyattn.ops.unary.Erf` op (and, through it, the differentiable
form of the exact GELU's backward, ``Φ(x) = (1 + erf(x/√2)) / 2``). numba lowers ``math.erf``
to the C library's ``erf``, correct to the last bit or so in float64.
"""

from __future__ import annotations

import math

import numpy as np

from .jit import jit


@jit
def _erf_kernel(x, out):
    for i in range(x.size):
        out[i] = math.erf(x[i])


def erf(x: np.ndarray) -> np.ndarray:
    """Elementwise error function ``erf(x) = 2/√π ∫₀ˣ e^(−t²) dt``, same shape and dtype.

    Examples
    --------
    >>> erf(np.array([0.0, 1.0, -np.inf])).round(6).tolist()
    [0.0, 0.842701, -1.0]
    """
    assert x.dtype in (np.float32, np.float64)
    flat = np.ascontiguousarray(x).reshape(-1)
    out = np.empty_like(flat)
    _erf_kernel(flat, out)
    return out.reshape(x.shape)


def erf_numpy(x: np.ndarray) -> np.ndarray:
    """Plain twin of :func:`erf` (Python's ``math.erf`` per element): the test oracle."""
    return np.vectorize(math.erf, otypes=[x.dtype])(x)

"""Special functions numpy lacks, compiled with numba: the error function and the logistic
function.

``erf`` backs the :class:`~tinyattn.ops.unary.Erf` op (and, through it, the differentiable
form of the exact GELU's backward, ``Φ(x) = (1 + erf(x/√2)) / 2``). numba lowers ``math.erf``
to the C library's ``erf``, correct to the last bit or so in float64.

``sigmoid`` backs the :class:`~tinyattn.ops.unary.Sigmoid` op (and ``silu``, ``x ·
sigmoid(x)``). In numpy, ``σ(x) = 1 / (1 + e^(−x))`` without overflow takes eight passes over
the array (``|x|``, the exponential, two sums, two quotients, a comparison, a selection); here
it is one loop that the compiler vectorises, with ``e = e^(−|x|) ∈ [0, 1]`` from
:func:`~.exp.fast_exp` (within 2 ulp of numpy's, results below ``e^-87`` in float32 and
``e^-708`` in float64 flushed to zero)::

    σ(x) = 1 / (1 + e)  for x >= 0,      σ(x) = e / (1 + e)  for x < 0

so neither branch divides by a huge number or loses a tiny result to ``1 − σ(−x)``. NaN gives
NaN, ``±inf`` gives 1 and 0. Arrays of at least ``_PARALLEL_MIN_ELEMENTS`` values are shared
out between the threads in chunks; each element is computed on its own, so the result does
not depend on the thread count.
"""

from __future__ import annotations

import math

import numpy as np

from .compiled_only import compiled_only
from .exp import fast_exp
from .jit import jit
from .parallel import chunk_of, element_chunks, run_tasks
from .simd import prefer_full_width

_PARALLEL_MIN_ELEMENTS = 1 << 15


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


@compiled_only(error_model="numpy")
def _sigmoid_chunk(x, y, n_chunks, chunk):
    """``y = σ(x)`` over chunk ``chunk`` (of ``n_chunks``) of the flat arrays."""
    prefer_full_width()
    xs, ys = chunk_of(x, n_chunks, chunk), chunk_of(y, n_chunks, chunk)
    one = x.dtype.type(1.0)
    for i in range(xs.size):
        e = fast_exp(-abs(xs[i]))
        ys[i] = (one if xs[i] >= 0 else e) / (one + e)


def sigmoid(x: np.ndarray) -> np.ndarray:
    """Elementwise logistic function ``σ(x) = 1 / (1 + e^(−x))`` (module doc), same shape and
    dtype (float32 or float64).

    Examples
    --------
    >>> sigmoid(np.array([0.0, -np.inf, np.inf, 2.0])).round(6).tolist()
    [0.5, 0.0, 1.0, 0.880797]
    """
    assert x.dtype in (np.float32, np.float64)
    flat = np.ascontiguousarray(x).reshape(-1)
    y = np.empty_like(flat)
    if flat.size:
        parallel = flat.size >= _PARALLEL_MIN_ELEMENTS
        n_chunks = element_chunks(flat.size, parallel)
        run_tasks(_sigmoid_chunk, n_chunks, flat, y, n_chunks, parallel=parallel)
    return y.reshape(x.shape)


def sigmoid_numpy(x: np.ndarray) -> np.ndarray:
    """Plain twin of :func:`sigmoid`: the same two branches in numpy (eight passes)."""
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype, copy=False)

"""Add, subtract, multiply and divide large float arrays on every thread.

numpy's arithmetic runs on one core. An operand of millions of elements does not fit in a
core's cache, and one core cannot pull it from memory as fast as two: minGPT's GELU, written
out as elementwise products and sums of ``(64, 128, 768)`` activations, spent a third of a
training step there. :func:`binary` runs such an op as chunks on numba's threads; smaller or
broadcast operands go to numpy's own operators.

Each element is the one IEEE operation numpy performs (``a + b``, ``a − b``, ``a · b``,
``a / b``, correctly rounded in the operands' dtype), so the results have numpy's bits
whichever path ran and for any thread count. Unlike numpy, the threaded path raises no
floating-point warnings (as PyTorch).
"""

from __future__ import annotations

import operator

import numpy as np

from . import FLOAT_DTYPES
from .compiled_only import compiled_only
from .parallel import available_threads, chunk_bounds, element_chunks, run_tasks
from .simd import prefer_full_width

#: From this many elements (1 MiB of float32 per operand) an op runs on numba's threads. On
#: 2 threads of an Intel Xeon a product of two float32 arrays took 0.035 instead of 0.087 ms at
#: this size, 1.37 instead of 3.48 ms at ``(64, 128, 768)``; at 98,304 elements both took
#: 0.01 ms. The small GPTs of the benchmarks (W3, W4) stay below it, so their steps compile
#: nothing for it.
PARALLEL_MIN_ELEMENTS = 1 << 18

#: The ops, by their code in the kernel.
OPS = {"add": 0, "sub": 1, "mul": 2, "div": 3}
_NUMPY = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv}


@compiled_only(error_model="numpy")
def _apply(op, a, b, out):
    """``out[i] = a[i] op b[i]``, where an operand of one element stands for every ``i``."""
    prefer_full_width()
    if a.size == 1:
        first = a[0]
        if op == 0:
            for i in range(out.size):
                out[i] = first + b[i]
        elif op == 1:
            for i in range(out.size):
                out[i] = first - b[i]
        elif op == 2:
            for i in range(out.size):
                out[i] = first * b[i]
        else:
            for i in range(out.size):
                out[i] = first / b[i]
    elif b.size == 1:
        second = b[0]
        if op == 0:
            for i in range(out.size):
                out[i] = a[i] + second
        elif op == 1:
            for i in range(out.size):
                out[i] = a[i] - second
        elif op == 2:
            for i in range(out.size):
                out[i] = a[i] * second
        else:
            for i in range(out.size):
                out[i] = a[i] / second
    elif op == 0:
        for i in range(out.size):
            out[i] = a[i] + b[i]
    elif op == 1:
        for i in range(out.size):
            out[i] = a[i] - b[i]
    elif op == 2:
        for i in range(out.size):
            out[i] = a[i] * b[i]
    else:
        for i in range(out.size):
            out[i] = a[i] / b[i]


@compiled_only(error_model="numpy")
def _binary_chunk(op, a, b, out, n_chunks, chunk):
    """Chunk ``chunk`` of the elements (of ``n_chunks`` near-equal chunks)."""
    start, stop = chunk_bounds(chunk, n_chunks, out.size)
    _apply(op, a if a.size == 1 else a[start:stop], b if b.size == 1 else b[start:stop],
           out[start:stop])


def run_binary(op: str, a: np.ndarray, b: np.ndarray, parallel: bool) -> np.ndarray:
    """``a op b`` through the kernel: ``a`` and ``b`` C-contiguous arrays of one float dtype,
    of one shape or one of them 0-d; ``parallel`` picks the threads."""
    assert a.dtype == b.dtype and a.dtype in FLOAT_DTYPES, (a.dtype, b.dtype)
    assert (a.shape == b.shape or a.ndim == 0 or b.ndim == 0) and a.flags.c_contiguous \
        and b.flags.c_contiguous, (a.shape, b.shape)
    out = np.empty(b.shape if a.ndim == 0 else a.shape, a.dtype)
    n_chunks = element_chunks(out.size, parallel)
    run_tasks(_binary_chunk, n_chunks, np.int64(OPS[op]), a.reshape(-1), b.reshape(-1),
              out.reshape(-1), n_chunks, parallel=parallel)
    return out


def _threaded(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether ``a op b`` is worth numba's threads: one float dtype, C-contiguous, the same
    shape or one of them 0-d, and at least :data:`PARALLEL_MIN_ELEMENTS` elements. The size
    is checked first: every arithmetic op asks, and most are small."""
    if a.size < PARALLEL_MIN_ELEMENTS and b.size < PARALLEL_MIN_ELEMENTS:
        return False
    if not (a.shape == b.shape or a.ndim == 0 or b.ndim == 0):
        return False
    return (a.dtype == b.dtype and a.dtype in FLOAT_DTYPES and available_threads() >= 2
            and a.flags.c_contiguous and b.flags.c_contiguous)


def binary(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a + b``, ``a − b``, ``a · b`` or ``a / b`` (``op`` a key of :data:`OPS`), as numpy's
    operators compute it: on numba's threads when the operands are large, of one float dtype
    and shape (or one of them a 0-d array), with numpy's operator otherwise.

    Examples
    --------
    >>> x = np.arange(4.0)
    >>> binary("mul", x, np.array(2.0)).tolist(), binary("sub", np.array(1.0), x).tolist()
    ([0.0, 2.0, 4.0, 6.0], [1.0, 0.0, -1.0, -2.0])
    """
    if _threaded(a, b):
        return run_binary(op, a, b, parallel=True)
    return binary_numpy(op, a, b)


def binary_numpy(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Plain-numpy twin of :func:`binary`: numpy's operator."""
    return _NUMPY[op](a, b)

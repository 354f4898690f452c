"""Elementwise arithmetic and selection of large float arrays, on every thread.

numpy's arithmetic runs on one core. An operand of millions of elements does not fit in a
core's cache, and one core cannot pull it from memory as fast as two: minGPT's GELU, written
out as elementwise products and sums of ``(64, 128, 768)`` activations, spent a third of a
training step there. :func:`binary` runs such an op as chunks on numba's threads; smaller or
broadcast operands go to numpy's own operators.

Each element is the one IEEE operation numpy performs (``a + b``, ``a − b``, ``a · b``,
``a / b``, correctly rounded in the operands' dtype), so the results have numpy's bits
whichever path ran and for any thread count. Unlike numpy, the threaded path raises no
floating-point warnings (as PyTorch).

:func:`select` is ``np.where(cond, a, b)``: what ReLU, ``where`` and ``masked_fill`` compute,
forward and backward. numpy's ``where`` branches on every element, so a condition without a
pattern (the signs of activations) costs it a mispredicted branch every other element: 6.1 ms
for ReLU's ``(80, 10, 2048)`` (the Annotated Transformer's feed-forward layer) against 0.44 ms
for a copy of the same array. The kernel chooses without branching, on every thread for large
arrays; it only copies values, so its results are numpy's bits.
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


#: From this many elements :func:`select` runs the kernel (on one thread below
#: :data:`PARALLEL_MIN_ELEMENTS`). numpy's ``where`` took 0.66–3.8 ns per element on an Intel
#: Xeon, by how predictable the condition was; the kernel's launch costs a few microseconds.
SELECT_MIN_ELEMENTS = 1 << 14

#: The shortest repeating condition the kernel takes (see :func:`select`); a shorter one would
#: split the chunks into runs too short to be worth their bookkeeping.
_SELECT_MIN_PERIOD = 64


@compiled_only
def _select_run(cond, a, b, out):
    """``out[k] = a[k] if cond[k] else b[k]``, where an ``a`` or ``b`` of one element stands
    for every ``k`` (not both, unless ``out`` has one element). Both values are read before the
    choice, so the loop has no branch."""
    prefer_full_width()
    if a.size == 1:
        first = a[0]
        for k in range(out.size):
            second = b[k]
            out[k] = first if cond[k] else second
    elif b.size == 1:
        second = b[0]
        for k in range(out.size):
            first = a[k]
            out[k] = first if cond[k] else second
    else:
        for k in range(out.size):
            first, second = a[k], b[k]
            out[k] = first if cond[k] else second


@compiled_only
def _select_chunk(cond, a, b, out, n_chunks, chunk):
    """Chunk ``chunk`` (of ``n_chunks``) of ``out[i] = a[i] if cond[i % cond.size] else b[i]``,
    in runs that each stay within one repeat of ``cond``."""
    start, stop = chunk_bounds(chunk, n_chunks, out.size)
    period = cond.size
    i = start
    while i < stop:
        j = i % period
        end = min(stop, i + period - j)
        _select_run(cond[j:j + end - i], a if a.size == 1 else a[i:end],
                    b if b.size == 1 else b[i:end], out[i:end])
        i = end


def run_select(cond: np.ndarray, a: np.ndarray, b: np.ndarray, parallel: bool) -> np.ndarray:
    """``np.where(cond, a, b)`` through the kernel: ``a`` and ``b`` C-contiguous arrays of one
    float dtype, each 0-d or of the result's shape, and ``cond`` a C-contiguous bool array of
    the result's trailing dims (leading ones allowed); ``parallel`` picks the threads."""
    shape = a.shape if a.ndim else b.shape
    assert a.dtype == b.dtype and a.dtype in FLOAT_DTYPES, (a.dtype, b.dtype)
    assert a.shape in (shape, ()) and b.shape in (shape, ()) and a.flags.c_contiguous and \
        b.flags.c_contiguous, (a.shape, b.shape)
    assert cond.dtype == np.bool_ and cond.flags.c_contiguous and cond.size and \
        _repeats_along(cond.shape, shape), (cond.dtype, cond.shape, shape)
    out = np.empty(shape, a.dtype)
    n_chunks = element_chunks(out.size, parallel)
    run_tasks(_select_chunk, n_chunks, cond.reshape(-1), a.reshape(-1), b.reshape(-1),
              out.reshape(-1), n_chunks, parallel=parallel)
    return out


def _repeats_along(cond_shape: tuple[int, ...], shape: tuple[int, ...]) -> bool:
    """Whether a condition of ``cond_shape`` broadcast to ``shape`` is ``shape``'s trailing
    dims repeated: the condition's own dims, after any leading ones, are ``shape``'s last.

    Examples
    --------
    >>> _repeats_along((1, 1, 64, 64), (8, 4, 64, 64)), _repeats_along((64,), (8, 64))
    (True, True)
    >>> _repeats_along((8, 1, 64), (8, 4, 64)), _repeats_along((3, 64), (2, 3, 1))
    (False, False)
    """
    if len(cond_shape) > len(shape):
        return False
    ones = 0
    while ones < len(cond_shape) and cond_shape[ones] == 1:
        ones += 1
    own = cond_shape[ones:]
    return own == shape[len(shape) - len(own):]


def _selectable(cond: np.ndarray, a: np.ndarray, b: np.ndarray) -> bool:
    """Whether ``np.where(cond, a, b)`` is worth the kernel: at least
    :data:`SELECT_MIN_ELEMENTS` results, ``a`` and ``b`` of one float dtype, each 0-d or of the
    result's shape and C-contiguous, and a C-contiguous bool ``cond`` that repeats along the
    result's trailing dims at least :data:`_SELECT_MIN_PERIOD` elements at a time. The size is
    checked first."""
    shape = a.shape if a.ndim else b.shape
    if a.size < SELECT_MIN_ELEMENTS and b.size < SELECT_MIN_ELEMENTS:
        return False
    return (a.shape in (shape, ()) and b.shape in (shape, ()) and a.dtype == b.dtype
            and a.dtype in FLOAT_DTYPES and a.flags.c_contiguous and b.flags.c_contiguous
            and cond.dtype == np.bool_ and cond.flags.c_contiguous
            and cond.size >= _SELECT_MIN_PERIOD and _repeats_along(cond.shape, shape))


def select(cond: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``np.where(cond, a, b)``: through the kernel when :func:`_selectable` (on numba's
    threads from :data:`PARALLEL_MIN_ELEMENTS` results), with numpy's ``where`` otherwise.

    Examples
    --------
    >>> x = np.array([-1.0, 2.0, np.nan])
    >>> select(x < 0, np.array(0.0), x).tolist()
    [0.0, 2.0, nan]
    """
    if _selectable(cond, a, b):
        size = max(a.size, b.size)
        return run_select(cond, a, b, parallel=size >= PARALLEL_MIN_ELEMENTS
                          and available_threads() >= 2)
    return select_numpy(cond, a, b)


def select_numpy(cond: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Plain-numpy twin of :func:`select`: ``np.where``."""
    return np.where(cond, a, b)

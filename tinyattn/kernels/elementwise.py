"""Elementwise arithmetic and selection of large float arrays, on every thread.

numpy's arithmetic runs on one core. An operand of millions of elements does not fit in a
core's cache, and one core cannot pull it from memory as fast as two: minGPT's GELU, written
out as elementwise products and sums of ``(64, 128, 768)`` activations, spent a third of a
training step there. :func:`binary` runs such an op as chunks on numba's threads, with the
two broadcasts of a layer written by hand: a bias of ``(C,)`` against ``(B, T, C)``, and a
statistic of ``(B, T, 1)`` (a mean or deviation with ``keepdim=True``) against it. A chunk
runs in stretches within which each operand is read in order or is one value; smaller
operands and other broadcasts go to numpy's own operators.

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

:func:`clamp` is ``min(max(x, low), high)`` with either bound left out, in one branch-free pass
(numpy's ``clip`` is one pass too, but gives ``-0.0`` for ``+0.0`` clamped to ``low = -0.0``):
what ``clamp`` and ReLU (``low = 0``) compute. A bound replaces ``x`` only where ``x`` lies
beyond it, so NaN stays NaN and ``high`` wins where ``low > high``, as in PyTorch.
"""

from __future__ import annotations

import operator

import numpy as np

from . import FLOAT_DTYPES
from .compiled_only import compiled_only
from .inline import always_inline
from .parallel import available_threads, chunk_bounds, chunk_of, element_chunks, run_tasks
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


@compiled_only
def _last_use(a, b, out):
    """A use of the three arrays after every branch of the caller's loops (their sizes, which
    the caller drops). Each array then ends at one point whichever loop ran, and numba's
    pruning removes the reference counting of the caller's arguments; ended in each branch, the
    counts stay, and every run of a chunk made atomic operations on counters that both threads
    share (a row-wise subtraction of (80, 10, 512) took twice numpy's time on 2 threads)."""
    always_inline()
    return a.size + b.size + out.size


@compiled_only(error_model="numpy")
def _apply(op, a, a0, a_one, b, b0, b_one, out, o0, n):
    """``out[o0 + k] = A[k] op B[k]`` for ``k < n``: ``A[k]`` is ``a[a0 + k]``, or ``a[a0]`` for
    every ``k`` when ``a_one`` (and ``B`` alike; not both). The indices are unsigned, so the
    loops carry no check for negative indices and vectorise; no view is made, so nothing is
    reference-counted per call."""
    always_inline()
    prefer_full_width()
    a0, b0, o0, n = np.uint64(a0), np.uint64(b0), np.uint64(o0), np.uint64(n)
    if a_one:
        first = a[a0]
        if op == 0:
            for k in range(n):
                out[o0 + k] = first + b[b0 + k]
        elif op == 1:
            for k in range(n):
                out[o0 + k] = first - b[b0 + k]
        elif op == 2:
            for k in range(n):
                out[o0 + k] = first * b[b0 + k]
        else:
            for k in range(n):
                out[o0 + k] = first / b[b0 + k]
    elif b_one:
        second = b[b0]
        if op == 0:
            for k in range(n):
                out[o0 + k] = a[a0 + k] + second
        elif op == 1:
            for k in range(n):
                out[o0 + k] = a[a0 + k] - second
        elif op == 2:
            for k in range(n):
                out[o0 + k] = a[a0 + k] * second
        else:
            for k in range(n):
                out[o0 + k] = a[a0 + k] / second
    elif op == 0:
        for k in range(n):
            out[o0 + k] = a[a0 + k] + b[b0 + k]
    elif op == 1:
        for k in range(n):
            out[o0 + k] = a[a0 + k] - b[b0 + k]
    elif op == 2:
        for k in range(n):
            out[o0 + k] = a[a0 + k] * b[b0 + k]
    else:
        for k in range(n):
            out[o0 + k] = a[a0 + k] / b[b0 + k]
    return _last_use(a, b, out)


@compiled_only(error_model="numpy")
def _run_end(i, stop, every):
    """Where the run of results from ``i`` ends for an operand laid out as ``every`` (see
    :func:`_every`): at the next multiple of its period or row length, or at ``stop``."""
    always_inline()
    if every == 0:
        return stop
    span = abs(every)
    return min(stop, i + span - i % span)


@compiled_only(error_model="numpy")
def _run_start(size, every, i):
    """Where an operand of ``size`` elements, laid out as ``every``, is read for result ``i``:
    at ``i`` itself (or its one number), within its period, or its value for the row."""
    always_inline()
    if every == 0:
        return 0 if size == 1 else i
    if every > 0:
        return i % every
    return i // -every


@compiled_only
def _is_one(size, every):
    """Whether an operand of ``size`` elements, laid out as ``every``, gives one value for a
    whole run."""
    always_inline()
    return every < 0 or (every == 0 and size == 1)


@compiled_only(error_model="numpy")
def _binary_chunk(op, a, b, out, a_every, b_every, n_chunks, chunk):
    """Chunk ``chunk`` of the results (of ``n_chunks`` near-equal chunks), in runs within which
    each operand is read in order or is one value."""
    start, stop = chunk_bounds(chunk, n_chunks, out.size)
    i = start
    while i < stop:
        end = min(_run_end(i, stop, a_every), _run_end(i, stop, b_every))
        _apply(op, a, _run_start(a.size, a_every, i), _is_one(a.size, a_every),
               b, _run_start(b.size, b_every, i), _is_one(b.size, b_every), out, i, end - i)
        i = end


def run_binary(op: str, a: np.ndarray, b: np.ndarray, parallel: bool) -> np.ndarray:
    """``a op b`` through the kernel: ``a`` and ``b`` C-contiguous arrays of one float dtype,
    each laid out as :func:`_every` takes it; ``parallel`` picks the threads."""
    assert a.dtype == b.dtype and a.dtype in FLOAT_DTYPES, (a.dtype, b.dtype)
    assert a.flags.c_contiguous and b.flags.c_contiguous, (a.shape, b.shape)
    shape = np.broadcast_shapes(a.shape, b.shape)
    a_every, b_every = _every(a, shape), _every(b, shape)
    assert a_every is not None and b_every is not None, (a.shape, b.shape)
    out = np.empty(shape, a.dtype)
    n_chunks = element_chunks(out.size, parallel)
    run_tasks(_binary_chunk, n_chunks, np.int64(OPS[op]), a.reshape(-1), b.reshape(-1),
              out.reshape(-1), np.int64(a_every), np.int64(b_every), n_chunks,
              parallel=parallel)
    return out


#: The shortest run the kernels take from an operand that repeats or holds one value per row
#: (see :func:`_every`): shorter runs are not worth their bookkeeping.
_MIN_RUN = 64


def _every(x: np.ndarray, shape: tuple[int, ...]) -> int | None:
    """How operand ``x`` maps onto results of ``shape``, as the kernels read it.

    0 when it has that shape or is one number; ``P > 0`` when it repeats the results' trailing
    dims every ``P`` elements (a bias of ``(C,)`` added to ``(B, T, C)``); ``−L`` when it holds
    one value per row of ``L`` results (``(B, T, 1)``, a reduction with ``keepdim=True``); None
    for any other broadcast, and for runs shorter than :data:`_MIN_RUN`.

    Examples
    --------
    >>> _every(np.ones((2, 64)), (2, 64)), _every(np.ones(64), (2, 64))
    (0, 64)
    >>> _every(np.ones((2, 1)), (2, 64)), _every(np.ones((2, 1)), (2, 8))
    (-64, None)
    """
    if x.shape == shape or x.ndim == 0:
        return 0
    if x.size >= _MIN_RUN and _repeats_along(x.shape, shape):
        return x.size
    if shape and x.shape == shape[:-1] + (1,) and shape[-1] >= _MIN_RUN:
        return -shape[-1]
    return None


def _threaded(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether ``a op b`` is worth numba's threads: at least :data:`PARALLEL_MIN_ELEMENTS`
    elements in an operand, one float dtype, C-contiguous, each operand laid out as
    :func:`_every` takes it. The size is checked first: every arithmetic op asks, and most are
    small."""
    if a.size < PARALLEL_MIN_ELEMENTS and b.size < PARALLEL_MIN_ELEMENTS:
        return False
    if not (a.dtype == b.dtype and a.dtype in FLOAT_DTYPES and available_threads() >= 2
            and a.flags.c_contiguous and b.flags.c_contiguous):
        return False
    if a.shape == b.shape or a.ndim == 0 or b.ndim == 0:
        return True
    try:
        shape = np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        return False  # numpy's operator raises its own error
    return _every(a, shape) is not None and _every(b, shape) is not None


def binary(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a + b``, ``a − b``, ``a · b`` or ``a / b`` (``op`` a key of :data:`OPS`), as numpy's
    operators compute it: on numba's threads when the operands are large, of one float dtype
    and of the result's shape, a number, a repeat of its trailing dims or one value per row
    (:func:`_every`), with numpy's operator otherwise.

    Examples
    --------
    >>> x = np.arange(4.0)
    >>> binary("mul", x, np.array(2.0)).tolist(), binary("sub", np.array(1.0), x).tolist()
    ([0.0, 2.0, 4.0, 6.0], [1.0, 0.0, -1.0, -2.0])
    """
    if _threaded(a, b):
        return run_binary(op, a, b, parallel=True)
    return _NUMPY[op](a, b)  # binary_numpy's call, without one more call of Python


def binary_numpy(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Plain-numpy twin of :func:`binary`: numpy's operator."""
    return _NUMPY[op](a, b)


#: From this many elements :func:`select` runs the kernel (on one thread below
#: :data:`PARALLEL_MIN_ELEMENTS`). numpy's ``where`` took 0.66–3.8 ns per element on an Intel
#: Xeon, by how predictable the condition was; the kernel's launch costs a few microseconds.
SELECT_MIN_ELEMENTS = 1 << 14

@compiled_only
def _select_run(cond, c0, a, a0, a_one, b, b0, b_one, out, o0, n):
    """``out[o0 + k] = A[k] if cond[c0 + k] else B[k]`` for ``k < n``, ``A`` and ``B`` as in
    :func:`_apply`. Both values are read before the choice, so the loop has no branch."""
    always_inline()
    prefer_full_width()
    c0, a0, b0, o0, n = np.uint64(c0), np.uint64(a0), np.uint64(b0), np.uint64(o0), np.uint64(n)
    if a_one:
        first = a[a0]
        for k in range(n):
            second = b[b0 + k]
            out[o0 + k] = first if cond[c0 + k] else second
    elif b_one:
        second = b[b0]
        for k in range(n):
            first = a[a0 + k]
            out[o0 + k] = first if cond[c0 + k] else second
    else:
        for k in range(n):
            first, second = a[a0 + k], b[b0 + k]
            out[o0 + k] = first if cond[c0 + k] else second
    return _last_use(a, b, out) + cond.size


@compiled_only(error_model="numpy")
def _select_chunk(cond, a, b, out, n_chunks, chunk):
    """Chunk ``chunk`` (of ``n_chunks``) of ``out[i] = a[i] if cond[i % cond.size] else b[i]``,
    in runs that each stay within one repeat of ``cond``."""
    start, stop = chunk_bounds(chunk, n_chunks, out.size)
    i = start
    while i < stop:
        end = _run_end(i, stop, cond.size)
        _select_run(cond, _run_start(cond.size, cond.size, i), a, _run_start(a.size, 0, i),
                    _is_one(a.size, 0), b, _run_start(b.size, 0, i), _is_one(b.size, 0), out,
                    i, end - i)
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
    result's trailing dims at least :data:`_MIN_RUN` elements at a time. The size is checked
    first."""
    shape = a.shape if a.ndim else b.shape
    if a.size < SELECT_MIN_ELEMENTS and b.size < SELECT_MIN_ELEMENTS:
        return False
    return (a.shape in (shape, ()) and b.shape in (shape, ()) and a.dtype == b.dtype
            and a.dtype in FLOAT_DTYPES and a.flags.c_contiguous and b.flags.c_contiguous
            and cond.dtype == np.bool_ and cond.flags.c_contiguous
            and cond.size >= _MIN_RUN and _repeats_along(cond.shape, shape))


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


@compiled_only(error_model="numpy")
def _clamp_chunk(x, low, high, has_low, has_high, out, n_chunks, chunk):
    """``out = min(max(x, low), high)`` over chunk ``chunk`` (of ``n_chunks``) of the flat
    arrays, a bound taking part only when its flag is set."""
    prefer_full_width()
    xs, ys = chunk_of(x, n_chunks, chunk), chunk_of(out, n_chunks, chunk)
    if has_low and has_high:
        for i in range(xs.size):
            value = xs[i]
            value = low if value < low else value
            ys[i] = high if value > high else value
    elif has_low:
        for i in range(xs.size):
            value = xs[i]
            ys[i] = low if value < low else value
    else:
        for i in range(xs.size):
            value = xs[i]
            ys[i] = high if value > high else value


def clamp(x: np.ndarray, low: float | None, high: float | None) -> np.ndarray:
    """``min(max(x, low), high)`` of a float array (module doc), either bound None for none,
    same shape and dtype; on numba's threads from :data:`PARALLEL_MIN_ELEMENTS` elements.

    Examples
    --------
    >>> clamp(np.array([-2.0, 0.5, np.nan, 3.0]), 0.0, 1.0).tolist()
    [0.0, 0.5, nan, 1.0]
    """
    assert x.dtype in FLOAT_DTYPES and (low is not None or high is not None), (x.dtype, low)
    flat = np.ascontiguousarray(x).reshape(-1)
    out = np.empty_like(flat)
    if flat.size:
        parallel = flat.size >= PARALLEL_MIN_ELEMENTS and available_threads() >= 2
        n_chunks = element_chunks(flat.size, parallel)
        kind = x.dtype.type
        run_tasks(_clamp_chunk, n_chunks, flat, kind(0 if low is None else low),
                  kind(0 if high is None else high), low is not None, high is not None, out,
                  n_chunks, parallel=parallel)
    return out.reshape(x.shape)


def clamp_numpy(x: np.ndarray, low: float | None, high: float | None) -> np.ndarray:
    """Plain-numpy twin of :func:`clamp` (any dtype): a selection for each bound given."""
    y = x
    if low is not None:
        y = np.where(y < low, np.asarray(low, x.dtype), y)
    if high is not None:
        y = np.where(y > high, np.asarray(high, x.dtype), y)
    return np.array(y, dtype=x.dtype, copy=y is x)

"""The first ``k`` positions of each row in sorted order, and their values, without sorting
the row: ``torch.topk`` along the last axis.

Order. With ``largest`` the greatest value comes first and NaN before everything (PyTorch
counts NaN as the largest value); otherwise the smallest comes first and NaN last. Equal values
keep their order in the row (the lower position first), so the result is the first ``k``
positions of a stable sort, as the twin :func:`top_k_numpy` computes them.

Selection with a heap. A row is read once, left to right. The ``k`` best positions seen so far
are kept in a binary heap whose root is the one that comes last in the order. A new value
enters only if it comes before the root: it replaces the root and sinks to its place
(``log k`` steps). On a long row most values are out after that one comparison once the heap
is full; a value equal to the root stays out too, since it lies further right and so comes
later. At the end the heap is sorted in place (heapsort: the root, last of what remains, goes
to the end, ``k − 1`` times). The work is ``O(n + m log k)`` for ``m`` values that enter:
about ``k (1 + ln(n / k))`` of them on a row in random order, every one of them (``O(n log
k)``) on a row already sorted the other way.

A full sort (numpy's stable ``argsort``, the twin) costs ``O(n log n)`` whatever ``k``: over
GPT-2's vocabulary of 50257 logits it took about 4 ms, where a sampling step asks for the
first 200 (``benchmarks/README.md``). Rows are shared out between the threads when there are
many values.

Examples
--------
>>> import numpy as np
>>> values, positions = top_k(np.array([[1.0, np.nan, 3.0, 3.0, 2.0]]), 3, largest=True)
>>> values.tolist(), positions.tolist()
([[nan, 3.0, 3.0]], [[1, 2, 3]])
>>> top_k(np.array([[1.0, np.nan, 3.0, 3.0, 2.0]]), 2, largest=False)[1].tolist()
[[0, 4]]
"""

from __future__ import annotations

import math

import numpy as np

from .compiled_only import compiled_only
from .parallel import chunk_bounds, row_chunks, run_tasks

_PARALLEL_MIN_ELEMENTS = 1 << 16


@compiled_only
def _before(row, i, j, largest):
    """Whether position ``i`` of ``row`` comes before position ``j``: the greater value first
    when ``largest`` (NaN before every number), else the smaller (NaN after every number);
    equal values, NaN and NaN included, in the order of their positions."""
    a, b = row[i], row[j]
    if a != a or b != b:  # a NaN: the largest value
        if a == a:  # only b
            return not largest
        if b == b:  # only a
            return largest
        return i < j
    if a == b:
        return i < j
    return (a > b) == largest


@compiled_only
def _sink(row, heap, pos, size, largest):
    """Move ``heap[pos]`` down the heap ``heap[:size]`` until no child of it comes after it
    (the heap's root is the position that comes last)."""
    while True:
        child = 2 * pos + 1
        if child >= size:
            return
        if child + 1 < size and _before(row, heap[child], heap[child + 1], largest):
            child += 1  # the later of the two children
        if not _before(row, heap[pos], heap[child], largest):
            return
        heap[pos], heap[child] = heap[child], heap[pos]
        pos = child


@compiled_only
def _top_k_chunk(x, k, largest, values, positions, n_chunks, chunk):
    """Rows of chunk ``chunk`` (of ``n_chunks``): ``positions[i]`` the first ``k >= 1``
    positions of row ``i`` of ``x`` in the order, ``values[i]`` their values."""
    start, stop = chunk_bounds(chunk, n_chunks, x.shape[0])
    for i in range(start, stop):
        row, heap = x[i], positions[i]
        for t in range(k):
            heap[t] = t
        for pos in range(k // 2 - 1, -1, -1):
            _sink(row, heap, pos, k, largest)
        last = row[heap[0]]  # the root's value
        for j in range(k, row.size):
            value = row[j]
            if value <= last if largest else value >= last:  # out at once (NaN is not):
                continue  # an equal value lies further right than the root, so comes later
            if _before(row, j, heap[0], largest):
                heap[0] = j
                _sink(row, heap, 0, k, largest)
                last = row[heap[0]]
        for end in range(k - 1, 0, -1):  # heapsort: the last of what remains goes to the end
            heap[0], heap[end] = heap[end], heap[0]
            _sink(row, heap, 0, end, largest)
        for t in range(k):
            values[i, t] = row[heap[t]]


def top_k(x: np.ndarray, k: int, largest: bool) -> tuple[np.ndarray, np.ndarray]:
    """The first ``k`` values along the last axis of ``x (..., n)`` in the order (module doc)
    and their int64 positions, each ``(..., k)``, ``0 <= k <= n``.

    Any numpy dtype of a tensor: bool is ordered as 0/1 and float16 through float32 (both
    exact), the values coming back in ``x``'s dtype.
    """
    n = x.shape[-1]
    assert x.ndim >= 1 and 0 <= k <= n, (x.shape, k)
    keys = x.view(np.uint8) if x.dtype == np.bool_ else \
        x.astype(np.float32) if x.dtype == np.float16 else x
    rows = np.ascontiguousarray(keys).reshape(math.prod(x.shape[:-1]), n)
    values = np.empty((rows.shape[0], k), rows.dtype)
    positions = np.empty((rows.shape[0], k), np.int64)
    if values.size:
        parallel = rows.shape[0] > 1 and rows.size >= _PARALLEL_MIN_ELEMENTS
        n_chunks = row_chunks(rows.shape[0], parallel)
        run_tasks(_top_k_chunk, n_chunks, rows, np.int64(k), np.bool_(largest), values,
                  positions, n_chunks, parallel=parallel)
    shape = x.shape[:-1] + (k,)
    return values.reshape(shape).astype(x.dtype, copy=False), positions.reshape(shape)


def top_k_numpy(x: np.ndarray, k: int, largest: bool) -> tuple[np.ndarray, np.ndarray]:
    """:func:`top_k` by numpy's stable sort of each whole row (numpy, like PyTorch, sorts NaN
    last): ascending, the first ``k``; for ``largest``, the reversed row ascending, its last
    ``k`` reversed and mapped back (the greatest first, equal values in their order)."""
    n = x.shape[-1]
    if largest:
        order = np.argsort(np.flip(x, -1), axis=-1, kind="stable")[..., n - k:]
        positions = n - 1 - np.flip(order, -1)
    else:
        positions = np.argsort(x, axis=-1, kind="stable")[..., :k]
    positions = positions.astype(np.int64)
    return np.take_along_axis(x, positions, -1), positions

"""Row sums that LLVM vectorises: float64 accumulators, reassociated, inlined into the caller;
and a row's maximum in independent chains.

A loop ``s += a[i, j]`` is a chain of dependent additions, each waiting for the one before it
(about 4 cycles on current x86 cores), and LLVM may not split it into vector lanes unless it is
allowed to reorder the additions. These helpers carry the ``fastmath`` flag ``reassoc`` on
their own code only: each calls :func:`~tinyattn.kernels.inline.always_inline`, so LLVM inlines
it into the caller's loop and it keeps its own flags there while the caller keeps its own.
LLVM then sums each row in vector lanes of partial sums and adds the lanes at the end. A helper
takes the row itself (``row_sum(x[i])``), a 1-D view, so it is compiled once whatever the type
of the caller's index (a ``prange`` index is typed ``int64``, then ``uint64``).

What ``reassoc`` changes, and what it does not:

- the order of the additions of one sum, and nothing else: no ``nnan``/``ninf``, so a NaN or an
  infinity in a row propagates exactly as in the plain loop, and no ``contract``, so a squared
  deviation is rounded before it is added, as in the plain loop;
- the order is fixed by the compiled code: the same bits run to run and for any number of
  threads (one thread sums a whole row), but it follows the CPU's vector width, so two CPUs
  may differ in the last bit of a float64 sum (about 1e-16 relative, far below float32's
  resolution: the float32 statistics of LayerNorm come out the same).

Why bother: a row summed as one dependent chain waits on each addition's latency, and at the
W3 shapes those waits weighed heavily in LayerNorm and cross-entropy, which became much faster
with these sums (the measurements behind this choice are in ``benchmarks/results_kernels.md``,
"measurements behind the kernels' design choices").

Examples
--------
>>> import numpy as np
>>> from numba import njit
>>> @njit
... def mean_of_row(a, i):
...     return row_sum(a[i]) / a.shape[1]
>>> float(mean_of_row(np.array([[1.0, 2.0], [3.0, 5.0]]), 1))
4.0
"""

from __future__ import annotations

import numpy as np

from .compiled_only import compiled_only
from .inline import always_inline


@compiled_only(fastmath={"reassoc"})
def row_sum(row):
    """``Σ_j row[j]``, accumulated in float64."""
    always_inline()
    total = np.float64(0.0)  # float64 also when run as Python (NUMBA_DISABLE_JIT=1)
    for j in range(row.size):
        total += row[j]
    return total


@compiled_only(fastmath={"reassoc"})
def row_squared_deviations(row, centre):
    """``Σ_j (row[j] − centre)²``, in float64 (``centre`` a float64)."""
    always_inline()
    total = np.float64(0.0)
    for j in range(row.size):
        deviation = row[j] - centre
        total += deviation * deviation
    return total


@compiled_only(fastmath={"reassoc"})
def row_dot(a, b):
    """``Σ_j a[j] · b[j]`` of two rows: each product in the input dtype, summed in float64."""
    always_inline()
    total = np.float64(0.0)
    for j in range(a.size):
        total += a[j] * b[j]
    return total


@compiled_only
def _larger(value, best):
    """``value`` if it is larger than ``best``, else ``best`` (a NaN ``value`` never is)."""
    always_inline()
    return value if value > best else best


@compiled_only
def row_maximum(row):
    """``max row``, NaN ignored (``-inf`` for a row of NaN or of nothing), in the row's dtype.

    The comparisons run in eight independent chains, element ``j`` in chain ``j mod 8``,
    joined at the end: one chain waits for each comparison before the next, eight keep the core
    busy (the softmax kernels' maxima and NaN checks of a float32 ``(64, 4096)`` took 46
    instead of 170 µs on one thread of an AMD EPYC). Which element is the largest does not
    depend on the order of the comparisons, so no flag is needed."""
    always_inline()
    m0 = m1 = m2 = m3 = m4 = m5 = m6 = m7 = row.dtype.type(-np.inf)
    n = row.size
    j = 0
    while j + 8 <= n:
        m0, m1 = _larger(row[j], m0), _larger(row[j + 1], m1)
        m2, m3 = _larger(row[j + 2], m2), _larger(row[j + 3], m3)
        m4, m5 = _larger(row[j + 4], m4), _larger(row[j + 5], m5)
        m6, m7 = _larger(row[j + 6], m6), _larger(row[j + 7], m7)
        j += 8
    while j < n:
        m0 = _larger(row[j], m0)
        j += 1
    return _larger(_larger(_larger(m0, m1), _larger(m2, m3)),
                   _larger(_larger(m4, m5), _larger(m6, m7)))

"""Parallel kernels: one body compiled serial and parallel, launched thread-safely.

:func:`parallel_kernel` compiles a kernel body that loops with ``prange`` over independent
rows or blocks twice: with ``parallel=True``, and serially, where numba runs ``prange`` as a
plain ``range``. Both run the same loop and give bitwise the same result; the serial one is for
inputs too small to be worth waking the thread pool.

Numba runs ``prange`` loops on one of three threading layers, chosen when the first parallel
kernel launches:

* ``tbb`` (Intel TBB) — safe to launch from several Python threads at once, and fork-safe;
* ``omp`` (OpenMP) — safe to launch from several Python threads at once; the GNU OpenMP
  runtime is not fork-safe (a child forked after a launch must not launch again);
* ``workqueue`` (numba's own pool, always available) — NOT thread-safe: two Python threads
  launching parallel kernels at the same time make numba abort the whole process
  ("Concurrent access has been detected").

Importing :mod:`tinyattn.kernels` runs :func:`select_threading_layer`, which, unless the user
chose a layer with ``NUMBA_THREADING_LAYER``, asks numba for ``'safe'`` (TBB) when the ``tbb``
package is importable and otherwise for ``'omp'`` when numba's OpenMP pool loads. When only
``workqueue`` can run, :data:`kernel_section` becomes a process-wide lock held around every
launch of a parallel kernel (by :class:`ParallelKernel`, so the callers of the kernel wrappers
need nothing), and concurrent calls queue instead of aborting. With a thread-safe layer
:data:`kernel_section` is a no-op context manager.
"""
from __future__ import annotations

import contextlib
import functools
import importlib
import os
import threading
import types
from collections.abc import Callable
from typing import Any

import numba
from numba import njit
from numba.core import config
from numba.np.ufunc import parallel as numba_parallel

_THREADSAFE_LAYERS = ("tbb", "omp")
_THREADSAFE_CHOICES = ("tbb", "omp", "safe", "threadsafe")


def _loads(module: str) -> bool:
    """Whether numba's pool extension ``module`` (and the runtime it links to) loads."""
    try:
        importlib.import_module(module)
    except (ImportError, OSError):
        return False
    return True


def select_threading_layer() -> str:
    """Point numba at a thread-safe threading layer, if none was launched or chosen yet.

    Returns the layer that is running (after a parallel kernel has already launched), the
    user's ``NUMBA_THREADING_LAYER`` choice, or the choice made here: ``'safe'`` (TBB),
    ``'omp'``, or ``'workqueue'`` when neither loads.

    Examples
    --------
    >>> select_threading_layer() in ("tbb", "omp", "workqueue", "safe", "threadsafe",
    ...                              "forksafe", "default")
    True
    """
    if numba_parallel._is_initialized:
        return numba_parallel.threading_layer()
    if os.environ.get("NUMBA_THREADING_LAYER"):
        return str(config.THREADING_LAYER)
    if _loads("tbb") and _loads("numba.np.ufunc.tbbpool"):
        config.THREADING_LAYER = "safe"
    elif _loads("numba.np.ufunc.omppool"):
        config.THREADING_LAYER = "omp"
    else:
        config.THREADING_LAYER = "workqueue"
    return str(config.THREADING_LAYER)


def _needs_lock(layer: str) -> bool:
    """Whether launches must be serialised: the layer is, or may resolve to, ``workqueue``."""
    return layer not in _THREADSAFE_LAYERS + _THREADSAFE_CHOICES


class _KernelSection:
    """Context manager held around launches of parallel kernels (a lock only when needed)."""

    def __init__(self, locked: bool):
        self.locked = locked
        self._lock: Any = threading.RLock() if locked else contextlib.nullcontext()

    def __enter__(self) -> None:
        self._lock.__enter__()

    def __exit__(self, *exc: object) -> None:
        self._lock.__exit__(*exc)


kernel_section = _KernelSection(_needs_lock(select_threading_layer()))


def kernels_are_serialised() -> bool:
    """Whether launches of parallel kernels are serialised by a lock (``workqueue`` only).

    Examples
    --------
    >>> isinstance(kernels_are_serialised(), bool)
    True
    """
    return kernel_section.locked


def _renamed(function: Callable, suffix: str) -> Callable:
    """A copy of ``function`` (same code, globals and defaults) whose qualified name ends in
    ``suffix``."""
    copy = types.FunctionType(function.__code__, function.__globals__, function.__name__,
                              function.__defaults__, function.__closure__)
    copy.__qualname__ = function.__qualname__ + suffix
    copy.__doc__ = function.__doc__
    return copy


class ParallelKernel:
    """A kernel body compiled twice, ``parallel=True`` and serial, each cached on disk.

    ``kernel(*args)`` launches the parallel compilation while holding :data:`kernel_section`;
    ``kernel(*args, parallel=False)`` runs the serial one (no threads, no lock). The body must
    use ``prange`` only over independent iterations, so both give bitwise the same result.

    numba's on-disk cache files a function's compilations under its qualified name and first
    line, not under its compile flags: two dispatchers of one Python function would load each
    other's cached code (the "parallel" one then runs serially). The parallel compilation is
    therefore made from a copy of the body named ``<qualname>.parallel``. Each variant compiles
    on its first call: a run that only ever takes one compiles only that one.
    """

    def __init__(self, body: Callable, **options: Any):
        self.serial = njit(cache=True, **options)(body)
        self.parallel = njit(cache=True, parallel=True, **options)(_renamed(body, ".parallel"))
        functools.update_wrapper(self, body)

    def __call__(self, *args: Any, parallel: bool = True) -> Any:
        if not parallel:
            return self.serial(*args)
        with kernel_section:
            return self.parallel(*args)


def parallel_kernel(body: Callable | None = None, /, **options: Any) -> Any:
    """Decorator making a :class:`ParallelKernel`; ``options`` go to both ``njit`` calls.

    A kernel in a module (numba caches only functions defined in a file)::

        @parallel_kernel
        def _double_rows(x, out):
            for i in prange(x.shape[0]):
                out[i] = 2 * x[i]

        _double_rows(x, out, parallel=x.size >= _PARALLEL_MIN_ELEMENTS)
    """
    if body is None:
        return functools.partial(ParallelKernel, **options)
    return ParallelKernel(body, **options)


#: Elements per chunk when an elementwise kernel runs in parallel (64 KiB of float32).
ELEMENTS_PER_CHUNK = 16384


def element_chunks(size: int, parallel: bool) -> int:
    """How many chunks an elementwise kernel splits ``size`` elements into: one when it runs
    serially (one pass, no per-chunk overhead), else chunks of about :data:`ELEMENTS_PER_CHUNK`
    for the threads to share.

    Examples
    --------
    >>> element_chunks(100_000, parallel=False), element_chunks(100_000, parallel=True)
    (1, 7)
    """
    return max(1, -(-size // ELEMENTS_PER_CHUNK)) if parallel else 1


@njit(cache=True, inline="always")
def chunk_bounds(chunk, n_chunks, size):
    """``(start, stop)`` of chunk ``chunk`` when ``range(size)`` is cut into ``n_chunks``
    near-equal chunks."""
    return chunk * size // n_chunks, (chunk + 1) * size // n_chunks


def set_num_threads(threads: int) -> None:
    """Run the parallel kernels on ``threads`` threads (PyTorch's ``torch.set_num_threads``).

    Results are bitwise the same for any thread count.

    Examples
    --------
    >>> previous = get_num_threads()
    >>> set_num_threads(1); get_num_threads()
    1
    >>> set_num_threads(previous)
    """
    available = available_threads()
    if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= available:
        raise ValueError(f"set_num_threads: threads must be an int in [1, {available}], got "
                         f"{threads!r}")
    numba.set_num_threads(threads)


def available_threads() -> int:
    """How many threads numba may use (its ``NUMBA_NUM_THREADS``)."""
    return config.NUMBA_NUM_THREADS


def get_num_threads() -> int:
    """The number of threads the parallel kernels run on."""
    return numba.get_num_threads()

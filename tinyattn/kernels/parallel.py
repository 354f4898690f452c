"""Thread safety of the ``parallel=True`` kernels: pick a thread-safe numba threading layer.

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
``workqueue`` can run, :data:`kernel_section` becomes a process-wide lock that the callers of
parallel kernels hold (the autograd engine around every op's forward and backward, the
optimizers around their kernel step), so concurrent calls queue instead of aborting. With a
thread-safe layer :data:`kernel_section` is a no-op context manager.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import threading
from typing import Any

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
    """Context manager held around calls into parallel kernels (a lock only when needed)."""

    def __init__(self, locked: bool):
        self.locked = locked
        self._lock: Any = threading.RLock() if locked else contextlib.nullcontext()

    def __enter__(self) -> None:
        self._lock.__enter__()

    def __exit__(self, *exc: object) -> None:
        self._lock.__exit__(*exc)


kernel_section = _KernelSection(_needs_lock(select_threading_layer()))


def kernels_are_serialised() -> bool:
    """Whether calls into parallel kernels are serialised by a lock (``workqueue`` only).

    Examples
    --------
    >>> isinstance(kernels_are_serialised(), bool)
    True
    """
    return kernel_section.locked

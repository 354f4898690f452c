"""Numba kernels: pure functions on contiguous numpy arrays, each with a plain-numpy twin.

Nothing here knows about ``Tensor``. Every kernel is compiled lazily (``@njit(cache=True)``) on
first call, so importing this package compiles nothing. Inputs are validated by the callers in
``tinyattn.ops`` / ``tinyattn.functional`` before a kernel runs: numba does not bounds-check.
"""

from . import parallel  # noqa: F401  (selects a thread-safe numba threading layer first)

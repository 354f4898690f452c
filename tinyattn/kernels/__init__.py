"""Numba kernels: pure functions on contiguous numpy arrays, each with a plain-numpy twin.

Nothing here knows about ``Tensor``. Every kernel is compiled lazily (``@jit``, numba's
``@njit(cache=True)``: :mod:`.jit`) on first call, so importing this package compiles nothing.
Inputs are validated by the callers in ``tinyattn.ops`` / ``tinyattn.functional`` before a
kernel runs: numba does not bounds-check. The kernel wrappers state what they rely on (dtype,
shapes, index ranges) as ``assert``s.
"""

import numpy as np

from . import parallel  # noqa: F401  (selects a thread-safe numba threading layer first)
from .compile_notice import install as _install_compile_notice

_install_compile_notice()  # a line on stderr when a kernel family compiles (not when cached)

#: The dtypes every kernel is compiled for.
FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))

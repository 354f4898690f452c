"""Helpers shared by the kernel tests: a directional gradient check and thread-count runs."""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import contextmanager

import numba
import numpy as np

DTYPES = (np.float32, np.float64)


def assert_vjp_matches_central_difference(
    forward: Callable[[np.ndarray], np.ndarray],
    vjp: Callable[[np.ndarray], np.ndarray],
    x: np.ndarray,
    rng: np.random.Generator,
    step: float = 1e-6,
    rtol: float = 1e-6,
) -> None:
    """Check ``<v, J u> ≈ <Jᵀ v, u>`` for random directions ``u`` (input) and ``v`` (output).

    ``J u`` is the central difference ``(f(x + h u) − f(x − h u)) / 2h``; ``vjp(v)`` must
    return ``Jᵀ v``. Everything is float64.
    """
    direction = rng.standard_normal(x.shape)
    cotangent = rng.standard_normal(np.shape(forward(x)))
    plus = forward(x + step * direction)
    minus = forward(x - step * direction)
    numeric = float(np.sum(cotangent * (plus - minus)) / (2 * step))
    analytic = float(np.sum(vjp(cotangent) * direction))
    assert np.isclose(analytic, numeric, rtol=rtol, atol=rtol), (analytic, numeric)


@contextmanager
def numba_threads(count: int):
    """Run the body with numba's thread count set to ``count``, capped at the maximum
    (``NUMBA_NUM_THREADS``) on a machine with fewer cores; in CI (``CI`` set, where .ci/run
    exports ``NUMBA_NUM_THREADS=2``) a thread count that cannot be had is an error, so that a
    comparison of one and two threads never silently compares one with one."""
    if count > numba.config.NUMBA_NUM_THREADS and os.environ.get("CI"):
        raise RuntimeError(f"numba_threads({count}): numba has only "
                           f"{numba.config.NUMBA_NUM_THREADS} threads in CI (NUMBA_NUM_THREADS); "
                           ".ci/run exports NUMBA_NUM_THREADS=2")
    previous = numba.get_num_threads()
    numba.set_num_threads(min(count, numba.config.NUMBA_NUM_THREADS))
    try:
        yield
    finally:
        numba.set_num_threads(previous)

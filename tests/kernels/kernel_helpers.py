"""Helpers shared by the kernel tests: directional gradient check, thread-count runs, and a
subprocess runner with numba's bounds checking switched on."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

import numba
import numpy as np

PROJECT_ROOT = Path(__file__).resolve().parents[2]
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
    """Run the body with numba's thread count set to ``count`` (capped at the maximum)."""
    previous = numba.get_num_threads()
    numba.set_num_threads(min(count, numba.config.NUMBA_NUM_THREADS))
    try:
        yield
    finally:
        numba.set_num_threads(previous)


def run_with_boundscheck(script: str, tmp_path: Path) -> subprocess.CompletedProcess:
    """Run ``script`` in a fresh interpreter with ``NUMBA_BOUNDSCHECK=1``.

    The numba cache goes to ``tmp_path`` so that kernels compiled without bounds checks are
    not loaded from the project cache (and the checked ones do not end up in it).
    """
    env = dict(os.environ)
    env["NUMBA_BOUNDSCHECK"] = "1"
    env["NUMBA_CACHE_DIR"] = str(tmp_path / "numba_cache")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT_ROOT),
                                                      env.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], env=env,
                          capture_output=True, text=True, timeout=240, check=False)

"""Helpers shared by the kernel tests: a directional gradient check, thread-count runs and the
reference counting left in a task's compiled code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

import numba
import numpy as np

DTYPES = (np.float32, np.float64)
ROOT = Path(__file__).resolve().parents[2]


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


def reference_counts(cache_dir, module: str, calls: str, tasks: list[str]) -> dict[str, int]:
    """How many ``NRT_incref``/``NRT_decref`` calls each task function of
    ``tinyattn.kernels.<module>`` has in its compiled code, after ``calls`` (Python run with the
    module imported as ``kernel`` and numpy as ``np``) has compiled them.

    The kernels are compiled afresh in a process of their own, with ``cache_dir`` as numba's
    cache: numba keeps no IR for code it loads from its cache.
    """
    script = "\n".join([
        "import json",
        "import numpy as np",
        f"from tinyattn.kernels import {module} as kernel",
        calls,
        "counts = {}",
        f"for name in {tasks!r}:",
        "    task = getattr(kernel, name)",
        "    signature = task.signatures[0]",
        "    ir = task.inspect_llvm(signature)",
        "    name_at = ir.index('@' + task.overloads[signature].fndesc.llvm_func_name)",
        "    start = ir.index('{', name_at)",
        "    body = ir[start:ir.index('\\n}\\n', start)]",
        "    counts[name] = body.count('@NRT_incref(') + body.count('@NRT_decref(')",
        "print(json.dumps(counts))",
    ])
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NUMBA_CACHE_DIR": str(cache_dir)}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            env=env, cwd=ROOT, timeout=600, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])

"""What the examples and the walkthrough share: the seed sentence and the tools to check by hand.

- :data:`SEED_TOKENS` and :data:`SEED_EMBEDDINGS`: "Your journey starts with one step" as six
  fixed 3-d embeddings, the input of every early example;
- :func:`compare`: print ``[ok] label: max |difference| = …`` and fail loudly above a tolerance;
- :func:`numeric_gradient`: the gradient of a numpy function by central differences (one
  :func:`tinyattn.gradcheck.central_difference` per element), the independent answer a
  hand-derived or autograd gradient is checked against, with :data:`TOLERANCE`;
- :func:`softmax_forward_numpy`: the plain-numpy softmax (along the last axis) that the softmax
  kernel is tested against, for writing a forward pass in numpy.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TextIO

import numpy as np

import tinyattn as ta
from tinyattn.gradcheck import central_difference
from tinyattn.kernels.softmax import softmax_forward_numpy

__all__ = [
    "SEED_EMBEDDINGS", "SEED_TOKENS", "TOLERANCE", "compare", "numeric_gradient",
    "softmax_forward_numpy",
]

SEED_TOKENS = ("Your", "journey", "starts", "with", "one", "step")
SEED_EMBEDDINGS = (
    (0.43, 0.15, 0.89),  # Your
    (0.55, 0.87, 0.66),  # journey
    (0.57, 0.85, 0.64),  # starts
    (0.22, 0.58, 0.33),  # with
    (0.77, 0.25, 0.10),  # one
    (0.05, 0.80, 0.55),  # step
)
"""The seed sentence "Your journey starts with one step" as six fixed 3-d embeddings."""

TOLERANCE = 1e-7
"""Largest difference accepted between two float64 computations of the same gradient when one
is by finite differences (the walkthrough's, with ``eps = 1e-6``, agree to within 1e-9)."""


def numeric_gradient(
    f: Callable[[np.ndarray], float], x: np.ndarray, eps: float = 1e-6
) -> np.ndarray:
    """Central finite differences ``(f(x + eps·e_i) − f(x − eps·e_i)) / (2·eps)`` for every i.

    Parameters
    ----------
    f : callable
        Maps an array shaped like ``x`` to a number (write it in float64 numpy).
    x : numpy.ndarray
        Where to take the gradient.
    eps : float
        The step of :func:`tinyattn.gradcheck.central_difference`.

    Returns
    -------
    numpy.ndarray
        float64, shaped like ``x``: element ``i`` is the derivative along the unit vector e_i.

    Examples
    --------
    >>> import numpy as np
    >>> numeric_gradient(lambda x: float(np.sum(x ** 2)), np.array([1.0, -2.0])).round(6)
    array([ 2., -4.])
    """
    grad = np.zeros_like(x, dtype=np.float64)
    for index in np.ndindex(x.shape):
        unit = np.zeros_like(x, dtype=np.float64)
        unit[index] = 1.0
        grad[index] = central_difference(f, x, unit, eps)
    return grad


def compare(label: str, actual: Any, expected: Any, tol: float = 1e-10,
            stream: TextIO | None = None) -> float:
    """Print ``[ok] label: max |difference| = …`` and return it; raise AssertionError above ``tol``.

    Parameters
    ----------
    label : str
        What is being compared (printed).
    actual, expected : Tensor or array-like
        Two computations of the same thing, compared in float64.
    tol : float
        Largest accepted ``max |actual − expected|``.
    stream : text file, optional
        Where to print (default ``sys.stdout``).

    Raises
    ------
    AssertionError
        When the shapes differ or the largest difference is above ``tol`` (after printing
        ``[FAIL] …``).

    Examples
    --------
    >>> import io, numpy as np
    >>> compare("same", np.ones(2), np.ones(2), stream=io.StringIO())
    0.0
    """
    a = np.asarray(actual.numpy() if isinstance(actual, ta.Tensor) else actual, dtype=np.float64)
    b = np.asarray(expected.numpy() if isinstance(expected, ta.Tensor) else expected,
                   dtype=np.float64)
    if a.shape != b.shape:
        raise AssertionError(f"{label}: shapes differ, {a.shape} vs {b.shape}")
    worst = float(np.max(np.abs(a - b))) if a.size else 0.0
    verdict = "ok" if worst <= tol else "FAIL"
    print(f"  [{verdict}] {label}: max |difference| = {worst:.2e}",
          file=sys.stdout if stream is None else stream)
    if worst > tol:
        raise AssertionError(f"{label}: max |difference| {worst:.3e} > tolerance {tol:.0e}")
    return worst

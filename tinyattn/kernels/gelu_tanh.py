"""GELU's tanh form (``approximate='tanh'``, GPT-2's): the two task functions of its kernel.

With ``u = √(2/π) (x + 0.044715 x³)`` and ``t = tanh(u)``; since
``½ (1 + tanh u) = σ(2u) = 1 / (1 + e^(−2u))`` (σ the logistic function)::

    y = ½ x (1 + t) = x σ(2u),    dy/dx = σ(2u) + 2 x σ(2u) (1 − σ(2u)) √(2/π) (1 + 0.134145 x²)

The σ form has no cancellation where ``t ≈ −1``. It is computed in the input dtype, with
``fast_exp`` (:mod:`.exp`), a polynomial the compiler turns into SIMD code.

:func:`~.gelu.gelu_forward` and :func:`~.gelu.gelu_backward` run these tasks for
``approximate='tanh'``. They are a family of their own (:mod:`.families`): a process that runs
the exact form compiles none of them, nor does its compile-ahead helper.
"""

from __future__ import annotations

import math

from .compiled_only import compiled_only
from .exp import fast_exp
from .parallel import chunk_of
from .simd import prefer_full_width

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
TANH_CUBIC = 0.044715


@compiled_only(error_model="numpy", fastmath={"contract"})
def tanh_forward_chunk(x, grad, out, n_chunks, chunk):
    """Chunk ``chunk`` (of ``n_chunks``) of ``out = x σ(2u)``; ``grad`` is not read."""
    prefer_full_width()
    x, out = chunk_of(x, n_chunks, chunk), chunk_of(out, n_chunks, chunk)
    dtype = x.dtype.type
    one, two = dtype(1.0), dtype(2.0)
    sqrt_2_over_pi, cubic = dtype(SQRT_2_OVER_PI), dtype(TANH_CUBIC)
    for i in range(x.size):
        u = sqrt_2_over_pi * (x[i] + cubic * x[i] * x[i] * x[i])
        out[i] = x[i] / (one + fast_exp(-two * u))


@compiled_only(error_model="numpy", fastmath={"contract"})
def tanh_backward_chunk(x, grad, out, n_chunks, chunk):
    """Chunk ``chunk`` (of ``n_chunks``) of ``out = grad · dy/dx``."""
    prefer_full_width()
    x, grad = chunk_of(x, n_chunks, chunk), chunk_of(grad, n_chunks, chunk)
    out = chunk_of(out, n_chunks, chunk)
    dtype = x.dtype.type
    one, two = dtype(1.0), dtype(2.0)
    sqrt_2_over_pi, cubic = dtype(SQRT_2_OVER_PI), dtype(TANH_CUBIC)
    three_cubic = dtype(3.0 * TANH_CUBIC)
    for i in range(x.size):
        x_sq = x[i] * x[i]
        s = one / (one + fast_exp(-two * sqrt_2_over_pi * (x[i] + cubic * x_sq * x[i])))
        du_dx = sqrt_2_over_pi * (one + three_cubic * x_sq)
        out[i] = grad[i] * (s + two * x[i] * s * (one - s) * du_dx)

"""One Adam / AdamW step over a list of parameters, in place, with PyTorch's exact formulas.

For each parameter ``p`` with gradient ``g``, moments ``m`` and ``v``, at step ``t`` (1-based),
as ``torch.optim.AdamW`` (``decoupled=True``) and ``torch.optim.Adam`` (``decoupled=False``)
do it without amsgrad/maximize::

    decoupled:      p ← p · (1 − lr · wd)           coupled:  g ← g + wd · p
    m ← lerp(m, g, 1 − β1) = m + (1 − β1)(g − m)
    v ← β2 · v + (1 − β2) · g²
    denom = sqrt(v) / sqrt(1 − β2^t) + eps
    p ← p − (lr / (1 − β1^t)) · m / denom

The update is elementwise, so there is no backward. The scalars are converted to the
parameter's dtype before the kernel runs, as PyTorch does with Python scalars, so float32
parameters are updated in float32 arithmetic. The gradient arrays are never modified.

One kernel call per parameter: small parameters (biases, LayerNorm weights) run serially,
because a parallel launch costs more than their update; large ones run in parallel.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from . import FLOAT_DTYPES
from .compiled_only import compiled_only
from .jit import jit
from .parallel import chunk_of, element_chunks, run_tasks

# Parameters with fewer elements than this are updated serially.
_PARALLEL_MIN_SIZE = 8192


@jit(inline="always")
def _adam_update(p, g, m, v, coeffs, lerp_from_start):
    """Update one element and return ``(p, m, v)``; formulas as in the module docstring."""
    (decay, coupled_wd, avg_weight, avg_complement, beta2, one_minus_beta2, neg_step_size,
     bias_correction2_sqrt, eps) = coeffs
    p = p * decay
    g = g + coupled_wd * p
    if lerp_from_start:
        m = m + avg_weight * (g - m)
    else:
        m = g - (g - m) * avg_complement
    v = v * beta2 + one_minus_beta2 * g * g
    denom = np.sqrt(v) / bias_correction2_sqrt + eps
    p = p + neg_step_size * m / denom
    return p, m, v


@compiled_only(error_model="numpy")
def _adam_chunk(param, grad, exp_avg, exp_avg_sq, coeffs, lerp_from_start, n_chunks, chunk):
    """Chunk ``chunk`` of the elements (of ``n_chunks`` near-equal chunks), updated in place."""
    p, g = chunk_of(param, n_chunks, chunk), chunk_of(grad, n_chunks, chunk)
    m, v = chunk_of(exp_avg, n_chunks, chunk), chunk_of(exp_avg_sq, n_chunks, chunk)
    for i in range(p.size):
        p[i], m[i], v[i] = _adam_update(p[i], g[i], m[i], v[i], coeffs, lerp_from_start)


def _step_scalars(step: int, lr: float, beta1: float, beta2: float, weight_decay: float,
                  decoupled: bool) -> tuple[float, float, float, float, float]:
    """(decay, coupled_wd, neg_step_size, bias_correction2_sqrt, avg_weight) in float64."""
    decay = 1.0 - lr * weight_decay if decoupled else 1.0
    coupled_wd = 0.0 if decoupled else weight_decay
    bias_correction1 = 1.0 - beta1**step
    bias_correction2 = 1.0 - beta2**step
    return decay, coupled_wd, -lr / bias_correction1, math.sqrt(bias_correction2), 1.0 - beta1


def _assert_step_args(params, grads, exp_avgs, exp_avg_sqs, step, lr, beta1, beta2, eps,
                      weight_decay) -> None:
    assert len(params) == len(grads) == len(exp_avgs) == len(exp_avg_sqs)
    assert step >= 1 and lr >= 0 and 0 <= beta1 < 1 and 0 <= beta2 < 1 and eps >= 0, (
        step, lr, beta1, beta2, eps)
    assert weight_decay >= 0, weight_decay
    for param, grad, exp_avg, exp_avg_sq in zip(params, grads, exp_avgs, exp_avg_sqs):
        assert param.dtype in FLOAT_DTYPES, f"float32 or float64 expected, got {param.dtype}"
        for array in (grad, exp_avg, exp_avg_sq):
            assert array.shape == param.shape and array.dtype == param.dtype, (
                array.shape, array.dtype, param.shape, param.dtype)
        for array in (param, exp_avg, exp_avg_sq):  # updated in place through a flat view
            assert array.flags.c_contiguous and array.flags.writeable


def adamw_step(
    params: Sequence[np.ndarray], grads: Sequence[np.ndarray], exp_avgs: Sequence[np.ndarray],
    exp_avg_sqs: Sequence[np.ndarray], step: int, lr: float, beta1: float, beta2: float,
    eps: float, weight_decay: float, decoupled: bool,
) -> None:
    """Apply one Adam (``decoupled=False``) or AdamW (``decoupled=True``) step in place.

    Updates ``params``, ``exp_avgs`` and ``exp_avg_sqs`` (see the module docstring for the
    formulas); ``step`` is the 1-based count of steps taken including this one.

    Parameters
    ----------
    params, grads, exp_avgs, exp_avg_sqs : sequences of ndarrays, matching shape and dtype
        (float32 or float64); all but ``grads`` must be writeable and C-contiguous.
    step : int >= 1
    lr, beta1, beta2, eps, weight_decay : float
    decoupled : bool

    Examples
    --------
    >>> p, g = np.array([1.0]), np.array([0.5])
    >>> m, v = np.zeros(1), np.zeros(1)
    >>> adamw_step([p], [g], [m], [v], 1, 0.1, 0.9, 0.999, 1e-8, 0.0, True)
    >>> p.round(6).tolist()
    [0.9]
    """
    _assert_step_args(params, grads, exp_avgs, exp_avg_sqs, step, lr, beta1, beta2, eps,
                      weight_decay)
    decay, coupled_wd, neg_step_size, bias_correction2_sqrt, avg_weight = _step_scalars(
        step, lr, beta1, beta2, weight_decay, decoupled)
    lerp_from_start = abs(avg_weight) < 0.5
    for param, grad, exp_avg, exp_avg_sq in zip(params, grads, exp_avgs, exp_avg_sqs,
                                                strict=True):
        dtype = param.dtype.type
        # The scalars in the parameter's dtype, in the order _adam_update unpacks them.
        coeffs = (dtype(decay), dtype(coupled_wd), dtype(avg_weight),
                  dtype(1.0) - dtype(avg_weight), dtype(beta2), dtype(1.0 - beta2),
                  dtype(neg_step_size), dtype(bias_correction2_sqrt), dtype(eps))
        parallel = param.size >= _PARALLEL_MIN_SIZE
        n_chunks = element_chunks(param.size, parallel)
        run_tasks(_adam_chunk, n_chunks, param.reshape(-1), np.ascontiguousarray(grad).reshape(-1),
                  exp_avg.reshape(-1), exp_avg_sq.reshape(-1), coeffs, lerp_from_start, n_chunks,
                  parallel=parallel)


def adamw_step_numpy(
    params: Sequence[np.ndarray], grads: Sequence[np.ndarray], exp_avgs: Sequence[np.ndarray],
    exp_avg_sqs: Sequence[np.ndarray], step: int, lr: float, beta1: float, beta2: float,
    eps: float, weight_decay: float, decoupled: bool,
) -> None:
    """Plain-numpy twin of :func:`adamw_step` (the test oracle), also in place."""
    decay, coupled_wd, neg_step_size, bias_correction2_sqrt, avg_weight = _step_scalars(
        step, lr, beta1, beta2, weight_decay, decoupled)
    for param, grad, exp_avg, exp_avg_sq in zip(params, grads, exp_avgs, exp_avg_sqs,
                                                strict=True):
        dtype = param.dtype.type
        param *= dtype(decay)
        grad = grad + dtype(coupled_wd) * param
        if abs(avg_weight) < 0.5:
            exp_avg += dtype(avg_weight) * (grad - exp_avg)
        else:
            exp_avg[...] = grad - (grad - exp_avg) * (dtype(1.0) - dtype(avg_weight))
        exp_avg_sq *= dtype(beta2)
        exp_avg_sq += dtype(1.0 - beta2) * grad * grad
        denom = np.sqrt(exp_avg_sq) / dtype(bias_correction2_sqrt) + dtype(eps)
        param += dtype(neg_step_size) * exp_avg / denom

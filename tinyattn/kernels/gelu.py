"""GELU activation, elementwise on any shape, forward and backward.

``approximate='none'`` (``torch.nn.functional.gelu`` default), with Φ/φ the standard normal
CDF/density::

    y = x · Φ(x) = ½ x (1 + erf(x / √2)),        dy/dx = Φ(x) + x · φ(x)

``approximate='tanh'``, with ``u = √(2/π) (x + 0.044715 x³)`` and ``t = tanh(u)``::

    y = ½ x (1 + t),        dy/dx = ½ (1 + t) + ½ x (1 − t²) √(2/π) (1 + 3 · 0.044715 x²)

The kernels run in parallel over the flattened elements and compute in the input dtype: the
constants are passed in already converted to it, because a Python float literal inside a
numba kernel is a float64 and would promote float32 arithmetic.

``erf``: float64 uses ``math.erf`` (libm, correctly rounded to within an ulp). A libm call per
element cannot be vectorised, and for float32 it costs ~15x what the rest of GELU does, so
float32 uses :func:`_erf_rational` instead: ``erf(z) ≈ z·P(z²)/Q(z²)`` on ``|z| ≤ 4``
(``±1`` beyond, where ``1 − erf(4) < 1.6e-8``), a degree-5/5 rational in ``z²`` fitted to
``math.erf`` by iteratively reweighted least squares. It is evaluated in float64 (SIMD, no
calls) with a maximum absolute error of 2.2e-8, below float32's half-ulp of 1.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange, types
from numba.extending import overload

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_TANH_CUBIC = 0.044715
_APPROXIMATIONS = ("none", "tanh")

# erf(z) ≈ z · (P0 + P1 s + … + P5 s⁵) / (1 + Q1 s + … + Q5 s⁵), s = z², |z| ≤ 4.
_ERF_P = (1.1283789791992742, 0.19622881974229833, 0.05346365142523351,
          0.004002400526749555, 0.000287949133049796, 1.9741926029492873e-06)
_ERF_Q = (0.5072344485106259, 0.11646701166030776, 0.015442066845212375,
          0.0012159324210391223, 3.7469301973208635e-05)
_ERF_CLAMP = 4.0


@njit(cache=True)
def _erf_rational(z):
    """Rational approximation of erf, in float64, max abs error 2.2e-8 (see module doc)."""
    p0, p1, p2, p3, p4, p5 = _ERF_P
    q1, q2, q3, q4, q5 = _ERF_Q
    z = min(max(np.float64(z), -_ERF_CLAMP), _ERF_CLAMP)
    s = z * z
    numerator = z * (p0 + s * (p1 + s * (p2 + s * (p3 + s * (p4 + s * p5)))))
    denominator = 1.0 + s * (q1 + s * (q2 + s * (q3 + s * (q4 + s * q5))))
    return numerator / denominator


def _erf_kernel(z):
    """erf in the dtype of ``z``: libm for float64, :func:`_erf_rational` for float32."""
    return math.erf(z)


@overload(_erf_kernel)
def _erf_overload(z):
    if z == types.float32:
        return lambda z: np.float32(_erf_rational(z))
    return lambda z: math.erf(z)


@njit(cache=True, parallel=True)
def _gelu_erf_forward_kernel(x, out, half, inv_sqrt2):
    for i in prange(x.size):
        half_x = half * x[i]
        out[i] = half_x + half_x * _erf_kernel(x[i] * inv_sqrt2)


@njit(cache=True, parallel=True)
def _gelu_erf_backward_kernel(x, grad, out, half, inv_sqrt2, inv_sqrt_2pi):
    for i in prange(x.size):
        cdf = half + half * _erf_kernel(x[i] * inv_sqrt2)
        pdf = inv_sqrt_2pi * math.exp(-half * x[i] * x[i])
        out[i] = grad[i] * (cdf + x[i] * pdf)


@njit(cache=True, parallel=True)
def _gelu_tanh_forward_kernel(x, out, half, sqrt_2_over_pi, cubic):
    for i in prange(x.size):
        u = sqrt_2_over_pi * (x[i] + cubic * x[i] * x[i] * x[i])
        half_x = half * x[i]
        out[i] = half_x + half_x * math.tanh(u)


@njit(cache=True, parallel=True)
def _gelu_tanh_backward_kernel(x, grad, out, one, half, sqrt_2_over_pi, cubic, three_cubic):
    for i in prange(x.size):
        x_sq = x[i] * x[i]
        t = math.tanh(sqrt_2_over_pi * (x[i] + cubic * x_sq * x[i]))
        du_dx = sqrt_2_over_pi * (one + three_cubic * x_sq)
        out[i] = grad[i] * (half * (one + t) + half * x[i] * (one - t * t) * du_dx)


def _check_input(name: str, label: str, x: np.ndarray) -> None:
    if not isinstance(x, np.ndarray) or x.dtype not in (np.float32, np.float64):
        raise TypeError(f"{name}: {label} must be a float32 or float64 ndarray, got "
                        f"{type(x).__name__} of dtype {getattr(x, 'dtype', None)}")


def _check_approximate(name: str, approximate: str) -> None:
    if approximate not in _APPROXIMATIONS:
        raise ValueError(f"{name}: approximate must be 'none' or 'tanh', got {approximate!r}")


def gelu_forward(x: np.ndarray, approximate: str = "none") -> np.ndarray:
    """GELU of every element of ``x``: ``x · Φ(x)`` (or its tanh approximation).

    Parameters
    ----------
    x : ndarray, any shape, float32 or float64
    approximate : {'none', 'tanh'}

    Returns
    -------
    ndarray, same shape and dtype as ``x``.

    Examples
    --------
    >>> gelu_forward(np.array([0.0, 1.0])).round(6).tolist()
    [0.0, 0.841345]
    """
    _check_input("gelu_forward", "x", x)
    _check_approximate("gelu_forward", approximate)
    dtype = x.dtype.type
    flat = np.ascontiguousarray(x).reshape(-1)
    out = np.empty_like(flat)
    if approximate == "none":
        _gelu_erf_forward_kernel(flat, out, dtype(0.5), dtype(_INV_SQRT_2))
    else:
        _gelu_tanh_forward_kernel(flat, out, dtype(0.5), dtype(_SQRT_2_OVER_PI),
                                  dtype(_TANH_CUBIC))
    return out.reshape(x.shape)


def gelu_backward(x: np.ndarray, grad: np.ndarray, approximate: str = "none") -> np.ndarray:
    """Gradient of :func:`gelu_forward`: ``dx = grad · dy/dx`` elementwise.

    ``dy/dx = Φ(x) + x φ(x)`` exactly, or for 'tanh'
    ``½ (1 + t) + ½ x (1 − t²) √(2/π) (1 + 3 · 0.044715 x²)`` with ``t = tanh(u)``.

    Parameters
    ----------
    x : ndarray, the forward input, float32 or float64
    grad : ndarray, upstream gradient, same shape and dtype as ``x``
    approximate : {'none', 'tanh'}

    Returns
    -------
    ndarray, same shape and dtype as ``x``.
    """
    _check_input("gelu_backward", "x", x)
    _check_input("gelu_backward", "grad", grad)
    _check_approximate("gelu_backward", approximate)
    if grad.shape != x.shape or grad.dtype != x.dtype:
        raise ValueError(f"gelu_backward: grad must match x, got grad {grad.shape} {grad.dtype}"
                         f" and x {x.shape} {x.dtype}")
    dtype = x.dtype.type
    flat_x = np.ascontiguousarray(x).reshape(-1)
    flat_grad = np.ascontiguousarray(grad).reshape(-1)
    out = np.empty_like(flat_x)
    if approximate == "none":
        _gelu_erf_backward_kernel(flat_x, flat_grad, out, dtype(0.5), dtype(_INV_SQRT_2),
                                  dtype(_INV_SQRT_2PI))
    else:
        _gelu_tanh_backward_kernel(flat_x, flat_grad, out, dtype(1.0), dtype(0.5),
                                   dtype(_SQRT_2_OVER_PI), dtype(_TANH_CUBIC),
                                   dtype(3.0 * _TANH_CUBIC))
    return out.reshape(x.shape)


_erf_ufunc = np.frompyfunc(math.erf, 1, 1)


def _erf_numpy(x: np.ndarray) -> np.ndarray:
    return np.asarray(_erf_ufunc(x), dtype=np.float64).astype(x.dtype)


def gelu_forward_numpy(x: np.ndarray, approximate: str = "none") -> np.ndarray:
    """Plain-numpy twin of :func:`gelu_forward` (the test oracle; erf from ``math.erf``)."""
    dtype = x.dtype.type
    if approximate == "none":
        return dtype(0.5) * x * (dtype(1.0) + _erf_numpy(x * dtype(_INV_SQRT_2)))
    u = dtype(_SQRT_2_OVER_PI) * (x + dtype(_TANH_CUBIC) * x * x * x)
    return dtype(0.5) * x * (dtype(1.0) + np.tanh(u))


def gelu_backward_numpy(x: np.ndarray, grad: np.ndarray, approximate: str = "none") -> np.ndarray:
    """Plain-numpy twin of :func:`gelu_backward` (the test oracle)."""
    dtype = x.dtype.type
    if approximate == "none":
        cdf = dtype(0.5) * (dtype(1.0) + _erf_numpy(x * dtype(_INV_SQRT_2)))
        pdf = dtype(_INV_SQRT_2PI) * np.exp(dtype(-0.5) * x * x)
        return grad * (cdf + x * pdf)
    t = np.tanh(dtype(_SQRT_2_OVER_PI) * (x + dtype(_TANH_CUBIC) * x * x * x))
    du_dx = dtype(_SQRT_2_OVER_PI) * (dtype(1.0) + dtype(3.0 * _TANH_CUBIC) * x * x)
    return grad * (dtype(0.5) * (dtype(1.0) + t) + dtype(0.5) * x * (dtype(1.0) - t * t) * du_dx)

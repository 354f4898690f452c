"""GELU activation, elementwise on any shape, forward and backward.

``approximate='none'`` (``torch.nn.functional.gelu`` default), with Φ/φ the standard normal
CDF/density::

    y = x · Φ(x) = ½ x (1 + erf(x / √2)),        dy/dx = Φ(x) + x · φ(x)

``approximate='tanh'``, with ``u = √(2/π) (x + 0.044715 x³)`` and ``t = tanh(u)``; since
``½ (1 + tanh u) = σ(2u) = 1 / (1 + e^(−2u))`` (σ the logistic function)::

    y = ½ x (1 + t) = x σ(2u),    dy/dx = σ(2u) + 2 x σ(2u) (1 − σ(2u)) √(2/π) (1 + 0.134145 x²)

The σ form has no cancellation where ``t ≈ −1``. It is computed in the input dtype.

Φ without libm. A libm call per element (``erf``, ``tanh``, ``exp``) cannot be vectorised and
costs more than the rest of GELU together, so every function here is a polynomial that the
compiler turns into SIMD code: ``fast_exp`` (see ``softmax``) and, for Φ, with ``a = |x| / √2``
and ``t = 2 / (2 + a) ∈ (0, 1]``::

    erfc(a) = t · exp(−a² + (1 − t) · Q(t)),    Φ(x) = ½ erfc(a) if x < 0 else 1 − ½ erfc(a)

``Q`` is smooth on ``t ∈ [2 / (2 + A), 1]``: a Chebyshev series in ``t`` mapped to ``[−1, 1]``,
fitted by least squares at 300 Chebyshev nodes to ``(log(erfc(a) / t) + a²) / (1 − t)``
evaluated with mpmath at 40 digits, and evaluated by Horner's rule in the power basis (see
:func:`_power_pieces`). The final ``e^(...)`` is ``exp_float64`` of degree 7 for float32 results
and 13 for float64. An error ``ε`` in the
exponent is a relative error ``ε`` in ``erfc``; the tail ``x < 0`` is computed directly (no
``1 − erf`` cancellation), so ``Φ`` and ``y`` keep their relative accuracy down to underflow.
The factor ``1 − t`` makes ``erfc(0) = 1`` and ``Φ(0) = ½`` exact. Beyond ``a = A``, ``t`` is
held at its end value; ``e^(−a²)`` is then below the smallest result the dtype can hold.

- float32 (``A = 11``, 12 terms): exponent error ≤ 7.1e-10; evaluated in float64 and rounded
  once: measured relative error of ``y`` and ``dy/dx`` ≤ 5.3e-8 on ``[−13, 10]``.
- float64 (``A = 27``, 25 terms): exponent error ≤ 4.4e-16; measured relative error of ``y``
  ≤ 8.3e-15 on ``[−6, 6]``, ≤ 2.9e-13 down to ``x = −37`` (the rounding of ``x²`` dominates).

Inputs of at least ``_PARALLEL_MIN_ELEMENTS`` elements are split into chunks run in parallel;
smaller ones run serially, where waking the thread pool would cost more than the work. Each
element is computed independently, so the result does not depend on the path.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange, types
from numba.extending import overload
from numpy.polynomial import chebyshev

from .softmax import EXP_TAYLOR_7, EXP_TAYLOR_13, exp_float64, fast_exp

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_TANH_CUBIC = 0.044715
_APPROXIMATIONS = ("none", "tanh")
_CHUNK = 16384
_PARALLEL_MIN_ELEMENTS = 65536

# Chebyshev coefficients of Q (module docstring), and t_min = 2 / (2 + A), per dtype.
_Q_FLOAT32 = (-1.3096450346181565, 0.02383535624398739, 0.030554180804515198,
              -0.0007666414397950006, -0.0008196098659252165, 6.210487040155664e-05,
              2.6118150838483508e-05, -4.340633270445102e-06, -7.169690811205605e-07,
              2.544042024773414e-07, 5.447089915729531e-09, -1.2067741101118915e-08)
_Q_FLOAT64 = (-1.3052932672098012, 0.013334120192294609, 0.0364555238471708,
              -0.00013130024031883161, -0.0012093639773430405, 4.103935412854443e-05,
              5.164629008370631e-05, -4.9617623171916404e-06, -2.266864148115275e-06,
              4.4608513900351274e-07, 8.246560726611224e-08, -3.3090625474906596e-08,
              -1.0260652347457176e-09, 2.002520128088747e-09, -1.9198953647738327e-10,
              -8.89126537308842e-11, 2.327937101202256e-11, 1.618255982085438e-12,
              -1.5407287088470615e-12, 1.5559107720086511e-13, 5.663430226364271e-14,
              -1.7778599918300037e-14, 3.5013303854395863e-16, 8.033796903807983e-16,
              -1.6770126117963066e-16)


def _power_pieces(chebyshev_coeffs: tuple) -> tuple[tuple, tuple]:
    """Power-basis coefficients in ``y``, split as ``Q(y) = low(y) + y^13 · high(y)``.

    Each piece has at most 13 terms, so that the compiler unrolls its Horner loop and
    vectorises over elements (it does not unroll a 25-term loop). The power basis is well
    conditioned here: the absolute coefficients sum to less than 1.5.
    """
    power = [float(c) for c in chebyshev.cheb2poly(chebyshev_coeffs)]
    return tuple(power[:13]), tuple(power[13:]) or (0.0,)


def _series(chebyshev_coeffs: tuple, a_max: float, taylor: tuple) -> tuple:
    """``(low, high, a_max, t_min, 1 / (1 − t_min), taylor)`` for :func:`_normal_cdf`."""
    t_min = 2.0 / (2.0 + a_max)
    return (*_power_pieces(chebyshev_coeffs), a_max, t_min, 1.0 / (1.0 - t_min), taylor)


# Per dtype: the pieces of Q, its range end A, and the Taylor coefficients of e^r.
_Q_SERIES = {np.float32: _series(_Q_FLOAT32, 11.0, EXP_TAYLOR_7),
             np.float64: _series(_Q_FLOAT64, 27.0, EXP_TAYLOR_13)}


def _series_of(x):
    """The ``_Q_SERIES`` entry for the dtype of array ``x`` (in numba code)."""
    return _Q_SERIES[x.dtype.type]


@overload(_series_of, jit_options={"cache": True})
def _series_of_overload(x):
    series = _Q_SERIES[np.float32 if x.dtype == types.float32 else np.float64]
    return lambda x: series


@njit(cache=True, inline="always", error_model="numpy")
def _horner(coeffs, y):
    value = coeffs[len(coeffs) - 1]
    for k in range(len(coeffs) - 2, -1, -1):
        value = coeffs[k] + y * value
    return value


@njit(cache=True, inline="always", error_model="numpy")
def _normal_cdf(x, series):
    """Φ(x) for a float64 ``x`` (module docstring): ``½ erfc(|x| / √2)`` or its complement."""
    low, high, a_max, t_min, inv_width, taylor = series
    t = 2.0 / (2.0 + min(abs(x) * _INV_SQRT_2, a_max))
    y = (2.0 * t - 1.0 - t_min) * inv_width  # [t_min, 1] -> [-1, 1]
    y_13 = y * y * y
    y_13 = y_13 * y_13 * y_13 * y_13 * y
    q = _horner(low, y) + y_13 * _horner(high, y)
    half_erfc = 0.5 * t * exp_float64((1.0 - t) * q - 0.5 * x * x, taylor)
    return half_erfc if x < 0.0 else 1.0 - half_erfc


@njit(cache=True, error_model="numpy", fastmath={"contract"})
def _erf_forward_span(x, out, start, stop):
    series = _series_of(x)
    for i in range(start, stop):
        value = np.float64(x[i])
        out[i] = value * _normal_cdf(value, series)


@njit(cache=True, error_model="numpy", fastmath={"contract"})
def _erf_backward_span(x, grad, out, start, stop):
    series = _series_of(x)
    for i in range(start, stop):
        value = np.float64(x[i])
        density = _INV_SQRT_2PI * exp_float64(-0.5 * value * value, series[5])
        out[i] = grad[i] * (_normal_cdf(value, series) + value * density)


@njit(cache=True, error_model="numpy", fastmath={"contract"})
def _tanh_forward_span(x, out, start, stop):
    dtype = x.dtype.type
    one, two = dtype(1.0), dtype(2.0)
    sqrt_2_over_pi, cubic = dtype(_SQRT_2_OVER_PI), dtype(_TANH_CUBIC)
    for i in range(start, stop):
        u = sqrt_2_over_pi * (x[i] + cubic * x[i] * x[i] * x[i])
        out[i] = x[i] / (one + fast_exp(-two * u))


@njit(cache=True, error_model="numpy", fastmath={"contract"})
def _tanh_backward_span(x, grad, out, start, stop):
    dtype = x.dtype.type
    one, two = dtype(1.0), dtype(2.0)
    sqrt_2_over_pi, cubic = dtype(_SQRT_2_OVER_PI), dtype(_TANH_CUBIC)
    three_cubic = dtype(3.0 * _TANH_CUBIC)
    for i in range(start, stop):
        x_sq = x[i] * x[i]
        s = one / (one + fast_exp(-two * sqrt_2_over_pi * (x[i] + cubic * x_sq * x[i])))
        du_dx = sqrt_2_over_pi * (one + three_cubic * x_sq)
        out[i] = grad[i] * (s + two * x[i] * s * (one - s) * du_dx)


@njit(cache=True, error_model="numpy")
def _gelu_span(x, grad, out, backward, exact, start, stop):
    if backward and exact:
        _erf_backward_span(x, grad, out, start, stop)
    elif backward:
        _tanh_backward_span(x, grad, out, start, stop)
    elif exact:
        _erf_forward_span(x, out, start, stop)
    else:
        _tanh_forward_span(x, out, start, stop)


@njit(cache=True, parallel=True)
def _gelu_kernel(x, grad, out, backward, exact, parallel):
    """Forward or backward (``backward``), exact or tanh form (``exact``), on all elements."""
    if parallel:
        for c in prange((x.size + _CHUNK - 1) // _CHUNK):
            _gelu_span(x, grad, out, backward, exact, c * _CHUNK,
                       min(x.size, (c + 1) * _CHUNK))
    else:
        _gelu_span(x, grad, out, backward, exact, 0, x.size)


def _check_input(name: str, label: str, x: np.ndarray) -> None:
    if not isinstance(x, np.ndarray) or x.dtype not in (np.float32, np.float64):
        raise TypeError(f"{name}: {label} must be a float32 or float64 ndarray, got "
                        f"{type(x).__name__} of dtype {getattr(x, 'dtype', None)}")


def _check_approximate(name: str, approximate: str) -> None:
    if approximate not in _APPROXIMATIONS:
        raise ValueError(f"{name}: approximate must be 'none' or 'tanh', got {approximate!r}")


def _run(x: np.ndarray, grad: np.ndarray | None, approximate: str) -> np.ndarray:
    flat = np.ascontiguousarray(x).reshape(-1)
    flat_grad = flat if grad is None else np.ascontiguousarray(grad).reshape(-1)
    out = np.empty_like(flat)
    if flat.size:
        _gelu_kernel(flat, flat_grad, out, grad is not None, approximate == "none",
                     flat.size >= _PARALLEL_MIN_ELEMENTS)
    return out.reshape(x.shape)


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
    return _run(x, None, approximate)


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

    Examples
    --------
    >>> gelu_backward(np.array([0.0]), np.array([2.0])).tolist()
    [1.0]
    """
    _check_input("gelu_backward", "x", x)
    _check_input("gelu_backward", "grad", grad)
    _check_approximate("gelu_backward", approximate)
    if grad.shape != x.shape or grad.dtype != x.dtype:
        raise ValueError(f"gelu_backward: grad must match x, got grad {grad.shape} {grad.dtype}"
                         f" and x {x.shape} {x.dtype}")
    return _run(x, grad, approximate)


_erfc_ufunc = np.frompyfunc(math.erfc, 1, 1)


def _normal_cdf_numpy(x: np.ndarray) -> np.ndarray:
    """Φ(x) = ½ erfc(−x / √2) in float64 from libm's ``erfc`` (accurate in both tails)."""
    x64 = np.asarray(x, dtype=np.float64)
    return 0.5 * np.asarray(_erfc_ufunc(-x64 * _INV_SQRT_2), dtype=np.float64)


def gelu_forward_numpy(x: np.ndarray, approximate: str = "none") -> np.ndarray:
    """Plain-numpy twin of :func:`gelu_forward` (the test oracle; Φ from ``math.erfc``)."""
    dtype = x.dtype.type
    if approximate == "none":
        return (x.astype(np.float64) * _normal_cdf_numpy(x)).astype(dtype)
    u = dtype(_SQRT_2_OVER_PI) * (x + dtype(_TANH_CUBIC) * x * x * x)
    return dtype(0.5) * x * (dtype(1.0) + np.tanh(u))


def gelu_backward_numpy(x: np.ndarray, grad: np.ndarray, approximate: str = "none") -> np.ndarray:
    """Plain-numpy twin of :func:`gelu_backward` (the test oracle)."""
    dtype = x.dtype.type
    if approximate == "none":
        x64 = x.astype(np.float64)
        pdf = _INV_SQRT_2PI * np.exp(-0.5 * x64 * x64)
        return (grad * (_normal_cdf_numpy(x) + x64 * pdf)).astype(dtype)
    t = np.tanh(dtype(_SQRT_2_OVER_PI) * (x + dtype(_TANH_CUBIC) * x * x * x))
    du_dx = dtype(_SQRT_2_OVER_PI) * (dtype(1.0) + dtype(3.0 * _TANH_CUBIC) * x * x)
    return grad * (dtype(0.5) * (dtype(1.0) + t) + dtype(0.5) * x * (dtype(1.0) - t * t) * du_dx)

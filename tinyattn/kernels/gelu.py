"""GELU activation, elementwise on any shape, forward and backward.

``approximate='none'`` (``torch.nn.functional.gelu`` default), with Φ/φ the standard normal
CDF/density::

    y = x · Φ(x) = ½ x (1 + erf(x / √2)),        dy/dx = Φ(x) + x · φ(x)

``approximate='tanh'``: :mod:`.gelu_tanh` (its kernels are a family of their own).

Φ without libm. A libm call per element (``erf``, ``tanh``, ``exp``) cannot be vectorised and
costs more than the rest of GELU together, so every function here is a polynomial that the
compiler turns into SIMD code. For Φ, with ``a = |x| / √2`` and ``t = 2 / (2 + a) ∈ (0, 1]``::

    erfc(a) = t · exp(−a² + (1 − t) · Q(t)),    Φ(x) = ½ erfc(a) if x < 0 else 1 − ½ erfc(a)

``Q`` is smooth on ``t ∈ [2 / (2 + A), 1]``: a Chebyshev series in ``t`` mapped to ``[−1, 1]``,
fitted by least squares at 300 Chebyshev nodes to ``(log(erfc(a) / t) + a²) / (1 − t)``
(float64: evaluated with mpmath at 40 digits; float32: with ``math.erfc``), and evaluated in
the power basis. An error ``ε`` in the exponent is a relative error ``ε`` in
``erfc``; the tail ``x < 0`` is computed directly (no ``1 − erf`` cancellation), so ``Φ`` and
``y`` keep their relative accuracy far into the tail. ``1 − t = a t / 2`` makes ``erfc(0) = 1``
and ``Φ(0) = ½`` exact. Beyond ``a = A``, ``t`` is held at its end value; ``e^(−a²)`` is then
below the smallest result the dtype can hold.

- float32 (``A = 9.5``, 10 terms), evaluated in float32 arithmetic (8 lanes per SIMD register with
  AVX2, 16 with AVX-512; polynomials by Estrin's scheme, ``e^(...)`` by the float32 exponential
  behind ``fast_exp`` without its overflow and NaN checks (the exponent is at most about 0, and
  ``x`` carries a NaN to the result), called directly so that its multiply-adds are fused as in
  the rest of the loop; ``t`` mapped to ``y`` by one multiply-add): exponent error ≤ 7.3e-9 (fit)
  and ≤ 8e-8 after float32 rounding. ``x²`` is split as ``x_hi² + x_lo (|x| + x_hi)`` with
  ``x_hi`` (``|x|`` rounded to 12 bits) squared exactly, so the exponent is rounded once, by at
  most half an ulp of ``a² ≈ x² / 2`` (4.8e-7 relative at ``x = −5``, 3.8e-6 at ``x = −13``). The
  backward pass gets ``φ = e · M(t) / √(2π)`` from a second 10-term fit ``M(t) = t e^(−a²) /
  erfc(a)`` (error ≤ 2.4e-7) instead of a second exponential. Measured on ``[−13, 10]``: relative
  error of ``y`` ≤ 7.3e-7 for ``x ≥ −5`` and ≤ 4.2e-6 below, error of ``dy/dx`` ≤ 1.4e-7 of
  ``max(1, |dy/dx|)``. Exponents below −87 are flushed to zero (``y = 0`` for ``x`` below about
  −13.1, where ``|y| < 2e-38``).
- float64 (``A = 27``, 25 terms, ``Q`` split as ``low(y) + y^13 · high(y)`` so that each Horner
  loop is unrolled and vectorised; see :func:`_power_pieces`), evaluated in float64 with
  ``exp_float64`` of degree 13: exponent error ≤ 4.4e-16; measured relative error of ``y``
  ≤ 8.3e-15 on ``[−6, 6]``, ≤ 2.9e-13 down to ``x = −37`` (the rounding of ``x²`` dominates).

Inputs of at least ``_PARALLEL_MIN_ELEMENTS`` elements are split into chunks run in parallel;
smaller ones run in one serial pass, where waking the thread pool would cost more than the work.
On the AMD EPYC of ``benchmarks/README.md`` (``bench_thresholds.py``, three runs, 2 threads,
float32) two threads took 0.68–0.91× the serial time at 16384 elements, forward and backward,
and 0.60–0.69× at 32768 (a small GPT's MLP at 64 tokens); at 8192, 0.84–0.98×, a margin
within the spread between runs.
Each element is computed independently, so the result does not depend on the path.
"""

from __future__ import annotations

import math

import numpy as np
from numba import types
from numba.extending import overload
from numpy.polynomial import chebyshev

from . import FLOAT_DTYPES
from .aligned import aligned_empty_like
from .compiled_only import compiled_only

# exp_float32_no_overflow rather than fast_exp: an inlined function takes this module's
# fastmath flags
from .exp import EXP_TAYLOR_13, exp_float32_no_overflow, exp_float64
from .gelu_tanh import SQRT_2_OVER_PI, TANH_CUBIC, tanh_backward_chunk, tanh_forward_chunk
from .inline import always_inline
from .parallel import chunk_of, element_chunks, run_tasks
from .simd import prefer_full_width

_INV_SQRT_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_APPROXIMATIONS = ("none", "tanh")
_PARALLEL_MIN_ELEMENTS = 16384

# Chebyshev coefficients of Q (module docstring) per dtype, fitted on a <= A.
_Q_FLOAT32 = (-1.310459558856565, 0.026063538236783524, 0.029159918040133116,
              -0.0008642750229437341, -0.0007378426184529109, 6.254041498624141e-05,
              2.161884519626854e-05, -3.968902942054302e-06, -5.068349973854295e-07,
              2.1108124218053566e-07)
_A_MAX_FLOAT32 = 9.5
# float32 only: Chebyshev coefficients of M(t) = t e^(−a²) / erfc(a), fitted on a <= 9.5.
_MILLS_FLOAT32 = (1.8582094857198341, -0.9750852810948457, 0.11624321620041637,
                  0.0028973835079408932, -0.002310767147719604, -3.440798255755943e-05,
                  8.695576577950494e-05, -3.552126411960659e-06, -3.581294508952167e-06,
                  4.5631189182644784e-07)
_Q_FLOAT64 = (-1.3052932672098012, 0.013334120192294609, 0.0364555238471708,
              -0.00013130024031883161, -0.0012093639773430405, 4.103935412854443e-05,
              5.164629008370631e-05, -4.9617623171916404e-06, -2.266864148115275e-06,
              4.4608513900351274e-07, 8.246560726611224e-08, -3.3090625474906596e-08,
              -1.0260652347457176e-09, 2.002520128088747e-09, -1.9198953647738327e-10,
              -8.89126537308842e-11, 2.327937101202256e-11, 1.618255982085438e-12,
              -1.5407287088470615e-12, 1.5559107720086511e-13, 5.663430226364271e-14,
              -1.7778599918300037e-14, 3.5013303854395863e-16, 8.033796903807983e-16,
              -1.6770126117963066e-16)
_A_MAX_FLOAT64 = 27.0


def _power_pieces(chebyshev_coeffs: tuple) -> tuple[tuple, tuple]:
    """Power-basis coefficients in ``y``, split as ``Q(y) = low(y) + y^13 · high(y)``.

    Each piece has at most 13 terms, so that the compiler unrolls its Horner loop and
    vectorises over elements (it does not unroll a 25-term loop). The power basis is well
    conditioned here: the absolute coefficients sum to less than 1.5.
    """
    power = [float(c) for c in chebyshev.cheb2poly(chebyshev_coeffs)]
    return tuple(power[:13]), tuple(power[13:]) or (0.0,)


def _interval_map(a_max: float) -> tuple[float, float]:
    """``(scale, offset)`` of the map of ``[t_min, 1]`` onto ``[−1, 1]``, ``t_min = 2 / (2 + A)``:
    ``y = (2t − 1 − t_min) / (1 − t_min) = t · scale + offset``, one multiply-add."""
    t_min = 2.0 / (2.0 + a_max)
    return 2.0 / (1.0 - t_min), -(1.0 + t_min) / (1.0 - t_min)


# float64: (low, high, A, scale, offset) for :func:`_normal_cdf_float64`.
_SERIES_FLOAT64 = (*_power_pieces(_Q_FLOAT64), _A_MAX_FLOAT64, *_interval_map(_A_MAX_FLOAT64))
# float32: every constant is a float32, so that no operation is promoted to float64.
_F32 = np.float32
_Q_POWER_FLOAT32 = tuple(_F32(c) for c in chebyshev.cheb2poly(_Q_FLOAT32))
_DENSITY_POWER_FLOAT32 = tuple(_F32(c * _INV_SQRT_2PI)
                               for c in chebyshev.cheb2poly(_MILLS_FLOAT32))
_Y_SCALE_FLOAT32, _Y_OFFSET_FLOAT32 = (_F32(v) for v in _interval_map(_A_MAX_FLOAT32))
# e^(−x²/2) is flushed to zero beyond |x| ≈ 13.1; clamping |x| keeps x² finite.
_ABS_X_MAX_FLOAT32 = _F32(14.0)
# |x| + 2^15 − 2^15 rounds |x| <= 14 to a multiple of 2^-8: 12 bits, so its square is exact
_SPLIT_SHIFT = _F32(2.0**15)
_ZERO, _HALF, _ONE, _TWO = _F32(0.0), _F32(0.5), _F32(1.0), _F32(2.0)

# The scalar helpers below are inlined into the loops by LLVM (:mod:`.inline`), so they carry
# the loops' own flags: fused multiply-adds, numpy's error model.


@compiled_only(error_model="numpy", fastmath={"contract"})
def _horner(coeffs, y):
    always_inline()
    value = coeffs[len(coeffs) - 1]
    for k in range(len(coeffs) - 2, -1, -1):
        value = coeffs[k] + y * value
    return value


@compiled_only(error_model="numpy", fastmath={"contract"})
def _estrin_10(coeffs, y):
    """``Σ coeffs[k] y^k`` for 10 coefficients by Estrin's scheme: a dependency chain of 4
    multiply-adds instead of Horner's 9, so that more elements are in flight at once."""
    always_inline()
    y_2 = y * y
    y_4 = y_2 * y_2
    low = (coeffs[0] + coeffs[1] * y) + (coeffs[2] + coeffs[3] * y) * y_2
    high = (coeffs[4] + coeffs[5] * y) + (coeffs[6] + coeffs[7] * y) * y_2
    return (low + high * y_4) + (coeffs[8] + coeffs[9] * y) * (y_4 * y_4)


@compiled_only(error_model="numpy", fastmath={"contract"})
def _normal_cdf_float64(x):
    """Φ(x) for a float64 ``x`` (module docstring): ``½ erfc(|x| / √2)`` or its complement."""
    always_inline()
    low, high, a_max, y_scale, y_offset = _SERIES_FLOAT64
    t = 2.0 / (2.0 + min(abs(x) * _INV_SQRT_2, a_max))
    y = t * y_scale + y_offset  # [t_min, 1] -> [-1, 1]
    y_13 = y * y * y
    y_13 = y_13 * y_13 * y_13 * y_13 * y
    q = _horner(low, y) + y_13 * _horner(high, y)
    half_erfc = 0.5 * t * exp_float64((1.0 - t) * q - 0.5 * x * x, EXP_TAYLOR_13)
    return half_erfc if x < 0.0 else 1.0 - half_erfc


@compiled_only(error_model="numpy", fastmath={"contract"})
def _erfc_parts_float32(x):
    """``(t, e, y)`` for a float32 ``x``, all float32: ``½ erfc(|x| / √2) = ½ t e`` with
    ``e = exp(−a² + (1 − t) Q)``, and ``y`` the mapped ``t`` (module docstring)."""
    always_inline()
    abs_x = min(abs(x), _ABS_X_MAX_FLOAT32)
    a = min(abs_x * _F32(_INV_SQRT_2), _F32(_A_MAX_FLOAT32))
    t = _TWO / (_TWO + a)
    y = t * _Y_SCALE_FLOAT32 + _Y_OFFSET_FLOAT32  # [t_min, 1] -> [-1, 1]
    # x² = x_hi² + x_lo (|x| + x_hi): the large part exact, the small one to float32 accuracy
    x_hi = (abs_x + _SPLIT_SHIFT) - _SPLIT_SHIFT
    x_lo = abs_x - x_hi
    small = _HALF * a * t * _estrin_10(_Q_POWER_FLOAT32, y) - _HALF * x_lo * (abs_x + x_hi)
    # the exponent, log(erfc(a) / t), is at most about 0: no overflow. A NaN x reaches the
    # callers' results through x itself.
    return t, exp_float32_no_overflow(small - _HALF * x_hi * x_hi), y


@compiled_only(error_model="numpy", fastmath={"contract"})
def _exact_gelu_float32(x):
    """``x Φ(x)``; in the tail ``(x t / 2) e`` keeps every intermediate a normal float32."""
    always_inline()
    t, e, _ = _erfc_parts_float32(x)
    return (_HALF * x * t) * e if x < _ZERO else x * (_ONE - _HALF * t * e)


@compiled_only(error_model="numpy", fastmath={"contract"})
def _exact_gelu_slope_float32(x):
    """``Φ(x) + x φ(x)`` with ``φ(x) = e · M(t) / √(2π)``: ``e (½ t + x φ / e)`` for
    ``x < 0``, ``1 + e (x φ / e − ½ t)`` otherwise."""
    always_inline()
    t, e, y = _erfc_parts_float32(x)
    x_density_over_e = x * _estrin_10(_DENSITY_POWER_FLOAT32, y)
    if x < _ZERO:
        return e * (_HALF * t + x_density_over_e)
    return _ONE + e * (x_density_over_e - _HALF * t)


@compiled_only(error_model="numpy", fastmath={"contract"})
def _exact_gelu_float64(x):
    always_inline()
    return x * _normal_cdf_float64(x)


@compiled_only(error_model="numpy", fastmath={"contract"})
def _exact_gelu_slope_float64(x):
    always_inline()
    return _normal_cdf_float64(x) + x * _INV_SQRT_2PI * exp_float64(-0.5 * x * x, EXP_TAYLOR_13)


def _exact_gelu(x):
    """``x Φ(x)`` of a float scalar; in numba code dispatched on its dtype."""
    return (_exact_gelu_float32 if isinstance(x, np.float32) else _exact_gelu_float64)(x)


def _exact_gelu_slope(x):
    """``Φ(x) + x φ(x)`` of a float scalar; in numba code dispatched on its dtype."""
    float32 = isinstance(x, np.float32)
    return (_exact_gelu_slope_float32 if float32 else _exact_gelu_slope_float64)(x)


@overload(_exact_gelu, inline="always", jit_options={"cache": True})
def _exact_gelu_overload(x):
    implementation = _exact_gelu_float32 if x == types.float32 else _exact_gelu_float64
    return lambda x: implementation(x)


@overload(_exact_gelu_slope, inline="always", jit_options={"cache": True})
def _exact_gelu_slope_overload(x):
    float32 = x == types.float32
    implementation = _exact_gelu_slope_float32 if float32 else _exact_gelu_slope_float64
    return lambda x: implementation(x)


# The exact form's two task functions: each computes one chunk of the output.


@compiled_only(error_model="numpy", fastmath={"contract"})
def _erf_forward_chunk(x, grad, out, n_chunks, chunk):
    prefer_full_width()
    x, out = chunk_of(x, n_chunks, chunk), chunk_of(out, n_chunks, chunk)
    for i in range(x.size):
        out[i] = _exact_gelu(x[i])


@compiled_only(error_model="numpy", fastmath={"contract"})
def _erf_backward_chunk(x, grad, out, n_chunks, chunk):
    prefer_full_width()
    x, grad = chunk_of(x, n_chunks, chunk), chunk_of(grad, n_chunks, chunk)
    out = chunk_of(out, n_chunks, chunk)
    for i in range(x.size):
        out[i] = grad[i] * _exact_gelu_slope(x[i])


#: The task function per ``(backward, approximate)``: a run compiles only the forms it uses.
_CHUNK_TASKS = {(False, "none"): _erf_forward_chunk, (True, "none"): _erf_backward_chunk,
                (False, "tanh"): tanh_forward_chunk, (True, "tanh"): tanh_backward_chunk}


def _run(x: np.ndarray, grad: np.ndarray | None, approximate: str) -> np.ndarray:
    """GELU of ``x`` (``grad`` None) or its gradient, flattened through the kernel."""
    assert x.dtype in FLOAT_DTYPES, f"float32 or float64 expected, got {x.dtype}"
    assert grad is None or (grad.shape == x.shape and grad.dtype == x.dtype), (
        x.shape, x.dtype, grad.shape, grad.dtype)
    assert approximate in _APPROXIMATIONS, approximate
    flat = np.ascontiguousarray(x).reshape(-1)
    flat_grad = flat if grad is None else np.ascontiguousarray(grad).reshape(-1)
    out = aligned_empty_like(flat)  # read row by row by the next product
    if flat.size:
        parallel = flat.size >= _PARALLEL_MIN_ELEMENTS
        n_chunks = element_chunks(flat.size, parallel)
        run_tasks(_CHUNK_TASKS[grad is not None, approximate], n_chunks, flat, flat_grad, out,
                  n_chunks, parallel=parallel)
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
    return _run(x, None, approximate)


def gelu_backward(x: np.ndarray, grad: np.ndarray, approximate: str = "none") -> np.ndarray:
    """Gradient of :func:`gelu_forward`: ``dx = grad · dy/dx`` elementwise.

    ``dy/dx = Φ(x) + x φ(x)`` exactly, or for 'tanh'
    ``½ (1 + t) + ½ x (1 − t²) √(2/π) (1 + 3 · 0.044715 x²)`` with ``t = tanh(u)``.

    Parameters
    ----------
    x, approximate : as for :func:`gelu_forward`
    grad : ndarray, upstream gradient, same shape and dtype as ``x``

    Returns
    -------
    dx : ndarray, same shape and dtype as ``x``.

    Examples
    --------
    >>> gelu_backward(np.array([0.0]), np.array([2.0])).tolist()
    [1.0]
    """
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
    u = dtype(SQRT_2_OVER_PI) * (x + dtype(TANH_CUBIC) * x * x * x)
    return dtype(0.5) * x * (dtype(1.0) + np.tanh(u))


def gelu_backward_numpy(x: np.ndarray, grad: np.ndarray, approximate: str = "none") -> np.ndarray:
    """Plain-numpy twin of :func:`gelu_backward` (the test oracle)."""
    dtype = x.dtype.type
    if approximate == "none":
        x64 = x.astype(np.float64)
        pdf = _INV_SQRT_2PI * np.exp(-0.5 * x64 * x64)
        return (grad * (_normal_cdf_numpy(x) + x64 * pdf)).astype(dtype)
    t = np.tanh(dtype(SQRT_2_OVER_PI) * (x + dtype(TANH_CUBIC) * x * x * x))
    du_dx = dtype(SQRT_2_OVER_PI) * (dtype(1.0) + dtype(3.0 * TANH_CUBIC) * x * x)
    return grad * (dtype(0.5) * (dtype(1.0) + t) + dtype(0.5) * x * (dtype(1.0) - t * t) * du_dx)

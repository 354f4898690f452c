"""``fast_exp``: the exponential every softmax-like kernel in this package uses.

A libm call per element cannot be vectorised; this exponential is a range reduction and a
polynomial that the compiler turns into SIMD code. With ``n = round(x / ln2)`` and
``r = x − n·ln2`` (so ``|r| <= ln2/2``)::

    e^x = 2^n · e^r,    e^r ≈ Σ_{k=0..K} r^k / k!     (Horner's scheme)

``2^n`` is built from its bits (exponent field ``n + bias``), with no conversion.

- float32 (:func:`exp_float32`): degree ``K = 7`` (truncation below 6e-9 relative), within
  2 ulp of ``np.exp`` on normal results; results below ``e^-87`` are flushed to zero, above
  ``e^88`` they are ``+inf``. :func:`exp_float32_no_overflow` is the same function for
  callers whose exponent is below 88 by construction and that carry NaN themselves.
- float64 (:func:`exp_float64`): degree ``K = 13`` (:data:`EXP_TAYLOR_13`, truncation below
  1e-17 relative), within 2 ulp; results below ``e^-708`` flushed to zero, above ``e^709``
  ``+inf``.

Both return NaN for NaN, 0 for ``-inf`` and ``+inf`` for ``+inf``. ``ln 2`` is split into a
high part (exact when multiplied by the ``n`` that can occur) and a low correction, so that
``r`` keeps its accuracy.

``fast_exp`` is compiled with ``fastmath={"contract"}`` whatever the flags of the kernel that
calls it: each multiply-add of the reduction and of Horner's scheme is one fused instruction
where the CPU has FMA: one rounding fewer, and a sixth fewer instructions in the attention
forward's loop of exponentials. That forward, whose exponentials are most of its time outside the
block products, took 0.87–0.89× the time with it (and with its running maximum stored unmasked,
:mod:`.attention`), the backward 0.96–0.97×, on an AMD EPYC without AVX-512
(``benchmarks/README.md``).
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import config, types
from numba.extending import intrinsic, overload

from .jit import jit

_LOG2E = np.float32(1.4426950408889634)
# ln 2 split so that n · _LN2_HI is exact for the |n| <= 127 used here.
_LN2_HI = np.float32(0.693145751953125)
_LN2_LO = np.float32(1.428606765330187e-06)
_EXP_LOWEST = np.float32(-87.0)  # e^-87 is just above the smallest normal float32
_EXP_HIGHEST = np.float32(88.0)
_HALF = np.float32(0.5)
_ONE = np.float32(1.0)
# Taylor coefficients 1/k! for k = 2..7: the truncation error on |r| <= ln2/2 is below 6e-9.
_C2 = np.float32(1.0 / 2)
_C3 = np.float32(1.0 / 6)
_C4 = np.float32(1.0 / 24)
_C5 = np.float32(1.0 / 120)
_C6 = np.float32(1.0 / 720)
_C7 = np.float32(1.0 / 5040)
# float64: ln 2 split so that n · _LN2_HI_64 is exact for |n| <= 1024; Taylor terms 1/k!.
_LOG2E_64 = 1.4426950408889634
_LN2_HI_64 = 0.6931471803691238
_LN2_LO_64 = 1.9082149292705877e-10
_EXP64_LOWEST = -708.0  # e^-708 is just above the smallest normal float64
_EXP64_HIGHEST = 709.0
EXP_TAYLOR_13 = tuple(1.0 / math.factorial(k) for k in range(14))
_EXP64_TAYLOR = np.array(EXP_TAYLOR_13)  # a global tuple would be rebuilt on every call


def _float_from_bits_python(bits):
    """Pure-Python twin of :func:`_float_from_bits`, used when ``NUMBA_DISABLE_JIT=1``."""
    bits = np.asarray(bits)
    return bits.view(np.float32 if bits.dtype == np.int32 else np.float64)[()]


@intrinsic
def _float_from_bits(typingctx, bits):
    """Reinterpret the bits of an int32 (int64) as a float32 (float64), without conversion."""
    if bits == types.int32:
        return_type, llvm_type = types.float32, ir.FloatType()
    elif bits == types.int64:
        return_type, llvm_type = types.float64, ir.DoubleType()
    else:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], llvm_type)

    return return_type(bits), codegen


if config.DISABLE_JIT:  # intrinsics only exist in compiled code
    _float_from_bits = _float_from_bits_python  # noqa: F811


@jit(inline="always")
def _exp_float32_in_range(x):
    """``e^x`` for a float32 ``x`` in ``[−87, 88]``, in float32 arithmetic: degree-7 polynomial in
    ``r``."""
    # e^x = 2^n · e^r with n = round(x / ln2), r = x − n·ln2 in [−ln2/2, ln2/2].
    n = np.floor(x * _LOG2E + _HALF)
    r = (x - n * _LN2_HI) - n * _LN2_LO
    poly = _C6 + r * _C7
    poly = _C5 + r * poly
    poly = _C4 + r * poly
    poly = _C3 + r * poly
    poly = _C2 + r * poly
    poly = _ONE + r * poly
    poly = _ONE + r * poly
    two_pow_n = _float_from_bits(np.int32((np.int32(n) + 127) << 23))
    return poly * two_pow_n


@jit(inline="always")
def exp_float32(x):
    """``e^x`` for a float32 ``x``, in float32 arithmetic: degree-7 polynomial in ``r``."""
    result = _exp_float32_in_range(min(max(x, _EXP_LOWEST), _EXP_HIGHEST))
    if x < _EXP_LOWEST:
        result = np.float32(0.0)
    if x > _EXP_HIGHEST:
        result = np.float32(np.inf)
    if x != x:
        result = x
    return result


@jit(inline="always")
def exp_float32_no_overflow(x):
    """``e^x`` for a float32 ``x`` below 88, without :func:`exp_float32`'s upper clamp and its
    checks for overflow and NaN (five vector instructions fewer per element with AVX-512).

    For exponents bounded by construction, in loops whose other operands carry a NaN input
    to the result: a NaN ``x`` gives an unspecified value here. Results below ``e^-87`` are
    flushed to zero, as by :func:`exp_float32`.
    """
    result = _exp_float32_in_range(max(x, _EXP_LOWEST))
    if x < _EXP_LOWEST:
        result = np.float32(0.0)
    return result


@jit(inline="always")
def exp_float64(x, taylor):
    """``e^x`` for a float64 ``x`` with the Taylor coefficients ``taylor[k] = 1/k!`` of e^r.

    Same reduction as :func:`exp_float32`, ``|r| <= ln2/2``; with :data:`EXP_TAYLOR_13`
    (degree 13) the truncation is below 1e-17 relative. Pass a tuple argument or a global
    array, so that the compiler can unroll the polynomial.
    """
    clamped = min(max(x, _EXP64_LOWEST), _EXP64_HIGHEST)
    n = np.floor(clamped * _LOG2E_64 + 0.5)
    r = (clamped - n * _LN2_HI_64) - n * _LN2_LO_64
    poly = taylor[len(taylor) - 1]
    for k in range(len(taylor) - 2, -1, -1):
        poly = taylor[k] + r * poly
    # 2^n from its bits, through int32 (AVX2 cannot convert float64 to int64 in SIMD)
    two_pow_n = _float_from_bits((np.int64(np.int32(n)) + 1023) << 52)
    result = poly * two_pow_n
    if x < _EXP64_LOWEST:
        result = 0.0
    if x > _EXP64_HIGHEST:
        result = np.inf
    if x != x:
        result = x
    return result


def fast_exp(x):
    """``e^x`` of a float scalar; in numba code a polynomial that the compiler can vectorise."""
    return np.exp(x)


@overload(fast_exp, jit_options={"cache": True, "fastmath": {"contract"}})
def _fast_exp_overload(x):
    if x == types.float32:
        return lambda x: exp_float32(x)
    return lambda x: exp_float64(x, _EXP64_TAYLOR)

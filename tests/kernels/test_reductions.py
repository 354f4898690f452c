"""Row sums in vector lanes: the right sums, inf/NaN as in a plain loop, and really vectorised."""

import math

import numpy as np
import pytest
from numba import config, njit

from tinyattn.kernels.reductions import row_maximum, row_squared_deviations, row_sum

LENGTHS = [1, 2, 7, 16, 65, 128, 129, 1000]


@njit
def _row_sums(a, out):
    for i in range(a.shape[0]):
        out[i] = row_sum(a[i])


@njit
def _row_deviations(a, centres, out):
    for i in range(a.shape[0]):
        out[i] = row_squared_deviations(a[i], centres[i])


@njit
def _row_maxima(a, out):
    for i in range(a.shape[0]):
        out[i] = row_maximum(a[i])


@njit
def _plain_row_sums(a, out):
    for i in range(a.shape[0]):
        total = 0.0
        for j in range(a.shape[1]):
            total += a[i, j]
        out[i] = total


def _exact_sums(rows) -> np.ndarray:
    return np.array([math.fsum(float(v) for v in row) for row in rows])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("length", LENGTHS)
def test_row_sums_agree_with_exact_sums_to_float64_rounding(dtype, length):
    rng = np.random.default_rng(length)
    a = (rng.standard_normal((5, length)) * 10.0 ** rng.integers(-3, 4, (5, 1)) + 3.0).astype(
        dtype)
    centres = a.astype(np.float64).mean(axis=1)
    sums, deviations = np.empty(5), np.empty(5)
    _row_sums(a, sums)
    _row_deviations(a, centres, deviations)
    # a float64 sum of n terms in any order is within n·2⁻⁵³·Σ|terms| of the exact sum
    bound = length * 2.0**-53
    np.testing.assert_array_less(np.abs(sums - _exact_sums(a)),
                                 bound * _exact_sums(np.abs(a)) + 1e-300)
    squares = (a.astype(np.float64) - centres[:, None]) ** 2  # exact up to one rounding each
    np.testing.assert_array_less(np.abs(deviations - _exact_sums(squares)),
                                 (bound + 2.0**-52) * _exact_sums(squares) + 1e-300)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nan_and_infinities_propagate_as_in_a_plain_loop(dtype):
    a = np.ones((4, 37), dtype=dtype)
    a[0, 20] = np.nan
    a[1, 3] = np.inf
    a[2, 5], a[2, 30] = np.inf, -np.inf
    a[3, 36] = -np.inf
    sums, plain = np.empty(4), np.empty(4)
    _row_sums(a, sums)
    _plain_row_sums(a, plain)
    np.testing.assert_array_equal(sums, [np.nan, np.inf, np.nan, -np.inf])
    np.testing.assert_array_equal(sums, plain)


def _body(dispatcher) -> str:
    """The optimised LLVM IR of the jitted function itself (not its wrappers)."""
    signature = dispatcher.signatures[0]
    ir = dispatcher.inspect_llvm(signature)
    name = dispatcher.overloads[signature].fndesc.llvm_func_name
    start = ir.index("{", ir.index(name))
    return ir[start:ir.index("\n}\n", start)]


@pytest.mark.skipif(config.DISABLE_JIT, reason="vectorising needs compiled code")
def test_the_sum_is_inlined_into_its_caller_and_summed_in_vector_lanes():
    a = np.ones((3, 64), dtype=np.float32)
    out = np.empty(3)
    _row_sums(a, out)
    _plain_row_sums(a, out)
    inlined, plain = _body(_row_sums), _body(_plain_row_sums)
    assert "row_sum" not in inlined  # no call left: LLVM inlined the helper
    assert "fadd reassoc <" in inlined and "x double>" in inlined
    # the same loop without permission to reorder stays one scalar chain
    assert "x double>" not in plain


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("length", [0, *LENGTHS])
def test_the_row_maximum_is_found_at_every_position_and_ignores_nan(dtype, length):
    """Each position holds the largest value of one row (each of the eight chains and the
    tail), with a NaN beside it; a row of NaN (or of nothing) has the maximum ``-inf``."""
    rows = np.random.default_rng(length).standard_normal((length, length)).astype(dtype)
    np.fill_diagonal(rows, 100.0)
    if length > 1:
        rows[np.arange(length), (np.arange(length) + 1) % length] = np.nan
    out = np.empty(length, dtype)
    _row_maxima(rows, out)
    np.testing.assert_array_equal(out, np.full(length, 100.0, dtype))
    nan_rows, out = np.full((2, 9), np.nan, dtype), np.empty(2, dtype)
    _row_maxima(nan_rows, out)
    np.testing.assert_array_equal(out, [-np.inf, -np.inf])

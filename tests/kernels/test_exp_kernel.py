"""The vectorisable exponential ``fast_exp`` against ``np.exp``, float32 and float64."""

import numpy as np
from numba import njit

from tinyattn.kernels.exp import exp_float32_no_overflow, fast_exp


@njit
def _exp_all(values, out):
    for i in range(values.size):
        out[i] = fast_exp(values[i])


@njit
def _exp_no_overflow_all(values, out):
    for i in range(values.size):
        out[i] = exp_float32_no_overflow(values[i])


def _float32_exp_of(kernel, grid, specials):
    """``kernel`` run over ``grid`` and then ``specials`` in float32; asserts that its values on
    ``grid`` are within 2 ulp of ``np.exp`` and returns those on ``specials``."""
    x = np.concatenate([grid, specials]).astype(np.float32)
    y = np.empty_like(x)
    kernel(x, y)
    exact = np.exp(x[: grid.size].astype(np.float64))
    ulp = np.spacing(exact.astype(np.float32)).astype(np.float64)
    assert (np.abs(y[: grid.size] - exact) <= 2 * ulp).all()
    return y[grid.size :]


def test_exp_float32_is_within_two_ulp_and_keeps_special_values():
    y = _float32_exp_of(_exp_all, np.linspace(-87, 88, 100_001), [-1e4, -np.inf, np.inf, np.nan])
    assert y[0] == 0 and y[1] == 0 and y[2] == np.inf and np.isnan(y[3])


def test_exp_float32_without_overflow_checks_is_within_two_ulp_below_88():
    y = _float32_exp_of(_exp_no_overflow_all, np.linspace(-87, 87.9, 100_001),
                        [-87.5, -100, -1e30, -np.inf])
    assert (y == 0).all()  # flushed to zero below e^-87, as by exp_float32


def test_exp_float64_is_within_two_ulp_and_keeps_special_values():
    rng = np.random.default_rng(3)
    x = np.concatenate([np.linspace(-708, 709, 100_001), rng.uniform(-1, 1, 10_000),
                        [-709.0, -1e4, -np.inf, np.inf, np.nan]])
    y = np.empty_like(x)
    _exp_all(x, y)
    exact = np.exp(x[:-5])  # correctly rounded to within an ulp
    assert (np.abs(y[:-5] - exact) <= 2 * np.spacing(exact)).all()
    assert y[-5] == 0 and y[-4] == 0 and y[-3] == 0 and y[-2] == np.inf and np.isnan(y[-1])

"""The column-sum kernel (the bias gradient of Linear) against float64 numpy sums."""

from __future__ import annotations

import numpy as np
import pytest
from kernel_helpers import numba_threads

from tinyattn.kernels.column_sums import column_sums


@pytest.mark.parametrize("dtype, tolerance", [(np.float32, 1e-5), (np.float64, 1e-13)])
@pytest.mark.parametrize("shape", [(1, 1), (3, 5), (17, 2), (768, 384), (5000, 13), (0, 4)])
def test_column_sums_match_float64_sums(dtype, tolerance, shape):
    rng = np.random.default_rng(shape[0] * 7 + shape[1])
    x = rng.standard_normal(shape).astype(dtype)
    expected = x.astype(np.float64).sum(axis=0)
    ours = column_sums(x)
    assert ours.dtype == dtype and ours.shape == (shape[1],)
    scale = np.abs(x).astype(np.float64).sum(axis=0) + 1.0
    assert np.all(np.abs(ours - expected) <= tolerance * scale)


def test_a_strided_matrix_and_non_finite_values():
    x = np.arange(24.0).reshape(4, 6)[:, ::2]
    np.testing.assert_array_equal(column_sums(x), x.sum(axis=0))
    x = np.ones((3, 3))
    x[1, 0], x[2, 1] = np.nan, np.inf
    result = column_sums(x)
    assert np.isnan(result[0]) and result[1] == np.inf and result[2] == 3.0


def test_one_and_two_threads_give_the_same_bits():
    x = np.random.default_rng(1).standard_normal((2048, 100)).astype(np.float32)
    with numba_threads(1):
        one = column_sums(x)
    with numba_threads(2):
        two = column_sums(x)
    np.testing.assert_array_equal(one, two)

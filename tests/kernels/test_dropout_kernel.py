"""The counter-based dropout kernel against its numpy twin, and its preconditions."""

import numba
import numpy as np
import pytest

from tinyattn.kernels.dropout import dropout_apply, dropout_apply_numpy


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1,), (7,), (3, 5), (2, 3, 4097), (1 << 20,)])
def test_dropout_matches_numpy_twin_bitwise(shape, dtype):
    x = np.random.default_rng(1).standard_normal(shape).astype(dtype)
    got = dropout_apply(x, seed=2**63 + 5, p=0.3)
    assert got.dtype == dtype and got.shape == shape
    np.testing.assert_array_equal(got, dropout_apply_numpy(x, seed=2**63 + 5, p=0.3))


def test_dropout_keeps_the_expected_fraction_and_scales_by_one_over_keep():
    y = dropout_apply(np.ones(200_000, dtype=np.float32), seed=9, p=0.25)
    assert abs((y == 0).mean() - 0.25) < 0.005
    np.testing.assert_allclose(y[y != 0], 1 / 0.75, rtol=1e-6)
    assert np.all(dropout_apply(np.ones(10), seed=9, p=0.0) == 1.0)


def test_same_seed_same_mask_different_seed_different_mask():
    x = np.ones(5000)
    np.testing.assert_array_equal(dropout_apply(x, 4, 0.5), dropout_apply(x, 4, 0.5))
    assert not np.array_equal(dropout_apply(x, 4, 0.5), dropout_apply(x, 5, 0.5))


def test_parallel_path_is_identical_for_any_thread_count():
    x = np.ones(1 << 21, dtype=np.float32)
    threads = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        single = dropout_apply(x, 11, 0.1)
        numba.set_num_threads(threads)
        np.testing.assert_array_equal(dropout_apply(x, 11, 0.1), single)
    finally:
        numba.set_num_threads(threads)


@pytest.mark.parametrize("args", [(np.ones(3, dtype=np.int64), 0, 0.5), (np.ones(3), -1, 0.5),
                                  (np.ones(3), 2**64, 0.5), (np.ones(3), 0, 1.0)],
                         ids=["int64", "negative-seed", "seed-too-big", "p-one"])
def test_arguments_outside_the_preconditions_fail_an_assert(args):
    with pytest.raises(AssertionError):
        dropout_apply(*args)

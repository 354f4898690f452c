"""The top-k selection kernel against its twin (numpy's stable sort of whole rows) and against
``torch.topk``: NaN, infinities, ties, every ``k``, the orders that make every value enter the
heap, many rows on several threads, and every dtype of a tensor."""

from __future__ import annotations

import numpy as np
import pytest
from kernel_helpers import numba_threads

from tinyattn.kernels.top_k import _PARALLEL_MIN_ELEMENTS, top_k, top_k_numpy


def _assert_same(x, k, largest):
    values, positions = top_k(x, k, largest)
    want_values, want_positions = top_k_numpy(x, k, largest)
    assert values.dtype == x.dtype and positions.dtype == np.int64
    assert values.shape == positions.shape == x.shape[:-1] + (k,)
    np.testing.assert_array_equal(positions, want_positions)
    np.testing.assert_array_equal(values, want_values)  # NaN where NaN
    np.testing.assert_array_equal(values, np.take_along_axis(x, positions, -1))


def _few_values(rng, shape, dtype):
    """Small integers (many ties), with NaN, ±inf and -0.0 in the float dtypes."""
    x = rng.integers(-3, 4, size=shape).astype(dtype)
    if x.dtype.kind == "f":
        for value, share in ((np.nan, 0.15), (np.inf, 0.1), (-np.inf, 0.1), (-0.0, 0.1)):
            x[rng.random(shape) < share] = value
    return x


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_k_of_rows_with_nan_infinities_and_ties_is_the_twins(dtype, largest):
    rng = np.random.default_rng(3)
    for n in (1, 2, 3, 7, 16, 65):
        x = _few_values(rng, (5, n), dtype)
        for k in range(n + 1):
            _assert_same(x, k, largest)


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.int8, np.uint8, np.bool_,
                                   np.float16])
def test_the_other_dtypes_of_a_tensor(dtype):
    rng = np.random.default_rng(4)
    x = _few_values(rng, (3, 2, 11), dtype)
    for k in (0, 1, 5, 11):
        for largest in (True, False):
            _assert_same(x, k, largest)


@pytest.mark.parametrize("order", ["ascending", "descending", "equal", "alternating"])
@pytest.mark.parametrize("largest", [True, False])
def test_orders_that_make_every_value_enter_or_none(order, largest):
    n = 1000
    x = {"ascending": np.arange(n, dtype=np.float64),
         "descending": np.arange(n, 0, -1, dtype=np.float64),
         "equal": np.full(n, 2.5),
         "alternating": np.tile([1.0, -1.0], n // 2)}[order][None]
    for k in (1, 10, 999, 1000):
        _assert_same(x, k, largest)


def test_many_rows_on_one_and_two_threads():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((12, _PARALLEL_MIN_ELEMENTS // 8)).astype(np.float32)
    x[rng.random(x.shape) < 0.01] = np.nan
    with numba_threads(1):
        one = top_k(x, 200, True)
    with numba_threads(2):
        two = top_k(x, 200, True)
    for a, b in zip(one, two):
        np.testing.assert_array_equal(a, b)
    _assert_same(x, 200, True)


def test_empty_rows_and_no_rows():
    for shape, k in (((3, 0), 0), ((0, 5), 2), ((2, 0, 4), 3), ((4,), 0)):
        _assert_same(np.zeros(shape), k, True)


def test_a_strided_input_is_read_as_it_is():
    x = np.random.default_rng(6).standard_normal((6, 40))[::2, ::3]
    for k in (1, 7, 14):
        _assert_same(x, k, True)
        _assert_same(x, k, False)


@pytest.mark.parametrize("largest", [True, False])
def test_a_vocabulary_row_equals_pytorch(largest):
    """PyTorch leaves the order of equal values open: the row with runs of ties across the
    k-th place is compared by its values (the twin fixes its positions)."""
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(7).standard_normal((2, 50257))
    x[0, 500] = np.nan  # (several NaN are equal values too)
    x[1, 100:300], x[1, 1000:1300] = 3.0, -3.0  # about 70 values lie beyond either
    values, positions = top_k(x, 200, largest)
    theirs = torch.topk(torch.from_numpy(x), 200, largest=largest)
    np.testing.assert_array_equal(values, theirs.values.numpy())
    np.testing.assert_array_equal(positions[0], theirs.indices.numpy()[0])
    _assert_same(x, 200, largest)

"""The logistic-function kernel against its numpy twin, PyTorch and its limits: accuracy in
float32 and float64, NaN and infinities, the flush of results below the exponential's range,
and one and two threads."""

from __future__ import annotations

import numpy as np
import pytest
from kernel_helpers import numba_threads

import tinyattn as ta
from tinyattn.kernels.special import _PARALLEL_MIN_ELEMENTS, sigmoid, sigmoid_numpy

# relative tolerance (a few ulp: the exponential is within 2 ulp of numpy's) and the smallest
# result the kernel keeps (e^-87 and e^-708: below, the exponential flushes to zero)
ACCURACY = {np.float32: (6e-7, np.exp(np.float32(-87.0))), np.float64: (2e-15, np.exp(-708.0))}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_kernel_is_the_twins_to_a_few_ulp(dtype):
    rtol, smallest = ACCURACY[dtype]
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.standard_normal(50_000) * 8, np.linspace(-800, 800, 20_001)])
    x = x.astype(dtype)
    ours, twin = sigmoid(x), sigmoid_numpy(x)
    assert ours.dtype == dtype and ours.shape == x.shape
    kept = twin >= smallest
    np.testing.assert_allclose(ours[kept], twin[kept], rtol=rtol, atol=0)
    assert np.all(ours[~kept] <= smallest) and np.all(ours >= 0) and np.all(ours <= 1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nan_infinities_and_zeros(dtype):
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30, -1e30], dtype)
    np.testing.assert_array_equal(sigmoid(x), [np.nan, 1.0, 0.0, 0.5, 0.5, 1.0, 0.0])


def test_the_two_branches_mirror_each_other():
    """σ(−x) = 1 − σ(x), to the rounding of ``1 − σ(x)`` in float64 (an ulp of 1; the
    subtraction loses the relative accuracy the branch for x < 0 keeps)."""
    x = np.linspace(0, 30, 3001)
    np.testing.assert_allclose(sigmoid(-x), 1 - sigmoid(x), rtol=0, atol=3e-16)


def test_one_and_two_threads_and_any_shape_give_the_same_bits():
    x = np.random.default_rng(1).standard_normal((3, _PARALLEL_MIN_ELEMENTS)).astype(np.float32)
    with numba_threads(1):
        one = sigmoid(x)
    with numba_threads(2):
        two = sigmoid(x)
    np.testing.assert_array_equal(one, two)
    np.testing.assert_array_equal(sigmoid(x[:, ::3].T), one[:, ::3].T)  # strided input
    assert sigmoid(np.zeros((0, 4))).shape == (0, 4)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_the_op_equals_pytorch(dtype):
    torch = pytest.importorskip("torch")
    x = (np.random.default_rng(2).standard_normal((64, 300)) * 6).astype(dtype)
    theirs = torch.from_numpy(x)
    rtol = {"float16": 1e-3, "float32": 1e-6, "float64": 1e-14}[dtype]
    np.testing.assert_allclose(ta.sigmoid(ta.tensor(x)).numpy(), torch.sigmoid(theirs).numpy(),
                               rtol=rtol, atol=rtol * 1e-3)
    np.testing.assert_allclose(ta.nn.functional.silu(ta.tensor(x)).numpy(),
                               torch.nn.functional.silu(theirs).numpy(), rtol=rtol,
                               atol=rtol * 1e-3)
    assert ta.sigmoid(ta.tensor(x)).dtype == np.dtype(dtype)

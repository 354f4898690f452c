"""The running-sum kernel (cumsum over the last dim) against its numpy twin and PyTorch."""

from __future__ import annotations

import numpy as np
import pytest
from kernel_helpers import DTYPES, numba_threads

import tinyattn as ta
from tinyattn.kernels import cumsum as cumsum_module
from tinyattn.kernels.cumsum import _PARALLEL_MIN_ELEMENTS, cumsum_rows, cumsum_rows_numpy


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (3, 5), (4, 9), (7, 65), (1, 50257), (0, 3), (3, 0),
                                   (9, _PARALLEL_MIN_ELEMENTS // 8)])
def test_the_kernel_gives_its_twins_bits_on_one_thread_and_on_all(dtype, shape):
    """Row counts around the four rows summed side by side; the twin's float64 running sums
    are the same additions in the same order, so the bits are equal."""
    x = np.random.default_rng(shape[0] + shape[1]).standard_normal(shape).astype(dtype)
    expected = cumsum_rows_numpy(x)
    for threads in (1, 2):
        with numba_threads(threads):
            got = cumsum_rows(x)
        assert got.dtype == dtype and got.shape == shape
        np.testing.assert_array_equal(got, expected)


def test_float32_results_are_the_float64_running_sums_rounded():
    """Within half an ulp of the float64 running sums (which carry 29 more bits than the
    values), where float32 additions drift along the row."""
    x = (np.random.default_rng(1).standard_normal((2, 20000)) + 1).astype(np.float32)
    wide = np.cumsum(x.astype(np.float64), axis=1)
    got = cumsum_rows(x).astype(np.float64)
    assert np.all(np.abs(got - wide) <= np.spacing(np.abs(wide).astype(np.float32)) / 2)
    assert np.abs(np.cumsum(x, axis=1) - wide).max() > 4 * np.abs(got - wide).max()


def test_non_finite_values_propagate_along_the_row():
    x = np.array([[1.0, np.nan, 1.0], [np.inf, 1.0, -np.inf], [1.0, 2.0, 3.0]])
    np.testing.assert_array_equal(cumsum_rows(x), [[1, np.nan, np.nan], [np.inf, np.inf, np.nan],
                                                   [1, 3, 6]])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_op_takes_the_kernel_over_the_last_dim_and_equals_pytorch(dtype, monkeypatch):
    torch = pytest.importorskip("torch")
    calls, run_tasks = [], cumsum_module.run_tasks
    monkeypatch.setattr(cumsum_module, "run_tasks", lambda *args, **kwargs: calls.append(1)
                        or run_tasks(*args, **kwargs))
    x = np.random.default_rng(2).standard_normal((2, 3, 300)).astype(dtype)
    got = ta.cumsum(ta.tensor(x), -1).numpy()
    want = torch.cumsum(torch.from_numpy(x.astype(np.float64)), -1).numpy()
    assert calls and got.dtype == x.dtype
    np.testing.assert_allclose(got, want, rtol=1e-6 if dtype == "float32" else 1e-14,
                               atol=1e-5 if dtype == "float32" else 1e-12)
    calls.clear()
    for other in (ta.cumsum(ta.tensor(x), 1), ta.tensor(x).transpose(1, 2).cumsum(-1),
                  ta.cumsum(ta.tensor(x.astype(np.int64)), -1)):
        assert other.shape in ((2, 3, 300), (2, 300, 3))
    assert not calls  # another dim, a transposed view, integers: numpy's cumsum

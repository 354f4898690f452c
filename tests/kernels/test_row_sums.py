"""The row-sum kernel (sum, mean, var/std and the 2-norm over trailing dims) against exact
sums, its numpy twin and PyTorch."""

from __future__ import annotations

import math

import numpy as np
import pytest
from kernel_helpers import DTYPES, numba_threads

import tinyattn as ta
from tinyattn.kernels import row_sums as row_sums_module
from tinyattn.kernels.row_sums import _PARALLEL_MIN_ELEMENTS, TERMS, row_sums, row_sums_numpy

SHAPES = [(1, 1), (3, 7), (17, 65), (64, 4096), (1, 262_147), (3, _PARALLEL_MIN_ELEMENTS // 3 + 5),
          (5, 0), (0, 4)]


def _terms(x: np.ndarray, terms: str) -> np.ndarray:
    """The terms of each row's sum, in float64: the values, their squares (rounded to ``x``'s
    dtype first, as the kernel forms them), or their squared deviations from the exact mean."""
    if terms == "squares":
        return (x * x).astype(np.float64)
    wide = x.astype(np.float64)
    if terms == "deviations":
        means = np.array([math.fsum(row) / max(len(row), 1) for row in wide])
        return (wide - means[:, None]) ** 2
    return wide


def _exact(x: np.ndarray, divisor: float, terms: str) -> np.ndarray:
    """Each row's sum correctly rounded (``math.fsum``), divided in float64."""
    return np.array([math.fsum(row) / divisor for row in _terms(x, terms)])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("divisor, terms", [(1.0, "values"), (7.0, "values"),
                                            (1.0, "squares"), (6.0, "deviations")])
def test_each_row_is_its_exact_sum_rounded_once(dtype, shape, divisor, terms):
    """float32 results within one rounding of the exact sum (numpy's float32 sum is not);
    float64 within the reassociated float64 sum's error."""
    rng = np.random.default_rng(shape[0] * 31 + shape[1])
    x = (rng.standard_normal(shape) + 3.0).astype(dtype)  # a mean far from 0: deviations matter
    got = row_sums(x, divisor, terms)
    assert got.dtype == dtype and got.shape == (shape[0],)
    exact = _exact(x, divisor, terms)
    if dtype == np.float32:
        bound = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    else:
        bound = 1e-15 * np.abs(_terms(x, terms)).sum(axis=1) / divisor + 1e-300
    assert np.all(np.abs(got - exact) <= bound), np.max(np.abs(got - exact) / bound)
    twin = row_sums_numpy(x, divisor, terms)
    assert np.all(np.abs(twin - exact) <= bound)


@pytest.mark.parametrize("dtype", DTYPES)
def test_non_finite_values_propagate_as_in_a_plain_sum(dtype):
    x = np.ones((5, 70), dtype)
    x[0, 3], x[1, 69], x[2, :2], x[3, 5] = np.nan, np.inf, (np.inf, -np.inf), -np.inf
    for terms in TERMS:
        with np.errstate(invalid="ignore"):
            got, want = row_sums(x, 1.0, terms), row_sums_numpy(x, 1.0, terms)
        np.testing.assert_array_equal(got, want)
    assert np.isnan(row_sums(x, 1.0)[[0, 2]]).all() and row_sums(x, 1.0)[4] == 70


def test_one_and_two_threads_give_the_same_bits():
    x = np.random.default_rng(1).standard_normal((2049, 100)).astype(np.float32)
    assert x.size >= _PARALLEL_MIN_ELEMENTS
    for terms in TERMS:
        with numba_threads(1):
            one = row_sums(x, 3.0, terms)
        with numba_threads(2):
            two = row_sums(x, 3.0, terms)
        np.testing.assert_array_equal(one, two)


REDUCTIONS = {
    "sum(-1)": (lambda t: t.sum(-1), lambda a: a.sum(-1)),
    "sum()": (lambda t: t.sum(), lambda a: a.sum()),
    "sum((1, 2))": (lambda t: t.sum((1, 2), keepdim=True), lambda a: a.sum((1, 2), keepdim=True)),
    "mean(-1, keepdim)": (lambda t: t.mean(-1, keepdim=True),
                          lambda a: a.mean(-1, keepdim=True)),
    "mean()": (lambda t: t.mean(), lambda a: a.mean()),
    "norm(dim=-1)": (lambda t: t.norm(dim=-1), lambda a: a.norm(dim=-1)),
    "norm()": (lambda t: t.norm(), lambda a: a.norm()),
    "std(-1, keepdim)": (lambda t: t.std(-1, keepdim=True), lambda a: a.std(-1, keepdim=True)),
    "var((1, 2), unbiased=False)": (lambda t: t.var((1, 2), unbiased=False),
                                    lambda a: a.var((1, 2), unbiased=False)),
}


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_ops_over_trailing_dims_take_the_kernel_and_equal_pytorch(name, dtype,
                                                                     monkeypatch):
    torch = pytest.importorskip("torch")
    calls, run_tasks = [], row_sums_module.run_tasks
    monkeypatch.setattr(row_sums_module, "run_tasks", lambda *args, **kwargs: calls.append(1)
                        or run_tasks(*args, **kwargs))
    ours, theirs = REDUCTIONS[name]
    x = (np.random.default_rng(2).standard_normal((4, 6, 130)) + 2).astype(dtype)
    got = ours(ta.tensor(x)).numpy()
    want = theirs(torch.from_numpy(x.astype(np.float64))).numpy()
    assert calls, f"{name} did not take the kernel"
    assert got.dtype == x.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=2e-7 if dtype == "float32" else 1e-14,
                               atol=1e-6 if dtype == "float32" else 1e-13)


@pytest.mark.parametrize("layout", ["leading dim", "middle dim", "not contiguous", "float16",
                                    "int64", "dims out of order", "var of a leading dim"])
def test_what_the_kernel_does_not_take_goes_to_numpy(layout, monkeypatch):
    monkeypatch.setattr(row_sums_module, "run_tasks", lambda *args, **kwargs: pytest.fail(
        "the kernel took a reduction it does not handle"))
    x = np.random.default_rng(3).standard_normal((3, 4, 5))
    reduce = {
        "leading dim": lambda t: t.sum(0), "middle dim": lambda t: t.mean(1),
        "not contiguous": lambda t: t.transpose(0, 2).sum(-1),
        "float16": lambda t: t.half().sum(-1), "int64": lambda t: t.long().sum(-1),
        "dims out of order": lambda t: t.sum((2, 1)),
        "var of a leading dim": lambda t: t.var(0),
    }[layout]
    expected = {
        "leading dim": x.sum(0), "middle dim": x.mean(1), "not contiguous": x.T.sum(-1),
        "float16": x.astype(np.float16).sum(-1), "int64": x.astype(np.int64).sum(-1),
        "dims out of order": x.sum((2, 1)),
        "var of a leading dim": x.var(0, ddof=1),
    }[layout]
    got = reduce(ta.tensor(x)).numpy()
    assert got.dtype == expected.dtype
    np.testing.assert_allclose(got, expected, rtol=1e-3 if layout == "float16" else 1e-12)

"""Softmax / log-softmax kernels against their numpy twins."""

import numba
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from kernel_helpers import reference_counts

from tinyattn.kernels import softmax as softmax_module
from tinyattn.kernels.softmax import (
    log_softmax_backward,
    log_softmax_backward_numpy,
    log_softmax_forward,
    log_softmax_forward_numpy,
    softmax_backward,
    softmax_backward_numpy,
    softmax_forward,
    softmax_forward_numpy,
)

DTYPES = [np.float32, np.float64]
TOL = {np.float32: dict(rtol=1e-5, atol=1e-6), np.float64: dict(rtol=1e-12, atol=1e-13)}
SHAPES = [(1,), (1, 1), (3, 5), (2, 3, 17), (4, 65), (2, 0)]


def _all_four(x, grad):
    """Outputs of the four kernels and of their twins, in the same order."""
    y, ly = softmax_forward(x), log_softmax_forward(x)
    y_ref, ly_ref = softmax_forward_numpy(x), log_softmax_forward_numpy(x)
    ours = [y, softmax_backward(y, grad), ly, log_softmax_backward(ly, grad)]
    twins = [y_ref, softmax_backward_numpy(y_ref, grad), ly_ref,
             log_softmax_backward_numpy(ly_ref, grad)]
    return ours, twins


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_kernels_match_numpy_twins(shape, dtype):
    rng = np.random.default_rng(0)
    x = (3 * rng.standard_normal(shape)).astype(dtype)
    grad = rng.standard_normal(shape).astype(dtype)
    for ours, twin in zip(*_all_four(x, grad), strict=True):
        assert ours.shape == shape and ours.dtype == dtype
        np.testing.assert_allclose(ours, twin, **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
def test_fully_masked_rows_give_zero_weights_minus_inf_logs_and_zero_grads(dtype):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 6)).astype(dtype)
    x[1] = -np.inf
    x[2, :3] = -np.inf  # a partly masked row stays a proper distribution
    grad = rng.standard_normal(x.shape).astype(dtype)
    (y, dx, ly, ldx), twins = _all_four(x, grad)
    assert (y[1] == 0).all() and (dx[1] == 0).all()
    assert np.isneginf(ly[1]).all() and (ldx[1] == 0).all()
    assert (y[2, :3] == 0).all() and np.isclose(y[2].sum(), 1, rtol=1e-6)
    for ours, twin in zip((y, dx, ly, ldx), twins, strict=True):
        np.testing.assert_allclose(ours, twin, **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("magnitude", [1e4, 3e38])
def test_huge_logits_stay_finite(dtype, magnitude):
    x = np.array([[magnitude, -magnitude, 0.0], [magnitude, magnitude, -magnitude]], dtype)
    y = softmax_forward(x)
    np.testing.assert_array_equal(y, [[1, 0, 0], [0.5, 0.5, 0]])
    grad = np.ones_like(x)
    assert np.isfinite(softmax_backward(y, grad)).all()
    ly = log_softmax_forward(x)
    assert ly[0, 0] == 0 and np.isfinite(ly[1, :2]).all()  # −6e38 may round to −inf
    np.testing.assert_allclose(ly, log_softmax_forward_numpy(x), **TOL[dtype])
    assert np.isfinite(log_softmax_backward(ly, grad)).all()


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_maximum_is_found_at_every_position_of_a_row(dtype):
    """A logit of 1e4 at each position of rows of 37 (every lane of the maximum's eight chains,
    and its tail) and of 8: the shift must be that logit, or ``e^(1e4 − m)`` overflows."""
    for length in (8, 37):
        x = np.zeros((length, length), dtype)
        np.fill_diagonal(x, 1e4)
        np.testing.assert_array_equal(softmax_forward(x), np.eye(length, dtype=dtype))
        log_y = log_softmax_forward(x)
        np.testing.assert_array_equal(np.diagonal(log_y), np.zeros(length, dtype))


@given(
    shape=st.lists(st.integers(1, 9), min_size=1, max_size=3).map(tuple),
    dtype=st.sampled_from(DTYPES),
    data_seed=st.integers(0, 2**16),
)
def test_hypothesis_shapes_match_twins(shape, dtype, data_seed):
    rng = np.random.default_rng(data_seed)
    x = (5 * rng.standard_normal(shape)).astype(dtype)
    grad = rng.standard_normal(shape).astype(dtype)
    for ours, twin in zip(*_all_four(x, grad), strict=True):
        np.testing.assert_allclose(ours, twin, **TOL[dtype])


def test_results_are_bitwise_identical_across_runs_and_thread_counts():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((64, 129)).astype(np.float32)
    grad = rng.standard_normal(x.shape).astype(np.float32)
    first, _ = _all_four(x, grad)
    previous = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        single, _ = _all_four(x, grad)
    finally:
        numba.set_num_threads(previous)
    again, _ = _all_four(x, grad)
    for a, b, c in zip(first, single, again, strict=True):
        assert np.array_equal(a, b) and np.array_equal(a, c)


@pytest.mark.parametrize("dtype", DTYPES)
def test_serial_and_parallel_paths_agree_bitwise(dtype, monkeypatch):
    rng = np.random.default_rng(4)
    x = (3 * rng.standard_normal((37, 129))).astype(dtype)
    x[5] = -np.inf
    grad = rng.standard_normal(x.shape).astype(dtype)
    assert not softmax_module._parallel(x)
    assert softmax_module._parallel(np.empty((2, softmax_module._PARALLEL_MIN_ELEMENTS // 2)))
    results = []
    for parallel in (False, True):
        monkeypatch.setattr(softmax_module, "_parallel", lambda rows, chosen=parallel: chosen)
        y, ly = softmax_forward(x), log_softmax_forward(x)
        results.append((y, ly, softmax_backward(y, grad), log_softmax_backward(ly, grad)))
    for serial, threaded in zip(*results, strict=True):
        np.testing.assert_array_equal(serial, threaded)


@pytest.mark.parametrize("call", [
    lambda: softmax_forward(np.ones(())),
    lambda: log_softmax_forward(np.ones(3, dtype=np.int64)),
    lambda: softmax_forward(np.ones(3, dtype=np.float16)),
    lambda: softmax_backward(np.ones((2, 3)), np.ones((3, 2))),
    lambda: log_softmax_backward(np.ones(3), np.ones(3, dtype=np.float32)),
], ids=["scalar", "int64", "float16", "grad-shape", "grad-dtype"])
def test_inputs_outside_the_preconditions_fail_an_assert(call):
    with pytest.raises(AssertionError):
        call()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_nan_makes_its_whole_row_nan_while_a_fully_masked_row_stays_zero(dtype):
    from tinyattn.kernels.softmax import (
        log_softmax_backward,
        log_softmax_forward,
        softmax_forward,
        softmax_forward_numpy,
    )

    x = np.array([[1.0, np.nan, 2.0], [np.nan] * 3, [-np.inf] * 3, [0.5, 1.0, -1.0]], dtype)
    y = softmax_forward(x)
    assert np.isnan(y[:2]).all() and (y[2] == 0).all() and np.isfinite(y[3]).all()
    np.testing.assert_array_equal(np.isnan(y), np.isnan(softmax_forward_numpy(x)))
    logs = log_softmax_forward(x)
    assert np.isnan(logs[:2]).all() and np.isneginf(logs[2]).all()
    grads = log_softmax_backward(logs, np.ones_like(logs))
    assert np.isnan(grads[:2]).all() and (grads[2] == 0).all()


@pytest.mark.skipif(numba.config.DISABLE_JIT, reason="reference counts exist in compiled code")
def test_the_row_tasks_count_no_references_as_they_run(tmp_path):
    """No reference counting is left in a task's compiled code. Each row's views and the arrays
    they view are only read and written there; an increment and decrement of an array's count
    per row is an atomic operation on memory both threads share, which made the forward on 2
    threads slower than on 1 (softmax of (16384, 16): 3.2 against 0.6 ms). The kernels are
    compiled afresh in a process of their own (numba keeps no IR for code it loads from its
    cache)."""
    tasks = ["_softmax_forward_chunk", "_softmax_backward_chunk", "_log_softmax_forward_chunk",
             "_log_softmax_backward_chunk"]
    counts = reference_counts(tmp_path, "softmax", "\n".join([
        "x = np.linspace(-3.0, 3.0, 4 * 70, dtype=np.float32).reshape(4, 70)",
        "y, logs = kernel.softmax_forward(x), kernel.log_softmax_forward(x)",
        "kernel.softmax_backward(y, x), kernel.log_softmax_backward(logs, x)",
    ]), tasks)
    assert counts == dict.fromkeys(tasks, 0)

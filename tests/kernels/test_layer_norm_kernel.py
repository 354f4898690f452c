"""LayerNorm kernels: numpy twin, PyTorch parity, gradient check, determinism, preconditions."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kernel_helpers import DTYPES, assert_vjp_matches_central_difference, numba_threads

from tinyattn.kernels import layer_norm as layer_norm_module
from tinyattn.kernels.layer_norm import (
    layer_norm_backward,
    layer_norm_backward_numpy,
    layer_norm_forward,
    layer_norm_forward_numpy,
)

TOL = {np.float32: 2e-5, np.float64: 1e-12}


def make_case(rng, n_rows, n_cols, dtype, affine=True):
    x = (rng.standard_normal((n_rows, n_cols)) * 3 + 1).astype(dtype)
    weight = rng.standard_normal(n_cols).astype(dtype) if affine else None
    bias = rng.standard_normal(n_cols).astype(dtype) if affine else None
    grad = rng.standard_normal((n_rows, n_cols)).astype(dtype)
    return x, weight, bias, grad


def assert_matches_twin(x, weight, bias, grad, eps=1e-5):
    tol = TOL[x.dtype.type]
    outputs = layer_norm_forward(x, weight, bias, eps)
    expected = layer_norm_forward_numpy(x, weight, bias, eps)
    for got, want in zip(outputs, expected, strict=True):
        assert got.dtype == x.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    _, mean, rstd = outputs
    grads = layer_norm_backward(grad, x, weight, mean, rstd)
    expected_grads = layer_norm_backward_numpy(grad, x, weight, mean, rstd)
    for got, want in zip(grads, expected_grads, strict=True):
        if want is None:
            assert got is None
        else:
            assert got.dtype == x.dtype
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.sqrt(x.shape[0]))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (1, 7), (5, 1), (37, 33), (1024, 128)])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_matches_numpy_twin(dtype, shape, affine):
    rng = np.random.default_rng(0)
    assert_matches_twin(*make_case(rng, *shape, dtype, affine))


@settings(deadline=None, max_examples=25)
@given(n_rows=st.integers(1, 70), n_cols=st.integers(1, 70), seed=st.integers(0, 2**16),
       dtype=st.sampled_from(DTYPES))
def test_layer_norm_matches_numpy_twin_on_generated_shapes(n_rows, n_cols, seed, dtype):
    assert_matches_twin(*make_case(np.random.default_rng(seed), n_rows, n_cols, dtype))


def test_layer_norm_of_a_row_with_one_feature_is_the_bias():
    x = np.array([[3.0], [-2.0]])
    y, mean, rstd = layer_norm_forward(x, np.array([2.0]), np.array([0.5]), 1e-5)
    np.testing.assert_array_equal(y, [[0.5], [0.5]])
    np.testing.assert_array_equal(mean, [3.0, -2.0])


@pytest.mark.parametrize("dtype", DTYPES)
def test_layer_norm_constant_rows_stay_finite(dtype):
    x = np.full((3, 16), 7.25, dtype=dtype)
    x[1] = 1e4
    weight, bias = np.full(16, 2, dtype=dtype), np.full(16, 0.5, dtype=dtype)
    y, mean, rstd = layer_norm_forward(x, weight, bias, 1e-5)
    np.testing.assert_array_equal(y, np.full_like(x, 0.5))
    np.testing.assert_allclose(rstd, 1 / np.sqrt(1e-5), rtol=1e-6)
    grads = layer_norm_backward(np.ones_like(x), x, weight, mean, rstd)
    assert all(np.isfinite(g).all() for g in grads)


def test_layer_norm_matches_torch_in_float64():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    x, weight, bias, grad = make_case(rng, 9, 13, np.float64)
    y, mean, rstd = layer_norm_forward(x, weight, bias, 1e-5)
    dx, dweight, dbias = layer_norm_backward(grad, x, weight, mean, rstd)
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, weight, bias))
    ty = torch.nn.functional.layer_norm(tx, (13,), tw, tb, 1e-5)
    ty.backward(torch.from_numpy(grad))
    for ours, theirs in ((y, ty), (dx, tx.grad), (dweight, tw.grad), (dbias, tb.grad)):
        np.testing.assert_allclose(ours, theirs.detach().numpy(), rtol=1e-10, atol=1e-12)


def test_layer_norm_backward_matches_central_differences():
    rng = np.random.default_rng(2)
    x, weight, bias, _ = make_case(rng, 3, 5, np.float64)

    def forward_of(x_, w_, b_):
        return layer_norm_forward(x_, w_, b_, 1e-5)[0]

    _, mean, rstd = layer_norm_forward(x, weight, bias, 1e-5)

    def grads_of(cotangent):
        return layer_norm_backward(cotangent, x, weight, mean, rstd)

    assert_vjp_matches_central_difference(lambda x_: forward_of(x_, weight, bias),
                                          lambda v: grads_of(v)[0], x, rng)
    assert_vjp_matches_central_difference(lambda w_: forward_of(x, w_, bias),
                                          lambda v: grads_of(v)[1], weight, rng)
    assert_vjp_matches_central_difference(lambda b_: forward_of(x, weight, b_),
                                          lambda v: grads_of(v)[2], bias, rng)


@pytest.mark.parametrize("dtype", DTYPES)
def test_layer_norm_is_bitwise_deterministic_across_thread_counts(dtype):
    x, weight, bias, grad = make_case(np.random.default_rng(3), 1000, 96, dtype)
    runs = []
    for threads in (1, 2, 2):
        with numba_threads(threads):
            y, mean, rstd = layer_norm_forward(x, weight, bias, 1e-5)
            runs.append((y, *layer_norm_backward(grad, x, weight, mean, rstd)))
    for run in runs[1:]:
        for got, want in zip(run, runs[0], strict=True):
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", DTYPES)
def test_serial_and_parallel_paths_agree_bitwise(dtype, monkeypatch):
    x, weight, bias, grad = make_case(np.random.default_rng(5), 300, 96, dtype)
    runs = []
    for parallel in (False, True):
        # the size at which the kernels go parallel: this x in both paths
        monkeypatch.setattr(layer_norm_module, "_PARALLEL_MIN_ELEMENTS", x.size + (not parallel))
        y, mean, rstd = layer_norm_forward(x, weight, bias, 1e-5)
        runs.append((y, mean, rstd, *layer_norm_backward(grad, x, weight, mean, rstd)))
    for got, want in zip(runs[1], runs[0], strict=True):
        np.testing.assert_array_equal(got, want)


def test_layer_norm_accepts_non_contiguous_input():
    x, weight, bias, _ = make_case(np.random.default_rng(4), 8, 6, np.float64)
    y = layer_norm_forward(np.asfortranarray(x), weight, bias, 1e-5)[0]
    np.testing.assert_array_equal(y, layer_norm_forward(x, weight, bias, 1e-5)[0])


@pytest.mark.parametrize("call", [
    lambda: layer_norm_forward(np.zeros(4), None, None, 1e-5),
    lambda: layer_norm_forward(np.zeros((2, 0)), None, None, 1e-5),
    lambda: layer_norm_forward(np.zeros((2, 4)), np.ones(3), None, 1e-5),
    lambda: layer_norm_forward(np.zeros((2, 4)), None, np.ones((4, 1)), 1e-5),
    lambda: layer_norm_forward(np.zeros((2, 4)), np.ones(4, np.float32), None, 1e-5),
    lambda: layer_norm_forward(np.zeros((2, 4), np.int64), None, None, 1e-5),
    lambda: layer_norm_forward(np.zeros((2, 4)), None, None, -1.0),
    lambda: layer_norm_backward(np.zeros((4, 2)), np.zeros((2, 4)), None, np.zeros(2),
                                np.ones(2)),
    lambda: layer_norm_backward(np.zeros((2, 4)), np.zeros((2, 4)), None, np.zeros(2),
                                np.ones(3)),
], ids=["1-d", "no-features", "weight-shape", "bias-shape", "weight-dtype", "int64", "eps",
        "grad-shape", "rstd-shape"])
def test_inputs_outside_the_preconditions_fail_an_assert(call):
    with pytest.raises(AssertionError):
        call()

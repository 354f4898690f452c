"""GELU kernels: numpy twin, PyTorch parity, gradient check, erf accuracy, preconditions."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kernel_helpers import DTYPES, assert_vjp_matches_central_difference

from tinyattn.kernels import gelu
from tinyattn.kernels.gelu import (
    gelu_backward,
    gelu_backward_numpy,
    gelu_forward,
    gelu_forward_numpy,
)
from tinyattn.kernels.parallel import ELEMENTS_PER_CHUNK

APPROXIMATIONS = ("none", "tanh")
# float32: the twin's tanh/erf (numpy SIMD, math.erf) and the kernel's differ by a few ulps,
# and the tanh-form backward loses more than that in 1 − tanh².
TOL = {np.float32: 1e-5, np.float64: 1e-13}


def assert_matches_twin(x, grad, approximate):
    tol = TOL[x.dtype.type]
    y = gelu_forward(x, approximate)
    dx = gelu_backward(x, grad, approximate)
    for got, want in ((y, gelu_forward_numpy(x, approximate)),
                      (dx, gelu_backward_numpy(x, grad, approximate))):
        assert got.shape == x.shape and got.dtype == x.dtype
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("approximate", APPROXIMATIONS)
@pytest.mark.parametrize("shape", [(), (1,), (7,), (3, 1, 5), (1024, 512)])
def test_gelu_matches_numpy_twin(dtype, approximate, shape):
    rng = np.random.default_rng(0)
    x = np.asarray(rng.standard_normal(shape) * 3, dtype=dtype)
    assert_matches_twin(x, np.asarray(rng.standard_normal(shape), dtype=dtype), approximate)


@settings(deadline=None, max_examples=25)
@given(shape=st.lists(st.integers(0, 9), min_size=0, max_size=3).map(tuple),
       scale=st.sampled_from([0.1, 1.0, 10.0]), seed=st.integers(0, 2**16),
       dtype=st.sampled_from(DTYPES), approximate=st.sampled_from(APPROXIMATIONS))
def test_gelu_matches_numpy_twin_on_generated_shapes(shape, scale, seed, dtype, approximate):
    rng = np.random.default_rng(seed)
    x = np.asarray(rng.standard_normal(shape) * scale, dtype=dtype)
    assert_matches_twin(x, np.asarray(rng.standard_normal(shape), dtype=dtype), approximate)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("approximate", APPROXIMATIONS)
def test_gelu_edge_values(dtype, approximate):
    x = np.array([0.0, -0.0, -1e4, 1e4, np.inf], dtype=dtype)
    np.testing.assert_array_equal(gelu_forward(x, approximate), [0.0, 0.0, -0.0, 1e4, np.inf])
    dx = gelu_backward(x[:4], np.ones(4, dtype), approximate)
    np.testing.assert_array_equal(dx, [0.5, 0.5, 0.0, 1.0])
    tiny = np.array([1e-30], dtype=dtype)
    np.testing.assert_allclose(gelu_forward(tiny, approximate), 0.5e-30, rtol=1e-6)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("approximate", APPROXIMATIONS)
def test_gelu_carries_nan_to_the_output_and_the_gradient(dtype, approximate):
    x = np.array([np.nan, 1.0, -np.nan, -3.0] * 5, dtype=dtype)  # whole vectors and a tail
    nan = np.isnan(x)
    y, dx = gelu_forward(x, approximate), gelu_backward(x, np.ones_like(x), approximate)
    assert np.isnan(y[nan]).all() and np.isnan(dx[nan]).all()
    assert np.isfinite(y[~nan]).all() and np.isfinite(dx[~nan]).all()


def test_gelu_float32_erf_is_accurate_on_a_dense_grid():
    x = np.linspace(-8, 8, 20001)
    exact = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x])
    y = gelu_forward(x.astype(np.float32), "none").astype(np.float64)
    assert np.abs(y - exact).max() < 4 * np.finfo(np.float32).eps * 8


def _exact_gelu_and_slope(x):
    """y = x Φ(x) and Φ(x) + x φ(x) in float64, Φ from libm's erfc (accurate in the tails)."""
    cdf = 0.5 * np.array([math.erfc(-v / math.sqrt(2)) for v in x])
    return x * cdf, cdf + x * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)


# float32 is evaluated in float32: the exponent −x²/2 + ... is rounded once, by up to half an
# ulp of x²/2, which is a relative error of 4.8e-7 in y at x = −5 and 3.8e-6 at x = −13.
@pytest.mark.parametrize("dtype, low, high, rtol", [
    (np.float32, -5.0, 6.0, 1e-6), (np.float32, -13.0, -5.0, 1e-5),
    (np.float64, -6.0, 6.0, 1e-14), (np.float64, -37.0, 6.0, 1e-12)])
def test_exact_gelu_keeps_its_relative_accuracy_in_the_negative_tail(dtype, low, high, rtol):
    x = np.linspace(low, high, 30001).astype(dtype)
    y_exact, slope_exact = _exact_gelu_and_slope(x.astype(np.float64))
    y = gelu_forward(x).astype(np.float64)
    slope = gelu_backward(x, np.ones_like(x)).astype(np.float64)
    # 1 + erf(x/√2) would lose every digit here: Φ(−13) ≈ 6e-39, Φ(−37) ≈ 6e-300
    np.testing.assert_allclose(y, y_exact, rtol=rtol, atol=0)
    # the slope crosses zero near x = −0.75, so its error is measured against max(1, |slope|)
    assert (np.abs(slope - slope_exact) <= rtol * np.maximum(1.0, np.abs(slope_exact))).all()


def test_float32_exact_gelu_flushes_to_zero_only_below_its_smallest_normal_result():
    x = np.array([-13.05, -13.2, -20.0, -1e30, -np.inf], np.float32)
    y = gelu_forward(x)
    y_exact, _ = _exact_gelu_and_slope(x[:1].astype(np.float64))
    np.testing.assert_allclose(y[0], y_exact[0], rtol=1e-5)  # ≈ −4.1e-38, kept
    np.testing.assert_array_equal(y[1:4], 0.0)  # |y| < 1e-38 there
    assert np.isnan(y[4])  # −inf · Φ(−inf) = −inf · 0, as in torch
    np.testing.assert_array_equal(gelu_backward(x[1:4], np.ones(3, np.float32)), 0.0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("approximate", APPROXIMATIONS)
@pytest.mark.parametrize("backward", [False, True])
def test_serial_and_parallel_paths_agree_bitwise(dtype, approximate, backward, monkeypatch):
    rng = np.random.default_rng(4)
    x = (rng.standard_normal(3 * ELEMENTS_PER_CHUNK + 5) * 3).astype(dtype)
    grad = rng.standard_normal(x.shape).astype(dtype)
    outputs = []
    for parallel in (False, True):
        # the size at which the kernel goes parallel: this x in both paths
        monkeypatch.setattr(gelu, "_PARALLEL_MIN_ELEMENTS", x.size + (not parallel))
        outputs.append(gelu._run(x, grad if backward else None, approximate))
    np.testing.assert_array_equal(outputs[0], outputs[1])
    want = gelu_backward_numpy(x, grad, approximate) if backward else gelu_forward_numpy(
        x, approximate)
    np.testing.assert_allclose(outputs[0], want, rtol=TOL[dtype], atol=TOL[dtype])


@pytest.mark.parametrize("approximate", APPROXIMATIONS)
def test_gelu_matches_torch_in_float64(approximate):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    x = rng.standard_normal((17, 9)) * 3
    grad = rng.standard_normal(x.shape)
    tx = torch.tensor(x, requires_grad=True)
    ty = torch.nn.functional.gelu(tx, approximate=approximate)
    ty.backward(torch.from_numpy(grad))
    np.testing.assert_allclose(gelu_forward(x, approximate), ty.detach().numpy(),
                               rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(gelu_backward(x, grad, approximate), tx.grad.numpy(),
                               rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("approximate", APPROXIMATIONS)
def test_gelu_backward_matches_central_differences(approximate):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 3)) * 2
    assert_vjp_matches_central_difference(lambda x_: gelu_forward(x_, approximate),
                                          lambda v: gelu_backward(x, v, approximate), x, rng)


def test_gelu_is_bitwise_deterministic():
    x = np.random.default_rng(3).standard_normal(100_001).astype(np.float32)
    np.testing.assert_array_equal(gelu_forward(x), gelu_forward(x))
    np.testing.assert_array_equal(gelu_backward(x, x), gelu_backward(x, x))


@pytest.mark.parametrize("call", [
    lambda: gelu_forward(np.zeros(3), "erf"),
    lambda: gelu_forward(np.zeros(3, np.int64)),
    lambda: gelu_backward(np.zeros(3), np.zeros(4)),
    lambda: gelu_backward(np.zeros(3), np.zeros(3, np.float32)),
], ids=["approximate", "int64", "grad-shape", "grad-dtype"])
def test_inputs_outside_the_preconditions_fail_an_assert(call):
    with pytest.raises(AssertionError):
        call()

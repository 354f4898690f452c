"""Cross-entropy kernels: numpy twin, PyTorch parity, extreme logits, gradient check,
preconditions."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kernel_helpers import DTYPES, assert_vjp_matches_central_difference

from tinyattn.kernels.cross_entropy import (
    cross_entropy_backward,
    cross_entropy_backward_numpy,
    cross_entropy_forward,
    cross_entropy_forward_numpy,
)

TOL = {np.float32: 3e-6, np.float64: 1e-12}
IGNORE = -100


def make_case(rng, n_rows, n_classes, dtype, scale=3.0, ignore_every=0):
    logits = (rng.standard_normal((n_rows, n_classes)) * scale).astype(dtype)
    target = rng.integers(0, n_classes, n_rows)
    if ignore_every:
        target[::ignore_every] = IGNORE
    grad_rows = rng.standard_normal(n_rows).astype(dtype)
    return logits, target, grad_rows


def assert_matches_twin(logits, target, grad_rows, smoothing, ignore_index=IGNORE):
    tol = TOL[logits.dtype.type]
    loss, lse = cross_entropy_forward(logits, target, ignore_index, smoothing)
    want_loss, want_lse = cross_entropy_forward_numpy(logits, target, ignore_index, smoothing)
    assert loss.dtype == lse.dtype == logits.dtype
    np.testing.assert_allclose(loss, want_loss, rtol=tol, atol=tol)
    np.testing.assert_allclose(lse, want_lse, rtol=tol, atol=tol)
    dlogits = cross_entropy_backward(logits, target, lse, grad_rows, ignore_index, smoothing)
    want = cross_entropy_backward_numpy(logits, target, lse, grad_rows, ignore_index, smoothing)
    assert dlogits.dtype == logits.dtype
    np.testing.assert_allclose(dlogits, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (1, 5), (7, 1), (33, 17), (1024, 65)])
@pytest.mark.parametrize("smoothing", [0.0, 0.1, 1.0])
def test_cross_entropy_matches_numpy_twin(dtype, shape, smoothing):
    rng = np.random.default_rng(0)
    assert_matches_twin(*make_case(rng, *shape, dtype, ignore_every=3), smoothing)


@settings(deadline=None, max_examples=25)
@given(n_rows=st.integers(1, 40), n_classes=st.integers(1, 80), seed=st.integers(0, 2**16),
       dtype=st.sampled_from(DTYPES), smoothing=st.sampled_from([0.0, 0.05, 0.3]),
       scale=st.sampled_from([0.01, 1.0, 30.0]))
def test_cross_entropy_matches_numpy_twin_on_generated_shapes(n_rows, n_classes, seed, dtype,
                                                              smoothing, scale):
    rng = np.random.default_rng(seed)
    assert_matches_twin(*make_case(rng, n_rows, n_classes, dtype, scale, ignore_every=4),
                        smoothing)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("magnitude", [1e4, 3e38])
def test_cross_entropy_is_exact_for_huge_logits(dtype, magnitude):
    # Two tied maxima and one very negative logit: softmax is (½, ½, 0) exactly.
    logits = np.array([[magnitude, magnitude, -magnitude]] * 3, dtype=dtype)
    target = np.array([0, 2, 1])
    loss, lse = cross_entropy_forward(logits, target, IGNORE, 0.0)
    np.testing.assert_allclose(loss[[0, 2]], np.log(2), rtol=1e-6)
    target_term = 2 * magnitude + np.log(2)
    if target_term > np.finfo(dtype).max:
        assert loss[1] == np.inf
    else:
        np.testing.assert_allclose(loss[1], target_term, rtol=1e-6)
    dlogits = cross_entropy_backward(logits, target, lse, np.ones(3, dtype), IGNORE, 0.0)
    np.testing.assert_allclose(dlogits, [[-0.5, 0.5, 0], [0.5, 0.5, -1], [0.5, -0.5, 0]],
                               atol=1e-7)
    smooth_loss, _ = cross_entropy_forward(logits[:1], target[:1], IGNORE, 0.3)
    # lse − mean x = log 2 + (m − m/3)
    np.testing.assert_allclose(smooth_loss, 0.7 * np.log(2) + 0.3 * (np.log(2) + magnitude * 2 / 3),
                               rtol=1e-6)


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_row_maximum_is_found_at_every_position(dtype):
    """A logit of 1e4 at each position of rows of 37 (each of the maximum's eight chains, and
    its tail): the loss of its class is 0 and its gradient one-hot, not NaN from ``e^(1e4)``."""
    logits = np.zeros((37, 37), dtype)
    np.fill_diagonal(logits, 1e4)
    target = np.arange(37)
    loss, lse = cross_entropy_forward(logits, target, IGNORE, 0.0)
    np.testing.assert_array_equal(loss, np.zeros(37, dtype))
    dlogits = cross_entropy_backward(logits, (target + 1) % 37, lse, np.ones(37, dtype), IGNORE,
                                     0.0)
    np.testing.assert_array_equal(dlogits, np.eye(37, dtype=dtype) - np.roll(
        np.eye(37, dtype=dtype), 1, axis=1))


def test_cross_entropy_ignored_rows_have_zero_loss_and_gradient():
    rng = np.random.default_rng(1)
    logits, _, grad_rows = make_case(rng, 6, 4, np.float64)
    target = np.array([0, 2, 1, 3, 2, 0])
    loss, lse = cross_entropy_forward(logits, target, 2, 0.2)
    dlogits = cross_entropy_backward(logits, target, lse, grad_rows, 2, 0.2)
    assert (loss[[1, 4]] == 0).all() and (dlogits[[1, 4]] == 0).all()
    assert (loss[[0, 2, 3, 5]] > 0).all()
    np.testing.assert_allclose(lse, np.log(np.exp(logits).sum(axis=1)), rtol=1e-12)


@pytest.mark.parametrize("smoothing", [0.0, 0.25])
def test_cross_entropy_matches_torch_in_float64(smoothing):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    logits, target, grad_rows = make_case(rng, 11, 7, np.float64, ignore_every=4)
    loss, lse = cross_entropy_forward(logits, target, IGNORE, smoothing)
    dlogits = cross_entropy_backward(logits, target, lse, grad_rows, IGNORE, smoothing)
    t_logits = torch.tensor(logits, requires_grad=True)
    t_loss = torch.nn.functional.cross_entropy(t_logits, torch.from_numpy(target),
                                               ignore_index=IGNORE, reduction="none",
                                               label_smoothing=smoothing)
    t_loss.backward(torch.from_numpy(grad_rows))
    np.testing.assert_allclose(loss, t_loss.detach().numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(dlogits, t_logits.grad.numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(lse, torch.logsumexp(t_logits, 1).detach().numpy(), rtol=1e-13)


def test_cross_entropy_matches_torch_for_float32_logits_near_the_float32_maximum():
    torch = pytest.importorskip("torch")
    logits = np.array([[3e38, 2.9e38, -3e38, 3e38], [1e4, 1e4 - 1, -1e4, 0.5]], np.float32)
    target = np.array([1, 0])
    loss, lse = cross_entropy_forward(logits, target, IGNORE, 0.0)
    dlogits = cross_entropy_backward(logits, target, lse, np.ones(2, np.float32), IGNORE, 0.0)
    t_logits = torch.tensor(logits, requires_grad=True)
    t_loss = torch.nn.functional.cross_entropy(t_logits, torch.from_numpy(target),
                                               reduction="none")
    t_loss.sum().backward()
    np.testing.assert_allclose(loss, t_loss.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(dlogits, t_logits.grad.numpy(), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("smoothing", [0.0, 0.3])
def test_cross_entropy_backward_matches_central_differences(smoothing):
    rng = np.random.default_rng(3)
    logits, target, _ = make_case(rng, 4, 5, np.float64)
    target[2] = IGNORE
    _, lse = cross_entropy_forward(logits, target, IGNORE, smoothing)
    assert_vjp_matches_central_difference(
        lambda x: cross_entropy_forward(x, target, IGNORE, smoothing)[0],
        lambda v: cross_entropy_backward(logits, target, lse, v, IGNORE, smoothing),
        logits, rng)


def test_cross_entropy_is_bitwise_deterministic():
    logits, target, grad_rows = make_case(np.random.default_rng(4), 2048, 65, np.float32)
    first = cross_entropy_forward(logits, target)
    np.testing.assert_array_equal(first, cross_entropy_forward(logits, target))
    np.testing.assert_array_equal(
        cross_entropy_backward(logits, target, first[1], grad_rows),
        cross_entropy_backward(logits, target, first[1], grad_rows))


@pytest.mark.parametrize("bad", [5, -1, -101, 2**40])
def test_out_of_range_target_fails_an_assert_before_the_kernel_reads_it(bad):
    logits = np.zeros((3, 5))
    target = np.array([0, bad, 4])
    with pytest.raises(AssertionError, match="target out of range for 5 classes"):
        cross_entropy_forward(logits, target, IGNORE, 0.0)
    with pytest.raises(AssertionError, match="target out of range for 5 classes"):
        cross_entropy_backward(logits, target, np.zeros(3), np.ones(3), IGNORE, 0.0)


@pytest.mark.parametrize("call", [
    lambda: cross_entropy_forward(np.zeros((3, 5)), np.zeros(3)),
    lambda: cross_entropy_forward(np.zeros((3, 5)), np.zeros(2, np.int64)),
    lambda: cross_entropy_forward(np.zeros(5), np.zeros(5, np.int64)),
    lambda: cross_entropy_forward(np.zeros((3, 0)), np.zeros(3, np.int64)),
    lambda: cross_entropy_forward(np.zeros((3, 5), np.float16), np.zeros(3, np.int64)),
    lambda: cross_entropy_forward(np.zeros((3, 5)), np.zeros(3, np.int64), IGNORE, 1.5),
    lambda: cross_entropy_backward(np.zeros((3, 5)), np.zeros(3, np.int64), np.zeros(3),
                                   np.ones(4)),
    lambda: cross_entropy_backward(np.zeros((3, 5)), np.zeros(3, np.int64), np.zeros(3),
                                   np.ones(3, np.float32)),
], ids=["float-target", "target-shape", "1-d-logits", "no-classes", "float16", "smoothing",
        "grad-rows-shape", "grad-rows-dtype"])
def test_inputs_outside_the_preconditions_fail_an_assert(call):
    with pytest.raises(AssertionError):
        call()

"""RMSNorm and F.rms_norm: finite differences, a numpy formula, and torch.nn.RMSNorm."""

import numpy as np
import pytest

import tinyattn as ta


def numpy_rms_norm(x, weight, eps):
    rms = np.sqrt((x ** 2).mean(axis=-1, keepdims=True) + eps)
    return x / rms * weight


@pytest.mark.parametrize("shape", [(3, 5), (2, 4, 6), (7,)])
def test_rms_norm_matches_the_numpy_formula_and_gradchecks(shape):
    rng = np.random.default_rng(0)
    x = rng.normal(size=shape)
    weight = rng.normal(size=shape[-1])
    out = ta.F.rms_norm(ta.tensor(x), shape[-1], ta.tensor(weight), eps=1e-6)
    np.testing.assert_allclose(out.numpy(), numpy_rms_norm(x, weight, 1e-6), rtol=1e-12)
    inputs = (ta.tensor(x, requires_grad=True), ta.tensor(weight, requires_grad=True))
    assert ta.gradcheck(lambda a, w: ta.F.rms_norm(a, shape[-1], w, eps=1e-6), inputs)


def test_rms_norm_over_two_trailing_dims_gradchecks():
    x = ta.tensor(np.random.default_rng(1).normal(size=(2, 3, 4)), requires_grad=True)
    w = ta.tensor(np.random.default_rng(2).normal(size=(3, 4)), requires_grad=True)
    assert ta.gradcheck(lambda a, b: ta.F.rms_norm(a, (3, 4), b), (x, w))


def test_default_eps_is_the_dtype_machine_epsilon():
    x = np.full((1, 4), 1e-5)
    for dtype in (np.float32, np.float64):
        out = ta.F.rms_norm(ta.tensor(x.astype(dtype)), 4).numpy()
        expected = x / np.sqrt(1e-10 + np.finfo(dtype).eps)
        np.testing.assert_allclose(out, expected, rtol=1e-5)


@pytest.mark.parametrize("bad, message", [
    (lambda: ta.F.rms_norm(ta.randn(2, 3), 4), r"rms_norm: input of shape \(2, 3\) does not "
                                               r"end in normalized_shape \(4,\)"),
    (lambda: ta.F.rms_norm(ta.randn(2, 3), 3, ta.ones(4)), r"weight must have shape"),
    (lambda: ta.F.rms_norm(ta.randn(2, 3), 3, eps=0.0), r"eps must be > 0"),
    (lambda: ta.nn.RMSNorm(3, eps=-1.0), r"RMSNorm: eps"),
    (lambda: ta.nn.RMSNorm(-1), r"RMSNorm: normalized_shape"),
])
def test_bad_rms_norm_arguments_raise_clear_errors(bad, message):
    with pytest.raises(ValueError, match=message):
        bad()


def test_rms_norm_layer_matches_torch_values_and_gradients():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    x = rng.normal(size=(2, 5, 6))
    grad = rng.normal(size=(2, 5, 6))
    for eps in (None, 1e-5):
        ours = ta.nn.RMSNorm(6, eps=eps).double()
        ours.weight.data = rng.normal(size=6)
        theirs = torch.nn.RMSNorm(6, eps=eps, dtype=torch.float64)
        with torch.no_grad():
            theirs.weight.copy_(torch.from_numpy(ours.weight.numpy()))
        xa, xt = ta.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        out_a, out_t = ours(xa), theirs(xt)
        np.testing.assert_allclose(out_a.numpy(), out_t.detach().numpy(), rtol=1e-12)
        out_a.backward(ta.tensor(grad))
        out_t.backward(torch.from_numpy(grad))
        np.testing.assert_allclose(xa.grad.numpy(), xt.grad.numpy(), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(),
                                   rtol=1e-10)

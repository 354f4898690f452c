"""The gradient checker must catch wrong gradients and say where they are wrong."""

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.autograd import Function
from tinyattn.gradcheck import central_difference


class WrongSquare(Function):
    """y = x², with a backward that is wrong in one element: its last one is 0.5 off or, with
    ``nan_at``, the one at that index is NaN."""

    @staticmethod
    def forward(ctx, x, nan_at=None):
        ctx.save_for_backward(x)
        ctx.nan_at = nan_at
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        dx = 2 * x * grad
        if ctx.nan_at is None:
            dx.numpy().reshape(-1)[-1] += 0.5  # the slip: one element off
        else:
            dx.numpy()[ctx.nan_at] = np.nan  # the slip: one element lost
        return dx, None


def test_gradcheck_accepts_a_correct_gradient():
    x = ta.randn(3, 4, dtype="float64", requires_grad=True)
    assert ta.gradcheck(lambda t: (t * t).tanh(), (x,))


def test_gradcheck_rejects_a_wrong_gradient_and_names_the_worst_element():
    x = ta.tensor(np.arange(1.0, 7.0).reshape(2, 3), dtype="float64", requires_grad=True)
    with pytest.raises(ta.GradcheckError, match=r"input 0 \(shape \(2, 3\)\).*element \(1, 2\)"):
        ta.gradcheck(lambda t: WrongSquare.apply(t), (x,))
    assert ta.gradcheck(lambda t: WrongSquare.apply(t), (x,), raise_exception=False) is False


def test_gradcheck_rejects_a_nan_gradient_and_names_its_element():
    x = ta.tensor(np.arange(1.0, 7.0).reshape(2, 3), dtype="float64", requires_grad=True)
    with pytest.raises(ta.GradcheckError, match=r"element \(0, 1\): analytic nan"):
        ta.gradcheck(lambda t: WrongSquare.apply(t, (0, 1)), (x,))


def test_random_directions_catch_a_wrong_gradient_in_a_large_input():
    x = ta.randn(40, 40, dtype="float64", requires_grad=True)
    with pytest.raises(ta.GradcheckError, match="random direction"):
        ta.gradcheck(lambda t: WrongSquare.apply(t), (x,), max_elements=100)


def test_gradcheck_catches_a_softmax_backward_that_a_bare_sum_would_miss():
    class SoftmaxWithoutBackward(Function):
        @staticmethod
        def forward(ctx, x):
            return x.exp() / x.exp().sum(dim=-1, keepdim=True)

        @staticmethod
        def backward(ctx, grad):
            return grad * 0.0  # wrong, yet d(sum softmax)/dx really is 0

    x = ta.randn(2, 5, dtype="float64", requires_grad=True)
    with pytest.raises(ta.GradcheckError):
        ta.gradcheck(lambda t: SoftmaxWithoutBackward.apply(t), (x,))


def test_gradcheck_runs_in_float64_even_for_float32_inputs():
    x = ta.randn(3, dtype="float32", requires_grad=True)
    dtypes = []
    ta.gradcheck(lambda t: dtypes.append(t.dtype) or t * t, (x,))
    assert set(dtypes) == {np.dtype(np.float64)}


def test_gradcheck_checks_several_outputs_and_passes_integer_inputs_through():
    x = ta.randn(4, 3, dtype="float64", requires_grad=True)
    rows = ta.tensor([0, 2, 2])
    assert ta.gradcheck(lambda t, idx: (t[idx], t.exp()), (x, rows))


def test_gradcheck_without_differentiable_inputs_is_an_error():
    with pytest.raises(ValueError, match="no input has requires_grad"):
        ta.gradcheck(lambda t: t * 2, (ta.ones(2),))


def test_central_difference_is_the_directional_derivative_with_error_of_order_eps_squared():
    rng = np.random.default_rng(0)
    x, u = rng.standard_normal(5), rng.standard_normal(5)
    exact = float(np.cos(x) @ u)  # d/dt Σ sin(x + t·u) at t = 0
    errors = [abs(central_difference(lambda z: float(np.sum(np.sin(z))), x, u, eps) - exact)
              for eps in (1e-2, 1e-3)]
    assert errors[0] < 1e-4
    # central: the error falls 100-fold when eps falls 10-fold (a one-sided one: 10-fold)
    assert 50 < errors[0] / errors[1] < 200


def test_central_difference_leaves_its_point_unchanged():
    x = np.array([1.0, 2.0, 3.0])
    central_difference(lambda z: float(z @ z), x, np.ones(3))
    assert x.tolist() == [1.0, 2.0, 3.0]

"""The finite-difference column of the ``tinyattn gradcheck`` table must expose wrong gradients."""

import numpy as np

import tinyattn as ta
from tinyattn.checks import Case, directional_error


def test_directional_error_is_rounding_for_correct_gradients_of_several_inputs():
    a = ta.tensor(np.array([[0.5, -1.0, 2.0]]), requires_grad=True)
    b = ta.tensor(np.array([[1.5], [0.3]]), requires_grad=True)
    assert directional_error(Case("outer", lambda s, t: (s * t).tanh(), [a, b])) < 1e-8


def test_directional_error_exposes_a_wrong_gradient_in_any_input():
    a = ta.tensor(np.array([0.5, -1.0, 2.0]), requires_grad=True)
    b = ta.tensor(np.array([1.5, 0.3, -0.7]), requires_grad=True)
    b.register_hook(lambda g: g * 3.0)  # b's gradient three times too large, a's right
    assert directional_error(Case("product", lambda s, t: s * t, [a, b])) > 1e-2


def test_directional_error_restores_the_inputs_and_clears_their_gradients():
    a = ta.tensor(np.array([0.5, -1.0, 2.0]), requires_grad=True)
    b = ta.tensor(np.array([[1.5], [0.3]]), requires_grad=True)
    before = (a.numpy(), b.numpy())
    directional_error(Case("outer", lambda s, t: t * s, [a, b]))
    assert a.numpy() is before[0] and b.numpy() is before[1]
    assert a.numpy().tolist() == [0.5, -1.0, 2.0] and b.numpy().tolist() == [[1.5], [0.3]]
    assert a.grad is None and b.grad is None


def test_a_constant_vector_jacobian_product_is_marked_and_checked_by_finite_differences():
    from tinyattn.checks import CONSTANT_VJP, second_order

    x = ta.tensor(np.array([0.3, -1.2, 2.6]), requires_grad=True)
    case = second_order(Case("floor", ta.floor, [x]))
    assert case.name == f"floor {CONSTANT_VJP}"
    assert directional_error(case) == 0.0


def test_the_constant_check_exposes_a_product_that_moves():
    from tinyattn.checks import CONSTANT_VJP

    x = ta.tensor(np.array([0.3, -1.2, 2.6]), requires_grad=True)
    moving = Case(f"detached {CONSTANT_VJP}", lambda t: ta.tensor(t.numpy() ** 2), [x])
    assert directional_error(moving) > 1e-3


def test_the_readme_quotes_the_number_of_cases():
    from pathlib import Path

    from tinyattn.checks import cases

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    n = len(cases())
    assert f"({n} cases)" in readme and f"({n} of {n} pass)" in readme

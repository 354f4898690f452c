"""``outer`` (``ta.outer``, ``Tensor.outer``) and the elementwise functions PyTorch also has at
the top level (``torch.square``, ``torch.floor``, …): float64 gradcheck and gradgradcheck,
PyTorch's values, dtypes, shapes and first and second derivatives (skipped without torch), and
the error for arguments that are not vectors."""

from __future__ import annotations

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.errors import ShapeError

RNG = np.random.default_rng(7)


def _leaf(*shape):
    return ta.tensor(RNG.standard_normal(shape), requires_grad=True)


def test_outer_is_the_table_of_products():
    a, b = np.array([1.0, -2.0, 0.5]), np.array([3.0, 4.0])
    out = ta.outer(ta.tensor(a), ta.tensor(b))
    assert out.shape == (3, 2)
    np.testing.assert_array_equal(out.numpy(), a[:, None] * b[None, :])
    np.testing.assert_array_equal(ta.tensor(a).outer(ta.tensor(b)).numpy(), out.numpy())


def test_outer_gradients_and_second_derivatives_match_finite_differences():
    a, b = _leaf(4), _leaf(3)
    assert ta.gradcheck(ta.outer, [a, b])
    assert ta.gradgradcheck(ta.outer, [a, b])
    assert ta.gradgradcheck(lambda s, t: ta.outer(s, t).tanh(), [a, b])


def test_outer_gradient_is_the_cotangent_times_the_other_vector():
    a, b = _leaf(4), _leaf(3)
    g = RNG.standard_normal((4, 3))
    ta.outer(a, b).backward(ta.tensor(g))
    np.testing.assert_allclose(a.grad.numpy(), g @ b.numpy(), rtol=1e-12)
    np.testing.assert_allclose(b.grad.numpy(), g.T @ a.numpy(), rtol=1e-12)


@pytest.mark.parametrize("shapes", [((3,), (4,)), ((0,), (2,)), ((1,), (1,))])
@pytest.mark.parametrize("dtypes", [("float64", "float64"), ("float32", "float64"),
                                    ("int64", "float32"), ("int64", "int64"), ("bool", "bool")])
def test_outer_equals_pytorch(shapes, dtypes):
    torch = pytest.importorskip("torch")
    arrays = []
    for shape, dtype in zip(shapes, dtypes):
        values = RNG.standard_normal(shape) * 3
        arrays.append(values > 0 if dtype == "bool" else values.astype(dtype))
    ours = ta.outer(*[ta.tensor(a) for a in arrays])
    theirs = torch.outer(*[torch.tensor(a) for a in arrays])
    assert ours.shape == tuple(theirs.shape)
    assert str(ours.dtype) == str(theirs.dtype).removeprefix("torch.")
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_outer_first_and_second_derivatives_equal_pytorch():
    torch = pytest.importorskip("torch")
    a, b = RNG.standard_normal(4), RNG.standard_normal(3)
    g, v = RNG.standard_normal((4, 3)), RNG.standard_normal(7)
    results = []
    for m in (ta, torch):
        x = m.tensor(a, requires_grad=True)
        y = m.tensor(b, requires_grad=True)
        out = (m.outer(x, y) ** 2).sum(0) if m is ta else (torch.outer(x, y) ** 2).sum(0)
        dx, dy = m.autograd.grad((out * m.tensor(g.sum(0))).sum(), [x, y], create_graph=True)
        flat = m.cat([dx, dy])
        second = m.autograd.grad((flat * m.tensor(v)).sum(), [x, y])
        results.append([t.detach().numpy() for t in (out, dx, dy, *second)])
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shapes", [((2, 2), (3,)), ((3,), ()), ((), ())])
def test_outer_refuses_what_is_not_a_vector_as_pytorch_does(shapes):
    a, b = (ta.ones(s) for s in shapes)
    with pytest.raises(ShapeError, match=r"outer: expected 1-D tensors, got (input|vec2) of "
                                         r"shape .* \(\d-D\)"):
        ta.outer(a, b)
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError, match="outer: Expected 1-D"):
        torch.outer(*(torch.ones(s) for s in shapes))


TOP_LEVEL = ["square", "reciprocal", "sign", "floor", "ceil", "round", "trunc", "log1p",
             "expm1"]


@pytest.mark.parametrize("name", TOP_LEVEL)
def test_elementwise_functions_are_at_the_top_level_as_in_pytorch(name):
    torch = pytest.importorskip("torch")
    values = np.array([-2.5, -1.5, -0.4, 0.0, 0.5, 1.5, 2.7], dtype=np.float32)
    assert name in ta.__all__
    ours = getattr(ta, name)(ta.tensor(values))
    theirs = getattr(torch, name)(torch.tensor(values))
    assert str(ours.dtype) == str(theirs.dtype).removeprefix("torch.")
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6)
    np.testing.assert_array_equal(ours.numpy(), getattr(ta.tensor(values), name)().numpy())

"""A custom ``autograd.Function`` written for PyTorch runs unchanged on tinyattn.

The same source (``SOURCE``) is executed twice, once with ``torch`` naming PyTorch and once
naming tinyattn; the values, gradients and second derivatives must agree in float64. Its
Functions use what a PyTorch tutorial teaches: tensor methods in ``forward`` and ``backward``,
``save_for_backward``/``saved_tensors``, ``needs_input_grad``, ``mark_non_differentiable``,
several outputs, ``scatter_`` in a backward, and ``once_differentiable``.
"""

import sys
import types

import numpy as np
import pytest

import tinyattn as ta

SOURCE = '''
import torch
from torch.autograd.function import once_differentiable


class ClampedExp(torch.autograd.Function):
    """y = exp(clamp(x, min=low)); dy/dx = y where x > low, else 0."""

    @staticmethod
    def forward(ctx, x, low):
        y = x.clamp(min=low).exp()
        ctx.save_for_backward(x, y)
        ctx.low = low
        return y

    @staticmethod
    def backward(ctx, grad):
        x, y = ctx.saved_tensors
        dx = None
        if ctx.needs_input_grad[0]:
            dx = grad * y * (x > ctx.low).to(grad.dtype)
        return dx, None


class RowMax(torch.autograd.Function):
    """The maximum of each row and its index; the gradient goes to the max's position."""

    @staticmethod
    def forward(ctx, x):
        values, index = x.max(dim=-1)
        ctx.mark_non_differentiable(index)
        ctx.save_for_backward(index)
        ctx.shape = x.shape
        return values, index

    @staticmethod
    def backward(ctx, grad_values, grad_index):
        (index,) = ctx.saved_tensors
        dx = grad_values.new_zeros(ctx.shape)
        dx.scatter_(-1, index.unsqueeze(-1), grad_values.unsqueeze(-1))
        return dx


class Cube(torch.autograd.Function):
    """y = x³ with a backward on numpy arrays: differentiable once only."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x * x

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return torch.from_numpy(3.0 * x.detach().numpy() ** 2 * grad.detach().numpy())


def model(x, w):
    """A loss through ClampedExp and RowMax (and the index, which has no gradient)."""
    values, index = RowMax.apply(ClampedExp.apply(x @ w, -0.5))
    return (values * values).sum() + (index == index.max()).sum() * 0.0
'''


def load(torch_module) -> types.ModuleType:
    """Execute SOURCE with ``import torch`` giving ``torch_module``."""
    module = types.ModuleType("custom_functions")
    saved = {name: sys.modules.get(name) for name in ("torch", "torch.autograd",
                                                        "torch.autograd.function")}
    sys.modules["torch"] = torch_module
    sys.modules["torch.autograd"] = torch_module.autograd
    sys.modules["torch.autograd.function"] = torch_module.autograd.function
    try:
        exec(compile(SOURCE, "custom_functions.py", "exec"), module.__dict__)
    finally:
        for name, value in saved.items():
            if value is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = value
    return module


def inputs(make, rng):
    x = make(rng.standard_normal((4, 5)), requires_grad=True)
    w = make(rng.standard_normal((5, 6)), requires_grad=True)
    return x, w


def test_the_same_source_gives_pytorchs_values_gradients_and_second_derivatives():
    torch = pytest.importorskip("torch")
    ours, theirs = load(ta), load(torch)
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((4, 5)), rng.standard_normal((5, 6))]
    v = [rng.standard_normal(a.shape) for a in arrays]

    def run(lib, module, tensor):
        x, w = (tensor(a.copy(), requires_grad=True) for a in arrays)
        loss = module.model(x, w)
        gx, gw = lib.autograd.grad(loss, (x, w), create_graph=True)
        directional = (gx * tensor(v[0])).sum() + (gw * tensor(v[1])).sum()
        hx, hw = lib.autograd.grad(directional, (x, w))
        return [t.detach().numpy() for t in (loss, gx, gw, hx, hw)]

    mine = run(ta, ours, lambda a, requires_grad=False: ta.tensor(a, requires_grad=requires_grad))
    reference = run(torch, theirs,
                    lambda a, requires_grad=False: torch.tensor(a, requires_grad=requires_grad))
    for got, expected in zip(mine, reference):
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    assert np.abs(mine[3]).max() > 0.1  # the second derivatives are not trivially zero


def test_outputs_marked_non_differentiable_do_not_require_grad():
    module = load(ta)
    x = ta.tensor(np.random.default_rng(1).standard_normal((3, 4)), requires_grad=True)
    values, index = module.RowMax.apply(x)
    assert values.requires_grad and values.grad_fn is not None
    assert not index.requires_grad and index.grad_fn is None and index.dtype == np.int64


def test_every_float_output_marked_non_differentiable_is_left_out_of_the_graph():
    class Standardize(ta.autograd.Function):
        """(x − mean) / spread, with the two statistics as outputs that carry no gradient."""

        @staticmethod
        def forward(ctx, x):
            mean, spread = x.mean(), x.std()
            ctx.mark_non_differentiable(mean, spread)
            ctx.save_for_backward(spread)
            return (x - mean) / spread, mean, spread

        @staticmethod
        def backward(ctx, grad, grad_mean, grad_spread):
            assert not grad_mean.numpy().any() and not grad_spread.numpy().any()
            (spread,) = ctx.saved_tensors
            return grad / spread  # (the statistics held constant)

    x = ta.tensor([1.0, 2.0, 4.0], dtype=ta.float64, requires_grad=True)
    y, mean, spread = Standardize.apply(x)
    assert y.requires_grad and y.grad_fn is not None
    for statistic in (mean, spread):
        assert statistic.dtype == np.float64
        assert not statistic.requires_grad and statistic.grad_fn is None
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full(3, 1 / np.std([1.0, 2.0, 4.0], ddof=1)))


def test_needs_input_grad_and_the_gradient_of_a_non_tensor_argument():
    module = load(ta)
    seen = []

    class Spy(module.ClampedExp):
        @staticmethod
        def backward(ctx, grad):
            seen.append(ctx.needs_input_grad)
            return module.ClampedExp.backward(ctx, grad)

    x = ta.tensor([-1.0, 0.0, 1.0], dtype=ta.float64, requires_grad=True)
    Spy.apply(x, -0.5).sum().backward()
    assert seen == [(True, False)]
    np.testing.assert_allclose(x.grad.numpy(), [0.0, 1.0, np.e])


def test_a_double_backward_through_once_differentiable_is_refused_as_in_pytorch():
    module = load(ta)
    x = ta.tensor([1.0, 2.0], dtype=ta.float64, requires_grad=True)
    (g,) = ta.autograd.grad(module.Cube.apply(x).sum(), x, create_graph=True)
    np.testing.assert_allclose(g.numpy(), [3.0, 12.0])
    with pytest.raises(RuntimeError, match="once_differentiable"):
        g.sum().backward()
    x.grad = None
    module.Cube.apply(x).sum().backward()  # a first-order backward is fine
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 12.0])


def test_gradcheck_and_gradgradcheck_accept_custom_functions():
    module = load(ta)
    x = ta.tensor(np.random.default_rng(2).standard_normal((3, 4)) + 1.0, dtype=ta.float64,
                  requires_grad=True)
    assert ta.gradcheck(lambda t: module.ClampedExp.apply(t, -0.5), (x,))
    assert ta.gradgradcheck(lambda t: module.ClampedExp.apply(t, -0.5), (x,))
    assert ta.gradcheck(lambda t: module.RowMax.apply(t)[0], (x,))


def test_a_wrong_number_of_gradients_is_a_clear_error():
    class TooFew(ta.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            return a * b

        @staticmethod
        def backward(ctx, grad):
            return grad

    a, b = (ta.ones(2, requires_grad=True) for _ in range(2))
    with pytest.raises(RuntimeError, match="incorrect number of gradients"):
        TooFew.apply(a, b).sum().backward()


def test_saving_something_other_than_a_tensor_is_a_clear_error():
    class SavesAList(ta.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward([1, 2])
            return a * 2

        @staticmethod
        def backward(ctx, grad):
            return grad * 2

    with pytest.raises(TypeError, match="save_for_backward can only save tensors"):
        SavesAList.apply(ta.ones(2, requires_grad=True))


def test_a_saved_tensor_changed_in_place_is_detected():
    class Square(ta.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * a

        @staticmethod
        def backward(ctx, grad):
            (a,) = ctx.saved_tensors
            return 2 * a * grad

    x = ta.ones(3, requires_grad=True)
    h = x * 1.0
    y = Square.apply(h)
    h.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_mark_dirty_makes_an_in_place_function_part_of_the_graph():
    class AddOneInPlace(ta.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            a.numpy()[...] += 1.0
            ctx.mark_dirty(a)
            return a

        @staticmethod
        def backward(ctx, grad):
            return grad * 1.0

    x = ta.tensor([1.0, 2.0], requires_grad=True)
    h = x * 3.0
    version = h._version.value
    out = AddOneInPlace.apply(h)
    assert out is h and h.grad_fn.name == "AddOneInPlace" and h._version.value > version
    (out * out).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * (3 * np.array([1.0, 2.0]) + 1) * 3)
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        AddOneInPlace.apply(ta.ones(2, requires_grad=True))


def test_set_materialize_grads_false_passes_none_for_an_unused_output():
    seen = []

    class Split(ta.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.set_materialize_grads(False)
            return a * 2, a * 3

        @staticmethod
        def backward(ctx, g1, g2):
            seen.append((g1 is None, g2 is None))
            return (g1 * 2 if g1 is not None else 0) + (g2 * 3 if g2 is not None else 0)

    x = ta.ones(2, requires_grad=True)
    first, _ = Split.apply(x)
    first.sum().backward()
    assert seen == [(False, True)]
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])

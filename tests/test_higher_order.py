"""Gradients of gradients: every op's differentiable backward, checked three ways in float64 —
against finite differences of its own vector-Jacobian product (``gradgradcheck``), against
PyTorch's double backward (skipped without torch), and against the op's fast array backward
(the two forms of one rule must agree)."""

from __future__ import annotations

import numpy as np
import pytest

import tinyattn as ta

F = ta.F
RNG = np.random.default_rng(7)


def _arr(*shape, low=-1.5, high=1.5, positive=False):
    values = RNG.uniform(0.3, 2.0, shape) if positive else RNG.uniform(low, high, shape)
    return values.astype(np.float64)


CAUSAL = np.tril(np.ones((4, 4), dtype=bool))

# name -> (tinyattn function, torch function or None, input arrays). Every function mixes its
# output with its inputs so that second derivatives are not trivially zero.
CASES = {
    "add": (lambda a, b: (a + b) * a, lambda a, b: (a + b) * a, [_arr(2, 3), _arr(3)]),
    "sub": (lambda a, b: (a - b) * b, lambda a, b: (a - b) * b, [_arr(2, 3), _arr(2, 1)]),
    "mul": (lambda a, b: a * b, lambda a, b: a * b, [_arr(2, 3), _arr(2, 3)]),
    "div": (lambda a, b: a / b, lambda a, b: a / b, [_arr(2, 3), _arr(2, 3, positive=True)]),
    "neg": (lambda a: -a * a, lambda a: -a * a, [_arr(4)]),
    "pow-scalar": (lambda a: a ** 3, lambda a: a ** 3, [_arr(2, 3)]),
    "pow-tensor": (lambda a, b: a ** b, lambda a, b: a ** b,
                   [_arr(2, 3, positive=True), _arr(2, 3)]),
    "exp": (lambda a: a.exp(), lambda a: a.exp(), [_arr(2, 3)]),
    "log": (lambda a: a.log(), lambda a: a.log(), [_arr(2, 3, positive=True)]),
    "sqrt": (lambda a: a.sqrt(), lambda a: a.sqrt(), [_arr(2, 3, positive=True)]),
    "rsqrt": (lambda a: a.rsqrt(), lambda a: a.rsqrt(), [_arr(2, 3, positive=True)]),
    "tanh": (lambda a: a.tanh(), lambda a: a.tanh(), [_arr(2, 3)]),
    "sigmoid": (lambda a: a.sigmoid(), lambda a: a.sigmoid(), [_arr(2, 3)]),
    # the backward ops of tanh and sigmoid as ops of their own (g, y), as PyTorch's
    "tanh-backward": (lambda g, y: ta.ops.unary.TanhBackward.apply(g, y),
                      lambda g, y: __import__("torch").ops.aten.tanh_backward(g, y),
                      [_arr(2, 3), _arr(2, 3, low=-0.9, high=0.9)]),
    "sigmoid-backward": (lambda g, y: ta.ops.unary.SigmoidBackward.apply(g, y),
                         lambda g, y: __import__("torch").ops.aten.sigmoid_backward(g, y),
                         [_arr(2, 3), _arr(2, 3, low=0.1, high=0.9)]),
    "relu": (lambda a: a.relu() * a, lambda a: a.relu() * a, [_arr(2, 3) + 0.05]),
    "abs": (lambda a: a.abs() * a, lambda a: a.abs() * a, [_arr(2, 3) + 0.05]),
    "sin-cos": (lambda a: a.sin() * a.cos(), lambda a: a.sin() * a.cos(), [_arr(2, 3)]),
    "erf": (lambda a: ta.erf(a), None, [_arr(2, 3)]),
    "clamp": (lambda a: a.clamp(-0.5, 0.7) * a, lambda a: a.clamp(-0.5, 0.7) * a,
              [_arr(2, 3) + 0.013]),
    "clamp-min": (lambda a: a.clamp(min=-0.5) * a, lambda a: a.clamp(min=-0.5) * a,
                  [_arr(2, 3) + 0.013]),
    "clamp-max": (lambda a: a.clamp(max=0.7) * a, lambda a: a.clamp(max=0.7) * a,
                  [_arr(2, 3) + 0.013]),
    "maximum": (lambda a, b: ta.maximum(a, b) * a, lambda a, b: __import__("torch").maximum(a, b)
                * a, [_arr(2, 3), _arr(2, 3)]),
    "sum": (lambda a: a.sum(-1) * a.sum(0).sum(), lambda a: a.sum(-1) * a.sum(0).sum(),
            [_arr(2, 3)]),
    "mean": (lambda a: a.mean(0, keepdim=True) * a, lambda a: a.mean(0, keepdim=True) * a,
             [_arr(2, 3)]),
    "var": (lambda a: a.var(-1) * a.sum(), lambda a: a.var(-1) * a.sum(), [_arr(2, 3)]),
    "std": (lambda a: a.std(-1, unbiased=False) * a.sum(),
            lambda a: a.std(-1, unbiased=False) * a.sum(), [_arr(2, 3)]),
    "amax": (lambda a: a.amax(-1) * a.sum(), lambda a: a.amax(-1) * a.sum(), [_arr(2, 3)]),
    "max-dim": (lambda a: a.max(-1).values * a.sum(), lambda a: a.max(-1).values * a.sum(),
                [_arr(2, 3)]),
    "reshape-permute": (lambda a: a.reshape(3, 2).permute(1, 0) * a,
                        lambda a: a.reshape(3, 2).permute(1, 0) * a, [_arr(2, 3)]),
    "expand-repeat": (lambda a: a.expand(2, 3).repeat(2, 1) ** 2,
                      lambda a: a.expand(2, 3).repeat(2, 1) ** 2, [_arr(1, 3)]),
    "getitem": (lambda a: a[[0, 0, 1], 1:] ** 2, lambda a: a[[0, 0, 1], 1:] ** 2, [_arr(2, 3)]),
    "gather": (lambda a: a.gather(1, ta.tensor([[2, 0], [1, 1]])) ** 2,
               lambda a: a.gather(1, __import__("torch").tensor([[2, 0], [1, 1]])) ** 2,
               [_arr(2, 3)]),
    "setitem": (lambda a, b: _setitem(a, b) ** 2, lambda a, b: _setitem(a, b) ** 2,
                [_arr(2, 3), _arr(3)]),
    "cat-stack": (lambda a, b: ta.cat([a, b]) * ta.stack([b, a]).sum(0).sum(),
                  lambda a, b: __import__("torch").cat([a, b])
                  * __import__("torch").stack([b, a]).sum(0).sum(), [_arr(2, 3), _arr(2, 3)]),
    "where": (lambda a, b: ta.where(a > 0, a * b, b ** 2),
              lambda a, b: __import__("torch").where(a > 0, a * b, b ** 2),
              [_arr(2, 3), _arr(2, 3)]),
    "masked_fill": (lambda a: a.masked_fill(ta.tensor(~CAUSAL[:2, :3]), 0.0) ** 2,
                    lambda a: a.masked_fill(__import__("torch").tensor(~CAUSAL[:2, :3]), 0.0)
                    ** 2, [_arr(2, 3)]),
    "triu": (lambda a: a.triu(1) * a, lambda a: a.triu(1) * a, [_arr(3, 3)]),
    "matmul": (lambda a, b: a @ b, lambda a, b: a @ b, [_arr(2, 3), _arr(3, 4)]),
    "matmul-vector": (lambda a, b: (a @ b) * b.sum(), lambda a, b: (a @ b) * b.sum(),
                      [_arr(2, 3, 4), _arr(4)]),
    "softmax": (lambda a: a.softmax(-1) * a, lambda a: a.softmax(-1) * a, [_arr(2, 4)]),
    "log_softmax": (lambda a: a.log_softmax(0) * a, lambda a: a.log_softmax(0) * a,
                    [_arr(3, 2)]),
    "linear": (lambda x, w, b: F.linear(x, w, b) ** 2,
               lambda x, w, b: __import__("torch").nn.functional.linear(x, w, b) ** 2,
               [_arr(2, 3), _arr(4, 3), _arr(4)]),
    "gelu": (lambda a: F.gelu(a), lambda a: __import__("torch").nn.functional.gelu(a),
             [_arr(2, 3)]),
    "gelu-tanh": (lambda a: F.gelu(a, approximate="tanh"),
                  lambda a: __import__("torch").nn.functional.gelu(a, approximate="tanh"),
                  [_arr(2, 3)]),
    "layer_norm": (lambda x, w, b: F.layer_norm(x, (4,), w, b),
                   lambda x, w, b: __import__("torch").nn.functional.layer_norm(x, (4,), w, b),
                   [_arr(3, 4), _arr(4), _arr(4)]),
    "cross_entropy": (lambda a: F.cross_entropy(a, ta.tensor([2, 0, 1]), label_smoothing=0.1),
                      lambda a: __import__("torch").nn.functional.cross_entropy(
                          a, __import__("torch").tensor([2, 0, 1]), label_smoothing=0.1),
                      [_arr(3, 4)]),
    "cross_entropy-ignore": (
        lambda a: F.cross_entropy(a, ta.tensor([2, -100, 1]), reduction="sum"),
        lambda a: __import__("torch").nn.functional.cross_entropy(
            a, __import__("torch").tensor([2, -100, 1]), reduction="sum"), [_arr(3, 4)]),
    "embedding": (lambda w: F.embedding(ta.tensor([[1, 2, 1]]), w, padding_idx=2) ** 2,
                  lambda w: __import__("torch").nn.functional.embedding(
                      __import__("torch").tensor([[1, 2, 1]]), w, padding_idx=2) ** 2,
                  [_arr(4, 3)]),
}


def _setitem(a, b):
    out = a * 1.0
    out[0] = b * 2.0
    return out


def _attention(impl):
    def run(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, impl=impl)
    return run


def _torch_attention(q, k, v):
    import torch

    scores = (q @ k.transpose(-2, -1)) / q.shape[-1] ** 0.5
    scores = scores.masked_fill(~torch.tensor(CAUSAL), float("-inf"))
    return scores.softmax(-1) @ v


for _impl in ("composed", "fused"):
    CASES[f"attention-{_impl}"] = (_attention(_impl), _torch_attention,
                                   [_arr(1, 2, 4, 3), _arr(1, 2, 4, 3), _arr(1, 2, 4, 3)])


@pytest.mark.parametrize("name", sorted(CASES))
def test_second_derivatives_match_finite_differences(name):
    fn, _, arrays = CASES[name]
    inputs = [ta.tensor(a, requires_grad=True) for a in arrays]
    assert ta.gradgradcheck(fn, inputs, atol=1e-5, rtol=1e-4)


def _double_backward(module, fn, arrays, grad_out, direction):
    """``∂/∂x ⟨∂⟨f(x), grad_out⟩/∂x, direction⟩`` with ``module``'s autograd (ta or torch)."""
    xs = [module.tensor(a, requires_grad=True) for a in arrays]
    out = fn(*xs)
    firsts = module.autograd.grad(out, xs, module.tensor(grad_out), create_graph=True)
    total = sum((g * module.tensor(d)).sum() for g, d in zip(firsts, direction))
    seconds = module.autograd.grad(total, xs, allow_unused=True)
    return [np.zeros_like(a) if s is None else s.detach().numpy()
            for a, s in zip(arrays, seconds)]


@pytest.mark.parametrize("name", sorted(name for name, case in CASES.items() if case[1]))
def test_second_derivatives_equal_pytorch(name):
    torch = pytest.importorskip("torch")
    fn, torch_fn, arrays = CASES[name]
    out_shape = fn(*[ta.tensor(a) for a in arrays]).shape
    grad_out = RNG.standard_normal(out_shape)
    direction = [RNG.standard_normal(a.shape) for a in arrays]
    ours = _double_backward(ta, fn, arrays, grad_out, direction)
    theirs = _double_backward(torch, torch_fn, arrays, grad_out, direction)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("name", sorted(CASES))
def test_differentiable_backward_agrees_with_the_array_backward(name):
    """The two forms of each rule give the same first derivatives."""
    fn, _, arrays = CASES[name]
    grads = {}
    for create_graph in (False, True):
        xs = [ta.tensor(a, requires_grad=True) for a in arrays]
        out = fn(*xs)
        v = ta.tensor(np.linspace(-1, 1, out.numel()).reshape(out.shape))
        grads[create_graph] = [g.numpy() for g in ta.autograd.grad(out, xs, v,
                                                                    create_graph=create_graph)]
    for fast, recorded in zip(grads[False], grads[True]):
        np.testing.assert_allclose(fast, recorded, rtol=1e-12, atol=1e-13)


def test_fused_and_composed_attention_have_equal_second_derivatives():
    arrays = [_arr(2, 2, 4, 3) for _ in range(3)]
    grad_out = RNG.standard_normal((2, 2, 4, 3))
    direction = [RNG.standard_normal(a.shape) for a in arrays]
    composed = _double_backward(ta, _attention("composed"), arrays, grad_out, direction)
    fused = _double_backward(ta, _attention("fused"), arrays, grad_out, direction)
    for a, b in zip(composed, fused):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_fused_attention_with_dropout_differentiates_through_the_same_mask():
    arrays = [_arr(1, 2, 5, 3) for _ in range(3)]

    def run(impl):
        ta.manual_seed(3)
        def fn(q, k, v):
            return F.scaled_dot_product_attention(q, k, v, dropout_p=0.3, impl=impl)
        return _double_backward(ta, fn, arrays, np.ones((1, 2, 5, 3)),
                                [np.ones(a.shape) for a in arrays])

    for a, b in zip(run("composed"), run("fused")):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


# ---- the engine's rules under create_graph -------------------------------------------------

def test_gradients_recorded_with_create_graph_have_a_grad_fn_and_retain_the_graph():
    x = ta.tensor([1.0, 2.0], dtype=ta.float64, requires_grad=True)
    y = (x ** 3).sum()
    y.backward(create_graph=True)
    assert x.grad.grad_fn is not None
    np.testing.assert_allclose(x.grad.numpy(), 3 * x.numpy() ** 2)
    (g2,) = ta.autograd.grad(x.grad.sum(), x)
    np.testing.assert_allclose(g2.numpy(), 6 * x.numpy())
    y.backward()  # retain_graph defaulted to create_graph: a second pass works
    assert x.grad.grad_fn is not None


def test_grad_returns_a_tuple_and_leaves_dot_grad_alone():
    x = ta.tensor([1.0, 2.0], requires_grad=True)
    result = ta.autograd.grad((x * x).sum(), x)
    assert isinstance(result, tuple) and x.grad is None
    np.testing.assert_allclose(result[0].numpy(), [2.0, 4.0])


def test_unused_input_is_an_error_unless_allowed():
    x = ta.tensor([1.0], requires_grad=True)
    y = ta.tensor([2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=r"inputs\[1\].*not used.*allow_unused=True"):
        ta.autograd.grad((x * 2).sum(), [x, y])
    gx, gy = ta.autograd.grad((x * 2).sum(), [x, y], allow_unused=True)
    assert gy is None and gx.item() == 2.0
    _, zeros = ta.autograd.grad((x * 2).sum(), [x, y], materialize_grads=True)
    assert zeros.tolist() == [0.0]


def test_a_second_backward_through_a_freed_graph_is_a_clear_error():
    x = ta.tensor([1.0], requires_grad=True)
    y = (x.exp() * 2).sum()
    ta.autograd.grad(y, x)
    with pytest.raises(RuntimeError, match="a second time"):
        ta.autograd.grad(y, x)


def test_grad_with_respect_to_an_intermediate_tensor():
    x = ta.tensor([1.0, -2.0], requires_grad=True)
    h = x * 3
    y = (h ** 2).sum()
    (dh,) = ta.autograd.grad(y, h)
    np.testing.assert_allclose(dh.numpy(), 2 * h.numpy())


def test_backward_inputs_limits_which_grads_accumulate():
    x = ta.tensor([1.0], requires_grad=True)
    w = ta.tensor([3.0], requires_grad=True)
    (x * w).sum().backward(inputs=[w])
    assert x.grad is None and w.grad.item() == 1.0


def test_non_differentiable_steps_give_pytorch_zero_or_none_under_create_graph():
    x = ta.tensor([0.5, 2.0, -1.0], dtype=ta.float64, requires_grad=True)
    picked = x[x.argmax()]  # an integer index chosen by argmax
    (g,) = ta.autograd.grad(picked * x.sum(), x, create_graph=True)
    (g2,) = ta.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(g2.numpy(), [1.0, 4.0, 1.0])  # d/dx of (x_max·Σx)'s gradient


def test_a_custom_function_with_a_tensor_op_backward_differentiates_twice():
    class Square(ta.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return 2 * x * grad

    x = ta.tensor([1.0, 2.0], requires_grad=True)
    (dx,) = ta.autograd.grad((Square.apply(x) * x).sum(), x, create_graph=True)  # 3x²
    assert dx.tolist() == [3.0, 12.0]
    (ddx,) = ta.autograd.grad(dx.sum(), x)  # 6x: the backward in tensor ops was recorded
    assert ddx.tolist() == [6.0, 12.0]


def test_optimizer_step_stays_outside_the_graph():
    w = ta.nn.Parameter(ta.tensor([1.0, 2.0]))
    opt = ta.optim.SGD([w], lr=0.1)
    (w ** 2).sum().backward(create_graph=True)
    opt.step()
    assert w.grad_fn is None and w.is_leaf


# ---- whole-model curvature ------------------------------------------------------------------

def test_softmax_jacobian_is_diag_p_minus_p_p_transposed():
    s = ta.tensor([0.3, -1.2, 2.0, 0.1], dtype=ta.float64)
    J = ta.autograd.functional.jacobian(lambda t: t.softmax(-1), s).numpy()
    p = np.exp(s.numpy()) / np.exp(s.numpy()).sum()
    np.testing.assert_allclose(J, np.diag(p) - np.outer(p, p), atol=1e-15)
    np.testing.assert_allclose(J.sum(axis=1), 0.0, atol=1e-15)


def test_hessian_of_a_one_head_attention_loss_wrt_w_q_equals_pytorch():
    torch = pytest.importorskip("torch")
    X, Wk, Wv, G = (RNG.standard_normal(s) for s in ((6, 3), (3, 2), (3, 2), (6, 2)))
    Wq = RNG.standard_normal((3, 2))

    def loss(module):
        def f(wq):
            q, k, v = module.tensor(X) @ wq, module.tensor(X) @ module.tensor(Wk), \
                module.tensor(X) @ module.tensor(Wv)
            p = (q @ k.transpose(0, 1) / np.sqrt(2.0)).softmax(-1)
            return ((p @ v) * module.tensor(G)).sum()
        return f

    ours = ta.autograd.functional.hessian(loss(ta), ta.tensor(Wq)).numpy()
    theirs = torch.autograd.functional.hessian(loss(torch), torch.tensor(Wq)).numpy()
    assert ours.shape == (3, 2, 3, 2)
    np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ours.reshape(6, 6), ours.reshape(6, 6).T, atol=1e-12)


def _parameters_hvp(model_loss, params, direction):
    """H·v for a loss of several parameters, by the double-backward trick."""
    first = ta.autograd.grad(model_loss(), params, create_graph=True)
    total = sum((g * ta.tensor(d)).sum() for g, d in zip(first, direction))
    seconds = ta.autograd.grad(total, params, allow_unused=True)
    return [np.zeros(p.shape) if g is None else g.numpy() for p, g in zip(params, seconds)]


def _torch_hvp(torch_loss, params, direction):
    import torch

    first = torch.autograd.grad(torch_loss(), params, create_graph=True)
    total = sum((g * torch.tensor(d)).sum() for g, d in zip(first, direction))
    seconds = torch.autograd.grad(total, params, allow_unused=True)
    return [np.zeros(p.shape) if g is None else g.numpy() for p, g in zip(params, seconds)]


@pytest.mark.parametrize("impl", ["composed", "fused"])
def test_hessian_vector_product_through_multi_head_attention_equals_pytorch(impl):
    torch = pytest.importorskip("torch")
    theirs_layer = torch.nn.MultiheadAttention(8, 2, batch_first=True, dtype=torch.float64)
    ours_layer = ta.interop.from_torch(theirs_layer)
    ours_layer.impl = impl
    x = RNG.standard_normal((2, 5, 8))
    g = RNG.standard_normal((2, 5, 8))
    mask = np.triu(np.ones((5, 5), dtype=bool), 1)
    ours_params = list(ours_layer.parameters())
    direction = [RNG.standard_normal(p.shape) for p in ours_params]

    def ours_loss():
        return (ours_layer(ta.tensor(x), is_causal=True) * ta.tensor(g)).sum()

    def theirs_loss():
        out, _ = theirs_layer(torch.tensor(x), torch.tensor(x), torch.tensor(x),
                              attn_mask=torch.tensor(mask), need_weights=True)
        return (out * torch.tensor(g)).sum()

    ours = _parameters_hvp(ours_loss, ours_params, direction)
    # torch packs q/k/v into in_proj: pack our direction the same way
    packed = [np.concatenate(direction[0:6:2]), np.concatenate(direction[1:6:2]),
              direction[6], direction[7]]
    theirs = _torch_hvp(theirs_loss, list(theirs_layer.parameters()), packed)
    ours_packed = [np.concatenate(ours[0:6:2]), np.concatenate(ours[1:6:2]), ours[6], ours[7]]
    for a, b in zip(ours_packed, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)


# ---- ta.autograd.functional against torch.autograd.functional ------------------------------

def _two_inputs(module):
    def f(a, b):
        return (a.tanh() @ b).softmax(-1) * a.sum()
    return f


def _scalar(module):
    def f(a, b):
        return ((a @ b).sigmoid() ** 2).sum() + (a * a).sum() * b.sum()
    return f


@pytest.mark.parametrize("name", ["vjp", "jvp", "hvp", "vhp"])
def test_functional_products_equal_pytorch(name):
    torch = pytest.importorskip("torch")
    a, b = _arr(2, 3), _arr(3, 2)
    scalar = name in ("hvp", "vhp")
    build = _scalar if scalar else _two_inputs
    if name == "vjp":
        v = (RNG.standard_normal((2, 2)),)
    else:
        v = (RNG.standard_normal(a.shape), RNG.standard_normal(b.shape))
    ours_fn = getattr(ta.autograd.functional, name)
    theirs_fn = getattr(torch.autograd.functional, name)
    out, ours = ours_fn(build(ta), (ta.tensor(a), ta.tensor(b)), tuple(ta.tensor(x) for x in v))
    t_out, theirs = theirs_fn(build(torch), (torch.tensor(a), torch.tensor(b)),
                              tuple(torch.tensor(x) for x in v))
    np.testing.assert_allclose(out.numpy(), t_out.numpy(), rtol=1e-12)
    for mine, ref in zip(ours, theirs):
        np.testing.assert_allclose(mine.numpy(), ref.numpy(), rtol=1e-10, atol=1e-12)


def test_jacobian_and_hessian_of_several_inputs_equal_pytorch():
    torch = pytest.importorskip("torch")
    a, b = _arr(2, 3), _arr(3, 2)
    ours = ta.autograd.functional.jacobian(_two_inputs(ta), (ta.tensor(a), ta.tensor(b)))
    theirs = torch.autograd.functional.jacobian(_two_inputs(torch),
                                                (torch.tensor(a), torch.tensor(b)))
    for mine, ref in zip(ours, theirs):
        np.testing.assert_allclose(mine.numpy(), ref.numpy(), rtol=1e-10, atol=1e-12)
    ours = ta.autograd.functional.hessian(_scalar(ta), (ta.tensor(a), ta.tensor(b)))
    theirs = torch.autograd.functional.hessian(_scalar(torch), (torch.tensor(a),
                                                                torch.tensor(b)))
    for row, ref_row in zip(ours, theirs):
        for mine, ref in zip(row, ref_row):
            np.testing.assert_allclose(mine.numpy(), ref.numpy(), rtol=1e-10, atol=1e-12)


def test_functional_strict_mode_names_an_independent_input():
    x, y = ta.tensor([1.0, 2.0]), ta.tensor([3.0])
    with pytest.raises(RuntimeError, match=r"independent of inputs\[1\]"):
        ta.autograd.functional.vjp(lambda a, b: a * 2, (x, y), ta.ones(2), strict=True)
    _, (dx, dy) = ta.autograd.functional.vjp(lambda a, b: a * 2, (x, y), ta.ones(2))
    assert dy.tolist() == [0.0] and dx.tolist() == [2.0, 2.0]

"""Engine semantics: accumulation, retain_graph, deep graphs, hooks, grad mode, anomalies."""

import copy
import gc
import weakref

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.autograd import Context, Function, ReleasedInput, unbroadcast


def test_reused_node_accumulates_gradients_from_every_path():
    x = ta.tensor([2.0, -1.0], requires_grad=True)
    y = x * x  # used twice below: a diamond
    z = (y + y * 3).sum()
    z.backward()
    np.testing.assert_allclose(x.grad.numpy(), 4 * 2 * x.numpy())  # d(4x²)/dx = 8x


def test_the_backward_runs_the_ops_in_the_order_pytorchs_engine_does():
    # a hook on an intermediate tensor fires when the op that made it is about to run its
    # backward: the order of the names is the order of the ops, in each library
    torch = pytest.importorskip("torch")

    def order_of_the_backward(lib, make):
        rng = np.random.default_rng(0)
        x, g = make(rng.standard_normal((5, 4))), make(rng.standard_normal((5, 3)))
        w_q, w_k, w_v = (make(rng.standard_normal((4, 3))).requires_grad_() for _ in range(3))
        seen = []

        def watch(name, t):
            t.register_hook(lambda grad: seen.append(name))
            return t

        q, k, v = watch("Q", x @ w_q), watch("K", x @ w_k), watch("V", x @ w_v)
        s = watch("S", watch("QKt", q @ watch("Kt", k.T)) * 0.5)
        o = watch("O", watch("P", s.softmax(-1)) @ v)
        (o * g).sum().backward()
        return seen

    ours = order_of_the_backward(ta, ta.tensor)
    assert ours == order_of_the_backward(torch, torch.from_numpy)
    assert ours.index("P") < ours.index("V")  # both ready after O: the later op runs first


def test_a_graph_and_its_deep_copy_run_in_one_backward():
    x = ta.tensor([1.0, -2.0], requires_grad=True)
    y = x * 3
    z = copy.deepcopy(y)  # a copy of the graph down to a copy of x, with the same op numbers
    x_copy = z.grad_fn.edges[0]
    assert x_copy is not x
    (y.sum() + (z * z).sum()).backward()
    assert x.grad.tolist() == [3.0, 3.0]
    assert x_copy.grad.tolist() == [18.0, -36.0]  # d(9 x²)/dx


def test_leaf_used_by_two_ops_sums_both_contributions():
    x = ta.tensor(3.0, requires_grad=True)
    (x * 2 + x.exp()).backward()
    assert x.grad.item() == pytest.approx(2 + np.exp(3.0))


def test_backward_twice_with_retain_graph_accumulates():
    x = ta.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * 2 * x.numpy())


def test_second_backward_through_freed_graph_is_a_clear_error():
    x = ta.tensor([1.0, 2.0], requires_grad=True)
    y = (x.exp() * 2).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


def test_ten_thousand_op_chain_needs_no_recursion():
    x = ta.tensor(1.0, dtype="float64", requires_grad=True)
    y = x
    for _ in range(10_000):
        y = y * 1.0001
    y.backward()
    assert x.grad.item() == pytest.approx(1.0001**10_000, rel=1e-9)


def test_non_scalar_backward_without_gradient_is_a_clear_error():
    y = ta.ones(2, 3, requires_grad=True) * 2
    with pytest.raises(RuntimeError, match=r"shape \(2, 3\), so pass gradient="):
        y.backward()


def test_backward_with_gradient_of_wrong_shape_names_both_shapes():
    y = ta.ones(2, 3, requires_grad=True) * 2
    expected = r"gradient has shape \(3, 2\) but the tensor has shape \(2, 3\)"
    with pytest.raises(ValueError, match=expected):
        y.backward(np.ones((3, 2)))


def test_backward_on_tensor_without_grad_is_a_clear_error():
    with pytest.raises(RuntimeError, match="does not require grad"):
        ta.ones(2).sum().backward()


def test_non_scalar_backward_with_gradient_is_a_vector_jacobian_product():
    x = ta.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (x * x).backward(ta.tensor([1.0, 0.0, -1.0]))
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 0.0, -6.0])


def test_intermediate_gradients_are_not_kept_unless_retained():
    x = ta.tensor([1.0, 2.0], requires_grad=True)
    hidden = x * 3
    kept = hidden.exp()
    kept.retain_grad()
    kept.sum().backward()
    assert hidden.grad is None
    np.testing.assert_allclose(kept.grad.numpy(), [1.0, 1.0])
    np.testing.assert_allclose(x.grad.numpy(), 3 * np.exp(3 * x.numpy()), rtol=1e-6)


def test_retain_grad_on_the_second_output_of_an_op_keeps_that_outputs_gradient():
    class TwoOutputs(ta.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2.0, x * 3.0

        @staticmethod
        def backward(ctx, grad_first, grad_second):
            return grad_first * 2.0 + grad_second * 3.0

    x = ta.tensor([1.0, 2.0], dtype=ta.float64, requires_grad=True)
    first, second = TwoOutputs.apply(x)
    second.retain_grad()
    assert second.retains_grad and not first.retains_grad
    (first.sum() + (second * ta.tensor([10.0, 20.0], dtype=ta.float64)).sum()).backward()
    np.testing.assert_allclose(second.grad.numpy(), [10.0, 20.0])
    np.testing.assert_allclose(x.grad.numpy(), [32.0, 62.0])


def test_hook_on_intermediate_sees_and_replaces_the_gradient():
    x = ta.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    seen = []
    y.register_hook(lambda g: seen.append(g.numpy().copy()) or g * 0.5)
    (y * ta.tensor([1.0, 10.0])).sum().backward()
    np.testing.assert_allclose(seen[0], [1.0, 10.0])
    np.testing.assert_allclose(x.grad.numpy(), [1.0, 10.0])  # 0.5 * 2 * [1, 10]


def test_hook_on_leaf_runs_once_on_the_summed_gradient_and_can_be_removed():
    x = ta.tensor([1.0], requires_grad=True)
    calls = []
    handle = x.register_hook(lambda g: calls.append(g.item()))
    (x * 2 + x * 3).sum().backward()
    assert calls == [5.0]
    handle.remove()
    (x * 2).sum().backward()
    assert calls == [5.0]


def test_no_grad_records_nothing_and_works_as_decorator():
    x = ta.ones(3, requires_grad=True)
    with ta.no_grad():
        y = x * 2
        assert not ta.is_grad_enabled()
    assert ta.is_grad_enabled()
    assert not y.requires_grad and y.grad_fn is None

    @ta.no_grad()
    def double(t):
        return t * 2

    z = double(x)
    assert z.grad_fn is None and ta.is_grad_enabled()
    with ta.no_grad(), ta.enable_grad():
        assert (x * 2).requires_grad


def test_nothing_is_recorded_when_no_input_requires_grad():
    a, b = ta.ones(2), ta.ones(2)
    assert (a * b).grad_fn is None


def test_grad_fn_names_the_op_and_links_to_inputs():
    x = ta.ones(2, requires_grad=True)
    y = x.exp() * 2
    assert y.grad_fn.name == "Mul"
    assert y.grad_fn.next_functions[0][0].name == "Exp"
    assert not y.is_leaf and x.is_leaf


def test_detect_anomaly_names_the_op_whose_backward_made_nan():
    x = ta.tensor([-1.0, 4.0], requires_grad=True)
    y = (x.sqrt() * 2).sum()  # sqrt(-1) = nan, so its backward returns nan
    with ta.detect_anomaly(), pytest.raises(RuntimeError, match="backward of 'Sqrt'"):
        y.backward()


def test_without_detect_anomaly_nan_propagates_silently_as_in_pytorch():
    x = ta.tensor([-1.0, 4.0], requires_grad=True)
    (x.sqrt()).sum().backward()
    assert np.isnan(x.grad.numpy()[0])


def test_gradients_have_the_dtype_and_shape_of_their_input():
    x = ta.ones(3, 1, dtype="float32", requires_grad=True)
    w = ta.ones(1, 4, dtype="float64", requires_grad=True)
    (x * w).sum().backward()
    assert x.grad.dtype == np.float32 and x.grad.shape == (3, 1)
    assert w.grad.dtype == np.float64 and w.grad.shape == (1, 4)
    np.testing.assert_allclose(x.grad.numpy(), 4.0)
    np.testing.assert_allclose(w.grad.numpy(), 3.0)


def test_unbroadcast_sums_added_and_stretched_axes():
    grad = np.arange(24.0).reshape(2, 3, 4)
    np.testing.assert_allclose(unbroadcast(grad, (3, 1)), grad.sum(axis=(0, 2))[:, None])
    np.testing.assert_allclose(unbroadcast(grad, ()), grad.sum())
    assert unbroadcast(grad, (2, 3, 4)) is grad
    with pytest.raises(ValueError, match=r"cannot reduce gradient of shape \(2, 3, 4\) to \(5,\)"):
        unbroadcast(grad, (5,))


def test_an_intermediate_only_a_linear_op_used_is_freed_before_the_backward():
    x = ta.randn(64, 32, requires_grad=True)
    h = x * 3.0  # an intermediate: Mul does not save its output
    value = weakref.ref(h.numpy())
    y = ta.nn.functional.dropout(h.reshape(32, 64) + 1.0, 0.5).sum()  # linear ops only
    del h
    gc.collect()
    assert value() is None  # as in PyTorch: nothing the backward needs, nothing kept
    released = y.grad_fn.inputs[0]
    assert isinstance(released, ReleasedInput)
    assert released.shape == (32, 64) and released.dtype == np.float32
    assert released.grad_fn.name == "Dropout" and released.ndim == 2
    with pytest.raises(RuntimeError, match="input 0 of 'Sum' was not kept"):
        _ = released.numpy()
    y.backward()
    kept = (x.grad.numpy() != 0.0).reshape(32, 64)  # dropout's mask, recomputed from its seed
    np.testing.assert_allclose(x.grad.numpy().reshape(32, 64)[kept], 3.0 / (1 - 0.5))
    assert 0.3 < kept.mean() < 0.7


def test_an_op_whose_backward_reads_its_input_keeps_it():
    x = ta.randn(8, requires_grad=True)
    h = x * 3.0
    value = weakref.ref(h.numpy())
    y = h.exp().sum()  # d exp(h) = exp(h): the differentiable rule reads h
    del h
    gc.collect()
    assert value() is not None
    assert y.grad_fn.next_functions[0][0].inputs[0].numpy() is value()
    g, = ta.autograd.grad(y, x, create_graph=True)
    g.sum().backward()  # second order through the kept input: d²/dx² Σ e^(3x) = 9 e^(3x)
    np.testing.assert_allclose(x.grad.numpy(), 9 * np.exp(3 * x.numpy()), rtol=1e-5)


def test_custom_function_plugs_into_the_engine():
    class Cube(Function):
        @staticmethod
        def forward(ctx: Context, x):
            ctx.save_for_backward(x)
            return x**3

        @staticmethod
        def backward(ctx: Context, grad):
            (x,) = ctx.saved_tensors
            return 3 * x * x * grad

    x = ta.tensor([2.0], dtype="float64", requires_grad=True)
    assert ta.gradcheck(lambda t: Cube.apply(t), (x,))


def test_manual_seed_repeats_random_draws_bit_for_bit():
    ta.manual_seed(123)
    first = (ta.randn(4, 3).numpy(), ta.rand(5).numpy())
    ta.manual_seed(123)
    second = (ta.randn(4, 3).numpy(), ta.rand(5).numpy())
    assert all(np.array_equal(a, b) for a, b in zip(first, second))
    ta.manual_seed(124)
    assert not np.array_equal(ta.randn(4, 3).numpy(), first[0])


def test_grad_mode_is_per_thread():
    import threading

    seen = []
    with ta.no_grad():
        worker = threading.Thread(target=lambda: seen.append(ta.is_grad_enabled()))
        worker.start()
        worker.join()
    assert seen == [True]


def test_a_leaf_keeps_a_fresh_gradient_without_copying_it_but_never_shares_one(monkeypatch):
    x = ta.randn(3, 4, requires_grad=True)
    w = ta.randn(4, 5, requires_grad=True)
    (x @ w).sum().backward()
    assert w.grad.numpy().base is None  # the product's own array, not a copy of it
    # also a product kernel's output, a view of its own cache-line-aligned buffer
    big = ta.randn(64, 32, requires_grad=True)
    copies = []
    real_array = np.array
    monkeypatch.setattr(np, "array", lambda *a, **k: copies.append(k) or real_array(*a, **k))
    (ta.randn(16, 64) @ big).sum().backward()
    monkeypatch.undo()
    assert big.grad.numpy().base is not None and not any(k.get("copy") for k in copies)
    # a gradient the caller passed in is copied: changing .grad leaves it alone
    a = ta.randn(3, requires_grad=True)
    g = ta.ones(3)
    (a + 1).backward(g)
    a.grad.numpy()[0] = 100.0
    assert g.tolist() == [1.0, 1.0, 1.0]
    # one gradient sent to two leaves (the backward of an add): two arrays
    p, q = ta.randn(3, requires_grad=True), ta.randn(3, requires_grad=True)
    (p + q).sum().backward()
    assert not np.shares_memory(p.grad.numpy(), q.grad.numpy())
    # a hook that keeps the gradient it sees keeps its own values
    seen = []
    r = ta.randn(3, requires_grad=True)
    r.register_hook(lambda grad: seen.append(grad))
    (r * 2.0).sum().backward()
    r.grad.numpy()[0] = -1.0
    assert seen[0].tolist() == [2.0, 2.0, 2.0]
    # likewise when the leaves' gradients are views of the gradient the hook keeps
    c, d = ta.randn(4, requires_grad=True), ta.randn(4, requires_grad=True)
    joined = ta.cat([c, d])
    joined.register_hook(lambda grad: seen.append(grad))
    (joined * 3.0).sum().backward()
    c.grad.numpy()[0] = -1.0
    assert seen[1].tolist() == [3.0] * 8

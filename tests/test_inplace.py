"""In-place ops follow PyTorch's autograd rules: they work where PyTorch allows them and raise
where it refuses, at the same point — checked against torch where it is installed."""

import numpy as np
import pytest

import tinyattn as ta


def test_masked_fill_in_place_on_the_output_of_a_matmul_records_the_op():
    x = ta.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    scores = x @ x.T
    scores.masked_fill_(ta.ones(2, 2).bool().triu(1), -ta.inf)
    assert scores.grad_fn.name == "MaskedFill"
    scores.softmax(-1).sum().backward()
    assert x.grad is not None and np.isfinite(x.grad.numpy()).all()


def test_in_place_on_a_leaf_that_requires_grad_is_refused():
    w = ta.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        w.add_(1)
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        w[0] = 5.0
    with ta.no_grad():  # allowed without grad mode, as PyTorch's initialisers do
        w.mul_(2)
    assert w.tolist() == [2.0, 2.0, 2.0] and w.is_leaf


def test_modifying_a_saved_tensor_makes_the_backward_fail_with_the_op_named():
    a = ta.tensor([1.0, 2.0], requires_grad=True)
    b = a.exp()
    b.add_(1)  # exp saved its output
    with pytest.raises(RuntimeError, match="modified by an inplace operation.*'Exp'"):
        b.sum().backward()


def test_a_tensor_not_saved_may_be_modified():
    a = ta.tensor([1.0, 2.0], requires_grad=True)
    b = a * 2
    c = b + 1  # Add saves nothing
    b.add_(10)
    c.sum().backward()
    assert a.grad.tolist() == [2.0, 2.0]


def test_in_place_op_keeps_the_original_value_it_needs():
    x = ta.tensor([1.0, 2.0], requires_grad=True)
    y = ta.tensor([3.0, 4.0], requires_grad=True)
    z = x * 1.0
    z.mul_(y)  # mul_ needs z's old value for dy
    z.sum().backward()
    assert x.grad.tolist() == [3.0, 4.0] and y.grad.tolist() == [1.0, 2.0]


def test_views_share_the_version_counter_of_their_base():
    a = ta.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = a * 2
    y = b.exp()  # saves its output
    view = y[1:]
    with ta.no_grad():
        view.zero_()  # writes through the view into y
    assert y.tolist()[1:] == [0.0, 0.0]
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_a_reshape_that_copies_keeps_a_version_counter_of_its_own():
    x = ta.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    base = x * 1.0
    saved = base * base  # saves base
    copied = base.T.reshape(6)  # not viewable: numpy copies
    assert not np.shares_memory(copied.numpy(), base.numpy())
    copied.add_(1.0)  # changes the copy only, as in PyTorch
    assert copied._version is not base._version
    saved.sum().backward()  # base was not modified: the backward runs
    np.testing.assert_allclose(x.grad.numpy(), 2 * x.numpy())
    np.testing.assert_allclose(base.numpy(), x.numpy())


def test_a_number_written_through_a_mask_into_a_graph_is_recorded():
    x = ta.tensor([1.0, -2.0, 3.0, -0.5], requires_grad=True)
    y = x * 2.0
    y[y < 0] = 0.0  # a ReLU written by hand: the masked positions pass no gradient
    (y * 3.0).sum().backward()
    assert y.tolist() == [2.0, 0.0, 6.0, 0.0]
    assert x.grad.tolist() == [6.0, 0.0, 6.0, 0.0]  # d/dx 3 · 2x = 6 where kept, else 0


def test_setitem_records_the_write_and_routes_gradients():
    w = ta.tensor([2.0, 3.0], requires_grad=True)
    x = ta.zeros(3)
    x[1:] = w * w  # a tensor without grad becomes part of the graph
    assert x.requires_grad and x.grad_fn is not None
    (x * ta.tensor([1.0, 10.0, 100.0])).sum().backward()
    assert w.grad.tolist() == [40.0, 600.0]


def test_setitem_with_a_boolean_mask_and_a_scalar_as_in_top_k_sampling():
    logits = ta.tensor([[1.0, 5.0, 3.0]])
    v, _ = ta.topk(logits, 2)
    logits[logits < v[:, [-1]]] = -float("inf")
    assert logits.tolist() == [[-float("inf"), 5.0, 3.0]]


def test_in_place_arithmetic_operators_and_plus_equal_on_a_leaf_without_grad():
    total = ta.zeros(3)
    for value in (ta.tensor([1.0, 2.0, 3.0]), ta.tensor([1.0, 1.0, 1.0])):
        total += value * 2
    assert total.tolist() == [4.0, 6.0, 8.0]


def test_an_int_tensor_cannot_take_a_float_result_in_place():
    x = ta.tensor([1, 2])
    with pytest.raises(RuntimeError, match="result type float32 can't be cast"):
        x.add_(0.5)
    x.add_(2)
    assert x.tolist() == [3, 4]


def test_in_place_on_an_expanded_view_is_refused():
    x = ta.ones(1, 3).expand(2, 3)
    with pytest.raises(RuntimeError, match="read-only"):
        x.add_(1)


@pytest.mark.parametrize("case", ["leaf", "saved", "view"])
def test_pytorch_refuses_the_same_cases(case):
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError):
        if case == "leaf":
            torch.ones(3, requires_grad=True).add_(1)
        elif case == "saved":
            a = torch.tensor([1.0, 2.0], requires_grad=True)
            b = a.exp()
            b.add_(1)
            b.sum().backward()
        else:
            a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
            y = (a * 2).exp()
            with torch.no_grad():
                y[1:].zero_()
            y.sum().backward()


def test_copy_fill_and_zero_match_pytorch():
    torch = pytest.importorskip("torch")
    for module in (ta, torch):
        w = module.tensor([1.0, 2.0], requires_grad=True)
        x = w * 3
        x.copy_(w * w)
        y = (w * 1).fill_(7.0)
        z = (w * 1).zero_()
        (x.sum() + y.sum() + z.sum()).backward()
        if module is ta:
            ours = (x.tolist(), y.tolist(), z.tolist(), w.grad.tolist())
        else:
            theirs = (x.tolist(), y.tolist(), z.tolist(), w.grad.tolist())
    assert ours == theirs

"""Tensor creation, dtype rules, attributes and forward values (numpy is the oracle)."""

import numpy as np
import pytest

import tinyattn as ta


def test_dtype_rules_for_python_and_numpy_data():
    assert ta.tensor(1.5).dtype == np.float32
    assert ta.tensor([1, 2]).dtype == np.int64
    assert ta.tensor([True, False]).dtype == np.bool_
    assert ta.tensor(np.ones(2, dtype=np.float64)).dtype == np.float64
    assert ta.tensor(np.ones(2, dtype=np.float32)).dtype == np.float32
    assert ta.tensor(np.ones(2, dtype=np.float16)).dtype == np.float16  # as torch.tensor does
    assert ta.tensor(np.ones(2, dtype=np.int32)).dtype == np.int32  # as torch.tensor does
    assert ta.tensor([1, 2], dtype="float64").dtype == np.float64


def test_tensor_copies_numpy_data_and_tensor_wraps_without_copy():
    array = np.zeros(3, dtype=np.float32)
    made = ta.tensor(array)
    array[0] = 5
    assert made.numpy()[0] == 0


def test_python_scalars_do_not_promote_float32():
    x = ta.ones(2)
    assert (x * 2.0).dtype == np.float32
    assert (2 * x).dtype == np.float32
    assert (x / 3).dtype == np.float32
    assert (x + np.float64(1.0)).dtype == np.float32


def test_mixed_float32_and_float64_promote_to_float64_as_in_pytorch():
    a = ta.ones(2, dtype="float32", requires_grad=True)
    b = ta.ones(2, dtype="float64")
    out = a * b
    assert out.dtype == np.float64
    out.sum().backward()
    assert a.grad.dtype == np.float32


def test_integer_tensors_cannot_require_grad():
    expected = "only floating point tensors can require gradients, got dtype int64"
    with pytest.raises(TypeError, match=expected):
        ta.tensor([1, 2], requires_grad=True)
    with pytest.raises(TypeError, match="int64"):
        ta.arange(3).requires_grad_()


def test_attributes():
    x = ta.zeros(2, 3, requires_grad=True)
    assert x.shape == (2, 3) and x.ndim == 2 and x.size() == (2, 3) and x.size(-1) == 3
    assert x.numel() == 6 and len(x) == 2 and x.is_leaf and x.grad is None
    assert ta.tensor([[7.0]]).item() == 7.0
    with pytest.raises(ValueError, match="one-element"):
        x.item()
    assert "requires_grad=True" in repr(x)
    assert "grad_fn=<MulBackward>" in repr(x * 2)


def test_factories():
    assert ta.zeros(2, 3).numpy().sum() == 0 and ta.zeros((2, 3)).shape == (2, 3)
    assert ta.ones(4).numpy().sum() == 4
    assert ta.full((2, 2), 7.0).numpy().tolist() == [[7.0, 7.0], [7.0, 7.0]]
    assert ta.zeros_like(ta.ones(3, dtype="float64")).dtype == np.float64
    assert ta.ones_like(ta.zeros(2, 2)).numpy().sum() == 4
    assert ta.arange(5).tolist() == [0, 1, 2, 3, 4] and ta.arange(5).dtype == np.int64
    assert ta.arange(0.0, 1.0, 0.5).tolist() == [0.0, 0.5]
    r = ta.rand(1000)
    assert 0 <= r.numpy().min() and r.numpy().max() < 1
    n = ta.randn(20000, dtype="float64")
    assert abs(n.numpy().mean()) < 0.05 and abs(n.numpy().std() - 1) < 0.05
    with pytest.raises(ValueError, match="non-negative int sizes"):
        ta.zeros(2, -1)


RNG = np.random.default_rng(0)
A = RNG.standard_normal((3, 4))
B = RNG.standard_normal((4,))
P = RNG.uniform(0.5, 2.0, (3, 4))


@pytest.mark.parametrize(
    "ours, reference",
    [
        (lambda a, b, p: a + b, lambda a, b, p: a + b),
        (lambda a, b, p: a - b, lambda a, b, p: a - b),
        (lambda a, b, p: a * b, lambda a, b, p: a * b),
        (lambda a, b, p: a / p, lambda a, b, p: a / p),
        (lambda a, b, p: p**b, lambda a, b, p: p**b),
        (lambda a, b, p: p**1.5, lambda a, b, p: p**1.5),
        (lambda a, b, p: -a, lambda a, b, p: -a),
        (lambda a, b, p: a.exp(), lambda a, b, p: np.exp(a)),
        (lambda a, b, p: p.log(), lambda a, b, p: np.log(p)),
        (lambda a, b, p: p.sqrt(), lambda a, b, p: np.sqrt(p)),
        (lambda a, b, p: a.tanh(), lambda a, b, p: np.tanh(a)),
        (lambda a, b, p: a.sigmoid(), lambda a, b, p: 1 / (1 + np.exp(-a))),
        (lambda a, b, p: a.relu(), lambda a, b, p: np.maximum(a, 0)),
        (lambda a, b, p: a.sum(dim=0), lambda a, b, p: a.sum(axis=0)),
        (lambda a, b, p: a.mean(dim=(0, 1), keepdim=True), lambda a, b, p: a.mean(keepdims=True)),
        (lambda a, b, p: a.max(), lambda a, b, p: a.max()),
        (lambda a, b, p: a.max(dim=1).values, lambda a, b, p: a.max(axis=1)),
        (lambda a, b, p: a.max(dim=1).indices, lambda a, b, p: a.argmax(axis=1)),
        (lambda a, b, p: a.var(dim=1), lambda a, b, p: a.var(axis=1, ddof=1)),
        (lambda a, b, p: a.var(correction=0), lambda a, b, p: a.var()),
        (lambda a, b, p: a.T, lambda a, b, p: a.T),
        (lambda a, b, p: a.reshape(2, -1), lambda a, b, p: a.reshape(2, -1)),
        (
            lambda a, b, p: a.unsqueeze(1).expand(3, 2, 4),
            lambda a, b, p: np.broadcast_to(a[:, None], (3, 2, 4)),
        ),
        (lambda a, b, p: a[1:, [0, 0, 3]], lambda a, b, p: a[1:, [0, 0, 3]]),
        (lambda a, b, p: a[a > 0], lambda a, b, p: a[a > 0]),
        (lambda a, b, p: ta.cat([a, p], dim=1), lambda a, b, p: np.concatenate([a, p], axis=1)),
        (lambda a, b, p: ta.stack([a, p], dim=-1), lambda a, b, p: np.stack([a, p], axis=-1)),
        (lambda a, b, p: ta.where(a > 0, a, p), lambda a, b, p: np.where(a > 0, a, p)),
        (lambda a, b, p: a.masked_fill(a < 0, 0.0), lambda a, b, p: np.where(a < 0, 0.0, a)),
        (lambda a, b, p: ta.triu(a, 1), lambda a, b, p: np.triu(a, 1)),
        (lambda a, b, p: ta.tril(a), lambda a, b, p: np.tril(a)),
        (lambda a, b, p: a @ b, lambda a, b, p: a @ b),
        (lambda a, b, p: a @ p.T, lambda a, b, p: a @ p.T),
        (lambda a, b, p: a.softmax(dim=0), lambda a, b, p: np.exp(a) / np.exp(a).sum(0)),
        (
            lambda a, b, p: a.log_softmax(dim=-1),
            lambda a, b, p: a - np.log(np.exp(a).sum(-1, keepdims=True)),
        ),
    ],
)
def test_forward_values_match_numpy(ours, reference):
    got = ours(ta.tensor(A), ta.tensor(B), ta.tensor(P))
    expected = reference(A, B, P)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12, atol=1e-12)


def test_split_and_chunk_follow_pytorch_sizes():
    x = ta.arange(10)
    assert [p.shape[0] for p in x.split(4)] == [4, 4, 2]
    assert [p.shape[0] for p in x.split([3, 7])] == [3, 7]
    assert [p.shape[0] for p in x.chunk(3)] == [4, 4, 2]
    assert [p.shape[0] for p in ta.arange(5).chunk(4)] == [2, 2, 1]


def test_comparisons_and_logical_ops_give_boolean_tensors_without_grad():
    x = ta.tensor([1.0, 2.0, 3.0], requires_grad=True)
    mask = (x > 1.5) & ~(x == 3.0)
    assert mask.dtype == np.bool_ and not mask.requires_grad
    assert mask.tolist() == [False, True, False]
    assert ((x <= 1.0) | (x >= 3.0)).tolist() == [True, False, True]
    assert (x != 2.0).tolist() == [True, False, True]


def test_softmax_is_finite_for_huge_logits_and_zero_for_fully_masked_rows():
    x = ta.tensor([[1e4, -1e4, 0.0], [3e38, 3e38, -3e38]], dtype="float32")
    y = x.softmax(dim=-1).numpy()
    assert np.all(np.isfinite(y))
    np.testing.assert_allclose(y, [[1, 0, 0], [0.5, 0.5, 0]], atol=1e-7)
    masked = ta.full((2, 3), float("-inf")).softmax(dim=-1)
    assert masked.tolist() == [[0.0] * 3] * 2
    assert np.all(np.isfinite(ta.tensor([[1e4, -1e4]]).log_softmax(dim=-1).numpy()))


def test_float32_ops_stay_float32():
    x = ta.randn(3, 4)
    for out in (x @ x.T, x.softmax(-1), x.exp(), x.sum(0), x.var(), x.sigmoid()):
        assert out.dtype == np.float32

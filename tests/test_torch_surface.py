"""The PyTorch surface that attention and small-GPT code touches, checked expression by
expression against torch: each case is written once as ``lambda m: ...`` and run with ``m``
being ``tinyattn`` and ``torch``; values, dtypes and shapes must agree."""

import math

import numpy as np
import pytest

import tinyattn as ta

torch = pytest.importorskip("torch")

X = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 7 - 1.5


def x(m):
    return m.tensor(X)


CASES = {
    # factories and constants
    "tensor-int": lambda m: m.tensor([[1, 2], [3, 4]]),
    "tensor-bool": lambda m: m.tensor([True, False]),
    "tensor-float64": lambda m: m.tensor([1.0, 2.0], dtype=m.float64),
    "tensor-of-0d-tensors": lambda m: m.tensor([m.tensor(1.5), m.tensor(2.5)]),
    "as_tensor": lambda m: m.as_tensor(np.arange(3)),
    "from_numpy": lambda m: m.from_numpy(np.arange(4.0)),
    "zeros": lambda m: m.zeros(2, 3, dtype=m.long), "ones": lambda m: m.ones((2, 2)),
    "full-int": lambda m: m.full((2,), 7), "full-float": lambda m: m.full((2, 2), 0.5),
    "empty-shape": lambda m: m.empty(2, 3).shape,
    "arange-int": lambda m: m.arange(5), "arange-float": lambda m: m.arange(0, 1, 0.25),
    "arange-dtype": lambda m: m.arange(0, 3, dtype=m.float32, device="cpu"),
    "linspace": lambda m: m.linspace(0, 1, 5), "eye": lambda m: m.eye(3, 2),
    "zeros_like": lambda m: m.zeros_like(x(m)), "ones_like-int": lambda m: m.ones_like(
        m.arange(3)), "full_like": lambda m: m.full_like(m.arange(3), 2),
    "tril": lambda m: m.tril(m.ones(3, 3), diagonal=-1),
    "triu": lambda m: m.triu(m.ones(3, 4), diagonal=1),
    "constants": lambda m: m.tensor([m.pi, m.e, m.inf]),
    "nan": lambda m: m.tensor([m.nan]).isnan(),
    "dtype-names": lambda m: [str(d).replace("torch.", "") for d in
                              (m.float, m.double, m.long, m.bool, m.float32, m.int64)],
    # attributes and conversions
    "size": lambda m: (x(m).size(), x(m).size(-1), x(m).dim(), x(m).numel()),
    "len-iter": lambda m: [len(t) for t in x(m)],
    "to-dtype": lambda m: x(m).to(m.float64), "to-device": lambda m: x(m).to("cpu"),
    "to-other": lambda m: m.arange(3).to(x(m)),
    "casts": lambda m: (x(m).long(), x(m).bool(), m.arange(3).float(), m.arange(2).double()),
    "type-cast": lambda m: x(m).type(m.int64), "type_as": lambda m: m.arange(3).type_as(x(m)),
    "item": lambda m: x(m)[0, 1, 2].item(), "tolist": lambda m: m.arange(3).tolist(),
    "array": lambda m: np.asarray(x(m)).sum(), "float()": lambda m: float(m.tensor(2.5)),
    "int-index": lambda m: list(range(10))[m.tensor(3)],
    # shape
    "view--1": lambda m: x(m).view(-1, 4), "view-tuple": lambda m: x(m).view((6, 4)),
    "reshape": lambda m: x(m).reshape(4, -1), "flatten": lambda m: x(m).flatten(),
    "flatten-range": lambda m: x(m).flatten(0, 1), "unflatten": lambda m: x(m).unflatten(
        2, (2, 2)), "contiguous-view": lambda m: x(m).transpose(1, 2).contiguous().view(2, 12),
    "repeat": lambda m: x(m)[0].T.repeat(2, 1, 1), "repeat_interleave": lambda m:
        m.arange(3).repeat_interleave(2), "repeat_interleave-dim": lambda m:
        x(m).repeat_interleave(2, dim=1), "permute": lambda m: x(m).permute(2, 0, 1),
    "transpose": lambda m: x(m).transpose(-2, -1), "T": lambda m: x(m)[0].T,
    "t": lambda m: (x(m)[0].t(), m.t(x(m)[0, 0])),
    "mT": lambda m: x(m).mT, "unsqueeze": lambda m: x(m).unsqueeze(1),
    "squeeze-tuple": lambda m: x(m)[:, :1, :1].squeeze((1, 2)),
    "expand": lambda m: x(m)[:, :1].expand(-1, 5, -1), "expand_as": lambda m:
        m.ones(1, 4).expand_as(x(m)), "split": lambda m: x(m).split([1, 2], dim=1)[1],
    "chunk": lambda m: x(m).chunk(2, dim=-1)[0], "unbind": lambda m: x(m).unbind(1)[2],
    "cat": lambda m: m.cat((x(m), x(m)), dim=-1), "stack": lambda m: m.stack([x(m), x(m)]),
    "flip": lambda m: x(m).flip(-1), "movedim": lambda m: x(m).movedim(0, -1),
    "roll": lambda m: (x(m).roll(1, -1), m.roll(x(m), (2, -1), (0, 2)), x(m).roll(-5)),
    # arithmetic and elementwise functions
    "add-alpha": lambda m: m.add(x(m), x(m), alpha=2), "sub": lambda m: m.sub(x(m), 1),
    "mul": lambda m: x(m).mul(x(m)), "div": lambda m: x(m).div(3),
    "div-int": lambda m: m.arange(5) / 2, "floordiv": lambda m: m.arange(5) // 2,
    "neg": lambda m: x(m).neg(), "pow": lambda m: x(m).pow(2), "rpow": lambda m: 2 ** x(m),
    "exp-log-sqrt": lambda m: (x(m).exp(), x(m).abs().log(), x(m).abs().sqrt()),
    "tanh-abs": lambda m: (x(m).tanh(), x(m).abs()), "sin-cos": lambda m: (
        m.sin(x(m)), m.cos(x(m))), "rsqrt": lambda m: m.rsqrt(x(m).abs() + 1),
    "exp-of-int": lambda m: m.exp(m.arange(3)), "sqrt-of-int": lambda m: m.arange(4).sqrt(),
    "clamp": lambda m: x(m).clamp(min=-0.5, max=0.5), "clamp-min": lambda m: x(m).clamp(0),
    "maximum": lambda m: m.maximum(x(m), m.zeros(4)), "minimum": lambda m: m.minimum(
        x(m), 0.3 * m.ones(1)), "where": lambda m: m.where(x(m) > 0, x(m), 0.0),
    "masked_fill": lambda m: x(m).masked_fill(x(m) > 0.5, -m.inf),
    "int-plus-float": lambda m: m.arange(3) + 0.5, "float-pow-int": lambda m: 0.7 ** m.arange(3),
    "bool-plus-int": lambda m: m.tensor([True, False]) + 2,
    "comparisons": lambda m: (x(m) > 0, x(m) <= 0.1, x(m) == x(m), x(m) != 0),
    "logic": lambda m: ((x(m) > 0) & (x(m) < 1), (x(m) > 0) | (x(m) < -1), ~(x(m) > 0)),
    # reductions
    "sum": lambda m: (x(m).sum(), x(m).sum(-1), x(m).sum((0, 2), keepdim=True)),
    "sum-int": lambda m: m.arange(5).sum(), "sum-bool": lambda m: (x(m) > 0).sum(),
    "mean": lambda m: (x(m).mean(), x(m).mean(dim=1, keepdim=True)),
    "var": lambda m: (x(m).var(), x(m).var(-1, unbiased=False), x(m).var(1, keepdim=True,
                                                                         correction=0)),
    "std": lambda m: (x(m).std(), x(m).std(dim=-1, keepdim=True, unbiased=False)),
    "amax-amin": lambda m: (x(m).amax(-1), x(m).amin((0, 1))),
    "max-dim": lambda m: tuple(x(m).max(dim=1)), "min-all": lambda m: x(m).min(),
    "argmax": lambda m: (x(m).argmax(), x(m).argmax(-1), x(m).argmin(1, keepdim=True)),
    "cumprod": lambda m: (x(m).cumprod(-1), m.cumprod(m.arange(1, 6), 0)),
    "unique": lambda m: (m.unique(m.tensor([3, 1, 3, 2]), return_counts=True),
                         (x(m) > 0).long().unique(dim=1, return_inverse=True)),
    "topk": lambda m: tuple(m.topk(x(m), 2)), "topk-smallest": lambda m: tuple(
        x(m).topk(2, dim=1, largest=False)),
    "logsumexp": lambda m: m.logsumexp(x(m), -1), "all-any": lambda m: (
        (x(m) > -2).all(), (x(m) > 2).any(), (x(m) > 0).any(dim=-1)),
    # linear algebra
    "matmul": lambda m: x(m) @ x(m).transpose(1, 2), "matmul-fn": lambda m: m.matmul(
        x(m)[0], x(m)[0].T), "mm": lambda m: m.mm(x(m)[0], x(m)[0].T),
    "bmm": lambda m: m.bmm(x(m), x(m).transpose(1, 2)), "dot": lambda m: m.dot(
        x(m)[0, 0], x(m)[0, 1]), "matmul-vector": lambda m: x(m) @ x(m)[0, 0],
    # softmax family
    "softmax": lambda m: m.softmax(x(m), dim=-1), "softmax-method": lambda m: x(m).softmax(0),
    "log_softmax": lambda m: x(m).log_softmax(dim=1),
    # comparisons of whole tensors
    "allclose": lambda m: m.allclose(x(m), x(m) + 1e-9), "isclose": lambda m: m.isclose(
        x(m), x(m) + 0.1, atol=0.05), "equal": lambda m: m.equal(x(m), x(m)),
    # indexing
    "index-int-slice-list": lambda m: x(m)[1, :, [0, 1]], "index-list-middle": lambda m:
        x(m)[:, [-1], :], "index-bool": lambda m: x(m)[x(m) > 0.5],
    "index-none-ellipsis": lambda m: x(m)[None, ..., 1], "index-tensor": lambda m:
        x(m)[m.tensor([1, 0])], "gather": lambda m: x(m).gather(-1, m.tensor(
            [[[3], [0], [1]], [[2], [2], [0]]])),
}


def _flat(value):
    if isinstance(value, (tuple, list)):
        return [item for v in value for item in _flat(v)]
    return [value]


def _numpy(value):
    if hasattr(value, "detach"):
        value = value.detach()
    if hasattr(value, "numpy") and not isinstance(value, np.ndarray):
        return np.asarray(value.numpy()), str(value.dtype).replace("torch.", "")
    return np.asarray(value), None


@pytest.mark.parametrize("name", sorted(CASES))
def test_expression_matches_pytorch(name):
    ours, theirs = _flat(CASES[name](ta)), _flat(CASES[name](torch))
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        (a_np, a_dtype), (b_np, b_dtype) = _numpy(a), _numpy(b)
        assert a_dtype == b_dtype, f"{name}: dtype {a_dtype} vs torch {b_dtype}"
        assert a_np.shape == b_np.shape, f"{name}: shape {a_np.shape} vs torch {b_np.shape}"
        if a_np.dtype.kind == "f":
            np.testing.assert_allclose(a_np, b_np, rtol=1e-6, atol=1e-6)
        else:
            assert a_np.tolist() == b_np.tolist(), name


def test_unknown_torch_names_say_what_is_missing():
    with pytest.raises(AttributeError, match="tinyattn has no torch.fft"):
        ta.fft  # noqa: B018
    with pytest.raises(AttributeError, match="tinyattn has no torch.cuda.set_device"):
        ta.cuda.set_device(0)
    assert ta.cuda.is_available() is False
    with pytest.raises(RuntimeError, match="CPU only: device 'cuda' is not available"):
        ta.ones(2).to("cuda")


def test_multinomial_samples_follow_the_weights():
    ta.manual_seed(0)
    draws = ta.multinomial(ta.tensor([[0.1, 0.0, 0.9]] * 2000), 1).numpy().ravel()
    assert set(draws.tolist()) <= {0, 2}
    assert abs((draws == 2).mean() - 0.9) < 0.03
    without = ta.multinomial(ta.tensor([1.0, 1.0, 1.0, 0.0]), 3)
    assert sorted(without.tolist()) == [0, 1, 2]
    with pytest.raises(RuntimeError, match="without replacement"):
        ta.multinomial(ta.tensor([1.0, 0.0]), 2)


@pytest.mark.parametrize("shape, num_samples, replacement",
                         [((65,), 1, False), ((3, 65), 1, False), ((2, 7), 5, True),
                          ((4,), 3, True)])
def test_multinomial_draws_what_numpy_choice_draws_from_the_same_generator(
        shape, num_samples, replacement):
    rng = np.random.default_rng(5)
    weights = rng.random(shape) * (rng.random(shape) > 0.4)  # some zero weights
    weights[..., -1] += 0.5  # every row has a positive sum
    rows = weights.reshape(-1, shape[-1])
    for seed in range(20):
        ta.manual_seed(seed)
        drawn = ta.multinomial(ta.tensor(weights), num_samples, replacement).numpy()
        ta.manual_seed(seed)
        generator = ta.random.generator()
        want = np.stack([generator.choice(shape[-1], size=num_samples, replace=replacement,
                                          p=row / row.sum()) for row in rows])
        np.testing.assert_array_equal(drawn, want.reshape(shape[:-1] + (num_samples,)))


def test_grad_mode_context_managers_match_pytorch():
    for module in (ta, torch):
        w = module.ones(2, requires_grad=True)
        with module.no_grad():
            assert not (w * 2).requires_grad
            with module.enable_grad():
                assert (w * 2).requires_grad
        with module.set_grad_enabled(False):
            assert not (w * 2).requires_grad
        with module.inference_mode():
            assert not (w * 2).requires_grad
        assert (w * 2).requires_grad

    @ta.no_grad()
    def decorated(t):
        return t * 2

    assert not decorated(ta.ones(1, requires_grad=True)).requires_grad
    assert math.isclose(ta.tensor(0.25).item(), 0.25)

"""Float64 gradcheck of every primitive op on hypothesis-generated shapes.

Each op is checked in isolation (one op between the inputs and the random cotangent), then in
composites that exercise the engine's accumulation and unbroadcasting through ``.backward()``.
"""

import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import broadcastable_pair, leaf, seeds, shapes

import tinyattn as ta

BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "pow": lambda a, b: a**b,
}


@pytest.mark.parametrize("name", sorted(BINARY))
@given(pair=broadcastable_pair(), seed=seeds)
def test_binary_op_gradients_with_broadcasting(name, pair, seed):
    shape_a, shape_b = pair
    if name == "pow":  # a > 0 keeps log(a) in the gradient of the exponent defined
        a = leaf(shape_a, seed, low=0.5, high=2.0)
    else:
        a = leaf(shape_a, seed)
    b = leaf(shape_b, seed + 1, away_from=0.0) if name == "div" else leaf(shape_b, seed + 1)
    assert ta.gradcheck(BINARY[name], (a, b))


@pytest.mark.parametrize("exponent", [2, 3, 0.5, -1.5])
@given(shape=shapes(), seed=seeds)
def test_pow_with_a_constant_exponent(exponent, shape, seed):
    x = leaf(shape, seed, low=0.3, high=2.0)
    assert ta.gradcheck(lambda t: t**exponent, (x,))


@given(shape=shapes(), seed=seeds)
def test_reflected_scalar_operators(shape, seed):
    x = leaf(shape, seed, away_from=0.0)
    assert ta.gradcheck(lambda t: 3.0 - t, (x,))
    assert ta.gradcheck(lambda t: 2.0 / t, (x,))
    assert ta.gradcheck(lambda t: 1.5**t, (x,))
    assert ta.gradcheck(lambda t: -t * 2 + 1, (x,))


BACKWARD_OPS = {
    # the dedicated backward ops (as PyTorch's tanh_backward, sigmoid_backward), differentiated
    # in both inputs: the upstream gradient g and the forward's output y
    "tanh_backward": (ta.ops.unary.TanhBackward, -0.95, 0.95),
    "sigmoid_backward": (ta.ops.unary.SigmoidBackward, 0.05, 0.95),
}


@pytest.mark.parametrize("name", sorted(BACKWARD_OPS))
@given(shape=shapes(), seed=seeds)
def test_backward_op_gradients(name, shape, seed):
    fn, low, high = BACKWARD_OPS[name]
    g, y = leaf(shape, seed), leaf(shape, seed + 1, low=low, high=high)
    assert ta.gradcheck(fn.apply, (g, y))


UNARY = {
    # name: (function, low, high, kink to keep away from)
    "exp": (lambda t: t.exp(), -2.0, 2.0, None),
    "log": (lambda t: t.log(), 0.2, 3.0, None),
    "sqrt": (lambda t: t.sqrt(), 0.2, 3.0, None),
    "tanh": (lambda t: t.tanh(), -3.0, 3.0, None),
    "sigmoid": (lambda t: t.sigmoid(), -6.0, 6.0, None),
    "relu": (lambda t: t.relu(), -2.0, 2.0, 0.0),
    "cast": (lambda t: t.float().double() * 1.0, -2.0, 2.0, None),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@given(shape=shapes(), seed=seeds)
def test_unary_op_gradients(name, shape, seed):
    fn, low, high, kink = UNARY[name]
    x = leaf(shape, seed, low, high, away_from=kink)
    if name == "cast":  # a trip through float32 loses precision: a wider tolerance
        assert ta.gradcheck(fn, (x,), eps=1e-3, atol=1e-3, rtol=1e-2)
    else:
        assert ta.gradcheck(fn, (x,))


def _dim_choice(ndim):
    return st.one_of(
        st.none(),
        st.integers(-ndim, ndim - 1),
        st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim, unique=True).map(tuple),
    )


@pytest.mark.parametrize("name", ["sum", "mean", "var"])
@given(data=st.data(), shape=shapes(max_dims=3), seed=seeds, keepdim=st.booleans())
def test_reduction_gradients(name, data, shape, seed, keepdim):
    dim = data.draw(_dim_choice(len(shape)))
    x = leaf(shape, seed)
    if name == "var":
        axes = range(len(shape)) if dim is None else np.atleast_1d(dim)
        if int(np.prod([shape[d] for d in axes])) < 2:
            return  # the unbiased variance of one element is undefined (NaN, as in PyTorch)
    assert ta.gradcheck(lambda t: getattr(t, name)(dim=dim, keepdim=keepdim), (x,))


@given(shape=shapes(max_dims=3), seed=seeds, keepdim=st.booleans(), data=st.data())
def test_max_gradient_flows_to_the_maximum(shape, seed, keepdim, data):
    # distinct values: a permutation keeps every pair at least 0.05 apart
    values = np.random.default_rng(seed).permutation(int(np.prod(shape))) * 0.05
    x = ta.tensor(values.reshape(shape), dtype=np.float64, requires_grad=True)
    assert ta.gradcheck(lambda t: t.max(), (x,), eps=1e-4)
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    assert ta.gradcheck(lambda t: t.max(dim=dim, keepdim=keepdim).values, (x,), eps=1e-4)


@given(shape=shapes(min_dims=2, max_dims=4), seed=seeds, data=st.data())
def test_shape_op_gradients(shape, seed, data):
    x = leaf(shape, seed)
    ndim = len(shape)
    order = tuple(data.draw(st.permutations(range(ndim))))
    d0, d1 = data.draw(st.integers(-ndim, ndim - 1)), data.draw(st.integers(-ndim, ndim - 1))
    axis = data.draw(st.integers(-ndim - 1, ndim))
    assert ta.gradcheck(lambda t: t.reshape(-1), (x,))
    assert ta.gradcheck(lambda t: t.view(shape[0], -1), (x,))
    assert ta.gradcheck(lambda t: t.permute(*order), (x,))
    assert ta.gradcheck(lambda t: t.transpose(d0, d1), (x,))
    with warnings.catch_warnings():  # .T beyond 2 dims is deprecated, as in PyTorch
        warnings.simplefilter("ignore", UserWarning)
        assert ta.gradcheck(lambda t: t.T, (x,))
    assert ta.gradcheck(lambda t: t.unsqueeze(axis).squeeze(axis), (x,))
    assert ta.gradcheck(lambda t: t.unsqueeze(axis), (x,))
    assert ta.gradcheck(lambda t: t.transpose(0, -1).contiguous(), (x,))


@given(shape=shapes(max_dims=3), seed=seeds, lead=st.integers(1, 3))
def test_expand_and_squeeze_gradients(shape, seed, lead):
    squeezable = tuple(1 if i % 2 else n for i, n in enumerate(shape))
    x = leaf(squeezable, seed)
    target = (lead,) + tuple(3 if n == 1 else n for n in squeezable)
    assert ta.gradcheck(lambda t: t.expand(*target), (x,))
    assert ta.gradcheck(lambda t: t.squeeze(), (x,))


@given(shape=shapes(min_dims=1, max_dims=3, max_side=5), seed=seeds, data=st.data())
def test_getitem_gradients(shape, seed, data):
    x = leaf(shape, seed)
    n = shape[0]
    start = data.draw(st.integers(0, n - 1))
    assert ta.gradcheck(lambda t: t[start:], (x,))
    assert ta.gradcheck(lambda t: t[::2], (x,))
    assert ta.gradcheck(lambda t: t[start], (x,))
    assert ta.gradcheck(lambda t: t[..., None], (x,))
    rows = data.draw(st.lists(st.integers(-n, n - 1), min_size=1, max_size=6))
    assert ta.gradcheck(lambda t: t[rows], (x,))  # repeated rows accumulate
    assert ta.gradcheck(lambda t: t[ta.tensor(rows)], (x,))
    mask = np.random.default_rng(seed).random(shape) > 0.5
    assert ta.gradcheck(lambda t: t[mask], (x,))
    assert ta.gradcheck(lambda t: t[ta.tensor(mask)], (x,))


@given(shape=shapes(max_dims=3), seed=seeds, data=st.data(), count=st.integers(1, 3))
def test_cat_and_stack_gradients(shape, seed, data, count):
    ndim = len(shape)
    dim = data.draw(st.integers(-ndim, ndim - 1))
    tensors = []
    for i in range(count):
        own = list(shape)
        own[dim] = data.draw(st.integers(1, 3))
        tensors.append(leaf(tuple(own), seed + i))
    assert ta.gradcheck(lambda *ts: ta.cat(ts, dim=dim), tensors)
    same = [leaf(shape, seed + 10 + i) for i in range(count)]
    new_dim = data.draw(st.integers(-ndim - 1, ndim))
    assert ta.gradcheck(lambda *ts: ta.stack(ts, dim=new_dim), same)


@given(shape=shapes(max_dims=3, max_side=6), seed=seeds, data=st.data())
def test_split_and_chunk_gradients(shape, seed, data):
    x = leaf(shape, seed)
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    size = data.draw(st.integers(1, 4))
    chunks = data.draw(st.integers(1, 4))
    assert ta.gradcheck(lambda t: t.split(size, dim=dim), (x,))
    assert ta.gradcheck(lambda t: t.chunk(chunks, dim=dim), (x,))
    # only some pieces used: the others get no gradient (zeros)
    assert ta.gradcheck(lambda t: t.split(size, dim=dim)[0] * 2, (x,))
    # the pieces' gradients side by side in memory (the split's backward takes them as they
    # are), and in reverse order (concatenated)
    assert ta.gradcheck(lambda t: ta.cat(t.split(size, dim=dim), dim=dim), (x,))
    assert ta.gradcheck(lambda t: ta.cat(t.split(size, dim=dim)[::-1], dim=dim), (x,))


def test_split_backward_joins_side_by_side_gradients_without_a_copy():
    from tinyattn.ops.index import _joined_in_place

    whole = np.arange(24.0).reshape(2, 12)
    pieces = [ta.from_numpy(whole[:, a:b]) for a, b in ((0, 5), (5, 6), (6, 12))]
    joined = _joined_in_place(pieces, 1)
    np.testing.assert_array_equal(joined, whole)
    assert np.shares_memory(joined, whole)
    assert _joined_in_place(pieces[::-1], 1) is None  # out of order
    assert _joined_in_place([pieces[0], pieces[2]], 1) is None  # a gap between them
    assert _joined_in_place([pieces[0], None], 1) is None  # a piece without a gradient
    rows = [ta.from_numpy(whole[:1]), ta.from_numpy(whole[1:])]
    np.testing.assert_array_equal(_joined_in_place(rows, 0), whole)
    copy = ta.from_numpy(whole[:, 5:6].copy())
    assert _joined_in_place([pieces[0], copy], 1) is None  # other memory
    spread = ta.from_numpy(np.broadcast_to(whole[:, :1], (2, 3)))
    assert _joined_in_place([spread, spread], 1) is None  # broadcast: no memory of its own
    # side by side in memory, but the second views another array: the view of the whole would
    # keep only the first one's memory alive
    alias = np.frombuffer(memoryview(whole), dtype=whole.dtype).reshape(2, 12)
    assert _joined_in_place([pieces[0], ta.from_numpy(alias[:, 5:6])], 1) is None


@given(pair=broadcastable_pair(), seed=seeds)
def test_where_and_masked_fill_gradients(pair, seed):
    shape_a, shape_b = pair
    a, b = leaf(shape_a, seed), leaf(shape_b, seed + 1)
    out_shape = np.broadcast_shapes(shape_a, shape_b)
    cond = np.random.default_rng(seed).random(out_shape) > 0.5
    assert ta.gradcheck(lambda p, q: ta.where(ta.tensor(cond), p, q), (a, b))
    assert ta.gradcheck(lambda p: ta.where(ta.tensor(cond), p, 0.0), (a,))
    mask = np.random.default_rng(seed + 2).random(shape_a) > 0.5
    assert ta.gradcheck(lambda p: p.masked_fill(ta.tensor(mask), -5.0), (a,))


@given(shape=shapes(min_dims=2, max_dims=3, max_side=5), seed=seeds, k=st.integers(-2, 2))
def test_triangle_gradients(shape, seed, k):
    x = leaf(shape, seed)
    assert ta.gradcheck(lambda t: ta.triu(t, k), (x,))
    assert ta.gradcheck(lambda t: ta.tril(t, k), (x,))


@st.composite
def matmul_shapes(draw):
    m, k, n = draw(st.integers(1, 5)), draw(st.integers(1, 5)), draw(st.integers(1, 5))
    batch_a, batch_b = draw(broadcastable_pair(max_dims=2, max_side=3))
    kind = draw(st.sampled_from(["matrix", "vector_left", "vector_right", "vector_both"]))
    a_shape = (k,) if kind in ("vector_left", "vector_both") else batch_a + (m, k)
    b_shape = (k,) if kind in ("vector_right", "vector_both") else batch_b + (k, n)
    return a_shape, b_shape


@given(pair=matmul_shapes(), seed=seeds)
def test_matmul_gradients_batched_and_broadcast(pair, seed):
    a, b = leaf(pair[0], seed), leaf(pair[1], seed + 1)
    assert ta.gradcheck(lambda p, q: p @ q, (a, b))


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@given(shape=shapes(max_dims=3, max_side=5), seed=seeds, data=st.data())
def test_softmax_gradients_along_any_dim(name, shape, seed, data):
    x = leaf(shape, seed, low=-3, high=3)
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    assert ta.gradcheck(lambda t: getattr(t, name)(dim=dim), (x,))


def test_softmax_gradients_with_masked_entries():
    x = leaf((3, 5), 0)
    mask = ta.tensor(np.array([[0, 0, 1, 1, 0], [1, 1, 1, 1, 1], [0, 0, 0, 0, 0]], dtype=bool))
    assert ta.gradcheck(lambda t: t.masked_fill(mask, float("-inf")).softmax(dim=-1), (x,))


# ---- composites: several ops, one backward ------------------------------------------------


@given(seed=seeds, t=st.integers(1, 5), d=st.integers(1, 4))
def test_composite_causal_attention_through_backward(seed, t, d):
    x = leaf((2, t, d), seed)
    wq, wk, wv = (leaf((d, d), seed + i) for i in (1, 2, 3))
    causal = ta.tensor(np.triu(np.ones((t, t), dtype=bool), k=1))

    def attention(x, wq, wk, wv):
        q, k, v = x @ wq, x @ wk, x @ wv
        scores = q @ k.transpose(-2, -1) / d**0.5
        weights = scores.masked_fill(causal, float("-inf")).softmax(dim=-1)
        return weights @ v

    assert ta.gradcheck(attention, (x, wq, wk, wv))


@given(seed=seeds)
def test_composite_reused_inputs_accumulate(seed):
    x, y = leaf((3, 4), seed), leaf((4,), seed + 1)
    assert ta.gradcheck(lambda a, b: (a * b + a.exp() * a - b).tanh() @ b + a.sum(1), (x, y))


@given(seed=seeds)
def test_composite_layer_norm_from_primitives(seed):
    x = leaf((4, 6), seed)

    def layer_norm(t):
        mean = t.mean(dim=-1, keepdim=True)
        var = t.var(dim=-1, keepdim=True, correction=0)
        return (t - mean) / (var + 1e-5).sqrt()

    assert ta.gradcheck(layer_norm, (x,))

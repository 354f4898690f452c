"""Selecting, combining and sorting: sort/argsort, scatter/scatter_add, index_fill, unique,
nonzero, roll (values, dtypes and gradients against PyTorch, float64 gradcheck and
gradgradcheck, bad inputs), and the shape and index ops' rules: each one backward in tensor
ops, recorded under ``create_graph`` so that it can be differentiated again, and the short
paths of the hot shape functions equal to the full ones."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.errors import DTypeError, ShapeError
from tinyattn.ops import index as index_ops
from tinyattn.ops import shape as shape_ops

RNG = np.random.default_rng(11)


def _distinct(*shape):
    """float64 values at least 0.1 apart (finite differences never reorder a sort)."""
    n = int(np.prod(shape))
    return (RNG.permutation(n) * 0.1 - 0.05 * n + RNG.uniform(0, 0.01, n)).reshape(shape)


def _arr(*shape):
    return np.asarray(RNG.uniform(-1.5, 1.5, shape), np.float64)


def _graph_names(tensor):
    """The op names of the graph behind ``tensor``."""
    if tensor.grad_fn is None:
        return set()
    order = ta.autograd.engine.topological_order([tensor.grad_fn])
    return {node.name for node in order}


# ---- every converted op: one backward, written in tensor ops, recorded under create_graph ---

def _setitem(a, b):
    out = a * 1.0
    out[1:, [0, 2]] = b
    return out


# name -> (function, input arrays, the op that must be in its graph)
OPS = {
    "Reshape": (lambda a: a.reshape(3, 2) * 1.0, [_arr(2, 3)], "Reshape"),
    "Permute": (lambda a: a.permute(2, 0, 1), [_arr(2, 3, 4)], "Permute"),
    "Expand": (lambda a: a.expand(3, 2, 4), [_arr(2, 1)], "Expand"),
    "Tile": (lambda a: a.repeat(2, 1, 3), [_arr(2, 3)], "Tile"),
    "Copy": (lambda a: a.transpose(0, 1).contiguous(), [_arr(2, 3)], "Copy"),
    "Flip": (lambda a: a.flip((0, -1)), [_arr(2, 3, 2)], "Flip"),
    "Roll": (lambda a: a.roll((1, -3), (0, -1)), [_arr(2, 3, 2)], "Roll"),
    "Roll-flattened": (lambda a: ta.roll(a, 4), [_arr(2, 3)], "Roll"),
    "Roll-one-dim-twice": (lambda a: a.roll((1, 1), (1, 1)), [_arr(2, 3)], "Roll"),
    "GetItem-basic": (lambda a: a[1, ::2], [_arr(3, 4)], "GetItem"),
    "GetItem-advanced": (lambda a: a[[0, 2, 0], 1:], [_arr(3, 4)], "GetItem"),
    "GetItem-mask": (lambda a: a[ta.tensor(np.array([[True, False, True, True]] * 3))],
                     [_arr(3, 4)], "GetItem"),
    "IndexPut": (_setitem, [_arr(3, 4), _arr(2, 2)], "IndexPut"),
    "IndexPut-accumulate": (lambda a, b: ta.ops.index_put(a, (ta.tensor([0, 0, 2]),), b,
                                                          accumulate=True),
                            [_arr(3, 2), _arr(3, 2)], "IndexPut"),
    "IndexScatter": (lambda a: index_ops.IndexScatter.apply(  # x[[0, 2, 0], 1:]'s adjoint
        a, shape=(3, 4), index=index_ops.parse_index(2, ([0, 2, 0], slice(1, None)))),
                     [_arr(3, 3)], "IndexScatter"),
    "Cat": (lambda a, b: ta.cat([a, b], dim=1), [_arr(2, 3), _arr(2, 1)], "Cat"),
    "Stack": (lambda a, b: ta.stack([a, b], dim=-1), [_arr(2, 3), _arr(2, 3)], "Stack"),
    "gather": (lambda a: a.gather(1, ta.tensor([[2, 0, 2], [1, 1, 0]])), [_arr(2, 3)],
               "GetItem"),
    "Scatter": (lambda a, s: a.scatter(1, ta.tensor([[2, 0], [1, 3]]), s),
                [_arr(2, 4), _arr(2, 3)], "Scatter"),
    "Scatter-add": (lambda a, s: a.scatter_add(0, ta.tensor([[1, 0], [1, 1]]), s),
                    [_arr(2, 2), _arr(2, 2)], "Scatter"),
    "IndexFill": (lambda a, v: a.index_fill(1, ta.tensor([2, 0]), v), [_arr(2, 3), _arr()],
                  "IndexFill"),
    "Sort": (lambda a: a.sort(dim=0, descending=True).values, [_distinct(3, 2)], "Sort"),
    "topk": (lambda a: a.topk(2).values, [_distinct(2, 4)], "Sort"),
    "topk-smallest-dim0": (lambda a: a.topk(2, dim=0, largest=False).values, [_distinct(3, 4)],
                           "Sort"),
}


def _mixed(fn):
    """``fn`` times its own inputs' sum: second derivatives of a linear op are not all zero."""
    def mixed(*xs):
        return fn(*xs) * sum(x.sum() for x in xs)
    return mixed


@pytest.mark.parametrize("name", sorted(OPS))
def test_each_op_backward_is_recorded_under_create_graph(name):
    fn, arrays, op = OPS[name]
    xs = [ta.tensor(a, requires_grad=True) for a in arrays]
    out = fn(*xs)
    assert op in _graph_names(out)
    v = ta.tensor(RNG.standard_normal(out.shape), requires_grad=True)  # a graph even if linear
    recorded = ta.autograd.grad(out, xs, v, create_graph=True)
    assert all(g.requires_grad for g in recorded)
    assert any(g.grad_fn is not None for g in recorded)  # (a pass-through gives v itself)
    xs_plain = [ta.tensor(a, requires_grad=True) for a in arrays]
    plain = ta.autograd.grad(fn(*xs_plain), xs_plain, v)
    assert all(g.grad_fn is None for g in plain)
    for a, b in zip(recorded, plain):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-13, atol=1e-14)
    # the recorded gradient is differentiated again: against finite differences
    xs = [ta.tensor(a, requires_grad=True) for a in arrays]
    assert ta.gradgradcheck(_mixed(fn), xs, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("name", sorted(OPS))
def test_each_op_gradient_matches_finite_differences(name):
    fn, arrays, _ = OPS[name]
    assert ta.gradcheck(fn, [ta.tensor(a, requires_grad=True) for a in arrays])


FUNCTIONS = [shape_ops.Reshape, shape_ops.Permute, shape_ops.Expand, shape_ops.Tile,
             shape_ops.Flip, shape_ops.Roll, shape_ops.Copy, index_ops.GetItem,
             index_ops.IndexScatter, index_ops.IndexPut, index_ops.Cat, index_ops.Stack,
             index_ops.Scatter, index_ops.IndexFill, index_ops.Sort]


@pytest.mark.parametrize("fn", FUNCTIONS, ids=lambda f: f.__name__)
def test_each_op_has_one_backward_a_formula_and_its_math_documented(fn):
    assert not hasattr(fn, "differentiable_backward")

    assert "backward" in vars(fn) and "forward" in vars(fn)
    assert callable(fn.formula)
    assert re.search(r"``(y|values, indices) = ", fn.__doc__)  # the forward ...
    assert re.search(r"``d\w+ = ", fn.__doc__)  # ... and the gradient of an input


def _node(out, name):
    order = ta.autograd.engine.topological_order([out.grad_fn])
    return next(node for node in order if node.name == name)


def test_formulas_name_the_gradient_and_the_layout():
    x = ta.randn(2, 3, 4, requires_grad=True)
    y = ta.randn(2, 3, 4, requires_grad=True)
    assert shape_ops.Reshape.formula(_node(x.reshape(6, 4), "Reshape"), 0, "g", ["X"],
                                     "Y") == "reshape(g, (2, 3, 4))"
    assert shape_ops.Permute.formula(_node(x.transpose(-1, -2), "Permute"), 0, "g", ["X"],
                                     "Y") == "gᵀ"
    assert shape_ops.Permute.formula(_node(x.permute(2, 0, 1), "Permute"), 0, "g", ["X"],
                                     "Y") == "permute(g, (1, 2, 0))"
    assert shape_ops.Flip.formula(_node(x.flip((2, 0)), "Flip"), 0, "g", ["X"],
                                  "Y") == "flip(g, (0, 2))"
    assert shape_ops.Roll.formula(_node(x.roll((1, -2), (0, 2)), "Roll"), 0, "g", ["X"],
                                  "Y") == "roll(g, (-1, 2), (0, 2))"
    assert index_ops.GetItem.formula(_node(x[0], "GetItem"), 0, "g", ["X"],
                                     "Y") == "scatter(g, index)"
    cat = _node(ta.cat([x, y], 1), "Cat")
    assert index_ops.Cat.formula(cat, 1, "g", ["X", "Z"], "Y") == "narrow(g, 1, 3, 3)"
    stack = _node(ta.stack([x, y], 0), "Stack")
    assert index_ops.Stack.formula(stack, 1, "g", ["X", "Z"], "Y") == "select(g, 0, 1)"
    scatter = _node(x.scatter(2, ta.zeros(2, 3, 1, dtype=ta.int64), y), "Scatter")
    assert index_ops.Scatter.formula(scatter, 2, "g", ["X", "I", "S"],
                                     "Y") == "gather(g, 2, index)"
    assert index_ops.Scatter.formula(scatter, 0, "g", ["X", "I", "S"],
                                     "Y") == "scatter(g, 2, index, 0)"
    assert index_ops.Sort.formula(_node(x.sort(1).values, "Sort"), 0, "g", ["X"],
                                  "Y") == "scatter(0, 1, indices, g)"


def test_getitem_backward_writes_into_zeros_without_a_copy_of_them():
    """The adjoint pair: GetItem's backward is IndexScatter, IndexScatter's is GetItem."""
    x = ta.tensor(_arr(3, 4), requires_grad=True)
    v = ta.ones(2, 2, dtype=ta.float64, requires_grad=True)
    (g,) = ta.autograd.grad(x[1:, [0, 0]], x, v, create_graph=True)
    assert g.grad_fn.name == "IndexScatter"
    np.testing.assert_array_equal(g.numpy(), [[0, 0, 0, 0], [2, 0, 0, 0], [2, 0, 0, 0]])
    w = _arr(3, 4)
    gx, gv = ta.autograd.grad((g * ta.tensor(w)).sum(), [x, v], allow_unused=True)
    assert gx is None  # the gradient of a selection does not depend on x
    np.testing.assert_array_equal(gv.numpy(), w[1:, [0, 0]])  # IndexScatter's backward


def test_shape_views_share_memory_and_version_with_their_input():
    x = ta.zeros(2, 3)
    for view in (x.reshape(3, 2), x.permute(1, 0), x.unsqueeze(0), x[1], x[:, 1:],
                 x.expand(4, 2, 3), x.view(6), x.T, x.mT, x.squeeze()):
        assert np.shares_memory(view.numpy(), x.numpy())
        assert view._version is x._version
    assert not np.shares_memory(x[[0, 1]].numpy(), x.numpy())  # advanced indexing copies
    assert not np.shares_memory(x.clone().numpy(), x.numpy())


# ---- the short paths of the hot shape functions ----------------------------------------------

def test_hot_shape_functions_take_numpy_ints_and_python_ints_alike():
    x = ta.tensor(_arr(2, 3, 4), requires_grad=True)
    i = np.int64
    pairs = [
        (x.reshape(6, 4), x.reshape(i(6), i(4))),
        (x.reshape(-1, 4), x.reshape([i(-1), 4])),
        (x.reshape((4, 6)), x.reshape(ta.tensor([4, 6]))),
        (x.view(2, 12), x.view(i(2), -1)),
        (x.permute(2, 0, 1), x.permute(i(-1), 0, i(1))),
        (x.permute([2, 1, 0]), x.permute((-1, -2, -3))),
        (x.transpose(0, 2), x.transpose(i(-3), i(-1))),
        (x.unsqueeze(3), x.unsqueeze(i(-1))),
        (x.unsqueeze(0).squeeze(0), x.unsqueeze(0).squeeze(i(-4))),
        (x[1, :, 2:4], x[i(1), :, i(2):i(4)]),
        (x[..., None, 1], x[(Ellipsis, None, i(1))]),
        (x.expand(5, 2, 3, 4), x.expand(i(5), -1, 3, i(4))),
    ]
    for fast, full in pairs:
        assert fast.shape == full.shape
        np.testing.assert_array_equal(fast.numpy(), full.numpy())
        assert fast.grad_fn.name == full.grad_fn.name


@pytest.mark.parametrize("call, error, match", [
    (lambda x: x.reshape(5, 5), ShapeError, "cannot reshape"),
    (lambda x: x.reshape(-1, -1), ShapeError, "at most one -1"),
    (lambda x: x.reshape(-2, -12), ShapeError, "no other negatives"),
    (lambda x: x.reshape(2.0, 12), TypeError, "sizes must be ints"),
    (lambda x: x.view(4, 6, 1, 2), ShapeError, "cannot reshape"),
    (lambda x: x.permute(0, 0, 1), ShapeError, "not a permutation"),
    (lambda x: x.permute(0, 1), ShapeError, "got 2 dims"),
    (lambda x: x.permute(0, 1, 3), IndexError, "out of range"),
    (lambda x: x.transpose(0, 3), IndexError, "out of range"),
    (lambda x: x.transpose(True, 1), TypeError, "dim must be an int"),
    (lambda x: x.unsqueeze(4), IndexError, "out of range"),
    (lambda x: x.squeeze(-4), IndexError, "out of range"),
    (lambda x: x.expand(3, 3, 4), ShapeError, "cannot be expanded"),
    (lambda x: x.expand(-2, 2, 3, 4), ShapeError, "invalid size -2"),
    (lambda x: x[0, 0, 0, 0], IndexError, "too many indices"),
    (lambda x: x[..., ...], IndexError, "single ellipsis"),
    (lambda x: x[5], IndexError, "out of bounds"),
    (lambda x: x[::-1], ValueError, "step must be greater than zero"),
    (lambda x: x[::0], ValueError, "step must be greater than zero"),
    (lambda x: x[1.0], IndexError, "float"),
])
def test_hot_shape_functions_still_refuse_bad_arguments(call, error, match):
    x = ta.zeros(2, 3, 4)
    with pytest.raises(error, match=match):
        call(x)


def test_view_of_a_non_contiguous_tensor_is_refused_only_when_no_strides_fit():
    x = ta.zeros(2, 3, 4).transpose(0, 1)  # (3, 2, 4), not contiguous
    with pytest.raises(ShapeError, match="not compatible"):
        x.view(24)
    assert x.view(3, 2, 2, 2).shape == (3, 2, 2, 2)  # splitting the last dim fits


# ---- sort and argsort --------------------------------------------------------------------------

SORT_CASES = [
    ((5,), -1, False), ((5,), 0, True), ((3, 4), 0, False), ((3, 4), 1, True),
    ((2, 3, 4), 1, True), ((2, 3, 4), -3, False), ((2, 0, 3), 1, False), ((4, 1), 1, True),
]


@pytest.mark.parametrize("shape, dim, descending", SORT_CASES)
def test_sort_values_indices_and_gradient_equal_pytorch(shape, dim, descending):
    torch = pytest.importorskip("torch")
    data = RNG.integers(-3, 4, shape).astype(np.float64)  # many ties
    if data.size >= 2:
        data.reshape(-1)[:2] = [np.nan, np.inf]
    x, t = ta.tensor(data, requires_grad=True), torch.tensor(data, requires_grad=True)
    ours = ta.sort(x, dim, descending)
    theirs = torch.sort(t, dim=dim, descending=descending, stable=True)
    np.testing.assert_array_equal(ours.values.numpy(), theirs.values.detach().numpy())
    np.testing.assert_array_equal(ours.indices.numpy(), theirs.indices.numpy())
    assert ours.indices.dtype == np.int64 and ours.values.dtype == np.float64
    assert not ours.indices.requires_grad and ours.indices.grad_fn is None
    cotangent = RNG.standard_normal(shape)
    ours.values.backward(ta.tensor(cotangent))
    theirs.values.backward(torch.tensor(cotangent))
    np.testing.assert_array_equal(x.grad.numpy(), t.grad.numpy())
    np.testing.assert_array_equal(
        ta.argsort(ta.tensor(data), dim, descending).numpy(),
        torch.argsort(torch.tensor(data), dim=dim, descending=descending, stable=True).numpy())


def test_sort_is_stable_and_puts_nan_last_ascending_first_descending():
    x = ta.tensor([2.0, np.nan, 1.0, 2.0, -np.inf, np.nan, 1.0])
    assert ta.sort(x).indices.tolist() == [4, 2, 6, 0, 3, 1, 5]
    assert ta.sort(x, descending=True).indices.tolist() == [1, 5, 0, 3, 2, 6, 4]
    assert ta.sort(x, stable=True).indices.tolist() == ta.argsort(x).tolist()


@pytest.mark.parametrize("dtype", [ta.int64, ta.int32, ta.bool_, ta.float32, ta.uint8])
def test_sort_keeps_the_dtype_and_equals_pytorch(dtype):
    torch = pytest.importorskip("torch")
    data = RNG.integers(0, 3, (3, 5)).astype(dtype)
    for descending in (False, True):
        ours = ta.tensor(data).sort(descending=descending)
        theirs = torch.tensor(data).sort(descending=descending, stable=True)
        assert ours.values.dtype == data.dtype
        np.testing.assert_array_equal(ours.values.numpy(), theirs.values.numpy())
        np.testing.assert_array_equal(ours.indices.numpy(), theirs.indices.numpy())


def test_sort_of_a_zero_dim_tensor():
    torch = pytest.importorskip("torch")
    x = ta.tensor(2.5, dtype=ta.float64, requires_grad=True)
    values, indices = ta.sort(x, 0)
    theirs = torch.sort(torch.tensor(2.5), 0)
    assert values.shape == tuple(theirs.values.shape) == ()
    assert indices.tolist() == theirs.indices.tolist() == 0
    values.backward(ta.tensor(3.0, dtype=ta.float64))
    assert x.grad.item() == 3.0
    assert ta.argsort(ta.tensor(1.0)).shape == ()


def test_sort_returns_a_named_tuple_and_only_the_values_carry_a_gradient():
    x = ta.tensor(_distinct(2, 3), requires_grad=True)
    result = x.sort(1)
    assert isinstance(result, tuple) and result._fields == ("values", "indices")
    values, indices = result
    assert values.grad_fn.name == "Sort" and not indices.requires_grad
    (values * ta.tensor(_arr(2, 3))).sum().backward()
    assert x.grad is not None and x.grad.shape == (2, 3)


@pytest.mark.parametrize("dim, descending", [(0, False), (1, True), (-1, False)])
def test_sort_gradcheck_and_gradgradcheck(dim, descending):
    x = ta.tensor(_distinct(3, 4), requires_grad=True)

    def fn(t):
        return ta.sort(t, dim, descending).values

    assert ta.gradcheck(fn, (x,))
    assert ta.gradgradcheck(_mixed(fn), (x,))


@pytest.mark.parametrize("call, error, match", [
    (lambda x: ta.sort(x, 2), IndexError, "out of range"),
    (lambda x: ta.sort(x, 0.0), TypeError, "dim must be an int"),
    (lambda x: ta.sort(x, descending=1), TypeError, "descending must be a bool"),
    (lambda x: ta.sort(x, stable="yes"), TypeError, "stable must be a bool"),
    (lambda x: ta.sort(x.numpy()), TypeError, "input must be a Tensor"),
    (lambda x: ta.argsort(x, -3), IndexError, "out of range"),
    (lambda x: ta.argsort(x, descending=None), TypeError, "descending must be a bool"),
    (lambda x: ta.topk(x, 2, largest=1), TypeError, "largest must be a bool"),
    (lambda x: ta.topk(x, 2, sorted="yes"), TypeError, "sorted must be a bool"),
    (lambda x: ta.topk(x.numpy(), 2), TypeError, "input must be a Tensor"),
    (lambda x: ta.topk(x, 4), ValueError, "larger than the size 3"),
])
def test_sort_refuses_bad_arguments(call, error, match):
    with pytest.raises(error, match=match):
        call(ta.zeros(2, 3))


def test_sort_of_a_saved_index_changed_in_place_is_caught():
    x = ta.tensor(_distinct(4), requires_grad=True)
    values, indices = x.sort()
    indices.add_(0)  # the backward reads the indices: it must notice
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        values.sum().backward()


# ---- scatter and scatter_add -------------------------------------------------------------------

def _unique_index(rng, shape, size, dim):
    """An index of ``shape`` whose entries along ``dim`` are distinct (each < ``size``)."""
    moved = list(shape)
    n = moved.pop(dim)
    rows = [rng.permutation(size)[:n] for _ in range(int(np.prod(moved)))]
    return np.moveaxis(np.array(rows).reshape(*moved, n), -1, dim).astype(np.int64)


SCATTER_CASES = [  # input shape, dim, index shape, src shape
    ((5,), 0, (3,), (3,)),
    ((3, 4), 0, (2, 4), (2, 4)),
    ((3, 4), 1, (3, 2), (3, 3)),  # src larger than index
    ((3, 4), -1, (2, 3), (4, 5)),  # index smaller than input outside dim
    ((2, 3, 4), 1, (2, 2, 4), (2, 3, 4)),
    ((2, 3), 0, (0, 3), (1, 3)),  # nothing written
]


def _corner(array, index, dim):
    """The part of ``array`` that ``index`` addresses: all of ``dim``, ``index``'s size
    elsewhere (a view)."""
    dim %= array.ndim
    return array[tuple(slice(None) if d == dim else slice(0, n)
                       for d, n in enumerate(index.shape))]


def _src_gradient(cotangent, index, dim, src_shape):
    """``gather(cotangent, dim, index)`` in the corner of zeros of ``src``'s shape."""
    expected = np.zeros(src_shape)
    expected[tuple(slice(0, n) for n in index.shape)] = np.take_along_axis(
        _corner(cotangent, index, dim), index, dim)
    return expected


@pytest.mark.parametrize("accumulate", [False, True], ids=["scatter", "scatter_add"])
@pytest.mark.parametrize("shape, dim, index_shape, src_shape", SCATTER_CASES)
def test_scatter_values_and_gradients_equal_pytorch(shape, dim, index_shape, src_shape,
                                                    accumulate):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(len(shape) * 7 + dim)
    if accumulate:  # repeats: their values are summed
        index = rng.integers(0, shape[dim], index_shape)
    else:  # distinct: which of repeated values is written is unspecified
        index = _unique_index(rng, index_shape, shape[dim], dim)
    data, src = rng.standard_normal(shape), rng.standard_normal(src_shape)
    cotangent = rng.standard_normal(shape)
    x, s = ta.tensor(data, requires_grad=True), ta.tensor(src, requires_grad=True)
    tx, ts = torch.tensor(data, requires_grad=True), torch.tensor(src, requires_grad=True)
    if accumulate:
        out = x.scatter_add(dim, ta.tensor(index), s)
        theirs = tx.scatter_add(dim, torch.tensor(index), ts)
    else:
        out = ta.scatter(x * 1.0, dim, ta.tensor(index), s)
        theirs = torch.scatter(tx * 1.0, dim, torch.tensor(index), ts)
    np.testing.assert_allclose(out.numpy(), theirs.detach().numpy(), rtol=1e-15, atol=1e-15)
    assert out.dtype == np.float64 and out.grad_fn.name == "Scatter"
    out.backward(ta.tensor(cotangent))
    np.testing.assert_array_equal(s.grad.numpy(), _src_gradient(cotangent, index, dim,
                                                                src_shape))
    expected_x = cotangent.copy()
    if not accumulate:
        np.put_along_axis(_corner(expected_x, index, dim), index, 0.0, dim)
    np.testing.assert_array_equal(x.grad.numpy(), expected_x)
    if src_shape == index_shape:  # PyTorch's backward fails for a larger src: ours pads
        theirs.backward(torch.tensor(cotangent))
        np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())
        np.testing.assert_array_equal(s.grad.numpy(), ts.grad.numpy())


def test_scatter_gradients_follow_pytorch_where_an_index_repeats():
    """Only one of the repeated values is written, but PyTorch's rule sends every src entry
    ``gather(grad)``, and the input's gradient is zero at every written position."""
    torch = pytest.importorskip("torch")
    index = np.array([[1, 1, 0]])
    cotangent = np.array([[1.0, 2.0], [3.0, 4.0]])
    x, s = ta.zeros(2, 2, dtype=ta.float64, requires_grad=True), \
        ta.ones(1, 2, dtype=ta.float64, requires_grad=True)
    tx, ts = torch.zeros(2, 2, dtype=torch.float64, requires_grad=True), \
        torch.ones(1, 2, dtype=torch.float64, requires_grad=True)
    (x.scatter(1, ta.tensor(index[:, :2]), s) * ta.tensor(cotangent)).sum().backward()
    (tx.scatter(1, torch.tensor(index[:, :2]), ts) * torch.tensor(cotangent)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())
    np.testing.assert_array_equal(s.grad.numpy(), ts.grad.numpy())
    row = ta.zeros(4, dtype=ta.float64, requires_grad=True)
    src = ta.tensor([1.0, 2.0, 3.0], dtype=ta.float64, requires_grad=True)
    trow = torch.zeros(4, dtype=torch.float64, requires_grad=True)
    tsrc = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64, requires_grad=True)
    weights = np.array([1.0, 2.0, 3.0, 4.0])
    (row.scatter(0, ta.tensor([3, 0, 3]), src) * ta.tensor(weights)).sum().backward()
    (trow.scatter(0, torch.tensor([3, 0, 3]), tsrc) * torch.tensor(weights)).sum().backward()
    np.testing.assert_array_equal(row.grad.numpy(), trow.grad.numpy())
    np.testing.assert_array_equal(src.grad.numpy(), tsrc.grad.numpy())


def test_scatter_a_number_and_integer_tensors_equal_pytorch():
    torch = pytest.importorskip("torch")
    index = np.array([[0, 2], [1, 1]])
    for dtype in (np.float32, np.int64, np.bool_):
        data = np.zeros((2, 3), dtype)
        for value in (2.5, 1, True):
            ours = ta.scatter(ta.tensor(data), 1, ta.tensor(index), value)
            theirs = torch.scatter(torch.tensor(data), 1, torch.tensor(index), value)
            assert ours.dtype == data.dtype
            np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    ints = np.arange(6).reshape(2, 3)
    ours = ta.tensor(ints).scatter_add(1, ta.tensor(index), ta.tensor(ints[:, :2] * 10))
    theirs = torch.tensor(ints).scatter_add(1, torch.tensor(index), torch.tensor(ints[:, :2] * 10))
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    x = ta.tensor(_arr(2, 3), requires_grad=True)
    ta.scatter(x, 1, ta.tensor(index), value=0.0).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0, 1, 0], [1, 0, 1]])


def test_scatter_on_a_zero_dim_tensor():
    torch = pytest.importorskip("torch")
    x, s = ta.tensor(1.0, requires_grad=True), ta.tensor(4.0, requires_grad=True)
    out = ta.scatter(x, 0, ta.tensor(0), s)
    assert out.shape == () and out.item() == torch.scatter(
        torch.tensor(1.0), 0, torch.tensor(0), torch.tensor(4.0)).item()
    out.backward()
    assert x.grad.item() == 0.0 and s.grad.item() == 1.0
    assert ta.scatter_add(ta.tensor(1.0), -1, ta.tensor(0), ta.tensor(2.0)).item() == 3.0


def test_scatter_in_place_equals_pytorch_and_keeps_the_graph():
    torch = pytest.importorskip("torch")
    data, src = _arr(3, 4), _arr(2, 4)
    index = np.array([[2, 0, 1, 2], [0, 1, 2, 1]])
    cotangent = RNG.standard_normal((3, 4))
    x, s = ta.tensor(data, requires_grad=True), ta.tensor(src, requires_grad=True)
    tx, ts = torch.tensor(data, requires_grad=True), torch.tensor(src, requires_grad=True)
    y, ty = x * 2.0, tx * 2.0
    assert y.scatter_(0, ta.tensor(index), s) is y
    ty.scatter_(0, torch.tensor(index), ts)
    z, tz = x * 3.0, tx * 3.0
    z.scatter_add_(0, ta.tensor(index), s)
    tz.scatter_add_(0, torch.tensor(index), ts)
    w = x * 1.0
    w.scatter_(1, ta.tensor([[0], [1], [3]]), 7.0)
    tw = tx * 1.0
    tw.scatter_(1, torch.tensor([[0], [1], [3]]), 7.0)
    assert y.grad_fn.name == "Scatter" and z.grad_fn.name == "Scatter"
    ((y + z + w) * ta.tensor(cotangent)).sum().backward()
    ((ty + tz + tw) * torch.tensor(cotangent)).sum().backward()
    for a, b in ((y, ty), (z, tz), (w, tw)):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-15)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-15)
    np.testing.assert_allclose(s.grad.numpy(), ts.grad.numpy(), rtol=1e-15)


def test_scatter_in_place_on_a_leaf_that_requires_grad_is_refused():
    x = ta.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        x.scatter_(0, ta.tensor([1]), ta.ones(1))
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        x.scatter_add_(0, ta.tensor([1]), ta.ones(1))
    with ta.no_grad():
        x.scatter_(0, ta.tensor([1]), 5.0)
    assert x.tolist() == [0.0, 5.0, 0.0]


@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("dim", [0, 1])
def test_scatter_gradcheck_and_gradgradcheck(accumulate, dim):
    rng = np.random.default_rng(dim)
    index = ta.tensor(rng.integers(0, 3, (2, 3)) if accumulate else
                      _unique_index(rng, (2, 3), 3 if dim == 0 else 4, dim))
    x, s = ta.tensor(_arr(3, 4), requires_grad=True), ta.tensor(_arr(2, 4), requires_grad=True)

    def fn(a, b):
        return (ta.scatter_add if accumulate else ta.scatter)(a, dim, index, b)

    assert ta.gradcheck(fn, (x, s))
    assert ta.gradgradcheck(_mixed(fn), (x, s))


def _scatter_call(op, **changes):
    args = dict(input=ta.zeros(3, 4), dim=0, index=ta.tensor([[0, 2, 1, 0]]), src=ta.ones(2, 4))
    args.update(changes)
    return lambda: op(args["input"], args["dim"], args["index"], args["src"])


@pytest.mark.parametrize("op", [ta.scatter, ta.scatter_add], ids=["scatter", "scatter_add"])
@pytest.mark.parametrize("changes, error, match", [
    ({"index": ta.tensor([[0, 1, 1, 0]], dtype=ta.int32)}, DTypeError, "int64 index"),
    ({"index": ta.tensor([[0.0, 1.0, 1.0, 0.0]])}, DTypeError, "int64 index"),
    ({"index": [[0, 1, 1, 0]]}, TypeError, "index must be a Tensor"),
    ({"index": ta.tensor([[0, 3, 1, 0]])}, IndexError, "index 3 is out of bounds for dim 0"),
    ({"index": ta.tensor([[0, -1, 1, 0]])}, IndexError, "index -1 is out of bounds"),
    ({"index": ta.tensor([[0, 1], [1, 0]]), "dim": 1}, None, None),
    ({"index": ta.tensor([[0, 4]]), "dim": 1}, IndexError, "index 4 is out of bounds for dim 1"),
    ({"index": ta.tensor([0, 1])}, ShapeError, "index must have as many dims"),
    ({"index": ta.zeros(3, 4, dtype=ta.int64)}, ShapeError, "no larger than src"),
    ({"index": ta.zeros(1, 5, dtype=ta.int64)}, ShapeError, "no larger than input"),
    ({"src": ta.ones(2, 4, dtype=ta.float64)}, DTypeError, "dtype float32, got float64"),
    ({"src": ta.ones(4)}, ShapeError, "src must have as many dims"),
    ({"dim": 2}, IndexError, "out of range"),
    ({"input": np.zeros((3, 4))}, TypeError, "input must be a Tensor"),
])
def test_scatter_refuses_bad_arguments(op, changes, error, match):
    call = _scatter_call(op, **changes)
    if error is None:
        call()
        return
    with pytest.raises(error, match=match):
        call()


def test_scatter_refuses_reduce_and_confused_sources():
    x, index = ta.zeros(3), ta.tensor([1])
    with pytest.raises(NotImplementedError, match="reduce='add' is not supported.*scatter_add"):
        ta.scatter(x, 0, index, ta.ones(1), reduce="add")
    with pytest.raises(NotImplementedError, match="reduce"):
        x.scatter_(0, index, 1.0, reduce="multiply")
    with pytest.raises(TypeError, match="either src or value"):
        ta.scatter(x, 0, index, ta.ones(1), value=1.0)
    with pytest.raises(TypeError, match="missing the src"):
        ta.scatter(x, 0, index)
    with pytest.raises(TypeError, match="src must be a tensor or a number"):
        ta.scatter(x, 0, index, "1")
    with pytest.raises(TypeError, match="src must be a tensor, got float"):
        ta.scatter_add(x, 0, index, 1.0)
    assert x.tolist() == [0.0, 0.0, 0.0]


# ---- index_fill --------------------------------------------------------------------------------

@pytest.mark.parametrize("shape, dim, index", [
    ((4,), 0, [1, 3]), ((3, 4), 1, [0, -1, 0]), ((3, 4), 0, 2), ((2, 3, 4), -2, [2, 2, 0]),
    ((3, 4), 1, []),
])
def test_index_fill_values_and_gradients_equal_pytorch(shape, dim, index):
    torch = pytest.importorskip("torch")
    data, cotangent = _arr(*shape), RNG.standard_normal(shape)
    x, v = ta.tensor(data, requires_grad=True), ta.tensor(0.75, dtype=ta.float64,
                                                           requires_grad=True)
    tx, tv = torch.tensor(data, requires_grad=True), torch.tensor(0.75, dtype=torch.float64,
                                                                  requires_grad=True)
    out = ta.index_fill(x, dim, ta.tensor(index, dtype=ta.int64), v)
    np.testing.assert_array_equal(out.numpy(), torch.index_fill(
        torch.tensor(data), dim, torch.tensor(index, dtype=torch.int64), 0.75).numpy())
    # PyTorch's backward fails on a negative index: its gradients with the index made positive
    positive = torch.tensor(index, dtype=torch.int64) % shape[dim]
    theirs = torch.index_fill(tx, dim, positive, tv)
    np.testing.assert_array_equal(out.numpy(), theirs.detach().numpy())
    out.backward(ta.tensor(cotangent))
    theirs.backward(torch.tensor(cotangent))
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())
    np.testing.assert_allclose(v.grad.numpy(), tv.grad.numpy(), rtol=1e-14)
    filled = ta.tensor(data).index_fill(dim, ta.tensor(index, dtype=ta.int64), -2)
    np.testing.assert_array_equal(filled.numpy(), torch.tensor(data).index_fill(
        dim, torch.tensor(index, dtype=torch.int64), -2).numpy())


def test_index_fill_in_place_integer_and_zero_dim():
    torch = pytest.importorskip("torch")
    y = ta.tensor(_arr(2, 3), requires_grad=True)
    z = y * 1.0
    assert z.index_fill_(1, ta.tensor([1]), 5.0) is z
    assert z.grad_fn.name == "IndexFill"
    z.sum().backward()
    np.testing.assert_array_equal(y.grad.numpy(), [[1, 0, 1], [1, 0, 1]])
    ints = np.arange(6).reshape(2, 3)
    np.testing.assert_array_equal(
        ta.tensor(ints).index_fill(0, ta.tensor([1]), 2.7).numpy(),
        torch.tensor(ints).index_fill(0, torch.tensor([1]), 2.7).numpy())
    assert ta.tensor(1.0).index_fill(0, ta.tensor([0]), 2.0).item() == 2.0


def test_index_fill_gradcheck_and_gradgradcheck():
    x, v = ta.tensor(_arr(3, 4), requires_grad=True), ta.tensor(_arr(), requires_grad=True)
    index = ta.tensor([3, 0, -1])

    def fn(a, b):
        return ta.index_fill(a, 1, index, b)

    assert ta.gradcheck(fn, (x, v))
    assert ta.gradgradcheck(_mixed(fn), (x, v))


@pytest.mark.parametrize("index, value, error, match", [
    (ta.tensor([1], dtype=ta.int32), 1.0, DTypeError, "int64 index"),
    (ta.tensor([[1]]), 1.0, ShapeError, "0-d or 1-D"),
    (ta.tensor([4]), 1.0, IndexError, "index 4 is out of bounds for dim 1 with size 4"),
    (ta.tensor([-5]), 1.0, IndexError, "index -5 is out of bounds"),
    (ta.tensor([1]), ta.ones(1), ShapeError, "0-d tensor"),
    (ta.tensor([1]), "x", TypeError, "number or a 0-d tensor"),
    ([1], 1.0, TypeError, "index must be a Tensor"),
])
def test_index_fill_refuses_bad_arguments(index, value, error, match):
    with pytest.raises(error, match=match):
        ta.index_fill(ta.zeros(3, 4), 1, index, value)


# ---- nonzero -----------------------------------------------------------------------------------

@pytest.mark.parametrize("data", [
    np.array([[0.0, 1.5, 0.0], [np.nan, 0.0, -2.0]]),
    np.array([[[True, False], [False, True]], [[False, False], [True, True]]]),
    np.arange(-2, 4),
    np.zeros((2, 3), np.int32),
    np.array(5.0), np.array(0),
    np.zeros((0, 3)),
])
def test_nonzero_equals_pytorch(data):
    torch = pytest.importorskip("torch")
    ours, theirs = ta.nonzero(ta.tensor(data)), torch.nonzero(torch.tensor(data))
    assert ours.dtype == np.int64 and ours.shape == tuple(theirs.shape)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    ours_t = ta.tensor(data).nonzero(as_tuple=True)
    theirs_t = torch.nonzero(torch.tensor(data), as_tuple=True)
    assert len(ours_t) == len(theirs_t)
    for a, b in zip(ours_t, theirs_t):
        assert a.dtype == np.int64
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_nonzero_has_no_gradient_and_indexes_back():
    x = ta.tensor([[0.0, 2.0], [3.0, 0.0]], requires_grad=True)
    rows, cols = x.nonzero(as_tuple=True)
    assert not rows.requires_grad and x.nonzero().grad_fn is None
    assert x[rows, cols].tolist() == [2.0, 3.0]
    with pytest.raises(TypeError, match="input must be a Tensor"):
        ta.nonzero([1, 0])


# ---- unique ------------------------------------------------------------------------------------

@pytest.mark.parametrize("data, dim", [
    (np.array([3, 1, 3, 2, 1, 1]), None),
    (np.array([[2.0, np.nan, -0.0], [0.0, np.nan, 2.0]]), None),  # NaNs distinct, ±0 one
    (np.array([[True, False], [True, True]]), None),
    (np.array([[1, 2, 1], [1, 2, 1], [0, 5, 0]]), 0),
    (np.array([[1, 2, 1], [1, 2, 1], [0, 5, 0]]), 1),
    (np.array([[1, 2, 1], [1, 2, 1], [0, 5, 0]]), -1),
    (np.array([[[1.5, 0.0]], [[1.5, 0.0]], [[-1.0, 2.0]]]), 2),
    (np.array(7), None),
    (np.zeros((0, 3)), None),
])
def test_unique_values_inverse_and_counts_equal_pytorch(data, dim):
    torch = pytest.importorskip("torch")
    ours = ta.unique(ta.tensor(data), return_inverse=True, return_counts=True, dim=dim)
    theirs = torch.unique(torch.tensor(data), return_inverse=True, return_counts=True, dim=dim)
    for a, b in zip(ours, theirs):
        assert a.shape == tuple(b.shape) and str(a.dtype) == str(b.dtype).split(".")[-1]
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    values = ta.tensor(data).unique(dim=dim)  # the values alone, as a tensor method
    np.testing.assert_array_equal(values.numpy(), theirs[0].numpy())
    values, counts = ta.unique(ta.tensor(data), sorted=False, return_counts=True, dim=dim)
    np.testing.assert_array_equal(counts.numpy(), theirs[2].numpy())


def test_unique_refuses_a_backward_as_pytorch_does():
    torch = pytest.importorskip("torch")
    x = ta.tensor([3.0, 1.0, 3.0], requires_grad=True)
    values, inverse = ta.unique(x, return_inverse=True)
    assert values.requires_grad and not inverse.requires_grad
    with pytest.raises(RuntimeError, match="unique: the derivative of unique is not implemented"):
        values.sum().backward()
    t = torch.tensor([3.0, 1.0, 3.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="not implemented"):
        torch.unique(t).sum().backward()


@pytest.mark.parametrize("call, error, match", [
    (lambda: ta.unique(ta.tensor(5), dim=0), IndexError, "unique: a 0-d tensor has no dim"),
    (lambda: ta.unique(ta.ones(2, 3), dim=2), IndexError, "unique: dim 2 is out of range"),
    (lambda: ta.unique(ta.ones(2), return_counts=1), TypeError,
     "unique: return_counts must be a bool"),
    (lambda: ta.unique([1, 2]), TypeError, "unique: input must be a"),
])
def test_unique_refuses_bad_arguments(call, error, match):
    with pytest.raises(error, match=match):
        call()


# ---- roll --------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape, shifts, dims", [
    ((5,), 2, None), ((2, 3, 4), -7, None), ((2, 3, 4), 1, 2), ((2, 3, 4), (1, -2), (0, 2)),
    ((2, 3, 4), (1, 1), (-1, -1)), ((2, 3, 4), 13, 1), ((3, 0), 1, 0), ((), 3, None),
])
def test_roll_values_and_gradient_equal_pytorch(shape, shifts, dims):
    torch = pytest.importorskip("torch")
    data = RNG.standard_normal(shape)
    x, t = ta.tensor(data, requires_grad=True), torch.tensor(data, requires_grad=True)
    ours, theirs = ta.roll(x, shifts, dims), torch.roll(t, shifts, dims)
    np.testing.assert_array_equal(ours.numpy(), theirs.detach().numpy())
    cotangent = RNG.standard_normal(shape)
    ours.backward(ta.tensor(cotangent))
    theirs.backward(torch.tensor(cotangent))
    np.testing.assert_array_equal(x.grad.numpy(), t.grad.numpy())


@pytest.mark.parametrize("call, error, match", [
    (lambda: ta.roll(ta.ones(4), (1, 2)), ShapeError, "roll: without dims, shifts must be one"),
    (lambda: ta.roll(ta.ones(4), (1, 2), 0), ShapeError,
     r"roll: shifts and dims must have the same length, got shifts \(1, 2\) and dims 0"),
    (lambda: ta.roll(ta.ones(4), 1, 1), IndexError, "roll: dim 1 is out of range"),
    (lambda: ta.roll(ta.tensor(1.0), 1, 0), IndexError, "roll: a 0-d tensor has no dims"),
    (lambda: ta.roll(ta.ones(4), 1.5), TypeError, "roll: shifts must be an int"),
])
def test_roll_refuses_bad_arguments(call, error, match):
    with pytest.raises(error, match=match):
        call()


# ---- the public surface ------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["sort", "argsort", "scatter", "scatter_add", "index_fill",
                                  "nonzero", "unique", "roll"])
def test_new_ops_are_exported_and_are_tensor_methods(name):
    assert name in ta.__all__ and name in ta.ops.__all__
    assert getattr(ta, name) is getattr(ta.ops, name)
    assert callable(getattr(ta.Tensor, name))
    if name in ("scatter", "scatter_add", "index_fill"):
        assert callable(getattr(ta.Tensor, name + "_"))


def test_topk_uses_the_sort_order_of_pytorch_for_nan_and_inf():
    torch = pytest.importorskip("torch")
    data = np.array([3.0, np.nan, 1.0, np.inf, -1.0, -np.inf])
    for largest in (True, False):
        ours = ta.topk(ta.tensor(data), 3, largest=largest)
        theirs = torch.topk(torch.tensor(data), 3, largest=largest)
        np.testing.assert_array_equal(ours.values.numpy(), theirs.values.numpy())
        np.testing.assert_array_equal(ours.indices.numpy(), theirs.indices.numpy())
    assert ta.topk(ta.tensor([True, False, True]), 2).indices.tolist() == [0, 2]

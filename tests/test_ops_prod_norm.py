"""``prod``, ``cumprod``, the norms (``norm``, ``ta.linalg``, ``F.normalize``) and the
reductions, comparisons and masks written as one tensor-op backward rule each: float64
gradcheck and gradgradcheck with random cotangents, PyTorch's values, dtypes and first and
second derivatives (skipped without torch), zeros (where ``prod``, ``cumprod`` and the norms
have their special gradients), and the errors for bad arguments."""

from __future__ import annotations

import math

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.ops import reduce as reduce_ops
from tinyattn.ops.compare import Maximum
from tinyattn.ops.masking import MaskedFill, Triangle, Where
from tinyattn.ops.reduce import (
    CumProd,
    CumSum,
    Extremum,
    LogSumExp,
    Mean,
    Norm,
    Prod,
    Sum,
    Var,
)

F = ta.F
RNG = np.random.default_rng(2024)
INF = math.inf


def _arr(*shape, low=-1.5, high=1.5):
    return RNG.uniform(low, high, shape)


def _away_from_zero(*shape):
    """Values in ±[0.3, 1.5] drawn at random: no ties of |x|, nor of sums of |x| (a grid of
    magnitudes would tie sums, where a maximum's gradient jumps)."""
    size = int(np.prod(shape))
    magnitudes = RNG.uniform(0.3, 1.5, size)
    return (magnitudes * RNG.choice([-1.0, 1.0], size)).reshape(shape)


def _with_zeros(array, *positions):
    out = np.array(array, dtype=np.float64)
    for p in positions:
        out[p] = 0.0
    return out


X = _away_from_zero(3, 4)
ONE_ZERO = _with_zeros(X, (0, 1))  # row 0 and column 1 have one zero
TWO_ZEROS = _with_zeros(X, (1, 0), (1, 2), (0, 3))  # row 1 has two zeros
ZERO_ROW = _with_zeros(X, (2, 0), (2, 1), (2, 2), (2, 3))
CUBE = _with_zeros(_away_from_zero(2, 3, 4), (0, 1, 2), (1, 0, 0), (1, 2, 0))
ONE_PER_ROW = _with_zeros(_away_from_zero(2, 3, 4), (0, 0, 1), (0, 1, 3), (1, 2, 2))

# name -> (function of (module, *tensors), input arrays). ``module`` is tinyattn or torch, so
# that one expression runs on both. Every case is smooth at its inputs (zeros only where the
# function is a polynomial there, as prod is).
CASES = {
    "prod-all": (lambda m, a: m.prod(a), [X]),
    "prod-all-one-zero": (lambda m, a: m.prod(a), [ONE_ZERO]),
    "prod-all-two-zeros": (lambda m, a: m.prod(a), [TWO_ZEROS]),
    "prod-dim1": (lambda m, a: m.prod(a, 1), [X]),
    "prod-dim1-one-zero": (lambda m, a: m.prod(a, 1), [ONE_ZERO]),
    "prod-dim1-two-zeros": (lambda m, a: m.prod(a, 1), [TWO_ZEROS]),
    "prod-dim0-keepdim-two-zeros": (lambda m, a: m.prod(a, 0, keepdim=True), [TWO_ZEROS]),
    "prod-dim-1-times-input": (lambda m, a: m.prod(a, -1).unsqueeze(-1) * a, [TWO_ZEROS]),
    "prod-3d-dim1-zeros": (lambda m, a: m.prod(a, 1), [CUBE]),
    "prod-3d-dim0-zeros": (lambda m, a: a.prod(0) * a.sum(0), [CUBE]),
    "prod-3d-one-zero-per-row": (lambda m, a: a.prod(-1).unsqueeze(-1) * a, [ONE_PER_ROW]),
    "prod-3d-one-zero-per-column-keepdim": (lambda m, a: a.prod(1, keepdim=True) ** 2,
                                            [ONE_PER_ROW]),
    "prod-0d": (lambda m, a: m.prod(a) * a, [np.array(-1.3)]),
    "prod-size-one-dim": (lambda m, a: a.prod(1) ** 2, [X[:, :1]]),
    "cumprod-dim1": (lambda m, a: m.cumprod(a, 1), [X]),
    "cumprod-dim1-one-zero": (lambda m, a: m.cumprod(a, 1), [ONE_ZERO]),
    "cumprod-dim1-two-zeros": (lambda m, a: a.cumprod(1) * a, [TWO_ZEROS]),
    "cumprod-zero-row": (lambda m, a: m.cumprod(a, -1), [ZERO_ROW]),
    "cumprod-dim0-two-zeros": (lambda m, a: m.cumprod(a, 0) ** 2, [TWO_ZEROS]),
    "cumprod-3d-dim1-zeros": (lambda m, a: a.cumprod(1) * a.sum(), [CUBE]),
    "cumprod-3d-one-zero-per-row": (lambda m, a: m.cumprod(a, -1), [ONE_PER_ROW]),
    "cumprod-0d": (lambda m, a: m.cumprod(a, 0) * a, [np.array(-1.3)]),
    "norm-fro": (lambda m, a: m.norm(a), [X]),
    "norm-fro-dim": (lambda m, a: m.norm(a, dim=1) * a.sum(), [X]),
    "norm-p3-dims": (lambda m, a: m.norm(a, 3, dim=(0, 2)), [CUBE + 0.05]),
    "norm-method-keepdim": (lambda m, a: a.norm(1.5, 0, keepdim=True) * a, [X]),
    "linalg.norm": (lambda m, a: m.linalg.norm(a), [_away_from_zero(2, 3, 2)]),
    "linalg.norm-vector-dim": (lambda m, a: m.linalg.norm(a, dim=-1), [X]),
    "linalg.norm-1d-ord": (lambda m, a: m.linalg.norm(a, 3.5), [X[0]]),
    "normalize": (lambda m, a: _normalize(m)(a), [X]),
    "normalize-p1-dim0": (lambda m, a: _normalize(m)(a, 1.0, 0), [X]),
    "normalize-3d-dim-1": (lambda m, a: _normalize(m)(a, dim=-1) * a, [_away_from_zero(2, 2, 3)]),
}
VECTOR_ORDERS = [2, 1, INF, -INF, 3, 1.5, 0.5, -1, -2.5, 4]
for _ord in VECTOR_ORDERS:
    CASES[f"vector_norm-{_ord:g}-dim1"] = (
        lambda m, a, o=_ord: m.linalg.vector_norm(a, o, dim=1), [X])
    CASES[f"vector_norm-{_ord:g}-all-keepdim"] = (
        lambda m, a, o=_ord: m.linalg.vector_norm(a, o, keepdim=True) * a, [X])
for _ord in ["fro", 1, -1, INF, -INF]:
    CASES[f"matrix_norm-{_ord}"] = (lambda m, a, o=_ord: m.linalg.norm(a, o), [X])
    CASES[f"matrix_norm-{_ord}-dims-2-0-keepdim"] = (
        lambda m, a, o=_ord: m.linalg.matrix_norm(a, o, dim=(2, 0), keepdim=True),
        [_away_from_zero(2, 3, 4)])
    CASES[f"matrix_norm-{_ord}-dims-0-2"] = (
        lambda m, a, o=_ord: m.linalg.norm(a, o, dim=(0, 2)), [_away_from_zero(2, 3, 4)])

# The ops converted to one tensor-op rule, where the older tests do not reach.
CONVERTED = {
    "logsumexp": (lambda m, a: m.logsumexp(a, 1) * a.sum(), [X]),
    "logsumexp-dims-keepdim": (lambda m, a: m.logsumexp(a, (0, 2), keepdim=True) * a,
                               [_arr(2, 3, 2)]),
    "cumsum": (lambda m, a: a.cumsum(1) * a, [X]),
    "cumsum-dim0": (lambda m, a: m.cumsum(a, 0) ** 2, [_arr(3, 2, 2)]),
    "amin-ties": (lambda m, a: a.amin(1) * a.sum(), [np.array([[1., -1., -1.], [2., 0., 3.]])]),
    "max-all-ties": (lambda m, a: a.max() * a, [np.array([[1., 3., 3.], [2., 0., -1.]])]),
    "min-dim": (lambda m, a: a.min(0).values * a.sum(), [X]),
    "var-correction0": (lambda m, a: a.var(0, correction=0) * a, [X]),
    "std-keepdim": (lambda m, a: a.std((0, 1), keepdim=True) * a, [_arr(2, 3, 2)]),
    "mean-all": (lambda m, a: a.mean() * a, [X]),
    "sum-dims": (lambda m, a: a.sum((0, 2)) ** 2, [_arr(2, 3, 2)]),
    "minimum-ties-broadcast": (lambda m, a, b: m.minimum(a, b) * a,
                               [np.array([[1., 2., 3.], [0., 5., -1.]]), np.array([1., 5., 0.])]),
    "maximum-scalar": (lambda m, a: m.maximum(a, m.tensor(0.25, dtype=m.float64)) * a, [X]),
    "where-broadcast": (lambda m, a, b: m.where(a > 0, a, b) * b, [X, X[:1] * 0.5]),
    "where-scalar-first": (lambda m, a: m.where(a > 0, 0.5, a) * a, [X]),
    "masked_fill-broadcast-mask": (lambda m, a: a.masked_fill(m.tensor(X[0] > 0), 0.5) * a,
                                   [X]),
    "tril": (lambda m, a: m.tril(a, -1) * a, [X]),
    "triu-batched": (lambda m, a: m.triu(a, 1) ** 2, [_arr(2, 3, 3)]),
}


TIES = {"amin-ties", "max-all-ties", "minimum-ties-broadcast"}
"""Cases at a tie, where the gradient is a subgradient: finite differences cannot check it."""
SMOOTH = sorted(CASES) + sorted(set(CONVERTED) - TIES)


def _normalize(m):
    return m.nn.functional.normalize if m is not ta else F.normalize


def _inputs(arrays):
    return [ta.tensor(a, dtype=ta.float64, requires_grad=True) for a in arrays]


def _run(fn):
    return lambda *tensors: fn(ta, *tensors)


# ---- finite differences ---------------------------------------------------------------------

@pytest.mark.parametrize("name", SMOOTH)
def test_gradients_match_finite_differences(name):
    fn, arrays = {**CASES, **CONVERTED}[name]
    assert ta.gradcheck(_run(fn), _inputs(arrays))


@pytest.mark.parametrize("name", SMOOTH)
def test_second_derivatives_match_finite_differences(name):
    fn, arrays = {**CASES, **CONVERTED}[name]
    assert ta.gradgradcheck(_run(fn), _inputs(arrays), atol=1e-5, rtol=1e-4)


def test_finite_differences_catch_a_wrong_prod_gradient(monkeypatch):
    """The checks above can fail: a prod whose rule forgets the zero case is caught."""
    def no_zero_case(ctx, grad):
        x, y = ctx.saved_tensors
        return grad * (y / x)

    monkeypatch.setattr(Prod, "backward", staticmethod(no_zero_case))
    with pytest.raises(ta.GradcheckError):
        ta.gradcheck(_run(CASES["prod-all-one-zero"][0]), _inputs([ONE_ZERO]))


# ---- PyTorch ----------------------------------------------------------------------------------

def _numpy(t):
    if t is None:
        return None
    t = t.detach()
    if type(t).__module__.startswith("torch"):
        import torch

        return (t + torch.zeros(t.shape, dtype=t.dtype)).numpy()  # a ZeroTensor has no data
    return t.numpy()


def _derivatives(m, fn, arrays, grad_out_seed=0):
    """Value, first derivatives for a random cotangent, and the derivative of their inner
    product with a random direction (the second derivatives), with ``m``'s autograd."""
    rng = np.random.default_rng(grad_out_seed)
    xs = [m.tensor(a, dtype=m.float64, requires_grad=True) for a in arrays]
    out = fn(m, *xs)
    cotangent = m.tensor(rng.standard_normal(tuple(out.shape)))
    firsts = m.autograd.grad(out, xs, cotangent, create_graph=True, allow_unused=True)
    directions = [m.tensor(rng.standard_normal(a.shape)) for a in arrays]
    terms = [(g * d).sum() for g, d in zip(firsts, directions)
             if g is not None and g.requires_grad]
    seconds = [None] * len(xs)
    if terms:
        seconds = m.autograd.grad(sum(terms), xs, allow_unused=True)
    return (_numpy(out), [_numpy(g) for g in firsts], [_numpy(g) for g in seconds])


def _assert_close(ours, theirs, what):
    if ours is None or theirs is None:  # no gradient on one side: it must be zero on the other
        other = theirs if ours is None else ours
        assert other is None or not np.any(other), what
        return
    np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-11, equal_nan=True,
                               err_msg=what)


@pytest.mark.parametrize("name", sorted(CASES) + sorted(CONVERTED) + ["vector_norm-0"])
def test_values_and_first_and_second_derivatives_equal_pytorch(name):
    torch = pytest.importorskip("torch")
    if name == "vector_norm-0":
        fn, arrays = (lambda m, a: m.linalg.vector_norm(a, 0, dim=1) * a.sum(), [ONE_ZERO])
    else:
        fn, arrays = {**CASES, **CONVERTED}[name]
    ours = _derivatives(ta, fn, arrays)
    theirs = _derivatives(torch, fn, arrays)
    _assert_close(ours[0], theirs[0], "value")
    for i, (a, b) in enumerate(zip(ours[1], theirs[1])):
        _assert_close(a, b, f"first derivative of input {i}")
    for i, (a, b) in enumerate(zip(ours[2], theirs[2])):
        _assert_close(a, b, f"second derivative of input {i}")


ZERO_CASES = {
    "norm-2-zero-row": lambda m, a: m.linalg.vector_norm(a, 2, dim=1),
    "norm-fro-all-zero": lambda m, a: m.norm(a * 0),
    "norm-3-zero-row": lambda m, a: m.norm(a, 3, dim=1),
    "norm-1.5-zero-row": lambda m, a: m.norm(a, 1.5, dim=1),
    "norm-1-zero-row": lambda m, a: m.norm(a, 1, dim=1),
    "norm-inf-zero-row": lambda m, a: m.linalg.vector_norm(a, INF, dim=1),
    "norm-0.5-zero-row": lambda m, a: m.norm(a, 0.5, dim=1),
    "norm--1-zero-row": lambda m, a: m.norm(a, -1, dim=1),
    "matrix-fro-zero": lambda m, a: m.linalg.matrix_norm(a * 0),
    "normalize-zero-row": lambda m, a: _normalize(m)(a) * a,
    "normalize-zero-row-dim0": lambda m, a: _normalize(m)(a.mT, dim=0),
}


@pytest.mark.parametrize("name", sorted(ZERO_CASES))
def test_norm_gradients_at_a_zero_vector_equal_pytorch(name):
    torch = pytest.importorskip("torch")
    fn = ZERO_CASES[name]
    ours = _derivatives(ta, fn, [ZERO_ROW])
    theirs = _derivatives(torch, fn, [ZERO_ROW])
    _assert_close(ours[0], theirs[0], "value")
    _assert_close(ours[1][0], theirs[1][0], "first derivative")
    _assert_close(ours[2][0], theirs[2][0], "second derivative")


@pytest.mark.parametrize("ord", [2, 3, 1.5, 0.5, 1, INF, -1])
def test_the_gradient_at_a_zero_vector_is_zero_not_nan(ord):
    """PyTorch's subgradient (its second derivative there is PyTorch's too, NaN for the 2-norm:
    see test_norm_gradients_at_a_zero_vector_equal_pytorch)."""
    for create_graph in (False, True):
        x = ta.zeros(2, 3, dtype=ta.float64, requires_grad=True)
        (g,) = ta.autograd.grad(ta.linalg.vector_norm(x, ord, dim=1).sum(), x,
                                create_graph=create_graph)
        assert np.array_equal(g.numpy(), np.zeros((2, 3)))
    y = ta.zeros(2, 3, requires_grad=True)
    F.normalize(y, ord if ord > 0 else 2).sum().backward()
    assert np.isfinite(y.grad.numpy()).all()


def test_the_zero_norm_has_no_gradient_as_in_pytorch():
    x = ta.tensor(ONE_ZERO, requires_grad=True)
    ta.linalg.vector_norm(x, 0).backward()
    assert x.grad is None
    with pytest.raises(RuntimeError, match="not used"):
        ta.autograd.grad(ta.linalg.vector_norm(x, 0), x)
    assert ta.linalg.vector_norm(x, 0).item() == 11.0


VALUE_CASES = {
    "cumprod-float32": lambda m: m.cumprod(m.tensor([[1.5, -2.0, 0.1], [0.5, 4.0, 3.0]]), 1),
    "cumprod-int32": lambda m: m.cumprod(m.tensor([[1, 2, 3], [4, 5, 6]], dtype=m.int32), 0),
    "cumprod-bool": lambda m: m.tensor([True, True, False, True]).cumprod(0),
    "cumprod-dtype-float64": lambda m: m.cumprod(m.arange(1, 5), 0, dtype=m.float64),
    "cumprod-nan-inf": lambda m: m.cumprod(m.tensor([[m.nan, 1.0], [m.inf, 0.0]]), 1),
    "cumprod-empty-dim": lambda m: m.cumprod(m.zeros(0, 3), 0),
    "prod-float32": lambda m: m.prod(m.tensor([[1.5, -2.0], [0.5, 4.0]]), 0),
    "prod-int32": lambda m: m.prod(m.tensor([[1, 2, 3], [4, 5, 6]], dtype=m.int32), 1),
    "prod-int-all": lambda m: m.prod(m.arange(1, 6)),
    "prod-bool": lambda m: m.prod(m.tensor([True, True, False])),
    "prod-uint8": lambda m: m.tensor([200, 3], dtype=m.uint8).prod(),
    "prod-dtype-float64": lambda m: m.prod(m.arange(1, 5), 0, dtype=m.float64),
    "prod-dtype-float64-float32": lambda m: m.prod(m.tensor([1.5, 3.0]), 0, True,
                                                  dtype=m.float64),
    "prod-empty-dim": lambda m: m.prod(m.zeros(0, 3), 0),
    "prod-empty-all": lambda m: m.prod(m.zeros(2, 0)),
    "prod-0d": lambda m: m.tensor(3.5).prod(0, keepdim=True),
    "prod-nan-inf": lambda m: m.prod(m.tensor([[m.nan, 1.0], [m.inf, 0.0]]), 1),
    "norm-float32": lambda m: m.norm(m.tensor([[3.0, 4.0], [1.0, -1.0]]), dim=1),
    "norm-p-none": lambda m: m.norm(m.tensor([3.0, 4.0]), p=None),
    "norm-dtype": lambda m: m.norm(m.tensor([3.0, 4.0]), 2, 0, False, dtype=m.float64),
    "norm-fro-2-dims": lambda m: m.norm(m.ones(2, 3, 4), "fro", dim=(0, 2), keepdim=True),
    "norm-0d": lambda m: m.norm(m.tensor(-3.0)),
    "norm-empty": lambda m: m.norm(m.zeros(0, 2)),
    "norm-0-empty": lambda m: m.linalg.vector_norm(m.zeros(0), 0),
    "norm-inf-empty-kept-dim": lambda m: m.linalg.vector_norm(m.zeros(2, 0), INF, dim=0),
    "norm-neg-with-zero": lambda m: m.linalg.vector_norm(m.tensor([0.0, -2.0]), -2),
    "norm-inf-nan": lambda m: m.linalg.vector_norm(m.tensor([1.0, m.nan, -3.0]), INF),
    "norm-large-p": lambda m: m.linalg.vector_norm(m.tensor([1.0, -2.0, 0.5]), 7),
    "linalg.norm-keepdim": lambda m: m.linalg.norm(m.ones(2, 3, 4), keepdim=True),
    "linalg.norm-int-dim": lambda m: m.linalg.norm(m.ones(2, 3), 1, dim=0),
    "linalg.norm-dims-reversed": lambda m: m.linalg.norm(m.arange(6.0).reshape(2, 3), 1,
                                                        dim=(1, 0)),
    "linalg.matrix_norm-batch": lambda m: m.linalg.matrix_norm(
        m.arange(24.0).reshape(2, 3, 4) - 10, -INF),
    "normalize-float32": lambda m: _normalize(m)(m.tensor([[3.0, 4.0], [0.0, 0.0]])),
    "normalize-eps": lambda m: _normalize(m)(m.tensor([[3e-3, 4e-3]]), eps=1.0),
}


@pytest.mark.parametrize("name", sorted(VALUE_CASES))
def test_values_and_dtypes_equal_pytorch(name):
    torch = pytest.importorskip("torch")
    ours, theirs = VALUE_CASES[name](ta), VALUE_CASES[name](torch)
    assert ours.shape == tuple(theirs.shape)
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6, equal_nan=True)


def test_prod_example_from_the_docs():
    x = ta.tensor([[2.0, 0.0, 3.0], [1.0, 2.0, 3.0], [0.0, 5.0, 0.0]], requires_grad=True)
    y = x.prod(1)
    assert y.tolist() == [0.0, 6.0, 0.0]
    y.sum().backward()
    assert x.grad.tolist() == [[0.0, 6.0, 0.0], [6.0, 3.0, 2.0], [0.0, 0.0, 0.0]]
    assert x.grad.dtype == np.float32


def test_prod_in_another_dtype_sends_the_gradient_back_in_the_inputs_dtype():
    x = ta.tensor([1.5, 2.0, -3.0], requires_grad=True)
    y = x.prod(dtype=ta.float64)
    assert y.dtype == np.float64
    y.backward()
    assert x.grad.dtype == np.float32
    np.testing.assert_allclose(x.grad.numpy(), [-6.0, -4.5, 3.0])


def test_integer_prod_and_norm_of_ints_record_nothing_or_refuse():
    assert not ta.prod(ta.tensor([1, 2, 3])).requires_grad
    with pytest.raises(RuntimeError, match="floating point"):
        ta.norm(ta.tensor([3, 4]))


# ---- the fast path of prod and its rule --------------------------------------------------------

def _products_of_the_others(array, dim):
    """``Π_{j≠i} x_j`` along ``dim`` (all elements when None), element by element."""
    moved = np.moveaxis(array, dim, -1) if dim is not None else array.reshape(1, -1)
    out = np.empty_like(moved)
    for i in range(moved.shape[-1]):
        out[..., i] = np.prod(np.delete(moved, i, axis=-1), axis=-1)
    return np.moveaxis(out, -1, dim) if dim is not None else out.reshape(array.shape)


@pytest.mark.parametrize("array, dim", [(ONE_ZERO, None), (ONE_ZERO, 0), (TWO_ZEROS, 1),
                                        (TWO_ZEROS, None), (CUBE, 1), (CUBE, 2), (ZERO_ROW, 1),
                                        (ONE_PER_ROW, 2), (ONE_PER_ROW, 0), (X, 0)])
def test_the_first_order_fast_path_of_prod_equals_the_rule(array, dim, monkeypatch):
    """With zeros, a plain backward takes the fast path and a recorded one the rule (the
    products of the others, multiplied out where a slice has two zeros): all give the gradient
    ``v ⊙ Π_{j≠i} x_j``."""
    calls = []
    rule = reduce_ops._products_of_others
    monkeypatch.setattr(reduce_ops, "_products_of_others",
                        lambda *args: calls.append(args) or rule(*args))
    v = np.random.default_rng(3).standard_normal(np.prod(array, axis=dim, keepdims=True).shape)
    expected = v * _products_of_the_others(array, dim)
    two_zeros = bool(((array == 0).sum(axis=dim) >= 2).any())
    for create_graph in (False, True):
        x = ta.tensor(array, requires_grad=True)
        (g,) = ta.autograd.grad(ta.prod(x, dim, keepdim=True), x, ta.tensor(v),
                                create_graph=create_graph)
        np.testing.assert_allclose(g.numpy(), expected, rtol=1e-12, atol=1e-15)
        assert len(calls) == (create_graph and two_zeros)  # only a recorded graph multiplies out


def test_the_fast_path_of_prod_is_first_order_only():
    """Its own derivative would be wrong at a zero: a recorded backward never uses it."""
    x = ta.tensor([0.0, 2.0, 3.0], dtype=ta.float64, requires_grad=True)
    (g,) = ta.autograd.grad(x.prod(), x, create_graph=True)
    assert g.tolist() == [6.0, 0.0, 0.0]
    (h,) = ta.autograd.grad(g[0], x)  # d(x1·x2)/dx: (0, x2, x1)
    assert h.tolist() == [0.0, 3.0, 2.0]


# ---- the first-order path of cumprod and its rule --------------------------------------------

def _cumprod_gradient(array, g, dim):
    """``dx_j = Σ_{i ≥ j} g_i Π_{k ≤ i, k ≠ j} x_k`` along ``dim``, term by term."""
    x, v = np.moveaxis(array, dim, -1), np.moveaxis(g, dim, -1)
    out = np.zeros_like(x)
    n = x.shape[-1]
    for j in range(n):
        for i in range(j, n):
            others = np.delete(x[..., :i + 1], j, axis=-1)
            out[..., j] += v[..., i] * np.prod(others, axis=-1)
    return np.moveaxis(out, -1, dim)


@pytest.mark.parametrize("array, dim", [(ONE_ZERO, 1), (ONE_ZERO, 0), (TWO_ZEROS, 1),
                                        (TWO_ZEROS, 0), (ZERO_ROW, 1), (CUBE, 1), (CUBE, 2),
                                        (ONE_PER_ROW, 2), (ONE_PER_ROW, 0), (X, 1)])
def test_the_first_order_path_of_cumprod_and_its_rule_give_the_sum_of_products(
        array, dim, monkeypatch):
    """With zeros, a plain backward takes the masked path and a recorded one the polynomial
    rule: both give every ``Σ_{i ≥ j} g_i Π_{k ≤ i, k ≠ j} x_k``, summed out term by term."""
    calls = []
    rule = reduce_ops._cumprod_gradient_by_rows
    monkeypatch.setattr(reduce_ops, "_cumprod_gradient_by_rows",
                        lambda *args: calls.append(args) or rule(*args))
    v = np.random.default_rng(5).standard_normal(array.shape)
    expected = _cumprod_gradient(array, v, dim)
    for create_graph in (False, True):
        x = ta.tensor(array, requires_grad=True)
        (g,) = ta.autograd.grad(ta.cumprod(x, dim), x, ta.tensor(v),
                                create_graph=create_graph)
        np.testing.assert_allclose(g.numpy(), expected, rtol=1e-12, atol=1e-15)
        assert len(calls) == (create_graph and bool((array == 0).any()))


def test_the_first_order_path_of_cumprod_is_first_order_only():
    """Masks cut the derivative of ``dx_j`` (``j`` after a zero at ``z``) with respect to
    ``x_z``: a recorded backward keeps it (``Σ_{i ≥ j} g_i Π_{k ≤ i, k ≠ j, z} x_k``)."""
    x = ta.tensor([2.0, 0.0, 3.0], dtype=ta.float64, requires_grad=True)
    (g,) = ta.autograd.grad(x.cumprod(0), x, ta.tensor([1.0, 1.0, 1.0], dtype=ta.float64),
                            create_graph=True)
    assert g.tolist() == [1.0, 8.0, 0.0]  # 1 + x1 + x1 x2, x0 + x0 x2, x0 x1
    (h,) = ta.autograd.grad(g[2], x)  # d(x0 x1)/dx
    assert h.tolist() == [0.0, 2.0, 0.0]


# ---- one rule per op, with its formula ---------------------------------------------------------

FUNCTIONS = [Sum, Mean, Var, Prod, Extremum, LogSumExp, CumSum, CumProd, Norm, Maximum, Where,
             MaskedFill, Triangle]


@pytest.mark.parametrize("fn", FUNCTIONS, ids=lambda f: f.__name__)
def test_each_op_has_one_tensor_rule_and_a_formula(fn):
    assert not hasattr(fn, "differentiable_backward")

    assert callable(fn.formula)
    assert "``;" in fn.__doc__.replace("\n", " ") or "; ``d" in fn.__doc__.replace("\n", " ")


def _node(tensor):
    node = tensor.grad_fn
    assert node is not None
    return node


def test_formulas_of_the_moved_rules():
    x = ta.randn(2, 3, requires_grad=True)
    b = ta.randn(3, requires_grad=True)
    mask = x.detach() > 0
    assert Sum.formula(_node(x.sum(0)), 0, "g", ["X"], "y") == "broadcast(g)"
    assert Mean.formula(_node(x.mean()), 0, "g", ["X"], "y") == "broadcast(g) / n"
    assert MaskedFill.formula(_node(x.masked_fill(mask, 0.0)), 0, "g", ["X"], "y") == "g ⊙ ¬M"
    node = _node(ta.where(mask, x, b))
    assert Where.formula(node, 0, "g", ["X", "B"], "y") == "g ⊙ [cond]"
    assert Where.formula(node, 1, "g", ["X", "B"], "y") == "sum_to(g ⊙ [¬cond], (3))"
    assert Where.formula(node, 0, "g + h", ["X", "B"], "y") == "(g + h) ⊙ [cond]"


def test_formulas_of_the_other_rules():
    x = ta.randn(2, 3, requires_grad=True)
    b = ta.randn(2, 1, requires_grad=True)
    assert Norm.formula(_node(x.norm()), 0, "g", ["X"], "n") == "broadcast(g) ⊙ X / n"
    assert Norm.formula(_node(x.norm(1)), 0, "g", ["X"], "n") == "broadcast(g) ⊙ sign(X)"
    assert "^2 / n^2" in Norm.formula(_node(x.norm(3)), 0, "g", ["X"], "n")
    assert Prod.formula(_node(x.prod(1)), 0, "g", ["X"], "y") == "broadcast(g) ⊙ Π_(j≠i) Xⱼ"
    assert CumProd.formula(_node(x.cumprod(1)), 0, "g", ["X"], "y") == \
        "flip(cumsum(flip(g ⊙ y))) / X"
    assert Maximum.formula(_node(ta.maximum(x, b)), 1, "g", ["X", "B"], "y") == \
        "sum_to(g ⊙ ([B > X] + ½ [B = X]), (2, 1))"
    assert "<" in Maximum.formula(_node(ta.minimum(x, b)), 0, "g", ["X", "B"], "y")
    assert Triangle.formula(_node(x.tril(-1)), 0, "g", ["X"], "y") == "tril(g, -1)"
    assert LogSumExp.formula(_node(x.logsumexp(1)), 0, "g", ["X"], "y") == \
        "broadcast(g) ⊙ e^(X − y)"


# ---- the lean paths of sum, mean, where and masked_fill -----------------------------------------

@pytest.mark.parametrize("dim", [None, 0, -1, (0, 2), (2, 0), [1], (), (-1, 0)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_sum_and_mean_agree_with_numpy_for_every_form_of_dim(dim, keepdim):
    data = _arr(2, 3, 4).astype(np.float32)
    x = ta.tensor(data)
    axes = None if dim is None or dim == () else tuple(dim) if isinstance(dim, (tuple, list)) \
        else dim
    np.testing.assert_allclose(x.sum(dim, keepdim).numpy(), data.sum(axes, keepdims=keepdim),
                               rtol=1e-6)
    np.testing.assert_allclose(x.mean(dim, keepdim).numpy(), data.mean(axes, keepdims=keepdim),
                               rtol=1e-6)
    assert x.sum(dim, keepdim).dtype == np.float32


@pytest.mark.parametrize("dim", [3, -4, (0, 3), (1, 1), (0, -3)])
def test_sum_and_mean_refuse_bad_dims(dim):
    x = ta.ones(2, 3, 4)
    for op in (ta.sum, ta.mean):
        with pytest.raises((IndexError, ValueError)):
            op(x, dim)


def test_where_fast_path_equals_the_general_path():
    cond = ta.tensor(X > 0)
    a = ta.tensor(X, requires_grad=True)
    for other in (0.0, 2, ta.tensor(-X), ta.tensor(1.5, dtype=ta.float64)):
        fast = ta.where(cond, a, other)
        general = ta.where(cond.numpy(), a, other)  # a numpy condition takes the general path
        np.testing.assert_array_equal(fast.numpy(), general.numpy())
        assert fast.dtype == general.dtype == np.float64
        flipped = ta.where(cond, other, a)
        np.testing.assert_array_equal(flipped.numpy(), np.where(X > 0, np.asarray(
            other.numpy() if isinstance(other, ta.Tensor) else other), X))
    with pytest.raises(ValueError, match="not broadcastable"):
        ta.where(cond, a, ta.ones(2, 4, dtype=ta.float64))
    with pytest.raises(ValueError, match="not broadcastable"):
        ta.where(ta.tensor([True, False]), a, 0.0)
    assert ta.where(cond, ta.ones(3, 4, dtype=ta.float32), 1.5).dtype == np.float32
    assert ta.where(cond, ta.arange(12).reshape(3, 4), 1.5).dtype == np.float32


def test_masked_fill_fast_path_equals_the_general_path():
    x = ta.tensor(X, requires_grad=True)
    mask = ta.tensor(X > 0)
    fast = x.masked_fill(mask, -2)
    general = x.masked_fill(mask.numpy(), ta.tensor(-2.0))
    np.testing.assert_array_equal(fast.numpy(), general.numpy())
    np.testing.assert_array_equal(fast.numpy(), np.where(X > 0, -2.0, X))
    (g,) = ta.autograd.grad(fast.sum(), x)
    np.testing.assert_array_equal(g.numpy(), np.where(X > 0, 0.0, 1.0))
    wide = x.masked_fill(ta.tensor(np.array([[True], [False], [True]])), 0.0)
    np.testing.assert_array_equal(wide.numpy(), np.where([[True], [False], [True]], 0.0, X))
    with pytest.raises(ValueError, match="overflow"):
        ta.arange(3).masked_fill(ta.tensor([True, False, True]), math.inf)
    with pytest.raises(TypeError, match="boolean"):
        x.masked_fill(ta.ones(3, 4), 0.0)


def test_nan_routing_of_max_and_amax_is_pytorchs():
    torch = pytest.importorskip("torch")
    data = np.array([[1.0, np.nan, 3.0], [2.0, 5.0, 5.0]])
    for op in ("max", "amax"):
        grads = []
        for m in (ta, torch):
            x = m.tensor(data, requires_grad=True)
            (x.max() if op == "max" else x.amax(1).sum()).backward()
            grads.append(_numpy(x.grad))
        np.testing.assert_array_equal(grads[0], grads[1])


@pytest.mark.filterwarnings("ignore::UserWarning")  # torch: "degrees of freedom is <= 0"
def test_var_of_one_element_has_pytorchs_nan_gradient():
    torch = pytest.importorskip("torch")
    grads = []
    for m in (ta, torch):
        x = m.tensor([[1.5], [2.0]], dtype=m.float64, requires_grad=True)
        x.var(1).sum().backward()
        grads.append(_numpy(x.grad))
    np.testing.assert_array_equal(grads[0], grads[1])
    assert np.isnan(grads[0]).all()


def test_logsumexp_of_infinities_and_empty_dims():
    torch = pytest.importorskip("torch")
    data = np.array([[-np.inf, -np.inf], [np.inf, 1.0], [0.0, -np.inf]])
    ours = ta.logsumexp(ta.tensor(data), 1).numpy()
    np.testing.assert_array_equal(ours, torch.logsumexp(torch.tensor(data), 1).numpy())
    assert ta.logsumexp(ta.zeros(2, 0), 1).tolist() == [-math.inf, -math.inf]
    assert ta.logsumexp(ta.arange(3), 0).dtype == np.float32


# ---- errors --------------------------------------------------------------------------------------

ERRORS = {
    "prod-dim-tuple": (lambda m: m.prod(m.ones(2, 3), (0, 1)), TypeError, "dim"),
    "prod-dim-out-of-range": (lambda m: m.prod(m.ones(2, 3), 2), IndexError, "range"),
    "prod-not-a-tensor": (lambda m: m.prod([1.0, 2.0]), TypeError, "Tensor"),
    "norm-int": (lambda m: m.norm(m.tensor([3, 4])), RuntimeError, "floating point"),
    "norm-nuc": (lambda m: m.norm(m.ones(3, 3), "nuc"), None, "nuclear"),
    "norm-bad-string": (lambda m: m.norm(m.ones(2, 2), "abc"), ValueError, "ord"),
    "norm-fro-3-dims": (lambda m: m.norm(m.ones(2, 2, 2), "fro", dim=(0, 1, 2)), RuntimeError,
                        "2-tuple"),
    "vector_norm-string-ord": (lambda m: m.linalg.vector_norm(m.ones(2), "fro"), TypeError,
                               "number"),
    "vector_norm-inf-empty": (lambda m: m.linalg.vector_norm(m.zeros(0), INF), RuntimeError,
                              "empty"),
    "vector_norm-negative-empty": (lambda m: m.linalg.vector_norm(m.zeros(2, 0), -1, dim=1),
                                   RuntimeError, "empty"),
    "vector_norm-int-dtype": (lambda m: m.linalg.vector_norm(m.ones(2), dtype=m.int64),
                              RuntimeError, "floating point"),
    "vector_norm-narrowing-dtype": (lambda m: m.linalg.vector_norm(
        m.ones(2, dtype=m.float64), dtype=m.float32), RuntimeError, "narrowing"),
    "vector_norm-repeated-dim": (lambda m: m.linalg.vector_norm(m.ones(2, 2), dim=(0, 0)),
                                 RuntimeError, None),
    "linalg.norm-ord-3d": (lambda m: m.linalg.norm(m.ones(2, 2, 2), 2), RuntimeError, "1-D"),
    "linalg.norm-ord-0d": (lambda m: m.linalg.norm(m.tensor(2.0), 1), RuntimeError, "1-D"),
    "linalg.norm-3-dims": (lambda m: m.linalg.norm(m.ones(2, 2, 2), dim=(0, 1, 2)),
                           RuntimeError, "length 1 or 2"),
    "linalg.norm-matrix-order-3": (lambda m: m.linalg.norm(m.ones(2, 2), 3), ValueError,
                                   "ord"),
    "linalg.norm-spectral": (lambda m: m.linalg.norm(m.ones(2, 2), 2), None, "singular"),
    "matrix_norm-1d": (lambda m: m.linalg.matrix_norm(m.ones(3)), RuntimeError, "2"),
    "matrix_norm-one-dim": (lambda m: m.linalg.matrix_norm(m.ones(3, 3), dim=0), RuntimeError,
                            "2-tuple"),
    "normalize-int": (lambda m: _normalize(m)(m.tensor([[1, 2]])), RuntimeError,
                      "floating point"),
    "normalize-dim-out-of-range": (lambda m: _normalize(m)(m.ones(2)), IndexError, None),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_bad_arguments_are_clear_errors(name):
    call, kind, words = ERRORS[name]
    if kind is None:  # PyTorch has it; tinyattn has no SVD
        with pytest.raises(NotImplementedError, match=words):
            call(ta)
        return
    with pytest.raises(kind, match=words):
        call(ta)


@pytest.mark.parametrize("name", sorted(n for n, (_, kind, _) in ERRORS.items() if kind))
def test_pytorch_refuses_the_same_calls(name):
    torch = pytest.importorskip("torch")
    call, kind, _ = ERRORS[name]
    with pytest.raises((kind, RuntimeError, TypeError, IndexError, ValueError)):
        call(torch)


def test_normalize_refuses_a_negative_eps():
    with pytest.raises(ValueError, match="eps"):
        F.normalize(ta.ones(2, 2), eps=-1.0)


# ---- where the new names live ----------------------------------------------------------------

def test_the_new_ops_are_exported_and_are_tensor_methods():
    assert {"prod", "cumprod", "norm", "linalg"} <= set(ta.__all__)
    assert {"prod", "cumprod", "norm"} <= set(ta.ops.__all__)
    assert "normalize" in F.__all__ and F.normalize is ta.nn.functional.normalize
    assert set(ta.linalg.__all__) == {"norm", "vector_norm", "matrix_norm"}
    x = ta.tensor(X)
    assert x.prod(1, True).tolist() == ta.prod(x, 1, keepdim=True).tolist()
    assert x.norm(3, 0).tolist() == ta.norm(x, 3, 0).tolist()
    assert x.cumprod(-1).tolist() == ta.cumprod(x, 1).tolist()
    assert x.norm().item() == ta.linalg.norm(x).item() == ta.linalg.vector_norm(x).item()

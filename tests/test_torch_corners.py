"""Corners where tinyattn answered differently from PyTorch until the random programs
(``tests/torch_differential.py``) or a zero-size batch found them: each is compared with
PyTorch itself (skipped without it), and with what it must be where PyTorch is not needed."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.errors import DTypeError

torch = pytest.importorskip("torch")

MODULES = (ta, torch)


def _np(t):
    return t.detach().numpy()


def _dtype(t) -> str:
    return str(t.dtype).removeprefix("torch.")


# ---- a zero-size batch through attention ------------------------------------------------------
@pytest.mark.parametrize("impl", ["composed", "fused"])
@pytest.mark.parametrize("mask", [None, "float", "bool"])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_of_an_empty_batch_is_empty_with_empty_gradients(impl, mask, causal):
    if mask is not None and causal:
        pytest.skip("a mask and is_causal together are refused (see the next test)")
    results = []
    for m in MODULES:
        q = m.zeros(0, 2, 3, 4, requires_grad=True)
        k = m.zeros(0, 2, 5, 4, requires_grad=True)
        v = m.zeros(0, 2, 5, 6, requires_grad=True)
        attn_mask = None
        if mask == "float":
            attn_mask = m.zeros(0, 2, 3, 5)
        elif mask == "bool":
            attn_mask = m.ones(0, 2, 3, 5, dtype=m.bool)
        extra = {"impl": impl} if m is ta else {}
        out = m.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask,
                                                           is_causal=causal, **extra)
        grads = m.autograd.grad(out.sum(), [q, k, v])
        results.append([(tuple(t.shape), _dtype(t)) for t in (out, *grads)])
    assert results[0] == results[1]
    assert results[0][0] == ((0, 2, 3, 6), "float32")


def test_attention_weights_of_an_empty_batch_on_the_composed_path():
    q = ta.zeros(0, 2, 3, 4, requires_grad=True)
    out, weights = ta.F.scaled_dot_product_attention(q, q, q, need_weights=True)
    assert out.shape == (0, 2, 3, 4) and weights.shape == (0, 2, 3, 3)
    out.sum().backward()
    assert q.grad.shape == (0, 2, 3, 4)
    with pytest.raises(ValueError, match="impl='fused' cannot serve this call: need_weights"):
        ta.F.scaled_dot_product_attention(q, q, q, need_weights=True, impl="fused")


@pytest.mark.parametrize("batch", [0, 2])
def test_a_mask_with_is_causal_is_refused_whatever_the_batch(batch):
    q = ta.zeros(batch, 2, 3, 4)
    with pytest.raises(ValueError, match="pass either attn_mask or is_causal=True, not both"):
        ta.F.scaled_dot_product_attention(q, q, q, attn_mask=ta.zeros(3, 3), is_causal=True)


def test_multihead_attention_of_an_empty_batch_matches_pytorch():
    shapes = []
    for m in MODULES:
        layer = m.nn.MultiheadAttention(4, 2, batch_first=True)
        x = m.zeros(0, 3, 4, requires_grad=True)
        out, weights = layer(x, x, x)
        out.sum().backward()
        shapes.append((tuple(out.shape), tuple(weights.shape), tuple(x.grad.shape),
                       tuple(layer.in_proj_weight.grad.shape)))
    assert shapes[0] == shapes[1]


# ---- layer_norm over zero sizes -----------------------------------------------------------------
ZERO_SHAPES = [((2, 0), (0,)), ((0, 0), (0,)), ((2, 0, 3), (0, 3)), ((0,), (0,)),
               ((0, 4), (4,)), ((3, 0, 4), (4,))]


@pytest.mark.parametrize("shape, normalized", ZERO_SHAPES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("grad_mode", ["first", "create_graph"])
def test_layer_norm_over_zero_sizes_matches_pytorch(shape, normalized, dtype, grad_mode):
    results = []
    for m in MODULES:
        x = m.zeros(shape, dtype=getattr(m, dtype), requires_grad=True)
        w = m.ones(normalized, dtype=getattr(m, dtype), requires_grad=True)
        b = m.zeros(normalized, dtype=getattr(m, dtype), requires_grad=True)
        y = m.nn.functional.layer_norm(x, normalized, w, b)
        grads = m.autograd.grad(y.sum(), [x, w, b], create_graph=grad_mode == "create_graph")
        results.append([(tuple(t.shape), _dtype(t), _np(t).tolist()) for t in (y, *grads)])
    assert results[0] == results[1]


def test_layer_norm_module_of_zero_features_has_empty_parameters():
    for m in MODULES:
        layer = m.nn.LayerNorm(0)
        out = layer(m.zeros(3, 0))
        out.sum().backward()
        assert tuple(layer.weight.shape) == (0,) and tuple(layer.weight.grad.shape) == (0,)
    with pytest.raises(ValueError, match="non-negative"):
        ta.nn.LayerNorm(-1)


# ---- .T of 0-d and 1-d tensors ------------------------------------------------------------------
@pytest.mark.parametrize("shape, message", [((), "deprecated on 0-D tensors"),
                                            ((3,), "dimension other than 2"),
                                            ((2, 3, 4), "dimension other than 2")])
def test_T_below_and_above_two_dims_warns_and_is_a_view_as_in_pytorch(shape, message):
    for m in MODULES:
        x = m.zeros(shape, requires_grad=True)
        if m is ta:
            with pytest.warns(UserWarning, match=message):
                y = x.T
        else:  # PyTorch says it once per process
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                y = x.T
        assert y is not x and y.grad_fn is not None and tuple(y.shape) == shape[::-1]
        y.sum().backward()
        np.testing.assert_array_equal(_np(x.grad), np.ones(shape))
        base = m.zeros(shape)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            base.T.add_(1.0)  # the view's writes reach the tensor
        np.testing.assert_array_equal(_np(base), np.ones(shape))


def test_T_of_a_matrix_does_not_warn_and_mT_of_a_vector_is_refused():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ta.zeros(2, 3).T.shape == (3, 2)
    with pytest.raises(RuntimeError, match="mT is only supported on matrices"):
        _ = ta.zeros(3).mT
    with pytest.raises(RuntimeError, match="mT is only supported on matrices"):
        _ = torch.zeros(3).mT


# ---- empty tensors through cat and matmul; bool products -----------------------------------
def test_cat_promotes_mixed_dtypes_as_pytorch():
    results = []
    for m in MODULES:
        ints, singles = m.tensor([[1, 2]]), m.tensor([[0.5]], dtype=m.float32)
        doubles = m.tensor([[0.25]], dtype=m.float64)
        results.append([(_dtype(out), _np(out).tolist()) for out in (
            m.cat([ints, singles], 1), m.cat([singles, doubles], 1), m.cat([ints, ints], 0))])
    assert results[0] == results[1]
    assert results[0][0][0].endswith("float32")


def test_cat_of_empty_vectors_keeps_the_graph():
    results = []
    for m in MODULES:
        empty = m.zeros(0, dtype=m.float64, requires_grad=True)
        ints = m.tensor([], dtype=m.int64)
        matrix = m.ones(2, 3, requires_grad=True)
        both = m.cat([ints, empty])
        beside = m.cat([empty, matrix, empty], 1)
        grads = m.autograd.grad((beside * beside).sum(), [empty, matrix])
        results.append((both.requires_grad, _dtype(both), tuple(beside.shape),
                        [tuple(g.shape) for g in grads], _np(grads[1]).tolist(),
                        [tuple(g.shape) for g in m.autograd.grad(both.sum(), [empty])]))
    assert results[0] == results[1]


@pytest.mark.parametrize("shapes", [((0,), (0,)), ((2, 0), (0,)), ((0,), (3, 0, 2)),
                                    ((0,), (0, 4))])
def test_matmul_of_empty_vectors_has_empty_gradients(shapes):
    results = []
    for m in MODULES:
        a, b = (m.zeros(s, requires_grad=True) for s in shapes)
        out = a @ b
        grads = m.autograd.grad(out, [a, b], m.ones(tuple(out.shape)))
        results.append([tuple(t.shape) for t in (out, *grads)])
    assert results[0] == results[1]


@pytest.mark.parametrize("shapes", [((2,), (2, 3)), ((3, 2), (2,)), ((3, 2), (2, 4)),
                                    ((2, 3, 2), (2, 2, 4))])
def test_bool_matrix_products_are_refused_as_in_pytorch(shapes):
    with pytest.raises(DTypeError, match="products of bool matrices are not supported"):
        ta.ones(shapes[0], dtype=ta.bool) @ ta.ones(shapes[1], dtype=ta.bool)
    with pytest.raises(NotImplementedError):
        torch.ones(shapes[0], dtype=torch.bool) @ torch.ones(shapes[1], dtype=torch.bool)
    empty = ta.ones(2, 0, dtype=ta.bool) @ ta.ones(0, 3, dtype=ta.bool)  # no product to take
    assert empty.shape == (2, 3) and not empty.numpy().any()


# ---- gradients and dtypes ---------------------------------------------------------------------
@pytest.mark.parametrize("op", ["amax", "amin", "max", "min"])
@pytest.mark.filterwarnings("ignore::UserWarning")  # torch: "degrees of freedom is <= 0"
def test_a_nan_gradient_reaches_the_row_of_amax_but_only_the_extremum_of_max(op):
    grads = []
    for m in MODULES:
        x = m.tensor([[-0.67, -1.5, 0.2]], dtype=m.float64, requires_grad=True)
        y = getattr(x, op)(1) if op.startswith("a") else getattr(x, op)()
        if not op.startswith("a"):
            y = y.reshape(1)
        out = y.std()  # one element: NaN, and a NaN gradient
        grads.append(_np(m.autograd.grad(out, [x])[0]))
    np.testing.assert_array_equal(grads[0], grads[1])
    assert np.isnan(grads[0]).all() == op.startswith("a")  # max()/min() select the extremum


LOSS_DTYPES = [("mse_loss", "float32", "bool", "mean"), ("mse_loss", "bool", "float64", "sum"),
               ("smooth_l1_loss", "float64", "bool", "none"),
               ("huber_loss", "float32", "bool", "mean"),
               ("huber_loss", "float32", "float64", "none"),
               ("huber_loss", "float64", "float32", "sum"),
               ("l1_loss", "int64", "int64", "none"), ("l1_loss", "int64", "int64", "sum"),
               ("l1_loss", "float32", "int64", "mean")]


def _operand(m, dtype, seed):
    values = np.random.default_rng(seed).uniform(-2, 2, (2, 3))
    if dtype == "bool":
        return m.tensor(values > 0)
    return m.tensor(np.round(values).astype(dtype) if dtype == "int64" else values.astype(dtype))


@pytest.mark.parametrize("name, input_dtype, target_dtype, reduction", LOSS_DTYPES)
def test_regression_losses_take_pytorchs_dtypes(name, input_dtype, target_dtype, reduction):
    results = []
    for m in MODULES:
        loss = getattr(m.nn.functional, name)(_operand(m, input_dtype, 0),
                                              _operand(m, target_dtype, 1), reduction=reduction)
        results.append((_dtype(loss), np.round(_np(loss).astype(np.float64), 5).tolist()))
    assert results[0] == results[1]


@pytest.mark.parametrize("name, input_dtype, target_dtype, reduction", [
    ("l1_loss", "float32", "bool", "mean"), ("l1_loss", "int64", "int64", "mean"),
    ("huber_loss", "int64", "float32", "sum"), ("mse_loss", "int64", "int64", "sum"),
])
def test_regression_losses_refuse_what_pytorch_refuses(name, input_dtype, target_dtype,
                                                       reduction):
    with pytest.raises(DTypeError, match=name):
        getattr(ta.F, name)(_operand(ta, input_dtype, 0), _operand(ta, target_dtype, 1),
                            reduction=reduction)
    with pytest.raises((RuntimeError, NotImplementedError)):
        getattr(torch.nn.functional, name)(_operand(torch, input_dtype, 0),
                                           _operand(torch, target_dtype, 1),
                                           reduction=reduction)


# ---- an integer tensor and a Python int ---------------------------------------------------------
@pytest.mark.parametrize("dtype", ["int64", "int32", "int16", "uint8"])
@pytest.mark.parametrize("op", ["+", "-", "*", "//", "%", "/"])
@pytest.mark.parametrize("number_first", [False, True])
def test_an_integer_tensor_and_a_python_int_as_in_pytorch(dtype, op, number_first):
    """nanoGPT's ``data[i:i + block_size]`` with ``i`` a 0-d int64 tensor, and the like: the
    number takes the tensor's dtype (true division gives the default float dtype, where
    PyTorch's vectorised division may differ in the last bit), on the quick path for these
    operands and on the general one (a 0-d tensor), for either order."""
    rtol = 1e-6 if op == "/" else 0
    values = [1, 5, 3, 100]
    for number in (0 if op not in ("//", "%") else 2, 3, 300):
        results = []
        for m in MODULES:
            x = m.tensor(values, dtype=getattr(m, dtype))
            expression = f"n {op} x" if number_first else f"x {op} n"
            if number_first and op in ("//", "%", "/"):
                x = x + 1  # no zero divisor
            results.append(eval(expression, {"x": x, "n": number}))  # noqa: S307
        ours, theirs = results
        assert _dtype(ours) == _dtype(theirs), (op, dtype, number)
        np.testing.assert_allclose(_np(ours), _np(theirs), rtol=rtol, atol=0)
        scalar = ta.tensor(values[1], dtype=getattr(ta, dtype))  # 0-d, as a loop index
        expected = eval(f"n {op} s" if number_first else f"s {op} n",  # noqa: S307
                        {"s": torch.tensor(values[1], dtype=getattr(torch, dtype)), "n": number})
        got = eval(f"n {op} s" if number_first else f"s {op} n",  # noqa: S307
                   {"s": scalar, "n": number})
        assert _dtype(got) == _dtype(expected)
        assert got.item() == pytest.approx(expected.item(), rel=rtol, abs=0)


# ---- pow by a constant: PyTorch's products ----------------------------------------------------
def _pow_inputs(dtype: str) -> np.ndarray:
    x = np.random.default_rng(0).standard_normal(500).astype(dtype) * 3
    x[:7] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e30]
    return x


def _powers(x: np.ndarray, exponent: float) -> tuple[np.ndarray, np.ndarray]:
    """``x ** exponent`` by tinyattn and by PyTorch."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _np(ta.tensor(x).pow(exponent)), _np(torch.pow(torch.tensor(x), exponent))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("exponent", [3, 3.0, -2, -2.0, -0.5, 2, 2.0, -1])
def test_pow_by_a_constant_gives_pytorchs_bits(dtype, exponent):
    """At 2, 3, −2 and −½ PyTorch multiplies (``x·x``, ``x·x·x``, ``1/(x·x)``, ``1/√x``) instead
    of calling ``pow``, whose results differ in the last bit; the cube is in every minGPT GELU,
    the square in its gradient."""
    ours, theirs = _powers(_pow_inputs(dtype), exponent)
    assert ours.dtype == theirs.dtype
    np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_pow_by_a_half_is_the_correctly_rounded_root(dtype):
    """At ½ the result is the square root rounded correctly (IEEE), from a reference computed
    apart: float32 roots in float64 then rounded (exact: float64 has more than twice float32's
    precision), float64 roots by Python's ``math.sqrt``. PyTorch's vectorised root is within a
    unit in the last place of it; on some CPUs it is not rounded correctly (an AMD EPYC with
    AVX-512: 43 of these 500 float32 roots)."""
    x = _pow_inputs(dtype)
    ours, theirs = _powers(x, 0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if dtype == "float32":
            expected = np.sqrt(x.astype(np.float64)).astype(np.float32)
        else:
            expected = np.array([math.sqrt(v) if v >= 0 else math.nan for v in x])
    assert ours.dtype == theirs.dtype == expected.dtype
    np.testing.assert_array_equal(ours, expected)
    finite = np.isfinite(expected)
    np.testing.assert_array_equal(np.isnan(theirs), np.isnan(expected))
    np.testing.assert_array_max_ulp(ours[finite], theirs[finite], maxulp=1)


# ---- integer division: empty results, exact truncation ------------------------------------------
def _divisions(m):
    return {"//": lambda a, b: a // b, "%": lambda a, b: a % b,
            "floor": lambda a, b: m.div(a, b, rounding_mode="floor"),
            "trunc": lambda a, b: m.div(a, b, rounding_mode="trunc")}


@pytest.mark.parametrize("op", ["//", "%", "floor", "trunc"])
def test_an_integer_zero_divisor_raises_only_when_a_division_takes_place(op):
    """A zero divisor over an empty broadcast divides nothing: the result is empty, as in
    PyTorch; with elements it raises PyTorch's ``ZeroDivisionError``."""
    for dividend, divisor in (([], 0), (5, []), ([[]], [[0], [0]])):
        results = []
        for m in MODULES:
            results.append(_divisions(m)[op](m.tensor(dividend, dtype=m.int64),
                                             m.tensor(divisor, dtype=m.int64)))
        ours, theirs = results
        assert ours.shape == tuple(theirs.shape) and ours.numel() == 0
        assert _dtype(ours) == _dtype(theirs) == "int64"
    with pytest.raises(ZeroDivisionError, match="integer division by zero"):
        _divisions(ta)[op](ta.tensor([3, 4]), ta.tensor([1, 0]))
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        _divisions(torch)[op](torch.tensor([3, 4]), torch.tensor([1, 0]))


def test_integer_division_by_trunc_is_exact_and_checks_its_operands():
    """Rounded toward zero in integers, not through a float quotient (which loses the last
    digits past 2**53): against Python's exact integers and against PyTorch."""
    dividends = [-7, 7, -7, 7, 0, -(2**63) + 1, 2**62 + 3, -(2**53) - 1, 9]
    divisors = [2, -2, -2, 2, 5, 3, -7, 1, 9]
    expected = [abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
                for a, b in zip(dividends, divisors, strict=True)]
    ours = ta.div(ta.tensor(dividends), ta.tensor(divisors), rounding_mode="trunc")
    theirs = torch.div(torch.tensor(dividends), torch.tensor(divisors), rounding_mode="trunc")
    assert _dtype(ours) == _dtype(theirs) == "int64"
    assert ours.tolist() == expected == theirs.tolist()
    with pytest.raises(ValueError, match=r"div: shapes \(2,\) and \(3,\) are not broadcastable"):
        ta.div(ta.tensor([1, 2]), ta.tensor([1, 2, 3]), rounding_mode="trunc")
    with pytest.raises(DTypeError, match="div: bool tensors are not supported"):
        ta.div(ta.tensor([True]), ta.tensor([True]), rounding_mode="trunc")


# ---- losses: dtypes of broadcast operands, infinite and NaN differences -------------------------
@pytest.mark.parametrize("name", ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"])
@pytest.mark.parametrize("input_dtype, target_dtype, expected",
                         [("float64", "float32", "float64"), ("float32", "float64", "float64")])
def test_a_0d_operand_broadcast_against_a_tensor_counts_as_dimensioned(name, input_dtype,
                                                                        target_dtype, expected):
    """PyTorch expands both operands to their broadcast shape before computing, so a 0-d
    input against a ``(1, 1, 2)`` target promotes as two dimensioned tensors: a 0-d float64
    input makes the loss float64. (``huber_loss`` keeps the input's dtype, and PyTorch's
    backward of mixed dtypes fails there: its gradient is not compared.)"""
    if name == "huber_loss":
        expected = input_dtype
    results = []
    for m in MODULES:
        x = m.tensor(np.array(0.3, dtype=input_dtype), requires_grad=True)
        t = m.tensor(np.full((1, 1, 2), -0.5, dtype=target_dtype))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            loss = getattr(m.nn.functional, name)(x, t, reduction="sum")
        if name != "huber_loss":
            loss.backward()
        grad = (None, None) if x.grad is None else (_dtype(x.grad), x.grad.item())
        results.append((_dtype(loss), loss.item(), *grad))
    ours, theirs = results
    assert ours[0] == theirs[0] == expected
    assert ours[1] == pytest.approx(theirs[1], rel=1e-6)
    if name != "huber_loss":
        assert ours[2] == theirs[2] == input_dtype
        assert ours[3] == pytest.approx(theirs[3], rel=1e-6)


@pytest.mark.parametrize("name", ["smooth_l1_loss", "huber_loss"])
def test_an_infinite_difference_has_the_linear_pieces_gradient_and_nan_stays_nan(name):
    """Where ``d = x − t`` is infinite the loss takes its linear piece, whose gradient is
    ``sign(d)`` (times δ for Huber): the quadratic piece not taken must not add ``0 · ∞``. A NaN
    ``d`` has a NaN gradient (PyTorch's backward takes the quadratic piece there)."""
    x = np.array([np.inf, -np.inf, 0.25, 3.0, np.nan, 0.0])
    t = np.array([0.0, 1.0, 0.0, 0.0, 0.0, np.inf])
    sign = np.sign(x - t)
    expected = np.where(np.abs(x - t) >= 1.0, sign, (x - t))  # the default δ = β = 1
    results = []
    for m in MODULES:
        xs, ts = m.tensor(x, requires_grad=True), m.tensor(t, requires_grad=True)
        getattr(m.nn.functional, name)(xs, ts, reduction="sum").backward()
        results.append((_np(xs.grad), _np(ts.grad)))
    (dx, dt), (torch_dx, torch_dt) = results
    np.testing.assert_array_equal(dx, expected)
    np.testing.assert_array_equal(dt, -expected)
    np.testing.assert_array_equal(dx, torch_dx)
    np.testing.assert_array_equal(dt, torch_dt)


@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div_of_a_0d_target_promotes_as_a_0d_operand(log_target):
    """``kl_div`` does not expand its operands first (unlike the regression losses): a 0-d
    float64 target does not promote a float32 input of shape ``(3,)``, so the loss is float32,
    while the target's gradient keeps the target's float64."""
    results = []
    for m in MODULES:
        x = m.tensor(np.full(3, -1.2, dtype=np.float32), requires_grad=True)
        t = m.tensor(np.array(0.3), requires_grad=True)
        loss = m.nn.functional.kl_div(x, t, reduction="sum", log_target=log_target)
        loss.backward()
        results.append((_dtype(loss), _dtype(x.grad), _dtype(t.grad), loss.item(), t.grad.item()))
    ours, theirs = results
    assert ours[:3] == theirs[:3] == ("float32", "float32", "float64")
    assert ours[3:] == pytest.approx(theirs[3:], rel=1e-5, abs=1e-6)  # float32 sums


@pytest.mark.parametrize("input_dtype, target_dtype", [("float32", "float64"),
                                                       ("float64", "float32")])
@pytest.mark.parametrize("shape", [(), (3,)])
@pytest.mark.parametrize("reduction", ["none", "mean"])
def test_bce_with_logits_has_the_targets_dtype_as_in_pytorch(input_dtype, target_dtype, shape,
                                                             reduction):
    """PyTorch computes the loss in place in a buffer of the target's dtype, so a float64 input
    against a float32 target gives a float32 loss; the gradients keep their leaves' dtypes."""
    results = []
    for m in MODULES:
        x = m.tensor(np.full(shape, 0.3, dtype=input_dtype), requires_grad=True)
        t = m.tensor(np.full(shape, 0.75, dtype=target_dtype), requires_grad=True)
        loss = m.nn.functional.binary_cross_entropy_with_logits(x, t, reduction=reduction)
        loss.sum().backward()
        results.append((_dtype(loss), _dtype(x.grad), _dtype(t.grad),
                        _np(loss).astype(np.float64).tolist(),
                        _np(x.grad).astype(np.float64).tolist()))
    ours, theirs = results
    assert ours[:3] == theirs[:3] == (target_dtype, input_dtype, target_dtype)
    np.testing.assert_allclose(ours[3], theirs[3], rtol=1e-6)
    np.testing.assert_allclose(ours[4], theirs[4], rtol=1e-6)


# ---- advanced indexing: a contiguous result -----------------------------------------------------
@pytest.mark.parametrize("expression", ["x[:, [0, 2]]", "x[:, :, [1, 1, 0]]",
                                        "x[[1, 0], :, [1, 1]]",
                                        "x[:, m.tensor([True, False, True])]",
                                        "x.repeat_interleave(2, dim=1)",
                                        "x.index_select(2, m.tensor([3, 0]))", "x[0, [1, 2]]"])
def test_an_advanced_index_gives_a_contiguous_result_that_views_as_in_pytorch(expression):
    """PyTorch gathers into a new contiguous tensor whatever the indexed dim; numpy puts an
    index after the first dim on the outer axis in memory. The result must be contiguous, so
    that a later ``view`` of it works (it failed after ``repeat_interleave(n, dim=1)``), with
    the values and strides of PyTorch's."""
    results = []
    for m in MODULES:
        x = m.arange(24.0).reshape(2, 3, 4).requires_grad_()
        y = eval(expression, {"x": x, "m": m})  # noqa: S307
        flat = y.view(-1)
        flat.backward(m.arange(float(flat.numel())))
        results.append((y.is_contiguous(), tuple(y.stride()), _np(flat).tolist(),
                        _np(x.grad).tolist()))
    ours, theirs = results
    assert ours[0] is True and theirs[0] is True
    assert ours[1:] == theirs[1:]

"""Functional ops (linear, embedding, dropout, layer_norm, gelu, cross_entropy): float64
gradchecks, values against plain numpy formulas, and the errors bad inputs get."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import leaf, seeds, shapes

import tinyattn as ta
import tinyattn.functional as F

FEW = settings(max_examples=8)


# ---- linear -----------------------------------------------------------------------------------
@FEW
@given(batch=shapes(min_dims=0, max_dims=2, max_side=3), sizes=st.tuples(
    st.integers(1, 4), st.integers(1, 4)), with_bias=st.booleans(), seed=seeds)
def test_linear_gradients_for_any_leading_dims(batch, sizes, with_bias, seed):
    in_features, out_features = sizes
    x = leaf(tuple(batch) + (in_features,), seed)
    w = leaf((out_features, in_features), seed + 1)
    if with_bias:
        b = leaf((out_features,), seed + 2)
        assert ta.gradcheck(F.linear, (x, w, b))
    else:
        assert ta.gradcheck(F.linear, (x, w))


def test_linear_matches_numpy_affine_map():
    rng = np.random.default_rng(0)
    x, w, b = rng.normal(size=(2, 3, 5)), rng.normal(size=(4, 5)), rng.normal(size=4)
    y = F.linear(ta.tensor(x), ta.tensor(w), ta.tensor(b))
    np.testing.assert_allclose(y.numpy(), x @ w.T + b, rtol=1e-12)
    assert y.shape == (2, 3, 4) and y.dtype == np.float64


def test_linear_gradient_of_weight_is_outer_product_sum():
    x = ta.tensor([[1.0, 2.0], [3.0, 4.0]], dtype="float64")
    w = ta.tensor([[0.5, -1.0]], dtype="float64", requires_grad=True)
    b = ta.tensor([0.0], dtype="float64", requires_grad=True)
    F.linear(x, w, b).backward(ta.tensor([[1.0], [2.0]], dtype="float64"))
    assert w.grad.tolist() == [[1.0 * 1 + 2.0 * 3, 1.0 * 2 + 2.0 * 4]]
    assert b.grad.tolist() == [3.0]


def test_linear_rejects_mismatched_in_features_naming_both_shapes():
    with pytest.raises(ValueError, match=r"linear: input of shape \(2, 3\).*\(4, 5\)"):
        F.linear(ta.ones(2, 3), ta.ones(4, 5))
    with pytest.raises(ValueError, match=r"bias must have shape .*\(4,\).*got \(3,\)"):
        F.linear(ta.ones(2, 5), ta.ones(4, 5), ta.ones(3))
    with pytest.raises(ValueError, match="weight must have shape"):
        F.linear(ta.ones(2, 5), ta.ones(5))
    with pytest.raises(TypeError, match="linear: expected all inputs to have the same dtype"):
        F.linear(ta.tensor([[1, 2]]), ta.ones(3, 2))


# ---- embedding --------------------------------------------------------------------------------
@FEW
@given(index_shape=shapes(min_dims=1, max_dims=2, max_side=4), seed=seeds)
def test_embedding_gradient_scatter_adds_repeated_rows(index_shape, seed):
    rng = np.random.default_rng(seed)
    indices = ta.tensor(rng.integers(0, 3, size=index_shape))  # 3 rows: repeats are certain
    weight = leaf((3, 2), seed)
    assert ta.gradcheck(lambda w: F.embedding(indices, w), (weight,))


def test_embedding_matches_numpy_gather_and_add_at():
    weight = ta.tensor(np.arange(12.0).reshape(4, 3), dtype="float64", requires_grad=True)
    indices = np.array([[1, 1, 3], [0, 1, 2]])
    out = F.embedding(ta.tensor(indices), weight)
    np.testing.assert_array_equal(out.numpy(), weight.numpy()[indices])
    grad = np.random.default_rng(1).normal(size=(2, 3, 3))
    out.backward(ta.tensor(grad))
    expected = np.zeros((4, 3))
    np.add.at(expected, indices.reshape(-1), grad.reshape(-1, 3))
    np.testing.assert_allclose(weight.grad.numpy(), expected, rtol=1e-12)


@pytest.mark.parametrize("padding_idx", [2, -2])
def test_embedding_padding_row_gets_no_gradient(padding_idx):
    weight = leaf((4, 3), 0)
    out = F.embedding(ta.tensor([0, 2, 2, 3]), weight, padding_idx=padding_idx)
    out.backward(ta.ones(4, 3, dtype="float64"))
    assert weight.grad.numpy()[2].tolist() == [0.0, 0.0, 0.0]
    assert weight.grad.numpy()[[0, 3]].tolist() == [[1.0] * 3, [1.0] * 3]
    np.testing.assert_array_equal(out.numpy()[1], weight.numpy()[2])  # the lookup still reads it


@pytest.mark.parametrize("bad", [5, -1, 100])
def test_embedding_out_of_range_index_is_an_index_error_naming_value_and_size(bad):
    with pytest.raises(IndexError, match=rf"embedding: index {bad} is out of range .* 5 emb"):
        F.embedding(ta.tensor([0, bad]), ta.ones(5, 2))


def test_embedding_rejects_float_indices_and_bad_padding_idx():
    with pytest.raises(TypeError, match="integer indices"):
        F.embedding(ta.tensor([0.0, 1.0]), ta.ones(5, 2))
    with pytest.raises(ValueError, match="padding_idx 5 is out of range"):
        F.embedding(ta.tensor([0]), ta.ones(5, 2), padding_idx=5)
    with pytest.raises(ValueError, match="padding_idx -6 is out of range"):
        F.embedding(ta.tensor([0]), ta.ones(5, 2), padding_idx=-6)


# ---- dropout ----------------------------------------------------------------------------------
def test_dropout_gradient_with_a_frozen_mask():
    x = leaf((4, 5), 3)

    def fn(t):
        ta.manual_seed(7)  # the same mask on every evaluation
        return F.dropout(t, p=0.4)

    assert ta.gradcheck(fn, (x,))


def test_dropout_keeps_or_scales_each_element_and_backward_uses_the_same_mask():
    ta.manual_seed(0)
    x = ta.tensor(np.linspace(1.0, 2.0, 4000), dtype="float64", requires_grad=True)
    y = F.dropout(x, p=0.3)
    kept = y.numpy() != 0
    np.testing.assert_allclose(y.numpy()[kept], x.numpy()[kept] / 0.7, rtol=1e-12)
    assert abs(kept.mean() - 0.7) < 0.03  # 4000 Bernoulli(0.7): std 0.007
    y.backward(ta.ones(4000, dtype="float64"))
    np.testing.assert_array_equal(x.grad.numpy(), np.where(kept, 1 / 0.7, 0.0))


def test_dropout_is_the_identity_in_eval_or_at_p_zero_and_zero_at_p_one():
    x = ta.randn(3, 4, requires_grad=True)
    assert F.dropout(x, p=0.5, training=False) is x
    assert F.dropout(x, p=0.0) is x
    y = F.dropout(x, p=1.0)
    assert not y.numpy().any() and np.isfinite(y.numpy()).all()
    y.backward(ta.ones(3, 4))
    assert not x.grad.numpy().any()


def test_dropout_mask_repeats_under_manual_seed():
    ta.manual_seed(5)
    first = F.dropout(ta.ones(50), p=0.5).numpy()
    ta.manual_seed(5)
    assert (F.dropout(ta.ones(50), p=0.5).numpy() == first).all()


@pytest.mark.parametrize("p", [-0.1, 1.5])
def test_dropout_probability_outside_unit_interval_is_a_value_error(p):
    with pytest.raises(ValueError, match=rf"dropout: .*\[0, 1\], got {p}"):
        F.dropout(ta.ones(3), p=p)


# ---- layer_norm -------------------------------------------------------------------------------
def _layer_norm_numpy(x, dims, weight, bias, eps):
    axes = tuple(range(x.ndim - dims, x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    y = (x - mean) / np.sqrt(var + eps)
    return y * (1 if weight is None else weight) + (0 if bias is None else bias)


@FEW
@given(lead=shapes(min_dims=0, max_dims=2, max_side=3),
       normalized=shapes(min_dims=1, max_dims=2, max_side=4), seed=seeds)
def test_layer_norm_gradients_over_trailing_dims(lead, normalized, seed):
    normalized = tuple(normalized)
    x = leaf(tuple(lead) + normalized, seed)
    w = leaf(normalized, seed + 1)
    b = leaf(normalized, seed + 2)
    assert ta.gradcheck(lambda t, u, v: F.layer_norm(t, normalized, u, v), (x, w, b))


@pytest.mark.parametrize("affine", ["weight", "bias", "none"])
def test_layer_norm_gradients_with_partial_affine(affine):
    x = leaf((3, 5), 1)
    p = leaf((5,), 2)
    if affine == "weight":
        assert ta.gradcheck(lambda t, w: F.layer_norm(t, 5, weight=w), (x, p))
    elif affine == "bias":
        assert ta.gradcheck(lambda t, b: F.layer_norm(t, (5,), bias=b), (x, p))
    else:
        assert ta.gradcheck(lambda t: F.layer_norm(t, 5), (x,))


def test_layer_norm_matches_numpy_formula():
    rng = np.random.default_rng(2)
    x, w, b = rng.normal(size=(2, 3, 4, 5)), rng.normal(size=(4, 5)), rng.normal(size=(4, 5))
    y = F.layer_norm(ta.tensor(x), (4, 5), ta.tensor(w), ta.tensor(b), eps=1e-3)
    np.testing.assert_allclose(y.numpy(), _layer_norm_numpy(x, 2, w, b, 1e-3), rtol=1e-10)


def test_layer_norm_constant_rows_stay_finite_forward_and_backward():
    x = ta.full((3, 8), 7.0, dtype="float64", requires_grad=True)
    b = ta.tensor(np.arange(8.0), requires_grad=True)
    y = F.layer_norm(x, 8, bias=b)
    np.testing.assert_array_equal(y.numpy(), np.tile(np.arange(8.0), (3, 1)))
    y.backward(ta.tensor(np.random.default_rng(0).normal(size=(3, 8))))
    assert np.isfinite(x.grad.numpy()).all() and np.isfinite(b.grad.numpy()).all()


def test_layer_norm_rejects_trailing_dims_that_do_not_match():
    with pytest.raises(ValueError, match=r"input of shape \(2, 3\) does not end in .*\(4,\)"):
        F.layer_norm(ta.ones(2, 3), 4)
    with pytest.raises(ValueError, match=r"weight must have shape .*\(3,\), got \(4,\)"):
        F.layer_norm(ta.ones(2, 3), 3, weight=ta.ones(4))
    with pytest.raises(ValueError, match="normalized_shape must be"):
        F.layer_norm(ta.ones(2, 3), ())
    with pytest.raises(ValueError, match="eps must be"):
        F.layer_norm(ta.ones(2, 3), 3, eps=0.0)


# ---- gelu -------------------------------------------------------------------------------------
@pytest.mark.parametrize("approximate", ["none", "tanh"])
@FEW
@given(shape=shapes(), seed=seeds)
def test_gelu_gradients(approximate, shape, seed):
    x = leaf(shape, seed, low=-4, high=4)
    assert ta.gradcheck(lambda t: F.gelu(t, approximate=approximate), (x,))


def test_gelu_matches_erf_and_tanh_formulas():
    xs = np.linspace(-5, 5, 41)
    exact = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in xs])
    tanh = 0.5 * xs * (1 + np.tanh(math.sqrt(2 / math.pi) * (xs + 0.044715 * xs**3)))
    np.testing.assert_allclose(F.gelu(ta.tensor(xs)).numpy(), exact, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(F.gelu(ta.tensor(xs), "tanh").numpy(), tanh, rtol=1e-12,
                               atol=1e-15)


def test_gelu_rejects_unknown_approximation():
    with pytest.raises(ValueError, match="gelu: approximate must be 'none' or 'tanh', got 'erf'"):
        F.gelu(ta.ones(2), approximate="erf")


def test_relu_is_exported_and_gives_positive_zero():
    assert F.relu(ta.tensor([-3.0, 2.0])).tolist() == [0.0, 2.0]
    assert not np.signbit(F.relu(ta.tensor([-3.0])).numpy()).any()


# ---- cross_entropy ----------------------------------------------------------------------------
def _cross_entropy_numpy(logits, target, ignore_index=-100, reduction="mean", smoothing=0.0):
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    kept = target != ignore_index
    picked = log_probs[np.arange(len(target)), np.where(kept, target, 0)]
    loss = -(1 - smoothing) * picked - smoothing * log_probs.mean(axis=1)
    loss = np.where(kept, loss, 0.0)
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.sum() / kept.sum()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.3])
def test_cross_entropy_gradients_with_ignored_rows(reduction, smoothing):
    logits = leaf((5, 4), 11)
    target = ta.tensor([0, 3, -100, 1, 3])
    assert ta.gradcheck(
        lambda t: F.cross_entropy(t, target, reduction=reduction, label_smoothing=smoothing),
        (logits,),
    )


def test_cross_entropy_gradients_for_one_sample_and_for_extra_dims():
    assert ta.gradcheck(lambda t: F.cross_entropy(t, ta.tensor(2)), (leaf((4,), 1),))
    target = ta.tensor([[0, 2, 1], [1, 1, 0]])
    assert ta.gradcheck(lambda t: F.cross_entropy(t, target, label_smoothing=0.1),
                        (leaf((2, 3, 3), 2),))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_matches_numpy_formula(reduction):
    rng = np.random.default_rng(3)
    logits, target = rng.normal(size=(6, 5)) * 3, np.array([0, 4, 2, 7, 2, 1])
    got = F.cross_entropy(ta.tensor(logits), ta.tensor(target), ignore_index=7,
                          reduction=reduction, label_smoothing=0.2)
    expected = _cross_entropy_numpy(logits, target, 7, reduction, 0.2)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12)


def test_cross_entropy_extra_dims_equal_moving_the_class_dim_last():
    rng = np.random.default_rng(4)
    logits, target = rng.normal(size=(2, 5, 3)), rng.integers(0, 5, size=(2, 3))
    got = F.cross_entropy(ta.tensor(logits), ta.tensor(target), reduction="none")
    rows = np.moveaxis(logits, 1, -1).reshape(-1, 5)
    expected = _cross_entropy_numpy(rows, target.reshape(-1), reduction="none").reshape(2, 3)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12)


def test_cross_entropy_is_stable_for_logits_of_1e4():
    logits = np.array([[1e4, -1e4, 0.0], [-1e4, -1e4, 1e4]])
    target = np.array([1, 2])
    for dtype in ("float32", "float64"):
        x = ta.tensor(logits, dtype=dtype, requires_grad=True)
        loss = F.cross_entropy(x, ta.tensor(target))
        assert math.isclose(loss.item(), (2e4 + 0.0) / 2, rel_tol=1e-6)
        loss.backward()
        np.testing.assert_allclose(x.grad.numpy(), [[0.5, -0.5, 0], [0, 0, 0]], atol=1e-6)


def test_cross_entropy_mean_over_only_ignored_rows_is_nan_with_zero_gradient():
    x = ta.ones(2, 3, requires_grad=True)
    loss = F.cross_entropy(x, ta.tensor([-100, -100]))
    assert math.isnan(loss.item())
    loss.backward()
    assert not x.grad.numpy().any()


def test_cross_entropy_rejects_bad_targets():
    with pytest.raises(IndexError, match="target value 3 is out of range for 3 classes"):
        F.cross_entropy(ta.ones(2, 3), ta.tensor([0, 3]))
    with pytest.raises(IndexError, match="target value -1 is out of range"):
        F.cross_entropy(ta.ones(2, 3), ta.tensor([-1, 0]))
    with pytest.raises(TypeError, match=r"target has the shape \(2,\) of class indices but "
                                        r"dtype float32: class indices must be integers"):
        F.cross_entropy(ta.ones(2, 3), ta.tensor([0.0, 1.0]))
    with pytest.raises(TypeError, match="target must hold class indices .* or class probab"):
        F.cross_entropy(ta.ones(2, 3), ta.tensor([True, False]))
    with pytest.raises(ValueError, match=r"input of shape \(2, 3\) .*\(2,\), got .*\(3,\)"):
        F.cross_entropy(ta.ones(2, 3), ta.tensor([0, 1, 2]))
    with pytest.raises(ValueError, match="reduction must be"):
        F.cross_entropy(ta.ones(2, 3), ta.tensor([0, 1]), reduction="max")
    with pytest.raises(ValueError, match="label_smoothing must be"):
        F.cross_entropy(ta.ones(2, 3), ta.tensor([0, 1]), label_smoothing=1.5)

"""Layers (Linear, Embedding, Dropout, LayerNorm, GELU, ReLU) and ``ta.nn.init``: shapes,
PyTorch's init distributions, train/eval, padding_idx, and gradchecks with the parameters as
inputs."""

import math

import numpy as np
import pytest
from strategies import leaf

import tinyattn as ta
from tinyattn import nn


def call_with(module, tensors, *args):
    """``module(*args)`` with plain tensors standing in for its parameters, as
    ``torch.func.functional_call`` does (assigning a non-Parameter to a parameter attribute is
    a TypeError, as in PyTorch)."""
    saved = dict(module._parameters)
    module._parameters.update(tensors)
    try:
        return module(*args)
    finally:
        module._parameters.update(saved)


# ---- Linear -----------------------------------------------------------------------------------
def test_linear_shapes_dtype_and_repr():
    layer = nn.Linear(5, 3)
    assert layer.weight.shape == (3, 5) and layer.bias.shape == (3,)
    assert layer.weight.dtype == np.float32 and layer.weight.requires_grad
    assert layer(ta.ones(2, 4, 5)).shape == (2, 4, 3)
    assert repr(layer) == "Linear(in_features=5, out_features=3, bias=True)"
    assert nn.Linear(5, 3, bias=False).bias is None
    assert [n for n, _ in nn.Linear(5, 3, bias=False).named_parameters()] == ["weight"]


@pytest.mark.parametrize("dtype", [ta.float32, ta.float64])
def test_weights_that_products_read_start_on_a_cache_line(dtype):
    # the matmul kernel reads a weight's rows in place: 64-byte vectors, one cache line each
    separate = nn.MultiheadAttention(8, 2, kdim=3, vdim=5, dtype=dtype)
    weights = [nn.Linear(5, 3, dtype=dtype).weight, nn.Embedding(7, 3, dtype=dtype).weight,
               nn.MultiheadAttention(8, 2, dtype=dtype).in_proj_weight,
               separate.q_proj_weight, separate.k_proj_weight, separate.v_proj_weight]
    for weight in weights:
        assert weight.numpy().ctypes.data % 64 == 0 and weight.is_contiguous()


def test_linear_init_is_uniform_within_one_over_sqrt_fan_in():
    ta.manual_seed(0)
    layer = nn.Linear(64, 256)
    bound = 1 / math.sqrt(64)
    for values in (layer.weight.numpy(), layer.bias.numpy()):
        assert np.abs(values).max() <= bound
        assert np.abs(values).max() > 0.95 * bound  # fills the interval, not a narrower one
    # U(-b, b) has std b / sqrt(3); 16384 samples put the estimate within ~1%.
    assert abs(layer.weight.numpy().std() - bound / math.sqrt(3)) < 0.02 * bound


def test_linear_gradcheck_with_weight_and_bias_as_inputs():
    layer = nn.Linear(4, 3).double()
    x, w, b = leaf((2, 4), 1), leaf((3, 4), 2), leaf((3,), 3)

    def fn(x, w, b):
        return call_with(layer, {"weight": w, "bias": b}, x)

    assert ta.gradcheck(fn, (x, w, b))


def test_linear_forward_uses_its_parameters_and_fills_their_grads():
    layer = nn.Linear(3, 2).double()
    x = np.random.default_rng(0).normal(size=(4, 3))
    y = layer(ta.tensor(x))
    np.testing.assert_allclose(y.numpy(), x @ layer.weight.numpy().T + layer.bias.numpy())
    y.backward(ta.ones(4, 2, dtype="float64"))
    np.testing.assert_allclose(layer.weight.grad.numpy(), np.tile(x.sum(axis=0), (2, 1)))
    np.testing.assert_allclose(layer.bias.grad.numpy(), [4.0, 4.0])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("frozen_weight", [False, True])
def test_linear_bias_gradient_sums_the_output_gradients_rows(dtype, frozen_weight):
    """``db = Σ_rows G`` at a size the matmul kernel tiles (the tasks of ``Gᵀ X`` add up
    ``G``'s rows), and with a frozen weight (a row sum of its own): numpy's float64 sums,
    rounded to the dtype."""
    rng = np.random.default_rng(4)
    layer = nn.Linear(96, 200)
    if dtype == np.float64:
        layer = layer.double()
    layer.weight.requires_grad_(not frozen_weight)
    x = ta.tensor(rng.normal(size=(3, 130, 96)).astype(dtype))
    g = rng.normal(size=(3, 130, 200)).astype(dtype)
    layer(x).backward(ta.tensor(g))
    rows = g.reshape(-1, 200).astype(np.float64)
    eps = np.finfo(dtype).eps
    error = np.abs(layer.bias.grad.numpy() - rows.sum(axis=0))
    assert np.all(error <= eps * np.abs(rows).sum(axis=0))
    assert (layer.weight.grad is None) == frozen_weight


# ---- Embedding --------------------------------------------------------------------------------
def test_embedding_init_is_standard_normal_with_zero_padding_row():
    ta.manual_seed(1)
    table = nn.Embedding(2000, 16, padding_idx=-1)
    assert table.padding_idx == 1999
    weights = table.weight.numpy()
    assert not weights[1999].any()
    body = weights[:1999]
    assert abs(body.mean()) < 0.01 and abs(body.std() - 1.0) < 0.01  # 32k N(0,1) samples
    assert repr(table) == "Embedding(2000, 16, padding_idx=1999)"


def test_embedding_padding_row_receives_no_gradient_through_the_layer():
    table = nn.Embedding(5, 3, padding_idx=0).double()
    out = table(ta.tensor([[0, 1], [0, 4]]))
    assert out.shape == (2, 2, 3)
    out.backward(ta.ones(2, 2, 3, dtype="float64"))
    np.testing.assert_array_equal(table.weight.grad.numpy()[:, 0], [0, 1, 0, 0, 1])


def test_embedding_gradcheck_with_the_table_as_input():
    table = nn.Embedding(4, 3, padding_idx=2).double()

    def fn(w, indices):
        return call_with(table, {"weight": w}, indices)

    # The padding row is read but, by design (as in PyTorch), gets no gradient, so finite
    # differences can only agree on lookups that avoid it.
    w = leaf((4, 3), 5)
    assert ta.gradcheck(fn, (w, ta.tensor([[0, 1, 3], [3, 3, 1]])))
    w.grad = None
    fn(w, ta.tensor([[0, 2, 3], [2, 2, 1]])).backward(ta.ones(2, 3, 3, dtype="float64"))
    assert not w.grad.numpy()[2].any() and w.grad.numpy()[3].tolist() == [1.0] * 3


def test_embedding_rejects_bad_sizes_and_indices():
    with pytest.raises(ValueError, match="Embedding: padding_idx 7 is out of range"):
        nn.Embedding(5, 2, padding_idx=7)
    with pytest.raises(ValueError, match="num_embeddings must be an int >= 1"):
        nn.Embedding(0, 2)
    with pytest.raises(IndexError, match="index 5 is out of range"):
        nn.Embedding(5, 2)(ta.tensor([5]))


# ---- Dropout ----------------------------------------------------------------------------------
def test_dropout_layer_follows_train_and_eval():
    drop = nn.Dropout(p=0.5)
    x = ta.ones(1000)
    ta.manual_seed(0)
    trained = drop(x).numpy()
    assert set(np.unique(trained)) == {0.0, 2.0}
    assert 400 < (trained == 0).sum() < 600
    drop.eval()
    assert drop(x) is x
    net = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.3))
    net.eval()
    assert not net[1].training
    assert repr(drop) == "Dropout(p=0.5)"


def test_dropout_layer_rejects_probability_outside_unit_interval():
    with pytest.raises(ValueError, match="Dropout: dropout probability p must be a number in"):
        nn.Dropout(p=1.2)


# ---- LayerNorm --------------------------------------------------------------------------------
def test_layer_norm_layer_parameters_and_repr():
    norm = nn.LayerNorm((3, 4))
    assert norm.weight.numpy().tolist() == np.ones((3, 4)).tolist()
    assert not norm.bias.numpy().any()
    assert repr(norm) == "LayerNorm((3, 4), eps=1e-05, elementwise_affine=True)"
    assert [n for n, _ in nn.LayerNorm(4, bias=False).named_parameters()] == ["weight"]
    assert list(nn.LayerNorm(4, elementwise_affine=False).parameters()) == []


def test_layer_norm_layer_gradcheck_with_parameters_as_inputs():
    norm = nn.LayerNorm((2, 3), eps=1e-4).double()

    def fn(x, w, b):
        return call_with(norm, {"weight": w, "bias": b}, x)

    assert ta.gradcheck(fn, (leaf((4, 2, 3), 1), leaf((2, 3), 2), leaf((2, 3), 3)))


def test_layer_norm_layer_output_has_zero_mean_unit_variance_rows():
    x = ta.tensor(np.random.default_rng(3).normal(5.0, 3.0, size=(6, 32)), dtype="float64")
    y = nn.LayerNorm(32, eps=1e-12).double()(x).numpy()
    np.testing.assert_allclose(y.mean(axis=1), 0, atol=1e-12)
    np.testing.assert_allclose(y.var(axis=1), 1, rtol=1e-10)


def test_layer_norm_layer_rejects_mismatched_input():
    with pytest.raises(ValueError, match=r"layer_norm: input of shape \(2, 5\) does not end"):
        nn.LayerNorm(4)(ta.ones(2, 5))


# ---- activations ------------------------------------------------------------------------------
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_and_relu_layers_gradcheck(approximate):
    x = leaf((3, 4), 9, away_from=0.0)
    assert ta.gradcheck(nn.GELU(approximate), (x,))
    assert ta.gradcheck(nn.ReLU(), (x,))


def test_activation_layers_values_and_errors():
    x = ta.tensor([-2.0, 0.5])
    assert nn.ReLU()(x).tolist() == [0.0, 0.5]
    expected = [v * 0.5 * (1 + math.erf(v / math.sqrt(2))) for v in (-2.0, 0.5)]
    np.testing.assert_allclose(nn.GELU()(x).numpy(), expected, rtol=1e-6)
    with pytest.raises(ValueError, match="GELU: approximate must be 'none' or 'tanh'"):
        nn.GELU("fast")


# ---- init -------------------------------------------------------------------------------------
def _std_within(values, std, rel=0.03):
    return abs(values.std() - std) < rel * std


def test_init_fans_and_gains_follow_pytorch_formulas():
    ta.manual_seed(2)
    w = ta.zeros(200, 100, 3)  # fan_in = 300, fan_out = 600
    bound = math.sqrt(6 / 900)
    assert np.abs(nn.init.xavier_uniform_(w).numpy()).max() <= bound
    assert _std_within(w.numpy(), bound / math.sqrt(3))
    assert _std_within(nn.init.xavier_normal_(w, gain=2.0).numpy(), 2 * math.sqrt(2 / 900))
    relu_bound = math.sqrt(2) * math.sqrt(3 / 300)
    out = nn.init.kaiming_uniform_(w, nonlinearity="relu").numpy()
    assert np.abs(out).max() <= relu_bound and np.abs(out).max() > 0.99 * relu_bound
    std = nn.init.kaiming_normal_(w, mode="fan_out").numpy().std()  # leaky_relu slope 0
    assert abs(std - math.sqrt(2 / 600)) < 0.03 * math.sqrt(2 / 600)
    assert nn.init.calculate_gain("tanh") == 5 / 3
    assert nn.init.calculate_gain("leaky_relu", 0.2) == math.sqrt(2 / 1.04)


def test_init_fills_in_place_keeping_dtype_and_identity():
    p = nn.Parameter(np.zeros((3, 4), np.float32))
    data = p.numpy()
    assert nn.init.normal_(p, mean=1.0, std=0.0) is p
    assert p.numpy() is data and p.dtype == np.float32 and (p.numpy() == 1.0).all()
    assert nn.init.constant_(p, 0.25).numpy().tolist() == [[0.25] * 4] * 3
    assert not nn.init.zeros_(p).numpy().any() and (nn.init.ones_(p).numpy() == 1).all()
    values = nn.init.uniform_(p, -3.0, -2.0).numpy()
    assert ((values >= -3) & (values < -2)).all()


def test_init_is_repeatable_under_manual_seed():
    ta.manual_seed(4)
    first = nn.Linear(6, 5).state_dict()
    ta.manual_seed(4)
    second = nn.Linear(6, 5).state_dict()
    assert all((first[k].numpy() == second[k].numpy()).all() for k in first)


def test_init_errors_name_the_function():
    with pytest.raises(ValueError, match="xavier_uniform_: fan in and fan out need .* 2 dims"):
        nn.init.xavier_uniform_(ta.zeros(5))
    with pytest.raises(ValueError, match="kaiming_uniform_: mode must be"):
        nn.init.kaiming_uniform_(ta.zeros(2, 2), mode="fan_avg")
    with pytest.raises(TypeError, match="normal_: expected a float Tensor"):
        nn.init.normal_(ta.tensor([1, 2]))
    with pytest.raises(ValueError, match="unsupported nonlinearity"):
        nn.init.calculate_gain("swish")


def test_double_converts_layer_parameters_to_float64():
    net = nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4), nn.GELU(), nn.Embedding(3, 2))
    assert all(p.dtype == np.float32 for p in net.parameters())
    net.double()
    assert all(p.dtype == np.float64 for p in net.parameters())
    assert net[1](net[0](ta.ones(2, 3, dtype="float64"))).dtype == np.float64

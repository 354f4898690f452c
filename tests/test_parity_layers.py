"""PyTorch parity of the basic layers and functional ops, in float64 with weights copied over:
forward values and every gradient (inputs and parameters) agree to 1e-8 relative; dropout
and init are compared by their statistics and by PyTorch's formulas."""

import math

import numpy as np
import pytest

import tinyattn as ta
from tinyattn import nn

torch = pytest.importorskip("torch")


def assert_close(ours, theirs, rel=1e-8):
    """Elementwise agreement to ``rel`` relative to the largest magnitude of ``theirs``."""
    ours = ours.numpy() if isinstance(ours, ta.Tensor) else np.asarray(ours)
    theirs = theirs.detach().numpy() if isinstance(theirs, torch.Tensor) else theirs
    assert ours.shape == theirs.shape
    scale = max(float(np.abs(theirs).max(initial=0.0)), 1e-300)
    np.testing.assert_allclose(ours, theirs, rtol=rel, atol=rel * scale)


def pair(array):
    """The same float64 values as a tinyattn leaf and a torch leaf, both requiring grad."""
    return (ta.tensor(array, dtype="float64", requires_grad=True),
            torch.tensor(array, dtype=torch.float64, requires_grad=True))


def copy_parameters(ours, theirs):
    """Load the torch module's parameters into ours (same names, same layouts)."""
    ours.double()
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})


def backward_both(out_ours, out_theirs, seed=0):
    cotangent = np.random.default_rng(seed).normal(size=out_theirs.shape)
    out_ours.backward(ta.tensor(cotangent, dtype="float64"))
    out_theirs.backward(torch.tensor(cotangent))


def test_linear_matches_torch():
    theirs = torch.nn.Linear(5, 3).double()
    ours = nn.Linear(5, 3)
    copy_parameters(ours, theirs)
    x, tx = pair(np.random.default_rng(1).normal(size=(2, 4, 5)))
    y, ty = ours(x), theirs(tx)
    assert_close(y, ty)
    backward_both(y, ty)
    assert_close(x.grad, tx.grad)
    assert_close(ours.weight.grad, theirs.weight.grad)
    assert_close(ours.bias.grad, theirs.bias.grad)


def test_embedding_with_padding_idx_matches_torch():
    theirs = torch.nn.Embedding(6, 4, padding_idx=-2).double()
    ours = nn.Embedding(6, 4, padding_idx=-2)
    assert ours.padding_idx == theirs.padding_idx == 4
    copy_parameters(ours, theirs)
    indices = np.array([[0, 4, 4, 5], [1, 1, 4, 2]])
    y, ty = ours(ta.tensor(indices)), theirs(torch.tensor(indices))
    assert_close(y, ty)
    backward_both(y, ty)
    assert_close(ours.weight.grad, theirs.weight.grad)


def test_embedding_init_matches_torch_padding_row_and_distribution():
    torch.manual_seed(0)
    ta.manual_seed(0)
    theirs = torch.nn.Embedding(3000, 8, padding_idx=3).weight.detach().numpy()
    ours = nn.Embedding(3000, 8, padding_idx=3).weight.numpy()
    assert not ours[3].any() and not theirs[3].any()
    assert abs(ours.std() - theirs.std()) < 0.03 and abs(ours.mean() - theirs.mean()) < 0.03


@pytest.mark.parametrize("shape", [(4,), (3, 4)])
def test_layer_norm_matches_torch_including_constant_rows(shape):
    theirs = torch.nn.LayerNorm(shape, eps=1e-5).double()
    with torch.no_grad():
        theirs.weight.normal_()
        theirs.bias.normal_()
    ours = nn.LayerNorm(shape)
    copy_parameters(ours, theirs)
    data = np.random.default_rng(2).normal(3.0, 2.0, size=(2, 5) + shape)
    data[0, 1] = 7.25  # a constant row: var = 0, finite output and gradients
    x, tx = pair(data)
    y, ty = ours(x), theirs(tx)
    assert_close(y, ty)
    backward_both(y, ty)
    assert_close(x.grad, tx.grad)
    assert_close(ours.weight.grad, theirs.weight.grad)
    assert_close(ours.bias.grad, theirs.bias.grad)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_matches_torch(approximate):
    x, tx = pair(np.linspace(-8, 8, 97).reshape(1, 97))
    y = nn.GELU(approximate)(x)
    ty = torch.nn.GELU(approximate)(tx)
    assert_close(y, ty)
    backward_both(y, ty)
    assert_close(x.grad, tx.grad)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.25])
def test_cross_entropy_matches_torch(reduction, smoothing):
    logits = np.random.default_rng(3).normal(size=(7, 5)) * 4
    logits[2] = [1e4, -1e4, 0.0, 5.0, -1e4]
    logits[5] = [-1e4, 1e4, 1e4, -1e4, 0.0]
    target = np.array([1, -1, 1, 4, 0, 2, -1])
    x, tx = pair(logits)
    kwargs = dict(ignore_index=-1, reduction=reduction, label_smoothing=smoothing)
    y = ta.F.cross_entropy(x, ta.tensor(target), **kwargs)
    ty = torch.nn.functional.cross_entropy(tx, torch.tensor(target), **kwargs)
    assert np.isfinite(y.numpy()).all()
    assert_close(y, ty)
    backward_both(y, ty)
    assert_close(x.grad, tx.grad)


@pytest.mark.parametrize("shape, target", [((4,), 2), ((2, 4, 3), [[0, 3, 1], [2, 2, -100]])])
def test_cross_entropy_one_sample_and_extra_dims_match_torch(shape, target):
    x, tx = pair(np.random.default_rng(4).normal(size=shape))
    y = ta.F.cross_entropy(x, ta.tensor(target), label_smoothing=0.1)
    ty = torch.nn.functional.cross_entropy(tx, torch.tensor(target), label_smoothing=0.1)
    assert_close(y, ty)
    backward_both(y, ty)
    assert_close(x.grad, tx.grad)


def test_cross_entropy_with_every_target_ignored_matches_torch():
    x, tx = pair(np.ones((2, 3)))
    y = ta.F.cross_entropy(x, ta.tensor([-100, -100]))
    ty = torch.nn.functional.cross_entropy(tx, torch.tensor([-100, -100]))
    assert math.isnan(y.item()) and math.isnan(ty.item())
    y.backward()
    ty.backward()
    assert_close(x.grad, tx.grad)


def test_dropout_train_and_eval_semantics_match_torch():
    p = 0.3
    ta.manual_seed(0)
    torch.manual_seed(0)
    ours = nn.Dropout(p)(ta.ones(20000, dtype="float64")).numpy()
    theirs = torch.nn.Dropout(p)(torch.ones(20000, dtype=torch.float64)).numpy()
    assert set(np.unique(ours)) == set(np.unique(theirs)) == {0.0, 1 / (1 - p)}
    # the dropped fraction of 20000 Bernoulli(p) draws has std 0.0032 around p
    assert abs((ours == 0).mean() - p) < 0.015 and abs((theirs == 0).mean() - p) < 0.015
    x = ta.randn(3, 4)
    assert (nn.Dropout(p).eval()(x).numpy() == x.numpy()).all()
    tx = torch.tensor(x.numpy())
    assert (torch.nn.Dropout(p).eval()(tx).numpy() == x.numpy()).all()
    assert not ta.F.dropout(ta.ones(5), p=1.0).numpy().any()
    assert not torch.nn.functional.dropout(torch.ones(5), p=1.0).numpy().any()


def test_linear_init_bounds_and_std_match_torch():
    torch.manual_seed(0)
    ta.manual_seed(0)
    theirs, ours = torch.nn.Linear(100, 300), nn.Linear(100, 300)
    bound = 1 / math.sqrt(100)
    for name in ("weight", "bias"):
        t = getattr(theirs, name).detach().numpy()
        o = getattr(ours, name).numpy()
        assert np.abs(o).max() <= bound and np.abs(t).max() <= bound
        assert abs(o.std() - t.std()) < 0.1 * bound


@pytest.mark.parametrize("nonlinearity, param", [
    ("linear", None), ("sigmoid", None), ("tanh", None), ("relu", None), ("leaky_relu", None),
    ("leaky_relu", 0.3), ("selu", None),
])
def test_calculate_gain_matches_torch(nonlinearity, param):
    assert nn.init.calculate_gain(nonlinearity, param) == pytest.approx(
        torch.nn.init.calculate_gain(nonlinearity, param), rel=1e-12)


@pytest.mark.parametrize("name, kwargs", [
    ("xavier_uniform_", {"gain": 1.5}),
    ("xavier_normal_", {}),
    ("kaiming_uniform_", {"a": math.sqrt(5)}),
    ("kaiming_uniform_", {"mode": "fan_out", "nonlinearity": "relu"}),
    ("kaiming_normal_", {"nonlinearity": "tanh"}),
])
def test_init_distributions_match_torch(name, kwargs):
    shape = (120, 40, 3)
    torch.manual_seed(1)
    ta.manual_seed(1)
    theirs = getattr(torch.nn.init, name)(torch.empty(shape, dtype=torch.float64), **kwargs)
    ours = getattr(nn.init, name)(ta.zeros(shape, dtype="float64"), **kwargs).numpy()
    theirs = theirs.numpy()
    assert abs(ours.std() - theirs.std()) < 0.03 * theirs.std()  # 14400 samples each
    if "uniform" in name:
        assert abs(np.abs(ours).max() - np.abs(theirs).max()) < 0.01 * np.abs(theirs).max()


@pytest.mark.parametrize("shape", [(3, 4), (5, 3, 2), (2, 3, 4, 5), (7, 1), (0, 3)])
def test_fan_in_and_fan_out_match_torch(shape):
    ours = nn.init._calculate_fan_in_and_fan_out(ta.zeros(*shape))
    assert ours == torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(shape))
    with pytest.raises(ValueError, match="at least 2 dims"):
        nn.init._calculate_fan_in_and_fan_out(ta.zeros(4))
    with pytest.raises(ValueError):
        torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(4))


@pytest.mark.parametrize("mean, std, a, b", [
    (0.0, 1.0, -2.0, 2.0), (0.0, 0.02, -0.04, 0.04), (0.5, 1.0, 1.0, 1.5), (0.0, 0.02, -2, 2),
])
def test_trunc_normal_matches_torchs_distribution(mean, std, a, b):
    torch.manual_seed(0)
    ta.manual_seed(0)
    shape = (400, 500)
    theirs = torch.nn.init.trunc_normal_(torch.empty(shape, dtype=torch.float64), mean, std, a,
                                         b).numpy()
    ours = nn.init.trunc_normal_(ta.zeros(*shape, dtype="float64"), mean, std, a, b).numpy()
    assert ours.min() >= a and ours.max() <= b and theirs.min() >= a and theirs.max() <= b
    spread = theirs.std()
    standard_error = spread / math.sqrt(ours.size)
    assert abs(ours.mean() - theirs.mean()) < 7 * standard_error  # two samples: √2 · 5σ
    assert abs(ours.std() - spread) < 7 * standard_error


@pytest.mark.parametrize("name, kwargs", [
    ("Identity", {}), ("ReLU", {}), ("Tanh", {}), ("Sigmoid", {}), ("SiLU", {}),
    ("Softmax", {"dim": 1}), ("LogSoftmax", {"dim": -1}), ("GELU", {"approximate": "tanh"}),
])
def test_activation_modules_match_torch(name, kwargs):
    x, tx = pair(np.random.default_rng(5).normal(size=(3, 4, 5)) * 3)
    y = getattr(nn, name)(**kwargs)(x)
    ty = getattr(torch.nn, name)(**kwargs)(tx)
    assert_close(y, ty)
    if name != "Identity":
        backward_both(y, ty)
        assert_close(x.grad, tx.grad)

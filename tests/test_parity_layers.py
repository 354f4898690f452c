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


# kurtosis μ₄/σ⁴ and the probability of falling within one std of the mean
SHAPES = {"normal": (3.0, math.erf(1 / math.sqrt(2))),  # 0.6827
          "uniform": (9 / 5, 1 / math.sqrt(3))}  # U(−b, b): σ = b/√3, so 0.5774


def assert_sample_of(values, kind, mean, std, sigmas=5):
    """``values`` look like ``n`` independent draws from a ``kind`` distribution of this mean
    and std: the sample mean within ``sigmas`` standard errors ``std / √n`` of ``mean``, the
    sample std within ``sigmas`` standard errors ``√((μ₄ − σ⁴) / (4 σ² n))`` of ``std``
    (``std / √(2n)`` for a normal, ``std / √(5n)`` for a uniform), and the fraction within one
    ``std`` of the mean within ``sigmas`` standard errors ``√(p (1 − p) / n)`` of its
    probability ``p`` (which tells a normal from a uniform of the same std)."""
    values = np.asarray(values, dtype=np.float64).ravel()
    n = values.size
    kurtosis, p = SHAPES[kind]
    assert abs(values.mean() - mean) < sigmas * std / math.sqrt(n), (values.mean(), mean)
    std_error = std * math.sqrt((kurtosis - 1) / (4 * n))
    assert abs(values.std() - std) < sigmas * std_error, (values.std(), std, std_error)
    fraction = np.mean(np.abs(values - mean) < std)
    assert abs(fraction - p) < sigmas * math.sqrt(p * (1 - p) / n), (fraction, p)


def test_embedding_init_matches_torch_padding_row_and_distribution():
    # N(0, 1) with the padding row zeroed, as torch draws it. 20000 × 16 draws: the standard
    # errors of the mean and std are 0.0018 and 0.0013, so the 5σ tolerances are 0.9% and 0.6%
    # of the std; the fraction within one std (0.6827 for a normal, 0.5774 for a uniform of the
    # same std) has standard error 0.0008.
    torch.manual_seed(0)
    ta.manual_seed(0)
    theirs = torch.nn.Embedding(20000, 16, padding_idx=3).weight.detach().numpy()
    ours = nn.Embedding(20000, 16, padding_idx=3).weight.numpy()
    assert not ours[3].any() and not theirs[3].any()
    for table in (ours, theirs):
        assert_sample_of(np.delete(table, 3, axis=0), "normal", 0.0, 1.0)


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
    # torch: weight kaiming_uniform_(a=√5), gain √(2 / (1 + 5)) = 1/√3, so U(−b, b) with
    # b = gain · √(3 / fan_in) = 1/√fan_in; bias U(−b, b) with the same b. 20000 outputs give
    # 2e6 weights and 2e4 biases: the sample std's standard error is 1/√(5n) of the std, 0.032%
    # and 0.32%, so the 5σ tolerances are 0.16% and 1.6%, where a = √6 (b · √(6/7), the std
    # 7.4% smaller) is 234σ and 23σ off. The largest |value| of n uniform draws falls below
    # b (1 − ε) with probability (1 − ε)ⁿ: e^-20 for ε = 1e-5 and 1e-3 (b · √(6/7) is 7.4% below).
    torch.manual_seed(0)
    ta.manual_seed(0)
    fan_in, outputs = 100, 20000
    theirs, ours = torch.nn.Linear(fan_in, outputs), nn.Linear(fan_in, outputs)
    bound = 1 / math.sqrt(fan_in)
    for name, epsilon in (("weight", 1e-5), ("bias", 1e-3)):
        for values in (getattr(theirs, name).detach().numpy(), getattr(ours, name).numpy()):
            assert bound * (1 - epsilon) <= np.abs(values).max() <= bound
            assert_sample_of(values, "uniform", 0.0, bound / math.sqrt(3))


@pytest.mark.parametrize("nonlinearity, param", [
    ("linear", None), ("sigmoid", None), ("tanh", None), ("relu", None), ("leaky_relu", None),
    ("leaky_relu", 0.3), ("selu", None),
])
def test_calculate_gain_matches_torch(nonlinearity, param):
    assert nn.init.calculate_gain(nonlinearity, param) == pytest.approx(
        torch.nn.init.calculate_gain(nonlinearity, param), rel=1e-12)


# shape (120, 40, 30): fan_in = 40 · 30 = 1200, fan_out = 120 · 30 = 3600; the std each
# initialiser's formula gives (PyTorch's documentation of torch.nn.init)
FAN_IN, FAN_OUT = 1200, 3600


@pytest.mark.parametrize("name, kwargs, std", [
    ("xavier_uniform_", {"gain": 1.5}, 1.5 * math.sqrt(2 / (FAN_IN + FAN_OUT))),
    ("xavier_normal_", {}, math.sqrt(2 / (FAN_IN + FAN_OUT))),
    ("kaiming_uniform_", {"a": math.sqrt(5)}, math.sqrt(2 / (1 + 5)) / math.sqrt(FAN_IN)),
    ("kaiming_uniform_", {"mode": "fan_out", "nonlinearity": "relu"},
     math.sqrt(2) / math.sqrt(FAN_OUT)),
    ("kaiming_normal_", {"nonlinearity": "tanh"}, 5 / 3 / math.sqrt(FAN_IN)),
], ids=["xavier_uniform", "xavier_normal", "kaiming_uniform_a", "kaiming_uniform_fan_out",
        "kaiming_normal"])
def test_init_distributions_match_torch(name, kwargs, std):
    # 144000 draws each: the 5σ tolerance of the sample std is 0.6% (uniform) or 0.9% (normal)
    # of the std; the largest |value| of a uniform falls below √3 std · (1 − 1.5e-4) with
    # probability (1 − 1.5e-4)^144000 = e^-21.6
    shape = (120, 40, 30)
    torch.manual_seed(1)
    ta.manual_seed(1)
    theirs = getattr(torch.nn.init, name)(torch.empty(shape, dtype=torch.float64), **kwargs)
    ours = getattr(nn.init, name)(ta.zeros(shape, dtype="float64"), **kwargs).numpy()
    theirs = theirs.numpy()
    kind = "uniform" if "uniform" in name else "normal"
    for values in (ours, theirs):
        assert_sample_of(values, kind, 0.0, std)
        if kind == "uniform":
            bound = math.sqrt(3) * std
            assert bound * (1 - 1.5e-4) <= np.abs(values).max() <= bound


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

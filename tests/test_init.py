"""``ta.nn.init``: every initialiser works in place, repeats under ``ta.manual_seed``, and draws
from the distribution its formula names (checked by bounds and by sample moments against the
analytic ones, on tensors large enough that the tolerances are several standard errors)."""

import math

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.nn import init


@pytest.fixture(autouse=True)
def _seeded():
    """Deterministic draws: the 5-sigma tolerances below are then checked once, not sampled."""
    ta.manual_seed(0)


def big(shape=(400, 500), dtype=ta.float64):
    return ta.zeros(*shape, dtype=dtype)


def normal_cdf(z):
    return 0.5 * (1 + math.erf(z / math.sqrt(2)))


def normal_pdf(z):
    return math.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)


def z_pdf(z):
    """``z φ(z)``, which tends to 0 at ±inf."""
    return 0.0 if math.isinf(z) else z * normal_pdf(z)


def truncated_moments(mean, std, a, b):
    """Mean and std of N(mean, std²) restricted to [a, b] (the textbook formulas)."""
    alpha, beta = (a - mean) / std, (b - mean) / std
    mass = normal_cdf(beta) - normal_cdf(alpha)
    shift = (normal_pdf(alpha) - normal_pdf(beta)) / mass
    var = 1 + (z_pdf(alpha) - z_pdf(beta)) / mass - shift**2
    return mean + std * shift, std * math.sqrt(var)


@pytest.mark.parametrize("fill", [
    lambda t: init.uniform_(t, -1, 1), lambda t: init.normal_(t), lambda t: init.zeros_(t),
    lambda t: init.ones_(t), lambda t: init.constant_(t, 0.3), lambda t: init.xavier_uniform_(t),
    lambda t: init.xavier_normal_(t), lambda t: init.kaiming_uniform_(t),
    lambda t: init.kaiming_normal_(t), lambda t: init.trunc_normal_(t, std=0.02),
])
def test_every_initialiser_fills_in_place_keeps_the_dtype_and_returns_the_tensor(fill):
    param = ta.nn.Parameter(np.full((30, 20), 7.0, dtype=np.float32))
    array = param.numpy()
    view = ta.nn.Linear(20, 30).state_dict()  # unrelated: a fill must not touch other tensors
    assert fill(param) is param
    assert param.numpy() is array and param.dtype == np.float32
    assert not (array == 7.0).any()
    assert all(v.dtype == np.float32 for v in view.values())


def test_initialisers_repeat_under_manual_seed_and_under_a_given_generator():
    for fill in (init.normal_, init.uniform_, init.xavier_uniform_, init.kaiming_normal_,
                 init.trunc_normal_):
        ta.manual_seed(3)
        first = fill(big((20, 10))).numpy()
        ta.manual_seed(3)
        second = fill(big((20, 10))).numpy()
        np.testing.assert_array_equal(first, second)
        ta.manual_seed(3)
        own = fill(big((20, 10)), generator=np.random.default_rng(5)).numpy()
        after_own = ta.randn(3).numpy()
        ta.manual_seed(3)
        assert (ta.randn(3).numpy() == after_own).all()  # the global stream was not used
        np.testing.assert_array_equal(
            own, fill(big((20, 10)), generator=np.random.default_rng(5)).numpy())


def check_moments(values, mean, std, sigmas=5):
    n = values.size
    assert abs(values.mean() - mean) < sigmas * std / math.sqrt(n)
    # the sample std of n normal-ish draws has standard error about std / sqrt(2 n)
    assert abs(values.std() - std) < sigmas * 1.5 * std / math.sqrt(2 * n)


def test_uniform_and_normal_draw_their_distributions():
    values = init.uniform_(big(), -3.0, 5.0).numpy()
    assert values.min() >= -3.0 and values.max() < 5.0
    check_moments(values, 1.0, 8 / math.sqrt(12))
    check_moments(init.normal_(big(), mean=2.0, std=0.5).numpy(), 2.0, 0.5)
    assert (init.constant_(big((3, 3)), -1.5).numpy() == -1.5).all()


@pytest.mark.parametrize("shape", [(400, 500), (64, 30, 3, 3)])
@pytest.mark.parametrize("gain", [1.0, 5 / 3])
def test_xavier_bounds_and_std_follow_the_fans(shape, gain):
    receptive = math.prod(shape[2:])
    fan_in, fan_out = shape[1] * receptive, shape[0] * receptive
    assert init._calculate_fan_in_and_fan_out(ta.zeros(*shape)) == (fan_in, fan_out)
    bound = gain * math.sqrt(6 / (fan_in + fan_out))
    values = init.xavier_uniform_(ta.zeros(*shape, dtype=ta.float64), gain=gain).numpy()
    assert np.abs(values).max() <= bound and np.abs(values).max() > 0.999 * bound
    check_moments(values, 0.0, bound / math.sqrt(3))
    std = gain * math.sqrt(2 / (fan_in + fan_out))
    check_moments(init.xavier_normal_(ta.zeros(*shape, dtype=ta.float64), gain=gain).numpy(),
                  0.0, std)


@pytest.mark.parametrize("a, mode, nonlinearity, gain", [
    (0.0, "fan_in", "leaky_relu", math.sqrt(2 / (1 + 0.0**2))),
    (math.sqrt(5), "fan_in", "leaky_relu", math.sqrt(2 / 6)),
    (0.0, "fan_out", "relu", math.sqrt(2)),
    (0.0, "FAN_OUT", "tanh", 5 / 3),
    (0.2, "fan_in", "linear", 1.0),
])
def test_kaiming_bounds_and_std_follow_gain_and_fan(a, mode, nonlinearity, gain):
    shape = (500, 400)
    fan = 400 if mode.lower() == "fan_in" else 500
    std = gain / math.sqrt(fan)
    values = init.kaiming_uniform_(big(shape), a=a, mode=mode, nonlinearity=nonlinearity)
    bound = math.sqrt(3) * std
    assert np.abs(values.numpy()).max() <= bound
    check_moments(values.numpy(), 0.0, bound / math.sqrt(3))
    values = init.kaiming_normal_(big(shape), a=a, mode=mode, nonlinearity=nonlinearity)
    check_moments(values.numpy(), 0.0, std)


@pytest.mark.parametrize("mean, std, a, b", [
    (0.0, 1.0, -2.0, 2.0),      # the default: most of the mass, normal proposals
    (0.0, 0.02, -0.04, 0.04),   # two std either side
    (0.5, 1.0, 1.0, 1.5),       # a narrow band off the mean: uniform proposals
    (0.0, 1.0, 3.0, 4.0),       # a tail
    (0.0, 1.0, 0.0, math.inf),  # half-normal
])
@pytest.mark.filterwarnings("ignore:mean is more than 2 std")
def test_trunc_normal_stays_in_bounds_and_has_the_truncated_moments(mean, std, a, b):
    values = init.trunc_normal_(big(), mean=mean, std=std, a=a, b=b).numpy().ravel()
    assert values.min() >= a and values.max() <= b
    expected_mean, expected_std = truncated_moments(mean, std, a, b)
    check_moments(values, expected_mean, expected_std)
    # the empirical CDF at the quartiles of the truncated law
    alpha, beta = normal_cdf((a - mean) / std), normal_cdf((b - mean) / std)
    sorted_values = np.sort(values)
    for q in (0.25, 0.5, 0.75):
        quantile = sorted_values[int(q * values.size)]
        cdf = (normal_cdf((quantile - mean) / std) - alpha) / (beta - alpha)
        assert abs(cdf - q) < 5 * math.sqrt(q * (1 - q) / values.size)


def test_trunc_normal_absolute_bounds_barely_truncate_a_small_std():
    values = init.trunc_normal_(big(), std=0.02).numpy()  # [-2, 2] is 100 std away
    check_moments(values, 0.0, 0.02)


def test_trunc_normal_warns_like_torch_when_the_mean_is_far_outside():
    with pytest.warns(UserWarning, match="mean is more than 2 std from"):
        init.trunc_normal_(big((10, 10)), mean=5.0, std=1.0, a=-1.0, b=1.0)


@pytest.mark.parametrize("call, error, pattern", [
    (lambda t: init.trunc_normal_(t, std=0.0), ValueError, r"trunc_normal_: std must be > 0"),
    (lambda t: init.trunc_normal_(t, a=1.0, b=1.0), ValueError, r"expected a < b, got a=1.0"),
    (lambda t: init.trunc_normal_(t, a=10.0, b=11.0), ValueError,
     r"\[a, b\] = \[10.0, 11.0\] holds only .* too far in the tail"),
    (lambda t: init.trunc_normal_(t, a=-math.inf, b=-3.0), ValueError, r"\(or unbounded\)"),
    (lambda t: init.trunc_normal_(t, std=float("nan")), ValueError,
     r"std must be a finite number, got nan"),
    (lambda t: init.uniform_(t, 1.0, 0.0), ValueError, r"uniform_: expected a <= b"),
    (lambda t: init.normal_(t, std=-1.0), ValueError, r"normal_: std must be >= 0"),
    (lambda t: init.normal_(t, generator=0), TypeError,
     r"normal_: generator must be a numpy.random.Generator or None, got int"),
    (lambda t: init.kaiming_uniform_(t, mode="fan_avg"), ValueError,
     r"kaiming_uniform_: mode must be 'fan_in' or 'fan_out', got 'fan_avg'"),
    (lambda t: init.kaiming_normal_(t, nonlinearity="swish"), ValueError,
     r"calculate_gain: unsupported nonlinearity 'swish'"),
    (lambda t: init.xavier_uniform_(ta.zeros(5)), ValueError,
     r"xavier_uniform_: fan in and fan out need a tensor of at least 2 dims, got shape \(5,\)"),
    (lambda t: init.normal_(ta.arange(4)), TypeError,
     r"normal_: expected a float Tensor or Parameter, got Tensor of dtype int64"),
    (lambda t: init.zeros_(np.zeros(3)), TypeError, r"zeros_: expected a float Tensor"),
])
@pytest.mark.filterwarnings("ignore:mean is more than 2 std")
def test_bad_arguments_are_clear_errors(call, error, pattern):
    tensor = big((4, 4))
    with pytest.raises(error, match=pattern):
        call(tensor)
    assert not tensor.numpy().any()


def test_zero_element_tensors_are_left_alone():
    empty = ta.zeros(0, 3)
    assert init.kaiming_uniform_(empty).shape == (0, 3)
    assert init.xavier_normal_(empty).shape == (0, 3)
    assert init.trunc_normal_(empty).shape == (0, 3)

"""Parameter initialisation, in place, with ``torch.nn.init``'s names, defaults, fans and gains.

Every function overwrites the tensor's values in place (keeping its dtype, so views of it such as
a state dict see the new values) and returns the tensor. Random values are drawn from
:func:`tinyattn.random.generator`, so ``ta.manual_seed`` repeats an initialisation, or from the
``generator`` argument (a ``numpy.random.Generator``) when one is given. For a weight of shape
``(out, in, *kernel)``, ``fan_in = in · Π kernel`` and ``fan_out = out · Π kernel``, as in
PyTorch.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import numpy as np

from .. import random
from ..tensor import Tensor
from ..validation import check_number

__all__ = [
    "calculate_gain", "constant_", "kaiming_normal_", "kaiming_uniform_", "normal_", "ones_",
    "trunc_normal_", "uniform_", "xavier_normal_", "xavier_uniform_", "zeros_",
]

_LINEAR_GAINS = ("linear", "identity", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
                 "conv_transpose2d", "conv_transpose3d", "sigmoid")

# trunc_normal_ samples by rejection; below this acceptance rate it refuses rather than loop.
_MIN_ACCEPTANCE = 1e-4


def _writable(op: str, tensor: Tensor) -> np.ndarray:
    """The float array behind ``tensor``, or a TypeError naming ``op``."""
    if not isinstance(tensor, Tensor) or tensor.dtype.kind != "f":
        raise TypeError(f"{op}: expected a float Tensor or Parameter, got "
                        f"{type(tensor).__name__} of dtype {getattr(tensor, 'dtype', None)}")
    return tensor.numpy()


def _fill(op: str, tensor: Tensor, values: np.ndarray | float) -> Tensor:
    _writable(op, tensor)[...] = values
    return tensor


def _source(op: str, generator: np.random.Generator | None) -> np.random.Generator:
    """``generator``, or tinyattn's global generator when it is None."""
    if generator is None:
        return random.generator()
    if not isinstance(generator, np.random.Generator):
        raise TypeError(f"{op}: generator must be a numpy.random.Generator or None, got "
                        f"{type(generator).__name__}")
    return generator


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain for a nonlinearity, as ``torch.nn.init.calculate_gain``.

    1 for linear layers and sigmoid, 5/3 for tanh, √2 for relu, √(2 / (1 + slope²)) for
    leaky_relu (slope ``param``, default 0.01), 3/4 for selu.

    Examples
    --------
    >>> round(calculate_gain("relu"), 6)
    1.414214
    """
    if nonlinearity in _LINEAR_GAINS:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3.0
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        slope = check_number("calculate_gain", "negative slope", slope)
        return math.sqrt(2.0 / (1.0 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4.0
    raise ValueError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}")


def _calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    """``(fan_in, fan_out)`` of a weight of shape ``(out, in, *kernel)``, as PyTorch's
    function of the same name.

    Examples
    --------
    >>> import tinyattn as ta
    >>> ta.nn.init._calculate_fan_in_and_fan_out(ta.zeros(16, 3, 5, 5))
    (75, 400)
    """
    return _fans("_calculate_fan_in_and_fan_out", tensor)


def _fans(op: str, tensor: Tensor) -> tuple[int, int]:
    shape = _writable(op, tensor).shape
    if len(shape) < 2:
        raise ValueError(f"{op}: fan in and fan out need a tensor of at least 2 dims, got "
                         f"shape {shape}")
    receptive_field = math.prod(shape[2:])
    return shape[1] * receptive_field, shape[0] * receptive_field


def _kaiming_std(op: str, tensor: Tensor, a: float, mode: str, nonlinearity: str) -> float:
    if not isinstance(mode, str) or mode.lower() not in ("fan_in", "fan_out"):
        raise ValueError(f"{op}: mode must be 'fan_in' or 'fan_out', got {mode!r}")
    fan_in, fan_out = _fans(op, tensor)
    fan = fan_in if mode.lower() == "fan_in" else fan_out
    return calculate_gain(nonlinearity, a) / math.sqrt(max(fan, 1))  # fan 0: no elements


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0,
             generator: np.random.Generator | None = None) -> Tensor:
    """Fill ``tensor`` with samples of U(a, b).

    Examples
    --------
    >>> import tinyattn as ta
    >>> w = ta.nn.init.uniform_(ta.zeros(100), -0.5, 0.5)
    >>> bool((w.numpy() >= -0.5).all() and (w.numpy() < 0.5).all())
    True
    """
    check_number("uniform_", "a", a)
    check_number("uniform_", "b", b)
    if not a <= b:
        raise ValueError(f"uniform_: expected a <= b, got a={a} and b={b}")
    shape = _writable("uniform_", tensor).shape
    return _fill("uniform_", tensor, _source("uniform_", generator).uniform(a, b, size=shape))


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0,
            generator: np.random.Generator | None = None) -> Tensor:
    """Fill ``tensor`` with samples of N(mean, std²).

    Examples
    --------
    >>> import tinyattn as ta
    >>> ta.nn.init.normal_(ta.zeros(2, 3), std=0.02).shape
    (2, 3)
    """
    check_number("normal_", "mean", mean)
    check_number("normal_", "std", std)
    if not std >= 0:
        raise ValueError(f"normal_: std must be >= 0, got {std}")
    shape = _writable("normal_", tensor).shape
    return _fill("normal_", tensor, _source("normal_", generator).normal(mean, std, size=shape))


def _normal_cdf(z: float) -> float:
    return 0.5 * (1.0 + math.erf(z / math.sqrt(2.0)))


def _rejection_sample(count: int, draw: Callable[[int], np.ndarray],
                      acceptance: float) -> np.ndarray:
    """``count`` accepted samples; ``draw(n)`` makes ``n`` proposals and returns the accepted
    ones (in order), about ``n · acceptance`` of them."""
    values = np.empty(count)
    filled = 0
    while filled < count:
        needed = count - filled
        accepted = draw(int(needed / acceptance * 1.1) + 16)[:needed]
        values[filled:filled + len(accepted)] = accepted
        filled += len(accepted)
    return values


def trunc_normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0,
                  b: float = 2.0, generator: np.random.Generator | None = None) -> Tensor:
    """Fill ``tensor`` with samples of N(mean, std²) restricted to ``[a, b]``.

    ``a`` and ``b`` are absolute bounds, not multiples of ``std`` (as in PyTorch: the default
    ``[-2, 2]`` barely truncates ``std=0.02``). Values are sampled by rejection: from the
    normal itself when ``[a, b]`` holds more than 30 % of it, otherwise uniformly on ``[a, b]``
    with acceptance proportional to the normal density (PyTorch warns, and so does this, when
    ``mean`` is more than 2 std outside ``[a, b]``).

    Examples
    --------
    >>> import tinyattn as ta
    >>> w = ta.nn.init.trunc_normal_(ta.zeros(1000), std=0.02, a=-0.04, b=0.04)
    >>> bool(abs(w.numpy()).max() <= 0.04)
    True
    """
    op = "trunc_normal_"
    for key, value in (("mean", mean), ("std", std), ("a", a), ("b", b)):
        check_number(op, key, value, finite=False)
    if not std > 0:
        raise ValueError(f"{op}: std must be > 0, got {std}")
    if not a < b:
        raise ValueError(f"{op}: expected a < b, got a={a} and b={b}")
    shape = _writable(op, tensor).shape
    rng = _source(op, generator)
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The "
                      "distribution of values may be incorrect.", stacklevel=2)
    mass = _normal_cdf((b - mean) / std) - _normal_cdf((a - mean) / std)
    if mass > 0.3:
        def draw(n: int) -> np.ndarray:
            proposals = rng.normal(mean, std, n)
            return proposals[(proposals >= a) & (proposals <= b)]

        acceptance = mass
    else:
        # Uniform proposals on [a, b], accepted with probability density / peak density.
        peak_z = (min(max(mean, a), b) - mean) / std
        peak_density = math.exp(-0.5 * peak_z**2) / (std * math.sqrt(2 * math.pi))
        acceptance = mass / ((b - a) * peak_density) if math.isfinite(b - a) else 0.0
        if not acceptance >= _MIN_ACCEPTANCE:
            raise ValueError(f"{op}: [a, b] = [{a}, {b}] holds only {mass:.3g} of "
                             f"N({mean}, {std}²); it is too far in the tail (or unbounded) to "
                             "sample by rejection")

        def draw(n: int) -> np.ndarray:
            proposals = rng.uniform(a, b, n)
            log_ratio = -0.5 * ((proposals - mean) / std) ** 2 + 0.5 * peak_z**2
            return proposals[np.log(rng.random(n)) < log_ratio]

    values = _rejection_sample(math.prod(shape), draw, acceptance)
    return _fill(op, tensor, values.reshape(shape))


def constant_(tensor: Tensor, val: float) -> Tensor:
    """Fill ``tensor`` with ``val``.

    Examples
    --------
    >>> import tinyattn as ta
    >>> ta.nn.init.constant_(ta.zeros(2), 0.5).tolist()
    [0.5, 0.5]
    """
    return _fill("constant_", tensor, val)


def _filler(name: str, value: float) -> Callable[[Tensor], Tensor]:
    """The initialiser ``name``: fill a tensor with ``value`` (``constant_(tensor, value)``)."""

    def fill(tensor: Tensor) -> Tensor:
        return _fill(name, tensor, value)

    fill.__name__ = fill.__qualname__ = name
    fill.__doc__ = f"""Fill ``tensor`` with {value:g}.

    Examples
    --------
    >>> import tinyattn as ta
    >>> ta.nn.init.{name}(ta.full((2,), 7.0)).tolist()
    [{value}, {value}]
    """
    return fill


zeros_ = _filler("zeros_", 0.0)
ones_ = _filler("ones_", 1.0)


def xavier_uniform_(tensor: Tensor, gain: float = 1.0,
                    generator: np.random.Generator | None = None) -> Tensor:
    """Glorot uniform: U(−bound, bound), ``bound = gain · √(6 / (fan_in + fan_out))``.

    Examples
    --------
    >>> import tinyattn as ta
    >>> w = ta.nn.init.xavier_uniform_(ta.zeros(4, 2))
    >>> bool(abs(w.numpy()).max() <= 1.0)
    True
    """
    op = "xavier_uniform_"
    fan_in, fan_out = _fans(op, tensor)
    bound = gain * math.sqrt(6.0 / max(fan_in + fan_out, 1))  # fans 0: no elements
    return _fill(op, tensor, _source(op, generator).uniform(-bound, bound, tensor.shape))


def xavier_normal_(tensor: Tensor, gain: float = 1.0,
                   generator: np.random.Generator | None = None) -> Tensor:
    """Glorot normal: N(0, std²), ``std = gain · √(2 / (fan_in + fan_out))``.

    Examples
    --------
    >>> import tinyattn as ta
    >>> ta.nn.init.xavier_normal_(ta.zeros(1, 1, 8)).shape
    (1, 1, 8)
    """
    op = "xavier_normal_"
    fan_in, fan_out = _fans(op, tensor)
    std = gain * math.sqrt(2.0 / max(fan_in + fan_out, 1))  # fans 0: no elements
    return _fill(op, tensor, _source(op, generator).normal(0.0, std, tensor.shape))


def kaiming_uniform_(
    tensor: Tensor, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
    generator: np.random.Generator | None = None,
) -> Tensor:
    """He uniform: U(−bound, bound), ``bound = gain · √(3 / fan)``, ``gain`` of the nonlinearity.

    ``a`` is the negative slope of leaky_relu; ``a = √5`` (what ``Linear`` uses) gives
    ``bound = 1 / √fan_in``.

    Examples
    --------
    >>> import tinyattn as ta, math
    >>> w = ta.nn.init.kaiming_uniform_(ta.zeros(8, 16), a=math.sqrt(5))
    >>> bool(abs(w.numpy()).max() <= 1 / math.sqrt(16))
    True
    """
    op = "kaiming_uniform_"
    bound = math.sqrt(3.0) * _kaiming_std(op, tensor, a, mode, nonlinearity)
    return _fill(op, tensor, _source(op, generator).uniform(-bound, bound, tensor.shape))


def kaiming_normal_(
    tensor: Tensor, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
    generator: np.random.Generator | None = None,
) -> Tensor:
    """He normal: N(0, std²), ``std = gain / √fan``, ``gain`` of the nonlinearity.

    Examples
    --------
    >>> import tinyattn as ta
    >>> w = ta.nn.init.kaiming_normal_(ta.zeros(256, 64), mode="fan_out", nonlinearity="relu")
    >>> round(float(w.numpy().std()), 2)    # √2 / √256
    0.09
    """
    op = "kaiming_normal_"
    std = _kaiming_std(op, tensor, a, mode, nonlinearity)
    return _fill(op, tensor, _source(op, generator).normal(0.0, std, tensor.shape))

"""Parameter initialisation, in place, with ``torch.nn.init``'s names, fans and gains.

Every function overwrites ``tensor.data`` in place (keeping its dtype) with values drawn from
:func:`tinyattn.random.generator`, so ``ta.manual_seed`` repeats an initialisation, and returns
the tensor. For a weight of shape ``(out, in, *kernel)``, ``fan_in = in · Π kernel`` and
``fan_out = out · Π kernel``, as in PyTorch.
"""

from __future__ import annotations

import math

import numpy as np

from ..random import generator
from ..tensor import Tensor

__all__ = [
    "calculate_gain", "constant_", "kaiming_normal_", "kaiming_uniform_", "normal_", "ones_",
    "uniform_", "xavier_normal_", "xavier_uniform_", "zeros_",
]

_LINEAR_GAINS = ("linear", "identity", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
                 "conv_transpose2d", "conv_transpose3d", "sigmoid")


def _writable(op: str, tensor: Tensor) -> np.ndarray:
    """The float array behind ``tensor``, or a TypeError naming ``op``."""
    if not isinstance(tensor, Tensor) or tensor.dtype.kind != "f":
        raise TypeError(f"{op}: expected a float Tensor or Parameter, got "
                        f"{type(tensor).__name__} of dtype {getattr(tensor, 'dtype', None)}")
    return tensor.data


def _fill(op: str, tensor: Tensor, values: np.ndarray | float) -> Tensor:
    _writable(op, tensor)[...] = values
    return tensor


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
        if isinstance(slope, bool) or not isinstance(slope, (int, float)):
            raise ValueError(f"calculate_gain: negative slope {slope!r} is not a number")
        return math.sqrt(2.0 / (1.0 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4.0
    raise ValueError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}")


def _fans(op: str, tensor: Tensor) -> tuple[int, int]:
    """``(fan_in, fan_out)`` of a weight of shape ``(out, in, *kernel)``."""
    shape = _writable(op, tensor).shape
    if len(shape) < 2:
        raise ValueError(f"{op}: fan in and fan out need a tensor of at least 2 dims, got "
                         f"shape {shape}")
    receptive_field = math.prod(shape[2:])
    return shape[1] * receptive_field, shape[0] * receptive_field


def _kaiming_std(op: str, tensor: Tensor, a: float, mode: str, nonlinearity: str) -> float:
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"{op}: mode must be 'fan_in' or 'fan_out', got {mode!r}")
    fan_in, fan_out = _fans(op, tensor)
    fan = fan_in if mode == "fan_in" else fan_out
    return calculate_gain(nonlinearity, a) / math.sqrt(max(fan, 1))  # fan 0: no elements


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0) -> Tensor:
    """Fill ``tensor`` with samples of U(a, b).

    Examples
    --------
    >>> import tinyattn as ta
    >>> w = ta.nn.init.uniform_(ta.zeros(100), -0.5, 0.5)
    >>> bool((w.numpy() >= -0.5).all() and (w.numpy() < 0.5).all())
    True
    """
    if not a <= b:
        raise ValueError(f"uniform_: expected a <= b, got a={a} and b={b}")
    shape = _writable("uniform_", tensor).shape
    return _fill("uniform_", tensor, generator().uniform(a, b, size=shape))


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0) -> Tensor:
    """Fill ``tensor`` with samples of N(mean, std²).

    Examples
    --------
    >>> import tinyattn as ta
    >>> ta.nn.init.normal_(ta.zeros(2, 3), std=0.02).shape
    (2, 3)
    """
    if not std >= 0:
        raise ValueError(f"normal_: std must be >= 0, got {std}")
    shape = _writable("normal_", tensor).shape
    return _fill("normal_", tensor, generator().normal(mean, std, size=shape))


def constant_(tensor: Tensor, val: float) -> Tensor:
    """Fill ``tensor`` with ``val``.

    Examples
    --------
    >>> import tinyattn as ta
    >>> ta.nn.init.constant_(ta.zeros(2), 0.5).tolist()
    [0.5, 0.5]
    """
    return _fill("constant_", tensor, val)


def zeros_(tensor: Tensor) -> Tensor:
    """Fill ``tensor`` with 0."""
    return _fill("zeros_", tensor, 0.0)


def ones_(tensor: Tensor) -> Tensor:
    """Fill ``tensor`` with 1."""
    return _fill("ones_", tensor, 1.0)


def xavier_uniform_(tensor: Tensor, gain: float = 1.0) -> Tensor:
    """Glorot uniform: U(−bound, bound), ``bound = gain · √(6 / (fan_in + fan_out))``.

    Examples
    --------
    >>> import tinyattn as ta
    >>> w = ta.nn.init.xavier_uniform_(ta.zeros(4, 2))
    >>> bool(abs(w.numpy()).max() <= 1.0)
    True
    """
    fan_in, fan_out = _fans("xavier_uniform_", tensor)
    bound = gain * math.sqrt(6.0 / max(fan_in + fan_out, 1))  # fans 0: no elements
    return _fill("xavier_uniform_", tensor, generator().uniform(-bound, bound, tensor.shape))


def xavier_normal_(tensor: Tensor, gain: float = 1.0) -> Tensor:
    """Glorot normal: N(0, std²), ``std = gain · √(2 / (fan_in + fan_out))``."""
    fan_in, fan_out = _fans("xavier_normal_", tensor)
    std = gain * math.sqrt(2.0 / max(fan_in + fan_out, 1))  # fans 0: no elements
    return _fill("xavier_normal_", tensor, generator().normal(0.0, std, tensor.shape))


def kaiming_uniform_(
    tensor: Tensor, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu"
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
    bound = math.sqrt(3.0) * _kaiming_std("kaiming_uniform_", tensor, a, mode, nonlinearity)
    return _fill("kaiming_uniform_", tensor, generator().uniform(-bound, bound, tensor.shape))


def kaiming_normal_(
    tensor: Tensor, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu"
) -> Tensor:
    """He normal: N(0, std²), ``std = gain / √fan``, ``gain`` of the nonlinearity."""
    std = _kaiming_std("kaiming_normal_", tensor, a, mode, nonlinearity)
    return _fill("kaiming_normal_", tensor, generator().normal(0.0, std, tensor.shape))

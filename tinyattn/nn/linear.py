"""``Linear``: the affine layer ``y = x Wᵀ + b`` with PyTorch's weight layout and init."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..functional import linear
from ..kernels.aligned import aligned_empty
from ..tensor import Tensor
from ..validation import check_int
from . import init
from .module import Module, Parameter, check_device, float_dtype


class Linear(Module):
    """Apply ``y = x Wᵀ + b`` to the last dim of the input.

    ``weight`` is ``(out_features, in_features)`` and ``bias`` ``(out_features,)``, as in
    ``torch.nn.Linear``, and both start as PyTorch's do: ``kaiming_uniform_(a=√5)`` on the
    weight, which is U(−1/√in, 1/√in), and the same U(−1/√in, 1/√in) on the bias.
    ``dtype`` (float32 by default, or float64) is the parameters' dtype; ``device`` can only be
    the CPU.

    Examples
    --------
    >>> import tinyattn as ta
    >>> layer = ta.nn.Linear(4, 3)
    >>> layer
    Linear(in_features=4, out_features=3, bias=True)
    >>> layer(ta.ones(2, 5, 4)).shape
    (2, 5, 3)
    """

    kernel_families = ("matmul",)

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 device: Any = None, dtype: Any = None):
        super().__init__()
        self.in_features = check_int("Linear", "in_features", in_features, 0)
        self.out_features = check_int("Linear", "out_features", out_features, 0)
        check_device("Linear", device)
        dtype = float_dtype("Linear", dtype)
        # on a cache line: the products of the backward read its rows in place
        self.weight = Parameter(aligned_empty((self.out_features, self.in_features), dtype))
        if bias:
            self.bias = Parameter(np.empty(self.out_features, dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw the weight and bias again from PyTorch's default distributions."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1.0 / math.sqrt(self.in_features) if self.in_features > 0 else 0.0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input: Tensor) -> Tensor:
        return linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")

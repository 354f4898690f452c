"""``RMSNorm``: root-mean-square normalisation with a learnable scale (no centring, no bias)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..dtypes import get_default_dtype
from ..functional.normalization import normalized_shape_tuple
from ..functional.rms_norm import rms_norm
from ..tensor import Tensor
from ..validation import check_number
from .module import Module, Parameter


class RMSNorm(Module):
    """``y = x / sqrt(mean(x²) + eps) ⊙ weight`` over the trailing dims, as
    ``torch.nn.RMSNorm``.

    ``weight`` starts at ones, of shape ``normalized_shape``; ``eps=None`` uses the machine
    epsilon of the input's dtype; ``elementwise_affine=False`` drops the weight.

    Examples
    --------
    >>> import tinyattn as ta
    >>> norm = ta.nn.RMSNorm(2)
    >>> norm
    RMSNorm((2,), eps=None, elementwise_affine=True)
    >>> [round(v, 4) for v in norm(ta.tensor([[3.0, 4.0]])).tolist()[0]]
    [0.8485, 1.1314]
    """

    def __init__(self, normalized_shape: int | Sequence[int], eps: float | None = None,
                 elementwise_affine: bool = True):
        super().__init__()
        self.normalized_shape = normalized_shape_tuple("RMSNorm", normalized_shape)
        if eps is not None and not check_number("RMSNorm", "eps", eps, low=0.0) > 0:
            raise ValueError(f"RMSNorm: eps must be None or a number > 0, got {eps!r}")
        self.eps = None if eps is None else float(eps)
        self.elementwise_affine = bool(elementwise_affine)
        self.weight = None
        if elementwise_affine:
            self.weight = Parameter(np.ones(self.normalized_shape, get_default_dtype()))

    def forward(self, input: Tensor) -> Tensor:
        return rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")

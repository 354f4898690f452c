"""``LayerNorm``: normalisation over the trailing dims with a learnable scale and shift."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..dtypes import get_default_dtype
from ..functional import layer_norm
from ..functional.normalization import normalized_shape_tuple
from ..tensor import Tensor
from ..validation import check_number
from .module import Module, Parameter


class LayerNorm(Module):
    """``y = (x − mean) / sqrt(var + eps) ⊙ weight + bias`` over the trailing dims.

    ``weight`` starts at ones and ``bias`` at zeros, both of shape ``normalized_shape``, as in
    ``torch.nn.LayerNorm``; ``elementwise_affine=False`` drops both, ``bias=False`` only the
    bias.

    Examples
    --------
    >>> import tinyattn as ta
    >>> norm = ta.nn.LayerNorm(4)
    >>> norm
    LayerNorm((4,), eps=1e-05, elementwise_affine=True)
    >>> [round(v, 3) for v in norm(ta.tensor([[1.0, 2.0, 3.0, 4.0]])).numpy()[0].tolist()]
    [-1.342, -0.447, 0.447, 1.342]
    """

    kernel_families = ("layer_norm",)

    def __init__(
        self, normalized_shape: int | Sequence[int], eps: float = 1e-5,
        elementwise_affine: bool = True, bias: bool = True,
    ):
        super().__init__()
        self.normalized_shape = normalized_shape_tuple("LayerNorm", normalized_shape)
        self.eps = check_number("LayerNorm", "eps", eps, low=0.0)
        if self.eps == 0.0:
            raise ValueError("LayerNorm: eps must be > 0")
        self.elementwise_affine = bool(elementwise_affine)
        self.weight = self.bias = None
        if elementwise_affine:
            self.weight = Parameter(np.ones(self.normalized_shape, get_default_dtype()))
            if bias:
                self.bias = Parameter(np.zeros(self.normalized_shape, get_default_dtype()))

    def forward(self, input: Tensor) -> Tensor:
        return layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")

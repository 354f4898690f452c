"""``rms_norm``: root-mean-square normalisation, as ``torch.nn.functional.rms_norm``, composed of
recorded ops (so its backward falls out of the engine)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..ops import mean, rsqrt
from ..tensor import Tensor
from .normalization import check_normalized, positive_eps


def rms_norm(
    input: Tensor, normalized_shape: int | Sequence[int], weight: Tensor | None = None,
    eps: float | None = None,
) -> Tensor:
    """Scale ``input`` by the reciprocal root mean square of its trailing dims.

    ``y = x / sqrt(mean(x²) + eps) ⊙ weight``, the mean taken over the trailing
    ``normalized_shape`` dims (no centring, no bias). ``eps=None`` is the machine epsilon of the
    input's dtype (``np.finfo(dtype).eps``), as in PyTorch. The backward, which the engine derives
    from the recorded ops, is ``dx = (g⊙w − x̂ · mean(g⊙w ⊙ x̂)) / rms`` with ``x̂ = x / rms``.

    Parameters
    ----------
    input : Tensor, shape (..., *normalized_shape), float
    normalized_shape : int or tuple of ints, the trailing dims to normalise over
    weight : Tensor of shape ``normalized_shape`` and the input's dtype, or None
    eps : float > 0 or None

    Examples
    --------
    >>> import tinyattn as ta
    >>> [round(v, 4) for v in ta.F.rms_norm(ta.tensor([[3.0, 4.0]]), 2).tolist()[0]]
    [0.8485, 1.1314]
    """
    shape = check_normalized("rms_norm", input, normalized_shape, weight=weight)
    eps = float(np.finfo(input.dtype).eps) if eps is None else positive_eps("rms_norm", eps)
    dims = tuple(range(-len(shape), 0))
    output = input * rsqrt(mean(input * input, dim=dims, keepdim=True) + eps)
    return output if weight is None else output * weight

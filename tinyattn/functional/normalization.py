"""``layer_norm``: checks its arguments and applies the :class:`LayerNorm` op
(:mod:`tinyattn.ops.normalization`), as ``torch.nn.functional.layer_norm``."""

from __future__ import annotations

from collections.abc import Sequence

from ..ops.normalization import LayerNorm
from ..ops.validate import (
    ShapeError,
    check_float,
    check_number,
    check_same_dtype,
    is_int,
)
from ..tensor import Tensor


def normalized_shape_tuple(op: str, normalized_shape: int | Sequence[int]) -> tuple[int, ...]:
    """``normalized_shape`` as a non-empty tuple of positive ints (an int means one dim)."""
    dims = (normalized_shape,) if is_int(normalized_shape) else tuple(normalized_shape)
    if not dims or any(not is_int(d) or d < 1 for d in dims):
        raise ValueError(f"{op}: normalized_shape must be a positive int or a non-empty tuple "
                         f"of positive ints, got {normalized_shape!r}")
    return tuple(int(d) for d in dims)


def layer_norm(
    input: Tensor, normalized_shape: int | Sequence[int], weight: Tensor | None = None,
    bias: Tensor | None = None, eps: float = 1e-5,
) -> Tensor:
    """Normalise ``input`` over its trailing ``normalized_shape`` dims, then scale and shift.

    ``y = (x − mean) / sqrt(var + eps) ⊙ weight + bias``, with the mean and the biased
    variance taken over the trailing dims. A constant row gives ``y = bias`` (finite).

    Parameters
    ----------
    input : Tensor, shape (..., *normalized_shape), float
    normalized_shape : int or tuple of ints, the trailing dims to normalise over
    weight, bias : Tensor of shape ``normalized_shape`` and the input's dtype, or None
    eps : float > 0, added to the variance

    Examples
    --------
    >>> import tinyattn as ta
    >>> ta.F.layer_norm(ta.tensor([[1.0, 3.0], [5.0, 5.0]]), 2, eps=1e-12).tolist()
    [[-1.0, 1.0], [0.0, 0.0]]
    """
    shape = normalized_shape_tuple("layer_norm", normalized_shape)
    check_float("layer_norm", "input", input)
    if input.ndim < len(shape) or input.shape[input.ndim - len(shape):] != shape:
        raise ShapeError(f"layer_norm: input of shape {input.shape} does not end in "
                           f"normalized_shape {shape}: expected shape (..., "
                           f"{', '.join(map(str, shape))})")
    params = []
    for label, param in (("weight", weight), ("bias", bias)):
        if param is None:
            continue
        check_float("layer_norm", label, param)
        if param.shape != shape:
            raise ShapeError(f"layer_norm: {label} must have shape normalized_shape {shape}, "
                               f"got {param.shape}")
        params.append(param)
    check_same_dtype("layer_norm", input=input, weight=weight, bias=bias)
    eps = check_number("layer_norm", "eps", eps, low=0.0)
    if eps == 0.0:
        raise ValueError("layer_norm: eps must be > 0")
    return LayerNorm.apply(input, *params, normalized_shape=shape, eps=eps,
                           has_weight=weight is not None, has_bias=bias is not None)

"""``layer_norm``: checks its arguments and applies the :class:`LayerNorm` op
(:mod:`tinyattn.ops.normalization`), as ``torch.nn.functional.layer_norm``."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..errors import ShapeError
from ..kernels import FLOAT_DTYPES
from ..ops.normalization import LayerNorm
from ..tensor import Tensor, check_float, check_kernel_dtype
from ..validation import check_number, check_same_dtype, is_int


def normalized_shape_tuple(op: str, normalized_shape: int | Sequence[int]) -> tuple[int, ...]:
    """``normalized_shape`` as a non-empty tuple of non-negative ints (an int means one dim;
    a 0 normalises over nothing, and the result is empty, as in PyTorch)."""
    dims = (normalized_shape,) if is_int(normalized_shape) else tuple(normalized_shape)
    if not dims or any(not is_int(d) or d < 0 for d in dims):
        raise ValueError(f"{op}: normalized_shape must be a non-negative int or a non-empty "
                         f"tuple of non-negative ints, got {normalized_shape!r}")
    return tuple(int(d) for d in dims)


def check_normalized(op: str, input: Tensor, normalized_shape: int | Sequence[int],
                     **params: Tensor | None) -> tuple[int, ...]:
    """Check a normalisation's tensors: ``input`` a float tensor ending in ``normalized_shape``,
    each given parameter (``weight``, ``bias``) a float tensor of that shape and of the
    input's dtype. Returns the shape as a tuple."""
    shape = normalized_shape_tuple(op, normalized_shape)
    check_float(op, "input", input)
    if input.ndim < len(shape) or input.shape[input.ndim - len(shape):] != shape:
        raise ShapeError(f"{op}: input of shape {input.shape} does not end in "
                         f"normalized_shape {shape}: expected shape (..., "
                         f"{', '.join(map(str, shape))})")
    for label, param in params.items():
        if param is None:
            continue
        check_float(op, label, param)
        if param.shape != shape:
            raise ShapeError(f"{op}: {label} must have shape normalized_shape {shape}, got "
                             f"{param.shape}")
    check_same_dtype(op, input=input, **params)
    return shape


def positive_eps(op: str, eps: float) -> float:
    """``eps`` as a float ``> 0``, else an error naming ``op``."""
    if check_number(op, "eps", eps, low=0.0) == 0.0:
        raise ValueError(f"{op}: eps must be > 0")
    return float(eps)


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
    if _plain_call(input, normalized_shape, weight, bias, eps):  # what a LayerNorm module passes
        shape = normalized_shape
    else:  # everything checked, and the first thing wrong named
        shape = check_normalized("layer_norm", input, normalized_shape, weight=weight,
                                 bias=bias)
        eps = positive_eps("layer_norm", eps)
        check_kernel_dtype("layer_norm", input)
    params = [param for param in (weight, bias) if param is not None]
    return LayerNorm.apply(input, *params, normalized_shape=shape, eps=eps,
                           has_weight=weight is not None, has_bias=bias is not None)


def _plain_call(input: Tensor, normalized_shape: object, weight: Tensor | None,
                bias: Tensor | None, eps: object) -> bool:
    """Whether the arguments of :func:`layer_norm` pass its checks as they are, found in a few
    comparisons: a float32 or float64 ``input`` ending in ``normalized_shape``, a tuple of ints;
    ``weight`` and ``bias`` None or tensors of that shape and dtype; ``eps`` a float in
    ``(0, inf)``. False sends the call through the full checks."""
    if not (isinstance(input, Tensor) and type(normalized_shape) is tuple and
            type(eps) is float and 0.0 < eps < math.inf and input.dtype in FLOAT_DTYPES):
        return False
    n = len(normalized_shape)
    if not n or input.shape[input.ndim - n:] != normalized_shape:
        return False
    for d in normalized_shape:
        if type(d) is not int:
            return False
    return _plain_param(weight, input, normalized_shape) and \
        _plain_param(bias, input, normalized_shape)


def _plain_param(param: Tensor | None, input: Tensor, shape: tuple[int, ...]) -> bool:
    """Whether a weight or bias of :func:`layer_norm` is None or a tensor of ``shape`` and
    ``input``'s dtype."""
    return param is None or (isinstance(param, Tensor) and param.dtype == input.dtype and
                             param.shape == shape)

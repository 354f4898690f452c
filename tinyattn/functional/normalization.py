"""``layer_norm``: normalise over the trailing dims, as ``torch.nn.functional.layer_norm``.

The trailing ``normalized_shape`` dims of the input are flattened into the features of one
row and the leading dims into rows, so the whole op is one call of the row kernels in
:mod:`tinyattn.kernels.layer_norm` forward and one backward.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..autograd import Context, Function
from ..tensor import Tensor


class LayerNorm(Function):
    """Per row of ``C`` features: ``x̂ = (x − mean) / sqrt(var + eps)``, ``y = x̂ ⊙ w + b``.

    Backward, with ``ĝ = g ⊙ w``: ``dx = (ĝ − mean(ĝ) − x̂ · mean(ĝ ⊙ x̂)) / sqrt(var + eps)``,
    ``dw = Σ_rows g ⊙ x̂``, ``db = Σ_rows g`` (``var`` is the biased variance of the row).
    """

    @staticmethod
    def forward(
        ctx: Context, x: np.ndarray, *params: np.ndarray, normalized_shape: tuple[int, ...],
        eps: float, has_weight: bool, has_bias: bool,
    ) -> np.ndarray:
        from ..kernels.layer_norm import layer_norm_forward  # numba loads on first use

        dtype = np.result_type(x, *params)
        features = math.prod(normalized_shape)
        rows = np.ascontiguousarray(x, dtype=dtype).reshape(-1, features)  # (N, C)
        flat = [p.astype(dtype, copy=False).reshape(features) for p in params]  # (C,) each
        weight = flat[0] if has_weight else None
        bias = flat[-1] if has_bias else None
        y, mean, rstd = layer_norm_forward(rows, weight, bias, eps)
        ctx.save_for_backward(rows, weight, mean, rstd, x.shape, normalized_shape, has_weight,
                              has_bias)
        return y.reshape(x.shape)

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray | None, ...]:
        from ..kernels.layer_norm import layer_norm_backward

        rows, weight, mean, rstd, x_shape, normalized_shape, has_weight, has_bias = ctx.saved
        if weight is None:  # w = 1; passing it makes the kernel return db as well
            weight = np.ones(rows.shape[1], dtype=rows.dtype)
        grad_rows = np.ascontiguousarray(grad, dtype=rows.dtype).reshape(rows.shape)  # (N, C)
        dx, dweight, dbias = layer_norm_backward(grad_rows, rows, weight, mean, rstd)
        grads = [dx.reshape(x_shape)]
        if has_weight:
            grads.append(dweight.reshape(normalized_shape))
        if has_bias:
            grads.append(dbias.reshape(normalized_shape))
        return tuple(grads)


def normalized_shape_tuple(op: str, normalized_shape: int | Sequence[int]) -> tuple[int, ...]:
    """``normalized_shape`` as a non-empty tuple of positive ints (an int means one dim)."""
    dims = (normalized_shape,) if isinstance(normalized_shape, (int, np.integer)) else \
        tuple(normalized_shape)
    if not dims or any(isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1
                       for d in dims):
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
    weight, bias : Tensor of shape ``normalized_shape``, or None (1 and 0)
    eps : float > 0, added to the variance

    Returns
    -------
    Tensor, shape of ``input``

    Examples
    --------
    >>> import tinyattn as ta
    >>> ta.F.layer_norm(ta.tensor([[1.0, 3.0], [5.0, 5.0]]), 2, eps=1e-12).tolist()
    [[-1.0, 1.0], [0.0, 0.0]]
    """
    shape = normalized_shape_tuple("layer_norm", normalized_shape)
    if not isinstance(input, Tensor) or input.dtype.kind != "f":
        raise TypeError(f"layer_norm: input must be a float Tensor, got {type(input).__name__} "
                        f"of dtype {getattr(input, 'dtype', None)}")
    if input.shape[input.ndim - len(shape):] != shape or input.ndim < len(shape):
        raise ValueError(f"layer_norm: input of shape {input.shape} does not end in "
                         f"normalized_shape {shape}: expected shape (..., "
                         f"{', '.join(map(str, shape))})")
    params = []
    for label, param in (("weight", weight), ("bias", bias)):
        if param is None:
            continue
        if not isinstance(param, Tensor) or param.dtype.kind != "f":
            raise TypeError(f"layer_norm: {label} must be a float Tensor or None, got "
                            f"{type(param).__name__}")
        if param.shape != shape:
            raise ValueError(f"layer_norm: {label} must have shape normalized_shape {shape}, "
                             f"got {param.shape}")
        params.append(param)
    if isinstance(eps, bool) or not isinstance(eps, (int, float, np.number)) or not eps > 0:
        raise ValueError(f"layer_norm: eps must be a number > 0, got {eps!r}")
    return LayerNorm.apply(input, *params, normalized_shape=shape, eps=float(eps),
                           has_weight=weight is not None, has_bias=bias is not None)

"""``linear``: checks the arguments of ``y = x Wᵀ + b`` and applies the :class:`Linear` op
(:mod:`tinyattn.ops.linear`)."""

from __future__ import annotations

from ..errors import DTypeError, ShapeError
from ..kernels import FLOAT_DTYPES
from ..ops.linear import Linear
from ..tensor import Tensor, check_kernel_dtype, check_tensor
from ..validation import check_same_dtype


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """Apply ``y = input @ weight.T + bias`` to the last dim of ``input``.

    Parameters
    ----------
    input : Tensor, shape (..., in_features)
    weight : Tensor, shape (out_features, in_features), the same dtype
    bias : Tensor, shape (out_features,), the same dtype, or None

    Returns
    -------
    Tensor, shape (..., out_features)

    Examples
    --------
    >>> import tinyattn as ta
    >>> x = ta.ones(2, 3)
    >>> w = ta.tensor([[1.0, 2.0, 3.0]])
    >>> ta.F.linear(x, w, ta.tensor([0.5])).tolist()
    [[6.5], [6.5]]
    """
    if isinstance(input, Tensor) and isinstance(weight, Tensor) and \
            input.dtype == weight.dtype and input.dtype in FLOAT_DTYPES and weight.ndim == 2 \
            and input.ndim and input.shape[-1] == weight.shape[1]:  # what a Linear passes
        if bias is None:
            return Linear.apply(input, weight)
        if isinstance(bias, Tensor) and bias.dtype == input.dtype and \
                bias.shape == (weight.shape[0],):
            return Linear.apply(input, weight, bias)
    # everything checked, and the first thing wrong named
    for label, value in (("input", input), ("weight", weight), ("bias", bias)):
        if value is not None:
            check_tensor("linear", label, value)
    check_same_dtype("linear", input=input, weight=weight, bias=bias)
    if input.dtype.kind == "b":
        raise DTypeError("linear: bool tensors are not supported")
    if weight.ndim != 2:
        raise ShapeError(
            f"linear: weight must have shape (out_features, in_features), got {weight.shape}"
        )
    if input.ndim == 0 or input.shape[-1] != weight.shape[1]:
        raise ShapeError(
            f"linear: input of shape {input.shape} does not match weight of shape "
            f"{weight.shape}: expected input.shape[-1] == in_features == {weight.shape[1]}"
        )
    check_kernel_dtype("linear", input)
    if bias is None:
        return Linear.apply(input, weight)
    if bias.shape != (weight.shape[0],):
        raise ShapeError(
            f"linear: bias must have shape (out_features,) = ({weight.shape[0]},) to match "
            f"weight of shape {weight.shape}, got {bias.shape}"
        )
    return Linear.apply(input, weight, bias)

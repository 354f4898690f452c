"""``normalize``: dividing by the ``p``-norm along a dim, as ``torch.nn.functional.normalize``,
composed of recorded ops (so its backward falls out of the engine)."""

from __future__ import annotations

from ..ops import clamp, norm
from ..tensor import Tensor, check_tensor
from ..validation import check_number


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Tensor:
    """``input / max(‖input‖_p, eps)``, the norm taken along ``dim`` and expanded back.

    ``eps`` keeps a zero vector from being divided by zero: it stays zero, with the gradient
    ``g / eps`` (the clamped norm passes no gradient), as in PyTorch.

    Examples
    --------
    >>> import tinyattn as ta
    >>> ta.F.normalize(ta.tensor([[3.0, 4.0], [0.0, 0.0]])).tolist()
    [[0.6000000238418579, 0.800000011920929], [0.0, 0.0]]
    """
    check_tensor("normalize", "input", input)
    eps = check_number("normalize", "eps", eps, low=0.0)
    denominator = clamp(norm(input, p, dim, keepdim=True), min=eps)
    return input / denominator.expand_as(input)

"""``Flatten`` and ``Unflatten``: reshaping layers, as ``torch.nn.Flatten`` and
``torch.nn.Unflatten``."""

from __future__ import annotations

from collections.abc import Sequence

from ..ops.shape import flatten, unflatten
from ..tensor import Tensor
from ..validation import check_int
from .module import Module


class Flatten(Module):
    """Merge dims ``start_dim..end_dim`` into one (by default every dim but the batch dim).

    Examples
    --------
    >>> import tinyattn as ta
    >>> ta.nn.Flatten()(ta.ones(2, 3, 4)).shape
    (2, 12)
    >>> ta.nn.Flatten(0, 1)(ta.ones(2, 3, 4)).shape
    (6, 4)
    """

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim = check_int("Flatten", "start_dim", start_dim)
        self.end_dim = check_int("Flatten", "end_dim", end_dim)

    def forward(self, input: Tensor) -> Tensor:
        return flatten(input, self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Split dim ``dim`` into ``unflattened_size`` (one entry may be -1).

    Examples
    --------
    >>> import tinyattn as ta
    >>> ta.nn.Unflatten(1, (3, 4))(ta.ones(2, 12)).shape
    (2, 3, 4)
    """

    def __init__(self, dim: int, unflattened_size: Sequence[int]) -> None:
        super().__init__()
        self.dim = check_int("Unflatten", "dim", dim)
        if isinstance(unflattened_size, (str, bytes)) or not isinstance(unflattened_size,
                                                                          Sequence):
            raise TypeError(f"Unflatten: unflattened_size must be a tuple or list of ints, got "
                            f"{unflattened_size!r}")
        self.unflattened_size = tuple(check_int("Unflatten", "unflattened_size", n)
                                      for n in unflattened_size)

    def forward(self, input: Tensor) -> Tensor:
        return unflatten(input, self.dim, self.unflattened_size)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"

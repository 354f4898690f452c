"""``Embedding``: a trainable lookup table of vectors, one row per index."""

from __future__ import annotations

from typing import Any

from ..functional import embedding
from ..functional.sparse import normalize_padding_idx
from ..kernels.aligned import aligned_empty
from ..tensor import Tensor
from ..validation import check_int
from . import init
from .module import Module, Parameter, check_device, float_dtype


class Embedding(Module):
    """A table of ``num_embeddings`` vectors of size ``embedding_dim``, looked up by index.

    ``weight`` is ``(num_embeddings, embedding_dim)``, drawn from N(0, 1) as in
    ``torch.nn.Embedding``; the ``padding_idx`` row (negative values count from the end)
    starts at zero and never receives a gradient. ``dtype`` (float32 by default, or float64)
    is the table's dtype; ``device`` can only be the CPU.

    Examples
    --------
    >>> import tinyattn as ta
    >>> table = ta.nn.Embedding(10, 4, padding_idx=0)
    >>> table(ta.tensor([[0, 3, 3]])).shape
    (1, 3, 4)
    >>> table.weight.numpy()[0].tolist()
    [0.0, 0.0, 0.0, 0.0]
    """

    kernel_families = ("embedding",)

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None,
                 device: Any = None, dtype: Any = None):
        super().__init__()
        self.num_embeddings = check_int("Embedding", "num_embeddings", num_embeddings, 1)
        self.embedding_dim = check_int("Embedding", "embedding_dim", embedding_dim, 1)
        self.padding_idx = normalize_padding_idx("Embedding", padding_idx, self.num_embeddings)
        check_device("Embedding", device)
        # on a cache line: a tied output layer's products read its rows in place
        self.weight = Parameter(aligned_empty((self.num_embeddings, self.embedding_dim),
                                              float_dtype("Embedding", dtype)))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw the table from N(0, 1) again, with the padding row zeroed."""
        init.normal_(self.weight)
        if self.padding_idx is not None:
            self.weight.numpy()[self.padding_idx] = 0.0

    def forward(self, input: Tensor) -> Tensor:
        return embedding(input, self.weight, self.padding_idx)

    def extra_repr(self) -> str:
        text = f"{self.num_embeddings}, {self.embedding_dim}"
        return text if self.padding_idx is None else text + f", padding_idx={self.padding_idx}"

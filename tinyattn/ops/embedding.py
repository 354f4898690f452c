"""``Embedding``: a row lookup into a weight table, on the race-free numba kernels of
:mod:`tinyattn.kernels.embedding`.

The forward gathers rows; the backward scatter-adds the upstream gradient into the rows that
were read (a row read twice receives the sum).
"""

from __future__ import annotations

import numpy as np

from ..autograd import Context, Function
from ..kernels.embedding import embedding_backward, embedding_forward
from ..tensor import Tensor
from .index import IndexPut, parse_index


class Embedding(Function):
    """``y[..., :] = W[idx[...], :]``; ``dW[r] = Σ_{p: idx[p] = r} g[p]``.

    The padding row gets no gradient: ``dW[padding_idx] = 0``.
    """

    @staticmethod
    def forward(ctx: Context, weight: np.ndarray, indices: np.ndarray,
                padding_idx: int | None) -> np.ndarray:
        ctx.save_for_backward(indices, weight.shape[0], padding_idx)
        return embedding_forward(weight, indices)

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray]:
        indices, num_embeddings, padding_idx = ctx.saved
        return (embedding_backward(np.ascontiguousarray(grad), indices, num_embeddings,
                                   padding_idx),)

    @staticmethod
    def differentiable_backward(ctx: Context, grad: Tensor) -> tuple[Tensor]:
        (weight,) = ctx.inputs
        indices, _, padding_idx = ctx.saved
        if padding_idx is not None:
            grad = grad.masked_fill(Tensor(indices == padding_idx).unsqueeze(-1), 0.0)
        return (IndexPut.apply(Tensor(np.zeros(weight.shape, weight.dtype)), grad,
                               index=parse_index(2, (Tensor(indices),)), accumulate=True),)

"""``Embedding``: a row lookup into a weight table, on the race-free numba kernels of
:mod:`tinyattn.kernels.embedding`.

The forward gathers rows; the backward scatter-adds the upstream gradient into the rows that
were read (a row read twice receives the sum).
"""

from __future__ import annotations

import numpy as np

from ..autograd import Context, Function, is_grad_enabled
from ..creation import zeros
from ..kernels.embedding import embedding_backward, embedding_forward
from ..tensor import Tensor, from_numpy
from .index import index_put


class Embedding(Function):
    """``y[..., :] = W[idx[...], :]``; ``dW[r] = Σ_{p: idx[p] = r} g[p]`` (a scatter-add).

    The padding row gets no gradient: ``dW[padding_idx] = 0``.
    """

    @staticmethod
    def forward(ctx: Context, weight: Tensor, indices: np.ndarray,
                padding_idx: int | None) -> Tensor:
        ctx.indices = indices  # int64 (checked in range by F.embedding), never differentiated
        ctx.num_embeddings, ctx.padding_idx = weight.shape[0], padding_idx
        return from_numpy(embedding_forward(weight.numpy(), indices))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> tuple[Tensor, None, None]:
        if not is_grad_enabled():  # fast path: the race-free scatter-add kernel
            return from_numpy(embedding_backward(np.ascontiguousarray(grad.numpy()),
                                                 ctx.indices, ctx.num_embeddings,
                                                 ctx.padding_idx)), None, None
        indices = from_numpy(ctx.indices)
        if ctx.padding_idx is not None:
            grad = grad.masked_fill((indices == ctx.padding_idx).unsqueeze(-1), 0.0)
        table = zeros((ctx.num_embeddings, grad.shape[-1]), dtype=grad.dtype)
        return index_put(table, (indices,), grad, accumulate=True), None, None

    @staticmethod
    def formula(node: Context, slot: int, g: str, x: list[str], out: str) -> str:
        return f"scatter_add_rows({g}, idx)"

"""``embedding``: a row lookup into a weight table, as ``torch.nn.functional.embedding``.

The forward gathers rows; the backward scatter-adds the upstream gradient into the rows that
were read (a row read twice receives the sum), on the race-free kernels of
:mod:`tinyattn.kernels.embedding`. Indices are checked here, before any kernel runs, because
numba does not bounds-check.
"""

from __future__ import annotations

import numpy as np

from ..autograd import Context, Function
from ..tensor import Tensor


class Embedding(Function):
    """``y[..., :] = W[idx[...], :]``; ``dW[r] = Σ_{p: idx[p] = r} g[p]``.

    The padding row gets no gradient: ``dW[padding_idx] = 0``.
    """

    @staticmethod
    def forward(
        ctx: Context, weight: np.ndarray, indices: np.ndarray, padding_idx: int | None
    ) -> np.ndarray:
        from ..kernels.embedding import embedding_forward  # numba loads on first use

        ctx.save_for_backward(indices, weight.shape[0], padding_idx)
        return embedding_forward(weight, indices)

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray]:
        from ..kernels.embedding import embedding_backward

        indices, num_embeddings, padding_idx = ctx.saved
        return (embedding_backward(grad, indices, num_embeddings, padding_idx),)


def normalize_padding_idx(op: str, padding_idx: int | None, num_embeddings: int) -> int | None:
    """``padding_idx`` in ``[0, num_embeddings)`` (a negative one counts from the end), or None."""
    if padding_idx is None:
        return None
    if isinstance(padding_idx, bool) or not isinstance(padding_idx, (int, np.integer)):
        raise TypeError(f"{op}: padding_idx must be an int or None, got "
                        f"{type(padding_idx).__name__}")
    if not -num_embeddings <= padding_idx < num_embeddings:
        raise ValueError(f"{op}: padding_idx {padding_idx} is out of range for "
                         f"{num_embeddings} embeddings (expected -{num_embeddings} <= "
                         f"padding_idx < {num_embeddings})")
    return int(padding_idx) % num_embeddings


def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None) -> Tensor:
    """Look up the rows of ``weight`` named by the integer tensor ``input``.

    Parameters
    ----------
    input : Tensor of integers, any shape, each in ``[0, num_embeddings)``
    weight : Tensor, shape (num_embeddings, embedding_dim), float
    padding_idx : int or None
        The row that receives no gradient (negative values count from the end).

    Returns
    -------
    Tensor, shape ``input.shape + (embedding_dim,)``

    Examples
    --------
    >>> import tinyattn as ta
    >>> table = ta.tensor([[0.0, 0.0], [1.0, 2.0], [3.0, 4.0]])
    >>> ta.F.embedding(ta.tensor([[2, 1]]), table).tolist()
    [[[3.0, 4.0], [1.0, 2.0]]]
    """
    if not isinstance(weight, Tensor) or weight.dtype.kind != "f":
        raise TypeError(f"embedding: weight must be a float Tensor, got "
                        f"{type(weight).__name__} of dtype {getattr(weight, 'dtype', None)}")
    if weight.ndim != 2:
        raise ValueError(f"embedding: weight must have shape (num_embeddings, embedding_dim), "
                         f"got {weight.shape}")
    indices = input.data if isinstance(input, Tensor) else np.asarray(input)
    if indices.dtype.kind not in "iu":
        raise TypeError(f"embedding: input must hold integer indices, got dtype {indices.dtype}")
    num_embeddings = weight.shape[0]
    bad = (indices < 0) | (indices >= num_embeddings)
    if bad.any():
        raise IndexError(f"embedding: index {int(indices[bad][0])} is out of range for a table "
                         f"of {num_embeddings} embeddings (expected 0 <= index < "
                         f"{num_embeddings})")
    padding_idx = normalize_padding_idx("embedding", padding_idx, num_embeddings)
    return Embedding.apply(weight, indices=indices, padding_idx=padding_idx)
